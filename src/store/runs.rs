//! Queries on `runs`: durable runs, the plans they run, and their leases.
//!
//! Deadlines and lease expiries are milliseconds since the Unix epoch; the times a person
//! reads are ISO 8601 text, as elsewhere in the store.
//!
//! Leases run on the database's clock: every statement that sets a lease's expiry or
//! compares against it reads the time from the database itself (`NOW_MS`, see
//! [`on_db_clock`]), and callers pass only a lease's length. Hosts whose clocks disagree
//! then agree on whose lease ran out.

use super::sql::{Db, Param, Row, from_columns, numbered, on_db_clock};
use super::{Store, StoreError, Tx};
use crate::clock;

/// A run as stored. JSON columns (`snapshot`, `inputs`, `output`) are text the caller wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    pub id: String,
    pub workflow: String,
    pub snapshot: String,
    pub inputs: String,
    pub status: String,
    pub error: Option<String>,
    pub output: Option<String>,
    pub origin: String,
    pub answers: String,
    pub deadline_ms: Option<i64>,
    pub lease_owner: Option<String>,
    pub lease_expires_ms: Option<i64>,
    pub cancel_requested: bool,
    pub retry_of: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
    pub owner: Owner,
    /// How often the run was taken over from another process since a unit of it last
    /// finished.
    pub takeovers: i64,
    /// The run whose `workflow` node started this one, if one did.
    pub parent: Option<ParentRef>,
    /// How deep below the run at the top of its tree the run is (0 there).
    pub depth: i64,
    /// The run's trace context: its root span's W3C `traceparent`, and the one of the span
    /// its root links to; text the store neither reads nor checks.
    pub trace_parent: Option<String>,
    pub trace_link: Option<String>,
}

/// The node of another run that started a run: the run, the node's id and index in its
/// plan, and the `for_each` instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentRef {
    pub run_id: String,
    pub node: String,
    pub index: i64,
    pub instance: Option<i64>,
}

impl ParentRef {
    /// The parent a row holds in its columns from `at` on: the parent run's id, then the
    /// node's id, index and instance. `None` for a run no node started, or whose parent
    /// was purged.
    pub(super) fn read(r: &Row<'_>, at: usize) -> Result<Option<ParentRef>, StoreError> {
        let Some(run_id) = r.get::<Option<String>>(at)? else {
            return Ok(None);
        };
        Ok(Some(ParentRef {
            run_id,
            node: r.get::<Option<String>>(at + 1)?.unwrap_or_default(),
            index: r.get::<Option<i64>>(at + 2)?.unwrap_or_default(),
            instance: r.get(at + 3)?,
        }))
    }
}

/// Who a run belongs to, where the server tells callers apart: the principal whose token
/// started it, and the session it was started in. Both `None` for a run started over
/// stdio or from the terminal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owner {
    pub principal: Option<String>,
    pub session: Option<String>,
}

impl Owner {
    /// The owner a row holds in its columns `at` (the principal) and `at + 1` (the session).
    pub(super) fn read(r: &Row<'_>, at: usize) -> Result<Owner, StoreError> {
        Ok(Owner {
            principal: r.get(at)?,
            session: r.get(at + 1)?,
        })
    }
}

/// Whose runs a listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    Everyone,
    /// The runs started under this principal's token.
    Principal(&'a str),
    /// The runs started in this session.
    Session(&'a str),
    /// The runs started for no principal and in no session.
    Nobody,
}

impl<'a> Scope<'a> {
    /// The scope as the two parameters of [`scope_clause`]: its kind and its name.
    pub(super) fn params(self) -> (i64, Option<&'a str>) {
        match self {
            Scope::Everyone => (0, None),
            Scope::Principal(name) => (1, Some(name)),
            Scope::Session(id) => (2, Some(id)),
            Scope::Nobody => (3, None),
        }
    }
}

/// The condition that a run `r` is in a scope given as parameters `?kind` and `?name`.
pub(super) fn scope_clause(kind: usize, name: usize) -> String {
    owned_by_scope("r", kind, name)
}

/// The condition that the row `alias`, whose owner is in its columns `principal` and
/// `session`, is in a scope given as parameters `?kind` and `?name`.
pub(super) fn owned_by_scope(alias: &str, kind: usize, name: usize) -> String {
    format!(
        "CASE CAST(?{kind} AS BIGINT) WHEN 0 THEN TRUE WHEN 1 THEN {alias}.principal = ?{name} \
         WHEN 2 THEN {alias}.session = ?{name} \
         ELSE {alias}.principal IS NULL AND {alias}.session IS NULL END"
    )
}

/// How a run ended, as its report needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEndRow {
    pub workflow: String,
    pub status: String,
    pub error: Option<String>,
    pub output: Option<String>,
    /// The plan's node ids in plan order, as a JSON array.
    pub node_ids: String,
}

/// Where a run stands, as a parent polls its child: its status, its task's progress and
/// message, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPollRow {
    pub status: String,
    /// The run's own task waits for an answer.
    pub asking: bool,
    pub progress: i64,
    pub status_message: Option<String>,
    pub output: Option<String>,
    pub error: Option<String>,
}

