//! The one call path: a tool call answered now ([`App::call`]), or started as a run in the
//! background for a task ([`App::start_task`]). The run quota, the idempotent start of a
//! workflow's run and the audit row of the call each happen here, once, for both.
//!
//! Invariant: a call with an idempotency key starts at most one run per key and
//! principal. The key is looked up and the run recorded under `starting`, and a start
//! that could not record its run (another process recorded one under the key first)
//! answers with that other run.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::envelope::{self, Envelope};
use super::idempotency::Retryable;
use super::published::Route;
use super::workflows::run_reply;
use super::{App, Caller};
use crate::engine::actions::Interaction;
use crate::engine::journal::RunOrigin;
use crate::engine::observer::Observer;
use crate::engine::report::{RunReport, RunStatus};
use crate::engine::{RunHandle, RunOptions};
use crate::runs::TaskView;
use crate::store::AuditOutcome;
use crate::telemetry::runs::TraceFrom;
use crate::todos::ErrorCode;
use crate::todos::ToolResult;

/// What a call answered now has of its caller: a channel for the run's questions, an
/// observer of its progress, and the token that cancels it. Each may be missing.
#[derive(Default)]
pub(crate) struct CallerChannels {
    pub interaction: Option<Arc<dyn Interaction>>,
    pub observer: Option<Arc<dyn Observer>>,
    pub cancel: Option<CancellationToken>,
}

/// Why a call did not become a task.
pub(crate) enum NotStarted {
    /// The call was refused (bad arguments, an unknown workflow, the quota); this is its
    /// answer, audited.
    Refused(Envelope),
    /// The tool is not one that runs as a task.
    NotATask,
    /// The idempotency key names a run started under another task protocol.
    OtherProtocol,
    /// The run could not be recorded, so it cannot be a task.
    NotRecorded,
}

/// A workflow call's run: started now, or started by an earlier call with its key.
enum Started {
    New { handle: RunHandle, nodes: usize },
    Earlier(String),
}

fn outcome_of(report: &RunReport) -> AuditOutcome {
    match report.status {
        RunStatus::Succeeded => AuditOutcome::Ok,
        _ => AuditOutcome::Error,
    }
}

