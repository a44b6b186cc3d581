//! The append-only audit log: one row per tool call, accepted or rejected.

use super::chain::{Break, Fields, GENESIS, Intact, Walk, chain_hash, sha256_hex};
use std::cell::RefCell;

use super::sql::{Db, Dialects, Param, Row};
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
pub fn cap_args(args: &str) -> std::borrow::Cow<'_, str> {
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

const COLUMNS: &str =
    "id, at, tool, args, outcome, run_id, node_id, principal, args_sha256, prev_hash, hash";

fn read_row(r: &Row<'_>) -> Result<AuditRow, StoreError> {
    Ok(AuditRow {
        id: r.get(0)?,
        at: r.get(1)?,
        tool: r.get(2)?,
        args: r.get(3)?,
        outcome: r.get(4)?,
        run_id: r.get(5)?,
        node_id: r.get(6)?,
        principal: r.get(7)?,
        args_sha256: r.get(8)?,
        prev_hash: r.get(9)?,
        hash: r.get(10)?,
    })
}

/// SQLite: the chain's head (its last row's id and hash) as this process last appended
/// it. A hint only: the append that uses it checks, in its own statement, that it is
/// still the head (`APPEND_AT_HEAD`), and reads the head otherwise. It spares each
/// append a statement of its own to read the head, on the path of every call.
#[derive(Default)]
pub(crate) struct HeadHint(RefCell<Option<(i64, String)>>);

/// Appends a row after the row `?1 - 1` whose hash is `?10`, if that row is the last:
/// otherwise nothing (another process appended since, or the transaction that appended
/// the hinted row was rolled back).
const APPEND_AT_HEAD: &str = "INSERT INTO audit_log (id, at, tool, args, outcome, run_id, \
    node_id, principal, args_sha256, prev_hash, hash) \
    SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11 \
    WHERE (SELECT hash FROM audit_log WHERE id = ?1 - 1) = ?10 \
    AND NOT EXISTS (SELECT 1 FROM audit_log WHERE id >= ?1)";

const APPEND: Dialects = Dialects {
    sqlite: "INSERT INTO audit_log (id, at, tool, args, outcome, run_id, node_id, principal, \
        args_sha256, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    postgres: "INSERT INTO audit_log (id, at, tool, args, outcome, run_id, node_id, principal,
                                      args_sha256, prev_hash, hash)
               OVERRIDING SYSTEM VALUE
               VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
};

impl Tx<'_> {
    /// Appends a row, chained to the last one. An error leaves the transaction to fail:
    /// the caller's effect must not commit without its row.
    ///
    /// Invariant: a row is appended only right after the chain's head: one read in this
    /// transaction, which holds the write lock, or a hinted one that the appending
    /// statement itself finds to be the head.
    pub fn append_audit(&self, entry: &AuditEntry<'_>) -> Result<(), StoreError> {
        self.still_open()?;
        let args: &str = &cap_args(entry.args);
        let args_sha256 = sha256_hex(entry.args.as_bytes());
        let at = clock::now_iso();
        let row = |(last, prev): &(i64, String)| {
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
            (id, chain_hash(prev, &fields))
        };
        let append = |sql: &str, head: &(i64, String)| {
            let (id, hash) = row(head);
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
                &head.1,
                &hash,
            ];
            Ok::<_, StoreError>((self.db.execute(sql, &params)? == 1).then_some((id, hash)))
        };
        let hint = self.audit_head.map(|hint| &hint.0);
        let hinted = hint.and_then(|hint| hint.borrow().clone());
        let appended = match hinted {
            Some(head) => append(APPEND_AT_HEAD, &head)?,
            None => None,
        };
        let appended = match appended {
            Some(appended) => appended,
            None => append(self.db.pick(APPEND), &self.chain_head()?)?
                .ok_or_else(|| StoreError::Commit("the audit row was not appended".into()))?,
        };
        if let Some(hint) = hint {
            *hint.borrow_mut() = Some(appended);
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
        let legacy_until: i64 = self
            .with(|tx| {
                tx.db
                    .query_opt("SELECT legacy_until FROM audit_chain", &[], |r| r.get(0))
            })?
            .unwrap_or(0);
        let mut walk = Walk::new(legacy_until);
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