/// A run a `workflow` node of another run started: its id, the node, the instance, its
/// status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRow {
    pub id: String,
    /// The id of the run whose node started it.
    pub parent_id: String,
    pub workflow: String,
    pub parent_node: String,
    pub parent_instance: Option<i64>,
    pub status: String,
}

/// A child run from the columns `c.id, p.id, c.workflow, c.parent_node, c.parent_instance,
/// c.status` (the child, its parent).
fn child_from_row(r: &Row<'_>) -> Result<ChildRow, StoreError> {
    Ok(from_columns!(
        r,
        ChildRow {
            id,
            parent_id,
            workflow,
            parent_node,
            parent_instance,
            status,
        }
    ))
}

/// What `runs` lists: a run with its parent task's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    pub id: String,
    pub workflow: String,
    pub status: String,
    pub progress: i64,
    pub status_message: Option<String>,
    pub origin: String,
    pub created_at: String,
}

/// A run being created, with the lease of the process that will drive it.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub id: &'a str,
    pub workflow: &'a str,
    pub snapshot: &'a str,
    /// A hash of `snapshot`, under which runs of the same plan share one copy of it.
    pub plan_hash: &'a str,
    pub inputs: &'a str,
    /// The plan's node ids in plan order, as a JSON array, and how many there are.
    pub node_ids: &'a str,
    pub nodes: i64,
    pub origin: &'a str,
    pub answers: &'a str,
    pub deadline_ms: Option<i64>,
    pub lease_owner: &'a str,
    /// How long the lease lasts, in ms, from now by the database's clock.
    pub lease_ms: i64,
    pub retry_of: Option<&'a str>,
    /// The key a client may retry the starting call under, and that call.
    pub idempotency: Option<(&'a str, &'a str)>,
    pub principal: Option<&'a str>,
    pub session: Option<&'a str>,
    /// The node of another run that starts this one, if one does.
    pub parent: Option<NewParent<'a>>,
    /// The run's trace context, as [`RunRow::trace_parent`] and [`RunRow::trace_link`].
    pub trace_parent: Option<&'a str>,
    pub trace_link: Option<&'a str>,
}

/// The node that starts a run: its run's id, its id and index in that run's plan, its
/// `for_each` instance; and the new run's depth in its tree.
#[derive(Debug, Clone, Copy)]
pub struct NewParent<'a> {
    pub run_id: &'a str,
    pub node: &'a str,
    pub index: i64,
    pub instance: Option<i64>,
    pub depth: i64,
}

/// Who holds an unfinished run: (run id, lease owner, whether the lease ran out by the
/// database's clock, or has no expiry).
pub(crate) type Lease = (String, Option<String>, bool);

/// The longest lease a statement sets, in ms: far beyond any use, and far from overflowing
/// when added to the time.
const LONGEST_LEASE_MS: i64 = i64::MAX / 4;

/// A lease's length as the statements take it.
fn lease_length(ms: i64) -> i64 {
    ms.clamp(0, LONGEST_LEASE_MS)
}

const INSERT_RUN: super::sql::Dialects = on_db_clock!(
    "INSERT INTO runs (id, workflow, plan_key, status, origin, answers, deadline_ms,
         lease_owner, lease_expires_ms, retry_of, created_at, updated_at,
         idempotency_key, idempotency_request, principal, session,
         parent_key, parent_node, parent_index, parent_instance, depth, trace_parent, trace_link)
     VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, " NOW_MS " + ?8, ?9, ?10, ?10, ?11, ?12,
             ?13, ?14, (SELECT key FROM runs WHERE id = ?15), ?16, ?17, ?18, ?19, ?20, ?21)"
);

/// SQLite: extends the lease of the run the fence found.
const EXTEND_LEASE: &str = on_db_clock!(
    "UPDATE runs SET lease_expires_ms = " NOW_MS " + ?2, updated_at = ?3,
         takeovers = CASE WHEN ?4 THEN 0 ELSE takeovers END, revision = revision + 1
     WHERE key = ?1"
)
.sqlite;

/// PostgreSQL: the fence of a run whose key is not known here yet, in one statement.
const FENCE_POSTGRES: &str = on_db_clock!(
    "UPDATE runs SET lease_expires_ms = " NOW_MS " + ?3, updated_at = ?4,
         takeovers = CASE WHEN ?5 THEN 0 ELSE takeovers END, revision = revision + 1
     WHERE id = ?1 AND lease_owner = ?2 AND status = 'running'
     RETURNING key"
)
.postgres;

/// PostgreSQL: the fence of a run whose key is known, which fails (a division by zero)
/// when it finds no row it may extend, so that its transaction aborts without a round
/// trip of its own.
const FENCE_KNOWN: &str = on_db_clock!(
    "WITH fenced AS (
         UPDATE runs SET lease_expires_ms = " NOW_MS " + ?4, updated_at = ?5,
             takeovers = CASE WHEN ?6 THEN 0 ELSE takeovers END, revision = revision + 1
         WHERE key = ?1 AND id = ?2 AND lease_owner = ?3 AND status = 'running'
         RETURNING key)
     SELECT 1 / count(*) FROM fenced"
)
.postgres;

