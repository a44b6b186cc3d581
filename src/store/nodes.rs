//! Queries on `nodes`: one row per node or `for_each` instance of a run, from the unit's
//! first change on. The row is also what its sub-task reports; a unit without a row has
//! not started.

use super::sql::{Db, Row, from_columns};
use super::{Store, StoreError, Tx};
use crate::clock;

/// One node, or one `for_each` instance (`instance >= 0`; the node itself is `-1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    /// The node's index in the run's plan.
    pub node: i64,
    pub node_id: String,
    pub instance: i64,
    pub status: String,
    pub reason: Option<String>,
    pub attempts: i64,
    pub next_attempt_ms: Option<i64>,
    /// A `wait` attempt's absolute end.
    pub deadline_ms: Option<i64>,
    /// The key of the question the unit waits on.
    pub asking: Option<String>,
    pub output: Option<String>,
    pub error: Option<String>,
    pub intent: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// The failed attempts that were retried, as a JSON list (the engine's `Retried`).
    pub retried: Option<String>,
    /// A repeating unit's finished iterations, as a JSON list (the engine's `Iteration`).
    pub iterations: Option<String>,
    /// When the row last changed. The store sets it on every write; what a writer puts here
    /// is ignored.
    pub updated_at: String,
}

const NODE_COLUMNS: &str = "node, node_id, instance, status, reason, attempts, next_attempt_ms, \
     deadline_ms, asking, output, error, intent, started_at, finished_at, updated_at, retried, iterations";

fn node_from_row(r: &Row<'_>) -> Result<NodeRow, StoreError> {
    Ok(from_columns!(
        r,
        NodeRow {
            node,
            node_id,
            instance,
            status,
            reason,
            attempts,
            next_attempt_ms,
            deadline_ms,
            asking,
            output,
            error,
            intent,
            started_at,
            finished_at,
            updated_at,
            retried,
            iterations,
        }
    ))
}

/// How many rows one statement writes: a statement's fixed cost (binding, stepping,
/// resetting) then spreads over many rows, which took a sixth off a unit's write.
const ROWS_PER_STATEMENT: usize = 16;

/// Columns bound per row.
const COLUMNS: usize = 18;

/// The upsert of `rows` rows at once.
fn upsert_sql(rows: usize) -> String {
    let values: Vec<String> = (0..rows)
        .map(|r| {
            let params: Vec<String> = (1..=COLUMNS)
                .map(|c| format!("?{}", r * COLUMNS + c))
                .collect();
            format!("({})", params.join(", "))
        })
        .collect();
    format!(
        "{UPSERT_INTO} VALUES {} {UPSERT_CONFLICT}",
        values.join(", ")
    )
}

/// The upsert's head and its conflict clause, whichever way its rows come: a finished
/// unit's row is left as it is.
const UPSERT_INTO: &str = "INSERT INTO nodes (run_key, node, instance, node_id, status, reason,
     attempts, next_attempt_ms, deadline_ms, asking, output, error, intent, started_at,
     finished_at, retried, iterations, updated_at)";
const UPSERT_CONFLICT: &str = "ON CONFLICT (run_key, node, instance) DO UPDATE SET
     status = excluded.status, reason = excluded.reason,
     attempts = excluded.attempts, next_attempt_ms = excluded.next_attempt_ms,
     deadline_ms = excluded.deadline_ms, asking = excluded.asking,
     output = excluded.output, error = excluded.error, intent = excluded.intent,
     started_at = excluded.started_at, finished_at = excluded.finished_at,
     retried = excluded.retried, iterations = excluded.iterations,
     updated_at = excluded.updated_at
     WHERE nodes.status = 'pending' OR nodes.status = 'running'";

fn bind_row(
    stmt: &mut rusqlite::CachedStatement<'_>,
    first: usize,
    run_key: i64,
    row: &NodeRow,
    now: &str,
) -> rusqlite::Result<()> {
    let values: [&dyn rusqlite::ToSql; COLUMNS] = [
        &run_key,
        &row.node,
        &row.instance,
        &row.node_id,
        &row.status,
        &row.reason,
        &row.attempts,
        &row.next_attempt_ms,
        &row.deadline_ms,
        &row.asking,
        &row.output,
        &row.error,
        &row.intent,
        &row.started_at,
        &row.finished_at,
        &row.retried,
        &row.iterations,
        &now,
    ];
    for (offset, value) in values.into_iter().enumerate() {
        stmt.raw_bind_parameter(first + offset, value)?;
    }
    Ok(())
}

impl Tx<'_> {
    /// Writes the state of nodes and instances of a run, inserting the rows of units seen
    /// for the first time. A finished unit's row never changes: its write is skipped.
    /// Each unit appears at most once in `rows`.
    pub fn upsert_nodes(&self, run_key: i64, rows: &[NodeRow]) -> Result<(), StoreError> {
        match self.db {
            Db::Sqlite(conn) => upsert_sqlite(conn, run_key, rows),
            Db::Postgres(session) => upsert_postgres(session, run_key, rows),
        }
    }
}

