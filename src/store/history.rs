//! The history of finished runs (`run_history`): a row per run, written in the
//! transaction that ends the run, kept apart from the runs so that it outlives their purge,
//! and purged by a TTL of its own. `history` nodes read it, newest first, a page at a time.

use super::sql::from_columns;
use super::{Store, StoreError, Tx};

/// Which finished runs a page of history holds.
#[derive(Debug, Clone, Copy)]
pub struct HistoryQuery<'a> {
    pub workflow: &'a str,
    /// Only the runs of this principal; `None`: every principal's.
    pub principal: Option<&'a str>,
    /// Only runs of these statuses (at most three: `succeeded`, `failed`, `cancelled`);
    /// empty: any.
    pub statuses: &'a [&'a str],
    /// Only runs after this one in the order (older), given as its `finished_ms` and id.
    pub after: Option<(i64, &'a str)>,
    /// At most this many.
    pub limit: usize,
}

/// A finished run as the history keeps it. `inputs` and `output` are JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRow {
    pub run_id: String,
    pub workflow: String,
    pub status: String,
    pub created_at: String,
    pub finished_at: String,
    pub finished_ms: i64,
    pub inputs: String,
    pub output: Option<String>,
    pub error: Option<String>,
}

/// The page's rows, newest first; the order's second key, the run id, parts runs that
/// finished in the same millisecond. A run is after the cursor `(?6, ?7)` when it finished
/// before it, or then with a smaller id: written so that the first condition bounds the
/// index range read (`finished_ms <= ?6`). Without a cursor, `?6` is the greatest time.
macro_rules! history_page {
    ($principal:literal) => {
        concat!(
            "SELECT run_id, workflow, status, created_at, finished_at, finished_ms, inputs,
                    output, error
             FROM run_history
             WHERE ",
            $principal,
            " workflow = ?1
               AND (CAST(?3 AS TEXT) IS NULL OR status = ?3 OR status = ?4 OR status = ?5)
               AND finished_ms <= ?6 AND (finished_ms < ?6 OR run_id < ?7)
             ORDER BY finished_ms DESC, run_id DESC
             LIMIT ?8"
        )
    };
}

/// Every principal's runs (`?2` is unused).
const PAGE_OF_ALL: &str = history_page!("(CAST(?2 AS TEXT) IS NULL) AND");
/// One principal's runs, on the index that leads with the principal.
const PAGE_OF_PRINCIPAL: &str = history_page!("principal = ?2 AND");

impl Store {
    /// A page of the finished runs `query` names, newest first.
    pub fn history(&self, query: &HistoryQuery<'_>) -> Result<Vec<HistoryRow>, StoreError> {
        let sql = match query.principal {
            Some(_) => PAGE_OF_PRINCIPAL,
            None => PAGE_OF_ALL,
        };
        // Unused places repeat the first status, so that the list is one condition.
        let status = |i: usize| (query.statuses.get(i)).or(query.statuses.first()).copied();
        let (before_ms, before_id) = query.after.unwrap_or((i64::MAX, ""));
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        let params: [&dyn super::sql::Param; 8] = [
            &query.workflow,
            &query.principal,
            &status(0),
            &status(1),
            &status(2),
            &before_ms,
            &before_id,
            &limit,
        ];
        self.with(|tx| {
            tx.db.query(sql, &params, |r| {
                Ok(from_columns!(
                    r,
                    HistoryRow {
                        run_id,
                        workflow,
                        status,
                        created_at,
                        finished_at,
                        finished_ms,
                        inputs,
                        output,
                        error,
                    }
                ))
            })
        })
    }

    /// Deletes the history of runs that finished before `finished_before_ms`; returns how
    /// many rows went. No index leads with the time, so the rows are looked for by a read
    /// first (which holds no write lock), then deleted a thousand at a time: the oldest
    /// rows come first in the table, and each short transaction finds its thousand at once.
    pub(crate) fn purge_history(&self, finished_before_ms: i64) -> Result<usize, StoreError> {
        const BATCH: i64 = 1000;
        let expired = self.with(|tx| {
            tx.db.query_opt(
                "SELECT run_id FROM run_history WHERE finished_ms < ?1 LIMIT 1",
                &[&finished_before_ms],
                |r| r.get::<String>(0),
            )
        })?;
        if expired.is_none() {
            return Ok(0);
        }
        let mut purged = 0;
        loop {
            let went = self.try_transaction(|tx| {
                tx.db.execute(
                    "DELETE FROM run_history WHERE run_id IN
                         (SELECT run_id FROM run_history WHERE finished_ms < ?1 LIMIT ?2)",
                    &[&finished_before_ms, &BATCH],
                )
            })?;
            purged += went as usize;
            if went < BATCH as u64 {
                return Ok(purged);
            }
        }
    }
}

impl Tx<'_> {
    /// Records the history row of the run with key `run_key`, which has just finished:
    /// its owner's principal, how it ended, its inputs and the run that started it. A run
    /// has one row, written once.
    pub(crate) fn record_history(&self, run_key: i64) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO run_history (run_id, workflow, principal, status, created_at,
                 finished_at, finished_ms, inputs, output, error, parent_run_id)
             SELECT r.id, r.workflow, r.principal, r.status, r.created_at, r.finished_at,
                    r.finished_ms, COALESCE(i.inputs, '{}'), r.output, r.error,
                    (SELECT p.id FROM runs p WHERE p.key = r.parent_key)
             FROM runs r LEFT JOIN run_inputs i ON i.run_key = r.key
             WHERE r.key = ?1 AND r.status <> 'running' AND r.finished_ms IS NOT NULL
             ON CONFLICT (run_id) DO NOTHING",
            &[&run_key],
        )?;
        Ok(())
    }
}