/// A new run's own task: when it is created, its timing, its first status message, and
/// the task protocol and tool a client asked it under.
#[derive(Debug, Clone, Copy)]
pub struct NewRunTask<'a> {
    pub created_ms: i64,
    pub timing: super::TaskTiming,
    pub message: &'a str,
    pub label: Option<(&'a str, &'a str)>,
}

/// PostgreSQL: `finish_run` and `record_history` in one statement: the run's row, if it
/// was unfinished, then its history from what the update returns (the statement's own
/// reads see the row as it was before).
const FINISH_POSTGRES: &str = "WITH done AS (
         UPDATE runs SET status = ?2, error = ?3, output = ?4, updated_at = ?5,
             finished_at = ?5, finished_ms = ?6, lease_owner = NULL, lease_expires_ms = NULL,
             revision = revision + 1
         WHERE key = ?1 AND status = 'running'
         RETURNING key, id, workflow, principal, status, created_at, finished_at,
                   finished_ms, output, error, parent_key)
     INSERT INTO run_history (run_id, workflow, principal, status, created_at,
         finished_at, finished_ms, inputs, output, error, parent_run_id)
     SELECT d.id, d.workflow, d.principal, d.status, d.created_at, d.finished_at,
            d.finished_ms, COALESCE(i.inputs, '{}'), d.output, d.error,
            (SELECT p.id FROM runs p WHERE p.key = d.parent_key)
     FROM done d LEFT JOIN run_inputs i ON i.run_key = d.key
     ON CONFLICT (run_id) DO NOTHING";

/// PostgreSQL: a new run, its plan (the stored one with the same snapshot, or a new one),
/// its inputs and its own task, in one statement: `insert_run`, `plan_key` and
/// `insert_run_task` as one. Its parts see the database as it was before it, so each
/// takes the new rows' keys from the part that made them.
const NEW_RUN_POSTGRES: &str = on_db_clock!(
    "WITH found AS (
         SELECT key FROM plans WHERE hash = CAST(?3 AS TEXT) AND snapshot = CAST(?4 AS TEXT)
         LIMIT 1),
     made AS (
         INSERT INTO plans (hash, snapshot, node_ids, nodes)
         SELECT ?3, ?4, ?5, ?6 WHERE NOT EXISTS (SELECT 1 FROM found)
         RETURNING key),
     plan AS (SELECT key FROM found UNION ALL SELECT key FROM made),
     run AS (
         INSERT INTO runs (id, workflow, plan_key, status, origin, answers, deadline_ms,
             lease_owner, lease_expires_ms, retry_of, created_at, updated_at,
             idempotency_key, idempotency_request, principal, session,
             parent_key, parent_node, parent_index, parent_instance, depth,
             trace_parent, trace_link)
         SELECT ?1, ?2, plan.key, 'running', ?7, ?8, ?9, ?10,
                " NOW_MS " + CAST(?11 AS BIGINT), ?12, ?13, ?13, ?14, ?15, ?16, ?17,
                (SELECT key FROM runs WHERE id = CAST(?18 AS TEXT)), ?19, ?20, ?21, ?22,
                ?31, ?32
         FROM plan
         RETURNING key, parent_key),
     inputs AS (INSERT INTO run_inputs (run_key, inputs) SELECT key, ?23 FROM run)
     INSERT INTO run_tasks (run_key, status, status_message, progress, created_at,
         updated_at, updated_ms, ttl_ms, poll_interval_ms, era, tool)
     SELECT run.key, 'working', ?24, 0, ?25, ?25, ?26, ?27, ?28,
            COALESCE(CAST(?29 AS TEXT), pt.era), COALESCE(CAST(?30 AS TEXT), pt.tool)
     FROM run LEFT JOIN run_tasks pt ON pt.run_key = run.parent_key
     RETURNING run_key"
)
.postgres;

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunEnd {
    pub status: &'static str,
    pub error: Option<String>,
    pub output: Option<String>,
}

const RUN_COLUMNS: &str = "r.id, r.workflow, p.snapshot, i.inputs, r.status, r.error, r.output, \
     r.origin, r.answers, r.deadline_ms, r.lease_owner, r.lease_expires_ms, r.cancel_requested, \
     r.retry_of, r.created_at, r.updated_at, r.finished_at, r.principal, r.session, r.takeovers, \
     (SELECT pr.id FROM runs pr WHERE pr.key = r.parent_key), r.parent_node, r.parent_index, \
     r.parent_instance, r.depth, r.trace_parent, r.trace_link";

fn run_from_row(r: &Row<'_>) -> Result<RunRow, StoreError> {
    Ok(from_columns!(r, RunRow {
        id, workflow, snapshot, inputs, status, error, output, origin, answers, deadline_ms,
        lease_owner, lease_expires_ms, cancel_requested, retry_of, created_at, updated_at,
        finished_at;
        owner: Owner::read(r, 17)?,
        takeovers: r.get(19)?,
        parent: ParentRef::read(r, 20)?,
        depth: r.get(24)?,
        trace_parent: r.get(25)?,
        trace_link: r.get(26)?,
    }))
}

