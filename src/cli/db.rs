//! `db migrate`: the database's schema brought up to date ahead of a deploy.

use std::process::ExitCode;

use crate::store::{self, Durability, Store, StoreError};

/// Opens the database at `location`, which migrates it, and says where its schema stands.
pub fn migrate(location: &str) -> Result<ExitCode, StoreError> {
    let store = Store::open_at(location, Durability::Normal)?;
    super::say(&format!(
        "{} database {}: schema version {}",
        store.backend(),
        store::redacted(location),
        store.schema_version()?
    ));
    Ok(ExitCode::SUCCESS)
}
