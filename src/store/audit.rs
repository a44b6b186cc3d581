//! The append-only audit log: one row per tool call, accepted or rejected.

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
    /// The raw wire arguments, serialised; capped by [`cap_args`] before they are stored.
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
    pub args: String,
    pub outcome: String,
    pub run_id: Option<String>,
    pub node_id: Option<String>,
    pub principal: Option<String>,
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

impl Tx<'_> {
    pub fn append_audit(&self, entry: &AuditEntry<'_>) -> Result<(), StoreError> {
        let args: &str = &cap_args(entry.args);
        self.db.execute(
            "INSERT INTO audit_log (at, tool, args, outcome, run_id, node_id, principal)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            &[
                &clock::now_iso(),
                &entry.tool,
                &args,
                &entry.outcome.as_str(),
                &entry.run_id,
                &entry.node_id,
                &entry.principal,
            ],
        )?;
        Ok(())
    }
}

impl Store {
    pub fn append_audit(&self, entry: &AuditEntry<'_>) -> Result<(), StoreError> {
        self.with(|tx| tx.append_audit(entry))
    }

    /// The whole log in order of writing.
    pub fn audit_rows(&self) -> Result<Vec<AuditRow>, StoreError> {
        self.with(|tx| {
            tx.db.query(
                "SELECT id, at, tool, args, outcome, run_id, node_id, principal FROM audit_log
                 ORDER BY id",
                &[],
                |r| {
                    Ok(AuditRow {
                        id: r.get(0)?,
                        at: r.get(1)?,
                        tool: r.get(2)?,
                        args: r.get(3)?,
                        outcome: r.get(4)?,
                        run_id: r.get(5)?,
                        node_id: r.get(6)?,
                        principal: r.get(7)?,
                    })
                },
            )
        })
    }
}