/// A new run's values from its origin to its depth in its tree, given to `with`: the
/// columns both statements that insert a run bind in this order, between what comes
/// before (its id, workflow and plan) and after (its inputs and task, its trace context).
fn with_run_values<T>(run: &NewRun<'_>, with: impl FnOnce(&[&dyn Param]) -> T) -> T {
    let lease = lease_length(run.lease_ms);
    let now = clock::now_iso();
    let idempotency = (
        run.idempotency.map(|(key, _)| key),
        run.idempotency.map(|(_, request)| request),
    );
    let parent = run.parent;
    let (parent_run, parent_node) = (parent.map(|p| p.run_id), parent.map(|p| p.node));
    let (index, instance) = (parent.map(|p| p.index), parent.and_then(|p| p.instance));
    let depth = parent.map_or(0, |p| p.depth);
    with(&[
        &run.origin,
        &run.answers,
        &run.deadline_ms,
        &run.lease_owner,
        &lease,
        &run.retry_of,
        &now,
        &idempotency.0,
        &idempotency.1,
        &run.principal,
        &run.session,
        &parent_run,
        &parent_node,
        &index,
        &instance,
        &depth,
    ])
}

impl Tx<'_> {
    /// Records a new run; returns its key, which the rows of its nodes and tasks carry.
    pub fn insert_run(&self, run: &NewRun<'_>) -> Result<i64, StoreError> {
        let plan = self.plan_key(run)?;
        let key = with_run_values(run, |values| {
            let mut params: Vec<&dyn Param> = vec![&run.id, &run.workflow, &plan];
            params.extend_from_slice(values);
            params.extend([&run.trace_parent as &dyn Param, &run.trace_link]);
            self.db.insert(self.db.pick(INSERT_RUN), "key", &params)
        })?;
        self.db.execute(
            "INSERT INTO run_inputs (run_key, inputs) VALUES (?1, ?2)",
            &[&key, &run.inputs],
        )?;
        Ok(key)
    }

    /// The key of the run's plan: the stored one with the same snapshot, or a new one.
    fn plan_key(&self, run: &NewRun<'_>) -> Result<i64, StoreError> {
        // The hash finds candidates; the text itself decides, so a collision cannot give a
        // run another plan.
        let found = self.db.query_opt(
            "SELECT key FROM plans WHERE hash = ?1 AND snapshot = ?2",
            &[&run.plan_hash, &run.snapshot],
            |r| r.get(0),
        )?;
        if let Some(key) = found {
            return Ok(key);
        }
        self.db.insert(
            "INSERT INTO plans (hash, snapshot, node_ids, nodes) VALUES (?1, ?2, ?3, ?4)",
            "key",
            &[&run.plan_hash, &run.snapshot, &run.node_ids, &run.nodes],
        )
    }

    /// The key of the run with id `run_id`.
    pub fn run_key(&self, run_id: &str) -> Result<i64, StoreError> {
        self.db
            .query_opt("SELECT key FROM runs WHERE id = ?1", &[&run_id], |r| {
                r.get(0)
            })?
            .ok_or_else(|| StoreError::NotFound(format!("run {run_id}")))
    }

    /// Checks that `owner` still holds the run's lease and extends it to `lease_ms` from
    /// now, by the database's clock; `LeaseLost` if not. Every batch a driver commits
    /// starts here, so a process that lost a run writes nothing. Returns the run's key.
    /// When `progressed` (a unit of the run finished in this batch), the run's count of
    /// takeovers starts again.
    pub fn fence(
        &self,
        run_id: &str,
        owner: &str,
        lease_ms: i64,
        progressed: bool,
    ) -> Result<i64, StoreError> {
        if let Db::Postgres(session) = self.db {
            return self.fence_postgres(session, run_id, owner, lease_ms, progressed);
        }
        // Found, then extended, in the caller's write transaction: an `UPDATE … RETURNING`
        // would stage its one row in a temporary table, at every batch of every run.
        let key: i64 = self
            .db
            .query_opt(
                "SELECT key FROM runs WHERE id = ?1 AND lease_owner = ?2 AND status = 'running'",
                &[&run_id, &owner],
                |r| r.get(0),
            )?
            .ok_or_else(|| StoreError::LeaseLost {
                run_id: run_id.to_owned(),
            })?;
        self.db.execute(
            EXTEND_LEASE,
            &[
                &key,
                &lease_length(lease_ms),
                &clock::now_iso(),
                &progressed,
            ],
        )?;
        Ok(key)
    }

    /// PostgreSQL, where writers do not wait for each other to begin: the run's row is
    /// extended by an `UPDATE`, which locks it until the commit, so that no other host
    /// claims the run before then. The run's key, once this process knows it
    /// (`RunKeys`), is not waited for: the fence goes out with the batch's next round
    /// trip, and a run it finds held by another owner (no row: a division by zero, read as
    /// `LeaseLost`) aborts the transaction there, before its `COMMIT`.
    fn fence_postgres(
        &self,
        session: &super::postgres::Session,
        run_id: &str,
        owner: &str,
        lease_ms: i64,
        progressed: bool,
    ) -> Result<i64, StoreError> {
        let length = lease_length(lease_ms);
        let now = clock::now_iso();
        if let Some(key) = self.keys.and_then(|keys| keys.get(run_id)) {
            let on_error = super::postgres::OnError::LeaseLost(run_id.to_owned());
            let params: [&dyn super::sql::Param; 6] =
                [&key, &run_id, &owner, &length, &now, &progressed];
            session.write_as(&numbered(FENCE_KNOWN), &params, on_error)?;
            return Ok(key);
        }
        let key: i64 = self
            .db
            .query_opt(
                FENCE_POSTGRES,
                &[&run_id, &owner, &length, &now, &progressed],
                |r| r.get(0),
            )?
            .ok_or_else(|| StoreError::LeaseLost {
                run_id: run_id.to_owned(),
            })?;
        if let Some(keys) = self.keys {
            keys.remember(run_id, key);
        }
        Ok(key)
    }

    /// Records how a run ended and gives up its lease, and records its history
    /// (`history.rs`) in the same transaction; a run already finished is left as it is.
    pub(crate) fn finish_run(&self, run_key: i64, end: &RunEnd) -> Result<(), StoreError> {
        let now = clock::now_iso();
        let params: [&dyn super::sql::Param; 6] = [
            &run_key,
            &end.status,
            &end.error,
            &end.output,
            &now,
            &clock::now_ms(),
        ];
        if let Db::Postgres(_) = self.db {
            // One statement, nothing read back: it goes out with the batch's commit.
            return self.db.write(FINISH_POSTGRES, &params);
        }
        let finished = self.db.execute(
            "UPDATE runs SET status = ?2, error = ?3, output = ?4, updated_at = ?5,
                 finished_at = ?5, finished_ms = ?6, lease_owner = NULL, lease_expires_ms = NULL,
                 revision = revision + 1
             WHERE key = ?1 AND status = 'running'",
            &params,
        )?;
        if finished == 1 {
            self.record_history(run_key)?;
        }
        Ok(())
    }

    /// Records a new run and its own task (`insert_run`, then `insert_run_task`). On
    /// PostgreSQL in one statement, with the plan's lookup, that nothing waits for: it goes
    /// out with the transaction's commit.
    pub fn insert_run_and_task(
        &self,
        run: &NewRun<'_>,
        task: &NewRunTask<'_>,
    ) -> Result<(), StoreError> {
        let Db::Postgres(_) = self.db else {
            let key = self.insert_run(run)?;
            return self.insert_run_task(
                key,
                task.created_ms,
                task.timing,
                task.message,
                task.label,
            );
        };
        let task_at = clock::iso_from_ms(task.created_ms);
        let label = (
            task.label.map(|(era, _)| era),
            task.label.map(|(_, tool)| tool),
        );
        with_run_values(run, |values| {
            let mut params: Vec<&dyn Param> = vec![
                &run.id,
                &run.workflow,
                &run.plan_hash,
                &run.snapshot,
                &run.node_ids,
                &run.nodes,
            ];
            params.extend_from_slice(values);
            params.extend([
                &run.inputs as &dyn Param,
                &task.message,
                &task_at,
                &task.created_ms,
                &task.timing.ttl_ms,
                &task.timing.poll_interval_ms,
                &label.0,
                &label.1,
                &run.trace_parent,
                &run.trace_link,
            ]);
            let (Db::Postgres(session), Some(keys)) = (self.db, self.keys) else {
                return self.db.write(NEW_RUN_POSTGRES, &params);
            };
            // The run's key, known once the statement ran: its first batch's fence then
            // goes out with the rest of that batch.
            let (keys, id) = (std::sync::Arc::clone(keys), run.id.to_owned());
            let then: super::postgres::Then = Box::new(move |key| keys.remember(&id, key));
            session.write_then(&numbered(NEW_RUN_POSTGRES), &params, then)
        })
    }
}

