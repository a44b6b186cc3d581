//! Commits shared across runs on PostgreSQL: the transactions of many runs (their batches,
//! their tool calls, their starts) and direct todo calls that are ready at once go out in
//! one transaction, so that they pay for one `COMMIT` (its wait for the disk) and take the
//! audit chain's lock once, instead of one each, in turn.
//!
//! Each caller runs its own work on its own thread, on the group's connection, one after
//! another (the group's `turn`): nothing crosses threads but the connection. The first
//! caller of a group (its founder) waits for the commit of the group before it, while
//! later callers join; then it closes the group to newcomers, waits for the works that
//! joined to be done, and commits. So a group gathers the works that became ready while
//! the one before it was committing, and a caller that finds nothing committing commits
//! at once, alone, as it would without groups.
//!
//! Invariant: a caller is answered only once the transaction holding its writes has
//! committed; if that commit may or may not have happened (the connection lost during it),
//! every caller of the group fails and none is run again.
//! Invariant: one caller's failure undoes only that caller's work. A group in which any
//! work fails (its own error, or one its statements met on the server) commits nothing;
//! its callers then run their works again in a careful group, each under a savepoint of
//! its own, its statements answered before the next work's turn, so that a failing work
//! is undone alone and the others commit (so a work may run twice; nothing of its first
//! run is kept). Only a careful group that fails as a whole sends its callers to run alone:
//! so does one whose audit row fails, since audit rows are held to the commit
//! (`Session::write_at_commit`).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::postgres::{Pg, Session, blocking};
use super::{Store, StoreError, Tx};

/// The group a caller joins, if one is open to newcomers (a plain one and a careful one),
/// and the one commit in flight.
#[derive(Default)]
pub(super) struct Lane {
    open: Mutex<Option<Arc<Group>>>,
    careful: Mutex<Option<Arc<Group>>>,
    /// Held by the founder whose group is committing: the next founder waits on it, and
    /// meanwhile its group gathers callers.
    committing: Mutex<()>,
}

/// One transaction shared by several callers.
struct Group {
    /// Each work under a savepoint of its own, answered before the next.
    careful: bool,
    state: Mutex<State>,
    /// Told when a work is done, and when the group's outcome is known.
    changed: Condvar,
    /// The connection, its transaction open; held by the caller whose work runs.
    turn: Mutex<Option<Session>>,
}

#[derive(Default)]
struct State {
    /// Works that joined and are not done yet.
    running: usize,
    members: usize,
    /// A work failed: the group commits nothing.
    failed: bool,
    outcome: Option<Outcome>,
}

