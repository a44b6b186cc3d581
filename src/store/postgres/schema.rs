//! The PostgreSQL schema, with versioned migrations of its own.
//!
//! The tables mirror SQLite's (`store/migrations.rs`) as they stand after its latest
//! migration, in PostgreSQL's types: integers are `BIGINT`, as the store binds them, and
//! texts the store compares or orders (ids, keys, times, dates) use the `C` collation, so
//! that they sort by bytes as they do in SQLite.
//!
//! Invariant: migrations are append-only. A released migration is never edited; a change
//! to the schema is a new entry at the end of `MIGRATIONS`.

use super::{Pg, Session, StoreError};

const MIGRATIONS: &[&str] = &[
    // 1: everything SQLite's migrations 1 to 6 made.
    r#"
    CREATE TABLE tasks (
        id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        title        TEXT NOT NULL,
        status       TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done')),
        due          TEXT COLLATE "C",
        tags         TEXT NOT NULL DEFAULT '[]',
        created_at   TEXT NOT NULL,
        completed_at TEXT
    );
    CREATE INDEX tasks_due ON tasks (due) WHERE due IS NOT NULL;

    CREATE TABLE audit_log (
        id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        at        TEXT NOT NULL,
        tool      TEXT NOT NULL,
        args      TEXT NOT NULL,
        outcome   TEXT NOT NULL CHECK (outcome IN ('ok', 'rejected', 'not_found', 'error')),
        run_id    TEXT,
        node_id   TEXT,
        principal TEXT
    );
    -- Append-only, whoever writes: rows are neither changed nor deleted, and the table is
    -- not truncated.
    CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'audit_log is append-only';
    END
    $$;
    CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
        FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
    CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
        FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

    CREATE TABLE plans (
        key      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        hash     TEXT NOT NULL,
        snapshot TEXT NOT NULL,
        node_ids TEXT NOT NULL,
        nodes    BIGINT NOT NULL
    );
    CREATE INDEX plans_by_hash ON plans (hash);

    CREATE TABLE runs (
        key                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id                  TEXT COLLATE "C" NOT NULL UNIQUE,
        workflow            TEXT NOT NULL,
        plan_key            BIGINT NOT NULL REFERENCES plans (key),
        status              TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed',
                                                            'cancelled')),
        error               TEXT,
        output              TEXT,
        origin              TEXT NOT NULL CHECK (origin IN ('cli', 'mcp')),
        answers             TEXT NOT NULL DEFAULT 'none'
                            CHECK (answers IN ('none', 'caller', 'parked')),
        deadline_ms         BIGINT,
        lease_owner         TEXT,
        lease_expires_ms    BIGINT,
        cancel_requested    BOOLEAN NOT NULL DEFAULT FALSE,
        retry_of            TEXT,
        created_at          TEXT COLLATE "C" NOT NULL,
        updated_at          TEXT NOT NULL,
        finished_at         TEXT,
        finished_ms         BIGINT,
        idempotency_key     TEXT,
        idempotency_request TEXT,
        principal           TEXT,
        session             TEXT
    );
    CREATE INDEX runs_by_status ON runs (status, created_at);
    CREATE INDEX runs_by_plan ON runs (plan_key);
    CREATE INDEX runs_by_lease ON runs (lease_owner) WHERE status = 'running';
    CREATE UNIQUE INDEX runs_by_idempotency_key ON runs (idempotency_key)
        WHERE idempotency_key IS NOT NULL;

    CREATE TABLE run_inputs (
        run_key BIGINT PRIMARY KEY REFERENCES runs (key) ON DELETE CASCADE,
        inputs  TEXT NOT NULL
    );

    CREATE TABLE run_tasks (
        run_key          BIGINT PRIMARY KEY REFERENCES runs (key) ON DELETE CASCADE,
        status           TEXT NOT NULL CHECK (status IN ('working', 'input_required',
                                                         'completed', 'failed', 'cancelled')),
        status_message   TEXT,
        progress         BIGINT NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL,
        updated_ms       BIGINT NOT NULL,
        ttl_ms           BIGINT NOT NULL,
        poll_interval_ms BIGINT NOT NULL,
        result           TEXT,
        error            TEXT,
        era              TEXT,
        tool             TEXT,
        round            BIGINT NOT NULL DEFAULT 0,
        round_expires_ms BIGINT
    );
    CREATE INDEX run_tasks_by_status ON run_tasks (status, updated_ms, run_key);
    CREATE INDEX run_tasks_by_round_expiry ON run_tasks (round_expires_ms)
        WHERE round_expires_ms IS NOT NULL;
    -- Terminal states never change, whatever writes the row.
    CREATE FUNCTION run_tasks_keep_terminal() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.status IS DISTINCT FROM OLD.status
           AND OLD.status IN ('completed', 'failed', 'cancelled') THEN
            RAISE EXCEPTION 'a finished task keeps its state';
        END IF;
        RETURN NEW;
    END
    $$;
    CREATE TRIGGER run_tasks_terminal BEFORE UPDATE OF status ON run_tasks
        FOR EACH ROW EXECUTE FUNCTION run_tasks_keep_terminal();

    CREATE TABLE nodes (
        run_key         BIGINT NOT NULL REFERENCES runs (key) ON DELETE CASCADE,
        node            BIGINT NOT NULL,
        instance        BIGINT NOT NULL,
        node_id         TEXT NOT NULL,
        status          TEXT NOT NULL CHECK (status IN ('pending', 'running', 'succeeded',
                                                        'failed', 'skipped', 'cancelled')),
        reason          TEXT,
        attempts        BIGINT NOT NULL DEFAULT 0,
        next_attempt_ms BIGINT,
        deadline_ms     BIGINT,
        asking          TEXT,
        output          TEXT,
        error           TEXT,
        intent          TEXT,
        started_at      TEXT,
        finished_at     TEXT,
        updated_at      TEXT NOT NULL,
        PRIMARY KEY (run_key, node, instance)
    );

    CREATE TABLE task_questions (
        run_key     BIGINT NOT NULL REFERENCES runs (key) ON DELETE CASCADE,
        node        BIGINT NOT NULL,
        instance    BIGINT NOT NULL,
        key         TEXT COLLATE "C" NOT NULL,
        request     TEXT NOT NULL,
        answer      TEXT,
        asked_at    TEXT COLLATE "C" NOT NULL,
        answered_at TEXT,
        refusal     TEXT,
        PRIMARY KEY (run_key, node, instance, key)
    );

    CREATE TABLE secrets (
        name  TEXT PRIMARY KEY,
        value BYTEA NOT NULL
    );
    "#,
    // 2: every host learns at once of the changes another host's waiters wait on. The
    // channel is the schema's own, so that schemas on one server do not wake each other.
    r#"
    CREATE FUNCTION mcp_tasks_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('mcp_tasks_' || TG_TABLE_SCHEMA, TG_ARGV[0]);
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER task_questions_answered AFTER UPDATE OF answer ON task_questions
        FOR EACH ROW WHEN (OLD.answer IS NULL AND NEW.answer IS NOT NULL)
        EXECUTE FUNCTION mcp_tasks_notify('answer');
    CREATE TRIGGER runs_cancel_requested AFTER UPDATE OF cancel_requested ON runs
        FOR EACH ROW WHEN (NEW.cancel_requested AND NOT OLD.cancel_requested)
        EXECUTE FUNCTION mcp_tasks_notify('cancel');
    CREATE TRIGGER runs_lease_released AFTER UPDATE OF lease_owner ON runs
        FOR EACH ROW WHEN (NEW.lease_owner IS NULL AND OLD.lease_owner IS NOT NULL
                           AND NEW.status = 'running')
        EXECUTE FUNCTION mcp_tasks_notify('released');
    CREATE TRIGGER run_tasks_status AFTER UPDATE OF status ON run_tasks
        FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status)
        EXECUTE FUNCTION mcp_tasks_notify('task');
    "#,
    // 3: the audit log's digest and hash chain, as SQLite's migration 8. Appends take an
    // advisory lock (`store/audit.rs`) rather than a row of this table, which is written
    // once.
    r#"
    ALTER TABLE audit_log ADD COLUMN args_sha256 TEXT;
    ALTER TABLE audit_log ADD COLUMN prev_hash TEXT;
    ALTER TABLE audit_log ADD COLUMN hash TEXT;
    CREATE TABLE audit_chain (legacy_until BIGINT NOT NULL);
    INSERT INTO audit_chain (legacy_until) SELECT coalesce(max(id), 0) FROM audit_log;
    CREATE TRIGGER audit_chain_no_change BEFORE UPDATE OR DELETE ON audit_chain
        FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
    CREATE TRIGGER audit_chain_no_truncate BEFORE TRUNCATE ON audit_chain
        FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
    "#,
    // 4: SQLite's migration 9, the takeovers of a run since a unit of it last finished.
    r#"
    ALTER TABLE runs ADD COLUMN takeovers BIGINT NOT NULL DEFAULT 0;
    "#,
    // 5: SQLite's migration 10, an idempotency key scoped to its principal.
    r#"
    DROP INDEX runs_by_idempotency_key;
    CREATE UNIQUE INDEX runs_by_idempotency_key
        ON runs (coalesce(principal, ''), idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    "#,
    // 6: SQLite's migration 11, the table of todos named `todos`.
    r#"
    ALTER TABLE tasks RENAME TO todos;
    ALTER INDEX tasks_due RENAME TO todos_due;
    "#,
    // 7: SQLite's migration 12, a unit's failed attempts that were retried.
    r#"
    ALTER TABLE nodes ADD COLUMN retried TEXT;
    "#,
    // 8: a transaction that changes what the dashboard's live pages and resource
    // subscriptions show (runs, their tasks, nodes and questions) tells every host, once
    // (PostgreSQL folds a transaction's equal notifications): the store's change stamp
    // counts these instead of reading the server's WAL position, which every commit on the
    // server moves. A run's lease renewals are left out, and so are todos and the audit log
    // alone, which no live page shows: a todo tool's call pays for no notification.
    r#"
    CREATE TRIGGER runs_changed
        AFTER INSERT OR DELETE OR UPDATE OF status, error, output, cancel_requested, finished_at
        ON runs FOR EACH STATEMENT EXECUTE FUNCTION mcp_tasks_notify('change');
    CREATE TRIGGER run_tasks_changed AFTER INSERT OR UPDATE OR DELETE ON run_tasks
        FOR EACH STATEMENT EXECUTE FUNCTION mcp_tasks_notify('change');
    CREATE TRIGGER nodes_changed AFTER INSERT OR UPDATE OR DELETE ON nodes
        FOR EACH STATEMENT EXECUTE FUNCTION mcp_tasks_notify('change');
    CREATE TRIGGER task_questions_changed AFTER INSERT OR UPDATE OR DELETE ON task_questions
        FOR EACH STATEMENT EXECUTE FUNCTION mcp_tasks_notify('change');
    "#,
    // 9: SQLite's migration 13, who wrote each file last and what, and a run's revision.
    // A file written tells the other hosts, as a run's change does: a subscription to it
    // looks again.
    r#"
    CREATE TABLE written_files (
        path       TEXT PRIMARY KEY,
        sha256     TEXT NOT NULL,
        bytes      BIGINT NOT NULL,
        run_id     TEXT NOT NULL,
        node_id    TEXT NOT NULL,
        principal  TEXT,
        session    TEXT,
        written_at TEXT NOT NULL
    );
    CREATE INDEX written_files_by_principal ON written_files (principal, written_at);
    CREATE INDEX written_files_by_session ON written_files (session, written_at);
    CREATE INDEX written_files_by_time ON written_files (written_at);
    ALTER TABLE runs ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;
    CREATE TRIGGER written_files_changed AFTER INSERT OR UPDATE OR DELETE ON written_files
        FOR EACH STATEMENT EXECUTE FUNCTION mcp_tasks_notify('change');
    "#,
    // 10: SQLite's migration 14: a unit's iterations, a run's parent, and the history of
    // finished runs.
    r#"
    ALTER TABLE nodes ADD COLUMN iterations TEXT;
    ALTER TABLE runs ADD COLUMN parent_key BIGINT REFERENCES runs (key) ON DELETE SET NULL;
    ALTER TABLE runs ADD COLUMN parent_node TEXT;
    ALTER TABLE runs ADD COLUMN parent_index BIGINT;
    ALTER TABLE runs ADD COLUMN parent_instance BIGINT;
    ALTER TABLE runs ADD COLUMN depth BIGINT NOT NULL DEFAULT 0;
    CREATE INDEX runs_by_parent ON runs (parent_key) WHERE parent_key IS NOT NULL;
    CREATE TABLE run_history (
        run_id        TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        workflow      TEXT NOT NULL,
        principal     TEXT,
        status        TEXT NOT NULL,
        created_at    TEXT NOT NULL,
        finished_at   TEXT NOT NULL,
        finished_ms   BIGINT NOT NULL,
        inputs        TEXT NOT NULL,
        output        TEXT,
        error         TEXT,
        parent_run_id TEXT
    );
    CREATE INDEX run_history_by_workflow ON run_history (workflow, finished_ms);
    CREATE INDEX run_history_by_principal ON run_history (principal, workflow, finished_ms);
    "#,
    // 11: SQLite's migration 15: a run's trace context.
    r#"
    ALTER TABLE runs ADD COLUMN trace_parent TEXT;
    ALTER TABLE runs ADD COLUMN trace_link TEXT;
    "#,
    // 12: a run's node rows without a foreign key, as in SQLite: its check ran a query for
    // every row written, half of what the server spent on a durable run's nodes, and every
    // batch that writes them has already fenced the run's row. A trigger deletes a run's
    // rows with the run, once for the statement's runs.
    r#"
    ALTER TABLE nodes DROP CONSTRAINT nodes_run_key_fkey;
    CREATE FUNCTION nodes_go_with_their_runs() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM nodes WHERE run_key IN (SELECT key FROM gone);
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER runs_delete_nodes AFTER DELETE ON runs REFERENCING OLD TABLE AS gone
        FOR EACH STATEMENT EXECUTE FUNCTION nodes_go_with_their_runs();
    "#,
];

