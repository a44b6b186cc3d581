//! The journal: the interface through which a run's state reaches durable storage.
//!
//! The engine owns this interface and knows nothing of what implements it (SQLite today,
//! through the task registry in `tasks`). The scheduler writes a run's changes through it
//! in batches, at the points where it would otherwise wait, and a tool node's call goes
//! through [`Journal::commit_tool_call`], which commits the tool's effect, its audit row
//! and the node's new state in one transaction: a crash can then neither lose the effect
//! nor let a resumed run repeat it.
//!
//! Invariant: nothing downstream of a change can be committed before the change itself:
//! a tool call's transaction carries every change the run had not yet committed.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::actions::BoxFuture;
use super::plan::Plan;
use super::question::Question;
use super::report::{NodeError, NodeStatus, RunStatus};
use crate::store::Owner;
use crate::todos::{AuditOutcome, Origin, ToolResult};

/// Who started a run. `serve` takes over unfinished `mcp` runs by itself; `cli` runs
/// resume only when asked (`workflows resume`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunOrigin {
    #[default]
    Cli,
    Mcp,
}

impl RunOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOrigin::Cli => "cli",
            RunOrigin::Mcp => "mcp",
        }
    }

    pub fn parse(text: &str) -> Option<RunOrigin> {
        match text {
            "cli" => Some(RunOrigin::Cli),
            "mcp" => Some(RunOrigin::Mcp),
            _ => None,
        }
    }
}

/// The audit log's name for a reply to a run's question (an answer to an `input`, a
/// sampling reply to a `sample`, or a refusal), whichever way it came.
pub(crate) const ANSWER_AUDIT: &str = "answer";

/// The audit log's name for a node failed over a budget (`budget_exceeded`).
pub(crate) const BUDGET_AUDIT: &str = "budget_exceeded";

/// The audit log's name for a node whose work panicked (`internal_error`).
pub(crate) const PANIC_AUDIT: &str = "node_panicked";

/// Who answers a run's questions (`input` and `sample` nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Answers {
    /// Nobody: a node's `default` stands in, or the node fails.
    #[default]
    Nobody,
    /// The caller, through the run's `Interaction`, while it is connected. A resumed run
    /// has lost its caller and so has nobody.
    Caller,
    /// The question is parked in the journal and waits, across restarts, for an answer
    /// given through it.
    Parked,
}

impl Answers {
    pub fn as_str(self) -> &'static str {
        match self {
            Answers::Nobody => "none",
            Answers::Caller => "caller",
            Answers::Parked => "parked",
        }
    }

    pub fn parse(text: &str) -> Option<Answers> {
        match text {
            "none" => Some(Answers::Nobody),
            "caller" => Some(Answers::Caller),
            "parked" => Some(Answers::Parked),
            _ => None,
        }
    }
}

/// The durable state of one unit: a node, or one `for_each` instance of it. Times are
/// milliseconds since the Unix epoch, so that they mean the same in another process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnitState {
    pub status: NodeStatus,
    pub reason: Option<String>,
    /// Attempts finished so far.
    pub attempts: u32,
    /// When the next attempt is due (a retry's backoff).
    pub next_attempt_ms: Option<i64>,
    /// When the running `wait` attempt ends.
    pub deadline_ms: Option<i64>,
    /// The key of the question the unit is waiting on.
    pub asking: Option<String>,
    pub output: Option<Value>,
    pub error: Option<NodeError>,
    /// The hash of the content a `write_file` attempt is about to write.
    pub intent: Option<String>,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    /// The attempts that failed and were retried, oldest first (a journalled run's only);
    /// the last attempt is the record above.
    pub retried: Vec<Retried>,
    /// A repeating node's finished iterations, oldest first. `attempts` counts the
    /// attempts of every iteration, so that each attempt of the unit has a number of its
    /// own (a question's key, a sub-workflow's run id are made from it).
    pub iterations: Vec<Iteration>,
}

impl UnitState {
    /// The attempts the finished iterations took.
    pub(crate) fn iterated_attempts(&self) -> u32 {
        self.iterations.iter().map(|it| it.attempts).sum()
    }

    /// Whether the unit is between two iterations: one finished, the next not yet tried.
    pub(crate) fn between_iterations(&self) -> bool {
        !self.iterations.is_empty()
            && !self.status.is_terminal()
            && self.iterated_attempts() == self.attempts
    }
}

/// One finished iteration of a repeating node: how many attempts it took, when it ran
/// (a journalled run's only) and what it produced.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Iteration {
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    pub output: Value,
}