#[derive(Debug, Clone)]
enum Outcome {
    Committed,
    /// Nothing of the group was kept: each caller runs its work again alone.
    Undone,
    /// The commit may or may not have been kept: every caller fails.
    InDoubt(String),
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Store {
    /// Runs `work` in a transaction shared with the other works ready at once, and returns
    /// once that transaction has committed. An `Err` from `work` undoes what it wrote and
    /// nothing else. On SQLite, [`Store::try_transaction`]: its one writer already shares
    /// commits by its own queues (`commit.rs`, `grouped.rs`).
    ///
    /// `work` may run more than once (its group failed because of another's work, or the
    /// connection was lost before the commit): it must do nothing but the statements it
    /// sends.
    pub fn shared<T>(
        &self,
        mut work: impl FnMut(&Tx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let super::Backend::Postgres(pg) = &self.backend else {
            return self.try_transaction(work);
        };
        blocking(|| match pg.in_group(&mut work, false)? {
            Some(out) => Ok(out),
            // The group kept nothing: again, carefully; then alone, as any transaction.
            None => match pg.in_group(&mut work, true)? {
                Some(out) => Ok(out),
                None => self.try_transaction(work),
            },
        })
    }
}

impl Pg {
    /// Runs `work` in a group; `Ok(None)` when the group kept nothing and `work` is to run
    /// again alone.
    fn in_group<T>(
        &self,
        work: &mut impl FnMut(&Tx<'_>) -> Result<T, StoreError>,
        careful: bool,
    ) -> Result<Option<T>, StoreError> {
        let (group, founder) = self.join(careful)?;
        let out = {
            let turn = lock(&group.turn);
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let session = turn.as_ref()?;
                if group.careful {
                    return Some(carefully(session, &self.keys, work));
                }
                let out = work(&Tx::postgres(session, &self.keys));
                // A statement of an earlier work that failed on the server spoils the
                // group, whichever work's statement met it.
                Some((out, session.failed.get()))
            }));
            drop(turn);
            let mut state = lock(&group.state);
            state.running -= 1;
            let out = match ran {
                Ok(Some((out, spoiled))) => {
                    // In a careful group a work's failure was undone alone.
                    state.failed |= spoiled || (!group.careful && out.is_err());
                    Ok(out)
                }
                Ok(None) => {
                    state.failed = true;
                    Ok(Err(StoreError::Commit(
                        "the group has no connection".into(),
                    )))
                }
                Err(panic) => {
                    state.failed = true;
                    Err(panic)
                }
            };
            group.changed.notify_all();
            drop(state);
            match out {
                Ok(out) => out,
                // The group is told first: its founder still ends it, and the others wait
                // for no work that will never be done.
                Err(panic) => {
                    if founder {
                        self.commit_group(&group);
                    }
                    std::panic::resume_unwind(panic)
                }
            }
        };
        if founder {
            self.commit_group(&group);
        }
        let mut state = lock(&group.state);
        while state.outcome.is_none() {
            state = group
                .changed
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        match state.outcome.clone() {
            Some(Outcome::Committed) => out.map(Some),
            Some(Outcome::InDoubt(why)) => Err(StoreError::Commit(why)),
            Some(Outcome::Undone) | None => Ok(None),
        }
    }

    /// The open group, joined, or a new one this caller founds (its connection taken and
    /// its transaction begun); and whether this caller founded it.
    fn join(&self, careful: bool) -> Result<(Arc<Group>, bool), StoreError> {
        let mut open = lock(self.lane.slot(careful));
        if let Some(group) = open.as_ref() {
            let mut state = lock(&group.state);
            state.running += 1;
            state.members += 1;
            return Ok((Arc::clone(group), false));
        }
        let session = self.session()?;
        session.begin();
        let group = Arc::new(Group {
            careful,
            state: Mutex::new(State {
                running: 1,
                members: 1,
                ..State::default()
            }),
            changed: Condvar::new(),
            turn: Mutex::new(Some(session)),
        });
        *open = Some(Arc::clone(&group));
        Ok((group, true))
    }

    /// The founder's part: once the group before has committed, closes the group to
    /// newcomers, waits for the works that joined, and commits (or, a work having failed,
    /// rolls back); then tells every caller.
    fn commit_group(&self, group: &Arc<Group>) {
        let committing = lock(&self.lane.committing);
        {
            let mut open = lock(self.lane.slot(group.careful));
            if open.as_ref().is_some_and(|g| Arc::ptr_eq(g, group)) {
                *open = None;
            }
        }
        let mut state = lock(&group.state);
        while state.running > 0 {
            state = group
                .changed
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        let failed = state.failed;
        let members = state.members;
        drop(state);
        let session = lock(&group.turn).take();
        let outcome = match session {
            None => Outcome::Undone,
            Some(session) => end(&session, failed, members),
        };
        drop(committing);
        let mut state = lock(&group.state);
        state.outcome = Some(outcome);
        group.changed.notify_all();
    }
}

impl Lane {
    /// Where the open group of a kind is.
    fn slot(&self, careful: bool) -> &Mutex<Option<Arc<Group>>> {
        if careful { &self.careful } else { &self.open }
    }
}

/// A careful group's turn: `work` under a savepoint, its statements answered, and undone
/// alone if it failed. Its error is its own; the group is spoiled (second of the pair)
/// only when the savepoint itself cannot be ended.
fn carefully<T>(
    session: &Session,
    keys: &Arc<super::postgres::RunKeys>,
    work: &mut impl FnMut(&Tx<'_>) -> Result<T, StoreError>,
) -> (Result<T, StoreError>, bool) {
    session.savepoint();
    let out = work(&Tx::postgres(session, keys));
    let lease_lost = session.lease_lost.borrow_mut().take();
    let out = match (
        out.and_then(|out| session.flush().map(|()| out)),
        lease_lost,
    ) {
        (_, Some(run_id)) => Err(StoreError::LeaseLost { run_id }),
        (out, None) => out,
    };
    let kept = session.end_savepoint(out.is_ok());
    (out, kept.is_err())
}

/// Ends the group's transaction: commits it, unless a work failed.
fn end(session: &Session, failed: bool, members: usize) -> Outcome {
    // The server ended the session before the commit was sent (its notice closed the
    // connection while the group gathered): nothing of it was kept.
    if failed || session.closed() {
        let _ = session.rollback();
        return Outcome::Undone;
    }
    match session.commit() {
        Ok(()) => Outcome::Committed,
        // The commit was answered with an error, or never sent: nothing was kept.
        Err(_) if !session.committing.get() || !session.lost.get() => Outcome::Undone,
        Err(error) => {
            tracing::error!(works = members, %error, "a shared commit was cut off: whether it was kept is not known, and no work of it is acknowledged");
            Outcome::InDoubt(format!(
                "the connection was lost during the commit, which may or may not have been kept: {error}"
            ))
        }
    }
}