/// The schema version this build brings a database to.
pub(crate) const SUPPORTED: i64 = MIGRATIONS.len() as i64;

/// Any number, the same in every process: the advisory lock migrations take, so that two
/// processes starting at once migrate one after the other.
const MIGRATION_LOCK: i64 = 0x6d63_702d_7461_736b;

/// The latest migration the database has had.
pub(super) fn version(session: &Session) -> Result<i64, StoreError> {
    let rows = session.query(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        &[],
    )?;
    Ok(rows
        .first()
        .map(|row| row.try_get(0))
        .transpose()?
        .unwrap_or(0))
}

pub(super) fn migrate(pg: &Pg) -> Result<(), StoreError> {
    // The common case, a schema already up to date, in one round trip and without a lock.
    let current = pg.session()?.query(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations
         WHERE to_regclass('schema_migrations') IS NOT NULL",
        &[],
    );
    if let Ok(rows) = current
        && let Some(Ok(found)) = rows.first().map(|row| row.try_get::<_, i64>(0))
        && found == SUPPORTED
    {
        return Ok(());
    }
    pg.transaction(|session| {
        session.batch(&format!(
            "SELECT pg_advisory_xact_lock({MIGRATION_LOCK});
             SET LOCAL client_min_messages = warning;
             CREATE TABLE IF NOT EXISTS schema_migrations (
                 version    BIGINT PRIMARY KEY,
                 applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
             );"
        ))?;
        let found = version(session)?;
        if found > SUPPORTED {
            return Err(StoreError::SchemaTooNew {
                found,
                supported: SUPPORTED,
            });
        }
        for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            session.batch(sql)?;
            let version = index as i64 + 1;
            session.execute(
                "INSERT INTO schema_migrations (version) VALUES ($1)",
                &[&version],
            )?;
        }
        Ok(())
    })
}
