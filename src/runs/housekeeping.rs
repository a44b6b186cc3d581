//! The background work of a process that drives durable runs: renewing its leases,
//! honouring cancels asked for by other processes, taking over orphaned runs (`serve`
//! only), and purging runs whose TTL ran out, and the history of runs whose own did.

use std::sync::Arc;

use tokio::task::JoinHandle;

use super::Registry;
use crate::engine::journal::{JournalError, RunOrigin};
use crate::engine::{Engine, ResumeError, RunOptions};

/// What the loop does besides renewing leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chores {
    /// Take over unfinished `mcp` runs whose lease expired or whose owner is gone.
    pub take_over: bool,
    /// Delete finished runs whose TTL ran out, and the history of runs whose own TTL did.
    pub purge: bool,
}

/// Runs one round now, then one every third of the lease, until the task is aborted; and
/// one at once when the database tells of a cancel asked for, or of leases given up
/// (PostgreSQL tells of those made on other hosts), so that they take effect promptly.
pub fn spawn(engine: Engine, registry: Arc<Registry>, chores: Chores) -> JoinHandle<()> {
    let every = registry.config().lease / 3;
    let renewing = super::leases::renew_on_own_thread(engine.clone(), Arc::clone(&registry), every);
    tokio::spawn(async move {
        // Dropped with this task, which stops the renewing thread.
        let _renewing = renewing;
        let mut rounds = Rounds::default();
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let store = registry.store().clone();
        loop {
            let wakes = store.wakes();
            tokio::select! {
                _ = ticks.tick() => {}
                _ = wakes.cancelled.notified() => {}
                _ = wakes.released.notified(), if chores.take_over => {}
            }
            round_warning_once(&engine, &registry, chores, &mut rounds);
        }
    })
}

/// The runs whose takeover failed and was said so at `warn`: it is said once per run.
pub(crate) type Warned = std::collections::HashSet<String>;

/// How often the history of finished runs is purged, at most: its TTL counts in days, and
/// finding its expired rows reads the table.
const HISTORY_PURGE_EVERY: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// What the rounds of one loop remember.
#[derive(Default)]
struct Rounds {
    warned: Warned,
    /// When the history was last purged.
    history_purged: Option<std::time::Instant>,
}

/// One round of housekeeping.
pub fn round(engine: &Engine, registry: &Registry, chores: Chores) {
    round_warning_once(engine, registry, chores, &mut Rounds::default());
}

/// One round of housekeeping, a failing takeover said at `warn` unless it was said before.
fn round_warning_once(engine: &Engine, registry: &Registry, chores: Chores, rounds: &mut Rounds) {
    super::leases::renew(engine, registry);
    if chores.take_over {
        match registry.expire_rounds() {
            Ok(expired) => {
                for run_id in expired {
                    engine.cancel_local(&run_id);
                    tracing::info!(%run_id, "cancelled a run whose questions went unanswered");
                }
            }
            Err(error) => tracing::warn!(%error, "could not expire unanswered questions"),
        }
        take_over(engine, registry, &mut rounds.warned);
    }
    if chores.purge {
        match registry.purge_expired() {
            Ok(0) => {}
            Ok(count) => tracing::info!(count, "purged finished runs past their TTL"),
            Err(error) => tracing::warn!(%error, "could not purge finished runs"),
        }
        let due = (rounds.history_purged).is_none_or(|at| at.elapsed() >= HISTORY_PURGE_EVERY);
        if due {
            rounds.history_purged = Some(std::time::Instant::now());
            match registry.purge_expired_history() {
                Ok(0) => {}
                Ok(count) => tracing::info!(count, "purged the history of runs past its TTL"),
                Err(error) => tracing::warn!(%error, "could not purge the history of runs"),
            }
        }
    }
}

/// Runs claimed at most in one round: the rest are claimed at the next round, a third of
/// a lease later, or at once when the database tells of leases given up.
const CLAIMED_PER_ROUND: usize = 64;

fn take_over(engine: &Engine, registry: &Registry, warned: &mut Warned) {
    // Claimed in one statement; each is then read back and driven on under the lease
    // this process now holds.
    let orphans = match registry.claim_orphans(CLAIMED_PER_ROUND) {
        Ok(orphans) => orphans,
        Err(error) => return tracing::warn!(%error, "could not look for orphaned runs"),
    };
    for run_id in orphans {
        let options = RunOptions {
            origin: RunOrigin::Mcp,
            ..RunOptions::default()
        };
        match engine.resume(&run_id, options) {
            Ok(handle) => {
                tracing::info!(%run_id, "took over an unfinished run");
                crate::telemetry::metrics::takeover();
                tokio::spawn(async move {
                    match handle.join.await {
                        Ok(report) => {
                            tracing::info!(run_id = %report.run_id, status = report.status.as_str(), "resumed run finished")
                        }
                        Err(error) => tracing::error!(%error, "resumed run stopped abnormally"),
                    }
                });
            }
            // Another process got there first, or this one drives it: nothing is wrong.
            Err(
                error @ (ResumeError::AlreadyActive(_)
                | ResumeError::Journal(
                    JournalError::Held(_) | JournalError::Finished { .. },
                )),
            ) => tracing::debug!(%run_id, %error, "not taking the run over"),
            // A takeover that keeps failing (a stored run that cannot be read, a database
            // that refuses the claim) is said once, then at `debug` at every round. The
            // lease claimed above is given back, so that the run is looked at again, here
            // or by another host, rather than held by a process that does not drive it.
            Err(error) => {
                if let Err(release) = registry.release_one(&run_id) {
                    tracing::warn!(%run_id, error = %release, "could not give back a lease claimed for a takeover");
                }
                match warned.insert(run_id.clone()) {
                    true => {
                        tracing::warn!(%run_id, %error, "cannot take the run over; will keep trying")
                    }
                    false => tracing::debug!(%run_id, %error, "still cannot take the run over"),
                }
            }
        }
    }
}