/// An attempt that failed and was retried: when it ran, why it failed, and when the next
/// attempt was due. A person reads these on the run's page and in its report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Retried {
    /// When it began: the unit's start for the first attempt, else the time the attempt
    /// before it set for its retry.
    pub started_ms: Option<i64>,
    pub failed_ms: i64,
    pub code: String,
    pub message: String,
    /// When the next attempt was due: the retry's delay is its distance from `failed_ms`.
    pub retry_at_ms: i64,
}

/// A unit's change, as a batch carries it.
#[derive(Debug, Clone, Copy)]
pub struct UnitChange<'a> {
    pub node: &'a str,
    /// The node's index in the plan.
    pub index: usize,
    pub instance: Option<usize>,
    pub state: &'a UnitState,
}

/// A question a unit puts, recorded once under its key.
#[derive(Debug, Clone)]
pub struct NewQuestion<'a> {
    pub node: &'a str,
    pub index: usize,
    pub instance: Option<usize>,
    pub key: &'a str,
    pub request: Question,
}

/// Where the run stands, for its parent task.
#[derive(Debug, Clone, Copy)]
pub struct RunProgress<'a> {
    /// 0 to 100; a `for_each` node's instances share the node's unit.
    pub percent: u8,
    pub done: usize,
    pub total: usize,
    /// The node the run is at.
    pub current: Option<&'a str>,
    /// Whether some unit waits for an answer.
    pub asking: bool,
    /// The iteration the node the run is at runs, when it repeats, and its `max`.
    pub iteration: Option<(u32, u32)>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy)]
pub struct RunEnd<'a> {
    pub status: RunStatus,
    pub error: Option<&'a str>,
    pub output: &'a Value,
}

/// Changes of one run, committed together.
#[derive(Debug, Clone)]
pub struct RunBatch<'a> {
    pub run_id: &'a str,
    pub units: Vec<UnitChange<'a>>,
    pub questions: Vec<NewQuestion<'a>>,
    /// Answers the caller gave directly, recorded beside their questions.
    pub answers: Vec<(UnitChange<'a>, &'a str, &'a Value)>,
    pub progress: RunProgress<'a>,
    pub end: Option<RunEnd<'a>>,
    /// The audit rows of the file actions, the caller's answers and the node faults whose
    /// units this batch settles, committed with their records.
    pub audits: &'a [PendingAudit],
}

/// An audit row of a recorded run kept until the batch that records its unit commits,
/// under the run's lease: a file action's (`read_file`, `list_dir`, `write_file`), a
/// caller's answer's (`answer`), a node fault's (`budget_exceeded`, `node_panicked`).
#[derive(Debug, Clone)]
pub struct PendingAudit {
    /// The action's name, the row's tool.
    pub action: &'static str,
    pub node_id: Arc<str>,
    /// The row's arguments: the path, and the bytes moved or the error.
    pub args: Map<String, Value>,
    pub outcome: AuditOutcome,
    pub principal: Option<Arc<str>>,
    /// The file a `write_file` wrote, recorded with the row as its path's last write.
    pub wrote: Option<Wrote>,
}

/// A file a `write_file` node wrote: its path, normalised as the workspace names it, and
/// the SHA-256 of what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrote {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// A new run, recorded before anything of it runs.
#[derive(Debug, Clone, Copy)]
pub struct RunStart<'a> {
    pub run_id: &'a str,
    pub plan: &'a Plan,
    pub inputs: &'a Map<String, Value>,
    pub origin: RunOrigin,
    pub answers: Answers,
    pub deadline_ms: Option<i64>,
    pub retry_of: Option<&'a str>,
    /// The key a client may retry the starting call under, and that call.
    pub idempotency: Option<(&'a str, &'a str)>,
    /// How a client asked for the run's task, as opaque labels: (protocol, tool).
    pub task_label: Option<(&'a str, &'a str)>,
    /// The tool call that started the run, audited in the run's own transaction.
    pub audit: Option<(&'a str, &'a Map<String, Value>)>,
    /// Who the run belongs to.
    pub owner: &'a Owner,
    /// When the run is recorded (ms since the Unix epoch): its task's creation time, which
    /// the starter can then report without reading the record back.
    pub created_ms: i64,
    /// The `workflow` node that starts this run as its child, if one does.
    pub parent: Option<ParentLink<'a>>,
    /// The run's trace, when it is traced: its root span's context as a W3C
    /// `traceparent`, and the `traceparent` of the request span its root links to.
    pub trace: Option<(&'a str, Option<&'a str>)>,
}

/// The `workflow` node that starts a child run: its run, its id and index in that run's
/// plan, its `for_each` instance; and the child's depth below the run at the top.
#[derive(Debug, Clone, Copy)]
pub struct ParentLink<'a> {
    pub run_id: &'a str,
    pub node: &'a str,
    pub index: usize,
    pub instance: Option<usize>,
    pub depth: u32,
}

