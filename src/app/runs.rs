//! The operations on runs, for every face: list, get, answer, cancel, retry, resume and
//! purge; and the `list_runs` and `get_run` tools on them, validated strictly and audited
//! like every tool.
//!
//! Another principal's run is as unknown as a run that never was. On stdio and at the
//! terminal the caller is the one local user, who may see every run in the database.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::envelope::Envelope;
use super::published::{GET_RUN, LIST_RUNS};
use super::{App, Caller};
use crate::engine::journal::JournalError;
use crate::engine::plan::Plan;
use crate::engine::{ResumeError, RunHandle, RunOptions};
use crate::runs::{AnswerError, RunView};
use crate::schema::whole;
use crate::store::{AuditOutcome, RunSummary, StoreError};
use crate::todos::ToolError;

/// The audit rows of the operations on runs, by the name of the operation.
const CANCEL_RUN: &str = "cancel_run";
const RESUME_RUN: &str = "resume_run";
const RETRY_RUN: &str = "retry_run";

/// Which runs a listing shows.
#[derive(Debug, Clone, Copy)]
pub struct RunFilter<'a> {
    /// Only runs of this status (`running`, `succeeded`, `failed`, `cancelled`).
    pub status: Option<&'a str>,
    /// At most this many, newest first.
    pub limit: usize,
}

/// What a purge deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    /// Finished runs, with their tasks.
    pub runs: usize,
    /// Rows of the history of runs past its TTL.
    pub history: usize,
    /// How long the history of a run is kept from its end, the purged runs' included.
    pub history_ttl: Duration,
}

