//! The scheduler: one task per run that starts each node as soon as its upstream states
//! allow (no layer barriers), never more than `max_parallel` at once.
//!
//! Node attempts that wait (`wait`, `input`, `sample`, `command`, a retry's backoff) are futures polled
//! by the scheduler's own task (`FuturesUnordered`), not spawned tasks: a hand-off between
//! nodes then costs no cross-thread wake-up, which on a small VM is the dominant cost (tens
//! of microseconds against well under one). Attempts that need no waiting (a tool call,
//! text, a file) are made right here, synchronously.
//!
//! The roles are split by file: this one is the run loop; `state` holds the run's records;
//! `decide` applies trigger rules, conditions and fan-out; `units` makes attempts and
//! settles their outcomes; `persist` writes changes to the journal; `finish` ends the run.

mod cancel;
mod child;
mod commands;
mod complete;
mod decide;
mod files;
mod finish;
mod history;
mod persist;
mod repeat;
mod state;
mod traced;
mod units;
mod waits;

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::actions::{ActionEnv, BoxFuture, Resolved};
use super::journal::{Answers, Journal, RunOrigin, StoredRun, UnitState};
use super::observer::{Event, Observer};
use super::plan::Plan;
use super::report::RunReport;
use crate::store::Owner;
use crate::telemetry::metrics;
pub use cancel::UnitCancel;
pub(crate) use child::{ChildOf, TreeUnits};
use state::RunState;
use units::Woken;

/// How many units may finish synchronously before the run yields to other tasks.
const YIELD_EVERY: usize = 256;

/// How long a run may decide nodes and resolve their templates before it yields to other
/// tasks (the server's other calls, on a one-thread runtime).
const DECIDE_SLICE: std::time::Duration = std::time::Duration::from_millis(5);

/// How long units that finish synchronously may go uncommitted, so that a run that never
/// waits still shows its progress to other processes. Losing them to a crash costs only
/// their recomputation: they have no effects, since a tool call commits everything before
/// it, and so does a file write.
const COMMIT_AT_LEAST_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Why a run stopped before every node was decided.
#[derive(Debug, Clone)]
enum Stop {
    Cancelled,
    NodeFailed(usize),
    TimedOut,
    /// The run was taken over again and again from processes that died driving it, with no
    /// unit finished in between: it is failed rather than driven once more.
    Poisoned(String),
    /// The journal refused a write (the lease went to another process, or storage failed):
    /// this drive stops and writes nothing more of the run. A run lost to storage is
    /// picked up again from what was saved (`engine/pick_up.rs`).
    Lost(String),
}

/// Everything a run is started with.
pub(crate) struct RunSetup {
    pub plan: Arc<Plan>,
    pub env: Arc<ActionEnv>,
    pub run_id: Arc<str>,
    pub inputs: Map<String, Value>,
    pub observer: Option<Arc<dyn Observer>>,
    pub cancel: CancellationToken,
    pub journal: Option<Arc<dyn Journal>>,
    pub answers: Answers,
    /// The run's absolute deadline, when it has one (ms since the Unix epoch).
    pub deadline_ms: Option<i64>,
    /// Stored unit states to start from: a resumed run's, or a retried run's successes.
    pub restored: Vec<(String, Option<usize>, UnitState)>,
    /// Whether the run continues a stored one (its deadline is then the stored one).
    pub resumed: bool,
    /// Requests to cancel one unit of the run, not all of it.
    pub unit_cancels: Option<tokio::sync::mpsc::UnboundedReceiver<UnitCancel>>,
    /// Why the run must not run at all (it could not be recorded, and had to be).
    pub refused: Option<String>,
    /// When this setup recorded a new run (ms since the Unix epoch); `None` for a stored
    /// run taken over, or a run that is not recorded.
    pub recorded_ms: Option<i64>,
    /// Why a stored run is poisoned: it is failed at once, nothing of it driven.
    pub poisoned: Option<String>,
    /// The run is picked up again by the process that drove it, after its journal refused
    /// a write (`engine/pick_up.rs`): it started before, and says so once only.
    pub picked_up: bool,
    /// Who started the run, and who it belongs to: its child runs are the same.
    pub origin: RunOrigin,
    pub owner: Owner,
    /// How deep below the run at the top of its tree the run is.
    pub depth: u32,
    /// The units of the run's whole tree, counted against `max_run_units` together.
    pub tree: Arc<TreeUnits>,
    /// The run's trace in this process, when the engine traces runs.
    pub trace: Option<Box<crate::telemetry::runs::RunTrace>>,
}

