//! Queries on `run_tasks` and `task_questions`: the tasks that report a run and its nodes,
//! and the questions those tasks put, with their answers.
//!
//! A task row is found by its id, or by its unit: (run key, node index, instance), where
//! the run's own task is node -1 and a node's is instance -1. A finished task's status never
//! changes: the statements below skip such rows, and a trigger refuses the change anyway.

use rusqlite::{OptionalExtension, Row, params};

use super::{Store, StoreError, Tx};
use crate::clock;

/// A task as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRow {
    pub task_id: String,
    pub parent_id: Option<String>,
    pub run_id: String,
    pub node_id: Option<String>,
    pub instance: i64,
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

/// A task's new state. `progress` never lowers the stored value.
#[derive(Debug, Clone)]
pub struct TaskUpdate {
    /// The node's index in the run's plan.
    pub node: i64,
    pub node_id: Option<String>,
    pub instance: i64,
    /// Used when the row does not exist yet (a `for_each` instance's first change).
    pub new_task_id: String,
    pub status: &'static str,
    pub status_message: Option<String>,
    pub progress: i64,
    pub result: Option<String>,
    pub error: Option<String>,
}

/// How long tasks are kept and how often clients should poll them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskTiming {
    pub ttl_ms: i64,
    pub poll_interval_ms: i64,
}

/// A question a task asks, with its answer once given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionRow {
    pub task_id: String,
    pub node_id: Option<String>,
    pub instance: i64,
    pub key: String,
    pub request: String,
    pub answer: Option<String>,
}

const TASK_COLUMNS: &str = "t.task_id, t.parent_id, r.id, t.node_id, t.instance, t.status, \
     t.status_message, t.progress, t.created_at, t.updated_at, t.ttl_ms, t.poll_interval_ms, \
     t.result, t.error";

fn task_from_row(r: &Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok(TaskRow {
        task_id: r.get(0)?,
        parent_id: r.get(1)?,
        run_id: r.get(2)?,
        node_id: r.get(3)?,
        instance: r.get(4)?,
        status: r.get(5)?,
        status_message: r.get(6)?,
        progress: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
        ttl_ms: r.get(10)?,
        poll_interval_ms: r.get(11)?,
        result: r.get(12)?,
        error: r.get(13)?,
    })
}

impl Tx<'_> {
    /// Inserts the run's own task (its id is the run's) and one `working` task per node,
    /// given in plan order as (task id, node id), with the status message `message` and
    /// `pending`.
    pub fn insert_run_tasks(
        &self,
        run_key: i64,
        run_id: &str,
        nodes: &[(String, &str)],
        timing: TaskTiming,
        message: &str,
    ) -> Result<(), StoreError> {
        let now = clock::now_iso();
        let now_ms = clock::now_ms();
        let (ttl, poll) = (timing.ttl_ms, timing.poll_interval_ms);
        self.conn
            .prepare_cached(
                "INSERT INTO run_tasks (run_key, node, instance, task_id, parent_id, node_id,
                     status, status_message, progress, created_at, updated_at, updated_ms,
                     ttl_ms, poll_interval_ms)
                 VALUES (?1, -1, -1, ?2, NULL, NULL, 'working', ?3, 0, ?4, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![run_key, run_id, message, now, now_ms, ttl, poll])?;
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO run_tasks (run_key, node, instance, task_id, parent_id, node_id,
                 status, status_message, progress, created_at, updated_at, updated_ms,
                 ttl_ms, poll_interval_ms)
             VALUES (?1, ?2, -1, ?3, ?4, ?5, 'working', 'pending', 0, ?6, ?6, ?7, ?8, ?9)",
        )?;
        for (index, (task_id, node_id)) in nodes.iter().enumerate() {
            stmt.execute(params![
                run_key,
                index as i64,
                task_id,
                run_id,
                node_id,
                now,
                now_ms,
                ttl,
                poll
            ])?;
        }
        Ok(())
    }

    /// Writes the new states of some of a run's tasks, creating the rows of units seen for
    /// the first time (`for_each` instances).
    pub fn update_tasks(
        &self,
        run_key: i64,
        run_id: &str,
        updates: &[TaskUpdate],
        timing: TaskTiming,
    ) -> Result<(), StoreError> {
        let (now, now_ms) = (clock::now_iso(), clock::now_ms());
        // A node's task exists from the start of its run: a plain update by key. An
        // instance's task is created the first time it changes.
        let mut update = self.conn.prepare_cached(
            "UPDATE run_tasks SET status = ?4, status_message = ?5,
                 progress = MAX(progress, ?6), updated_at = ?7, updated_ms = ?8,
                 result = ?9, error = ?10
             WHERE run_key = ?1 AND node = ?2 AND instance = ?3
               AND (status = 'working' OR status = 'input_required')",
        )?;
        let mut upsert = self.conn.prepare_cached(
            "INSERT INTO run_tasks (run_key, node, instance, task_id, parent_id, node_id,
                 status, status_message, progress, created_at, updated_at, updated_ms,
                 ttl_ms, poll_interval_ms, result, error)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11, ?12, ?13, ?14, ?15)
             ON CONFLICT (run_key, node, instance) DO UPDATE SET
                 status = excluded.status, status_message = excluded.status_message,
                 progress = MAX(run_tasks.progress, excluded.progress),
                 updated_at = excluded.updated_at, updated_ms = excluded.updated_ms,
                 result = excluded.result, error = excluded.error
             WHERE run_tasks.status = 'working' OR run_tasks.status = 'input_required'",
        )?;
        for task in updates {
            let progress = task.progress.clamp(0, 100);
            if task.instance < 0 {
                update.execute(params![
                    run_key,
                    task.node,
                    task.instance,
                    task.status,
                    task.status_message,
                    progress,
                    now,
                    now_ms,
                    task.result,
                    task.error
                ])?;
                continue;
            }
            upsert.execute(params![
                run_key,
                task.node,
                task.instance,
                task.new_task_id,
                run_id,
                task.node_id,
                task.status,
                task.status_message,
                progress,
                now,
                now_ms,
                timing.ttl_ms,
                timing.poll_interval_ms,
                task.result,
                task.error
            ])?;
        }
        Ok(())
    }

    /// Updates the run's own task.
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
                 WHERE run_key = ?1 AND node = -1 AND instance = -1
                   AND (status = 'working' OR status = 'input_required')",
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

    /// Records a question of the unit's task under `key`, once: asking again with the same
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
                "INSERT OR IGNORE INTO task_questions (task_id, key, request, asked_at)
                 SELECT task_id, ?4, ?5, ?6 FROM run_tasks
                 WHERE run_key = ?1 AND node = ?2 AND instance = ?3",
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
}