/// Claims a run if it is unfinished and its lease free, expired (by the database's
/// clock), already the claimant's, or held by an owner known to be dead. On PostgreSQL a
/// run whose row another host holds locked (it is committing the run's progress, so it
/// lives) is skipped, not waited for. A claim from another owner that held the run (it
/// died, or its lease ran out) counts a takeover; a lease given up (`lease_owner` NULL) or
/// renewed does not.
const CLAIM_SQLITE: &str = on_db_clock!(
    "UPDATE runs SET lease_owner = ?2, lease_expires_ms = " NOW_MS " + ?3,
         updated_at = ?5, answers = COALESCE(?6, answers),
         takeovers = takeovers + CASE WHEN lease_owner IS NOT NULL AND lease_owner <> ?2
                                      THEN 1 ELSE 0 END
     WHERE id = ?1 AND status = 'running'
       AND (lease_owner IS NULL OR lease_owner = ?2 OR lease_expires_ms < " NOW_MS "
            OR lease_owner = ?4)"
)
.sqlite;
const CLAIM_POSTGRES: &str = on_db_clock!(
    "UPDATE runs SET lease_owner = ?2, lease_expires_ms = " NOW_MS " + ?3,
         updated_at = ?5, answers = COALESCE(?6, answers),
         takeovers = takeovers + CASE WHEN lease_owner IS NOT NULL AND lease_owner <> ?2
                                      THEN 1 ELSE 0 END
     WHERE key = (SELECT key FROM runs
                  WHERE id = ?1 AND status = 'running'
                    AND (lease_owner IS NULL OR lease_owner = ?2
                         OR lease_expires_ms < " NOW_MS " OR lease_owner = ?4)
                  FOR UPDATE SKIP LOCKED)"
)
.postgres;

