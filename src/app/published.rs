//! The tools the server publishes, in one list: the five todo tools, the workflow
//! tools, the run tools and the workflows exposed as tools, each declared here once.
//! `tools/list`, the schemas, the routing of a call and whether it may become a task all
//! derive from it.
//!
//! Invariant: a name is routed exactly as it is listed; a workflow exposed as a tool never
//! shadows a fixed tool.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::envelope;
use super::idempotency;
use super::workflows;
use crate::engine::definition::{ResultForm, TaskSupport, WorkflowDef};
use crate::engine::installed::Installed;
use crate::todos::ErrorCode;
use crate::todos::{Effects, Tools};

pub(crate) const LIST_WORKFLOWS: &str = "list_workflows";
pub(crate) const RUN_WORKFLOW: &str = "run_workflow";
pub(crate) const LIST_RUNS: &str = "list_runs";
pub(crate) const GET_RUN: &str = "get_run";

/// The statuses `list_runs` filters by.
pub(crate) const RUN_STATUSES: &[&str] = &["running", "succeeded", "failed", "cancelled"];

/// How a call of a tool is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// One of the todo tools, a one-node run.
    Todo,
    ListWorkflows,
    /// `run_workflow`, or a workflow published as a tool of its own.
    RunWorkflow,
    ListRuns,
    GetRun,
}

/// A published tool.
#[derive(Debug, Clone)]
pub(crate) struct ToolDef {
    pub name: String,
    pub title: String,
    pub description: String,
    pub input_schema: Value,
    /// `None` for a tool that answers in plain text.
    pub output_schema: Option<Value>,
    pub effects: Effects,
    pub route: Route,
    /// Whether a call may, must or must not run as a task.
    pub tasks: TaskSupport,
    /// Whether the tool's workflow asks its first questions before it becomes a task.
    pub asks_before_task: bool,
    /// What the tool answers: the envelope, or for a workflow that says so, plain text.
    pub result: ResultForm,
}

/// Running a workflow may create, change or delete todos and write files.
pub(crate) const RUN_EFFECTS: Effects = Effects {
    read_only: false,
    destructive: true,
    idempotent: false,
};

/// Every tool, in the order `tools/list` lists them, and an index by name.
#[derive(Debug, Clone)]
pub(crate) struct PublishedTools {
    tools: Vec<ToolDef>,
    by_name: HashMap<String, usize>,
}

impl PublishedTools {
    /// The fixed tools, and each workflow of `workflows` that asks to be a tool of its own.
    pub(crate) fn new(workflows: &Installed) -> PublishedTools {
        let mut tools: Vec<ToolDef> = Tools::specs()
            .into_iter()
            .map(|spec| ToolDef {
                name: spec.name.to_owned(),
                title: spec.title.to_owned(),
                description: spec.description.to_owned(),
                input_schema: spec.input_schema,
                output_schema: Some(envelope::schema(&spec.data_schema, envelope::TOOL_CODES)),
                effects: spec.effects,
                route: Route::Todo,
                tasks: TaskSupport::Optional,
                asks_before_task: false,
                result: ResultForm::Envelope,
            })
            .collect();
        tools.extend(fixed_tools());
        let fixed: Vec<String> = tools.iter().map(|tool| tool.name.clone()).collect();
        let exposed = workflows.entries().filter(|entry| {
            entry.def.expose_as_tool && !fixed.iter().any(|name| *name == entry.def.name)
        });
        tools.extend(exposed.map(|entry| exposed_tool(&entry.def)));
        let by_name = (tools.iter().enumerate())
            .map(|(at, tool)| (tool.name.clone(), at))
            .collect();
        PublishedTools { tools, by_name }
    }

    /// The tool named `name`, if the server publishes one.
    pub(crate) fn get(&self, name: &str) -> Option<&ToolDef> {
        self.by_name.get(name).map(|&at| &self.tools[at])
    }

    /// Every published tool, in a stable order.
    pub(crate) fn all(&self) -> &[ToolDef] {
        &self.tools
    }

    /// How a call of `name` is served; `None` for a tool the server does not publish.
    pub(crate) fn route(&self, name: &str) -> Option<Route> {
        self.get(name).map(|tool| tool.route)
    }

    /// Whether a call of `name` may, must or must not run as a task.
    pub(crate) fn task_support(&self, name: &str) -> TaskSupport {
        self.get(name)
            .map_or(TaskSupport::Forbidden, |tool| tool.tasks)
    }

    /// What `name` answers with: the envelope, or plain text.
    pub(crate) fn result_form(&self, name: &str) -> ResultForm {
        self.get(name)
            .map_or(ResultForm::Envelope, |tool| tool.result)
    }
}

/// A workflow tool's input schema, with the idempotency key beside its inputs. The name
/// is the key's on every workflow tool, whatever inputs a workflow declares.
fn with_idempotency_key(mut schema: Value) -> Value {
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.insert(
            idempotency::IDEMPOTENCY_KEY.to_owned(),
            idempotency::key_schema(),
        );
    }
    schema
}

