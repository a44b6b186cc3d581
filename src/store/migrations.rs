//! Schema migrations, versioned with SQLite's `user_version`.
//!
//! Invariant: migrations are append-only. A released migration is never edited; a change
//! to the schema is a new entry at the end of `MIGRATIONS`.

use rusqlite::Connection;

use super::StoreError;

const MIGRATIONS: &[&str] = &[
    // 1: todos and the append-only audit log.
    r#"
    CREATE TABLE tasks (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        title        TEXT NOT NULL,
        status       TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done')),
        due          TEXT,
        tags         TEXT NOT NULL DEFAULT '[]',
        created_at   TEXT NOT NULL,
        completed_at TEXT
    );
    CREATE INDEX tasks_due ON tasks (due);

    CREATE TABLE audit_log (
        id      INTEGER PRIMARY KEY AUTOINCREMENT,
        at      TEXT NOT NULL,
        tool    TEXT NOT NULL,
        args    TEXT NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'rejected', 'not_found', 'error')),
        run_id  TEXT,
        node_id TEXT
    );
    CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
    CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
    "#,
    // 2: durable runs, their nodes (each a sub-task), the runs' own tasks, and questions.
    //
    // Rows of a run are keyed by the run's integer `key` and the node's index in the plan
    // (`instance` is `-1` for a node, `k` for its k-th `for_each` instance): a run's rows
    // then sit together in every B-tree, and writing a thousand of them touches a few pages
    // instead of a thousand.
    r#"
    -- What runs run: the snapshot of a validated plan, stored once however many runs run
    -- it, and found again by the hash of its text.
    CREATE TABLE plans (
        key      INTEGER PRIMARY KEY,
        hash     TEXT NOT NULL,
        snapshot TEXT NOT NULL,
        -- The plan's node ids in plan order, as a JSON array, and how many: what names a
        -- sub-task whose node has not started, without reading the snapshot.
        node_ids TEXT NOT NULL,
        nodes    INTEGER NOT NULL
    );
    CREATE INDEX plans_by_hash ON plans (hash);

    CREATE TABLE runs (
        key              INTEGER PRIMARY KEY,
        id               TEXT NOT NULL UNIQUE,
        workflow         TEXT NOT NULL,
        plan_key         INTEGER NOT NULL REFERENCES plans (key),
        status           TEXT NOT NULL CHECK (status = 'running' OR status = 'succeeded'
                                              OR status = 'failed' OR status = 'cancelled'),
        error            TEXT,
        output           TEXT,
        origin           TEXT NOT NULL CHECK (origin = 'cli' OR origin = 'mcp'),
        answers          TEXT NOT NULL DEFAULT 'none'
                         CHECK (answers = 'none' OR answers = 'caller' OR answers = 'parked'),
        deadline_ms      INTEGER,
        lease_owner      TEXT,
        lease_expires_ms INTEGER,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        retry_of         TEXT,
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL,
        finished_at      TEXT,
        finished_ms      INTEGER
    );
    CREATE INDEX runs_by_status ON runs (status, created_at);
    CREATE INDEX runs_by_plan ON runs (plan_key);
    CREATE INDEX runs_by_lease ON runs (lease_owner) WHERE status = 'running';
    -- A run's inputs, apart from the row its lease and status change in: an update of a
    -- row rewrites the whole row, and inputs may be large.
    CREATE TABLE run_inputs (
        run_key INTEGER PRIMARY KEY REFERENCES runs (key) ON DELETE CASCADE,
        inputs  TEXT NOT NULL
    );

    -- The run's own task, whose id is the run's: what a client lists and polls.
    CREATE TABLE run_tasks (
        run_key          INTEGER PRIMARY KEY REFERENCES runs (key) ON DELETE CASCADE,
        status           TEXT NOT NULL CHECK (status = 'working' OR status = 'input_required'
                             OR status = 'completed' OR status = 'failed' OR status = 'cancelled'),
        status_message   TEXT,
        progress         INTEGER NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL,
        updated_ms       INTEGER NOT NULL,
        ttl_ms           INTEGER NOT NULL,
        poll_interval_ms INTEGER NOT NULL,
        result           TEXT,
        error            TEXT
    );
    CREATE INDEX run_tasks_by_status ON run_tasks (status, updated_ms, run_key);
    -- Terminal states never change, whatever writes the row.
    CREATE TRIGGER run_tasks_terminal BEFORE UPDATE OF status ON run_tasks
    WHEN NEW.status IS NOT OLD.status
         AND (OLD.status = 'completed' OR OLD.status = 'failed' OR OLD.status = 'cancelled')
    BEGIN SELECT RAISE(ABORT, 'a finished task keeps its state'); END;

    -- A node, or a `for_each` instance, from its first change on: its state, which is also
    -- the state of its sub-task. A sub-task's id derives from the run's id and the unit's
    -- (node, instance), and its task state from the node's by one table in the registry,
    -- so that a unit costs one row write, not three. A unit with no row is pending. The
    -- upsert that writes a row leaves a finished one as it is; a trigger to the same end
    -- doubled the cost of that write.
    CREATE TABLE nodes (
        -- No foreign key: checking it cost a lookup per row written, and every write of a
        -- run's rows follows the check of its lease, in the same transaction. A trigger
        -- deletes a run's rows with the run.
        run_key         INTEGER NOT NULL,
        node            INTEGER NOT NULL,
        instance        INTEGER NOT NULL,
        node_id         TEXT NOT NULL,
        status          TEXT NOT NULL CHECK (status = 'pending' OR status = 'running'
                            OR status = 'succeeded' OR status = 'failed' OR status = 'skipped'
                            OR status = 'cancelled'),
        reason          TEXT,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_ms INTEGER,
        deadline_ms     INTEGER,
        asking          TEXT,
        output          TEXT,
        error           TEXT,
        intent          TEXT,
        started_at      TEXT,
        finished_at     TEXT,
        updated_at      TEXT NOT NULL,
        PRIMARY KEY (run_key, node, instance)
    ) WITHOUT ROWID;
    CREATE TRIGGER runs_delete_nodes AFTER DELETE ON runs
    BEGIN DELETE FROM nodes WHERE run_key = OLD.key; END;

    -- The questions a unit's task puts, under a key unique for the task's lifetime.
    CREATE TABLE task_questions (
        run_key     INTEGER NOT NULL REFERENCES runs (key) ON DELETE CASCADE,
        node        INTEGER NOT NULL,
        instance    INTEGER NOT NULL,
        key         TEXT NOT NULL,
        request     TEXT NOT NULL,
        answer      TEXT,
        asked_at    TEXT NOT NULL,
        answered_at TEXT,
        PRIMARY KEY (run_key, node, instance, key)
    ) WITHOUT ROWID;
    "#,
    // 3: what the wire needs of a run's task: the task protocol it was created under and
    // the tool whose call made it (both opaque to the store; null for a run no client
    // asked for as a task); the rounds of questions put to a client that answers by
    // retrying its call, with the time the latest one expires; a question's refusal (a
    // declined or cancelled answer); the server's secrets, such as the key that signs
    // the state a client echoes back; and the key under which a client may retry the
    // call that started a run, with that call as it was made, to be matched exactly.
    r#"
    ALTER TABLE runs ADD COLUMN idempotency_key TEXT;
    ALTER TABLE runs ADD COLUMN idempotency_request TEXT;
    CREATE UNIQUE INDEX runs_by_idempotency_key ON runs (idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    ALTER TABLE run_tasks ADD COLUMN era TEXT;
    ALTER TABLE run_tasks ADD COLUMN tool TEXT;
    ALTER TABLE run_tasks ADD COLUMN round INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE run_tasks ADD COLUMN round_expires_ms INTEGER;
    CREATE INDEX run_tasks_by_round_expiry ON run_tasks (round_expires_ms)
        WHERE round_expires_ms IS NOT NULL;
    ALTER TABLE task_questions ADD COLUMN refusal TEXT;
    CREATE TABLE secrets (
        name  TEXT PRIMARY KEY,
        value BLOB NOT NULL
    );
    "#,
    // 4: the due-date index holds only todos that have a due date, so that adding a todo
    // without one writes no index page.
    r#"
    DROP INDEX tasks_due;
    CREATE INDEX tasks_due ON tasks (due) WHERE due IS NOT NULL;
    "#,
    // 5: the audit log's check on `outcome` as comparisons rather than an `IN` list, for
    // which SQLite builds a temporary index at every insert. A check cannot be altered in
    // place, so the table is copied, every row and id kept; its triggers go with the old
    // table and are made again.
    r#"
    CREATE TABLE audit_log_v5 (
        id      INTEGER PRIMARY KEY AUTOINCREMENT,
        at      TEXT NOT NULL,
        tool    TEXT NOT NULL,
        args    TEXT NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome = 'ok' OR outcome = 'rejected'
                                     OR outcome = 'not_found' OR outcome = 'error'),
        run_id  TEXT,
        node_id TEXT
    );
    INSERT INTO audit_log_v5 (id, at, tool, args, outcome, run_id, node_id)
        SELECT id, at, tool, args, outcome, run_id, node_id FROM audit_log ORDER BY id;
    DROP TABLE audit_log;
    ALTER TABLE audit_log_v5 RENAME TO audit_log;
    CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
    CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
    "#,
    // 6: who a call and a run belong to, when a server has callers to tell apart: the
    // principal named by the caller's token (null without tokens), and the session that
    // started a run (null outside one). Adding a column rewrites no row, so the audit
    // log's triggers hold.
    r#"
    ALTER TABLE audit_log ADD COLUMN principal TEXT;
    ALTER TABLE runs ADD COLUMN principal TEXT;
    ALTER TABLE runs ADD COLUMN session TEXT;
    "#,
    // 7: ids kept from coming back without `AUTOINCREMENT`, whose sequence row every insert
    // rewrote: a page more in every commit that adds a todo or an audit entry.
    //
    // A todo's id is one more than the highest id it could collide with: the highest in
    // `tasks`, or `todo_ids.high`, the highest ever deleted while it was the newest. The
    // trigger records that; every other delete leaves a higher id in the table. The audit
    // log refuses deletes, so its highest row is always there and plain rowids never
    // repeat. Both tables are copied with every row and id; the triggers and the index go
    // with the old tables and are made again.
    r#"
    CREATE TABLE todo_ids (high INTEGER NOT NULL);
    INSERT INTO todo_ids (high)
        SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'tasks';

    CREATE TABLE tasks_v7 (
        id           INTEGER PRIMARY KEY,
        title        TEXT NOT NULL,
        status       TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done')),
        due          TEXT,
        tags         TEXT NOT NULL DEFAULT '[]',
        created_at   TEXT NOT NULL,
        completed_at TEXT
    );
    INSERT INTO tasks_v7 (id, title, status, due, tags, created_at, completed_at)
        SELECT id, title, status, due, tags, created_at, completed_at FROM tasks ORDER BY id;
    DROP TABLE tasks;
    ALTER TABLE tasks_v7 RENAME TO tasks;
    CREATE INDEX tasks_due ON tasks (due) WHERE due IS NOT NULL;
    CREATE TRIGGER tasks_keep_high_id AFTER DELETE ON tasks
        WHEN old.id > coalesce((SELECT max(id) FROM tasks), 0)
    BEGIN UPDATE todo_ids SET high = old.id WHERE high < old.id; END;

    CREATE TABLE audit_log_v7 (
        id        INTEGER PRIMARY KEY,
        at        TEXT NOT NULL,
        tool      TEXT NOT NULL,
        args      TEXT NOT NULL,
        outcome   TEXT NOT NULL CHECK (outcome = 'ok' OR outcome = 'rejected'
                                       OR outcome = 'not_found' OR outcome = 'error'),
        run_id    TEXT,
        node_id   TEXT,
        principal TEXT
    );
    INSERT INTO audit_log_v7 (id, at, tool, args, outcome, run_id, node_id, principal)
        SELECT id, at, tool, args, outcome, run_id, node_id, principal FROM audit_log ORDER BY id;
    DROP TABLE audit_log;
    ALTER TABLE audit_log_v7 RENAME TO audit_log;
    CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
    CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
    "#,
    // 8: the audit log's digest and hash chain. Each row keeps the SHA-256 of its whole
    // argument payload beside the capped copy, the hash of the row before it and its own
    // (see `store/chain.rs`). Rows already there are not rewritten (the log is
    // append-only): the chain begins after them, and `audit_chain` records where, so that
    // `db verify` says how many rows it does not cover and a later row stripped of its hash
    // is not mistaken for an old one. Adding columns rewrites no row.
    r#"
    ALTER TABLE audit_log ADD COLUMN args_sha256 TEXT;
    ALTER TABLE audit_log ADD COLUMN prev_hash TEXT;
    ALTER TABLE audit_log ADD COLUMN hash TEXT;
    CREATE TABLE audit_chain (legacy_until INTEGER NOT NULL);
    INSERT INTO audit_chain (legacy_until) SELECT coalesce(max(id), 0) FROM audit_log;
    CREATE TRIGGER audit_chain_no_update BEFORE UPDATE ON audit_chain
    BEGIN SELECT RAISE(ABORT, 'audit_chain is fixed'); END;
    CREATE TRIGGER audit_chain_no_delete BEFORE DELETE ON audit_chain
    BEGIN SELECT RAISE(ABORT, 'audit_chain is fixed'); END;
    "#,
    // 9: how often a run was taken over from a process that died holding it, since a unit
    // of it last finished: a run that kills every process that drives it is failed as
    // poisoned instead of being taken over for ever.
    r#"
    ALTER TABLE runs ADD COLUMN takeovers INTEGER NOT NULL DEFAULT 0;
    "#,
    // 10: an idempotency key is its principal's own: two principals may each use one key,
    // and each finds only its own run under it. Without tokens (no principal) keys stay
    // one namespace, the empty principal's.
    r#"
    DROP INDEX runs_by_idempotency_key;
    CREATE UNIQUE INDEX runs_by_idempotency_key
        ON runs (coalesce(principal, ''), idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    "#,
    // 11: the table of todos is named for what it holds (`tasks` named MCP's tasks too);
    // its index and trigger with it. Renaming the table rewrites no row, and SQLite
    // rewrites the trigger's references to it.
    r#"
    ALTER TABLE tasks RENAME TO todos;
    DROP INDEX tasks_due;
    CREATE INDEX todos_due ON todos (due) WHERE due IS NOT NULL;
    DROP TRIGGER tasks_keep_high_id;
    CREATE TRIGGER todos_keep_high_id AFTER DELETE ON todos
        WHEN old.id > coalesce((SELECT max(id) FROM todos), 0)
    BEGIN UPDATE todo_ids SET high = old.id WHERE high < old.id; END;
    "#,
    // 12: a unit's failed attempts that were retried, each with its times, error and the
    // time of its retry (a JSON list; NULL for a unit that never retried).
    r#"
    ALTER TABLE nodes ADD COLUMN retried TEXT;
    "#,
    // 13: who wrote each file of the workspace last, and what: a principal reads over
    // HTTP only a file whose last writer was a run of its own, while the file still holds
    // what that run wrote (its SHA-256). The owner is copied from the run as the file is
    // written, so that it outlives the run's purge. And a run's revision, counted by every
    // batch that changes it but not by a lease renewal, by which a subscription to its
    // report learns of a change without rendering the report.
    r#"
    CREATE TABLE written_files (
        path       TEXT PRIMARY KEY,
        sha256     TEXT NOT NULL,
        bytes      INTEGER NOT NULL,
        run_id     TEXT NOT NULL,
        node_id    TEXT NOT NULL,
        principal  TEXT,
        session    TEXT,
        written_at TEXT NOT NULL
    );
    CREATE INDEX written_files_by_principal ON written_files (principal, written_at);
    CREATE INDEX written_files_by_session ON written_files (session, written_at);
    CREATE INDEX written_files_by_time ON written_files (written_at);
    ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
    "#,
    // 14: workflows that compose, repeat and remember. A unit's finished iterations of a
    // `repeat` (a JSON list; NULL for a unit that never repeated). A run started by a
    // `workflow` node of another run: its parent, the node and instance that started it,
    // and its depth below the run at the top of its tree (0 there). And the history of
    // finished runs, which `history` nodes read: a row per run, written as the run ends,
    // kept apart from the runs so that it outlives their purge (it has a TTL of its own).
    r#"
    ALTER TABLE nodes ADD COLUMN iterations TEXT;
    ALTER TABLE runs ADD COLUMN parent_key INTEGER REFERENCES runs (key) ON DELETE SET NULL;
    ALTER TABLE runs ADD COLUMN parent_node TEXT;
    ALTER TABLE runs ADD COLUMN parent_index INTEGER;
    ALTER TABLE runs ADD COLUMN parent_instance INTEGER;
    ALTER TABLE runs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX runs_by_parent ON runs (parent_key) WHERE parent_key IS NOT NULL;
    CREATE TABLE run_history (
        run_id        TEXT NOT NULL PRIMARY KEY,
        workflow      TEXT NOT NULL,
        principal     TEXT,
        status        TEXT NOT NULL,
        created_at    TEXT NOT NULL,
        finished_at   TEXT NOT NULL,
        finished_ms   INTEGER NOT NULL,
        inputs        TEXT NOT NULL,
        output        TEXT,
        error         TEXT,
        parent_run_id TEXT
    );
    CREATE INDEX run_history_by_workflow ON run_history (workflow, finished_ms);
    CREATE INDEX run_history_by_principal ON run_history (principal, workflow, finished_ms);
    "#,
    // 15: a run's trace context, for a process that takes the run over to continue its
    // trace: its root span's W3C `traceparent`, and that of the request span the root
    // links to (NULL for a run recorded while telemetry was off).
    r#"
    ALTER TABLE runs ADD COLUMN trace_parent TEXT;
    ALTER TABLE runs ADD COLUMN trace_link TEXT;
    "#,
];

pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let supported = MIGRATIONS.len() as i64;
    let found: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if found > supported {
        return Err(StoreError::SchemaTooNew { found, supported });
    }
    if found == supported {
        return Ok(());
    }
    if conn.is_readonly(rusqlite::MAIN_DB)? {
        return Err(StoreError::ReadOnlyUninitialised { found });
    }
    // Another process may be migrating the same file right now: take the write lock first,
    // then read the version again under it.
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let found: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if found >= supported {
        return Ok(());
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", index as i64 + 1)?;
    }
    tx.commit()?;
    Ok(())
}
