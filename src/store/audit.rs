//! The append-only audit log: one row per tool call, accepted or rejected.

use super::chain::{Break, Fields, GENESIS, Intact, Walk, chain_hash, sha256_hex};
use std::cell::RefCell;

use super::sql::{Db, Dialects, Param, Row, from_columns};
use super::{Store, StoreError, Tx};
use crate::clock;

/// The recorded arguments are capped at this many bytes; longer ones end in a marker.
pub const AUDIT_ARGS_CAP: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOutcome {
    Ok,
    Rejected,
    NotFound,
    Error,
}

impl AuditOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Ok => "ok",
            AuditOutcome::Rejected => "rejected",
            AuditOutcome::NotFound => "not_found",
            AuditOutcome::Error => "error",
        }
    }
}

/// What a call appends to the log.
#[derive(Debug, Clone)]
pub struct AuditEntry<'a> {
    pub tool: &'a str,
    /// The whole argument payload: the arguments as the call received them, serialised by
    /// `serde_json` compactly, keys in the order received. Its SHA-256 is stored whole;
    /// the text itself is capped by [`cap_args`].
    pub args: &'a str,
    pub outcome: AuditOutcome,
    pub run_id: Option<&'a str>,
    pub node_id: Option<&'a str>,
    /// The principal the call was made for, when the server tells callers apart.
    pub principal: Option<&'a str>,
}

/// A row read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub id: i64,
    pub at: String,
    pub tool: String,
    /// The arguments as stored: capped by [`cap_args`].
    pub args: String,
    pub outcome: String,
    pub run_id: Option<String>,
    pub node_id: Option<String>,
    pub principal: Option<String>,
    /// Lowercase hex SHA-256 of the whole argument payload, before the cap: of the exact
    /// bytes of [`AuditEntry::args`]. `None` for rows written before the chain began.
    pub args_sha256: Option<String>,
    /// The hash of the row before this one in the chain ([`GENESIS`] for the first).
    pub prev_hash: Option<String>,
    /// `SHA-256(prev_hash || this row's fields)`: see `chain.rs`.
    pub hash: Option<String>,
}

/// Cuts `args` to at most [`AUDIT_ARGS_CAP`] bytes (on a character boundary) and marks the cut.
pub(crate) fn cap_args(args: &str) -> std::borrow::Cow<'_, str> {
    if args.len() <= AUDIT_ARGS_CAP {
        return args.into();
    }
    let mut end = AUDIT_ARGS_CAP;
    while !args.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[truncated: {} bytes in all]", &args[..end], args.len()).into()
}

/// Rows a walk of the log reads at a time: the walk never holds more.
const WALK_PAGE: i64 = 512;

/// PostgreSQL: the advisory lock that makes appends to one schema's chain take turns,
/// across every connection and host; held until the transaction ends. The second key is
/// the schema's, so that stores in different schemas of one database do not wait on each
/// other.
const CHAIN_LOCK: &str = "SELECT pg_advisory_xact_lock(1635083369, hashtext(current_schema()))";

pub(super) const COLUMNS: &str =
    "id, at, tool, args, outcome, run_id, node_id, principal, args_sha256, prev_hash, hash";

pub(super) fn read_row(r: &Row<'_>) -> Result<AuditRow, StoreError> {
    Ok(from_columns!(
        r,
        AuditRow {
            id,
            at,
            tool,
            args,
            outcome,
            run_id,
            node_id,
            principal,
            args_sha256,
            prev_hash,
            hash,
        }
    ))
}

/// SQLite: the chain's head (its last row's id and hash) as this connection last wrote
/// it, so that an append need not read it with a statement of its own, on the path of
/// every audited call.
///
/// Invariant: the hint names a row that is committed (or written earlier in the open
/// transaction): it is set from a transaction only once that transaction commits, and
/// forgotten when the transaction, or a savepoint in it, rolls back. It may be behind the
/// head (another process appended since); then the row it would append takes an id
/// already there, the primary key refuses it, and the head is read instead. It is never
/// ahead of the head, so an append after it never leaves a gap nor chains to a row that
/// is not there.
#[derive(Default)]
pub(crate) struct HeadHint {
    committed: RefCell<Option<(i64, String)>>,
    /// Written by the open transaction, not yet committed.
    pending: RefCell<Option<(i64, String)>>,
}