/// Extends every lease an owner holds, by the database's clock.
const RENEW: &str = on_db_clock!(
    "UPDATE runs SET lease_expires_ms = " NOW_MS " + ?2
     WHERE lease_owner = ?1 AND status = 'running'"
)
.sqlite;

/// PostgreSQL: [`RENEW`], returning the runs whose cancel was requested.
const RENEW_RETURNING: &str = on_db_clock!(
    "WITH renewed AS (
         UPDATE runs SET lease_expires_ms = " NOW_MS " + ?2
         WHERE lease_owner = ?1 AND status = 'running'
         RETURNING id, cancel_requested)
     SELECT id FROM renewed WHERE cancel_requested"
)
.postgres;

/// PostgreSQL: claims up to `$6` of the runs `$1` (oldest first) as `CLAIM_POSTGRES` does
/// one, skipping rows another host holds locked and the claimant's own runs; `$4` are the
/// owners known to be dead.
const CLAIM_MANY: &str = on_db_clock!(
    "UPDATE runs SET lease_owner = $2, lease_expires_ms = " NOW_MS " + $3, updated_at = $5,
         takeovers = takeovers + CASE WHEN lease_owner IS NOT NULL AND lease_owner <> $2
                                      THEN 1 ELSE 0 END
     WHERE key IN (SELECT key FROM runs
                   WHERE id = ANY($1) AND status = 'running'
                     AND lease_owner IS DISTINCT FROM $2
                     AND (lease_owner IS NULL OR lease_expires_ms < " NOW_MS "
                          OR lease_owner = ANY($4))
                   ORDER BY created_at, key
                   LIMIT $6
                   FOR UPDATE SKIP LOCKED)
     RETURNING id"
)
.postgres;

/// Unfinished runs of an origin that another owner holds or held, and whether their
/// lease ran out by the database's clock. A child run whose parent is unfinished is not
/// one: its parent's `workflow` node takes it over with the parent, and waits for it.
const UNFINISHED: super::sql::Dialects = on_db_clock!(
    "SELECT r.id, r.lease_owner,
            r.lease_expires_ms IS NULL OR r.lease_expires_ms < " NOW_MS "
     FROM runs r
     WHERE r.status = 'running' AND r.origin = ?1 AND r.lease_owner IS DISTINCT FROM ?2
       AND NOT EXISTS (SELECT 1 FROM runs p WHERE p.key = r.parent_key AND p.status = 'running')
     ORDER BY r.created_at, r.key"
);

