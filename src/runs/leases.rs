//! Leases: a process drives a run only while it holds the run's lease. This file is where
//! they are renewed (every third of a lease, on a thread of its own), given up, and found
//! run out (the takeover candidates); every batch a process commits checks and extends
//! its lease too, by the fence `Registry::store_batch` puts on it (`registry.rs`).
//!
//! Invariant: lease renewal never waits on the runtime's workers; no host's clock enters a
//! lease comparison (the store reads the database's clock; this passes lengths only).

use std::sync::Arc;

use super::lease_owner::owner_is_gone;
use super::registry::{Registry, ms};
use crate::engine::Engine;
use crate::store::StoreError;

impl Registry {
    /// Extends the leases this process holds; returns the runs whose cancel was asked for
    /// by another process.
    pub(crate) fn renew(&self) -> Result<Vec<String>, StoreError> {
        self.store().renew_leases(self.owner(), self.lease_ms())
    }

    /// Unfinished runs started over MCP whose lease expired (by the database's clock) or
    /// whose owner is gone.
    pub fn orphans(&self) -> Result<Vec<String>, StoreError> {
        self.orphans_and_gone_owners().map(|(orphans, _)| orphans)
    }

    /// Claims, in one statement, up to `limit` of the unfinished runs started over MCP
    /// whose lease expired (by the database's clock) or whose owner is gone, oldest first;
    /// returns those claimed, for this process to drive on. The rest wait for the next
    /// round.
    pub(crate) fn claim_orphans(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        let (orphans, gone) = self.orphans_and_gone_owners()?;
        if orphans.is_empty() {
            return Ok(orphans);
        }
        let lease_ms = self.lease_ms();
        self.store()
            .claim_runs(&orphans, self.owner(), lease_ms, &gone, limit)
    }

    /// The orphaned runs, oldest first, and the owners known to be gone that hold some of
    /// them (each asked about once).
    fn orphans_and_gone_owners(&self) -> Result<(Vec<String>, Vec<String>), StoreError> {
        let runs = self.store().unfinished_runs("mcp", self.owner())?;
        let mut gone: Vec<String> = Vec::new();
        let mut orphans = Vec::new();
        for (id, owner, expired) in runs {
            match owner {
                None => orphans.push(id),
                Some(_) if expired => orphans.push(id),
                Some(owner) if gone.contains(&owner) || owner_is_gone(&owner) => {
                    if !gone.contains(&owner) {
                        gone.push(owner);
                    }
                    orphans.push(id);
                }
                Some(_) => {}
            }
        }
        Ok((orphans, gone))
    }

    /// Gives up this process's lease of run `run_id`, if it holds it.
    pub(crate) fn release_one(&self, run_id: &str) -> Result<(), StoreError> {
        self.store().release_lease(run_id, self.owner()).map(drop)
    }

    /// Gives up every lease this process holds, so that another may take the runs now.
    pub(crate) fn release_all(&self) {
        match self.store().release_leases(self.owner()) {
            Ok(0) => {}
            Ok(count) => tracing::info!(count, "released the leases of unfinished runs"),
            Err(error) => tracing::warn!(%error, "could not release leases"),
        }
    }

    /// The lease's length in ms: its expiry is set by the database's clock.
    pub(super) fn lease_ms(&self) -> i64 {
        ms(self.config().lease)
    }
}

/// Renews this process's leases every `every` on a thread of its own, so that renewal
/// never waits for the runtime's workers, whatever a run's node keeps them busy with. The
/// thread stops when the returned sender is dropped.
pub(super) fn renew_on_own_thread(
    engine: Engine,
    registry: Arc<Registry>,
    every: std::time::Duration,
) -> Option<std::sync::mpsc::Sender<()>> {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("lease-renewal".into())
        .spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every)
            {
                renew(&engine, &registry);
            }
        });
    match spawned {
        Ok(_) => Some(stop),
        Err(error) => {
            tracing::warn!(%error, "cannot start the lease renewal thread; leases are renewed by the runtime");
            None
        }
    }
}

/// Renews this process's leases, and cancels the runs another process asked to cancel.
pub(super) fn renew(engine: &Engine, registry: &Registry) {
    match registry.renew() {
        Ok(cancelled) => {
            for run_id in cancelled {
                if engine.cancel_local(&run_id) {
                    tracing::info!(%run_id, "cancelling the run, as asked");
                }
            }
        }
        Err(error) => tracing::warn!(%error, "could not renew leases"),
    }
}