fn upsert_sqlite(
    conn: &rusqlite::Connection,
    run_key: i64,
    rows: &[NodeRow],
) -> Result<(), StoreError> {
    static MANY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static ONE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let now = clock::now_iso();
    // In key order: units finish in whatever order the graph allows, and rows inserted
    // into the middle of a run's range split pages where rows in order append.
    let mut rows: Vec<&NodeRow> = rows.iter().collect();
    rows.sort_unstable_by_key(|row| (row.node, row.instance));
    let chunks = rows.chunks_exact(ROWS_PER_STATEMENT);
    let rest = chunks.remainder();
    if rows.len() >= ROWS_PER_STATEMENT {
        let sql = MANY.get_or_init(|| upsert_sql(ROWS_PER_STATEMENT));
        let mut stmt = conn.prepare_cached(sql)?;
        for chunk in chunks {
            for (r, row) in chunk.iter().enumerate() {
                bind_row(&mut stmt, r * COLUMNS + 1, run_key, row, &now)?;
            }
            stmt.raw_execute()?;
        }
    }
    if !rest.is_empty() {
        let mut stmt = conn.prepare_cached(ONE.get_or_init(|| upsert_sql(1)))?;
        for row in rest {
            bind_row(&mut stmt, 1, run_key, row, &now)?;
            stmt.raw_execute()?;
        }
    }
    Ok(())
}

/// PostgreSQL takes every row in one statement, as arrays, one per column.
fn upsert_postgres(
    session: &super::postgres::Session,
    run_key: i64,
    rows: &[NodeRow],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let ints = |f: fn(&NodeRow) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
    let maybe_ints = |f: fn(&NodeRow) -> Option<i64>| rows.iter().map(f).collect::<Vec<_>>();
    let texts = |f: fn(&NodeRow) -> Option<&str>| rows.iter().map(f).collect::<Vec<_>>();
    let now = clock::now_iso();
    // A run's first rows (a fresh run, or one that never waited) are inserted plainly:
    // checking each against the key for a conflict costs PostgreSQL about as much as the
    // insert itself. Only the lease's holder writes a run's rows, under its row lock, so
    // that the run has none yet, read once for the statement, still holds when they land;
    // a run that has rows gets the upsert.
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!(
            "WITH u AS (
                 SELECT * FROM unnest($2::bigint[], $3::bigint[],
                     $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[],
                     $9::bigint[], $10::text[], $11::text[], $12::text[], $13::text[],
                     $14::text[], $15::text[], $16::text[], $17::text[])),
             first AS (
                 {UPSERT_INTO} SELECT $1, u.*, $18 FROM u
                 WHERE NOT EXISTS (SELECT 1 FROM nodes WHERE run_key = $1))
             {UPSERT_INTO} SELECT $1, u.*, $18 FROM u
             WHERE EXISTS (SELECT 1 FROM nodes WHERE run_key = $1)
             {UPSERT_CONFLICT}"
        )
    });
    // Nothing is read back: the rows go out with the transaction's next round trip.
    session.write_typed(
        sql,
        &[
            &run_key,
            &ints(|r| r.node),
            &ints(|r| r.instance),
            &texts(|r| Some(&r.node_id)),
            &texts(|r| Some(&r.status)),
            &texts(|r| r.reason.as_deref()),
            &ints(|r| r.attempts),
            &maybe_ints(|r| r.next_attempt_ms),
            &maybe_ints(|r| r.deadline_ms),
            &texts(|r| r.asking.as_deref()),
            &texts(|r| r.output.as_deref()),
            &texts(|r| r.error.as_deref()),
            &texts(|r| r.intent.as_deref()),
            &texts(|r| r.started_at.as_deref()),
            &texts(|r| r.finished_at.as_deref()),
            &texts(|r| r.retried.as_deref()),
            &texts(|r| r.iterations.as_deref()),
            &now,
        ],
    )
}

impl Store {
    /// Every stored node and instance row of a run, in plan order.
    pub fn nodes(&self, run_id: &str) -> Result<Vec<NodeRow>, StoreError> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM nodes WHERE run_key = (SELECT key FROM runs WHERE id = ?1)
             ORDER BY node, instance"
        );
        self.with(|tx| tx.db.query(&sql, &[&run_id], node_from_row))
    }

    /// The row of one unit of the run with key `run_key`, if the unit has changed yet.
    pub fn unit(
        &self,
        run_key: i64,
        node: i64,
        instance: i64,
    ) -> Result<Option<NodeRow>, StoreError> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM nodes WHERE run_key = ?1 AND node = ?2 AND instance = ?3"
        );
        self.with(|tx| {
            tx.db
                .query_opt(&sql, &[&run_key, &node, &instance], node_from_row)
        })
    }

    /// Rows of a run in plan order (a node, then its instances) after the unit `after`,
    /// at most `limit`.
    pub(crate) fn units_after(
        &self,
        run_key: i64,
        after: Option<(i64, i64)>,
        limit: usize,
    ) -> Result<Vec<NodeRow>, StoreError> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM nodes
             WHERE run_key = ?1 AND (CAST(?2 AS BIGINT) IS NULL OR (node, instance) > (?2, ?3))
             ORDER BY node, instance LIMIT ?4"
        );
        let (node, instance) = after.unzip();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(|tx| {
            tx.db
                .query(&sql, &[&run_key, &node, &instance, &limit], node_from_row)
        })
    }

    /// The id of the node at `index` in a run's plan, without reading the whole list into
    /// Rust.
    pub(crate) fn node_id_at(
        &self,
        run_key: i64,
        index: i64,
    ) -> Result<Option<String>, StoreError> {
        self.with(|tx| {
            let sql = tx.db.dialect(
                "SELECT json_extract(p.node_ids, '$[' || ?2 || ']')
                 FROM runs r JOIN plans p ON p.key = r.plan_key WHERE r.key = ?1",
                "SELECT p.node_ids::jsonb ->> CAST(CAST(?2 AS BIGINT) AS INTEGER)
                 FROM runs r JOIN plans p ON p.key = r.plan_key WHERE r.key = ?1",
            );
            Ok(tx
                .db
                .query_opt(sql, &[&run_key, &index], |r| r.get::<Option<String>>(0))?
                .flatten())
        })
    }
}