impl Store {
    pub fn run(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs r JOIN plans p ON p.key = r.plan_key
             JOIN run_inputs i ON i.run_key = r.key
             WHERE r.id = ?1"
        );
        self.with(|tx| tx.db.query_opt(&sql, &[&run_id], run_from_row))
    }

    /// How a run ended, without reading its snapshot or inputs: (workflow, status, error,
    /// output, node ids in plan order as a JSON array). `None` if no such run.
    pub(crate) fn run_end(&self, run_id: &str) -> Result<Option<RunEndRow>, StoreError> {
        self.with(|tx| {
            tx.db.query_opt(
                "SELECT r.workflow, r.status, r.error, r.output, p.node_ids
                 FROM runs r JOIN plans p ON p.key = r.plan_key WHERE r.id = ?1",
                &[&run_id],
                |r| {
                    Ok(from_columns!(
                        r,
                        RunEndRow {
                            workflow,
                            status,
                            error,
                            output,
                            node_ids,
                        }
                    ))
                },
            )
        })
    }

    /// Where a run stands, without its snapshot or inputs. `None` if no such run.
    pub(crate) fn run_poll(&self, run_id: &str) -> Result<Option<RunPollRow>, StoreError> {
        self.with(|tx| {
            tx.db.query_opt(
                "SELECT r.status, COALESCE(t.status = 'input_required', FALSE),
                        COALESCE(t.progress, 0), t.status_message, r.output, r.error
                 FROM runs r LEFT JOIN run_tasks t ON t.run_key = r.key WHERE r.id = ?1",
                &[&run_id],
                |r| {
                    Ok(from_columns!(
                        r,
                        RunPollRow {
                            status,
                            asking,
                            progress,
                            status_message,
                            output,
                            error,
                        }
                    ))
                },
            )
        })
    }

    /// The runs the `workflow` nodes of run `run_id` started, oldest first.
    pub fn child_runs(&self, run_id: &str) -> Result<Vec<ChildRow>, StoreError> {
        self.with(|tx| {
            tx.db.query(
                "SELECT c.id, p.id, c.workflow, c.parent_node, c.parent_instance, c.status
                 FROM runs c JOIN runs p ON c.parent_key = p.key
                 WHERE p.id = ?1 ORDER BY c.key",
                &[&run_id],
                child_from_row,
            )
        })
    }

    /// The runs below run `run_id` (its children, theirs, and so on), unfinished ones only
    /// if `unfinished`, parents before their children, each level oldest first.
    pub(crate) fn runs_below(
        &self,
        run_id: &str,
        unfinished: bool,
    ) -> Result<Vec<ChildRow>, StoreError> {
        self.with(|tx| {
            tx.db.query(
                "WITH RECURSIVE below (key, depth) AS (
                     SELECT c.key, 1 FROM runs c JOIN runs p ON c.parent_key = p.key
                     WHERE p.id = ?1 AND (NOT ?2 OR c.status = 'running')
                     UNION ALL
                     SELECT c.key, b.depth + 1 FROM runs c JOIN below b ON c.parent_key = b.key
                     WHERE NOT ?2 OR c.status = 'running'
                 )
                 SELECT c.id, p.id, c.workflow, c.parent_node, c.parent_instance, c.status
                 FROM below b JOIN runs c ON c.key = b.key JOIN runs p ON p.key = c.parent_key
                 ORDER BY b.depth, c.key",
                &[&run_id, &unfinished],
                child_from_row,
            )
        })
    }

    /// Who holds the run's lease, without reading the run's snapshot: `None` if no such run,
    /// else `Some(owner)`.
    pub fn lease_owner(&self, run_id: &str) -> Result<Option<Option<String>>, StoreError> {
        self.with(|tx| {
            tx.db.query_opt(
                "SELECT lease_owner FROM runs WHERE id = ?1",
                &[&run_id],
                |r| r.get(0),
            )
        })
    }

    /// Runs, newest first, optionally of one status, with their progress.
    pub fn list_runs(
        &self,
        status: Option<&str>,
        scope: Scope<'_>,
        limit: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        let sql = format!(
            "SELECT r.id, r.workflow, r.status, COALESCE(t.progress, 0), t.status_message,
                    r.origin, r.created_at
             FROM runs r LEFT JOIN run_tasks t ON t.run_key = r.key
             WHERE (CAST(?1 AS TEXT) IS NULL OR r.status = ?1) AND {}
             ORDER BY r.created_at DESC, r.key DESC LIMIT ?2",
            scope_clause(3, 4)
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (kind, name) = scope.params();
        self.with(|tx| {
            tx.db.query(&sql, &[&status, &limit, &kind, &name], |r| {
                Ok(from_columns!(
                    r,
                    RunSummary {
                        id,
                        workflow,
                        status,
                        progress,
                        status_message,
                        origin,
                        created_at,
                    }
                ))
            })
        })
    }

    /// How many of `principal`'s runs are unfinished.
    pub(crate) fn running_runs_of(&self, principal: &str) -> Result<u64, StoreError> {
        let count: i64 = self.with(|tx| {
            tx.db
                .query_opt(
                    "SELECT COUNT(*) FROM runs WHERE principal = ?1 AND status = 'running'",
                    &[&principal],
                    |r| r.get(0),
                )
                .map(Option::unwrap_or_default)
        })?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// Who owns run `run_id`; `None` if there is no such run.
    pub fn run_owner(&self, run_id: &str) -> Result<Option<Owner>, StoreError> {
        self.with(|tx| {
            tx.db.query_opt(
                "SELECT principal, session FROM runs WHERE id = ?1",
                &[&run_id],
                |r| Owner::read(r, 0),
            )
        })
    }

    /// Hands the run's lease, for `lease_ms` from now by the database's clock, to `owner`
    /// if the run is unfinished and its lease is free, expired, already `owner`'s, or held
    /// by `gone` (an owner known to be dead). One statement, so two processes claiming at
    /// once cannot both win.
    pub fn claim_run(
        &self,
        run_id: &str,
        owner: &str,
        lease_ms: i64,
        gone: Option<&str>,
        answers: Option<&str>,
    ) -> Result<bool, StoreError> {
        let changed = self.with(|tx| {
            tx.db.execute(
                tx.db.dialect(CLAIM_SQLITE, CLAIM_POSTGRES),
                &[
                    &run_id,
                    &owner,
                    &lease_length(lease_ms),
                    &gone,
                    &clock::now_iso(),
                    &answers,
                ],
            )
        })?;
        Ok(changed == 1)
    }

    /// Unfinished runs of `origin` that some other owner holds or held, each with whether
    /// its lease ran out (by the database's clock).
    pub fn unfinished_runs(&self, origin: &str, owner: &str) -> Result<Vec<Lease>, StoreError> {
        self.with(|tx| {
            tx.db
                .query(tx.db.pick(UNFINISHED), &[&origin, &owner], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
        })
    }

    /// Extends every lease `owner` holds to `lease_ms` from now, by the database's clock;
    /// returns the runs whose cancel was requested. On PostgreSQL one statement, which
    /// returns them; SQLite reads them after the update (its `RETURNING` would stage every
    /// renewed row).
    pub fn renew_leases(&self, owner: &str, lease_ms: i64) -> Result<Vec<String>, StoreError> {
        let params: [&dyn super::sql::Param; 2] = [&owner, &lease_length(lease_ms)];
        self.with(|tx| {
            if let Db::Postgres(_) = tx.db {
                return tx.db.query(RENEW_RETURNING, &params, |r| r.get(0));
            }
            tx.db.execute(RENEW, &params)?;
            tx.db.query(
                "SELECT id FROM runs
                 WHERE lease_owner = ?1 AND status = 'running' AND cancel_requested = TRUE",
                &[&owner],
                |r| r.get(0),
            )
        })
    }

    /// Claims, in one statement, those of `runs` (ids, oldest first) that are unfinished and
    /// whose lease is free, ran out, or is held by one of `gone` (owners known to be dead),
    /// not `owner`'s already: at most `limit`, skipping rows another host holds locked.
    /// Returns the runs claimed. The takeover of a host's runs then costs a statement, not
    /// one per run. On SQLite, one claim after another ([`Store::claim_run`]).
    pub fn claim_runs(
        &self,
        runs: &[String],
        owner: &str,
        lease_ms: i64,
        gone: &[String],
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        if let super::Backend::Sqlite(_) = self.backend {
            let mut claimed = Vec::new();
            for run in runs {
                if claimed.len() >= limit {
                    break;
                }
                let holder = self.lease_owner(run)?.flatten();
                if holder.as_deref() == Some(owner) {
                    continue;
                }
                let dead = holder.filter(|holder| gone.contains(holder));
                if self.claim_run(run, owner, lease_ms, dead.as_deref(), None)? {
                    claimed.push(run.clone());
                }
            }
            return Ok(claimed);
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let now = clock::now_iso();
        let length = lease_length(lease_ms);
        self.with(|tx| {
            let Db::Postgres(session) = tx.db else {
                unreachable!("a PostgreSQL store")
            };
            let rows =
                session.query_typed(CLAIM_MANY, &[&runs, &owner, &length, &gone, &now, &limit])?;
            let claimed: Vec<String> = rows
                .iter()
                .map(|row| row.try_get(0))
                .collect::<Result<_, _>>()?;
            // In the order asked, oldest first (`RETURNING` keeps none).
            Ok(runs
                .iter()
                .filter(|run| claimed.contains(run))
                .cloned()
                .collect())
        })
    }

    /// Gives up `owner`'s lease of run `run_id`, if it holds it; whether it did.
    pub fn release_lease(&self, run_id: &str, owner: &str) -> Result<bool, StoreError> {
        let released = self.with(|tx| {
            tx.db.execute(
                "UPDATE runs SET lease_owner = NULL, lease_expires_ms = NULL
                 WHERE id = ?1 AND lease_owner = ?2 AND status = 'running'",
                &[&run_id, &owner],
            )
        })?;
        Ok(released == 1)
    }

    /// Gives up the leases `owner` holds, so that another process may take the runs now.
    pub fn release_leases(&self, owner: &str) -> Result<usize, StoreError> {
        let released = self.with(|tx| {
            tx.db.execute(
                "UPDATE runs SET lease_owner = NULL, lease_expires_ms = NULL
                 WHERE lease_owner = ?1 AND status = 'running'",
                &[&owner],
            )
        })?;
        Ok(released as usize)
    }

    /// Asks whoever drives the run, and whoever drives each unfinished run below it (the
    /// runs its `workflow` nodes started, theirs, and so on), to cancel it. False if the
    /// run is not unfinished. One transaction: the run and those below it are asked at
    /// once, and other hosts are told once.
    pub fn request_cancel(&self, run_id: &str) -> Result<bool, StoreError> {
        let changed = self.try_transaction(|tx| {
            let changed = tx.db.execute(
                "UPDATE runs SET cancel_requested = TRUE, revision = revision + 1
                 WHERE id = ?1 AND status = 'running'",
                &[&run_id],
            )?;
            tx.db.execute(
                "WITH RECURSIVE below (key) AS (
                     SELECT key FROM runs WHERE parent_key = (SELECT key FROM runs WHERE id = ?1)
                     UNION ALL
                     SELECT r.key FROM runs r JOIN below b ON r.parent_key = b.key
                 )
                 UPDATE runs SET cancel_requested = TRUE, revision = revision + 1
                 WHERE key IN (SELECT key FROM below) AND status = 'running'",
                &[&run_id],
            )?;
            Ok(changed)
        })?;
        Ok(changed == 1)
    }

    /// Deletes finished runs (with their nodes, tasks, questions, and the plans no other
    /// run runs) that finished before `finished_before_ms` and whose task TTL has run out
    /// by `now_ms`; when `ignore_ttl`, the TTL is not consulted. The audit log is never
    /// touched. Returns how many went.
    pub(crate) fn purge_runs(
        &self,
        finished_before_ms: i64,
        now_ms: i64,
        ignore_ttl: bool,
    ) -> Result<usize, StoreError> {
        self.try_transaction(|tx| {
            let purged = tx.db.execute(
                "DELETE FROM runs
                 WHERE status != 'running' AND finished_ms IS NOT NULL
                   AND finished_ms < ?1
                   AND (?3 OR finished_ms + COALESCE(
                        (SELECT ttl_ms FROM run_tasks WHERE run_key = runs.key),
                        0) <= ?2)",
                &[&finished_before_ms, &now_ms, &ignore_ttl],
            )?;
            // Plans no run runs any more go with their last run.
            tx.db.execute(
                "DELETE FROM plans
                 WHERE NOT EXISTS (SELECT 1 FROM runs WHERE plan_key = plans.key)",
                &[],
            )?;
            Ok(purged as usize)
        })
    }
}
