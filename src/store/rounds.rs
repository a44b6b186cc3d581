//! The rounds of questions put to a client that answers by retrying its call, the runs
//! a client may retry its call for, and the server's secrets.
//!
//! A run's task counts the rounds it has put; the latest one may expire, and then its run
//! is cancelled. A secret is made once, by whichever process first needs it, and shared
//! by every process on the database.

use super::{Store, StoreError};

impl Store {
    /// Opens the run's next round, to expire at `expires_ms`; returns its number (1, 2,
    /// ...). `None` if there is no such run.
    pub(crate) fn next_round(
        &self,
        run_id: &str,
        expires_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        self.with(|tx| {
            tx.db.query_opt(
                "UPDATE run_tasks SET round = round + 1, round_expires_ms = ?2
                 WHERE run_key = (SELECT key FROM runs WHERE id = ?1)
                 RETURNING round",
                &[&run_id, &expires_ms],
                |r| r.get(0),
            )
        })
    }

    /// The run's latest round, now that its client answered it: it no longer expires.
    /// `None` if there is no such run.
    pub(crate) fn answered_round(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        self.with(|tx| {
            tx.db.query_opt(
                "UPDATE run_tasks SET round_expires_ms = NULL
                 WHERE run_key = (SELECT key FROM runs WHERE id = ?1)
                 RETURNING round",
                &[&run_id],
                |r| r.get(0),
            )
        })
    }

    /// The number of the run's latest round (0 before the first); `None` if no such run.
    pub fn round(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        self.with(|tx| {
            tx.db.query_opt(
                "SELECT t.round FROM run_tasks t JOIN runs r ON r.key = t.run_key
                 WHERE r.id = ?1",
                &[&run_id],
                |r| r.get(0),
            )
        })
    }

    /// Unfinished runs whose latest round expired before `now_ms`.
    pub(crate) fn expired_rounds(&self, now_ms: i64) -> Result<Vec<String>, StoreError> {
        self.with(|tx| {
            tx.db.query(
                "SELECT r.id FROM run_tasks t JOIN runs r ON r.key = t.run_key
                 WHERE t.round_expires_ms IS NOT NULL AND t.round_expires_ms < ?1
                   AND r.status = 'running'",
                &[&now_ms],
                |r| r.get(0),
            )
        })
    }

    /// The run `principal` started under idempotency key `key`, with the call that started
    /// it. Another principal's run under the same key is not found: keys are each
    /// principal's own (`None`, without tokens, is one principal of its own).
    pub fn run_by_idempotency_key(
        &self,
        principal: Option<&str>,
        key: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
        let principal = principal.unwrap_or("");
        self.with(|tx| {
            tx.db.query_opt(
                "SELECT id, idempotency_request FROM runs
                 WHERE coalesce(principal, '') = ?1 AND idempotency_key = ?2",
                &[&principal, &key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }

    /// The secret `name`, made by `make` if the database has none yet.
    pub fn secret(
        &self,
        name: &str,
        make: impl FnOnce() -> Vec<u8>,
    ) -> Result<Vec<u8>, StoreError> {
        self.with(|tx| {
            let read = || {
                tx.db
                    .query_opt("SELECT value FROM secrets WHERE name = ?1", &[&name], |r| {
                        r.get::<Vec<u8>>(0)
                    })
            };
            if let Some(secret) = read()? {
                return Ok(secret);
            }
            // Another process may make it at the same moment: the first insert wins.
            tx.db.execute(
                "INSERT INTO secrets (name, value) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                &[&name, &make()],
            )?;
            read()?.ok_or_else(|| StoreError::NotFound(format!("secret {name}")))
        })
    }
}
