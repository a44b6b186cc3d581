//! Changes a waiter waits on, as they are told: by this process where it makes them, and
//! by the database where other processes do.
//!
//! PostgreSQL tells every host of a change through `LISTEN`/`NOTIFY`: triggers notify
//! when a question is answered, a cancel is asked for, a lease is given up or a run's
//! task changes status, and once per transaction that changed what the live pages show
//! (runs, their tasks, nodes, questions); each store listens on a connection of its own.
//! A waiter takes a `notified()` future before it reads the state it waits on, and reads
//! again once woken; polling stays the fallback (SQLite has no such channel, and a
//! listener may reconnect).

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// What a waiter may wait on; each wakes every waiter of its kind. Code of this process
/// that makes such a change may notify it too (the task registry does for answers).
#[derive(Debug, Default)]
pub struct Wakes {
    /// Some unit's question was answered.
    pub answered: Notify,
    /// Some run's cancel was asked for.
    pub cancelled: Notify,
    /// Some process gave up its leases: its runs may be taken over now.
    pub released: Notify,
    /// Some run's task changed status.
    pub tasks: Notify,
    /// Something the live pages show changed (PostgreSQL only).
    pub changed: Notify,
    /// How many such changes were told, and how often the listener connected again (it
    /// may have missed some meanwhile): the store's change stamp on PostgreSQL.
    changes: AtomicU64,
}

impl Wakes {
    /// Wakes the waiters of `kind`, as a notification's payload names it.
    pub(crate) fn wake(&self, kind: &str) {
        let notify = match kind {
            "change" => return self.count_change(),
            "answer" => &self.answered,
            "cancel" => &self.cancelled,
            "released" => &self.released,
            "task" => &self.tasks,
            _ => return,
        };
        notify.notify_waiters();
    }

    /// Counts a change, or a time changes may have gone untold, and wakes its waiters.
    pub(crate) fn count_change(&self) {
        self.changes.fetch_add(1, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// The count of changes told so far.
    pub(crate) fn change_count(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }
}
