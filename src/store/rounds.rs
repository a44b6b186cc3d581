//! The rounds of questions put to a client that answers by retrying its call, the runs
//! a client may retry its call for, and the server's secrets.
//!
//! A run's task counts the rounds it has put; the latest one may expire, and then its run
//! is cancelled. A secret is made once, by whichever process first needs it, and shared
//! by every process on the database.

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError};

impl Store {
    /// Opens the run's next round, to expire at `expires_ms`; returns its number (1, 2,
    /// ...). `None` if there is no such run.
    pub fn next_round(&self, run_id: &str, expires_ms: i64) -> Result<Option<i64>, StoreError> {
        let conn = self.lock();
        Ok(conn
            .prepare_cached(
                "UPDATE run_tasks SET round = round + 1, round_expires_ms = ?2
                 WHERE run_key = (SELECT key FROM runs WHERE id = ?1)
                 RETURNING round",
            )?
            .query_row(params![run_id, expires_ms], |r| r.get(0))
            .optional()?)
    }

    /// The run's latest round, now that its client answered it: it no longer expires.
    /// `None` if there is no such run.
    pub fn answered_round(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        let conn = self.lock();
        Ok(conn
            .prepare_cached(
                "UPDATE run_tasks SET round_expires_ms = NULL
                 WHERE run_key = (SELECT key FROM runs WHERE id = ?1)
                 RETURNING round",
            )?
            .query_row([run_id], |r| r.get(0))
            .optional()?)
    }

    /// The number of the run's latest round (0 before the first); `None` if no such run.
    pub fn round(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        let conn = self.lock();
        Ok(conn
            .prepare_cached(
                "SELECT t.round FROM run_tasks t JOIN runs r ON r.key = t.run_key
                 WHERE r.id = ?1",
            )?
            .query_row([run_id], |r| r.get(0))
            .optional()?)
    }

    /// Unfinished runs whose latest round expired before `now_ms`.
    pub fn expired_rounds(&self, now_ms: i64) -> Result<Vec<String>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT r.id FROM run_tasks t JOIN runs r ON r.key = t.run_key
             WHERE t.round_expires_ms IS NOT NULL AND t.round_expires_ms < ?1
               AND r.status = 'running'",
        )?;
        let rows = stmt.query_map([now_ms], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The run started under idempotency key `key`, with the call that started it.
    pub fn run_by_idempotency_key(
        &self,
        key: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
        let conn = self.lock();
        Ok(conn
            .prepare_cached("SELECT id, idempotency_request FROM runs WHERE idempotency_key = ?1")?
            .query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    /// The secret `name`, made by `make` if the database has none yet.
    pub fn secret(
        &self,
        name: &str,
        make: impl FnOnce() -> Vec<u8>,
    ) -> Result<Vec<u8>, StoreError> {
        let conn = self.lock();
        let read = |conn: &rusqlite::Connection| {
            conn.prepare_cached("SELECT value FROM secrets WHERE name = ?1")?
                .query_row([name], |r| r.get(0))
                .optional()
        };
        if let Some(secret) = read(&conn)? {
            return Ok(secret);
        }
        // Another process may make it at the same moment: the first insert wins.
        conn.prepare_cached("INSERT OR IGNORE INTO secrets (name, value) VALUES (?1, ?2)")?
            .execute(params![name, make()])?;
        Ok(read(&conn)?.expect("the secret was just made"))
    }
}