/// A workflow published as a tool of its own.
fn exposed_tool(def: &WorkflowDef) -> ToolDef {
    ToolDef {
        name: def.name.clone(),
        title: def.name.clone(),
        description: format!("Runs the workflow `{}`: {}", def.name, def.description),
        input_schema: with_idempotency_key(workflows::inputs_schema(def)),
        output_schema: match def.result {
            ResultForm::Envelope => Some(envelope::schema(&json!({}), envelope::RUN_CODES)),
            ResultForm::Text => None,
        },
        effects: RUN_EFFECTS,
        route: Route::RunWorkflow,
        tasks: def.task_support,
        asks_before_task: def.ask_before_task,
        result: def.result,
    }
}

/// A fixed tool that answers with the envelope.
fn fixed(
    (name, title, route): (&str, &str, Route),
    description: &str,
    input_schema: Value,
    (data, codes): (Value, &[ErrorCode]),
    effects: Effects,
) -> ToolDef {
    ToolDef {
        name: name.to_owned(),
        title: title.to_owned(),
        description: description.to_owned(),
        input_schema,
        output_schema: Some(envelope::schema(&data, codes)),
        effects,
        route,
        tasks: match route {
            Route::RunWorkflow => TaskSupport::Optional,
            _ => TaskSupport::Forbidden,
        },
        asks_before_task: false,
        result: ResultForm::Envelope,
    }
}

/// `list_workflows`, `run_workflow`, `list_runs` and `get_run`.
fn fixed_tools() -> [ToolDef; 4] {
    [
        fixed(
            (LIST_WORKFLOWS, "List workflows", Route::ListWorkflows),
            "List the workflows this server can run: name, description, the JSON Schema of \
             their inputs, and their node count.",
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            (json!({ "type": "array" }), envelope::TOOL_CODES),
            Effects::READ_ONLY,
        ),
        fixed(
            (RUN_WORKFLOW, "Run a workflow", Route::RunWorkflow),
            "Run a multi-step workflow and return its report: the run's status, its \
             output, and each node's status, attempts, output and error. A client with task \
             support gets a task to poll instead, whose result is that report. Give either \
             `workflow` (a name from list_workflows) or `definition` (an inline workflow in \
             the same schema as workflow files, without the file actions write_file, read_file \
             and list_dir; the server's operator may turn inline definitions off), and \
             `inputs`. Workflows may call the task-manager tools, so ask the user before \
             running one that deletes todos.",
            with_idempotency_key(json!({
                "type": "object",
                "properties": {
                    "workflow": { "type": "string", "minLength": 1, "maxLength": 64, "description": "The name of a workflow from list_workflows." },
                    "definition": { "type": "object", "description": "An inline workflow definition (nodes, inputs, output, ...)." },
                    "inputs": { "type": "object", "description": "The workflow's inputs, by name." }
                },
                "additionalProperties": false
            })),
            (json!({}), envelope::RUN_CODES),
            RUN_EFFECTS,
        ),
        fixed(
            (LIST_RUNS, "List workflow runs", Route::ListRuns),
            "List workflow runs, newest first: run id (which is also its task id), workflow, \
             status, progress and status message. Optionally only runs of one status.",
            json!({
                "type": "object",
                "properties": {
                    "status": { "type": "string", "enum": RUN_STATUSES },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 100, "default": 20 }
                },
                "additionalProperties": false
            }),
            (json!({}), envelope::TOOL_CODES),
            Effects::READ_ONLY,
        ),
        fixed(
            (GET_RUN, "Get a workflow run", Route::GetRun),
            "Get one workflow run by id: its status, inputs, output, every node with its \
             sub-task id, status, attempts, output and error, and its questions with their \
             answers.",
            json!({
                "type": "object",
                "properties": {
                    "run_id": { "type": "string", "minLength": 1, "maxLength": 64 }
                },
                "required": ["run_id"],
                "additionalProperties": false
            }),
            (json!({}), envelope::TOOL_CODES),
            Effects::READ_ONLY,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_routed_by_its_own_name_and_an_unknown_one_is_not() {
        let (workflows, _) = Installed::load(None);
        let tools = PublishedTools::new(&workflows);
        let exposed = workflows.entries().filter(|e| e.def.expose_as_tool).count();
        // The five todo tools, the two workflow tools, the two run tools, and the
        // workflows exposed as tools.
        assert_eq!(tools.all().len(), 9 + exposed);
        for tool in tools.all() {
            assert_eq!(tools.route(&tool.name), Some(tool.route), "{}", tool.name);
        }
        assert_eq!(tools.route("no_such_tool"), None);
        assert_eq!(tools.task_support("list_runs"), TaskSupport::Forbidden);
        assert_eq!(tools.task_support("add_task"), TaskSupport::Optional);
    }
}
