//! A run whose journal refused a write, picked up again by the process that drove it.
//!
//! A write refused for a reason other than the run's lease (the database unreachable, a
//! commit cut off by a restart, a full disk), the run's end included, ends the drive:
//! what it had not committed is
//! forgotten, and whether a commit cut off was kept is not known here. The run is then read
//! back from what was saved, as a takeover reads it, and driven on under the same handle,
//! observer and cancel token. A unit whose commit was kept is done; one whose commit was
//! lost runs again, its tool call with it, since a call and its unit's record commit
//! together. So nothing is lost or done twice, and the run does not sit unfinished under a
//! lease this process keeps renewing.
//!
//! Invariant: the run stays in this process's `active` table while it is picked up, so
//! that nothing here drives it meanwhile. Another process may take it once its lease runs
//! out; the pick-up then ends (`Held`).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Engine;
use super::actions::ActionEnv;
use super::journal::{Answers, JournalError};
use super::observer::Observer;
use super::scheduler::RunSetup;

/// The pause before the run is first read back, doubled after each try that finds the
/// journal still not answering, and after each drive that saved no unit's end, up to
/// [`LONGEST_PAUSE`].
pub(super) const FIRST_PAUSE: Duration = Duration::from_millis(200);
const LONGEST_PAUSE: Duration = Duration::from_secs(10);

/// The pause after `pause`.
pub(super) fn longer(pause: Duration) -> Duration {
    (pause * 2).min(LONGEST_PAUSE)
}

/// How many of the run's units `setup` starts with finished: what the journal saved of its
/// progress.
pub(super) fn finished_units(setup: &RunSetup) -> usize {
    let restored = setup.restored.iter();
    restored
        .filter(|(_, _, unit)| unit.status.is_terminal())
        .count()
}

/// What the next drive keeps of the last: the caller's side of the run, which the journal
/// does not hold.
pub(super) struct Again {
    env: Arc<ActionEnv>,
    observer: Option<Arc<dyn Observer>>,
    cancel: CancellationToken,
    answers: Answers,
    tree: Arc<super::scheduler::TreeUnits>,
}

impl Again {
    pub(super) fn of(setup: &RunSetup) -> Again {
        Again {
            env: Arc::clone(&setup.env),
            observer: setup.observer.clone(),
            cancel: setup.cancel.clone(),
            answers: setup.answers,
            tree: Arc::clone(&setup.tree),
        }
    }
}

impl Engine {
    /// The setup that drives `run_id` on from what its journal saved, once the journal
    /// gives this process the run's lease again and reads the run back. `None` if the run
    /// is finished, gone or held by another process, or if it was cancelled and the
    /// journal does not answer. The first try is made after `pause`.
    pub(super) async fn pick_up(
        &self,
        run_id: &str,
        again: Again,
        mut pause: Duration,
    ) -> Option<RunSetup> {
        let journal = self.journal.clone()?;
        let mut said = false;
        loop {
            tokio::time::sleep(pause).await;
            pause = longer(pause);
            let (reader, id) = (Arc::clone(&journal), run_id.to_owned());
            // The journal's calls wait on the database: off the runtime's workers.
            let read = tokio::task::spawn_blocking(move || {
                reader.claim(&id, None)?;
                reader.load(&id)
            })
            .await;
            let error = match read {
                Ok(Ok(stored)) if stored.finished.is_none() => {
                    tracing::info!(%run_id, "driving the run on from what was saved");
                    let trace = self.resumed_trace(&stored);
                    let mut setup = RunSetup::from_stored(stored, again.env);
                    setup.trace = trace;
                    setup.observer = again.observer;
                    setup.cancel = again.cancel;
                    setup.answers = again.answers;
                    setup.tree = again.tree;
                    setup.journal = Some(journal);
                    setup.picked_up = true;
                    return Some(setup);
                }
                Ok(Ok(_)) => return None,
                Ok(Err(error)) => error,
                Err(join) => {
                    tracing::error!(%run_id, error = %join, "reading the run back failed");
                    return None;
                }
            };
            match error {
                JournalError::Storage(_) if !again.cancel.is_cancelled() => {
                    if !said {
                        tracing::warn!(%run_id, %error, "the run's journal does not answer; the run goes on once it does");
                        said = true;
                    }
                }
                error => {
                    tracing::warn!(%run_id, %error, "the run is not driven on here");
                    return None;
                }
            }
        }
    }
}
