//! The audit log's hash chain: each row carries `hash = SHA-256(prev_hash || row)`, so that
//! a row changed, removed or inserted after the fact breaks the chain at that row, and a
//! walk of the log in id order ([`Walk`]) names it.
//!
//! The encoding hashed is fixed and unambiguous: a domain tag, the previous row's hash as
//! text, then every field of the row in column order, each as a presence byte, a length
//! (u64, big-endian) and its bytes (the id as 8 bytes, big-endian). Two different rows can
//! therefore never encode alike, whatever their texts hold.

use super::audit::AuditRow;

/// The `prev_hash` of the first chained row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

const DOMAIN: &[u8] = b"mcp-task-server audit chain v1\n";

pub(crate) use crate::auth::sha256_hex;

/// The fields of a row that its hash covers: all of them but the hash itself.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    pub id: i64,
    pub at: &'a str,
    pub tool: &'a str,
    pub args: &'a str,
    pub args_sha256: &'a str,
    pub outcome: &'a str,
    pub run_id: Option<&'a str>,
    pub node_id: Option<&'a str>,
    pub principal: Option<&'a str>,
}

impl<'a> Fields<'a> {
    /// The fields of a row read back; `None` for a row written before the chain began.
    pub fn of(row: &'a AuditRow) -> Option<Fields<'a>> {
        Some(Fields {
            id: row.id,
            at: &row.at,
            tool: &row.tool,
            args: &row.args,
            args_sha256: row.args_sha256.as_deref()?,
            outcome: &row.outcome,
            run_id: row.run_id.as_deref(),
            node_id: row.node_id.as_deref(),
            principal: row.principal.as_deref(),
        })
    }
}

/// The hash of a row whose predecessor's hash is `prev`.
pub fn chain_hash(prev: &str, fields: &Fields<'_>) -> String {
    let encoded = Encoded::new(fields);
    link(prev, fields.id, &encoded, fields.outcome)
}

/// A row's fields encoded as the chain hashes them, all but its link (the previous row's
/// hash and its own id) and its outcome: what an append makes before it takes the writer,
/// so that the writer only links the row and inserts it.
#[derive(Debug, Clone)]
pub(crate) struct Encoded {
    /// The time, the tool, the arguments and their digest.
    before: Vec<u8>,
    /// The run, the node and the principal.
    after: Vec<u8>,
}

impl Encoded {
    pub(crate) fn new(fields: &Fields<'_>) -> Encoded {
        let before = [fields.at, fields.tool, fields.args, fields.args_sha256];
        let after = [fields.run_id, fields.node_id, fields.principal];
        let mut encoded = Encoded {
            before: Vec::with_capacity(before.iter().map(|t| 9 + t.len()).sum()),
            after: Vec::with_capacity(after.iter().map(|t| 9 + t.map_or(0, str::len)).sum()),
        };
        for text in before {
            field(&mut encoded.before, Some(text.as_bytes()));
        }
        for text in after {
            field(&mut encoded.after, text.map(str::as_bytes));
        }
        encoded
    }

    /// Everything the chain hashes after the link, the outcome included: what PostgreSQL
    /// hashes after the link it reads itself (`audit.rs`).
    pub(crate) fn after_link(&self, outcome: &str) -> Vec<u8> {
        let mut rest = Vec::with_capacity(self.before.len() + 9 + outcome.len() + self.after.len());
        rest.extend_from_slice(&self.before);
        field(&mut rest, Some(outcome.as_bytes()));
        rest.extend_from_slice(&self.after);
        rest
    }
}

/// One field of the encoding: a presence byte, then its length (u64, big-endian) and its
/// bytes.
fn field(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(bytes) => {
            out.push(1);
            out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
            out.extend_from_slice(bytes);
        }
        None => out.push(0),
    }
}

/// The hash of the row `encoded`, with id `id` and outcome `outcome`, after the row whose
/// hash is `prev`: the only part of the chain's work that needs the writer. One hash over
/// the encoding, fed in its parts without copying them.
pub(crate) fn link(prev: &str, id: i64, encoded: &Encoded, outcome: &str) -> String {
    use sha2::Digest as _;
    let mut head = Vec::with_capacity(DOMAIN.len() + 2 * 9 + prev.len() + 8);
    head.extend_from_slice(DOMAIN);
    field(&mut head, Some(prev.as_bytes()));
    field(&mut head, Some(&id.to_be_bytes()));
    let mut outcome_field = Vec::with_capacity(9 + outcome.len());
    field(&mut outcome_field, Some(outcome.as_bytes()));
    let mut hasher = sha2::Sha256::new();
    hasher.update(&head);
    hasher.update(&encoded.before);
    hasher.update(&outcome_field);
    hasher.update(&encoded.after);
    crate::auth::hex(&hasher.finalize())
}

