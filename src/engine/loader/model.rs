//! The workflow model field by field: the workflow, inputs, output, nodes, actions.

use super::*;

/// The workflow, its inputs and its output.
impl Decoder {
    /// Decodes the workflow, then runs `check` on it when it is complete: when decoding
    /// found nothing wrong, or only unknown keys.
    pub(super) fn workflow(
        mut self,
        root: &Value,
        default_name: &str,
        check: Check<'_>,
    ) -> Result<WorkflowDef, Problems> {
        let Some(map) = self.fields("", root, TOP_KEYS) else {
            return Err(Problems(self.problems));
        };
        let name = self.name(map, default_name);
        let max_parallel = self.opt(map, "", "max_parallel", |d, p, v| {
            d.integer(p, v, 1, i64::from(u32::MAX))
        });
        let def = WorkflowDef {
            name,
            description: self.or_default(map, "", "description", Self::string),
            prompt: self.opt(map, "", "prompt", Self::string),
            expose_as_tool: self.or_default(map, "", "expose_as_tool", Self::boolean),
            task_support: self.or_default(map, "", "task_support", Self::choice),
            ask_before_task: self.or_default(map, "", "ask_before_task", Self::boolean),
            result: self.or_default(map, "", "result", Self::choice),
            max_parallel: max_parallel.map_or(DEFAULT_MAX_PARALLEL, |n| n as usize),
            timeout: self.opt(map, "", "timeout", Self::timeout),
            inputs: self.inputs(map.get("inputs")),
            nodes: self.nodes(map.get("nodes")),
            output: self.output(map.get("output")),
            locations: Locations::default(),
        };
        let complete = self.problems.len() == self.unknown_keys;
        let def = WorkflowDef {
            locations: self.locations,
            ..def
        };
        let mut problems = self.problems;
        if complete && let Err(found) = check(&def) {
            if problems.is_empty() {
                return Err(found);
            }
            problems.extend(found.0);
        }
        if problems.is_empty() {
            return Ok(def);
        }
        // In file order; inline problems keep the order of decoding, then checking.
        problems.sort_by_key(|problem| (problem.location.line, problem.location.column));
        Err(Problems(problems))
    }

    pub(super) fn name(&mut self, map: &Map<String, Value>, default_name: &str) -> String {
        let Some(value) = map.get("name") else {
            if !is_id(default_name) {
                let message = format!(
                    "the file name makes the workflow name `{default_name}`, which does not \
                     match {ID_RULE}; set `name`"
                );
                self.report("", message);
            }
            return default_name.to_owned();
        };
        let name = self.string("name", value).unwrap_or_default();
        if value.is_string() && !is_id(&name) {
            self.report(
                "name",
                format!("invalid name `{name}`: must match {ID_RULE}"),
            );
        }
        name
    }

    pub(super) fn inputs(&mut self, value: Option<&Value>) -> IndexMap<String, InputDef> {
        let Some(map) = value.and_then(|value| self.table("inputs", value)) else {
            return IndexMap::new();
        };
        let mut inputs = IndexMap::new();
        for (name, value) in map {
            let path = format!("inputs.{name}");
            if !is_identifier(name) {
                let message = format!(
                    "invalid input name `{name}`: use letters, digits and `_`, \
                     not starting with a digit"
                );
                self.report(&path, message);
            }
            if let Some(input) = self.input_def(&path, value) {
                inputs.insert(name.clone(), input);
            }
        }
        inputs
    }

    pub(super) fn input_def(&mut self, path: &str, value: &Value) -> Option<InputDef> {
        let map = self.fields(path, value, INPUT_KEYS)?;
        let kind = self.req(map, path, "type", |d, p, v| d.choice(p, v).map(Some));
        Some(InputDef {
            kind: kind.unwrap_or(ValueType::String),
            description: self.or_default(map, path, "description", Self::string),
            required: self.or_default(map, path, "required", Self::boolean),
            default: self.opt(map, path, "default", Self::any),
            choices: self.opt(map, path, "enum", Self::choices),
        })
    }

