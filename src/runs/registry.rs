//! The registry: the engine's journal on the store. A run is a parent task whose id is the
//! run's; each node, and each `for_each` instance, is a sub-task with an id of its own,
//! derived from the run's (`ids`), whose state is its unit's row.
//!
//! A process drives a run only while it holds the run's lease. Every batch it commits
//! checks and extends that lease first, in the same transaction, so that a process that
//! lost a run (it stalled past its lease and another took over) writes nothing more of it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::records::{self, instance_number};
use crate::clock;
use crate::engine::actions::BoxFuture;
use crate::engine::journal::{
    Answers, Journal, JournalError, RunBatch, RunOrigin, RunPoll, RunStart, StoredRun, ToolCall,
    UnitChange, UnitState,
};
use crate::engine::plan::Plan;
use crate::engine::report::{NodeError, NodeErrorKind, RunStatus};
use crate::store::{Batch, NewParent, NewRun, NewRunTask, Store, StoreError, TaskTiming, Write};
use crate::todos::{ToolError, ToolResult, Tools};

/// How often a waiting question looks for an answer given by another process. Answers
/// given through this process wake it at once.
const ANSWER_POLL: Duration = Duration::from_millis(500);

/// The registry's settings.
#[derive(Debug, Clone, Copy)]
pub struct RegistryConfig {
    /// How long a lease lasts without renewal; renewed every third of it.
    pub lease: Duration,
    /// How long a finished task is kept, from its completion.
    pub task_ttl: Duration,
    /// How often clients are told to poll a task.
    pub poll_interval: Duration,
    /// How long a round of questions put to a client that answers by retrying its call
    /// waits for that retry before its run is cancelled.
    pub answer_timeout: Duration,
    /// How long the history of a finished run (what `history` nodes read) is kept, from
    /// the run's end: it outlives the run, whose TTL is `task_ttl`.
    pub history_ttl: Duration,
}

/// How long a finished run's history is kept by default: 90 days.
pub const DEFAULT_HISTORY_TTL: Duration = Duration::from_secs(90 * 24 * 60 * 60);

impl Default for RegistryConfig {
    fn default() -> RegistryConfig {
        RegistryConfig {
            lease: Duration::from_secs(15),
            task_ttl: Duration::from_secs(24 * 60 * 60),
            poll_interval: Duration::from_secs(1),
            answer_timeout: Duration::from_secs(60 * 60),
            history_ttl: DEFAULT_HISTORY_TTL,
        }
    }
}

pub struct Registry {
    store: Store,
    tools: Tools,
    /// This process, as lease owner (`lease_owner.rs`), so that a dead owner can be
    /// recognised.
    owner: String,
    config: RegistryConfig,
    /// The key that signs the state of rounds of questions, read once from the store.
    pub(super) state_key: std::sync::OnceLock<Vec<u8>>,
    /// The key of sub-task ids, derived from the same secret.
    pub(super) sub_task_key: std::sync::OnceLock<super::ids::SubTaskKey>,
}

pub(super) fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn storage(error: StoreError) -> JournalError {
    match error {
        StoreError::LeaseLost { run_id } => JournalError::LeaseLost(run_id),
        other => JournalError::Storage(other.to_string()),
    }
}

/// A new run's status message: none of its `steps` (phases, or nodes) done.
fn first_message(steps: usize) -> String {
    format!("0/{steps}")
}

