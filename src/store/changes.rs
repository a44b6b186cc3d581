//! A stamp of the database's state that moves whenever anything is committed, by this
//! process or another, and costs no table read: what the dashboard watches to push its
//! live updates.
//!
//! SQLite: the changes this process's connection made (`sqlite3_total_changes`) and the
//! commits of other connections (`PRAGMA data_version`, which moves only for those).
//! PostgreSQL: the count of changes the database told this store of (`LISTEN`/`NOTIFY`,
//! `store/wakes.rs`), from every host, with one more each time its listener connected
//! again: a commit that changes a run, its task, its nodes or its questions moves it; a
//! commit to another schema or database, or to todos and the audit log alone, does not.

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
            Backend::Postgres(_) => Ok(self.wakes.change_count().to_string()),
        }
    }
}