    pub(super) fn choices(&mut self, path: &str, value: &Value) -> Option<Vec<Value>> {
        match value {
            Value::Array(items) if items.is_empty() => {
                self.report(path, "`enum` needs at least one value");
                None
            }
            Value::Array(items) => Some(items.clone()),
            other => self.wrong_type(path, "an array", other),
        }
    }

    pub(super) fn output(&mut self, value: Option<&Value>) -> IndexMap<String, String> {
        let Some(map) = value.and_then(|value| self.table("output", value)) else {
            return IndexMap::new();
        };
        map.iter()
            .filter_map(|(name, value)| {
                let expr = self.string(&format!("output.{name}"), value)?;
                Some((name.clone(), expr))
            })
            .collect()
    }
}

/// Nodes.
impl Decoder {
    pub(super) fn nodes(&mut self, value: Option<&Value>) -> IndexMap<String, NodeDef> {
        let Some(value) = value else {
            self.report(
                "",
                "missing required key `nodes`: a workflow needs at least one node",
            );
            return IndexMap::new();
        };
        let Some(map) = self.table("nodes", value) else {
            return IndexMap::new();
        };
        if map.is_empty() {
            self.report("nodes", "a workflow needs at least one node");
        }
        let mut nodes = IndexMap::new();
        for (id, value) in map {
            if !is_id(id) {
                self.report(
                    &format!("nodes.{id}"),
                    format!("invalid node id `{id}`: must match {ID_RULE}"),
                );
            }
            if let Some(node) = self.node(id, value) {
                nodes.insert(id.clone(), node);
            }
        }
        nodes
    }

    pub(super) fn node(&mut self, id: &str, value: &Value) -> Option<NodeDef> {
        let path = format!("nodes.{id}");
        let map = self.fields(&path, value, NODE_KEYS)?;
        let p = path.as_str();
        Some(NodeDef {
            id: id.to_owned(),
            description: self.or_default(map, p, "description", Self::string),
            action: self.action(p, map),
            needs: self.or_default(map, p, "needs", Self::strings),
            when: self.opt(map, p, "when", Self::string),
            trigger: self.or_default(map, p, "trigger", Self::choice),
            on_failure: self.or_default(map, p, "on_failure", Self::choice),
            timeout: self.opt(map, p, "timeout", Self::timeout),
            for_each: self.opt(map, p, "for_each", Self::string),
            retry: self.or_default(map, p, "retry", Self::retry),
            repeat: self.opt(map, p, "repeat", Self::repeat),
            phase: self.opt(map, p, "phase", Self::phase),
        })
    }

    pub(super) fn phase(&mut self, path: &str, value: &Value) -> Option<String> {
        let name = self.string(path, value)?;
        if !is_id(&name) {
            self.report(
                path,
                format!("invalid phase `{name}`: must match {ID_RULE}"),
            );
        }
        Some(name)
    }

    pub(super) fn retry(&mut self, path: &str, value: &Value) -> Option<RetryPolicy> {
        let map = self.fields(path, value, RETRY_KEYS)?;
        let defaults = RetryPolicy::default();
        let attempts = self.opt(map, path, "max_attempts", |d, p, v| d.integer(p, v, 1, 100));
        let retry = RetryPolicy {
            max_attempts: attempts.map_or(defaults.max_attempts, |n| n as u32),
            initial_delay: self
                .opt(map, path, "initial_delay", Self::duration)
                .unwrap_or(defaults.initial_delay),
            max_delay: self
                .opt(map, path, "max_delay", Self::duration)
                .unwrap_or(defaults.max_delay),
            factor: self
                .opt(map, path, "factor", Self::factor)
                .unwrap_or(defaults.factor),
            jitter: self
                .opt(map, path, "jitter", Self::boolean)
                .unwrap_or(defaults.jitter),
        };
        if retry.max_delay < retry.initial_delay {
            let message = format!(
                "max_delay ({}) must be at least initial_delay ({})",
                format_duration(retry.max_delay),
                format_duration(retry.initial_delay)
            );
            self.report(&join(path, "max_delay"), message);
        }
        Some(retry)
    }

