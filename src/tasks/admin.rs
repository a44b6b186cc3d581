//! What the registry does for the process and its operators beside journalling: leases,
//! takeover candidates, cancel requests, answers, and purging finished runs.

use std::time::Duration;

use serde_json::Value;

use super::registry::{Registry, owner_is_gone};
use crate::clock;
use crate::engine::form;
use crate::store::StoreError;

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error("no run with id {0}")]
    NoRun(String),
    #[error("node `{node}` of run {run_id} has no open question")]
    NoQuestion { run_id: String, node: String },
    #[error("the answer does not fit the question's form: {}", .problems.join("; "))]
    Invalid { problems: Vec<String> },
    #[error("storage failure: {0}")]
    Storage(String),
}

impl From<StoreError> for AnswerError {
    fn from(error: StoreError) -> AnswerError {
        AnswerError::Storage(error.to_string())
    }
}

impl Registry {
    /// Extends the leases this process holds; returns the runs whose cancel was asked for
    /// by another process.
    pub fn renew(&self) -> Result<Vec<String>, StoreError> {
        let until = clock::now_ms() + self.config().lease.as_millis() as i64;
        self.store().renew_leases(self.owner(), until)
    }

    /// Unfinished runs started over MCP whose lease expired or whose owner is gone.
    pub fn orphans(&self) -> Result<Vec<String>, StoreError> {
        let now = clock::now_ms();
        let runs = self.store().unfinished_runs("mcp", self.owner())?;
        Ok(runs
            .into_iter()
            .filter(|(_, owner, expires)| match owner {
                None => true,
                Some(owner) => expires.is_none_or(|at| at < now) || owner_is_gone(owner),
            })
            .map(|(id, _, _)| id)
            .collect())
    }

    /// Asks whoever drives the run to cancel it; false if the run is not unfinished.
    pub fn request_cancel(&self, run_id: &str) -> Result<bool, StoreError> {
        self.store().request_cancel(run_id)
    }

    /// Gives up every lease this process holds, so that another may take the runs now.
    pub fn release_all(&self) {
        match self.store().release_leases(self.owner()) {
            Ok(0) => {}
            Ok(count) => tracing::info!(count, "released the leases of unfinished runs"),
            Err(error) => tracing::warn!(%error, "could not release leases"),
        }
    }

    /// Deletes finished runs, with their tasks, whose TTL has run out.
    pub fn purge_expired(&self) -> Result<usize, StoreError> {
        let now = clock::now_ms();
        self.store().purge_runs(now, now, false)
    }

    /// Deletes runs that finished more than `older_than` ago, whatever their TTL.
    pub fn purge(&self, older_than: Duration) -> Result<usize, StoreError> {
        let now = clock::now_ms();
        let before = now - i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX);
        self.store().purge_runs(before, now, true)
    }

    /// Answers the open question of a node (or of one `for_each` instance) of a run, and
    /// returns its key. An answer to an `input` must fit its form, or nothing is recorded.
    /// The run goes on wherever it is driven.
    pub fn answer_question(
        &self,
        run_id: &str,
        node: &str,
        instance: Option<usize>,
        answer: &Value,
    ) -> Result<String, AnswerError> {
        if self.store().lease_owner(run_id)?.is_none() {
            return Err(AnswerError::NoRun(run_id.to_owned()));
        }
        let instance = instance.map_or(-1, |k| k as i64);
        let open = self.store().questions(run_id)?.into_iter().rev().find(|q| {
            q.node_id.as_deref() == Some(node) && q.instance == instance && q.answer.is_none()
        });
        let no_question = || AnswerError::NoQuestion {
            run_id: run_id.to_owned(),
            node: node.to_owned(),
        };
        let question = open.ok_or_else(no_question)?;
        let request: Value = serde_json::from_str(&question.request).unwrap_or_default();
        if request["kind"] == "input" {
            let problems = form::answer_problems(&request["schema"], answer);
            if !problems.is_empty() {
                return Err(AnswerError::Invalid { problems });
            }
        }
        let text = serde_json::to_string(answer).expect("a JSON value serialises");
        if !self.store().answer(
            run_id,
            question.node,
            question.instance,
            &question.key,
            &text,
        )? {
            return Err(no_question());
        }
        self.answers_changed();
        Ok(question.key)
    }
}
