//! `list_runs` and `get_run`: finding workflow runs and their tasks again, for clients of
//! the SEP-2663 protocol, which has no `tasks/list`, and for any client after a restart.
//! Read-only, validated strictly and audited like every tool.
//!
//! On stdio the caller is the one local user, who may see every run in the database.

use serde_json::{Map, Value, json};

use super::caller::Caller;
use super::envelope::{self, Envelope};
use crate::store::AuditOutcome;
use crate::runs::Registry;
use crate::todos::validate::Checker;
use crate::todos::{Effects, Origin, ToolError, Tools};

pub(super) const LIST_RUNS: &str = "list_runs";
pub(super) const GET_RUN: &str = "get_run";

const STATUSES: &[&str] = &["running", "succeeded", "failed", "cancelled"];

const READ_ONLY: Effects = Effects {
    read_only: true,
    destructive: false,
    idempotent: true,
};

/// `list_runs` and `get_run`: (name, title, description, input schema, effects).
pub(super) fn definitions() -> [(&'static str, &'static str, &'static str, Value, Effects); 2] {
    [
        (
            LIST_RUNS,
            "List workflow runs",
            "List workflow runs, newest first: run id (which is also its task id), workflow, \
             status, progress and status message. Optionally only runs of one status.",
            json!({
                "type": "object",
                "properties": {
                    "status": { "type": "string", "enum": STATUSES },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 100, "default": 20 }
                },
                "additionalProperties": false
            }),
            READ_ONLY,
        ),
        (
            GET_RUN,
            "Get a workflow run",
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
            READ_ONLY,
        ),
    ]
}

fn finish(
    tools: &Tools,
    name: &str,
    args: &Map<String, Value>,
    result: Result<Value, ToolError>,
    caller: &Caller,
) -> Envelope {
    let outcome = match &result {
        Ok(_) => AuditOutcome::Ok,
        Err(error) if error.code == crate::todos::ErrorCode::NotFound => AuditOutcome::NotFound,
        Err(error) if error.code == crate::todos::ErrorCode::InternalError => AuditOutcome::Error,
        Err(_) => AuditOutcome::Rejected,
    };
    tools.audit(name, args, outcome, Origin::of(caller.principal()));
    envelope::of_result(result)
}

pub(super) fn list_runs(
    registry: &Registry,
    tools: &Tools,
    args: &Map<String, Value>,
    caller: &Caller,
) -> Envelope {
    let mut check = Checker::new();
    check.known_keys(args, "", &["status", "limit"]);
    let status = args
        .get("status")
        .and_then(|v| check.one_of(v, "status", STATUSES));
    let limit = match args.get("limit") {
        None => Some(20),
        Some(value) => check.id(value, "limit").filter(|limit| {
            let fits = *limit <= 100;
            if !fits {
                check.problem("limit", "must be at most 100");
            }
            fits
        }),
    };
    let result = check.finish().and_then(|()| {
        let limit = limit.unwrap_or(20) as usize;
        let runs = registry
            .runs(status, caller.listing(), limit)
            .map_err(|_| ToolError::internal())?;
        let list: Vec<Value> = runs
            .into_iter()
            .map(|run| {
                json!({
                    "runId": run.id,
                    "taskId": run.id,
                    "workflow": run.workflow,
                    "status": run.status,
                    "progress": run.progress,
                    "message": run.message,
                    "createdAt": run.created_at,
                })
            })
            .collect();
        Ok(Value::Array(list))
    });
    finish(tools, LIST_RUNS, args, result, caller)
}

pub(super) fn get_run(
    registry: &Registry,
    tools: &Tools,
    args: &Map<String, Value>,
    caller: &Caller,
) -> Envelope {
    let mut check = Checker::new();
    check.known_keys(args, "", &["run_id"]);
    let run_id = match args.get("run_id") {
        Some(value) => check.string(value, "run_id", 1, 64),
        None => {
            check.problem("run_id", "is required");
            None
        }
    };
    let result = check.finish().and_then(|()| {
        let run_id = run_id.unwrap_or_default();
        let not_found = || ToolError::not_found(format!("no run with id {run_id}"));
        // Another principal's run is as unknown as a run that never was.
        match registry.run_owner(&run_id) {
            Ok(Some(owner)) if caller.may_see(&owner) => {}
            Ok(_) => return Err(not_found()),
            Err(_) => return Err(ToolError::internal()),
        }
        match registry.run_view(&run_id) {
            Ok(Some(view)) => Ok(view),
            Ok(None) => Err(not_found()),
            Err(_) => Err(ToolError::internal()),
        }
    });
    finish(tools, GET_RUN, args, result, caller)
}
