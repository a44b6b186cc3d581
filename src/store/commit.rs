//! Group commit: a run's state changes reach the database in batches, and batches that
//! arrive while a commit is in flight share the next one.
//!
//! There is no committer thread. The caller that finds the connection free commits at once,
//! on its own thread: on a small VM a cross-thread wake-up costs 10-15 µs, as much as the
//! commit itself. A caller that finds it busy queues its batch and waits for the
//! connection; whoever takes it next commits everything queued by then, its own batch
//! included, and the others find their results waiting.

use std::collections::HashMap;
use std::sync::Mutex;

use super::audit::{AuditOutcome, ReadyAudit};
use super::nodes::NodeRow;
use super::runs::RunEnd;
use super::write_tx::WriteTx;
use super::{Backend, Store, StoreError, Tx};

/// One change of a batch.
#[derive(Debug, Clone)]
pub enum Write {
    /// Units' new states, which are also their sub-tasks'.
    Nodes(Vec<NodeRow>),
    RunTask {
        status: &'static str,
        message: String,
        progress: i64,
        result: Option<String>,
        error: Option<String>,
    },
    Question {
        node: i64,
        instance: i64,
        key: String,
        request: String,
    },
    /// An answer the caller gave directly, recorded beside its question.
    Answer {
        node: i64,
        instance: i64,
        key: String,
        answer: String,
    },
    Finish(RunEnd),
    /// An audit row that commits with the run's records (a file action's).
    Audit(AuditRecord),
    /// A file a node wrote, recorded with its audit row.
    FileWritten(super::FileWrite),
}

/// An audit row owned by a batch, made ready when the batch was made; appended through
/// [`Tx::append_ready`], as every row is.
#[derive(Debug, Clone)]
pub struct AuditRecord {
    pub row: ReadyAudit,
    pub outcome: AuditOutcome,
}

/// The changes of one run, committed together or not at all.
#[derive(Debug, Clone)]
pub struct Batch {
    pub run_id: String,
    /// The lease the writer must still hold: (owner, the lease's new length in ms from
    /// now, by the database's clock).
    pub fence: Option<(String, i64)>,
    pub writes: Vec<Write>,
}

impl Batch {
    /// Whether a unit of the run reaches a terminal state in this batch.
    fn finishes_a_unit(&self) -> bool {
        self.writes.iter().any(|write| match write {
            Write::Nodes(rows) => rows.iter().any(|row| {
                matches!(
                    row.status.as_str(),
                    "succeeded" | "failed" | "skipped" | "cancelled"
                )
            }),
            _ => false,
        })
    }
}

#[derive(Default)]
pub(super) struct Queue {
    next: u64,
    pending: Vec<(u64, Batch)>,
    done: HashMap<u64, Result<(), StoreError>>,
}

pub(super) type GroupQueue = Mutex<Queue>;

impl Tx<'_> {
    /// Applies a batch inside the current transaction: the fence first, so that a writer
    /// that lost its lease writes nothing.
    /// Returns the run's key, for more writes in the same transaction.
    pub(crate) fn apply(&self, batch: &Batch) -> Result<i64, StoreError> {
        let key = match &batch.fence {
            Some((owner, lease_ms)) => {
                self.fence(&batch.run_id, owner, *lease_ms, batch.finishes_a_unit())?
            }
            None => self.run_key(&batch.run_id)?,
        };
        self.apply_writes(key, &batch.writes)?;
        Ok(key)
    }

    /// Applies writes to the run with key `key`.
    pub(crate) fn apply_writes(&self, key: i64, writes: &[Write]) -> Result<(), StoreError> {
        for write in writes {
            match write {
                Write::Nodes(rows) => self.upsert_nodes(key, rows)?,
                Write::RunTask {
                    status,
                    message,
                    progress,
                    result,
                    error,
                } => self.update_run_task(
                    key,
                    status,
                    message,
                    *progress,
                    result.as_deref(),
                    error.as_deref(),
                )?,
                Write::Question {
                    node,
                    instance,
                    key: question,
                    request,
                } => self.ask(key, *node, *instance, question, request)?,
                Write::Answer {
                    node,
                    instance,
                    key: question,
                    answer,
                } => {
                    self.record_answer(key, *node, *instance, question, Ok(answer))?;
                }
                Write::Finish(end) => self.finish_run(key, end)?,
                Write::Audit(record) => self.append_ready(&record.row, record.outcome)?,
                Write::FileWritten(file) => self.record_written_file(key, file)?,
            }
        }
        Ok(())
    }
}

