//! The workflow tools: `list_workflows`, `run_workflow`, and one tool per workflow that
//! sets `expose_as_tool`. Arguments are validated strictly and every call is audited,
//! like the task-manager tools.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::envelope::{self, Envelope};
use crate::engine::catalog::Catalog;
use crate::engine::definition::{Problems, WorkflowDef};
use crate::engine::plan::Plan;
use crate::engine::report::{RunReport, RunStatus};
use crate::engine::validate::{self, Limits};
use crate::engine::{Engine, RunOptions, loader};
use crate::store::AuditOutcome;
use crate::todos::validate::Checker;
use crate::todos::{Effects, Origin, ToolError, Tools};

pub(super) const LIST_WORKFLOWS: &str = "list_workflows";

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
pub(super) const RUN_WORKFLOW: &str = "run_workflow";

fn failure(error: &ToolError) -> Envelope {
    envelope::failed(error.code.as_str(), &error.message, None)
}

fn problems_error(problems: &Problems) -> ToolError {
    let list: Vec<String> = problems.0.iter().map(ToString::to_string).collect();
    ToolError::invalid_input(format!("invalid workflow: {}", list.join("; ")))
}

pub(super) use crate::engine::validate::inputs_schema;

pub(super) fn list_workflows(
    catalog: &Catalog,
    tools: &Tools,
    args: &Map<String, Value>,
    principal: Option<&str>,
) -> Envelope {
    let mut check = Checker::new();
    check.known_keys(args, "", &[]);
    if let Err(error) = check.finish() {
        let origin = Origin::of(principal);
        tools.audit(LIST_WORKFLOWS, args, AuditOutcome::Rejected, origin);
        return failure(&error);
    }
    let list: Vec<Value> = catalog
        .entries()
        .map(|entry| {
            json!({
                "name": entry.def.name,
                "description": entry.def.description,
                "inputs": inputs_schema(&entry.def),
                "nodeCount": entry.def.nodes.len(),
                "exposedAsTool": entry.def.expose_as_tool,
            })
        })
        .collect();
    tools.audit(
        LIST_WORKFLOWS,
        args,
        AuditOutcome::Ok,
        Origin::of(principal),
    );
    envelope::ok(Value::Array(list))
}

/// What `run_workflow` (or an exposed workflow's tool) was asked to run, once its
/// arguments are checked.
pub(super) struct Request {
    pub plan: Arc<Plan>,
    pub inputs: Map<String, Value>,
}

