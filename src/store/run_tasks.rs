//! Queries on `run_tasks` and `task_questions`: the task that reports a run, and the
//! questions its units' tasks put, with their answers.
//!
//! A run's own task has a row, found by its id (the run's) or by the run's key. A unit's
//! sub-task has none of its own: it reports the unit's row in `nodes`. A finished task's
//! status never changes: the statements below skip such rows, and a trigger refuses the
//! change anyway.

use super::sql::{Row, from_columns};
use super::{Owner, Scope, Store, StoreError, Tx};
use crate::clock;

/// A run's own task as stored; its task id is its run's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRow {
    /// The task's run, as its sub-tasks need it.
    pub head: RunHead,
    pub status: String,
    pub status_message: Option<String>,
    pub progress: i64,
    pub updated_at: String,
    pub result: Option<String>,
    pub error: Option<String>,
    /// The tool whose call created the task.
    pub tool: Option<String>,
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
    /// When the run's own task was created.
    pub created_at: String,
    pub timing: TaskTiming,
    /// How many nodes the run's plan has.
    pub nodes: i64,
    /// The plan's node ids in plan order, as the JSON array it was created with.
    pub node_ids: String,
    /// The task protocol the run's task was created under, if any.
    pub era: Option<String>,
    pub owner: Owner,
    /// The node of another run that started this one, if one did: its units' sub-tasks
    /// are that node's sub-tasks.
    pub parent: Option<super::ParentRef>,
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
    /// Why the question has no answer and never will: `decline` or `cancel`.
    pub refusal: Option<String>,
}

/// The columns [`head_from_row`] reads, from [`HEAD_TABLES`].
const HEAD_COLUMNS: &str = "r.key, r.id, t.created_at, t.ttl_ms, t.poll_interval_ms, p.nodes, \
     t.era, p.node_ids, r.principal, r.session, \
     (SELECT pr.id FROM runs pr WHERE pr.key = r.parent_key), r.parent_node, r.parent_index, \
     r.parent_instance";

/// The tables a run's head and its own task come from.
const HEAD_TABLES: &str =
    "run_tasks t JOIN runs r ON r.key = t.run_key JOIN plans p ON p.key = r.plan_key";

/// The columns [`task_from_row`] reads after the head's.
const TASK_COLUMNS: &str =
    "t.status, t.status_message, t.progress, t.updated_at, t.result, t.error, t.tool";

fn head_from_row(r: &Row<'_>) -> Result<RunHead, StoreError> {
    Ok(RunHead {
        key: r.get(0)?,
        run_id: r.get(1)?,
        created_at: r.get(2)?,
        timing: TaskTiming {
            ttl_ms: r.get(3)?,
            poll_interval_ms: r.get(4)?,
        },
        nodes: r.get(5)?,
        era: r.get(6)?,
        node_ids: r.get(7)?,
        owner: Owner::read(r, 8)?,
        parent: super::ParentRef::read(r, 10)?,
    })
}

fn task_from_row(r: &Row<'_>) -> Result<TaskRow, StoreError> {
    Ok(from_columns!(r, 14.., TaskRow {
        status, status_message, progress, updated_at, result, error, tool;
        head: head_from_row(r)?,
    }))
}

/// The update of a run's own task; its progress never goes down (the larger of the two is
/// written with `CASE`, which both dialects read alike, where SQLite's `MAX` would be
/// PostgreSQL's `GREATEST`).
const UPDATE_TASK: &str = "UPDATE run_tasks SET status = ?2, status_message = ?3,
         progress = CASE WHEN progress > ?4 THEN progress ELSE ?4 END,
         updated_at = ?5, updated_ms = ?6,
         result = COALESCE(?7, result), error = COALESCE(?8, error)
     WHERE run_key = ?1 AND (status = 'working' OR status = 'input_required')";