fn lock_queue(queue: &GroupQueue) -> std::sync::MutexGuard<'_, Queue> {
    queue
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Store {
    /// Commits `batch`, with whatever else is queued, and returns once it is durable (to
    /// the degree the database's `synchronous` setting gives).
    pub fn commit(&self, batch: Batch) -> Result<(), StoreError> {
        let sqlite = match &self.backend {
            Backend::Sqlite(sqlite) => sqlite,
            // Batches of many runs ready at once share a transaction (`shared.rs`).
            Backend::Postgres(_) => return self.shared(|tx| tx.apply(&batch).map(drop)),
        };
        let ticket = {
            let mut queue = lock_queue(&sqlite.queue);
            let ticket = queue.next;
            queue.next += 1;
            queue.pending.push((ticket, batch));
            ticket
        };
        // Blocks while another caller's commit is in flight; the guard is never held across
        // an `.await`, and a commit lasts tens of microseconds.
        let conn = sqlite.lock();
        let group = {
            let mut queue = lock_queue(&sqlite.queue);
            if let Some(result) = queue.done.remove(&ticket) {
                return result;
            }
            std::mem::take(&mut queue.pending)
        };
        let results = commit_group(&conn, &group);
        let mut queue = lock_queue(&sqlite.queue);
        let mut mine = Ok(());
        for ((t, _), result) in group.iter().zip(results) {
            if *t == ticket {
                mine = result;
            } else {
                queue.done.insert(*t, result);
            }
        }
        mine
    }
}

/// One transaction for the whole group. A batch that fails (its fence, or a statement) is
/// undone alone and the others commit; a failure of the transaction itself fails them all.
fn commit_group(conn: &super::Conn, group: &[(u64, Batch)]) -> Vec<Result<(), StoreError>> {
    let failed_all = |error: &StoreError| {
        let message = error.to_string();
        group
            .iter()
            .map(|_| Err(StoreError::Commit(message.clone())))
            .collect()
    };
    let tx = match WriteTx::begin(conn) {
        Ok(tx) => tx,
        Err(error) => return failed_all(&error.into()),
    };
    let results = match group {
        // Alone in its group: its failure undoes the whole transaction, no savepoint needed.
        [(_, batch)] => match Tx::sqlite_tx(&tx).apply(batch) {
            Ok(_) => vec![Ok(())],
            Err(error) => return vec![Err(error)],
        },
        _ => match apply_each(&tx, group) {
            Ok(results) => results,
            Err(error) => return failed_all(&error),
        },
    };
    match tx.commit() {
        Ok(()) => results,
        Err(error) => failed_all(&error.into()),
    }
}

/// Applies each batch of a group under a savepoint of its own, so that a batch whose fence
/// fails is left out and the others still commit. `Err` when the savepoints themselves fail.
fn apply_each(
    tx: &WriteTx<'_>,
    group: &[(u64, Batch)],
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let mut results = Vec::with_capacity(group.len());
    for (_, batch) in group {
        tx.savepoint()?;
        match Tx::sqlite_tx(tx).apply(batch) {
            Ok(_) => {
                tx.end_savepoint(true)?;
                results.push(Ok(()));
            }
            Err(error) => {
                tx.end_savepoint(false)?;
                results.push(Err(error));
            }
        }
    }
    Ok(results)
}
