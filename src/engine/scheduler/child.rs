//! `workflow` nodes: each attempt runs an installed workflow as a child run of its own,
//! linked to this run's node, owned by the same principal, and waits for it; the child's
//! output is the attempt's.
//!
//! A child's id derives from its parent's, the node, the instance and the attempt's
//! number, so that a parent resumed after a crash finds the child its attempt started,
//! finished or not, instead of starting another: each child runs once per attempt, and
//! each of its effects once, as any run's. While it waits, the attempt polls the child's
//! stored state, which it rolls up into the parent's progress, and which is the truth
//! about its end even when the child is driven by another process.
//!
//! Invariant: a child is cancelled when its parent's unit stops (the node or the run
//! cancelled, the run failed or timed out, the attempt timed out), never when the parent
//! only stops driving (its lease lost, its process shutting down): then the child goes on
//! with the parent, wherever that is taken over.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::Run;
use crate::engine::actions::BoxFuture;
use crate::engine::attempt::timed_out;
use crate::engine::journal::{Answers, Journal, JournalError, RunPoll};
use crate::engine::observer::{Event, Progress};
use crate::engine::report::{NodeError, NodeErrorKind, RunReport, RunStatus};
use crate::engine::{Engine, ResumeError, RunHandle, RunOptions, validate};
use crate::todos::ErrorCode;

/// How often a waiting `workflow` node reads its child's state.
const POLL: Duration = Duration::from_millis(250);

/// The units of a tree of runs (a run and the child runs below it), counted against one
/// `max_run_units` budget, so that nesting is no way around it. Each run sets its own
/// count; the tree's is their sum.
pub(crate) struct TreeUnits {
    limit: usize,
    runs: parking_lot::Mutex<HashMap<Arc<str>, usize>>,
}