impl Tx<'_> {
    /// Inserts the run's own task, with the status message `message`, and, if a client asked
    /// for it as a task, the task protocol and the tool it asked under. Its id is the run's.
    /// A run started by another run's node takes that run's protocol and tool: its units
    /// are the node's sub-tasks, under the same protocol.
    pub fn insert_run_task(
        &self,
        run_key: i64,
        created_ms: i64,
        timing: TaskTiming,
        message: &str,
        label: Option<(&str, &str)>,
    ) -> Result<(), StoreError> {
        let (now, now_ms) = (clock::iso_from_ms(created_ms), created_ms);
        self.db.execute(
            "INSERT INTO run_tasks (run_key, status, status_message, progress, created_at,
                 updated_at, updated_ms, ttl_ms, poll_interval_ms, era, tool)
             SELECT ?1, 'working', ?2, 0, ?3, ?3, ?4, ?5, ?6,
                    COALESCE(?7, pt.era), COALESCE(?8, pt.tool)
             FROM runs r LEFT JOIN run_tasks pt ON pt.run_key = r.parent_key
             WHERE r.key = ?1",
            &[
                &run_key,
                &message,
                &now,
                &now_ms,
                &timing.ttl_ms,
                &timing.poll_interval_ms,
                &label.map(|(era, _)| era),
                &label.map(|(_, tool)| tool),
            ],
        )?;
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
        self.db.write(
            UPDATE_TASK,
            &[
                &run_key,
                &status,
                &message,
                &progress.clamp(0, 100),
                &clock::now_iso(),
                &clock::now_ms(),
                &result,
                &error,
            ],
        )
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
        self.db.write(
            "INSERT INTO task_questions (run_key, node, instance, key, request, asked_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
            &[
                &run_key,
                &node,
                &instance,
                &key,
                &request,
                &clock::now_iso(),
            ],
        )
    }

    /// Records the answer of a unit's question (or its refusal, `decline` or `cancel`, with
    /// the answer `null`), unless it has one. False if there is no such question or it was
    /// answered.
    pub(crate) fn record_answer(
        &self,
        run_key: i64,
        node: i64,
        instance: i64,
        key: &str,
        answer: Result<&str, &str>,
    ) -> Result<bool, StoreError> {
        let (answer, refusal) = match answer {
            Ok(answer) => (answer, None),
            Err(refusal) => ("null", Some(refusal)),
        };
        let changed = self.db.execute(
            "UPDATE task_questions SET answer = ?5, answered_at = ?6, refusal = ?7
             WHERE run_key = ?1 AND node = ?2 AND instance = ?3 AND key = ?4
               AND answer IS NULL",
            &[
                &run_key,
                &node,
                &instance,
                &key,
                &answer,
                &clock::now_iso(),
                &refusal,
            ],
        )?;
        Ok(changed == 1)
    }

    /// The key of run `run_id`, or `None` if there is no such run.
    fn find_run_key(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        match self.run_key(run_id) {
            Ok(key) => Ok(Some(key)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

impl Store {
    /// Ends the run's own task as `cancelled` now, before its run has stopped; the
    /// trigger on terminal states keeps it so. False if the task had finished.
    pub(crate) fn cancel_run_task(&self, run_id: &str, message: &str) -> Result<bool, StoreError> {
        let changed = self.with(|tx| {
            tx.db.execute(
                "UPDATE run_tasks SET status = 'cancelled', status_message = ?2,
                     updated_at = ?3, updated_ms = ?4
                 WHERE run_key = (SELECT key FROM runs WHERE id = ?1)
                   AND (status = 'working' OR status = 'input_required')",
                &[&run_id, &message, &clock::now_iso(), &clock::now_ms()],
            )
        })?;
        Ok(changed == 1)
    }

    /// A run's own task, by its id (the run's).
    pub fn run_task(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        let sql =
            format!("SELECT {HEAD_COLUMNS}, {TASK_COLUMNS} FROM {HEAD_TABLES} WHERE r.id = ?1");
        self.with(|tx| tx.db.query_opt(&sql, &[&task_id], task_from_row))
    }

    /// The run with id `run_id`, as its sub-tasks need it.
    pub(crate) fn run_head(&self, run_id: &str) -> Result<Option<RunHead>, StoreError> {
        let sql = format!("SELECT {HEAD_COLUMNS} FROM {HEAD_TABLES} WHERE r.id = ?1");
        self.with(|tx| tx.db.query_opt(&sql, &[&run_id], head_from_row))
    }

    /// The runs whose id starts with `prefix`: those a sub-task id may belong to.
    pub(crate) fn run_heads_with_prefix(&self, prefix: &str) -> Result<Vec<RunHead>, StoreError> {
        // Run ids are lowercase hex and hyphens, all of which sort before `~` (in
        // PostgreSQL too: the column sorts by bytes).
        let sql = format!(
            "SELECT {HEAD_COLUMNS} FROM {HEAD_TABLES} WHERE r.id >= ?1 AND r.id < ?1 || '~'"
        );
        self.with(|tx| tx.db.query(&sql, &[&prefix], head_from_row))
    }

    /// The runs' own tasks created under task protocol `era`, newest first, after the task
    /// `after` (a cursor that stays valid however the tasks change), at most `limit`.
    pub fn list_tasks_page(
        &self,
        era: &str,
        scope: Scope<'_>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TaskRow>, StoreError> {
        let sql = format!(
            "SELECT {HEAD_COLUMNS}, {TASK_COLUMNS} FROM {HEAD_TABLES}
             WHERE t.era = ?1 AND r.parent_key IS NULL AND {}
               AND (CAST(?2 AS TEXT) IS NULL
                    OR t.run_key < (SELECT key FROM runs WHERE id = ?2))
             ORDER BY t.run_key DESC LIMIT ?3",
            super::runs::scope_clause(4, 5)
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (kind, name) = scope.params();
        self.with(|tx| {
            tx.db
                .query(&sql, &[&era, &after, &limit, &kind, &name], task_from_row)
        })
    }

    /// Every question of a run's units, answered or not, in the order they were asked.
    pub fn questions(&self, run_id: &str) -> Result<Vec<QuestionRow>, StoreError> {
        self.with(|tx| {
            tx.db.query(
                "SELECT q.node, n.node_id, q.instance, q.key, q.request, q.answer, q.refusal
                 FROM task_questions q
                 LEFT JOIN nodes n ON n.run_key = q.run_key AND n.node = q.node
                                  AND n.instance = q.instance
                 WHERE q.run_key = (SELECT key FROM runs WHERE id = ?1)
                 ORDER BY q.asked_at, q.key",
                &[&run_id],
                |r| {
                    Ok(from_columns!(
                        r,
                        QuestionRow {
                            node,
                            node_id,
                            instance,
                            key,
                            request,
                            answer,
                            refusal,
                        }
                    ))
                },
            )
        })
    }

    /// Closes an open question whose answer did not fit (refusal `reasked`) and asks it
    /// again under `new_key`, in one transaction. False if there is no such run or open
    /// question.
    pub(crate) fn reask(
        &self,
        run_id: &str,
        node: i64,
        instance: i64,
        key: &str,
        new_key: &str,
    ) -> Result<bool, StoreError> {
        self.try_transaction(|tx| {
            let Some(run_key) = tx.find_run_key(run_id)? else {
                return Ok(false);
            };
            let request: Option<String> = tx.db.query_opt(
                "SELECT request FROM task_questions
                 WHERE run_key = ?1 AND node = ?2 AND instance = ?3 AND key = ?4
                   AND answer IS NULL",
                &[&run_key, &node, &instance, &key],
                |r| r.get(0),
            )?;
            let Some(request) = request else {
                return Ok(false);
            };
            tx.record_answer(run_key, node, instance, key, Err("reasked"))?;
            tx.ask(run_key, node, instance, new_key, &request)?;
            Ok(true)
        })
    }

    /// Answers an open question of a run's unit (`Err` holds a refusal). False if there is
    /// no such run or question, or it was answered.
    pub fn answer(
        &self,
        run_id: &str,
        node: i64,
        instance: i64,
        key: &str,
        answer: Result<&str, &str>,
    ) -> Result<bool, StoreError> {
        self.try_transaction(|tx| match tx.find_run_key(run_id)? {
            Some(run_key) => tx.record_answer(run_key, node, instance, key, answer),
            None => Ok(false),
        })
    }
}