impl HeadHint {
    fn get(&self) -> Option<(i64, String)> {
        let pending = self.pending.borrow();
        pending.clone().or_else(|| self.committed.borrow().clone())
    }

    /// The open transaction committed: what it wrote is the head now.
    pub(crate) fn committed(&self) {
        if let Some(head) = self.pending.take() {
            *self.committed.borrow_mut() = Some(head);
        }
    }

    /// The open transaction, or a savepoint in it, rolled back: what it wrote is gone.
    pub(crate) fn rolled_back(&self) {
        self.pending.take();
    }
}

const APPEND: Dialects = Dialects {
    sqlite: "INSERT INTO audit_log (id, at, tool, args, outcome, run_id, node_id, principal, \
        args_sha256, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    postgres: "INSERT INTO audit_log (id, at, tool, args, outcome, run_id, node_id, principal,
                                      args_sha256, prev_hash, hash)
               OVERRIDING SYSTEM VALUE
               VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
};

/// Whether `error` is SQLite refusing a row whose id is taken.
fn id_taken(error: &StoreError) -> bool {
    matches!(error, StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _))
        if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY)
}

impl Tx<'_> {
    /// Appends a row, chained to the last one. An error leaves the transaction to fail:
    /// the caller's effect must not commit without its row.
    ///
    /// Invariant: a row is appended only right after the chain's head: read in this
    /// transaction, which holds the write lock, or hinted ([`HeadHint`]) and found to be
    /// the head by the primary key, which refuses any id but the one after it.
    pub fn append_audit(&self, entry: &AuditEntry<'_>) -> Result<(), StoreError> {
        self.still_open()?;
        let args: &str = &cap_args(entry.args);
        let args_sha256 = sha256_hex(entry.args.as_bytes());
        let at = clock::now_iso();
        let append = |(last, prev): &(i64, String)| {
            let id = last + 1;
            let fields = Fields {
                id,
                at: &at,
                tool: entry.tool,
                args,
                args_sha256: &args_sha256,
                outcome: entry.outcome.as_str(),
                run_id: entry.run_id,
                node_id: entry.node_id,
                principal: entry.principal,
            };
            let hash = chain_hash(prev, &fields);
            let params: [&dyn Param; 11] = [
                &id,
                &at,
                &entry.tool,
                &args,
                &entry.outcome.as_str(),
                &entry.run_id,
                &entry.node_id,
                &entry.principal,
                &args_sha256,
                prev,
                &hash,
            ];
            self.db.execute(self.db.pick(APPEND), &params)?;
            Ok::<_, StoreError>((id, hash))
        };
        let hint = self.audit_head;
        let appended = match hint.and_then(HeadHint::get) {
            Some(head) => match append(&head) {
                Err(error) if id_taken(&error) => append(&self.chain_head()?)?,
                other => other?,
            },
            None => append(&self.chain_head()?)?,
        };
        if let Some(hint) = hint {
            match self.in_transaction {
                true => *hint.pending.borrow_mut() = Some(appended),
                // The statement committed on its own.
                false => *hint.committed.borrow_mut() = Some(appended),
            }
        }
        Ok(())
    }

    /// The last row's id and hash, the chain's head, read so that no other append can
    /// come between this read and this transaction's commit. SQLite: the transaction
    /// holds the database's one write lock already. PostgreSQL: an advisory lock, then
    /// the read (a statement of its own, so that under READ COMMITTED it sees the row of
    /// the append that held the lock before).
    fn chain_head(&self) -> Result<(i64, String), StoreError> {
        if let Db::Postgres(_) = self.db {
            self.db.execute(CHAIN_LOCK, &[])?;
        }
        let last = self.db.query_opt(
            "SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1",
            &[],
            |r| Ok((r.get::<i64>(0)?, r.get::<Option<String>>(1)?)),
        )?;
        Ok(match last {
            None => (0, GENESIS.to_owned()),
            // A row from before the chain began: the chain starts after it.
            Some((id, hash)) => (id, hash.unwrap_or_else(|| GENESIS.to_owned())),
        })
    }
}