fn parse_run_request(
    catalog: &Catalog,
    inline: InlineWorkflows,
    args: &Map<String, Value>,
) -> Result<Request, ToolError> {
    let mut check = Checker::new();
    check.known_keys(args, "", &["workflow", "definition", "inputs"]);
    let name = args
        .get("workflow")
        .and_then(|v| check.string(v, "workflow", 1, 64));
    let definition = args.get("definition").filter(|v| {
        if !v.is_object() {
            check.problem("definition", "must be an object (a workflow definition)");
        }
        v.is_object()
    });
    let given = match args.get("inputs") {
        Some(Value::Object(map)) => map.clone(),
        Some(_) => {
            check.problem("inputs", "must be an object");
            Map::new()
        }
        None => Map::new(),
    };
    match (
        args.contains_key("workflow"),
        args.contains_key("definition"),
    ) {
        (true, true) => check.problem("workflow", "give either workflow or definition, not both"),
        (false, false) => check.problem("workflow", "is required (or give an inline definition)"),
        _ => {}
    }
    check.finish()?;
    if definition.is_some() && inline == InlineWorkflows::Off {
        return Err(ToolError::invalid_input(INLINE_OFF));
    }
    let def = match (name, definition) {
        (Some(name), _) => match catalog.get(&name) {
            Some(entry) => return inputs_for(&entry.def, Arc::clone(&entry.plan), &given),
            None => {
                return Err(ToolError::not_found(format!(
                    "no workflow named `{name}`; list_workflows shows them"
                )));
            }
        },
        (None, Some(value)) => loader::parse_json_checked(value, &|def| {
            validate::validate(def, &Tools::exists, Limits::INLINE)
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

/// Checks a call of `run_workflow`, or of an exposed workflow's tool, and says what to run.
/// A rejected call is audited here, and its envelope is the call's answer.
pub(super) fn prepare_run(
    engine: &Engine,
    catalog: &Catalog,
    inline: InlineWorkflows,
    tool_name: &str,
    args: &Map<String, Value>,
    principal: Option<&str>,
) -> Result<Request, Envelope> {
    let request = if tool_name == RUN_WORKFLOW {
        parse_run_request(catalog, inline, args)
    } else {
        let entry = catalog
            .get(tool_name)
            .expect("exposed workflows are in the catalog");
        inputs_for(&entry.def, Arc::clone(&entry.plan), args)
    };
    request.map_err(|error| {
        let outcome = match error.code {
            crate::todos::ErrorCode::NotFound => AuditOutcome::NotFound,
            _ => AuditOutcome::Rejected,
        };
        engine
            .tools()
            .audit(tool_name, args, outcome, Origin::of(principal));
        failure(&error)
    })
}

/// Runs a workflow by name or inline definition, or (for an exposed workflow) by its tool.
pub(super) async fn run_workflow(
    engine: &Engine,
    catalog: &Catalog,
    inline: InlineWorkflows,
    tool_name: &str,
    args: &Map<String, Value>,
    options: RunOptions,
) -> Envelope {
    let principal = options.owner.principal.clone();
    let request = match prepare_run(
        engine,
        catalog,
        inline,
        tool_name,
        args,
        principal.as_deref(),
    ) {
        Ok(request) => request,
        Err(rejected) => return rejected,
    };
    let report = engine.run(request.plan, request.inputs, options).await;
    let outcome = if report.status == RunStatus::Succeeded {
        AuditOutcome::Ok
    } else {
        AuditOutcome::Error
    };
    let origin = Origin {
        run_id: Some(&report.run_id),
        node_id: None,
        principal: principal.as_deref(),
    };
    engine.tools().audit(tool_name, args, outcome, origin);
    run_reply(&report, engine.workspace())
}

/// A run's envelope: its report under `data`, also when it failed, so the caller sees
/// which node failed and why.
pub(super) fn run_reply(report: &RunReport, workspace: &Path) -> Envelope {
    let data = serde_json::to_value(report).expect("a report serialises");
    if report.status == RunStatus::Succeeded {
        let mut reply = envelope::ok(data);
        reply.files = written_files(report, workspace);
        return reply;
    }
    let code = if report.status == RunStatus::Cancelled {
        "run_cancelled"
    } else {
        "run_failed"
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

/// Running a workflow may create, change or delete todos and write files.
pub(super) const RUN_EFFECTS: Effects = Effects {
    read_only: false,
    destructive: true,
    idempotent: false,
};

/// `list_workflows` and `run_workflow`: (name, title, description, input schema, effects).
pub(super) fn fixed_tools() -> [(&'static str, &'static str, &'static str, Value, Effects); 2] {
    [
        (
            LIST_WORKFLOWS,
            "List workflows",
            "List the workflows this server can run: name, description, the JSON Schema of \
             their inputs, and their node count.",
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            Effects {
                read_only: true,
                destructive: false,
                idempotent: true,
            },
        ),
        (
            RUN_WORKFLOW,
            "Run a workflow",
            "Run a multi-step workflow and return its report: the run's status, its \
             output, and each node's status, attempts, output and error. A client with task \
             support gets a task to poll instead, whose result is that report. Give either \
             `workflow` (a name from list_workflows) or `definition` (an inline workflow in \
             the same schema as workflow files, without the file actions write_file, read_file \
             and list_dir; the server's operator may turn inline definitions off), and \
             `inputs`. Workflows may call the task-manager tools, so ask the user before \
             running one that deletes todos.",
            json!({
                "type": "object",
                "properties": {
                    "workflow": { "type": "string", "minLength": 1, "maxLength": 64, "description": "The name of a workflow from list_workflows." },
                    "definition": { "type": "object", "description": "An inline workflow definition (nodes, inputs, output, ...)." },
                    "inputs": { "type": "object", "description": "The workflow's inputs, by name." }
                },
                "additionalProperties": false
            }),
            RUN_EFFECTS,
        ),
    ]
}
