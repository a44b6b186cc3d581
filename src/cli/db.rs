//! `db migrate`: the database's schema brought up to date ahead of a deploy; `db verify`:
//! the audit log's hash chain walked, on either backend.

use std::process::ExitCode;

use crate::store::{self, Durability, PgOptions, Store, StoreError};

/// Opens the database at `location`, which migrates it, and says where its schema stands.
pub fn migrate(location: &str, postgres: PgOptions) -> Result<ExitCode, StoreError> {
    let store = Store::open_at_with(location, Durability::Normal, postgres)?;
    super::say(&format!(
        "{} database {}: schema version {}",
        store.backend(),
        store::redacted(location),
        store.schema_version()?
    ));
    Ok(ExitCode::SUCCESS)
}

/// Walks the audit log's hash chain and says, in one line, whether it holds: the rows
/// checked and the head's hash, or the first row changed, removed or inserted out of
/// order. Fails (exit code 1) when the chain is broken.
pub fn verify(location: &str, postgres: PgOptions) -> Result<ExitCode, StoreError> {
    let store = Store::open_at_with(location, Durability::Normal, postgres)?;
    if let Some(damage) = store.quick_check()? {
        super::say(&format!("database damaged: {damage}"));
        return Ok(ExitCode::FAILURE);
    }
    match store.verify_audit_chain()? {
        Ok(intact) => {
            super::say(&intact.to_string());
            Ok(ExitCode::SUCCESS)
        }
        Err((broken, checked)) => {
            super::say(&format!(
                "audit chain BROKEN: {broken} ({checked} rows before it verified)"
            ));
            Ok(ExitCode::FAILURE)
        }
    }
}