impl Store {
    pub fn append_audit(&self, entry: &AuditEntry<'_>) -> Result<(), StoreError> {
        self.try_transaction(|tx| tx.append_audit(entry))
    }

    /// The whole log in order of writing.
    pub fn audit_rows(&self) -> Result<Vec<AuditRow>, StoreError> {
        self.with(|tx| {
            tx.db.query(
                &format!("SELECT {COLUMNS} FROM audit_log ORDER BY id"),
                &[],
                read_row,
            )
        })
    }

    /// Walks the chain in id order, a page at a time, and returns where it first breaks
    /// (with the rows checked before), or what it covered.
    pub fn verify_audit_chain(&self) -> Result<Result<Intact, (Break, u64)>, StoreError> {
        let unchained_until: i64 = self
            .with(|tx| {
                tx.db
                    .query_opt("SELECT legacy_until FROM audit_chain", &[], |r| r.get(0))
            })?
            .unwrap_or(0);
        let mut walk = Walk::new(unchained_until);
        let sql = format!("SELECT {COLUMNS} FROM audit_log WHERE id > ?1 ORDER BY id LIMIT ?2");
        let mut after = i64::MIN;
        loop {
            let page = self.with(|tx| tx.db.query(&sql, &[&after, &WALK_PAGE], read_row))?;
            for row in &page {
                if let Err(broken) = walk.step(row) {
                    return Ok(Err((broken, walk.finish().checked)));
                }
            }
            match page.last() {
                Some(row) if page.len() as i64 == WALK_PAGE => after = row.id,
                _ => return Ok(Ok(walk.finish())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::write_tx::WriteTx;
    use crate::store::{Backend, Durability};

    fn entry(tool: &str) -> AuditEntry<'_> {
        AuditEntry {
            tool,
            args: "{}",
            outcome: AuditOutcome::Ok,
            run_id: None,
            node_id: None,
            principal: None,
        }
    }

    /// A row appended under a savepoint that is then rolled back is gone: the next append
    /// in the same transaction chains to the row before it, not to the one undone.
    #[test]
    fn an_append_after_a_savepoint_rolled_back_chains_to_what_stayed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let store = Store::open_at(path.to_str().unwrap(), Durability::Normal).unwrap();
        let Backend::Sqlite(sqlite) = &store.backend else {
            unreachable!("a path opens SQLite")
        };
        {
            let conn = sqlite.lock();
            let tx = WriteTx::begin(&conn).unwrap();
            Tx::sqlite_tx(&tx).append_audit(&entry("kept")).unwrap();
            tx.savepoint().unwrap();
            Tx::sqlite_tx(&tx).append_audit(&entry("undone")).unwrap();
            tx.end_savepoint(false).unwrap();
            Tx::sqlite_tx(&tx).append_audit(&entry("after")).unwrap();
            tx.commit().unwrap();
        }
        store.append_audit(&entry("next")).unwrap();
        let rows = store.audit_rows().unwrap();
        let tools: Vec<&str> = rows.iter().map(|row| row.tool.as_str()).collect();
        assert_eq!(tools, ["kept", "after", "next"]);
        assert_eq!(rows.iter().map(|row| row.id).collect::<Vec<_>>(), [1, 2, 3]);
        let intact = store.verify_audit_chain().unwrap().expect("one chain");
        assert_eq!(intact.checked, 3);
    }
}
