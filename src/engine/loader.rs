//! Decodes a workflow from TOML (a file) or JSON (inline in a tool call) into a
//! `WorkflowDef`, reporting every structural problem at once, each with where it is.
//!
//! TOML is first turned into JSON while the position of every field is recorded under
//! its dotted path (`nodes.create.tool`, `nodes.create.needs[0]`); one decoder then
//! reads the JSON for both formats.

use std::collections::HashSet;
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::{Map, Number, Value};
use toml::Spanned;
use toml::de::{DeInteger, DeTable, DeValue};

use super::definition::{
    ActionDef, DEFAULT_MAX_PARALLEL, InputDef, Location, Locations, NodeDef, OnFailure, Problem,
    Problems, RetryPolicy, Trigger, ValueType, WorkflowDef,
};
use super::duration::{format_duration, parse_duration};

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "expose_as_tool",
    "max_parallel",
    "timeout",
    "inputs",
    "nodes",
    "output",
];
const INPUT_KEYS: &[&str] = &["type", "description", "required", "default", "enum"];
const NODE_KEYS: &[&str] = &[
    "description",
    "tool",
    "args",
    "render",
    "write_file",
    "wait",
    "input",
    "sample",
    "needs",
    "when",
    "trigger",
    "on_failure",
    "timeout",
    "for_each",
    "retry",
];
const RETRY_KEYS: &[&str] = &[
    "max_attempts",
    "initial_delay",
    "max_delay",
    "factor",
    "jitter",
];
const WRITE_FILE_KEYS: &[&str] = &["path", "content", "overwrite"];
const INPUT_ACTION_KEYS: &[&str] = &["message", "schema", "default"];
const SAMPLE_KEYS: &[&str] = &["prompt", "system", "max_tokens"];
const TYPE_NAMES: &[&str] = &["string", "integer", "number", "boolean", "array", "object"];

/// The rule for workflow names and node ids.
pub const ID_RULE: &str = "[a-z][a-z0-9_]{0,63}";

/// Whether `text` matches [`ID_RULE`].
pub fn is_id(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && text.len() <= 64
}

/// Whether `text` can follow `inputs.` in a template: letters, digits, `_`, no leading digit.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Decodes a workflow file. `source` is the path shown in messages, `default_name` the
/// name used when the file sets none (its stem).
pub fn parse_toml(source: &str, default_name: &str, text: &str) -> Result<WorkflowDef, Problems> {
    let root = DeTable::parse(text)
        .map_err(|error| Problems(vec![syntax_problem(source, text, &error)]))?;
    let mut decoder = Decoder::new(Locations::new(source), true);
    let value = decoder.toml_table(&Lines::new(text), "", root.get_ref());
    decoder.workflow(&Value::Object(value), default_name)
}

/// Decodes a definition given inline as JSON; messages name the dotted path of each field.
pub fn parse_json(value: &Value) -> Result<WorkflowDef, Problems> {
    Decoder::new(Locations::new("inline"), false).workflow(value, "inline")
}

fn syntax_problem(source: &str, text: &str, error: &toml::de::Error) -> Problem {
    let span = error.span();
    let (line, column) = span
        .clone()
        .map_or((0, 0), |span| Lines::new(text).position(span.start));
    let mut message = format!("invalid TOML: {}", error.message());
    let duplicate = error.message().starts_with("duplicate key");
    if let Some(named) = span
        .filter(|_| duplicate)
        .and_then(|s| duplicate_name(text, s))
    {
        message = format!("invalid TOML: {named} is defined twice");
    }
    Problem {
        location: Location {
            source: source.into(),
            line,
            column,
            path: String::new(),
        },
        message,
    }
}

/// What a duplicate-key error at `span` redefines: a `[table]` header or a `key`.
fn duplicate_name(text: &str, span: std::ops::Range<usize>) -> Option<String> {
    let key = text.get(span.clone()).filter(|key| !key.is_empty())?;
    let line_start = text[..span.start].rfind('\n').map_or(0, |at| at + 1);
    let line = text[line_start..].lines().next().unwrap_or("").trim_start();
    let header = line.strip_prefix('[').filter(|_| !line.starts_with("[["));
    match header.and_then(|rest| rest.split_once(']')) {
        Some((name, _)) => Some(format!("table `[{}]`", name.trim())),
        None => Some(format!("key `{key}`")),
    }
}

/// Byte offsets to 1-based line and column (columns count characters).
struct Lines<'t> {
    text: &'t str,
    starts: Vec<usize>,
}

