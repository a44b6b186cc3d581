//! Writing a run's changes to its journal: at the points where the run would otherwise
//! wait, with the tool calls that carry them, at least every 100 ms of a run that never
//! waits, and once at the end.

use super::{Run, Stop};
use crate::engine::journal::{JournalError, RunBatch, RunEnd};

impl Run {
    /// The changes not yet committed, with the run's progress (and its end, when given).
    pub(super) fn batch<'a>(&'a self, end: Option<RunEnd<'a>>) -> RunBatch<'a> {
        let (units, questions, answers) = self.state.changes(&self.plan);
        RunBatch {
            run_id: &self.run_id,
            units,
            questions,
            answers,
            progress: self.state.progress(&self.plan),
            end,
            audits: &self.audits,
        }
    }

    /// Commits what changed since the last commit. Cheap when nothing did.
    pub(super) fn flush(&mut self) {
        let Some(journal) = &self.journal else {
            return;
        };
        if !self.state.has_changes() && self.audits.is_empty() {
            return;
        }
        let committed = journal.commit(&self.batch(None));
        match committed {
            Ok(()) => self.committed(),
            Err(error) => self.lose(error),
        }
    }

    /// Forgets the changes the journal just committed.
    pub(super) fn committed(&mut self) {
        self.state.clear_changes();
        self.audits.clear();
        self.committed_at = std::time::Instant::now();
    }

    /// The journal refused a write: this drive stops and writes nothing more of the run.
    /// What was committed stays, so the run can go on elsewhere, or here again once the
    /// journal answers (unless another process holds its lease now).
    pub(super) fn lose(&mut self, error: JournalError) {
        tracing::error!(run_id = %self.run_id, %error, "the run's state cannot be saved; this process stops driving it");
        self.journal = None;
        let why = match error {
            JournalError::LeaseLost(_) => "run taken over by another process".to_owned(),
            other => {
                self.unsaved = true;
                format!("run state could not be saved: {other}")
            }
        };
        self.halt(Stop::Lost(why));
    }
}
