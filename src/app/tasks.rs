//! Runs as tasks, as every task protocol reads them: a task as its caller may see it, its
//! final answer once it has finished, waiting for it to change, and cancelling it.

use std::time::Duration;

use serde_json::Value;

use super::envelope::{self, Envelope};
use super::workflows::run_reply;
use super::{App, Caller, Route};
use crate::engine::definition::ResultForm;
use crate::engine::report::NodeStatus;
use crate::runs::{TaskStatus, TaskView};
use crate::store::{AuditOutcome, StoreError};
use crate::todos::ErrorCode;

/// How often a request that waits on a task (a blocking `tasks/result`) reads it again.
/// A run this process drives wakes it at once when it ends.
const TASK_POLL: Duration = Duration::from_millis(100);

/// How long cancelling a sub-task waits for its run's driver to end it.
const SUB_TASK_CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Why a task was not cancelled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CancelError {
    #[error("this sub-task's run is driven by another process; cancel its parent task")]
    DrivenElsewhere,
    #[error("the sub-task's run did not end it in time")]
    NotInTime,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl App {
    /// Task `task_id`, if it was created under `protocol` and `caller` may see it. Another
    /// principal's task is as unknown as one that never was.
    pub(crate) fn task(
        &self,
        task_id: &str,
        protocol: &str,
        caller: &Caller,
    ) -> Result<Option<TaskView>, StoreError> {
        let view = self.registry.task(task_id)?;
        Ok(
            view.filter(|view| {
                view.era.as_deref() == Some(protocol) && caller.may_see(&view.owner)
            }),
        )
    }

    /// Runs `work`, the reads that answer one request, on one snapshot of the store.
    pub(crate) fn reading<T>(&self, work: impl FnOnce() -> T) -> Result<T, StoreError> {
        self.registry.reading(work)
    }

    /// What the call would have answered, for a finished task: a run's report, a todo
    /// tool's result, or a sub-task's output; and the form its tool answers in. `None`
    /// while the task is unfinished.
    pub(crate) fn final_answer(
        &self,
        view: &TaskView,
    ) -> Result<Option<(Envelope, ResultForm)>, StoreError> {
        let status = view.status();
        if !status.is_terminal() {
            return Ok(None);
        }
        if view.parent_task_id.is_some() {
            return Ok(Some((self.sub_task_answer(view)?, ResultForm::Envelope)));
        }
        let Some(report) = self.registry.report(&view.run_id)? else {
            // Cancelled at the client's request before its run stopped.
            return Ok(Some((cancelled(), ResultForm::Envelope)));
        };
        let tool = view.tool.as_deref().unwrap_or_default();
        if self.tools.route(tool) != Some(Route::Todo) {
            let form = self.tools.result_form(tool);
            return Ok(Some((run_reply(&report, self.engine.workspace()), form)));
        }
        let node = report.nodes.into_values().next().unwrap_or_default();
        let unanswered = node.error.is_none()
            && !(node.status == NodeStatus::Succeeded && node.output.is_some());
        if unanswered && status == TaskStatus::Cancelled {
            return Ok(Some((cancelled(), ResultForm::Envelope)));
        }
        let answer = envelope::of_result(node.into_tool_result());
        Ok(Some((answer, ResultForm::Envelope)))
    }

    fn sub_task_answer(&self, view: &TaskView) -> Result<Envelope, StoreError> {
        Ok(match self.registry.unit_of(view)? {
            Some(unit) if unit.status == NodeStatus::Succeeded => {
                envelope::ok(unit.output.unwrap_or_default())
            }
            Some(unit) if unit.status == NodeStatus::Skipped => envelope::ok(Value::Null),
            Some(unit) => match unit.error {
                Some(error) => envelope::failed(error.code, &error.message, None),
                None => envelope::failed(
                    match unit.status {
                        NodeStatus::Cancelled => ErrorCode::Cancelled,
                        _ => ErrorCode::Failed,
                    },
                    unit.reason.as_deref().unwrap_or("the node did not succeed"),
                    None,
                ),
            },
            None => cancelled(),
        })
    }

    /// Waits until a task may have changed: a run this process started for a task ended,
    /// the database told of a task's change (PostgreSQL, from any host), or a poll
    /// interval passed.
    pub(crate) async fn changed(&self) {
        let finished = self.finished.notified();
        let elsewhere = self.registry.task_changed_elsewhere();
        tokio::select! {
            _ = finished => {}
            _ = elsewhere => {}
            _ = tokio::time::sleep(TASK_POLL) => {}
        }
    }

    /// Cancels a task that `caller` may see: a run's task at once (it is `cancelled` before
    /// this returns, and stays so), a sub-task once its run's driver has ended its unit,
    /// which it does at once; the trigger rules of the nodes downstream decide what
    /// follows. False if the task had finished. Audited as any cancel of a run is
    /// (`cancel_run`), or for a sub-task as `cancel_task`.
    pub(crate) async fn cancel_task(
        &self,
        view: &TaskView,
        caller: &Caller,
    ) -> Result<bool, CancelError> {
        let (tool, key, id) = match view.parent_task_id {
            Some(_) => ("cancel_task", "task_id", &view.task_id),
            None => ("cancel_run", "run_id", &view.run_id),
        };
        let cancelled = match view.parent_task_id {
            Some(_) => self.cancel_sub_task(view).await,
            None => self.cancel_run_task(view),
        };
        let outcome = match &cancelled {
            Ok(true) => AuditOutcome::Ok,
            Ok(false) | Err(CancelError::DrivenElsewhere) => AuditOutcome::Rejected,
            Err(_) => AuditOutcome::Error,
        };
        let mut args = serde_json::Map::new();
        args.insert(key.to_owned(), Value::String(id.clone()));
        self.audit((tool, &args), outcome, Some(&view.run_id), caller);
        cancelled
    }

    fn cancel_run_task(&self, view: &TaskView) -> Result<bool, CancelError> {
        let cancelled = self.registry.cancel_task_now(&view.run_id)?;
        if cancelled {
            self.engine.cancel_local(&view.run_id);
        }
        Ok(cancelled)
    }

    async fn cancel_sub_task(&self, view: &TaskView) -> Result<bool, CancelError> {
        if view.status().is_terminal() {
            return Ok(false);
        }
        let node = view.node_id.as_deref().unwrap_or_default();
        let instance = view.instance.and_then(|k| usize::try_from(k).ok());
        if !self.engine.cancel_unit(&view.run_id, node, instance) {
            return Err(CancelError::DrivenElsewhere);
        }
        let deadline = tokio::time::Instant::now() + SUB_TASK_CANCEL_WAIT;
        while tokio::time::Instant::now() < deadline {
            let now = self.registry.task(&view.task_id)?;
            if let Some(now) = now.filter(|now| now.status().is_terminal()) {
                return Ok(now.status() == TaskStatus::Cancelled);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(CancelError::NotInTime)
    }
}

fn cancelled() -> Envelope {
    envelope::failed(ErrorCode::RunCancelled, "the task was cancelled", None)
}