impl<'t> Lines<'t> {
    fn new(text: &'t str) -> Lines<'t> {
        let breaks = text.match_indices('\n').map(|(at, _)| at + 1);
        Lines {
            text,
            starts: std::iter::once(0).chain(breaks).collect(),
        }
    }

    fn position(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&start| start <= offset) - 1;
        let before = self.text.get(self.starts[line]..offset).unwrap_or("");
        (line as u32 + 1, before.chars().count() as u32 + 1)
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

fn list(names: &[&str]) -> String {
    names.join(", ")
}

/// Reads the JSON form of a definition, collecting problems.
struct Decoder {
    locations: Locations,
    problems: Vec<Problem>,
    /// Paths already reported while converting TOML; later problems there are noise.
    silenced: HashSet<String>,
    toml: bool,
}

/// TOML to JSON, recording where each value starts.
impl Decoder {
    fn new(locations: Locations, toml: bool) -> Decoder {
        Decoder {
            locations,
            problems: Vec::new(),
            silenced: HashSet::new(),
            toml,
        }
    }

    fn toml_table(&mut self, lines: &Lines, path: &str, table: &DeTable) -> Map<String, Value> {
        table
            .iter()
            .map(|(key, value)| {
                let path = join(path, key.get_ref());
                if value.get_ref().is_table() {
                    // A `[header]` table spans the whole header; its key is more telling.
                    let position = lines.position(key.span().start);
                    self.locations.by_path.insert(path.clone(), position);
                }
                let value = self.toml_value(lines, &path, value);
                (key.get_ref().to_string(), value)
            })
            .collect()
    }

    fn toml_value(&mut self, lines: &Lines, path: &str, value: &Spanned<DeValue>) -> Value {
        if !value.get_ref().is_table() {
            let position = lines.position(value.span().start);
            self.locations.by_path.insert(path.to_owned(), position);
        }
        match value.get_ref() {
            DeValue::String(text) => Value::String(text.to_string()),
            DeValue::Integer(integer) => self.toml_integer(path, integer),
            DeValue::Float(float) => self.toml_float(path, float.as_str()),
            DeValue::Boolean(flag) => Value::Bool(*flag),
            DeValue::Datetime(_) => {
                self.report(
                    path,
                    "datetimes are not allowed; quote the value to make it a string",
                );
                self.silenced.insert(path.to_owned());
                Value::Null
            }
            DeValue::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.toml_value(lines, &format!("{path}[{i}]"), item))
                    .collect(),
            ),
            DeValue::Table(table) => Value::Object(self.toml_table(lines, path, table)),
        }
    }

    fn toml_integer(&mut self, path: &str, integer: &DeInteger) -> Value {
        let (digits, radix) = (integer.as_str(), integer.radix());
        if let Ok(n) = i64::from_str_radix(digits, radix) {
            return Value::Number(n.into());
        }
        if let Ok(n) = u64::from_str_radix(digits, radix) {
            return Value::Number(n.into());
        }
        self.report(path, format!("the integer {integer} is out of range"));
        self.silenced.insert(path.to_owned());
        Value::Null
    }

    fn toml_float(&mut self, path: &str, text: &str) -> Value {
        let number = text.parse::<f64>().ok().and_then(Number::from_f64);
        number.map(Value::Number).unwrap_or_else(|| {
            self.report(path, format!("only finite numbers are allowed, not {text}"));
            self.silenced.insert(path.to_owned());
            Value::Null
        })
    }
}

/// Problems and typed reads of single values.
impl Decoder {
    fn report(&mut self, path: &str, message: impl Into<String>) {
        if !self.silenced.contains(path) {
            self.problems.push(self.locations.problem(path, message));
        }
    }

    fn type_name(&self, value: &Value) -> &'static str {
        match value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(n) if n.is_f64() => "a float",
            Value::Number(_) => "an integer",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) if self.toml => "a table",
            Value::Object(_) => "an object",
        }
    }

    fn wrong_type<T>(&mut self, path: &str, expected: &str, found: &Value) -> Option<T> {
        let found = self.type_name(found);
        self.report(path, format!("expected {expected}, found {found}"));
        None
    }

    fn table<'v>(&mut self, path: &str, value: &'v Value) -> Option<&'v Map<String, Value>> {
        match value {
            Value::Object(map) => Some(map),
            other => {
                let expected = if self.toml { "a table" } else { "an object" };
                self.wrong_type(path, expected, other)
            }
        }
    }

    /// A table whose keys must be among `allowed`.
    fn fields<'v>(
        &mut self,
        path: &str,
        value: &'v Value,
        allowed: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let map = self.table(path, value)?;
        for key in map.keys().filter(|key| !allowed.contains(&key.as_str())) {
            let message = format!("unknown key `{key}`; allowed keys: {}", list(allowed));
            self.report(&join(path, key), message);
        }
        Some(map)
    }

    fn string(&mut self, path: &str, value: &Value) -> Option<String> {
        match value {
            Value::String(text) => Some(text.clone()),
            other => self.wrong_type(path, "a string", other),
        }
    }

    fn boolean(&mut self, path: &str, value: &Value) -> Option<bool> {
        match value {
            Value::Bool(flag) => Some(*flag),
            other => self.wrong_type(path, "a boolean (true or false)", other),
        }
    }

    fn integer(&mut self, path: &str, value: &Value, min: i64, max: i64) -> Option<i64> {
        let Some(n) = value.as_i64().filter(|_| !value.is_f64()) else {
            if value.is_u64() {
                self.report(
                    path,
                    format!("must be between {min} and {max}, got {value}"),
                );
                return None;
            }
            return self.wrong_type(path, "an integer", value);
        };
        if n < min || n > max {
            self.report(path, format!("must be between {min} and {max}, got {n}"));
            return None;
        }
        Some(n)
    }

    fn duration(&mut self, path: &str, value: &Value) -> Option<Duration> {
        let text = self.string(path, value)?;
        parse_duration(&text)
            .map_err(|error| self.report(path, error))
            .ok()
    }

    /// A duration that must be longer than zero.
    fn timeout(&mut self, path: &str, value: &Value) -> Option<Duration> {
        let duration = self.duration(path, value)?;
        if duration.is_zero() {
            self.report(path, "a timeout must be longer than 0s");
            return None;
        }
        Some(duration)
    }

    fn choice<T>(
        &mut self,
        path: &str,
        value: &Value,
        names: &[&str],
        parse: fn(&str) -> Option<T>,
    ) -> Option<T> {
        let text = self.string(path, value)?;
        let parsed = parse(&text);
        if parsed.is_none() {
            let message = format!("unknown value `{text}`; expected one of {}", list(names));
            self.report(path, message);
        }
        parsed
    }
}