/// Why an operation on a run did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("no run with id {0}")]
    NotFound(String),
    #[error("run {run_id} already {status}")]
    Finished { run_id: String, status: String },
    #[error(transparent)]
    Resume(#[from] ResumeError),
    #[error(transparent)]
    Answer(#[from] AnswerError),
    #[error("the store failed: {0}")]
    Store(#[from] StoreError),
    /// The caller has as many runs in progress as the server allows each one.
    #[error("{}", too_many_runs(principal, *running))]
    TooManyRuns { principal: String, running: u64 },
}

/// What a caller at its cap of runs in progress is told, wherever it starts one.
pub(super) fn too_many_runs(principal: &str, running: u64) -> String {
    format!(
        "{principal} has {running} runs in progress, as many as this server allows each \
         caller (--http-max-runs); wait for one to finish, or cancel one"
    )
}

/// What a cancel did.
#[derive(Debug)]
pub enum Cancelled {
    /// The run was driven nowhere: this process took it over and ended it in this status.
    Here(String),
    /// Another process drives the run; it stops the run shortly.
    Requested,
}

/// How a stored run is taken up again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Take an unfinished run over and drive it to its end in this process.
    Resume,
    /// Run a failed or cancelled run again, as a new run: nodes that succeeded keep their
    /// results; failed, cancelled and skipped ones run again.
    Retry,
}

impl App {
    /// Runs `caller` may see, newest first.
    pub fn list_runs(
        &self,
        filter: RunFilter<'_>,
        caller: &Caller,
    ) -> Result<Vec<RunSummary>, RunError> {
        Ok(self
            .registry
            .runs(filter.status, caller.listing(), filter.limit)?)
    }

    /// A run's report as stored: its nodes, tasks, questions and answers.
    pub fn get_run(&self, run_id: &str, caller: &Caller) -> Result<RunView, RunError> {
        self.may_see_run(run_id, caller)?;
        let view = self.registry.run_view(run_id)?;
        view.ok_or_else(|| RunError::NotFound(run_id.to_owned()))
    }

    /// Answers the open question of a node (or of one `for_each` instance) of a run; the
    /// run goes on wherever it is driven. Returns the question's key.
    pub fn answer_question(
        &self,
        run_id: &str,
        (node, instance): (&str, Option<usize>),
        answer: &Value,
        caller: &Caller,
    ) -> Result<String, RunError> {
        self.may_see_run(run_id, caller)?;
        Ok(self
            .registry
            .answer_question(run_id, node, instance, answer)?)
    }

    /// Cancels a run wherever it is driven: a run a live process drives is cancelled by
    /// that process within a few seconds; a run nobody drives is taken over and ended here.
    /// Audited (`cancel_run`), whichever face asks: MCP's `tasks/cancel` in either era, the
    /// terminal, the dashboard.
    pub(crate) async fn cancel_run(
        &self,
        run_id: &str,
        caller: &Caller,
    ) -> Result<Cancelled, RunError> {
        let cancelled = self.cancel_run_unaudited(run_id, caller).await;
        self.audit_run_operation(
            CANCEL_RUN,
            run_id,
            cancelled.as_ref().map(|_| run_id),
            caller,
        );
        cancelled
    }

    async fn cancel_run_unaudited(
        &self,
        run_id: &str,
        caller: &Caller,
    ) -> Result<Cancelled, RunError> {
        self.may_see_run(run_id, caller)?;
        if !self.registry.request_cancel(run_id)? {
            return Err(match self.registry.run_status(run_id)? {
                Some(status) => RunError::Finished {
                    run_id: run_id.to_owned(),
                    status,
                },
                None => RunError::NotFound(run_id.to_owned()),
            });
        }
        self.engine.cancel_local(run_id);
        let options = RunOptions::default();
        options.cancel.cancel();
        match self.engine.resume(run_id, options) {
            Ok(handle) => match handle.join.await {
                Ok(report) => Ok(Cancelled::Here(report.status.as_str().to_owned())),
                Err(_) => Ok(Cancelled::Requested),
            },
            Err(ResumeError::Journal(JournalError::Held(_)) | ResumeError::AlreadyActive(_)) => {
                Ok(Cancelled::Requested)
            }
            // The process that drove it heard the cancel asked for above and ended the run
            // before this one could look: the cancel took effect there.
            Err(ResumeError::Journal(JournalError::Finished { .. })) => Ok(Cancelled::Requested),
            Err(error) => Err(error.into()),
        }
    }

    /// Takes stored run `run_id` up again, as `how` says: a resumed run goes on as it
    /// was; a retry is a new run that `caller` owns, keeping the results of the nodes
    /// that succeeded, and counts against its cap of runs in progress as any start does.
    /// Audited (`resume_run`, `retry_run`; a retry under the new run), whichever face asks.
    pub(crate) fn restart_run(
        &self,
        run_id: &str,
        how: Restart,
        options: RunOptions,
        caller: &Caller,
    ) -> Result<RunHandle, RunError> {
        let tool = match how {
            Restart::Resume => RESUME_RUN,
            Restart::Retry => RETRY_RUN,
        };
        let restarted = self.restart_run_unaudited(run_id, how, options, caller);
        let under = restarted.as_ref().map(|handle| handle.run_id.as_str());
        self.audit_run_operation(tool, run_id, under, caller);
        restarted
    }

    fn restart_run_unaudited(
        &self,
        run_id: &str,
        how: Restart,
        options: RunOptions,
        caller: &Caller,
    ) -> Result<RunHandle, RunError> {
        self.may_see_run(run_id, caller)?;
        Ok(match how {
            Restart::Resume => self.engine.resume(run_id, options)?,
            Restart::Retry => {
                if let Some((principal, running)) = self.at_run_cap(caller) {
                    return Err(RunError::TooManyRuns { principal, running });
                }
                let options = RunOptions {
                    owner: caller.owner().clone(),
                    trace: crate::telemetry::runs::TraceFrom::request(),
                    ..options
                };
                self.engine.retry(run_id, options)?
            }
        })
    }

    /// Starts a run of `plan` for the local user at the terminal, recorded with the audit
    /// row of the call that starts it (`run_workflow`, as over MCP).
    pub(crate) fn start_at_terminal(
        &self,
        plan: Arc<Plan>,
        inputs: Map<String, Value>,
        options: RunOptions,
    ) -> RunHandle {
        let mut args = Map::new();
        args.insert("workflow".to_owned(), json!(plan.name));
        args.insert("inputs".to_owned(), Value::Object(inputs.clone()));
        let options = RunOptions {
            audit: Some(("run_workflow".to_owned(), args)),
            ..options
        };
        self.engine.start(plan, inputs, options)
    }

    /// The plan stored run `run_id` runs.
    pub(crate) fn stored_plan(&self, run_id: &str) -> Result<Arc<Plan>, RunError> {
        use crate::engine::journal::Journal as _;
        let stored = self.registry.load(run_id);
        Ok(stored
            .map_err(|error| RunError::Resume(ResumeError::Journal(error)))?
            .plan)
    }

    /// Deletes runs that finished longer ago than `older_than`, and their tasks (never the
    /// audit log), and the history of runs past its own TTL (`history_ttl`): the history
    /// of the runs purged here stays until then. Returns how many of each went.
    pub(crate) fn purge_runs(&self, older_than: Duration) -> Result<Purged, RunError> {
        Ok(Purged {
            runs: self.registry.purge(older_than)?,
            history: self.registry.purge_expired_history()?,
            history_ttl: self.registry.config().history_ttl,
        })
    }

    /// The audit row of an operation on run `run_id` by `caller`: `done` is the run it is
    /// filed under when it was done (the run itself, or the new run of a retry), or why it
    /// was not. A refusal is filed under the run only when the caller may see it: a probe
    /// of another's run is no row of that run's.
    fn audit_run_operation(
        &self,
        tool: &str,
        run_id: &str,
        done: Result<&str, &RunError>,
        caller: &Caller,
    ) {
        let mut args = Map::new();
        args.insert("run_id".to_owned(), Value::String(run_id.to_owned()));
        let (outcome, under) = match done {
            Ok(under) => (AuditOutcome::Ok, Some(under)),
            Err(RunError::NotFound(_)) => (AuditOutcome::NotFound, None),
            Err(RunError::Store(_)) => (AuditOutcome::Error, Some(run_id)),
            Err(_) => (AuditOutcome::Rejected, Some(run_id)),
        };
        self.audit((tool, &args), outcome, under, caller);
    }

    /// Fails unless `caller` may see run `run_id`.
    pub(super) fn may_see_run(&self, run_id: &str, caller: &Caller) -> Result<(), RunError> {
        match self.registry.run_owner(run_id)? {
            Some(owner) if caller.may_see(&owner) => Ok(()),
            _ => Err(RunError::NotFound(run_id.to_owned())),
        }
    }

    /// The `list_runs` tool.
    pub(crate) fn list_runs_tool(&self, args: &Map<String, Value>, caller: &Caller) -> Envelope {
        let result = self.checked(LIST_RUNS, args).and_then(|()| {
            let filter = RunFilter {
                status: args.get("status").and_then(Value::as_str),
                limit: args.get("limit").and_then(whole).map_or(20, |n| n as usize),
            };
            let runs = self
                .list_runs(filter, caller)
                .map_err(|_| ToolError::internal())?;
            Ok(Value::Array(runs.into_iter().map(listed).collect()))
        });
        self.answer_read((LIST_RUNS, args), result, caller)
    }

    /// The `get_run` tool.
    pub(crate) fn get_run_tool(&self, args: &Map<String, Value>, caller: &Caller) -> Envelope {
        let result = self.checked(GET_RUN, args).and_then(|()| {
            let run_id = args
                .get("run_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let view = self.get_run(run_id, caller).map_err(|error| match error {
                RunError::NotFound(_) => ToolError::not_found(format!("no run with id {run_id}")),
                _ => ToolError::internal(),
            })?;
            serde_json::to_value(view).map_err(|_| ToolError::internal())
        });
        self.answer_read((GET_RUN, args), result, caller)
    }
}

/// A run as `list_runs` lists it.
fn listed(run: RunSummary) -> Value {
    json!({
        "runId": run.id,
        "taskId": run.id,
        "workflow": run.workflow,
        "status": run.status,
        "progress": run.progress,
        "message": run.status_message,
        "createdAt": run.created_at,
    })
}
