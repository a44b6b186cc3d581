//! A stamp of the database's state that moves whenever anything is committed, by this
//! process or another, and costs no table read: what the dashboard watches to push its
//! live updates.
//!
//! SQLite: the changes this process's connection made (`sqlite3_total_changes`) and the
//! commits of other connections (`PRAGMA data_version`, which moves only for those).
//! PostgreSQL: the position where the server inserts into its write-ahead log, which moves
//! with every commit on the server (those of other databases too: a move is a hint to
//! look, never a claim that something here changed).

use super::{Backend, Store, StoreError};

impl Store {
    /// The stamp as it is now; compare it with an earlier one.
    pub fn change_stamp(&self) -> Result<String, StoreError> {
        match &self.backend {
            Backend::Sqlite(sqlite) => {
                let conn = sqlite.lock();
                let version: i64 = conn.query_row("PRAGMA data_version", [], |r| r.get(0))?;
                Ok(format!("{version}:{}", conn.total_changes()))
            }
            Backend::Postgres(_) => self.with(|tx| {
                let stamp =
                    tx.db
                        .query_opt("SELECT pg_current_wal_insert_lsn()::text", &[], |r| {
                            r.get(0)
                        })?;
                Ok(stamp.unwrap_or_default())
            }),
        }
    }
}
