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
    let tx = conn.transaction()?;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", index as i64 + 1)?;
    }
    tx.commit()?;
    Ok(())
}
