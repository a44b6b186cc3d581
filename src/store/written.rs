//! Who wrote each file of the workspace last, and what (`written_files`), and the
//! revision of a run, which moves with every batch that changes it and never with a lease
//! renewal. A principal reads a file over HTTP only while it still holds what a run of
//! its own wrote there last; a subscription to a run's report looks again only when its
//! revision moved.

use super::runs::{Owner, Scope, owned_by_scope};
use super::sql::from_columns;
use super::{Store, StoreError, Tx};
use crate::clock;

/// A file a run wrote, as the last write of its path recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenFile {
    /// Relative to the workspace, its components joined by `/`.
    pub path: String,
    /// The SHA-256 of what was written, in hex.
    pub sha256: String,
    pub bytes: i64,
    pub run_id: String,
    pub node_id: String,
    /// Who owned the run when it wrote the file.
    pub principal: Option<String>,
    pub session: Option<String>,
    pub written_at: String,
}

impl WrittenFile {
    /// Who owned the run that wrote it.
    pub fn owner(&self) -> Owner {
        Owner {
            principal: self.principal.clone(),
            session: self.session.clone(),
        }
    }
}

/// A file written by a node of a run, to record with the batch that audits the write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWrite {
    pub path: String,
    pub sha256: String,
    pub bytes: i64,
    pub node_id: String,
}

const COLUMNS: &str = "w.path, w.sha256, w.bytes, w.run_id, w.node_id, w.principal, w.session, \
     w.written_at";

fn written_from_row(r: &super::sql::Row<'_>) -> Result<WrittenFile, StoreError> {
    Ok(from_columns!(
        r,
        WrittenFile {
            path,
            sha256,
            bytes,
            run_id,
            node_id,
            principal,
            session,
            written_at
        }
    ))
}

impl Tx<'_> {
    /// Records that the run with key `run_key` wrote `file` last, under the run's owner
    /// as it is now.
    pub(crate) fn record_written_file(
        &self,
        run_key: i64,
        file: &FileWrite,
    ) -> Result<(), StoreError> {
        self.db.write(
            // `WHERE TRUE`: SQLite reads `ON` after a bare `FROM runs` as a join's.
            "INSERT INTO written_files
                 (path, sha256, bytes, run_id, node_id, principal, session, written_at)
             SELECT ?2, ?3, ?4, id, ?5, principal, session, ?6 FROM runs WHERE key = ?1
             ON CONFLICT (path) DO UPDATE SET sha256 = excluded.sha256,
                 bytes = excluded.bytes, run_id = excluded.run_id,
                 node_id = excluded.node_id, principal = excluded.principal,
                 session = excluded.session, written_at = excluded.written_at",
            &[
                &run_key,
                &file.path,
                &file.sha256,
                &file.bytes,
                &file.node_id,
                &clock::now_iso(),
            ],
        )
    }
}

impl Store {
    /// The last write of `path` (relative to the workspace), if a run wrote it.
    pub fn written_file(&self, path: &str) -> Result<Option<WrittenFile>, StoreError> {
        self.with(|tx| {
            tx.db.query_opt(
                &format!("SELECT {COLUMNS} FROM written_files w WHERE w.path = ?1"),
                &[&path],
                written_from_row,
            )
        })
    }

    /// The files whose last writer was a run in `scope`, newest first: `limit` of them
    /// after the first `skip`.
    pub fn written_files(
        &self,
        scope: Scope<'_>,
        skip: i64,
        limit: i64,
    ) -> Result<Vec<WrittenFile>, StoreError> {
        let (kind, name) = scope.params();
        // The owner is the record's own, copied from the run as it wrote the file.
        let clause = owned_by_scope("w", 1, 2);
        self.with(|tx| {
            tx.db.query(
                &format!(
                    "SELECT {COLUMNS} FROM written_files w WHERE {clause}
                     ORDER BY w.written_at DESC, w.path LIMIT ?3 OFFSET ?4"
                ),
                &[&kind, &name, &limit, &skip],
                written_from_row,
            )
        })
    }

    /// The revision of run `run_id` and its owner: the revision moves with every batch of
    /// the run, its end and a request to cancel it, never with a lease renewal. `None` if
    /// there is no such run.
    pub fn run_revision(&self, run_id: &str) -> Result<Option<(i64, Owner)>, StoreError> {
        self.with(|tx| {
            tx.db.query_opt(
                "SELECT revision, principal, session FROM runs WHERE id = ?1",
                &[&run_id],
                |r| Ok((r.get(0)?, Owner::read(r, 1)?)),
            )
        })
    }
}