    /// `repeat = { until = "expr", max = N, delay = "10s" }`: `until` and `max` required.
    pub(super) fn repeat(&mut self, path: &str, value: &Value) -> Option<Repeat> {
        let map = self.fields(path, value, REPEAT_KEYS)?;
        let until = self.req(map, path, "until", Self::string);
        let max = self.req(map, path, "max", |d, p, v| d.integer(p, v, 1, MAX_REPEAT));
        let delay = self.opt(map, path, "delay", Self::duration);
        Some(Repeat {
            until,
            max: max as u32,
            delay: delay.unwrap_or_default(),
        })
    }

    pub(super) fn factor(&mut self, path: &str, value: &Value) -> Option<f32> {
        let Some(factor) = value.as_f64() else {
            return self.wrong_type(path, "a number", value);
        };
        if !(1.0..=1000.0).contains(&factor) {
            self.report(
                path,
                format!("must be between 1.0 and 1000.0, got {factor}"),
            );
            return None;
        }
        Some(factor as f32)
    }
}

/// Actions.
impl Decoder {
    pub(super) fn action(&mut self, path: &str, map: &Map<String, Value>) -> ActionDef {
        let present: Vec<&str> = ActionDef::NAMES
            .iter()
            .copied()
            .filter(|name| map.contains_key(*name))
            .collect();
        if map.contains_key("args") && !present.contains(&"tool") {
            self.report(
                &join(path, "args"),
                "`args` goes with `tool`, and this node has no `tool`",
            );
        }
        match present.as_slice() {
            [kind] => return self.action_of(path, kind, map),
            [] => {
                let names = ActionDef::NAMES.iter().map(|n| format!("`{n}`"));
                let message = format!(
                    "the node has no action: give exactly one of {}",
                    names.collect::<Vec<_>>().join(", ")
                );
                self.report(path, message);
            }
            several => {
                let names: Vec<String> = several.iter().map(|n| format!("`{n}`")).collect();
                let message = format!(
                    "the node has more than one action ({}): give exactly one",
                    names.join(", ")
                );
                self.report(path, message);
            }
        }
        ActionDef::Render {
            template: String::new(),
        }
    }

    pub(super) fn action_of(
        &mut self,
        path: &str,
        kind: &str,
        map: &Map<String, Value>,
    ) -> ActionDef {
        let (at, value) = (join(path, kind), &map[kind]);
        let action = match kind {
            "tool" => self.tool(path, map),
            "render" => self
                .string(&at, value)
                .map(|template| ActionDef::Render { template }),
            "write_file" => self.write_file(&at, value),
            "wait" => match value.as_str() {
                Some(text) if crate::engine::template::is_template(text) => {
                    Some(ActionDef::WaitFor {
                        duration: text.to_owned(),
                    })
                }
                _ => self
                    .duration(&at, value)
                    .map(|duration| ActionDef::Wait { duration }),
            },
            "input" => self.input_action(&at, value),
            "sample" => self.sample(&at, value),
            "value" => self.value_action(&at, value),
            "list_dir" => self
                .string(&at, value)
                .map(|path| ActionDef::ListDir { path }),
            "workflow" => self.workflow_action(&at, value),
            "command" => self.command(&at, value),
            "history" => self.history(&at, value),
            _ => self.read_file(&at, value),
        };
        action.unwrap_or(ActionDef::Render {
            template: String::new(),
        })
    }

    pub(super) fn tool(&mut self, node: &str, map: &Map<String, Value>) -> Option<ActionDef> {
        let path = join(node, "tool");
        let name = self.string(&path, &map["tool"])?;
        if name.is_empty() {
            self.report(&path, "the tool name is empty");
        }
        let args = match map.get("args") {
            Some(args) => self.table(&join(node, "args"), args)?.clone(),
            None => Map::new(),
        };
        Some(ActionDef::Tool {
            name,
            args: Value::Object(args),
        })
    }