/// The domain tag that starts every row's encoding, for PostgreSQL's own hash of it.
pub(crate) const DOMAIN_TAG: &[u8] = DOMAIN;

/// Where the chain breaks: the first row that does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Break {
    /// The row's hash does not match its contents: it was edited (or forged).
    Changed { row: i64 },
    /// Rows `first..row` are missing: `row` chains to a row that is no longer there.
    Removed { first: i64, row: i64 },
    /// The row is whole, but does not chain to the row before it.
    Inserted { row: i64, after: i64 },
    /// The row has no hash, yet the chain had begun before it.
    Unchained { row: i64 },
}

impl Break {
    /// The first row the break concerns (for `Removed`, the first missing one).
    pub fn row(&self) -> i64 {
        match self {
            Break::Changed { row } | Break::Inserted { row, .. } | Break::Unchained { row } => *row,
            Break::Removed { first, .. } => *first,
        }
    }
}

impl std::fmt::Display for Break {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Break::Changed { row } => write!(
                f,
                "row {row} was changed: its hash does not match its contents"
            ),
            Break::Removed { first, row } if *first + 1 == *row => write!(
                f,
                "row {first} was removed: row {row} chains to a row that is not there"
            ),
            Break::Removed { first, row } => write!(
                f,
                "rows {first} to {} were removed: row {row} chains to a row that is not there",
                row - 1
            ),
            Break::Inserted { row, after } => write!(
                f,
                "row {row} was inserted out of order: it does not chain to row {after}"
            ),
            Break::Unchained { row } => write!(
                f,
                "row {row} has no chain hash, though the chain began before it"
            ),
        }
    }
}

/// What a whole walk found, when the chain holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intact {
    /// Chained rows checked.
    pub checked: u64,
    /// Rows written before the chain began (the migration that added it), not covered.
    pub unchained: u64,
    /// The last row and its hash: what an operator records to detect a later truncation.
    pub head: Option<(i64, String)>,
}

impl std::fmt::Display for Intact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "audit chain intact: {} rows checked", self.checked)?;
        if let Some((id, hash)) = &self.head {
            write!(f, ", head row {id} hash {hash}")?;
        }
        if self.unchained > 0 {
            write!(
                f,
                "; {} earlier rows predate the chain and are not covered",
                self.unchained
            )?;
        }
        Ok(())
    }
}

/// A walk of the log, one row at a time in id order: no more than the last row is kept.
#[derive(Debug, Clone)]
pub struct Walk {
    /// Rows with an id up to this one were written before the chain began.
    unchained_until: i64,
    prev_id: i64,
    prev_hash: Option<String>,
    checked: u64,
    unchained: u64,
}

impl Walk {
    pub fn new(unchained_until: i64) -> Walk {
        Walk {
            unchained_until,
            prev_id: unchained_until,
            prev_hash: None,
            checked: 0,
            unchained: 0,
        }
    }

    /// Checks the next row. The first `Err` is the verdict; rows after it are not looked at.
    pub fn step(&mut self, row: &AuditRow) -> Result<(), Break> {
        if row.id <= self.unchained_until {
            self.unchained += 1;
            return Ok(());
        }
        let (Some(fields), Some(prev), Some(hash)) = (
            Fields::of(row),
            row.prev_hash.as_deref(),
            row.hash.as_deref(),
        ) else {
            return Err(Break::Unchained { row: row.id });
        };
        if chain_hash(prev, &fields) != hash {
            return Err(Break::Changed { row: row.id });
        }
        let expected = self.prev_hash.as_deref().unwrap_or(GENESIS);
        if prev != expected {
            return Err(if row.id > self.prev_id + 1 {
                Break::Removed {
                    first: self.prev_id + 1,
                    row: row.id,
                }
            } else {
                Break::Inserted {
                    row: row.id,
                    after: self.prev_id,
                }
            });
        }
        self.prev_id = row.id;
        self.prev_hash = Some(hash.to_owned());
        self.checked += 1;
        Ok(())
    }

    pub fn finish(self) -> Intact {
        Intact {
            checked: self.checked,
            unchained: self.unchained,
            head: self.prev_hash.map(|hash| (self.prev_id, hash)),
        }
    }
}

#[cfg(test)]
mod tests;
