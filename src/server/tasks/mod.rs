//! Runs as MCP tasks: what the two task protocols share. A call becomes a run in the
//! background, recorded with the protocol it was created under, and is answered with the
//! task as that record wrote it; afterwards its task is read from the registry, in this
//! process or in one started after a restart.
//!
//! Invariant: a task is visible only to requests of the protocol it was created under,
//! so a client never gets the other protocol's shapes; to the other it is unknown.

pub(super) mod questions;
mod rounds;
pub(super) mod v2025_11_25;
pub(super) mod v2026_07_28;

use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResult;
use serde_json::{Map, Value};

use super::{Server, results};
use crate::app::{Caller, Envelope, NotStarted as Refused};
use crate::runs::{TaskStatus, TaskView};

/// The task protocol a task was created under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Era {
    /// 2025-11-25: `params.task`, `tasks/result`, `tasks/list`.
    V2025_11_25,
    /// 2026-07-28 with the SEP-2663 extension `io.modelcontextprotocol/tasks`.
    V2026_07_28,
    /// 2026-07-28 without the extension: a call answered in rounds of `input_required`
    /// results, its run named by the state the client echoes back. No task method sees it.
    Rounds,
}

impl Era {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Era::V2025_11_25 => "2025-11-25",
            Era::V2026_07_28 => "io.modelcontextprotocol/tasks",
            Era::Rounds => "2026-07-28/input-rounds",
        }
    }
}

/// Where a task stands for a request that waits on it.
pub(super) enum Settled {
    /// Finished: what the call would have returned.
    Finished(CallToolResult),
    /// Waiting for answers to these questions.
    Asking(TaskView, Vec<crate::runs::OpenQuestion>),
}

/// Why a call did not become a task.
pub(super) enum NotStarted {
    /// The call was rejected (bad arguments, an unknown workflow); this is its answer.
    Rejected(Envelope),
    /// A protocol fault: an unknown tool, or a task that could not be recorded.
    Fault(McpError),
}

fn internal(error: impl std::fmt::Display) -> McpError {
    McpError::internal_error(format!("the task store failed: {error}"), None)
}

/// `-32602`, which both protocols prescribe for an unknown or expired task id.
pub(super) fn unknown_task(task_id: &str) -> McpError {
    McpError::invalid_params(format!("unknown task: {task_id}"), None)
}

impl Server {
    /// Starts the call of tool `name` as a run in the background, recorded as a task of
    /// `era`, and returns the task as it stands.
    pub(super) fn start_task(
        &self,
        name: &str,
        args: Map<String, Value>,
        era: Era,
        caller: &Caller,
        observer: Option<std::sync::Arc<dyn crate::engine::observer::Observer>>,
    ) -> Result<TaskView, NotStarted> {
        let started = self
            .app
            .start_task(name, args, caller, era.as_str(), observer);
        started.map_err(|refused| match refused {
            Refused::Refused(envelope) => NotStarted::Rejected(envelope),
            Refused::NotATask => NotStarted::Fault(McpError::invalid_params(
                format!("tool `{name}` does not run as a task"),
                None,
            )),
            Refused::OtherProtocol => NotStarted::Fault(McpError::invalid_params(
                "this idempotency key was used by a call of another task protocol",
                None,
            )),
            Refused::NotRecorded => NotStarted::Fault(McpError::internal_error(
                "the run could not be recorded, so it cannot be a task",
                None,
            )),
        })
    }

    /// Runs `work`, the reads that answer one request, in one read transaction of the
    /// store: one snapshot, and one read lock instead of one per statement.
    pub(super) fn reading<T>(
        &self,
        work: impl FnOnce() -> Result<T, McpError>,
    ) -> Result<T, McpError> {
        self.app.reading(work).map_err(internal)?
    }

    /// The task `task_id` if a request of `era` from `caller` may see it. Another
    /// principal's task is as unknown as one that never was.
    pub(super) fn task_of(
        &self,
        task_id: &str,
        era: Era,
        caller: &Caller,
    ) -> Result<TaskView, McpError> {
        let view = self
            .app
            .task(task_id, era.as_str(), caller)
            .map_err(internal)?;
        view.ok_or_else(|| unknown_task(task_id))
    }

    /// What the call would have returned, for a finished task: a run's report, a todo
    /// tool's result, or a sub-task's output. `None` while the task is unfinished.
    pub(super) fn final_result(&self, view: &TaskView) -> Result<Option<CallToolResult>, McpError> {
        let answer = self.app.final_answer(view).map_err(internal)?;
        Ok(answer.map(|(envelope, form)| results::reply_as(envelope, form)))
    }

    /// Waits until the task has finished or waits for answers.
    pub(super) async fn settle(
        &self,
        task_id: &str,
        era: Era,
        caller: &Caller,
    ) -> Result<Settled, McpError> {
        loop {
            let view = self.task_of(task_id, era, caller)?;
            if let Some(result) = self.final_result(&view)? {
                return Ok(Settled::Finished(result));
            }
            if view.status() == TaskStatus::InputRequired {
                let open = self.app.open_questions_of(&view).map_err(internal)?;
                // An answered question stays in the task's state until its driver commits
                // what follows; only questions still open count.
                if !open.is_empty() {
                    return Ok(Settled::Asking(view, open));
                }
            }
            self.app.changed().await;
        }
    }

    /// Cancels a task (see [`crate::app::App::cancel_task`]). False if it had finished.
    pub(super) async fn cancel_task(
        &self,
        view: &TaskView,
        caller: &Caller,
    ) -> Result<bool, McpError> {
        use crate::app::CancelError;
        self.app
            .cancel_task(view, caller)
            .await
            .map_err(|error| match error {
                CancelError::DrivenElsewhere => McpError::invalid_params(error.to_string(), None),
                CancelError::NotInTime => McpError::internal_error(error.to_string(), None),
                CancelError::Store(error) => internal(error),
            })
    }
}