    pub(super) fn write_file(&mut self, path: &str, value: &Value) -> Option<ActionDef> {
        let map = self.fields(path, value, WRITE_FILE_KEYS)?;
        Some(ActionDef::WriteFile {
            path: self.req(map, path, "path", Self::string),
            content: self.req(map, path, "content", Self::string),
            overwrite: self.or_default(map, path, "overwrite", Self::boolean),
        })
    }

    pub(super) fn input_action(&mut self, path: &str, value: &Value) -> Option<ActionDef> {
        let map = self.fields(path, value, INPUT_ACTION_KEYS)?;
        let schema = self.opt(map, path, "schema", Self::schema);
        Some(ActionDef::Input {
            message: self.req(map, path, "message", Self::string),
            schema: schema
                .unwrap_or_else(|| serde_json::json!({ "type": "object", "properties": {} })),
            default: self.opt(map, path, "default", Self::any),
        })
    }

    /// `value = "expr"`, or `value = { expr = "...", schema = {...} }`.
    pub(super) fn value_action(&mut self, path: &str, value: &Value) -> Option<ActionDef> {
        if let Value::String(expr) = value {
            let expr = expr.clone();
            return Some(ActionDef::Value { expr, schema: None });
        }
        let map = self.fields(path, value, VALUE_KEYS)?;
        Some(ActionDef::Value {
            expr: self.req(map, path, "expr", Self::string),
            schema: self.opt(map, path, "schema", Self::data_schema),
        })
    }

    /// A schema of structured data (`engine/schema.rs`), every unsupported keyword named.
    pub(super) fn data_schema(&mut self, path: &str, value: &Value) -> Option<Value> {
        let problems = crate::schema::schema_problems(value);
        for problem in &problems {
            self.report(path, problem.clone());
        }
        problems.is_empty().then(|| value.clone())
    }

    pub(super) fn read_file(&mut self, path: &str, value: &Value) -> Option<ActionDef> {
        if let Value::String(file) = value {
            let path = file.clone();
            return Some(ActionDef::ReadFile {
                path,
                max_bytes: DEFAULT_READ_BYTES,
            });
        }
        let map = self.fields(path, value, READ_FILE_KEYS)?;
        let max_bytes = self.opt(map, path, "max_bytes", |d, p, v| {
            d.integer(p, v, 1, MAX_READ_BYTES as i64)
        });
        Some(ActionDef::ReadFile {
            path: self.req(map, path, "path", Self::string),
            max_bytes: max_bytes.map_or(DEFAULT_READ_BYTES, |n| n as u64),
        })
    }

    /// `workflow = "name"`, or `workflow = { name = "name", inputs = { ... } }`. The name
    /// is fixed, never a template, so that the workflows that call each other are known
    /// when the files load.
    pub(super) fn workflow_action(&mut self, path: &str, value: &Value) -> Option<ActionDef> {
        let (name, inputs) = match value {
            Value::String(name) => (name.clone(), Map::new()),
            _ => {
                let map = self.fields(path, value, WORKFLOW_KEYS)?;
                let name = self.req(map, path, "name", Self::string);
                let inputs = match map.get("inputs") {
                    Some(inputs) => self.table(&join(path, "inputs"), inputs)?.clone(),
                    None => Map::new(),
                };
                (name, inputs)
            }
        };
        let at = match value.is_string() {
            true => path.to_owned(),
            false => join(path, "name"),
        };
        if crate::engine::template::is_template(&name) {
            self.report(
                &at,
                "the workflow's name is fixed, not a template: the workflows that call \
                 each other are checked when the files load",
            );
        } else if !name.is_empty() && !is_id(&name) {
            self.report(
                &at,
                format!("invalid workflow name `{name}`: must match {ID_RULE}"),
            );
        }
        Some(ActionDef::Workflow {
            name,
            inputs: Value::Object(inputs),
        })
    }

