//! The store's changes as one count that every face waits on: the dashboard's live pages
//! and MCP's resource subscriptions. One watcher per process reads the store's change
//! stamp four times a second, and at once when the store tells of a change (on PostgreSQL,
//! every change it shows is told from every host by `LISTEN`/`NOTIFY`; an answer, a cancel
//! or a task's new state also by this process), and only while something waits: a store
//! nobody watches costs nothing.
//!
//! Invariant: a commit to the store, by this process or another, moves the count within a
//! tick while anything waits on it; on PostgreSQL, a commit that changes a run, its task,
//! its nodes or its questions (what the live pages and resources show).

use std::time::Duration;

use tokio::sync::watch;

use super::App;
use crate::store::Store;

/// How often the change stamp is read while something waits.
const TICK: Duration = Duration::from_millis(250);

impl App {
    /// The count of the store's changes, to wait on with `changed()`. The first call
    /// starts the watcher, so it is made on the runtime.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        let store = self.registry.store();
        self.changes
            .get_or_init(|| watch_store(store.clone()))
            .clone()
    }
}

/// Starts the watcher of `store`; it ends with the runtime, or when every receiver is gone.
fn watch_store(store: Store) -> watch::Receiver<u64> {
    let (sender, changed) = watch::channel(0u64);
    tokio::spawn(async move {
        let mut last = None;
        let mut ticks = tokio::time::interval(TICK);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let wakes = store.wakes();
            tokio::select! {
                _ = ticks.tick() => {}
                _ = wakes.tasks.notified() => {}
                _ = wakes.answered.notified() => {}
                _ = wakes.cancelled.notified() => {}
                _ = wakes.changed.notified() => {}
            }
            if sender.is_closed() {
                return;
            }
            // The one receiver the application keeps: nobody waits.
            if sender.receiver_count() <= 1 {
                last = None;
                continue;
            }
            let stamp = match store.change_stamp() {
                Ok(stamp) => stamp,
                Err(error) => {
                    tracing::debug!(%error, "cannot read the store's change stamp");
                    continue;
                }
            };
            // The first read after nobody waited counts as a change too: a waiter that
            // began then may have read the state before a change this read includes.
            if last.as_ref().is_none_or(|seen| *seen != stamp) {
                sender.send_modify(|count| *count += 1);
            }
            last = Some(stamp);
        }
    });
    changed
}
