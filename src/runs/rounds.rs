//! The rounds of questions put to a client that answers by retrying its call, and the
//! server's keys: the one that signs the state of those rounds, and the one that makes
//! sub-task ids, each derived from one secret kept in the store.

use super::Registry;
use super::ids;
use crate::store::StoreError;

impl Registry {
    /// Opens the run's next round of questions, expiring after the configured answer
    /// timeout; returns its number.
    pub(crate) fn next_round(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        let expires = crate::clock::now_ms() + ms(self.config().answer_timeout);
        self.store().next_round(run_id, expires)
    }

    /// The number of the run's latest round.
    pub fn round(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        self.store().round(run_id)
    }

    /// The client answered the run's latest round: it no longer expires.
    pub(crate) fn answered_round(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        self.store().answered_round(run_id)
    }

    /// Cancels the runs whose latest round of questions went unanswered past its expiry;
    /// returns them.
    pub(crate) fn expire_rounds(&self) -> Result<Vec<String>, StoreError> {
        let expired = self.store().expired_rounds(crate::clock::now_ms())?;
        for run_id in &expired {
            self.store().answered_round(run_id)?;
            self.cancel_task_now(run_id)?;
        }
        Ok(expired)
    }

    /// The key that signs the state handed to clients that answer by retrying their
    /// call: made once, kept in the database, so that it holds across restarts and
    /// processes.
    pub(crate) fn state_key(&self) -> Result<&[u8], StoreError> {
        if let Some(key) = self.state_key.get() {
            return Ok(key);
        }
        let key = self
            .store()
            .secret("request-state-key", crate::auth::random_key)?;
        Ok(self.state_key.get_or_init(|| key))
    }

    /// The key of sub-task ids (`ids.rs`): the server's secret under a label of its own,
    /// so that ids hold across restarts and processes, and tell nothing without it.
    pub(crate) fn sub_task_key(&self) -> Result<&ids::SubTaskKey, StoreError> {
        if let Some(key) = self.sub_task_key.get() {
            return Ok(key);
        }
        let key = ids::SubTaskKey::derive(self.state_key()?);
        Ok(self.sub_task_key.get_or_init(|| key))
    }
}

fn ms(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