    /// `command = { name = "build", args = { target = "{{ inputs.target }}" } }`: a
    /// command of the operator's commands file, by name; whether the file names it is
    /// known when the node runs (the file is reloaded while the server runs).
    pub(super) fn command(&mut self, path: &str, value: &Value) -> Option<ActionDef> {
        let map = self.fields(path, value, COMMAND_KEYS)?;
        let name = self.req(map, path, "name", Self::string);
        if map.get("name").is_some_and(Value::is_string) && !is_id(&name) {
            let message = format!("invalid command name `{name}`: must match {ID_RULE}");
            self.report(&join(path, "name"), message);
        }
        let args = match map.get("args") {
            Some(args) => self.table(&join(path, "args"), args)?.clone(),
            None => Map::new(),
        };
        Some(ActionDef::Command {
            name,
            args: Value::Object(args),
        })
    }

    pub(super) fn sample(&mut self, path: &str, value: &Value) -> Option<ActionDef> {
        let map = self.fields(path, value, SAMPLE_KEYS)?;
        let max_tokens = self.opt(map, path, "max_tokens", |d, p, v| {
            d.integer(p, v, 1, i64::from(u32::MAX))
        });
        Some(ActionDef::Sample {
            prompt: self.req(map, path, "prompt", Self::string),
            system: self.opt(map, path, "system", Self::string),
            max_tokens: max_tokens.map(|n| n as u32),
            person: self.opt(map, path, "person", Self::boolean).unwrap_or(true),
        })
    }
}

/// The `history` action.
impl Decoder {
    /// `history = { workflow, limit = 20, status?, where? }`.
    pub(super) fn history(&mut self, path: &str, value: &Value) -> Option<ActionDef> {
        let map = self.fields(path, value, HISTORY_KEYS)?;
        let workflow = self.req(map, path, "workflow", Self::history_workflow);
        let limit = self.opt(map, path, "limit", Self::history_limit);
        Some(ActionDef::History {
            workflow,
            limit: limit.unwrap_or(HistoryLimit::Default),
            status: self.or_default(map, path, "status", Self::run_statuses),
            filter: self.opt(map, path, "where", Self::string),
        })
    }

    /// A workflow's name, or a template that gives one when the node runs.
    pub(super) fn history_workflow(&mut self, path: &str, value: &Value) -> Option<String> {
        let name = self.string(path, value)?;
        if !crate::engine::template::is_template(&name) && !is_id(&name) {
            let message = format!("invalid workflow name `{name}`: must match {ID_RULE}");
            self.report(path, message);
        }
        Some(name)
    }

    /// At least one run: a number (the operator's cap is checked by validation), or a
    /// template read when the node runs.
    pub(super) fn history_limit(&mut self, path: &str, value: &Value) -> Option<HistoryLimit> {
        match value {
            Value::String(text) if crate::engine::template::is_template(text) => {
                Some(HistoryLimit::Template(text.clone()))
            }
            Value::String(_) => self.wrong_type(path, "an integer, or a template", value),
            _ => {
                let n = self.integer(path, value, 1, i64::from(u32::MAX))?;
                Some(HistoryLimit::Fixed(n as u32))
            }
        }
    }

    /// One run status, or a list of them, each named once.
    pub(super) fn run_statuses(&mut self, path: &str, value: &Value) -> Option<Vec<RunStatus>> {
        let items = match value {
            Value::String(_) => return Some(vec![self.choice(path, value)?]),
            Value::Array(items) if items.is_empty() => {
                let message = format!(
                    "`status` needs at least one of {}; leave it out for runs of any status",
                    list(RunStatus::NAMES)
                );
                self.report(path, message);
                return None;
            }
            Value::Array(items) => items,
            other => return self.wrong_type(path, "a string or an array of strings", other),
        };
        let mut statuses = Vec::with_capacity(items.len());
        let mut complete = true;
        for (i, item) in items.iter().enumerate() {
            let at = indexed(path, i);
            match self.choice::<RunStatus>(&at, item) {
                Some(status) if statuses.contains(&status) => {
                    self.report(&at, format!("`{}` is listed twice", status.as_str()));
                    complete = false;
                }
                Some(status) => statuses.push(status),
                None => complete = false,
            }
        }
        complete.then_some(statuses)
    }
}