/// Where a child run stands, as its parent's `workflow` node polls it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPoll {
    /// `None` while the run is unfinished.
    pub finished: Option<RunStatus>,
    /// Whether the run (or a run below it) waits for an answer.
    pub asking: bool,
    pub percent: u8,
    /// The run's status message, as its task shows it.
    pub message: Option<String>,
    pub output: Value,
    pub error: Option<String>,
}

/// A tool call that a tool node makes.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    pub name: &'a str,
    pub args: &'a Map<String, Value>,
    pub origin: Origin<'a>,
    pub node: &'a str,
    pub index: usize,
    pub instance: Option<usize>,
}

/// A run read back from the journal.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub run_id: String,
    pub plan: Arc<Plan>,
    pub inputs: Map<String, Value>,
    pub origin: RunOrigin,
    pub answers: Answers,
    pub deadline_ms: Option<i64>,
    /// `None` while the run is unfinished.
    pub finished: Option<RunStatus>,
    pub units: Vec<(String, Option<usize>, UnitState)>,
    pub owner: Owner,
    /// How often the run was taken over from a process that held it, since a unit of it
    /// last finished.
    pub takeovers: u32,
    /// How deep below the run at the top of its tree the run is: 0 but for a child run.
    pub depth: u32,
    /// A finished run's output (`null` otherwise) and error.
    pub output: Value,
    pub error: Option<String>,
    /// The run's root span's `traceparent`, and the linked request span's, when the run
    /// was traced as it started.
    pub trace_parent: Option<String>,
    pub trace_link: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    #[error("no run with id {0}")]
    NotFound(String),
    #[error("run {run_id} already {status}")]
    Finished { run_id: String, status: String },
    #[error("run {0} is driven by another live process")]
    Held(String),
    #[error("run {0} is driven by another process now")]
    LeaseLost(String),
    #[error("the stored run {run_id} cannot be read: {detail}")]
    Corrupt { run_id: String, detail: String },
    #[error("storage failure: {0}")]
    Storage(String),
}

/// Durable storage for runs. Every method is short and synchronous except
/// [`Journal::answer`], which waits for a person.
pub trait Journal: Send + Sync {
    /// Records a new run, its lease held by this process, and every node pending.
    fn create(&self, start: &RunStart<'_>) -> Result<(), JournalError>;

    /// Commits a batch of changes; returns once they are durable.
    fn commit(&self, batch: &RunBatch<'_>) -> Result<(), JournalError>;

    /// In one transaction: commits `batch`, makes the tool call (its effect and its audit
    /// row), and records the unit's state that `settle` derives from the result. Returns
    /// the result and that state.
    fn commit_tool_call(
        &self,
        batch: &RunBatch<'_>,
        call: &ToolCall<'_>,
        settle: &dyn Fn(&ToolResult) -> UnitState,
    ) -> Result<(ToolResult, UnitState), JournalError>;

    /// In one transaction: commits `batch`, its lease checked and extended first, then
    /// calls `place`, then commits. `place` is called only if this process holds the
    /// run's lease, and while no other can take it (the run's row stays locked until the
    /// commit, and the extension just made outlasts the call by half a lease): what it
    /// does never happens after another process took the run over. Not called at all when
    /// the lease is lost; the error then says why.
    fn commit_placing(
        &self,
        batch: &RunBatch<'_>,
        place: &mut dyn FnMut(),
    ) -> Result<(), JournalError>;

    /// Reads a run back, to resume it or to run it again.
    fn load(&self, run_id: &str) -> Result<StoredRun, JournalError>;

    /// Takes the run's lease for this process: `Held` if a live process holds it. With
    /// `answers`, the run's questions go that way from now on, for whoever drives it next
    /// too.
    fn claim(&self, run_id: &str, answers: Option<Answers>) -> Result<(), JournalError>;

    /// Where run `run_id` stands, without its plan or units: what a parent polls its child
    /// runs with. `None` if there is no such run.
    fn poll(&self, run_id: &str) -> Result<Option<RunPoll>, JournalError>;

    /// Asks whoever drives run `run_id`, and the runs below it, to cancel; false if it is
    /// not unfinished.
    fn request_cancel(&self, run_id: &str) -> Result<bool, JournalError>;

    /// How many runs of `principal` are unfinished: a child run is one more.
    fn running_runs_of(&self, principal: &str) -> Result<u64, JournalError>;

    /// Resolves to the answer of the unit's question `key` once one is given.
    fn answer(
        &self,
        run_id: &str,
        node: &str,
        instance: Option<usize>,
        key: &str,
    ) -> BoxFuture<Result<Value, NodeError>>;
}
