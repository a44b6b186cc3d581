//! The append-only audit log: one row per tool call, accepted or rejected.

use super::chain::{self, Break, Encoded, Fields, GENESIS, Intact, Walk, sha256_hex};
use std::cell::RefCell;

use super::sql::{Db, Param, Row, from_columns};
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

/// An audit row made ready before the writer is taken: its arguments capped and digested,
/// its time read, its fields encoded as the chain hashes them. What is left for the writer
/// is the link to the row before and the insert ([`Tx::append_ready`]); the outcome is
/// given then, for a call whose outcome its transaction decides.
#[derive(Debug, Clone)]
pub struct ReadyAudit {
    at: String,
    tool: String,
    /// The arguments as stored: capped by [`cap_args`].
    args: String,
    args_sha256: String,
    run_id: Option<String>,
    node_id: Option<String>,
    principal: Option<String>,
    encoded: Encoded,
}

impl ReadyAudit {
    /// The row `entry` describes, but for its outcome, at this moment.
    pub fn new(entry: &AuditEntry<'_>) -> ReadyAudit {
        let origin = (entry.run_id, entry.node_id, entry.principal);
        Self::owning(entry.tool, entry.args.to_owned(), origin)
    }

    /// [`ReadyAudit::new`] for arguments serialised by the caller (the whole payload),
    /// taken without a copy; `origin` is the run, the node and the principal.
    pub(crate) fn owning(
        tool: &str,
        args: String,
        (run_id, node_id, principal): (Option<&str>, Option<&str>, Option<&str>),
    ) -> ReadyAudit {
        let args_sha256 = sha256_hex(args.as_bytes());
        let args = match cap_args(&args) {
            std::borrow::Cow::Borrowed(_) => args,
            std::borrow::Cow::Owned(capped) => capped,
        };
        let at = clock::now_iso();
        let encoded = Encoded::new(&Fields {
            id: 0,
            at: &at,
            tool,
            args: &args,
            args_sha256: &args_sha256,
            outcome: "",
            run_id,
            node_id,
            principal,
        });
        ReadyAudit {
            at,
            tool: tool.to_owned(),
            args,
            args_sha256,
            run_id: run_id.map(str::to_owned),
            node_id: node_id.map(str::to_owned),
            principal: principal.map(str::to_owned),
            encoded,
        }
    }

    /// The tool the row names.
    pub(crate) fn tool(&self) -> &str {
        &self.tool
    }
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

/// SQLite: a row after a head the caller names.
const APPEND: &str = "INSERT INTO audit_log (id, at, tool, args, outcome, run_id, node_id, \
    principal, args_sha256, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

/// PostgreSQL: a row after the head, read and linked by the statement itself, after
/// [`CHAIN_LOCK`] in a statement of its own (so that under READ COMMITTED this one's
/// snapshot, taken after the lock, sees the row of the append that held it before). The
/// hash is `chain::link`'s, computed by the server over the same encoding: the domain tag
/// (?9), the head's hash and the new id, each as a field, then the rest of the row as the
/// caller encoded it (?10, `Encoded::after_link`). Nothing comes back, so the statement
/// goes out with the transaction's `COMMIT` (`Session::write_at_commit`), and the lock is
/// held only while the transaction commits.
const APPEND_LINKED: &str = "INSERT INTO audit_log (id, at, tool, args, outcome, run_id, node_id,
         principal, args_sha256, prev_hash, hash)
     OVERRIDING SYSTEM VALUE
     SELECT head.id + 1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, head.hash,
            encode(sha256(?9::bytea || '\\x01'::bytea
                || int8send(octet_length(head.hash)::bigint) || convert_to(head.hash, 'UTF8')
                || '\\x01'::bytea || int8send(8::bigint) || int8send(head.id + 1)
                || ?10::bytea), 'hex')
     FROM (SELECT coalesce(last.id, 0) AS id,
                  coalesce(last.hash, '0000000000000000000000000000000000000000000000000000000000000000') AS hash
           FROM (VALUES (1)) AS one
           LEFT JOIN LATERAL (SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1) AS last
           ON TRUE) AS head";

/// Whether `error` is SQLite refusing a row whose id is taken.
fn id_taken(error: &StoreError) -> bool {
    matches!(error, StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _))
        if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY)
}

impl Tx<'_> {
    /// Appends a row, chained to the last one. An error leaves the transaction to fail:
    /// the caller's effect must not commit without its row.
    pub fn append_audit(&self, entry: &AuditEntry<'_>) -> Result<(), StoreError> {
        self.append_ready(&ReadyAudit::new(entry), entry.outcome)
    }

    /// Appends a row made ready before the writer was taken, with its outcome: the row is
    /// linked to the chain's head and inserted, nothing more. An error leaves the
    /// transaction to fail.
    ///
    /// Invariant: a row is appended only right after the chain's head: read in this
    /// transaction, which holds the write lock (SQLite) or the chain's advisory lock
    /// (PostgreSQL), or hinted ([`HeadHint`]) and found to be the head by the primary key,
    /// which refuses any id but the one after it.
    pub fn append_ready(&self, row: &ReadyAudit, outcome: AuditOutcome) -> Result<(), StoreError> {
        self.still_open()?;
        if let Db::Postgres(session) = self.db {
            return append_postgres(session, row, outcome);
        }
        let append = |(last, prev): &(i64, String)| {
            let id = last + 1;
            let hash = chain::link(prev, id, &row.encoded, outcome.as_str());
            let params: [&dyn Param; 11] = [
                &id,
                &row.at,
                &row.tool,
                &row.args,
                &outcome.as_str(),
                &row.run_id,
                &row.node_id,
                &row.principal,
                &row.args_sha256,
                prev,
                &hash,
            ];
            self.db.execute(APPEND, &params)?;
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

    /// SQLite: the last row's id and hash, the chain's head, read inside the transaction,
    /// which holds the database's one write lock already.
    fn chain_head(&self) -> Result<(i64, String), StoreError> {
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

/// PostgreSQL: the chain's lock, then the row, linked by the server to the head it reads
/// under that lock ([`APPEND_LINKED`]). Both go out with the transaction's `COMMIT`.
fn append_postgres(
    session: &super::postgres::Session,
    row: &ReadyAudit,
    outcome: AuditOutcome,
) -> Result<(), StoreError> {
    // Both held to the commit: the chain's lock is taken only as the transaction commits,
    // once for all the rows it appends.
    session.lock_at_commit(CHAIN_LOCK)?;
    let rest = row.encoded.after_link(outcome.as_str());
    let params: [&dyn Param; 10] = [
        &row.at,
        &row.tool,
        &row.args,
        &outcome.as_str(),
        &row.run_id,
        &row.node_id,
        &row.principal,
        &row.args_sha256,
        &chain::DOMAIN_TAG,
        &rest,
    ];
    session.write_at_commit(&super::sql::numbered(APPEND_LINKED), &params)
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