type Read<T> = fn(&mut Decoder, &str, &Value) -> Option<T>;

/// Reads of fields in a table.
impl Decoder {
    /// Reads `parent.key` if present.
    fn opt<T>(
        &mut self,
        map: &Map<String, Value>,
        parent: &str,
        key: &str,
        read: Read<T>,
    ) -> Option<T> {
        let value = map.get(key)?;
        read(self, &join(parent, key), value)
    }

    /// Reads `parent.key`, reporting it when missing.
    fn req<T: Default>(
        &mut self,
        map: &Map<String, Value>,
        parent: &str,
        key: &str,
        read: Read<T>,
    ) -> T {
        if !map.contains_key(key) {
            self.report(parent, format!("missing required key `{key}`"));
        }
        self.opt(map, parent, key, read).unwrap_or_default()
    }

    fn any(&mut self, _path: &str, value: &Value) -> Option<Value> {
        Some(value.clone())
    }

    fn strings(&mut self, path: &str, value: &Value) -> Option<Vec<String>> {
        let Value::Array(items) = value else {
            return self.wrong_type(path, "an array of strings", value);
        };
        let read = items.iter().enumerate();
        let strings: Vec<_> = read
            .filter_map(|(i, item)| self.string(&format!("{path}[{i}]"), item))
            .collect();
        (strings.len() == items.len()).then_some(strings)
    }
}

/// The workflow, its inputs and its output.
impl Decoder {
    fn workflow(mut self, root: &Value, default_name: &str) -> Result<WorkflowDef, Problems> {
        let Some(map) = self.fields("", root, TOP_KEYS) else {
            return Err(Problems(self.problems));
        };
        let name = self.name(map, default_name);
        let max_parallel = self.opt(map, "", "max_parallel", |d, p, v| {
            d.integer(p, v, 1, i64::from(u32::MAX))
        });
        let def = WorkflowDef {
            name,
            description: self
                .opt(map, "", "description", Self::string)
                .unwrap_or_default(),
            expose_as_tool: self
                .opt(map, "", "expose_as_tool", Self::boolean)
                .unwrap_or(false),
            max_parallel: max_parallel.map_or(DEFAULT_MAX_PARALLEL, |n| n as usize),
            timeout: self.opt(map, "", "timeout", Self::timeout),
            inputs: self.inputs(map.get("inputs")),
            nodes: self.nodes(map.get("nodes")),
            output: self.output(map.get("output")),
            locations: Locations::default(),
        };
        if !self.problems.is_empty() {
            // In file order; inline problems keep the order of decoding.
            self.problems
                .sort_by_key(|problem| (problem.location.line, problem.location.column));
            return Err(Problems(self.problems));
        }
        Ok(WorkflowDef {
            locations: self.locations,
            ..def
        })
    }

