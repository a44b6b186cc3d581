//! What the workflow tools ask for: `list_workflows`, and the checked request of a
//! `run_workflow` call or of a workflow's own tool; and a run's report as the envelope.
//! Arguments are validated strictly and every refused call is audited, like the todo tools.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value, json};

use super::envelope::{self, Envelope};
use super::published::{LIST_WORKFLOWS, RUN_WORKFLOW};
use super::{App, Caller};
use crate::engine::definition::{Problems, WorkflowDef};
use crate::engine::installed::Installed;
use crate::engine::loader;
use crate::engine::plan::Plan;
use crate::engine::report::{RunReport, RunStatus};
use crate::engine::validate::{self, Limits};
use crate::schema::{Schema, check_args};
use crate::todos::ErrorCode;
use crate::todos::{ToolError, Tools};

/// Whether clients may run workflows they define themselves (`--inline-workflows`).
/// Off, `run_workflow` runs only the workflows the operator installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InlineWorkflows {
    #[default]
    On,
    Off,
}

/// The refusal of an inline definition when the operator turned them off.
const INLINE_OFF: &str = "inline workflow definitions are turned off on this server by its \
                          operator (--inline-workflows off); run a workflow by name from \
                          list_workflows";

fn problems_error(problems: &Problems) -> ToolError {
    let list: Vec<String> = problems.0.iter().map(ToString::to_string).collect();
    ToolError::invalid_input(format!("invalid workflow: {}", list.join("; ")))
}

pub(crate) use crate::engine::validate::inputs_schema;

impl App {
    /// Checks the arguments of fixed tool `tool` against the input schema it publishes.
    pub(crate) fn checked(&self, tool: &str, args: &Map<String, Value>) -> Result<(), ToolError> {
        let schema = &self.tools.get(tool).expect("a fixed tool").input_schema;
        Ok(check_args(schema, args)?)
    }

    /// `list_workflows`: every workflow with its inputs' schema.
    pub(crate) fn list_workflows(&self, args: &Map<String, Value>, caller: &Caller) -> Envelope {
        let listed = self.checked(LIST_WORKFLOWS, args).map(|()| {
            let list = self.workflows.entries().map(|entry| {
                json!({
                    "name": entry.def.name,
                    "description": entry.def.description,
                    "inputs": inputs_schema(&entry.def),
                    "nodeCount": entry.def.nodes.len(),
                    "exposedAsTool": entry.def.expose_as_tool,
                })
            });
            Value::Array(list.collect())
        });
        self.answer_read((LIST_WORKFLOWS, args), listed, caller)
    }

    /// Checks a call of `run_workflow`, or of an exposed workflow's tool, and says what to
    /// run. A rejected call is audited here, and its envelope is the call's answer.
    pub(crate) fn prepare_run(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        caller: &Caller,
    ) -> Result<Request, Envelope> {
        let request = if tool == RUN_WORKFLOW {
            let schema = &self
                .tools
                .get(RUN_WORKFLOW)
                .expect("a fixed tool")
                .input_schema;
            let limits = Limits::INLINE.with_history_rows(self.engine.limits().max_history_rows);
            parse_run_request(&self.workflows, self.inline, limits, schema, args)
        } else {
            let entry = (self.workflows.get(tool)).expect("exposed workflows are installed");
            inputs_for(&entry.def, Arc::clone(&entry.plan), args)
        };
        request.map_err(|error| self.refuse((tool, args), &error, caller))
    }
}

/// What `run_workflow` (or an exposed workflow's tool) was asked to run, once its
/// arguments are checked.
pub(crate) struct Request {
    pub plan: Arc<Plan>,
    pub inputs: Map<String, Value>,
}

fn parse_run_request(
    installed: &Installed,
    inline: InlineWorkflows,
    limits: Limits,
    schema: &Value,
    args: &Map<String, Value>,
) -> Result<Request, ToolError> {
    // One rule the schema cannot state: a workflow by name, or one given inline.
    let either = match (args.get("workflow"), args.get("definition")) {
        (Some(_), Some(_)) => Some(("workflow", "give either workflow or definition, not both")),
        (None, None) => Some(("workflow", "is required (or give an inline definition)")),
        _ => None,
    };
    // The schema is the same for every call and every server (built of constants): it is
    // compiled once, as the todo tools' are, not on each call.
    static CHECK: OnceLock<Schema> = OnceLock::new();
    let check = CHECK.get_or_init(|| Schema::compile(schema));
    check.check_args_with(args, either.as_slice())?;
    let name = args.get("workflow").and_then(Value::as_str);
    let definition = args.get("definition");
    let given = match args.get("inputs") {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    if definition.is_some() && inline == InlineWorkflows::Off {
        return Err(ToolError::invalid_input(INLINE_OFF));
    }
    let def = match (name, definition) {
        (Some(name), _) => match installed.get(name) {
            Some(entry) => return inputs_for(&entry.def, Arc::clone(&entry.plan), &given),
            None => {
                return Err(ToolError::not_found(format!(
                    "no workflow named `{name}`; list_workflows shows them"
                )));
            }
        },
        (None, Some(value)) => loader::parse_json_checked(value, &|def| {
            let checked = validate::validate(def, &Tools::exists, limits);
            let mut problems = checked.err().map(|p| p.0).unwrap_or_default();
            problems.extend(installed.unknown_calls(def));
            match problems.is_empty() {
                true => Ok(()),
                false => Err(Problems(problems)),
            }
        })
        .map_err(|p| problems_error(&p))?,
        (None, None) => unreachable!("checked above"),
    };
    let def = Arc::new(def);
    let plan = Arc::new(Plan::new(Arc::clone(&def)));
    inputs_for(&def, plan, &given)
}

fn inputs_for(
    def: &WorkflowDef,
    plan: Arc<Plan>,
    given: &Map<String, Value>,
) -> Result<Request, ToolError> {
    let inputs = validate::check_inputs(def, given).map_err(|p| problems_error(&p))?;
    Ok(Request { plan, inputs })
}

/// A run's envelope: its report under `data`, also when it failed, so the caller sees
/// which node failed and why.
pub(crate) fn run_reply(report: &RunReport, workspace: &Path) -> Envelope {
    let data = serde_json::to_value(report).expect("a report serialises");
    if report.status == RunStatus::Succeeded {
        let mut reply = envelope::ok(data);
        reply.files = written_files(report, workspace);
        return reply;
    }
    let code = if report.status == RunStatus::Cancelled {
        ErrorCode::RunCancelled
    } else {
        ErrorCode::RunFailed
    };
    let message = report
        .error
        .clone()
        .unwrap_or_else(|| format!("run {}", report.status.as_str()));
    envelope::failed(code, &message, Some(data))
}

/// The files a run's `write_file` nodes wrote: the nodes whose output has a `write_file`
/// output's shape, `{path, bytes}` and nothing else.
fn written_files(report: &RunReport, workspace: &Path) -> Vec<(std::path::PathBuf, u64)> {
    report
        .nodes
        .values()
        .filter_map(|node| node.output.as_ref()?.as_object())
        .filter(|output| output.len() == 2)
        .filter_map(|output| {
            let path = output.get("path")?.as_str()?;
            let bytes = output.get("bytes")?.as_u64()?;
            Some((workspace.join(path), bytes))
        })
        .collect()
}
