//! Queries on `run_tasks` and `task_questions`: the task that reports a run, and the
//! questions its units' tasks put, with their answers.
//!
//! A run's own task has a row, found by its id (the run's) or by the run's key. A unit's
//! sub-task has none of its own: it reports the unit's row in `nodes`. A finished task's
//! status never changes: the statements below skip such rows, and a trigger refuses the
//! change anyway.

use rusqlite::{OptionalExtension, Row, params};

use super::{Store, StoreError, Tx};
use crate::clock;

/// A run's own task as stored; its task id is `run_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRow {
    pub run_id: String,
    pub status: String,
    pub status_message: Option<String>,
    pub progress: i64,
    pub created_at: String,
    pub updated_at: String,
    pub ttl_ms: i64,
    pub poll_interval_ms: i64,
    pub result: Option<String>,
    pub error: Option<String>,
}

/// How long tasks are kept and how often clients should poll them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskTiming {
    pub ttl_ms: i64,
    pub poll_interval_ms: i64,
}

/// What a sub-task takes from its run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHead {
    pub key: i64,
    pub run_id: String,
    pub created_at: String,
    pub timing: TaskTiming,
    /// How many nodes the run's plan has.
    pub nodes: i64,
}

/// A question a unit's task asks, with its answer once given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionRow {
    /// The node's index in the plan.
    pub node: i64,
    pub node_id: Option<String>,
    pub instance: i64,
    pub key: String,
    pub request: String,
    pub answer: Option<String>,
}

const TASK_COLUMNS: &str = "r.id, t.status, t.status_message, t.progress, t.created_at, \
     t.updated_at, t.ttl_ms, t.poll_interval_ms, t.result, t.error";

fn task_from_row(r: &Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok(TaskRow {
        run_id: r.get(0)?,
        status: r.get(1)?,
        status_message: r.get(2)?,
        progress: r.get(3)?,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
        ttl_ms: r.get(6)?,
        poll_interval_ms: r.get(7)?,
        result: r.get(8)?,
        error: r.get(9)?,
    })
}

const HEAD_SELECT: &str = "SELECT r.key, r.id, r.created_at, t.ttl_ms, t.poll_interval_ms, \
     p.nodes \
     FROM runs r JOIN run_tasks t ON t.run_key = r.key JOIN plans p ON p.key = r.plan_key";

fn head_from_row(r: &Row<'_>) -> rusqlite::Result<RunHead> {
    Ok(RunHead {
        key: r.get(0)?,
        run_id: r.get(1)?,
        created_at: r.get(2)?,
        timing: TaskTiming {
            ttl_ms: r.get(3)?,
            poll_interval_ms: r.get(4)?,
        },
        nodes: r.get(5)?,
    })
}

impl Tx<'_> {
    /// Inserts the run's own task, with the status message `message`. Its id is the run's.
    pub fn insert_run_task(
        &self,
        run_key: i64,
        timing: TaskTiming,
        message: &str,
    ) -> Result<(), StoreError> {
        let (now, now_ms) = (clock::now_iso(), clock::now_ms());
        self.conn
            .prepare_cached(
                "INSERT INTO run_tasks (run_key, status, status_message, progress, created_at,
                     updated_at, updated_ms, ttl_ms, poll_interval_ms)
                 VALUES (?1, 'working', ?2, 0, ?3, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                run_key,
                message,
                now,
                now_ms,
                timing.ttl_ms,
                timing.poll_interval_ms
            ])?;
        Ok(())
    }

    /// Updates the run's own task. Its progress never goes down.
    pub fn update_run_task(
        &self,
        run_key: i64,
        status: &'static str,
        message: &str,
        progress: i64,
        result: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "UPDATE run_tasks SET status = ?2, status_message = ?3,
                     progress = MAX(progress, ?4), updated_at = ?5, updated_ms = ?6,
                     result = COALESCE(?7, result), error = COALESCE(?8, error)
                 WHERE run_key = ?1 AND (status = 'working' OR status = 'input_required')",
            )?
            .execute(params![
                run_key,
                status,
                message,
                progress.clamp(0, 100),
                clock::now_iso(),
                clock::now_ms(),
                result,
                error
            ])?;
        Ok(())
    }

    /// Records a question of a unit's task under `key`, once: asking again with the same
    /// key (a resumed run) keeps the first record and its answer.
    pub fn ask(
        &self,
        run_key: i64,
        node: i64,
        instance: i64,
        key: &str,
        request: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT OR IGNORE INTO task_questions (run_key, node, instance, key, request,
                     asked_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                run_key,
                node,
                instance,
                key,
                request,
                clock::now_iso()
            ])?;
        Ok(())
    }

    /// Records the answer of a unit's question, unless it has one. False if there is no
    /// such question or it was answered.
    pub fn record_answer(
        &self,
        run_key: i64,
        node: i64,
        instance: i64,
        key: &str,
        answer: &str,
    ) -> Result<bool, StoreError> {
        let changed = self
            .conn
            .prepare_cached(
                "UPDATE task_questions SET answer = ?5, answered_at = ?6
                 WHERE run_key = ?1 AND node = ?2 AND instance = ?3 AND key = ?4
                   AND answer IS NULL",
            )?
            .execute(params![
                run_key,
                node,
                instance,
                key,
                answer,
                clock::now_iso()
            ])?;
        Ok(changed == 1)
    }
}