    fn name(&mut self, map: &Map<String, Value>, default_name: &str) -> String {
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

    fn inputs(&mut self, value: Option<&Value>) -> IndexMap<String, InputDef> {
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

    fn input_def(&mut self, path: &str, value: &Value) -> Option<InputDef> {
        let map = self.fields(path, value, INPUT_KEYS)?;
        let kind = self.req(map, path, "type", |d, p, v| {
            d.choice(p, v, TYPE_NAMES, ValueType::parse).map(Some)
        });
        Some(InputDef {
            kind: kind.unwrap_or(ValueType::String),
            description: self
                .opt(map, path, "description", Self::string)
                .unwrap_or_default(),
            required: self
                .opt(map, path, "required", Self::boolean)
                .unwrap_or(false),
            default: self.opt(map, path, "default", Self::any),
            choices: self.opt(map, path, "enum", Self::choices),
        })
    }

    fn choices(&mut self, path: &str, value: &Value) -> Option<Vec<Value>> {
        match value {
            Value::Array(items) if items.is_empty() => {
                self.report(path, "`enum` needs at least one value");
                None
            }
            Value::Array(items) => Some(items.clone()),
            other => self.wrong_type(path, "an array", other),
        }
    }

    fn output(&mut self, value: Option<&Value>) -> IndexMap<String, String> {
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
    fn nodes(&mut self, value: Option<&Value>) -> IndexMap<String, NodeDef> {
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

    fn node(&mut self, id: &str, value: &Value) -> Option<NodeDef> {
        let path = format!("nodes.{id}");
        let map = self.fields(&path, value, NODE_KEYS)?;
        let p = path.as_str();
        Some(NodeDef {
            id: id.to_owned(),
            description: self
                .opt(map, p, "description", Self::string)
                .unwrap_or_default(),
            action: self.action(p, map),
            needs: self.opt(map, p, "needs", Self::strings).unwrap_or_default(),
            when: self.opt(map, p, "when", Self::string),
            trigger: self
                .opt(map, p, "trigger", Self::trigger)
                .unwrap_or_default(),
            on_failure: self
                .opt(map, p, "on_failure", Self::on_failure)
                .unwrap_or_default(),
            timeout: self.opt(map, p, "timeout", Self::timeout),
            for_each: self.opt(map, p, "for_each", Self::string),
            retry: self.opt(map, p, "retry", Self::retry).unwrap_or_default(),
        })
    }

    fn trigger(&mut self, path: &str, value: &Value) -> Option<Trigger> {
        self.choice(path, value, Trigger::NAMES, Trigger::parse)
    }

    fn on_failure(&mut self, path: &str, value: &Value) -> Option<OnFailure> {
        self.choice(path, value, OnFailure::NAMES, OnFailure::parse)
    }

    fn retry(&mut self, path: &str, value: &Value) -> Option<RetryPolicy> {
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

    fn factor(&mut self, path: &str, value: &Value) -> Option<f32> {
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
    fn action(&mut self, path: &str, map: &Map<String, Value>) -> ActionDef {
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

    fn action_of(&mut self, path: &str, kind: &str, map: &Map<String, Value>) -> ActionDef {
        let (at, value) = (join(path, kind), &map[kind]);
        let action = match kind {
            "tool" => self.tool(path, map),
            "render" => self
                .string(&at, value)
                .map(|template| ActionDef::Render { template }),
            "write_file" => self.write_file(&at, value),
            "wait" => self
                .duration(&at, value)
                .map(|duration| ActionDef::Wait { duration }),
            "input" => self.input_action(&at, value),
            _ => self.sample(&at, value),
        };
        action.unwrap_or(ActionDef::Render {
            template: String::new(),
        })
    }

    fn tool(&mut self, node: &str, map: &Map<String, Value>) -> Option<ActionDef> {
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

    fn write_file(&mut self, path: &str, value: &Value) -> Option<ActionDef> {
        let map = self.fields(path, value, WRITE_FILE_KEYS)?;
        Some(ActionDef::WriteFile {
            path: self.req(map, path, "path", Self::string),
            content: self.req(map, path, "content", Self::string),
            overwrite: self
                .opt(map, path, "overwrite", Self::boolean)
                .unwrap_or(false),
        })
    }

    fn input_action(&mut self, path: &str, value: &Value) -> Option<ActionDef> {
        let map = self.fields(path, value, INPUT_ACTION_KEYS)?;
        let schema = self.opt(map, path, "schema", Self::schema);
        Some(ActionDef::Input {
            message: self.req(map, path, "message", Self::string),
            schema: schema
                .unwrap_or_else(|| serde_json::json!({ "type": "object", "properties": {} })),
            default: self.opt(map, path, "default", Self::any),
        })
    }

    /// A flat JSON Schema object: `type = "object"`, properties that are not objects.
    fn schema(&mut self, path: &str, value: &Value) -> Option<Value> {
        let map = self.table(path, value)?;
        let kind = map.get("type");
        if kind.is_some_and(|kind| kind != "object") {
            self.report(
                &join(path, "type"),
                "an input schema must have type \"object\"",
            );
        }
        let at = join(path, "properties");
        let properties = match map.get("properties") {
            Some(properties) => self.table(&at, properties)?,
            None => return Some(value.clone()),
        };
        for (name, property) in properties {
            let at = join(&at, name);
            let Some(property) = self.table(&at, property) else {
                continue;
            };
            if property.get("type").is_some_and(|kind| kind == "object") {
                self.report(
                    &at,
                    "an input schema must be flat: a property cannot be an object",
                );
            }
        }
        Some(value.clone())
    }

    fn sample(&mut self, path: &str, value: &Value) -> Option<ActionDef> {
        let map = self.fields(path, value, SAMPLE_KEYS)?;
        let max_tokens = self.opt(map, path, "max_tokens", |d, p, v| {
            d.integer(p, v, 1, i64::from(u32::MAX))
        });
        Some(ActionDef::Sample {
            prompt: self.req(map, path, "prompt", Self::string),
            system: self.opt(map, path, "system", Self::string),
            max_tokens: max_tokens.map(|n| n as u32),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FULL: &str = r#"
name = "release_checklist"
description = "Prepare a release"
expose_as_tool = true
max_parallel = 4
timeout = "10m"

[inputs.title]
type = "string"
description = "What to release"
required = true

[inputs.level]
type = "string"
default = "minor"
enum = ["major", "minor", "patch"]

[nodes.create]
description = "Make the task"
tool = "add_task"
args = { title = "Release {{ inputs.title }}", tags = ["release"], count = 0x10 }
timeout = "30s"
retry = { max_attempts = 3, initial_delay = "200ms", max_delay = "5s", factor = 1.5, jitter = true }

[nodes.note]
render = "Created {{ nodes.create.output }}"
needs = ["create"]
when = "inputs.title != ''"
trigger = "all_done"
on_failure = "continue"

[nodes.save]
write_file = { path = "notes/{{ inputs.title }}.md", content = "x", overwrite = true }
needs = ["note"]
for_each = "inputs.level"

[nodes.pause]
wait = "1m30s"

[nodes.ask]
input = { message = "Go?", schema = { type = "object", properties = { ok = { type = "boolean" } } }, default = { ok = true } }

[nodes.summarize]
sample = { prompt = "Summarize", system = "Be brief", max_tokens = 500 }

[output]
todo = "nodes.create.output"
"#;

    fn problems(text: &str) -> Vec<String> {
        match parse_toml("wf/x.toml", "x", text) {
            Ok(def) => panic!("expected problems, decoded {def:?}"),
            Err(problems) => problems.0.iter().map(ToString::to_string).collect(),
        }
    }

    fn assert_reported(problems: &[String], needle: &str) {
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "no problem contains {needle:?}:\n{}",
            problems.join("\n")
        );
    }

    fn node(id: &str, action: ActionDef) -> NodeDef {
        NodeDef {
            id: id.to_owned(),
            description: String::new(),
            action,
            needs: vec![],
            when: None,
            trigger: Trigger::AllSuccess,
            on_failure: OnFailure::FailRun,
            timeout: None,
            for_each: None,
            retry: RetryPolicy::default(),
        }
    }

    fn expected_nodes() -> IndexMap<String, NodeDef> {
        let args =
            json!({ "title": "Release {{ inputs.title }}", "tags": ["release"], "count": 16 });
        let create = NodeDef {
            description: "Make the task".into(),
            timeout: Some(Duration::from_secs(30)),
            retry: RetryPolicy {
                max_attempts: 3,
                initial_delay: Duration::from_millis(200),
                max_delay: Duration::from_secs(5),
                factor: 1.5,
                jitter: true,
            },
            ..node(
                "create",
                ActionDef::Tool {
                    name: "add_task".into(),
                    args,
                },
            )
        };
        let note = NodeDef {
            needs: vec!["create".into()],
            when: Some("inputs.title != ''".into()),
            trigger: Trigger::AllDone,
            on_failure: OnFailure::Continue,
            ..node(
                "note",
                ActionDef::Render {
                    template: "Created {{ nodes.create.output }}".into(),
                },
            )
        };
        let save = NodeDef {
            needs: vec!["note".into()],
            for_each: Some("inputs.level".into()),
            ..node(
                "save",
                ActionDef::WriteFile {
                    path: "notes/{{ inputs.title }}.md".into(),
                    content: "x".into(),
                    overwrite: true,
                },
            )
        };
        [create, note, save]
            .into_iter()
            .chain(expected_interactive_nodes())
            .map(|node| (node.id.clone(), node))
            .collect()
    }

    fn expected_interactive_nodes() -> [NodeDef; 3] {
        let pause = node(
            "pause",
            ActionDef::Wait {
                duration: Duration::from_secs(90),
            },
        );
        let ask = node(
            "ask",
            ActionDef::Input {
                message: "Go?".into(),
                schema: json!({ "type": "object", "properties": { "ok": { "type": "boolean" } } }),
                default: Some(json!({ "ok": true })),
            },
        );
        let summarize = node(
            "summarize",
            ActionDef::Sample {
                prompt: "Summarize".into(),
                system: Some("Be brief".into()),
                max_tokens: Some(500),
            },
        );
        [pause, ask, summarize]
    }

    fn expected_inputs() -> IndexMap<String, InputDef> {
        let title = InputDef {
            kind: ValueType::String,
            description: "What to release".into(),
            required: true,
            default: None,
            choices: None,
        };
        let level = InputDef {
            kind: ValueType::String,
            description: String::new(),
            required: false,
            default: Some(json!("minor")),
            choices: Some(vec![json!("major"), json!("minor"), json!("patch")]),
        };
        IndexMap::from([("title".into(), title), ("level".into(), level)])
    }

    #[test]
    fn a_full_example_decodes_to_the_expected_definition() {
        let def = parse_toml("wf/release.toml", "release", FULL).unwrap();
        assert_eq!(def.name, "release_checklist");
        assert_eq!(def.description, "Prepare a release");
        assert!(def.expose_as_tool);
        assert_eq!(def.max_parallel, 4);
        assert_eq!(def.timeout, Some(Duration::from_secs(600)));
        assert_eq!(def.inputs, expected_inputs());
        assert_eq!(def.nodes, expected_nodes());
        let output = IndexMap::from([("todo".to_owned(), "nodes.create.output".to_owned())]);
        assert_eq!(def.output, output);
        assert_eq!(&*def.locations.source, "wf/release.toml");
    }

    #[test]
    fn every_field_location_is_recorded_by_dotted_path() {
        let def = parse_toml("wf/release.toml", "release", FULL).unwrap();
        let at = |path: &str| def.locations.by_path.get(path).copied();
        assert_eq!(at("inputs"), Some((8, 2)));
        assert_eq!(at("inputs.title"), Some((8, 9)));
        assert_eq!(at("inputs.title.type"), Some((9, 8)));
        assert_eq!(at("nodes.create"), Some((18, 8)));
        assert_eq!(at("nodes.create.tool"), Some((20, 8)));
        assert_eq!(at("nodes.create.args"), Some((21, 1)));
        assert_eq!(at("nodes.create.args.tags[0]"), Some((21, 56)));
        assert_eq!(at("nodes.create.retry.factor"), Some((23, 81)));
        assert_eq!(at("output.todo"), Some((47, 8)));
    }

    #[test]
    fn defaults_apply_when_fields_are_absent() {
        let def = parse_toml("wf/tiny.toml", "tiny", "[nodes.a]\nrender = 'hi'\n").unwrap();
        assert_eq!(def.name, "tiny");
        assert_eq!(def.max_parallel, DEFAULT_MAX_PARALLEL);
        assert_eq!(
            (def.description.as_str(), def.expose_as_tool, def.timeout),
            ("", false, None)
        );
        assert_eq!(
            def.nodes["a"],
            node(
                "a",
                ActionDef::Render {
                    template: "hi".into()
                }
            )
        );
        let def = parse_toml("t.toml", "t", "[nodes.a]\ntool = 'list'\n").unwrap();
        let empty = ActionDef::Tool {
            name: "list".into(),
            args: json!({}),
        };
        assert_eq!(def.nodes["a"].action, empty);
    }

    #[test]
    fn several_problems_are_reported_together_with_line_and_column() {
        let text = "name = \"Bad-Name\"\nmax_parallel = 0\n\n[nodes.a]\ntool = 5\ntrigger = \"sometimes\"\n";
        let found = problems(text);
        assert_eq!(
            found,
            [
                "wf/x.toml:1:8: name: invalid name `Bad-Name`: must match [a-z][a-z0-9_]{0,63}",
                "wf/x.toml:2:16: max_parallel: must be between 1 and 4294967295, got 0",
                "wf/x.toml:5:8: nodes.a.tool: expected a string, found an integer",
                "wf/x.toml:6:11: nodes.a.trigger: unknown value `sometimes`; expected one of \
                 all_success, all_done, one_success, none_failed",
            ]
        );
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let text = "description = \"été\"\nbogus = 1\n[nodes.a] # é\ntool = 't'\n\
                    args = { t = \"é\", u = 2026-01-01 }\n";
        let found = problems(text);
        assert_eq!(
            found,
            [
                "wf/x.toml:2:9: bogus: unknown key `bogus`; allowed keys: name, description, \
                 expose_as_tool, max_parallel, timeout, inputs, nodes, output",
                "wf/x.toml:5:23: nodes.a.args.u: datetimes are not allowed; quote the value to \
                 make it a string",
            ]
        );
    }

    #[test]
    fn unknown_keys_are_reported_at_every_level_with_the_allowed_keys() {
        let text = r#"
colour = "red"
[inputs.a]
type = "string"
optional = true
[nodes.a]
tool = "t"
retries = 3
retry = { attempts = 2 }
[nodes.b]
write_file = { path = "p", content = "c", mode = "0644" }
[nodes.c]
input = { message = "m", title = "t" }
[nodes.d]
sample = { prompt = "p", temperature = 0.5 }
"#;
        let found = problems(text);
        assert_reported(
            &found,
            "wf/x.toml:2:10: colour: unknown key `colour`; allowed keys: name, description,",
        );
        assert_reported(
            &found,
            "inputs.a.optional: unknown key `optional`; allowed keys: type, description, required, default, enum",
        );
        assert_reported(
            &found,
            "nodes.a.retries: unknown key `retries`; allowed keys: description, tool, args,",
        );
        assert_reported(
            &found,
            "nodes.a.retry.attempts: unknown key `attempts`; allowed keys: max_attempts,",
        );
        assert_reported(
            &found,
            "nodes.b.write_file.mode: unknown key `mode`; allowed keys: path, content, overwrite",
        );
        assert_reported(
            &found,
            "nodes.c.input.title: unknown key `title`; allowed keys: message, schema, default",
        );
        assert_reported(
            &found,
            "nodes.d.sample.temperature: unknown key `temperature`; allowed keys: prompt, system, max_tokens",
        );
        assert_eq!(found.len(), 7, "{found:#?}");
    }

    #[test]
    fn wrong_types_name_what_was_expected_and_found() {
        let text = r#"
description = 3
expose_as_tool = "yes"
max_parallel = 2.5
output = { a = 1 }
[inputs]
a = "string"
[nodes.a]
render = "x"
needs = "b"
when = true
[nodes.b]
render = "x"
needs = ["a", 2]
retry = { factor = "2", jitter = 1 }
[nodes.c]
tool = "t"
args = [1]
"#;
        let found = problems(text);
        assert_reported(&found, "description: expected a string, found an integer");
        assert_reported(
            &found,
            "expose_as_tool: expected a boolean (true or false), found a string",
        );
        assert_reported(&found, "max_parallel: expected an integer, found a float");
        assert_reported(&found, "output.a: expected a string, found an integer");
        assert_reported(&found, "inputs.a: expected a table, found a string");
        assert_reported(
            &found,
            "nodes.a.needs: expected an array of strings, found a string",
        );
        assert_reported(&found, "nodes.a.when: expected a string, found a boolean");
        assert_reported(
            &found,
            "wf/x.toml:14:15: nodes.b.needs[1]: expected a string, found an integer",
        );
        assert_reported(
            &found,
            "nodes.b.retry.factor: expected a number, found a string",
        );
        assert_reported(
            &found,
            "nodes.b.retry.jitter: expected a boolean (true or false), found an integer",
        );
        assert_reported(&found, "nodes.c.args: expected a table, found an array");
        assert_eq!(found.len(), 11, "{found:#?}");
    }

    #[test]
    fn missing_required_keys_are_reported_at_their_table() {
        let text = "[inputs.a]\ndescription = 'x'\n[nodes.a]\nwrite_file = { overwrite = true }\n\
                    [nodes.b]\ninput = {}\n[nodes.c]\nsample = { system = 's' }\n";
        let found = problems(text);
        assert_reported(
            &found,
            "wf/x.toml:1:9: inputs.a: missing required key `type`",
        );
        assert_reported(
            &found,
            "wf/x.toml:4:1: nodes.a.write_file: missing required key `path`",
        );
        assert_reported(&found, "nodes.a.write_file: missing required key `content`");
        assert_reported(&found, "nodes.b.input: missing required key `message`");
        assert_reported(&found, "nodes.c.sample: missing required key `prompt`");
        assert_eq!(found.len(), 5, "{found:#?}");
        assert_reported(
            &problems("name = 'x'\n"),
            "wf/x.toml: missing required key `nodes`",
        );
        assert_reported(
            &problems("nodes = {}\n"),
            "nodes: a workflow needs at least one node",
        );
    }

    #[test]
    fn a_node_needs_exactly_one_action() {
        let found =
            problems("[nodes.a]\nneeds = []\n[nodes.b]\ntool = 't'\nrender = 'r'\nwait = '1s'\n");
        assert_reported(
            &found,
            "wf/x.toml:1:8: nodes.a: the node has no action: give exactly one of `tool`, `render`, \
             `write_file`, `wait`, `input`, `sample`",
        );
        assert_reported(
            &found,
            "wf/x.toml:3:8: nodes.b: the node has more than one action (`tool`, `render`, `wait`): \
             give exactly one",
        );
    }

    #[test]
    fn args_without_tool_are_refused() {
        let found = problems("[nodes.a]\nrender = 'r'\nargs = { x = 1 }\n");
        assert_eq!(
            found,
            ["wf/x.toml:3:1: nodes.a.args: `args` goes with `tool`, and this node has no `tool`"]
        );
    }

    #[test]
    fn bad_names_and_ids_are_refused() {
        let found = problems(
            "name = '1abc'\n[inputs.'my-input']\ntype = 'string'\n[nodes.Create]\nrender = 'r'\n",
        );
        assert_reported(
            &found,
            "name: invalid name `1abc`: must match [a-z][a-z0-9_]{0,63}",
        );
        assert_reported(&found, "inputs.my-input: invalid input name `my-input`");
        assert_reported(
            &found,
            "wf/x.toml:4:8: nodes.Create: invalid node id `Create`",
        );
        let long = format!("[nodes.{}]\nrender = 'r'\n", "a".repeat(65));
        assert_reported(&problems(&long), "invalid node id");
        let error =
            parse_toml("wf/My Flow.toml", "My Flow", "[nodes.a]\nrender = 'r'\n").unwrap_err();
        assert_eq!(
            error.to_string(),
            "wf/My Flow.toml: the file name makes the workflow name `My Flow`, which does not \
             match [a-z][a-z0-9_]{0,63}; set `name`"
        );
        assert!(
            parse_toml(
                "wf/My Flow.toml",
                "My Flow",
                "name = 'ok'\n[nodes.a]\nrender = 'r'\n"
            )
            .is_ok()
        );
    }

    #[test]
    fn bad_enum_values_list_the_allowed_ones() {
        let found =
            problems("[inputs.a]\ntype = 'text'\n[nodes.a]\nrender = 'r'\non_failure = 'ignore'\n");
        assert_reported(
            &found,
            "wf/x.toml:2:8: inputs.a.type: unknown value `text`; expected one of string, integer, \
             number, boolean, array, object",
        );
        assert_reported(
            &found,
            "nodes.a.on_failure: unknown value `ignore`; expected one of fail_run, continue",
        );
        assert_reported(
            &problems("[inputs.a]\ntype = 'string'\nenum = []\n[nodes.a]\nrender = 'r'\n"),
            "inputs.a.enum: `enum` needs at least one value",
        );
    }

    #[test]
    fn bad_durations_say_the_accepted_form() {
        let text = "timeout = '10'\n[nodes.a]\nwait = '1x'\n[nodes.b]\nrender = 'r'\ntimeout = '0s'\n\
                    retry = { initial_delay = '-1s' }\n";
        let found = problems(text);
        assert_reported(
            &found,
            "wf/x.toml:1:11: timeout: invalid duration `10`: expected a number followed by a unit",
        );
        assert_reported(&found, "nodes.a.wait: invalid duration `1x`");
        assert_reported(&found, "nodes.b.timeout: a timeout must be longer than 0s");
        assert_reported(
            &found,
            "nodes.b.retry.initial_delay: invalid duration `-1s`",
        );
        assert_eq!(found.len(), 4, "{found:#?}");
    }

    #[test]
    fn out_of_range_numbers_are_refused() {
        let text = "max_parallel = -1\n[nodes.a]\nrender = 'r'\n\
                    retry = { max_attempts = 101, factor = 0.5, initial_delay = '2s', max_delay = '1s' }\n\
                    [nodes.b]\nsample = { prompt = 'p', max_tokens = 0 }\n[nodes.c]\nrender = 'r'\nretry = { max_attempts = 0 }\n";
        let found = problems(text);
        assert_reported(
            &found,
            "max_parallel: must be between 1 and 4294967295, got -1",
        );
        assert_reported(
            &found,
            "nodes.a.retry.max_attempts: must be between 1 and 100, got 101",
        );
        assert_reported(
            &found,
            "nodes.a.retry.factor: must be between 1.0 and 1000.0, got 0.5",
        );
        assert_reported(
            &found,
            "nodes.a.retry.max_delay: max_delay (1s) must be at least initial_delay (2s)",
        );
        assert_reported(
            &found,
            "nodes.b.sample.max_tokens: must be between 1 and 4294967295, got 0",
        );
        assert_reported(
            &found,
            "nodes.c.retry.max_attempts: must be between 1 and 100, got 0",
        );
        let big = problems("max_parallel = 18446744073709551615\n[nodes.a]\nrender = 'r'\n");
        assert_reported(&big, "max_parallel:");
        let found = problems("[nodes.a]\nrender = 'r'\nretry = { initial_delay = '1m' }\n");
        assert_reported(
            &found,
            "nodes.a.retry.max_delay: max_delay (30s) must be at least initial_delay (1m)",
        );
    }

    #[test]
    fn toml_datetimes_are_refused() {
        let found = problems("[nodes.a]\ntool = 't'\nargs = { due = 2026-01-02, at = 12:00:00 }\n");
        assert_eq!(
            found,
            [
                "wf/x.toml:3:16: nodes.a.args.due: datetimes are not allowed; quote the value to make it a string",
                "wf/x.toml:3:33: nodes.a.args.at: datetimes are not allowed; quote the value to make it a string",
            ]
        );
        let found = problems("timeout = 1979-05-27T07:32:00Z\n[nodes.a]\nrender = 'r'\n");
        assert_eq!(found.len(), 1, "{found:#?}");
    }

    #[test]
    fn toml_numbers_become_json_numbers() {
        let text = "[nodes.a]\ntool = 't'\nargs = { a = 1_000, b = -5, c = 0o17, d = 2.5e3, e = 0b101, f = 1.0 }\n";
        let def = parse_toml("t.toml", "t", text).unwrap();
        let ActionDef::Tool { args, .. } = &def.nodes["a"].action else {
            panic!("not a tool");
        };
        assert_eq!(
            args,
            &json!({ "a": 1000, "b": -5, "c": 15, "d": 2500.0, "e": 5, "f": 1.0 })
        );
        let found = problems("[nodes.a]\ntool = 't'\nargs = { x = nan, y = -inf }\n");
        assert_reported(
            &found,
            "nodes.a.args.x: only finite numbers are allowed, not nan",
        );
        assert_reported(
            &found,
            "nodes.a.args.y: only finite numbers are allowed, not -inf",
        );
    }

    #[test]
    fn input_schemas_must_be_flat_objects() {
        let text = "[nodes.a]\ninput = { message = 'm', schema = { type = 'object', properties = { \
                    who = { type = 'object' }, n = 3 } } }\n[nodes.b]\ninput = { message = 'm', schema = { type = 'string' } }\n";
        let found = problems(text);
        assert_reported(
            &found,
            "nodes.a.input.schema.properties.who: an input schema must be flat",
        );
        assert_reported(
            &found,
            "nodes.a.input.schema.properties.n: expected a table, found an integer",
        );
        assert_reported(
            &found,
            "nodes.b.input.schema.type: an input schema must have type \"object\"",
        );
        let def = parse_toml("t.toml", "t", "[nodes.a]\ninput = { message = 'Go?' }\n").unwrap();
        let ActionDef::Input {
            schema, default, ..
        } = &def.nodes["a"].action
        else {
            panic!("not an input");
        };
        assert_eq!(
            (schema, default),
            (&json!({ "type": "object", "properties": {} }), &None)
        );
    }

    #[test]
    fn a_syntax_error_is_one_problem_at_its_location() {
        let error =
            parse_toml("wf/x.toml", "x", "name = 'x'\n[nodes.a\nrender = 'r'\n").unwrap_err();
        assert_eq!(error.0.len(), 1, "{error}");
        let location = &error.0[0].location;
        assert_eq!((location.line, location.column), (2, 9), "{error}");
        assert!(error.0[0].message.starts_with("invalid TOML: "), "{error}");
    }

    #[test]
    fn a_duplicate_table_is_named_at_its_second_definition() {
        let text = "[nodes.a]\nrender = 'x'\n\n[nodes.a]\nrender = 'y'\n";
        let error = parse_toml("wf/x.toml", "x", text).unwrap_err();
        assert_eq!(
            error.to_string(),
            "wf/x.toml:4:8: invalid TOML: table `[nodes.a]` is defined twice"
        );
        let error =
            parse_toml("wf/x.toml", "x", "[nodes.a]\nrender = 'x'\nrender = 'y'\n").unwrap_err();
        assert_eq!(
            error.to_string(),
            "wf/x.toml:3:1: invalid TOML: key `render` is defined twice"
        );
    }

    #[test]
    fn inline_json_decodes_the_same_schema() {
        let value = json!({
            "inputs": { "title": { "type": "string", "required": true } },
            "nodes": {
                "create": { "tool": "add_task", "args": { "title": "{{ inputs.title }}" } },
                "note": { "render": "done", "needs": ["create"], "retry": { "max_attempts": 2, "factor": 3 } }
            },
            "output": { "todo": "nodes.create.output" }
        });
        let def = parse_json(&value).unwrap();
        assert_eq!(def.name, "inline");
        assert_eq!(&*def.locations.source, "inline");
        assert!(def.locations.by_path.is_empty());
        assert_eq!(def.nodes["note"].needs, ["create"]);
        assert_eq!(def.nodes["note"].retry.max_attempts, 2);
        assert_eq!(def.nodes["note"].retry.factor, 3.0);
        assert_eq!(def.output["todo"], "nodes.create.output");
    }

    #[test]
    fn inline_json_problems_carry_the_dotted_path() {
        let value = json!({
            "name": "demo",
            "nodes": {
                "a": { "tool": "t", "args": "x", "timeout": "soon" },
                "b": { "render": "r", "needs": [null], "extra": 1 }
            }
        });
        let error = parse_json(&value).unwrap_err();
        let found: Vec<String> = error.0.iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "inline: nodes.a.args: expected an object, found a string",
                "inline: nodes.a.timeout: invalid duration `soon`: expected a number followed by a \
                 unit (ms, s, m or h), like `200ms`, `30s`, `1.5s` or `1m30s`",
                "inline: nodes.b.extra: unknown key `extra`; allowed keys: description, tool, args, \
                 render, write_file, wait, input, sample, needs, when, trigger, on_failure, timeout, \
                 for_each, retry",
                "inline: nodes.b.needs[0]: expected a string, found null",
            ]
        );
        assert!(
            error
                .0
                .iter()
                .all(|p| p.location.line == 0 && p.location.column == 0)
        );
        let error = parse_json(&json!([1])).unwrap_err();
        assert_eq!(
            error.to_string(),
            "inline: expected an object, found an array"
        );
    }
}