impl App {
    /// A call answered when it is done; `None` for a tool the application does not have.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: Map<String, Value>,
        caller: &Caller,
        sync: CallerChannels,
    ) -> Option<Envelope> {
        Some(match self.tools.route(tool)? {
            Route::Todo => envelope::of_result(self.call_todo(tool, args, caller).await),
            Route::ListWorkflows => self.list_workflows(&args, caller),
            Route::ListRuns => self.list_runs_tool(&args, caller),
            Route::GetRun => self.get_run_tool(&args, caller),
            Route::RunWorkflow => self.run_workflow(tool, args, caller, sync).await,
        })
    }

    /// A todo tool's call, a one-node run; its audit row commits with its effect.
    pub(crate) async fn call_todo(
        &self,
        tool: &str,
        args: Map<String, Value>,
        caller: &Caller,
    ) -> ToolResult {
        let result = self
            .engine
            .call_tool_for(tool, args, caller.owner().clone());
        result.await.expect("the engine runs every todo tool")
    }

    /// A workflow call answered when its run ends; with an idempotency key that an
    /// earlier call used, the run that call started, awaited.
    async fn run_workflow(
        &self,
        tool: &str,
        mut args: Map<String, Value>,
        caller: &Caller,
        sync: CallerChannels,
    ) -> Envelope {
        let mut options = RunOptions {
            origin: RunOrigin::Mcp,
            interaction: sync.interaction,
            observer: sync.observer,
            owner: caller.owner().clone(),
            trace: TraceFrom::request(),
            ..RunOptions::default()
        };
        if let Some(cancel) = sync.cancel {
            options.cancel = cancel;
        }
        let retryable = match self.take_idempotency_key(tool, &mut args, caller) {
            Ok(retryable) => retryable,
            Err(refused) => return refused,
        };
        let call = (tool, &args);
        let report = match retryable {
            // Without a key the run is driven on this task: nothing else waits for it.
            None => {
                let request = self
                    .run_quota(call, caller)
                    .and_then(|()| self.prepare_run(tool, &args, caller));
                match request {
                    Ok(request) => {
                        (self.engine)
                            .run(request.plan, request.inputs, options)
                            .await
                    }
                    Err(refused) => return refused,
                }
            }
            Some(retryable) => match self.start_workflow(call, Some(&retryable), options, caller) {
                Err(refused) => return refused,
                Ok(Started::Earlier(run_id)) => return self.await_report(&run_id).await,
                Ok(Started::New { handle, .. }) => {
                    // Dropping the call cancels its run, as for a call without a key.
                    let _cancel_on_drop = handle.cancel.clone().drop_guard();
                    match handle.join.await {
                        Ok(report) => report,
                        Err(_) => {
                            return envelope::failed(
                                ErrorCode::InternalError,
                                "the run failed",
                                None,
                            );
                        }
                    }
                }
            },
        };
        self.audit(call, outcome_of(&report), Some(&report.run_id), caller);
        run_reply(&report, self.engine.workspace())
    }

    /// Starts the call of `tool` as a run in the background, recorded as a task under
    /// `protocol` (a label the application does not read), and returns the task as it
    /// stands.
    pub(crate) fn start_task(
        &self,
        tool: &str,
        mut args: Map<String, Value>,
        caller: &Caller,
        protocol: &str,
        observer: Option<Arc<dyn Observer>>,
    ) -> Result<TaskView, NotStarted> {
        let options = RunOptions {
            observer,
            origin: RunOrigin::Mcp,
            park_questions: true,
            record: true,
            task_label: Some((protocol.to_owned(), tool.to_owned())),
            owner: caller.owner().clone(),
            trace: TraceFrom::request(),
            ..RunOptions::default()
        };
        let workflow = match self.tools.route(tool) {
            Some(Route::Todo) => false,
            Some(Route::RunWorkflow) => true,
            _ => return Err(NotStarted::NotATask),
        };
        let retryable = match workflow {
            true => {
                (self.take_idempotency_key(tool, &mut args, caller)).map_err(NotStarted::Refused)?
            }
            false => None,
        };
        let call = (tool, &args);
        let started = match workflow {
            true => {
                // The call's audit row commits with the run it starts.
                let options = RunOptions {
                    audit: Some((tool.to_owned(), args.clone())),
                    ..options
                };
                self.start_workflow(call, retryable.as_ref(), options, caller)
            }
            false => self.run_quota(call, caller).map(|()| {
                // A todo call audits itself when its node runs.
                let handle = self.engine.start_tool(tool, args.clone(), options);
                let handle = handle.expect("routed as a todo tool");
                Started::New { handle, nodes: 1 }
            }),
        };
        let (handle, nodes) = match started.map_err(NotStarted::Refused)? {
            Started::Earlier(run_id) => return self.earlier_task(&run_id, protocol, caller),
            Started::New { handle, nodes } => (handle, nodes),
        };
        let (run_id, recorded_ms) = (handle.run_id.clone(), handle.recorded_ms);
        let finished = self.finished.clone();
        tokio::spawn(async move {
            let _ = handle.join.await;
            finished.notify_waiters();
        });
        // The reply is the task as its run's first transaction wrote it: reading it back
        // would wait behind the run's own commits, which start at once on another worker.
        if let Some(created_ms) = recorded_ms {
            let label = (protocol, tool);
            let owner = caller.owner();
            return Ok(self
                .registry
                .created_task(&run_id, created_ms, nodes, label, owner));
        }
        self.engine.cancel_local(&run_id);
        if workflow {
            // Its row was to commit with its run.
            self.audit(call, AuditOutcome::Error, None, caller);
        }
        // Another process may have started a run under the same key first.
        if let Some(retryable) = &retryable
            && let Ok(Some(run_id)) = self.earlier_run(tool, &args, retryable, caller)
        {
            return self.earlier_task(&run_id, protocol, caller);
        }
        Err(NotStarted::NotRecorded)
    }

    /// Starts a workflow call's run, unless an earlier call with its key started one. A
    /// refused call is audited, and its envelope is its answer.
    fn start_workflow(
        &self,
        (tool, args): (&str, &Map<String, Value>),
        retryable: Option<&Retryable>,
        mut options: RunOptions,
        caller: &Caller,
    ) -> Result<Started, Envelope> {
        let _starting = retryable.map(|_| self.starting.lock());
        if let Some(retryable) = retryable {
            if let Some(run_id) = self.earlier_run(tool, args, retryable, caller)? {
                return Ok(Started::Earlier(run_id));
            }
            options.idempotency = Some((retryable.key.clone(), retryable.call.clone()));
        }
        // After the key: a retry of a run already started is answered even at the cap.
        self.run_quota((tool, args), caller)?;
        let request = self.prepare_run(tool, args, caller)?;
        let nodes = request.plan.steps();
        let handle = self.engine.start(request.plan, request.inputs, options);
        if retryable.is_some() && handle.recorded_ms.is_none() {
            // Another process started a run under the same key first: its run is this one.
            if let Some(retryable) = retryable
                && let Ok(Some(run_id)) = self.earlier_run(tool, args, retryable, caller)
            {
                handle.cancel.cancel();
                return Ok(Started::Earlier(run_id));
            }
        }
        Ok(Started::New { handle, nodes })
    }

    /// The task of the run an earlier call with the same idempotency key started.
    fn earlier_task(
        &self,
        run_id: &str,
        protocol: &str,
        caller: &Caller,
    ) -> Result<TaskView, NotStarted> {
        match self.task(run_id, protocol, caller) {
            Ok(Some(view)) => Ok(view),
            _ => Err(NotStarted::OtherProtocol),
        }
    }

    /// Refuses a run to a principal that has as many unfinished runs as the application
    /// allows each one (the refusal audited, as every call is).
    fn run_quota(
        &self,
        call: (&str, &Map<String, Value>),
        caller: &Caller,
    ) -> Result<(), Envelope> {
        let Some((principal, running)) = self.at_run_cap(caller) else {
            return Ok(());
        };
        self.audit(call, AuditOutcome::Rejected, None, caller);
        let message = super::runs::too_many_runs(&principal, running);
        Err(envelope::failed(ErrorCode::TooManyRuns, &message, None))
    }

    /// The caller's principal and its runs in progress, when it may start no more.
    pub(super) fn at_run_cap(&self, caller: &Caller) -> Option<(String, u64)> {
        let (limit, principal) = (self.engine.max_runs()?, caller.principal()?);
        let running = self.registry.running_runs_of(principal).unwrap_or(0);
        (running >= limit).then(|| (principal.to_owned(), running))
    }

    /// Waits for a run to end and answers with its report.
    async fn await_report(&self, run_id: &str) -> Envelope {
        loop {
            match self.registry.report(run_id) {
                Ok(Some(report)) => return run_reply(&report, self.engine.workspace()),
                Ok(None) => self.changed().await,
                Err(_) => {
                    return envelope::failed(
                        ErrorCode::InternalError,
                        "the run cannot be read",
                        None,
                    );
                }
            }
        }
    }
}