impl Store {
    /// A run's own task, by its id (the run's).
    pub fn run_task(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        let conn = self.lock();
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM run_tasks t JOIN runs r ON r.key = t.run_key
             WHERE r.id = ?1"
        );
        Ok(conn
            .prepare_cached(&sql)?
            .query_row([task_id], task_from_row)
            .optional()?)
    }

    /// The run with id `run_id`, as its sub-tasks need it.
    pub fn run_head(&self, run_id: &str) -> Result<Option<RunHead>, StoreError> {
        let conn = self.lock();
        let sql = format!("{HEAD_SELECT} WHERE r.id = ?1");
        Ok(conn
            .prepare_cached(&sql)?
            .query_row([run_id], head_from_row)
            .optional()?)
    }

    /// The runs whose id starts with `prefix`: those a sub-task id may belong to.
    pub fn run_heads_with_prefix(&self, prefix: &str) -> Result<Vec<RunHead>, StoreError> {
        let conn = self.lock();
        // Run ids are lowercase hex and hyphens, all of which sort before `~`.
        let sql = format!("{HEAD_SELECT} WHERE r.id >= ?1 AND r.id < ?1 || '~'");
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([prefix], head_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The runs' own tasks of a status (or all), most recently updated first, paginated by
    /// a position `(updated_ms, task_id)` that a later page starts after. Ties go by the
    /// order runs were created in, newest first.
    pub fn list_tasks_page(
        &self,
        status: Option<&str>,
        after: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<(i64, TaskRow)>, StoreError> {
        let conn = self.lock();
        let sql = format!(
            "SELECT {TASK_COLUMNS}, t.updated_ms FROM run_tasks t JOIN runs r ON r.key = t.run_key
             WHERE (?1 IS NULL OR t.status = ?1)
               AND (?2 IS NULL
                    OR (t.updated_ms, t.run_key) < (?2, (SELECT key FROM runs WHERE id = ?3)))
             ORDER BY t.updated_ms DESC, t.run_key DESC LIMIT ?4"
        );
        let (after_ms, after_id) = after.unzip();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![status, after_ms, after_id, limit], |r| {
            Ok((r.get(10)?, task_from_row(r)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every question of a run's units, answered or not, in the order they were asked.
    pub fn questions(&self, run_id: &str) -> Result<Vec<QuestionRow>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT q.node, n.node_id, q.instance, q.key, q.request, q.answer
             FROM task_questions q
             LEFT JOIN nodes n ON n.run_key = q.run_key AND n.node = q.node
                              AND n.instance = q.instance
             WHERE q.run_key = (SELECT key FROM runs WHERE id = ?1)
             ORDER BY q.asked_at, q.key",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(QuestionRow {
                node: r.get(0)?,
                node_id: r.get(1)?,
                instance: r.get(2)?,
                key: r.get(3)?,
                request: r.get(4)?,
                answer: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Answers an open question of a run's unit. False if there is no such run or
    /// question, or it was answered.
    pub fn answer(
        &self,
        run_id: &str,
        node: i64,
        instance: i64,
        key: &str,
        answer: &str,
    ) -> Result<bool, StoreError> {
        self.transaction(|tx| match tx.run_key(run_id) {
            Ok(run_key) => tx.record_answer(run_key, node, instance, key, answer),
            Err(StoreError::Sqlite(rusqlite::Error::QueryReturnedNoRows)) => Ok(false),
            Err(error) => Err(error),
        })?
    }
}
