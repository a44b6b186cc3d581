//! Runs as MCP tasks: what the two task protocols share. A call becomes a run in the
//! background, recorded with the protocol it was created under, and is answered with the
//! task as that record wrote it; afterwards its task is read from the registry, in this
//! process or in one started after a restart.
//!
//! Invariant: a task is visible only to requests of the protocol it was created under,
//! so a client never gets the other protocol's shapes; to the other it is unknown.

pub(super) mod v2026_07_28;
pub(super) mod v2025_11_25;
pub(super) mod questions;
mod rounds;

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResult;
use serde_json::{Map, Value};

use super::caller::Caller;
use super::envelope::{self, Envelope};
use super::handler::Route;
use super::{Server, results, workflow_tools};
use crate::engine::RunOptions;
use crate::engine::journal::RunOrigin;
use crate::engine::report::NodeStatus;
use crate::store::AuditOutcome;
use crate::runs::{Registry, TaskStatus, TaskView};
use crate::todos::{Origin, ToolError};

/// How often a request that waits on a task (a blocking `tasks/result`) reads it again.
/// A run this process drives wakes it at once when it ends.
const TASK_POLL: Duration = Duration::from_millis(100);

/// How long cancelling a sub-task waits for its run's driver to end it.
const SUB_TASK_CANCEL_WAIT: Duration = Duration::from_secs(5);

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
    fn as_str(self) -> &'static str {
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
    pub(super) fn registry(&self) -> Result<&Registry, McpError> {
        self.registry
            .as_deref()
            .ok_or_else(|| McpError::internal_error("this server keeps no tasks", None))
    }

    /// Refuses a run to a principal that has as many unfinished runs as the server allows
    /// each one (the refusal audited, as every call is).
    pub(super) fn run_quota(
        &self,
        caller: &Caller,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<(), Envelope> {
        let (Some(limit), Some(principal), Some(registry)) =
            (self.max_runs, caller.principal(), self.registry.as_deref())
        else {
            return Ok(());
        };
        let running = registry.running_runs_of(principal).unwrap_or(0);
        if running < limit {
            return Ok(());
        }
        let origin = Origin::of(Some(principal));
        let tools = self.engine.tools();
        tools.audit(name, args, AuditOutcome::Rejected, origin);
        let message = format!(
            "{principal} has {running} runs in progress, as many as this server allows each \
             caller (--http-max-runs); wait for one to finish, or cancel one"
        );
        Err(envelope::failed("too_many_runs", &message, None))
    }

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
        let registry = self.registry().map_err(NotStarted::Fault)?;
        let mut options = RunOptions {
            observer,
            origin: RunOrigin::Mcp,
            park_questions: true,
            record: true,
            task_label: Some((era.as_str().to_owned(), name.to_owned())),
            owner: caller.owner().clone(),
            ..RunOptions::default()
        };
        let route = self.route(name);
        let mut args = args;
        let _starting;
        let mut retryable = None;
        if route == Some(Route::RunWorkflow) {
            retryable = self
                .take_idempotency_key(name, &mut args, caller.principal())
                .map_err(NotStarted::Rejected)?;
            _starting = self.lock_starting();
            if let Some(view) = self.earlier_task(name, &args, retryable.as_ref(), era, caller)? {
                return Ok(view);
            }
            options.idempotency = retryable.clone().map(|r| (r.key, r.call));
        }
        // After the key: a retry of a run already started gets its task even at the cap.
        self.run_quota(caller, name, &args)
            .map_err(NotStarted::Rejected)?;
        let (handle, nodes) = match route {
            Some(Route::Todo) => (
                self.engine
                    // A todo call has no idempotency key: its arguments are not needed after.
                    .start_tool(name, std::mem::take(&mut args), options)
                    .expect("routed as a todo tool"),
                1,
            ),
            Some(Route::RunWorkflow) => {
                let principal = caller.principal();
                let request = workflow_tools::prepare_run(
                    &self.engine,
                    &self.catalog,
                    self.inline,
                    name,
                    &args,
                    principal,
                )
                .map_err(NotStarted::Rejected)?;
                // The call's audit row commits with the run it starts.
                options.audit = Some((name.to_owned(), args.clone()));
                let nodes = request.plan.steps();
                (
                    self.engine.start(request.plan, request.inputs, options),
                    nodes,
                )
            }
            Some(Route::ListWorkflows | Route::ListRuns | Route::GetRun) | None => {
                return Err(NotStarted::Fault(McpError::invalid_params(
                    format!("tool `{name}` does not run as a task"),
                    None,
                )));
            }
        };
        let run_id = handle.run_id.clone();
        let recorded_ms = handle.recorded_ms;
        let finished = self.finished.clone();
        tokio::spawn(async move {
            let _ = handle.join.await;
            finished.notify_waiters();
        });
        // The reply is the task as its run's first transaction wrote it: reading it back
        // would wait behind the run's own commits, which start at once on another worker.
        if let Some(created_ms) = recorded_ms {
            let label = (era.as_str(), name);
            let owner = caller.owner();
            return Ok(registry.created_task(&run_id, created_ms, nodes, label, owner));
        }
        self.engine.cancel_local(&run_id);
        // A todo call audits itself when its node runs; a workflow call's row was to commit
        // with its run.
        if route == Some(Route::RunWorkflow) {
            let tools = self.engine.tools();
            tools.audit(
                name,
                &args,
                AuditOutcome::Error,
                Origin::of(caller.principal()),
            );
        }
        // Another process may have started a run under the same key first.
        if let Some(view) = self.earlier_task(name, &args, retryable.as_ref(), era, caller)? {
            return Ok(view);
        }
        Err(NotStarted::Fault(McpError::internal_error(
            "the run could not be recorded, so it cannot be a task",
            None,
        )))
    }

    /// The task of the run an earlier call with the same idempotency key started, if any.
    fn earlier_task(
        &self,
        name: &str,
        args: &Map<String, Value>,
        retryable: Option<&super::idempotency::Retryable>,
        era: Era,
        caller: &Caller,
    ) -> Result<Option<TaskView>, NotStarted> {
        let Some(retryable) = retryable else {
            return Ok(None);
        };
        let earlier = self
            .earlier_run(name, args, retryable)
            .map_err(NotStarted::Rejected)?;
        let Some(run_id) = earlier else {
            return Ok(None);
        };
        self.task_of(&run_id, era, caller).map(Some).map_err(|_| {
            NotStarted::Fault(McpError::invalid_params(
                "this idempotency key was used by a call of another task protocol",
                None,
            ))
        })
    }

    /// The task `task_id` if a request of `era` from `caller` may see it. Another
    /// principal's task is as unknown as one that never was.
    /// Runs `work`, the reads that answer one request, in one read transaction of the
    /// store: one snapshot, and one read lock instead of one per statement.
    pub(super) fn reading<T>(
        &self,
        work: impl FnOnce() -> Result<T, McpError>,
    ) -> Result<T, McpError> {
        self.registry()?.store().reading(work).map_err(internal)?
    }

    pub(super) fn task_of(
        &self,
        task_id: &str,
        era: Era,
        caller: &Caller,
    ) -> Result<TaskView, McpError> {
        let view = self.registry()?.task(task_id).map_err(internal)?;
        match view {
            Some(view)
                if view.era.as_deref() == Some(era.as_str()) && caller.may_see(&view.owner) =>
            {
                Ok(view)
            }
            _ => Err(unknown_task(task_id)),
        }
    }

    /// What the call would have returned, for a finished task: a run's report, a todo
    /// tool's result, or a sub-task's output. `None` while the task is unfinished.
    pub(super) fn final_result(&self, view: &TaskView) -> Result<Option<CallToolResult>, McpError> {
        let status = view.status();
        if !status.is_terminal() {
            return Ok(None);
        }
        let registry = self.registry()?;
        if view.parent_task_id.is_some() {
            let unit = registry.unit_of(view).map_err(internal)?;
            let envelope = match unit {
                Some(unit) if unit.status == NodeStatus::Succeeded => {
                    envelope::ok(unit.output.unwrap_or_default())
                }
                Some(unit) if unit.status == NodeStatus::Skipped => envelope::ok(Value::Null),
                Some(unit) => match unit.error {
                    Some(error) => envelope::failed(error.code, &error.message, None),
                    None => envelope::failed(
                        unit.status.as_str(),
                        unit.reason.as_deref().unwrap_or("the node did not succeed"),
                        None,
                    ),
                },
                None => cancelled(),
            };
            return Ok(Some(results::reply(envelope)));
        }
        let Some(report) = registry.report(&view.run_id).map_err(internal)? else {
            // Cancelled at the client's request before its run stopped.
            return Ok(Some(results::reply(cancelled())));
        };
        let todo = view
            .tool
            .as_deref()
            .is_some_and(|tool| self.route(tool) == Some(Route::Todo));
        if !todo {
            let reply = workflow_tools::run_reply(&report, self.engine.workspace());
            let form = self.result_form(view.tool.as_deref().unwrap_or_default());
            return Ok(Some(results::reply_as(reply, form)));
        }
        let node = report.nodes.into_values().next().unwrap_or_default();
        let result = match (node.status, node.output, node.error) {
            (NodeStatus::Succeeded, Some(data), _) => Ok(data),
            (_, _, Some(error)) => Err(error.as_tool_error().unwrap_or_else(ToolError::internal)),
            (NodeStatus::Cancelled, _, _) | (_, _, None) if status == TaskStatus::Cancelled => {
                return Ok(Some(results::reply(cancelled())));
            }
            _ => Err(ToolError::internal()),
        };
        Ok(Some(results::tool_result(result)))
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
                let open = questions::of_task(self.registry()?, &view).map_err(internal)?;
                // An answered question stays in the task's state until its driver commits
                // what follows; only questions still open count.
                if !open.is_empty() {
                    return Ok(Settled::Asking(view, open));
                }
            }
            self.task_changed().await;
        }
    }

    /// Waits until the task may have changed: a run of this process ended, the database
    /// told of a task's change (PostgreSQL, from any host), or a poll interval passed.
    pub(super) async fn task_changed(&self) {
        let finished = self.finished.notified();
        let elsewhere = self
            .registry
            .as_ref()
            .map(|r| r.store().wakes().tasks.notified());
        let elsewhere = async move {
            match elsewhere {
                Some(notified) => notified.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = finished => {}
            _ = elsewhere => {}
            _ = tokio::time::sleep(TASK_POLL) => {}
        }
    }

    /// Cancels a task: a run's task at once (it is `cancelled` before this returns, and
    /// stays so), a sub-task once its run's driver has ended its unit, which it does at
    /// once; the trigger rules of the nodes downstream decide what follows. False if the
    /// task had finished.
    pub(super) async fn cancel_task(&self, view: &TaskView) -> Result<bool, McpError> {
        if view.parent_task_id.is_some() {
            return self.cancel_sub_task(view).await;
        }
        let cancelled = self
            .registry()?
            .cancel_task_now(&view.run_id)
            .map_err(internal)?;
        if cancelled {
            self.engine.cancel_local(&view.run_id);
        }
        Ok(cancelled)
    }

    async fn cancel_sub_task(&self, view: &TaskView) -> Result<bool, McpError> {
        if view.status().is_terminal() {
            return Ok(false);
        }
        let node = view.node_id.as_deref().unwrap_or_default();
        let instance = view.instance.and_then(|k| usize::try_from(k).ok());
        if !self.engine.cancel_unit(&view.run_id, node, instance) {
            return Err(McpError::invalid_params(
                "this sub-task's run is driven by another process; cancel its parent task",
                None,
            ));
        }
        let deadline = tokio::time::Instant::now() + SUB_TASK_CANCEL_WAIT;
        while tokio::time::Instant::now() < deadline {
            let now = self.registry()?.task(&view.task_id).map_err(internal)?;
            if let Some(now) = now.filter(|now| now.status().is_terminal()) {
                return Ok(now.status() == TaskStatus::Cancelled);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(McpError::internal_error(
            "the sub-task's run did not end it in time",
            None,
        ))
    }
}

fn cancelled() -> Envelope {
    envelope::failed("run_cancelled", "the task was cancelled", None)
}