/// How a drive ended: the run's report, and whether its journal refused a write for a
/// reason other than the run's lease (the database unreachable, a commit cut off, a full
/// disk), so that the run is to be picked up again from what was saved.
pub(crate) struct Driven {
    pub report: RunReport,
    pub unsaved: bool,
}

impl RunSetup {
    /// The setup of a stored run, to drive it on from where it stopped.
    pub(crate) fn from_stored(stored: StoredRun, env: Arc<ActionEnv>) -> RunSetup {
        RunSetup {
            plan: stored.plan,
            env,
            run_id: stored.run_id.into(),
            inputs: stored.inputs,
            observer: None,
            cancel: CancellationToken::new(),
            journal: None,
            // A caller that was connected to the run is gone with the process.
            answers: match stored.answers {
                Answers::Caller => Answers::Nobody,
                other => other,
            },
            deadline_ms: stored.deadline_ms,
            restored: stored.units,
            resumed: true,
            unit_cancels: None,
            refused: None,
            recorded_ms: None,
            poisoned: None,
            picked_up: false,
            origin: stored.origin,
            owner: stored.owner,
            depth: stored.depth,
            tree: TreeUnits::new(usize::MAX),
            trace: None,
        }
    }
}

pub(super) struct Run {
    plan: Arc<Plan>,
    env: Arc<ActionEnv>,
    run_id: Arc<str>,
    inputs: Map<String, Value>,
    inputs_ctx: Option<minijinja::Value>,
    observer: Option<Arc<dyn Observer>>,
    cancel: CancellationToken,
    /// Cancelled when the run stops for any reason; waiting attempts watch it.
    stop_token: CancellationToken,
    stop: Option<Stop>,
    journal: Option<Arc<dyn Journal>>,
    answers: Answers,
    deadline_ms: Option<i64>,
    resumed: bool,
    state: RunState,
    /// Upstream nodes of each node that are not yet terminal.
    waiting_on: Vec<usize>,
    node_ready: VecDeque<usize>,
    /// `for_each` instances to resolve, and the items of their nodes.
    instance_ready: VecDeque<(usize, usize)>,
    fan_items: std::collections::HashMap<usize, Arc<Vec<Value>>>,
    unit_ready: VecDeque<(usize, Option<usize>, Resolved)>,
    /// Units waiting: on a timer, an answer, or a retry's backoff.
    running: FuturesUnordered<BoxFuture<Woken>>,
    /// When the run's changes were last committed.
    committed_at: std::time::Instant,
    unit_cancels: Option<tokio::sync::mpsc::UnboundedReceiver<UnitCancel>>,
    unit_tokens: cancel::UnitTokens,
    /// The audit rows of file actions made since the last commit, which commits them
    /// with the records of their units.
    audits: Vec<crate::engine::journal::PendingAudit>,
    /// The audit rows of the replies a caller gave to a unit's question during the call
    /// (each asking, taken or not), until the unit settles and writes them.
    replies: std::collections::HashMap<(usize, Option<usize>), Replies>,
    /// The audit row of each unit's command run under way, until the unit settles and
    /// writes it.
    commands_ran: std::collections::HashMap<(usize, Option<usize>), commands::RanRow>,
    poisoned: Option<String>,
    picked_up: bool,
    /// The journal refused a write for a reason other than the lease ([`Driven::unsaved`]).
    unsaved: bool,
    /// The run's units so far (its nodes and the instances of its `for_each` nodes),
    /// counted against `max_run_units` with the rest of its tree's.
    units: usize,
    tree: Arc<TreeUnits>,
    /// The engine, which starts the child runs of `workflow` nodes.
    engine: super::Engine,
    origin: RunOrigin,
    owner: Owner,
    depth: u32,
    /// Set when this process gives the run up to another (its lease lost): its children
    /// are then left to go on, not cancelled with the attempts that wait for them.
    abandoned: Arc<std::sync::atomic::AtomicBool>,
    /// The progress of child runs, from the attempts that wait for them.
    child_ticks: tokio::sync::mpsc::UnboundedSender<child::ChildTick>,
    child_ticked: tokio::sync::mpsc::UnboundedReceiver<child::ChildTick>,
    /// The run's trace in this process (`traced.rs`), when the engine traces runs.
    trace: Option<Box<crate::telemetry::runs::RunTrace>>,
}