impl TreeUnits {
    pub(crate) fn new(limit: usize) -> Arc<TreeUnits> {
        Arc::new(TreeUnits {
            limit,
            runs: parking_lot::Mutex::default(),
        })
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Records that `run` has `units`, whatever the tree's total: what a run driven again
    /// (taken over, resumed, picked up) already has.
    pub(crate) fn record(&self, run: &str, units: usize) {
        self.runs.lock().insert(Arc::from(run), units);
    }

    /// Sets `run`'s count to `units` if the tree stays within its limit; else the total
    /// the tree would have.
    pub(crate) fn admit(&self, run: &str, units: usize) -> Result<(), usize> {
        let mut runs = self.runs.lock();
        let others: usize = (runs.iter())
            .filter(|(id, _)| &***id != run)
            .map(|(_, n)| *n)
            .sum();
        let total = others.saturating_add(units);
        if total > self.limit {
            return Err(total);
        }
        runs.insert(Arc::from(run), units);
        Ok(())
    }

    /// Whether the tree holds more than one run.
    pub(crate) fn nested(&self) -> bool {
        self.runs.lock().len() > 1
    }
}

/// What a child run is started with beside its plan: its id, the node that starts it,
/// its depth, and the units budget of its tree.
#[derive(Clone)]
pub(crate) struct ChildOf {
    pub run_id: Arc<str>,
    pub parent: Arc<str>,
    pub node: Arc<str>,
    pub index: usize,
    pub instance: Option<usize>,
    pub depth: u32,
    pub tree: Arc<TreeUnits>,
}

/// A child run's progress, sent to its parent's run loop.
pub(crate) struct ChildTick {
    pub node: usize,
    pub instance: Option<usize>,
    pub run_id: Arc<str>,
    pub percent: u8,
    pub message: Option<String>,
    /// The child (or a run below it) waits for an answer.
    pub asking: bool,
}

/// The id of the child run that attempt `number` of a unit of run `parent` starts: the
/// same in every process, shaped as a version 4 UUID as every run id is.
pub(crate) fn child_run_id(
    parent: &str,
    node: &str,
    instance: Option<usize>,
    number: u32,
) -> String {
    let instance = instance.map_or(String::from("-"), |k| k.to_string());
    let digest = Sha256::digest(format!("{parent}\n{node}\n{instance}\n{number}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

impl Run {
    /// Attempt `number` of a `workflow` node's unit: the child run it starts (or finds),
    /// waited for after `first_wait`, within the node's `timeout`.
    pub(super) fn child_attempt(
        &mut self,
        at: (usize, Option<usize>),
        number: u32,
        name: String,
        inputs: Map<String, Value>,
        first_wait: Duration,
    ) -> BoxFuture<Result<Value, NodeError>> {
        let (node, instance) = at;
        let id = &self.plan.nodes[node].id;
        let run_id: Arc<str> = match self.journal {
            Some(_) => child_run_id(&self.run_id, id, instance, number).into(),
            None => uuid::Uuid::new_v4().to_string().into(),
        };
        let child = Child {
            engine: self.engine.clone(),
            journal: self.journal.clone(),
            name,
            inputs,
            link: ChildOf {
                run_id: Arc::clone(&run_id),
                parent: Arc::clone(&self.run_id),
                node: Arc::clone(id),
                index: node,
                instance,
                depth: self.depth + 1,
                tree: Arc::clone(&self.tree),
            },
            options: RunOptions {
                interaction: self.env.interaction.clone(),
                park_questions: self.answers == Answers::Parked,
                origin: self.origin,
                owner: self.owner.clone(),
                record: true,
                trace: self.trace_child(node, instance),
                ..RunOptions::default()
            },
            ticks: self.child_ticks.clone(),
            at,
            timeout: self.plan.nodes[node].timeout,
        };
        let guard = CancelChild {
            engine: self.engine.clone(),
            journal: self.journal.clone(),
            run_id,
            stop: self.unit_token(node, instance),
            abandoned: Arc::clone(&self.abandoned),
            armed: false,
            token: None,
        };
        Box::pin(child.run(first_wait, guard))
    }
}

impl Run {
    /// A child run moved on: its share counts in this run's progress, committed with the
    /// next batch, and the observer is told.
    pub(super) fn child_ticked(&mut self, tick: ChildTick) {
        if self
            .state
            .unit(tick.node, tick.instance)
            .status
            .is_terminal()
        {
            return;
        }
        if tick.instance.is_none() {
            self.state
                .child_share(tick.node, f64::from(tick.percent) / 100.0);
        }
        // The run asks while a run below it does: its task is `input_required` then.
        self.state
            .child_asking((tick.node, tick.instance), tick.asking);
        let progress = self.state.progress(&self.plan);
        self.emit(Event::ChildProgressed {
            run_id: &self.run_id,
            node: &self.plan.nodes[tick.node].id,
            instance: tick.instance,
            child: &tick.run_id,
            percent: tick.percent,
            message: tick.message.as_deref(),
            progress: Progress {
                done: progress.done,
                total: progress.total,
            },
        });
    }
}

/// Everything an attempt of a `workflow` node needs, away from the run loop.
struct Child {
    engine: Engine,
    journal: Option<Arc<dyn Journal>>,
    name: String,
    inputs: Map<String, Value>,
    link: ChildOf,
    options: RunOptions,
    ticks: UnboundedSender<ChildTick>,
    at: (usize, Option<usize>),
    timeout: Option<Duration>,
}

/// How an attempt found its child.
enum Started {
    /// Driven here: its task ends with its drive.
    Here(RunHandle),
    /// Driven by another process, or already by this one: only its stored state tells.
    Elsewhere,
    /// Finished before: how it ended.
    Ended(Result<Value, NodeError>),
}

impl Child {
    async fn run(self, first_wait: Duration, mut guard: CancelChild) -> Result<Value, NodeError> {
        tokio::time::sleep(first_wait).await;
        let name = self.name.clone();
        let started = self.start()?;
        if let Started::Here(handle) = &started {
            guard.token = Some(handle.cancel.clone());
        }
        guard.armed = true;
        let waited = match self.timeout {
            None => self.wait(started).await,
            Some(limit) => match tokio::time::timeout(limit, self.wait(started)).await {
                Ok(result) => result,
                Err(_) => {
                    guard.cancel_now();
                    return Err(timed_out(limit));
                }
            },
        };
        guard.armed = false;
        tracing::debug!(workflow = %name, child = %guard.run_id, ok = waited.is_ok(), "child run ended");
        waited
    }

    /// Starts the child, or finds the one an earlier attempt with this number started.
    fn start(&self) -> Result<Started, NodeError> {
        let Some(entry) = self.engine.workflow(&self.name) else {
            let message = format!("no installed workflow is named `{}`", self.name);
            return Err(NodeError::new(NodeErrorKind::Unsupported, message));
        };
        let plan = Arc::clone(&entry.plan);
        let limits = self.engine.limits();
        if self.link.depth > limits.max_workflow_depth {
            let message = format!(
                "workflow `{}` would run {} levels below the run at the top, over the \
                 max-workflow-depth budget ({})",
                self.name, self.link.depth, limits.max_workflow_depth
            );
            return Err(NodeError::new(NodeErrorKind::BudgetExceeded, message));
        }
        let inputs = validate::check_inputs(&entry.def, &self.inputs).map_err(|problems| {
            let message = format!(
                "the inputs of workflow `{}` do not fit: {problems}",
                self.name
            );
            NodeError::new(NodeErrorKind::Invalid, message)
        })?;
        let options = self.options.clone();
        let tree = Arc::clone(&self.link.tree);
        let Some(journal) = &self.journal else {
            self.admit(plan.nodes.len())?;
            let link = self.link.clone();
            return Ok(Started::Here(
                self.engine.start_child(plan, inputs, options, link),
            ));
        };
        match journal.load(&self.link.run_id) {
            Ok(stored) => {
                if let Some(status) = stored.finished {
                    tree.record(&self.link.run_id, stored.units.len().max(plan.nodes.len()));
                    let error = failure_of(&stored.units).or(stored.error);
                    let ended = self.ended(status, stored.output, error.as_deref());
                    return Ok(Started::Ended(ended));
                }
                match self
                    .engine
                    .resume_in(&self.link.run_id, options, Some(tree))
                {
                    Ok(handle) => Ok(Started::Here(handle)),
                    Err(ResumeError::AlreadyActive(_))
                    | Err(ResumeError::Journal(JournalError::Held(_))) => Ok(Started::Elsewhere),
                    Err(error) => Err(storage(&error.to_string())),
                }
            }
            Err(JournalError::NotFound(_)) => {
                self.admit_run(journal.as_ref())?;
                self.admit(plan.nodes.len())?;
                let link = self.link.clone();
                Ok(Started::Here(
                    self.engine.start_child(plan, inputs, options, link),
                ))
            }
            Err(error) => Err(storage(&error.to_string())),
        }
    }

    /// Counts the child's nodes against its tree's units.
    fn admit(&self, units: usize) -> Result<(), NodeError> {
        let tree = &self.link.tree;
        tree.admit(&self.link.run_id, units).map_err(|total| {
            let message = format!(
                "workflow `{}` would bring the runs of this tree to {total} units, over the \
                 max-run-units budget ({})",
                self.name,
                tree.limit()
            );
            NodeError::new(NodeErrorKind::BudgetExceeded, message)
        })
    }

    /// Counts the child against its principal's unfinished runs, as a run it started.
    fn admit_run(&self, journal: &dyn Journal) -> Result<(), NodeError> {
        let (Some(cap), Some(principal)) = (
            self.engine.max_runs(),
            self.options.owner.principal.as_deref(),
        ) else {
            return Ok(());
        };
        let running = journal
            .running_runs_of(principal)
            .map_err(|e| storage(&e.to_string()))?;
        if running >= cap {
            let message = format!(
                "workflow `{}` would be one run too many: {principal} has {running} \
                 unfinished runs, the most a principal may have (--http-max-runs)",
                self.name
            );
            return Err(NodeError::new(NodeErrorKind::BudgetExceeded, message));
        }
        Ok(())
    }

    /// Waits for the child to end, sending its progress to the parent as it goes.
    async fn wait(&self, started: Started) -> Result<Value, NodeError> {
        let mut join = match started {
            Started::Ended(result) => return result,
            Started::Here(handle) => Some(handle.join),
            Started::Elsewhere => None,
        };
        let (mut last, mut joined) = (None, None);
        loop {
            if let Some(handle) = join.as_mut() {
                tokio::select! {
                    report = handle => {
                        join = None;
                        if self.journal.is_none() {
                            return self.reported(report);
                        }
                        joined = Some(report);
                    }
                    _ = tokio::time::sleep(POLL) => {}
                }
            } else {
                tokio::time::sleep(POLL).await;
            }
            let Some(journal) = &self.journal else {
                continue;
            };
            // The stored state is the truth: a drive here may end without the run ending
            // (its lease lost), and one elsewhere tells nothing else.
            let polled = match journal.poll(&self.link.run_id) {
                Ok(Some(polled)) => polled,
                // A child whose record failed ran unrecorded here: its report tells.
                Ok(None) => match joined.take() {
                    Some(report) => return self.reported(report),
                    None => return Err(storage("the child run is gone")),
                },
                Err(error) => {
                    tracing::warn!(child = %self.link.run_id, %error, "the child run cannot be read; reading it again");
                    continue;
                }
            };
            if let Some(status) = polled.finished {
                let error = self.first_failure(journal.as_ref()).or(polled.error);
                return self.ended(status, polled.output, error.as_deref());
            }
            self.tick(&polled, &mut last);
        }
    }

    /// Sends the child's progress to the parent when it moved.
    fn tick(&self, polled: &RunPoll, last: &mut Option<(u8, Option<String>, bool)>) {
        let now = (polled.percent, polled.message.clone(), polled.asking);
        if last.as_ref() == Some(&now) {
            return;
        }
        *last = Some(now);
        let _ = self.ticks.send(ChildTick {
            node: self.at.0,
            instance: self.at.1,
            run_id: Arc::clone(&self.link.run_id),
            percent: polled.percent,
            message: polled.message.clone(),
            asking: polled.asking,
        });
    }

    /// The first failure among the stored child's nodes, to tell why it failed.
    fn first_failure(&self, journal: &dyn Journal) -> Option<String> {
        let stored = journal.load(&self.link.run_id).ok()?;
        failure_of(&stored.units)
    }

    /// The result of an unrecorded child, from its report.
    fn reported(
        &self,
        joined: Result<RunReport, tokio::task::JoinError>,
    ) -> Result<Value, NodeError> {
        match joined {
            Ok(report) => {
                let failed = report.nodes.iter().find_map(|(node, report)| {
                    let error = report.error.as_ref()?;
                    Some(format!(
                        "node `{node}`: {}: {}",
                        error.code.as_str(),
                        error.message
                    ))
                });
                let error = failed.or(report.error);
                self.ended(report.status, report.output, error.as_deref())
            }
            Err(_) => Err(NodeError::new(
                NodeErrorKind::Panicked,
                "the child run's task ended abnormally",
            )),
        }
    }

    /// The attempt's result from how its child ended.
    fn ended(
        &self,
        status: RunStatus,
        output: Value,
        error: Option<&str>,
    ) -> Result<Value, NodeError> {
        let (name, id) = (&self.name, &self.link.run_id);
        let message = match status {
            RunStatus::Succeeded => return Ok(output),
            RunStatus::Cancelled => format!("workflow `{name}` (run {id}) was cancelled"),
            _ => format!(
                "workflow `{name}` (run {id}) failed: {}",
                error.unwrap_or("no error given")
            ),
        };
        Err(NodeError::new(NodeErrorKind::WorkflowFailed, message))
    }
}

/// The first failed unit's error among `units`, as `node `id`: code: message`.
fn failure_of(
    units: &[(String, Option<usize>, crate::engine::journal::UnitState)],
) -> Option<String> {
    units.iter().find_map(|(node, instance, unit)| {
        let error = unit.error.as_ref()?;
        let unit = match instance {
            Some(k) => format!("`{node}` item {k}"),
            None => format!("`{node}`"),
        };
        Some(format!(
            "node {unit}: {}: {}",
            error.code.as_str(),
            error.message
        ))
    })
}

fn storage(detail: &str) -> NodeError {
    let message = format!("the child run cannot be read or started: {detail}");
    NodeError::new(NodeErrorKind::Tool(ErrorCode::InternalError), message)
}

/// Cancels a child run its attempt no longer waits for because the unit stopped: on drop,
/// once armed, if the unit's stop token was cancelled and the run was not given up to
/// another process; or at once on the attempt's timeout.
struct CancelChild {
    engine: Engine,
    journal: Option<Arc<dyn Journal>>,
    run_id: Arc<str>,
    stop: CancellationToken,
    abandoned: Arc<AtomicBool>,
    armed: bool,
    /// The child's own cancel, when this process drives it.
    token: Option<CancellationToken>,
}

impl CancelChild {
    fn cancel_now(&mut self) {
        self.armed = false;
        if let Some(token) = &self.token {
            token.cancel();
        }
        self.engine.cancel_local(&self.run_id);
        if let Some(journal) = &self.journal
            && let Err(error) = journal.request_cancel(&self.run_id)
        {
            tracing::warn!(child = %self.run_id, %error, "could not ask for the child run's cancel");
        }
    }
}

impl Drop for CancelChild {
    fn drop(&mut self) {
        if self.armed && self.stop.is_cancelled() && !self.abandoned.load(Ordering::SeqCst) {
            tracing::info!(child = %self.run_id, "cancelling the child run with its node");
            self.cancel_now();
        }
    }
}
