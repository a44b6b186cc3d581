//! The SEP-2663 task protocol (`io.modelcontextprotocol/tasks`, with 2026-07-28): the
//! server decides which calls become tasks, `tasks/get` inlines the result or the
//! questions, `tasks/update` takes answers, and `tasks/cancel` is an acknowledgement.
//!
//! rmcp parses these requests and refuses them to a client that did not declare the
//! extension (`-32021`); the handler's `get_task`, `update_task` and `cancel_task` land
//! here.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, GetTaskResult, InputRequests, JsonObject,
    Task, TaskPayload, TaskStatus as WireStatus,
};
use serde_json::{Map, Value, json};

use super::{Era, NotStarted, internal, questions};
use crate::app::Caller;
use crate::engine::question::Capabilities;
use crate::runs::{TaskStatus, TaskView};
use crate::server::Server;
use crate::server::results;

/// The `_meta` key under which a run's task lists its sub-tasks.
pub(crate) const SUB_TASKS_META: &str = "x-mcp-task-server/subTasks";

/// At most this many sub-tasks are listed in a run's task.
const SUB_TASKS_SHOWN: usize = 100;

/// A task's base fields in this protocol. A run that failed is `completed` here, its
/// result carrying `isError`: `failed` is for protocol faults.
/// The flat `CreateTaskResult` of a task, as a call that made it answers.
pub(super) fn created(view: &TaskView) -> CallToolResponse {
    CallToolResponse::Task(CreateTaskResult::new(wire_task(view)))
}

fn wire_task(view: &TaskView) -> Task {
    let status = match view.status() {
        TaskStatus::Working => WireStatus::Working,
        TaskStatus::InputRequired => WireStatus::InputRequired,
        TaskStatus::Completed | TaskStatus::Failed => WireStatus::Completed,
        TaskStatus::Cancelled => WireStatus::Cancelled,
    };
    let mut task = Task::new(
        view.task_id.clone(),
        status,
        view.created_at.clone(),
        view.last_updated_at.clone(),
    )
    .with_ttl_ms(u64::try_from(view.ttl_ms).unwrap_or(0))
    .with_poll_interval_ms(u64::try_from(view.poll_interval_ms).unwrap_or(1000));
    if let Some(message) = &view.status_message {
        task = task.with_status_message(message.clone());
    }
    task
}

impl Server {
    /// A `tools/call` that declared the extension: a task for a workflow, a synchronous
    /// answer for anything else, and for a rejected call.
    pub(in crate::server) fn create_extension_task(
        &self,
        name: &str,
        args: Map<String, Value>,
        caller: &Caller,
    ) -> Result<CallToolResponse, McpError> {
        match self.start_task(name, args, Era::V2026_07_28, caller, None) {
            Ok(view) => Ok(created(&view)),
            Err(NotStarted::Rejected(envelope)) => Ok(results::reply_as(
                envelope,
                self.app.published_tools().result_form(name),
            )
            .into()),
            Err(NotStarted::Fault(error)) => Err(error),
        }
    }

    /// `tasks/get` from a client that can answer what `can` says.
    pub(in crate::server) fn get_extension_task(
        &self,
        task_id: &str,
        can: Capabilities,
        caller: &Caller,
    ) -> Result<GetTaskResult, McpError> {
        // The task, its result and its sub-tasks are read in one snapshot. Questions are
        // not: putting them to the client may write (`input_requests`).
        let (view, payload, subs) = self.reading(|| {
            let view = self.task_of(task_id, Era::V2026_07_28, caller)?;
            let payload = match view.status() {
                TaskStatus::Working => Some(TaskPayload::Working),
                TaskStatus::Cancelled => Some(TaskPayload::Cancelled),
                TaskStatus::InputRequired => None,
                TaskStatus::Completed | TaskStatus::Failed => {
                    let result = self
                        .final_result(&view)?
                        .expect("a finished task has a result");
                    Some(TaskPayload::Completed {
                        result: results::task_result(result)?,
                    })
                }
            };
            let subs = match view.parent_task_id {
                None => Some(self.sub_task_list(&view)?),
                Some(_) => None,
            };
            Ok((view, payload, subs))
        })?;
        let payload = match payload {
            Some(payload) => payload,
            None => TaskPayload::InputRequired {
                input_requests: self.input_requests(&view, can)?,
            },
        };
        let mut reply = GetTaskResult::new(DetailedTask::new(wire_task(&view), payload));
        if let Some(subs) = subs {
            let mut meta = JsonObject::new();
            meta.insert(SUB_TASKS_META.into(), subs);
            reply.meta = Some(rmcp::model::MetaObject(meta));
        }
        Ok(reply)
    }

    /// The run's open questions (or the unit's) as `inputRequests`; a model-only sample is
    /// refused instead when the client has no model ([`questions::refuse_without_model`]).
    fn input_requests(
        &self,
        view: &TaskView,
        can: Capabilities,
    ) -> Result<InputRequests, McpError> {
        let open = self.app.open_questions_of(view).map_err(internal)?;
        let open = questions::refuse_without_model(&self.app, &view.run_id, open, can)
            .map_err(internal)?;
        questions::input_requests(&open, can).map_err(internal)
    }

    /// A run's first sub-tasks (id, node, status, progress), for its task's `_meta`.
    pub(in crate::server) fn sub_task_list(&self, view: &TaskView) -> Result<Value, McpError> {
        let subs = (self.app)
            .first_sub_tasks(view, SUB_TASKS_SHOWN)
            .map_err(internal)?;
        let list = subs
            .iter()
            .map(|sub| {
                let mut entry = json!({
                    "taskId": sub.task_id,
                    "node": sub.node_id,
                    "status": sub.status,
                    "progress": sub.progress,
                });
                if let Some(instance) = sub.instance {
                    entry["instance"] = json!(instance);
                }
                // A child run's unit sits under the `workflow` node's unit, not the run.
                if let Some(parent) = sub.parent_task_id.as_ref().filter(|p| **p != view.task_id) {
                    entry["parentTaskId"] = json!(parent);
                }
                entry
            })
            .collect();
        Ok(Value::Array(list))
    }

    /// `tasks/update` from a client that can answer what `can` says: answers by key.
    /// Keys that name no open question are ignored; an answer that does not fit is
    /// refused, and its question asked again under a new key, on the next `tasks/get`
    /// (the protocol's updates are eventually consistent).
    pub(in crate::server) fn update_extension_task(
        &self,
        task_id: &str,
        responses: &std::collections::BTreeMap<String, Value>,
        can: Capabilities,
        caller: &Caller,
    ) -> Result<(), McpError> {
        let view = self.task_of(task_id, Era::V2026_07_28, caller)?;
        questions::take_responses(&self.app, &view, responses, can).map_err(internal)
    }

    /// `tasks/cancel`: acknowledged whatever the task's state.
    pub(in crate::server) async fn cancel_extension_task(
        &self,
        task_id: &str,
        caller: &Caller,
    ) -> Result<(), McpError> {
        let view = self.task_of(task_id, Era::V2026_07_28, caller)?;
        self.cancel_task(&view, caller).await?;
        Ok(())
    }
}