/// The audit rows of a caller's replies to one asking of a unit's question.
type Replies = Arc<parking_lot::Mutex<Vec<(Map<String, Value>, crate::todos::AuditOutcome)>>>;

/// What woke the run loop.
enum Wake {
    Unit(Box<Woken>),
    CancelUnit(UnitCancel),
    Cancelled,
    TimedOut,
    ChildTick(child::ChildTick),
}

impl Run {
    /// Builds a run, fresh or from stored records: one constructor for both, so that a
    /// resumed run is scheduled by the same rules as the run it continues.
    pub(super) fn new(setup: RunSetup, engine: super::Engine) -> Run {
        let plan = setup.plan;
        setup.tree.record(&setup.run_id, plan.nodes.len());
        let (child_ticks, child_ticked) = tokio::sync::mpsc::unbounded_channel();
        let n = plan.nodes.len();
        let mut state = RunState::new(n, setup.journal.is_some());
        // Only a run rebuilt from stored records needs its nodes by id.
        let index: std::collections::HashMap<&str, usize> = match setup.restored.is_empty() {
            true => Default::default(),
            false => (plan.nodes.iter().enumerate())
                .map(|(i, node)| (&*node.id, i))
                .collect(),
        };
        if !setup.restored.is_empty() {
            state.restored_instances = vec![Vec::new(); n];
        }
        for (node, instance, unit) in setup.restored {
            let Some(&i) = index.get(node.as_str()) else {
                continue;
            };
            match instance {
                None => state.nodes[i] = unit,
                Some(k) => state.restored_instances[i].push((k, unit)),
            }
        }
        let mut waiting_on: Vec<usize> = plan.nodes.iter().map(|n| n.upstream.len()).collect();
        for i in 0..n {
            if state.nodes[i].status.is_terminal() {
                state.done += 1;
                for &d in &plan.nodes[i].downstream {
                    waiting_on[d] -= 1;
                }
            }
        }
        let node_ready = (0..n)
            .filter(|&i| waiting_on[i] == 0 && !state.nodes[i].status.is_terminal())
            .collect();
        Run {
            stop_token: setup.cancel.child_token(),
            env: setup.env,
            run_id: setup.run_id,
            inputs: setup.inputs,
            inputs_ctx: None,
            observer: setup.observer,
            cancel: setup.cancel,
            stop: None,
            journal: setup.journal,
            answers: setup.answers,
            deadline_ms: setup.deadline_ms,
            resumed: setup.resumed,
            state,
            waiting_on,
            node_ready,
            instance_ready: VecDeque::new(),
            fan_items: Default::default(),
            unit_ready: VecDeque::new(),
            running: FuturesUnordered::new(),
            committed_at: std::time::Instant::now(),
            unit_cancels: setup.unit_cancels,
            unit_tokens: Default::default(),
            audits: Vec::new(),
            replies: Default::default(),
            commands_ran: Default::default(),
            units: n,
            tree: setup.tree,
            engine,
            origin: setup.origin,
            owner: setup.owner,
            depth: setup.depth,
            abandoned: Arc::default(),
            child_ticks,
            child_ticked,
            poisoned: setup.poisoned,
            picked_up: setup.picked_up,
            unsaved: false,
            trace: setup.trace,
            plan,
        }
    }

    fn emit(&self, event: Event<'_>) {
        if metrics::on() {
            match &event {
                Event::RunStarted { .. } => metrics::run_started(self.workflow_label()),
                Event::RunFinished { status, .. } => {
                    metrics::run_finished(self.workflow_label(), status.as_str());
                }
                _ => {}
            }
        }
        if let Some(observer) = &self.observer {
            observer.event(&event);
        }
    }