impl Registry {
    pub fn new(store: Store, tools: Tools, config: RegistryConfig) -> Registry {
        Registry {
            store,
            tools,
            owner: super::lease_owner::new_owner(),
            config,
            state_key: std::sync::OnceLock::new(),
            sub_task_key: std::sync::OnceLock::new(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub(super) fn todo_tools(&self) -> &Tools {
        &self.tools
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn config(&self) -> RegistryConfig {
        self.config
    }

    /// The task of a run as [`Journal::create`] recorded it at `created_ms`, built without
    /// reading it back: a starting call replies with it while the run goes on. `steps` is
    /// what its progress counts up to (`Plan::steps`).
    pub(crate) fn created_task(
        &self,
        run_id: &str,
        created_ms: i64,
        steps: usize,
        label: (&str, &str),
        owner: &crate::store::Owner,
    ) -> crate::runs::TaskView {
        let at = clock::iso_from_ms(created_ms);
        let timing = self.timing();
        crate::runs::TaskView {
            task_id: run_id.to_owned(),
            parent_task_id: None,
            run_id: run_id.to_owned(),
            node_id: None,
            instance: None,
            status: crate::runs::TaskStatus::Working.as_str().to_owned(),
            status_message: Some(first_message(steps)),
            progress: 0,
            created_at: at.clone(),
            last_updated_at: at,
            ttl_ms: timing.ttl_ms,
            poll_interval_ms: timing.poll_interval_ms,
            era: Some(label.0.to_owned()),
            tool: Some(label.1.to_owned()),
            // Its run key is the journal's; the sub-tasks, if listed, read the run.
            head: None,
            owner: owner.clone(),
        }
    }

    fn timing(&self) -> TaskTiming {
        TaskTiming {
            ttl_ms: ms(self.config.task_ttl),
            poll_interval_ms: ms(self.config.poll_interval),
        }
    }

    fn store_batch(&self, batch: &RunBatch<'_>) -> Batch {
        Batch {
            run_id: batch.run_id.to_owned(),
            fence: Some((self.owner.clone(), self.lease_ms())),
            writes: records::writes(batch),
        }
    }

    /// Wakes the questions of this process that wait for answers (those of other hosts
    /// are woken by the database, through the same `Wakes`).
    pub(super) fn answers_changed(&self) {
        self.store.wakes().answered.notify_waiters();
    }
}

impl Journal for Registry {
    fn create(&self, start: &RunStart<'_>) -> Result<(), JournalError> {
        let snapshot = start.plan.snapshot();
        let inputs = serde_json::to_string(start.inputs).expect("inputs serialise");
        let ids: Vec<&str> = start.plan.nodes.iter().map(|node| &*node.id).collect();
        let node_ids = serde_json::to_string(&ids).expect("node ids serialise");
        let message = first_message(start.plan.steps());
        // The starting call's audit row, made ready before the writer is taken.
        let audit = start.audit.map(|(tool, args)| {
            let origin = crate::todos::Origin {
                run_id: Some(start.run_id),
                node_id: None,
                principal: start.owner.principal.as_deref(),
            };
            crate::todos::ready_audit(tool, args, origin)
        });
        let run = NewRun {
            id: start.run_id,
            workflow: &start.plan.name,
            snapshot: &snapshot.text,
            plan_hash: &snapshot.hash,
            inputs: &inputs,
            node_ids: &node_ids,
            nodes: ids.len() as i64,
            origin: start.origin.as_str(),
            answers: start.answers.as_str(),
            deadline_ms: start.deadline_ms,
            lease_owner: &self.owner,
            lease_ms: self.lease_ms(),
            retry_of: start.retry_of,
            idempotency: start.idempotency,
            principal: start.owner.principal.as_deref(),
            session: start.owner.session.as_deref(),
            parent: start.parent.map(|p| NewParent {
                run_id: p.run_id,
                node: p.node,
                index: p.index as i64,
                instance: p.instance.map(|k| k as i64),
                depth: i64::from(p.depth),
            }),
            trace_parent: start.trace.map(|(parent, _)| parent),
            trace_link: start.trace.and_then(|(_, link)| link),
        };
        // A run's start shares its commit with the other runs' ready at once.
        self.store
            .shared(|tx| {
                let task = NewRunTask {
                    created_ms: start.created_ms,
                    timing: self.timing(),
                    message: &message,
                    label: start.task_label,
                };
                tx.insert_run_and_task(&run, &task)?;
                if let Some(row) = &audit {
                    crate::todos::append_ready(tx, row, crate::todos::AuditOutcome::Ok)?;
                }
                Ok(())
            })
            .map_err(storage)
    }

    fn commit(&self, batch: &RunBatch<'_>) -> Result<(), JournalError> {
        self.store.commit(self.store_batch(batch)).map_err(storage)
    }

    fn commit_tool_call(
        &self,
        batch: &RunBatch<'_>,
        call: &ToolCall<'_>,
        settle: &dyn Fn(&ToolResult) -> UnitState,
    ) -> Result<(ToolResult, UnitState), JournalError> {
        let before = self.store_batch(batch);
        // The call's audit row is made ready before the writer is taken.
        let ready = self.tools.ready(call.name, call.args, call.origin);
        // Shared with the other runs' transactions ready at once.
        self.store
            .shared(|tx| {
                let key = tx.apply(&before)?;
                let result = match &ready {
                    Some(ready) => ready.invoke_in(tx)?,
                    None => Err(ToolError::invalid_input(format!(
                        "unknown tool `{}`",
                        call.name
                    ))),
                };
                let state = settle(&result);
                let change = UnitChange {
                    node: call.node,
                    index: call.index,
                    instance: call.instance,
                    state: &state,
                };
                let after = [Write::Nodes(vec![records::node_row(&change)])];
                tx.apply_writes(key, &after)?;
                Ok((result, state))
            })
            .map_err(storage)
    }

    /// The lease is extended by the database's clock at some moment after `sent`, so it
    /// lasts at least until `sent` plus the lease, by this host's steady clock; `place`
    /// runs only within the first half of that, and with the run's row locked by this
    /// transaction (on SQLite, the database's write lock), so no claim can come between.
    fn commit_placing(
        &self,
        batch: &RunBatch<'_>,
        place: &mut dyn FnMut(),
    ) -> Result<(), JournalError> {
        let batch = self.store_batch(batch);
        let half = self.config.lease / 2;
        self.store
            .try_transaction(|tx| {
                let mut sent = std::time::Instant::now();
                tx.apply(&batch)?;
                // The fence checked and the lease extended now, not with the commit: the
                // file is placed only after both.
                tx.flush()?;
                // A slow round trip (a busy server, a lock waited for) ate into the lease:
                // extend it again, the row still locked, until one is quick enough.
                let mut tries = 0;
                while sent.elapsed() >= half {
                    tries += 1;
                    if tries > 3 {
                        return Err(StoreError::Busy(format!(
                            "the lease of run {} could not be extended quickly enough to \
                             place a file within it",
                            batch.run_id
                        )));
                    }
                    sent = std::time::Instant::now();
                    tx.fence(&batch.run_id, &self.owner, self.lease_ms(), false)?;
                    tx.flush()?;
                }
                place();
                Ok(())
            })
            .map_err(storage)
    }

    fn load(&self, run_id: &str) -> Result<StoredRun, JournalError> {
        let run = self
            .store
            .run(run_id)
            .map_err(storage)?
            .ok_or_else(|| JournalError::NotFound(run_id.to_owned()))?;
        let corrupt = |detail: String| JournalError::Corrupt {
            run_id: run_id.to_owned(),
            detail,
        };
        let plan = Plan::from_snapshot(&run.snapshot).map_err(|e| corrupt(e.to_string()))?;
        let inputs: Map<String, Value> =
            serde_json::from_str(&run.inputs).map_err(|e| corrupt(e.to_string()))?;
        let mut units = Vec::new();
        for row in self.store.nodes(run_id).map_err(storage)? {
            let (instance, state) = records::unit_state(&row).map_err(corrupt)?;
            units.push((row.node_id, instance, state));
        }
        Ok(StoredRun {
            run_id: run.id,
            plan: Arc::new(plan),
            inputs,
            origin: RunOrigin::parse(&run.origin).unwrap_or_default(),
            answers: crate::engine::journal::Answers::parse(&run.answers).unwrap_or_default(),
            deadline_ms: run.deadline_ms,
            finished: RunStatus::parse(&run.status),
            units,
            owner: run.owner,
            takeovers: u32::try_from(run.takeovers).unwrap_or(u32::MAX),
            depth: u32::try_from(run.depth).unwrap_or(0),
            output: parse_output(run.output.as_deref()),
            error: run.error,
            trace_parent: run.trace_parent,
            trace_link: run.trace_link,
        })
    }

    fn poll(&self, run_id: &str) -> Result<Option<RunPoll>, JournalError> {
        let Some(row) = self.store.run_poll(run_id).map_err(storage)? else {
            return Ok(None);
        };
        Ok(Some(RunPoll {
            finished: RunStatus::parse(&row.status),
            asking: row.asking,
            percent: u8::try_from(row.progress.clamp(0, 100)).unwrap_or(0),
            message: row.status_message,
            output: parse_output(row.output.as_deref()),
            error: row.error,
        }))
    }

    fn request_cancel(&self, run_id: &str) -> Result<bool, JournalError> {
        self.store.request_cancel(run_id).map_err(storage)
    }

    fn running_runs_of(&self, principal: &str) -> Result<u64, JournalError> {
        self.store.running_runs_of(principal).map_err(storage)
    }

    fn claim(&self, run_id: &str, answers: Option<Answers>) -> Result<(), JournalError> {
        let owner = self
            .store
            .lease_owner(run_id)
            .map_err(storage)?
            .ok_or_else(|| JournalError::NotFound(run_id.to_owned()))?;
        let gone =
            owner.filter(|owner| owner != &self.owner && super::lease_owner::owner_is_gone(owner));
        let claimed = self
            .store
            .claim_run(
                run_id,
                &self.owner,
                self.lease_ms(),
                gone.as_deref(),
                answers.map(Answers::as_str),
            )
            .map_err(storage)?;
        match claimed {
            true => Ok(()),
            false => Err(JournalError::Held(run_id.to_owned())),
        }
    }

    fn answer(
        &self,
        run_id: &str,
        node: &str,
        instance: Option<usize>,
        key: &str,
    ) -> BoxFuture<Result<Value, NodeError>> {
        let store = self.store.clone();
        let (run_id, node, key) = (run_id.to_owned(), node.to_owned(), key.to_owned());
        let instance = instance_number(instance);
        Box::pin(async move {
            loop {
                // An answer given here, or (PostgreSQL) on another host.
                let answered = store.wakes().answered.notified();
                match find_answer(&store, &run_id, &node, instance, &key) {
                    Ok(Some(answer)) => return answer,
                    Ok(None) => {}
                    Err(error) => {
                        let message = format!("the answer cannot be read: {error}");
                        return Err(NodeError::new(NodeErrorKind::Unsupported, message));
                    }
                }
                tokio::select! {
                    _ = answered => {}
                    _ = tokio::time::sleep(ANSWER_POLL) => {}
                }
            }
        })
    }
}

/// A stored run's output: `null` when it has none (or it cannot be read).
fn parse_output(text: Option<&str>) -> Value {
    text.and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null)
}

/// The answer of a unit's question once given; a refusal fails the node.
fn find_answer(
    store: &Store,
    run_id: &str,
    node: &str,
    instance: i64,
    key: &str,
) -> Result<Option<Result<Value, NodeError>>, StoreError> {
    let questions = store.questions(run_id)?;
    let of_unit = |key: &str| {
        questions
            .iter()
            .find(|q| q.node_id.as_deref() == Some(node) && q.instance == instance && q.key == key)
    };
    // A question asked again after an answer that did not fit: its latest asking.
    let mut key = key.to_owned();
    let found = loop {
        let Some(found) = of_unit(&key) else {
            return Ok(None);
        };
        if found.refusal.as_deref() != Some("reasked") {
            break found.clone();
        }
        key = crate::engine::question::next_asking(&key);
    };
    if let Some(refusal) = found.refusal {
        if refusal == crate::engine::question::Refusal::NoModel.as_str() {
            let message = crate::engine::question::NO_MODEL;
            return Ok(Some(Err(NodeError::new(
                NodeErrorKind::Unsupported,
                message,
            ))));
        }
        let message = match refusal.as_str() {
            "decline" => "the user declined to answer".to_owned(),
            "cancel" => "the user cancelled the question".to_owned(),
            "invalid" => "the answers given did not fit the question's form".to_owned(),
            "unanswered" => "no answer was given, and nobody was there to ask".to_owned(),
            other => format!("the question was refused ({other})"),
        };
        return Ok(Some(Err(NodeError::new(NodeErrorKind::Refused, message))));
    }
    Ok(found
        .answer
        .and_then(|text| serde_json::from_str(&text).ok())
        .map(Ok))
}