impl Tx<'_> {
    /// Records the answer of a unit's question, unless it has one.
    pub fn record_answer(
        &self,
        run_key: i64,
        node: i64,
        instance: i64,
        key: &str,
        answer: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "UPDATE task_questions SET answer = ?5, answered_at = ?6
                 WHERE key = ?4 AND answer IS NULL AND task_id = (SELECT task_id FROM run_tasks
                     WHERE run_key = ?1 AND node = ?2 AND instance = ?3)",
            )?
            .execute(params![
                run_key,
                node,
                instance,
                key,
                answer,
                clock::now_iso()
            ])?;
        Ok(())
    }
}

impl Store {
    pub fn task(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        let conn = self.lock();
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM run_tasks t JOIN runs r ON r.key = t.run_key
             WHERE t.task_id = ?1"
        );
        Ok(conn
            .prepare_cached(&sql)?
            .query_row([task_id], task_from_row)
            .optional()?)
    }

    /// The sub-tasks of `parent` in plan order (a node, then its instances), after the task
    /// id `after` (a cursor that stays valid while instances are added), at most `limit`.
    pub fn child_tasks(
        &self,
        parent: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TaskRow>, StoreError> {
        let conn = self.lock();
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM run_tasks t JOIN runs r ON r.key = t.run_key
             WHERE t.run_key = (SELECT run_key FROM run_tasks WHERE task_id = ?1)
               AND t.parent_id = ?1
               AND (?2 IS NULL OR (t.node, t.instance) >
                    (SELECT node, instance FROM run_tasks WHERE task_id = ?2))
             ORDER BY t.node, t.instance LIMIT ?3"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![parent, after, limit], task_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The runs' own tasks of a status (or all), most recently updated first, paginated by
    /// a position `(updated_ms, task_id)` that a later page starts after.
    pub fn list_tasks_page(
        &self,
        status: Option<&str>,
        after: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<(i64, TaskRow)>, StoreError> {
        let conn = self.lock();
        let sql = format!(
            "SELECT {TASK_COLUMNS}, t.updated_ms FROM run_tasks t JOIN runs r ON r.key = t.run_key
             WHERE t.parent_id IS NULL AND (?1 IS NULL OR t.status = ?1)
               AND (?2 IS NULL OR (t.updated_ms, t.task_id) < (?2, ?3))
             ORDER BY t.updated_ms DESC, t.task_id DESC LIMIT ?4"
        );
        let (after_ms, after_id) = after.unzip();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![status, after_ms, after_id, limit], |r| {
            Ok((r.get(14)?, task_from_row(r)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every question of a run's tasks, answered or not.
    pub fn questions(&self, run_id: &str) -> Result<Vec<QuestionRow>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT q.task_id, t.node_id, t.instance, q.key, q.request, q.answer
             FROM task_questions q JOIN run_tasks t ON t.task_id = q.task_id
             WHERE t.run_key = (SELECT key FROM runs WHERE id = ?1)
             ORDER BY q.asked_at, q.key",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(QuestionRow {
                task_id: r.get(0)?,
                node_id: r.get(1)?,
                instance: r.get(2)?,
                key: r.get(3)?,
                request: r.get(4)?,
                answer: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Answers an open question. False if there is no such question or it was answered.
    pub fn answer(&self, task_id: &str, key: &str, answer: &str) -> Result<bool, StoreError> {
        let conn = self.lock();
        let changed = conn
            .prepare_cached(
                "UPDATE task_questions SET answer = ?3, answered_at = ?4
                 WHERE task_id = ?1 AND key = ?2 AND answer IS NULL",
            )?
            .execute(params![task_id, key, answer, clock::now_iso()])?;
        Ok(changed == 1)
    }
}