    /// The name the metrics give this run's workflow: its own when it is installed, else
    /// `inline` (a client's definition names itself, and the metrics carry only names the
    /// operator chose).
    fn workflow_label(&self) -> &str {
        match self.engine.workflow(&self.plan.name) {
            Some(_) => &self.plan.name,
            None => "inline",
        }
    }

    pub(super) async fn drive(mut self) -> Driven {
        if !self.picked_up {
            self.emit(Event::RunStarted {
                run_id: &self.run_id,
                workflow: &self.plan.name,
                total: self.plan.steps(),
            });
        }
        if let Some(why) = self.poisoned.take() {
            self.halt(Stop::Poisoned(why));
        }
        let deadline = self.deadline();
        let mut since_yield = 0;
        loop {
            if self.stop.is_none() && self.cancel.is_cancelled() {
                self.halt(Stop::Cancelled);
            }
            while self.stop.is_none() {
                let more = self.decide_ready();
                let finished = self.launch();
                if finished == 0 && !more {
                    break;
                }
                // Units finished synchronously, or decisions are left after a slice; a long
                // chain of them must not hold this worker for the whole run.
                since_yield += finished;
                if more || since_yield >= YIELD_EVERY {
                    since_yield = 0;
                    if self.committed_at.elapsed() >= COMMIT_AT_LEAST_EVERY {
                        self.flush();
                    }
                    tokio::task::yield_now().await;
                }
            }
            if self.running.is_empty() {
                break;
            }
            // Nothing more can happen until something wakes: what changed is committed now,
            // before anything waits on it.
            self.flush();
            let stopped = self.stop.is_some();
            let wake = tokio::select! {
                biased;
                Some(woken) = self.running.next() => Wake::Unit(Box::new(woken)),
                _ = self.cancel.cancelled(), if !stopped => Wake::Cancelled,
                Some(unit) = next_unit_cancel(&mut self.unit_cancels), if !stopped => {
                    Wake::CancelUnit(unit)
                }
                _ = sleep_until(deadline), if !stopped && deadline.is_some() => Wake::TimedOut,
                Some(tick) = self.child_ticked.recv() => Wake::ChildTick(tick),
            };
            match wake {
                Wake::Unit(woken) => self.wake(*woken),
                Wake::CancelUnit(unit) => self.cancel_unit(unit),
                Wake::Cancelled => self.halt(Stop::Cancelled),
                Wake::TimedOut => self.halt(Stop::TimedOut),
                Wake::ChildTick(tick) => self.child_ticked(tick),
            }
        }
        self.finalize()
    }

    /// When the run times out: from the stored absolute deadline on a resumed run; from the
    /// plan's timeout, exactly, on a fresh one.
    fn deadline(&self) -> Option<tokio::time::Instant> {
        let limit = self.plan.timeout?;
        let now = tokio::time::Instant::now();
        Some(match self.deadline_ms {
            Some(at) if self.resumed => {
                let left = at.saturating_sub(crate::clock::now_ms()).max(0);
                now + std::time::Duration::from_millis(left as u64)
            }
            _ => now + limit,
        })
    }

    fn halt(&mut self, stop: Stop) {
        if matches!(stop, Stop::Lost(_)) {
            self.abandoned
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if self.stop.is_none() {
            self.stop = Some(stop);
            self.stop_token.cancel();
        }
    }

    fn stop_reason(&self) -> String {
        match &self.stop {
            Some(Stop::Cancelled) => "run cancelled".to_owned(),
            Some(Stop::NodeFailed(node)) => {
                format!("run failed at node `{}`", self.plan.nodes[*node].id)
            }
            Some(Stop::TimedOut) => match self.plan.timeout {
                Some(limit) => format!(
                    "run timed out after {}",
                    super::duration::format_duration(limit)
                ),
                None => "run timed out".to_owned(),
            },
            Some(Stop::Lost(why)) | Some(Stop::Poisoned(why)) => why.clone(),
            None => "not reached".to_owned(),
        }
    }
}

async fn next_unit_cancel(
    requests: &mut Option<tokio::sync::mpsc::UnboundedReceiver<UnitCancel>>,
) -> Option<UnitCancel> {
    match requests {
        Some(requests) => requests.recv().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
