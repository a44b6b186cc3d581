//! What the registry does for the process and its operators beside journalling: leases,
//! takeover candidates, cancel requests, answers, and purging finished runs.

use std::time::Duration;

use serde_json::Value;

use super::lease_owner::owner_is_gone;
use super::registry::Registry;
use crate::clock;
use crate::engine::journal::ANSWER_AUDIT;
use crate::engine::question::{Answerer, Question, Refusal, Reply, Verdict};
use crate::store::{AuditOutcome, StoreError};
use crate::todos::Origin;

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
        self.store().renew_leases(self.owner(), self.lease_ms())
    }

    /// Unfinished runs started over MCP whose lease expired (by the database's clock) or
    /// whose owner is gone.
    pub fn orphans(&self) -> Result<Vec<String>, StoreError> {
        let runs = self.store().unfinished_runs("mcp", self.owner())?;
        Ok(runs
            .into_iter()
            .filter(|(_, owner, expired)| match owner {
                None => true,
                Some(owner) => *expired || owner_is_gone(owner),
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
    /// returns its key. The answer is given in the shape its node takes; an answer to an
    /// `input` must fit its form, or nothing is recorded. The run goes on wherever it is
    /// driven.
    pub fn answer_question(
        &self,
        run_id: &str,
        node: &str,
        instance: Option<usize>,
        answer: &Value,
    ) -> Result<String, AnswerError> {
        let open = self
            .open_questions(run_id)?
            .into_iter()
            .rev()
            .find(|q| q.node_id == node && q.instance == instance);
        let question = open.ok_or_else(|| AnswerError::NoQuestion {
            run_id: run_id.to_owned(),
            node: node.to_owned(),
        })?;
        self.reply(run_id, &question, Ok(answer))?;
        Ok(question.key)
    }

    /// The questions of a run that wait for an answer, in the order they were asked.
    pub fn open_questions(&self, run_id: &str) -> Result<Vec<OpenQuestion>, AnswerError> {
        if self.store().lease_owner(run_id)?.is_none() {
            return Err(AnswerError::NoRun(run_id.to_owned()));
        }
        let questions = self.store().questions(run_id)?;
        questions
            .into_iter()
            .filter(|q| q.answer.is_none())
            .map(|q| {
                let request = serde_json::from_str(&q.request).map_err(|error| {
                    AnswerError::Storage(format!(
                        "question {} of run {run_id} cannot be read: {error}",
                        q.key
                    ))
                })?;
                Ok(OpenQuestion {
                    node_id: q.node_id.unwrap_or_default(),
                    node: q.node,
                    instance: usize::try_from(q.instance).ok(),
                    key: q.key,
                    request,
                })
            })
            .collect()
    }

    /// Answers one open question with an answer in the shape its node takes, or records
    /// its refusal: [`Registry::reply_from`] the answerer the question is written for.
    pub fn reply(
        &self,
        run_id: &str,
        question: &OpenQuestion,
        reply: Result<&Value, Refusal>,
    ) -> Result<(), AnswerError> {
        let answerer = question.request.written_for();
        self.reply_from(run_id, question, answerer, reply)
    }

    /// Answers one open question with `answerer`'s reply, or records its refusal. An
    /// answer that does not fit the form `answerer` was shown is refused with its
    /// problems, and the question asked again under a new key, or after
    /// [`ASKED_AT_MOST`](super::ASKED_AT_MOST) askings, refused for good; every reply is audited.
    pub fn reply_from(
        &self,
        run_id: &str,
        question: &OpenQuestion,
        answerer: Answerer,
        reply: Result<&Value, Refusal>,
    ) -> Result<(), AnswerError> {
        let (_, asked) = asking(&question.key);
        let taken = match reply {
            Ok(answer) => match question.request.judge(answerer, answer, asked) {
                Verdict::Take(taken) => Ok(taken),
                Verdict::AskAgain(problems) => {
                    self.misfit(run_id, question, answer, true)?;
                    return Err(AnswerError::Invalid { problems });
                }
                Verdict::GiveUp(problems) => {
                    self.misfit(run_id, question, answer, false)?;
                    return Err(AnswerError::Invalid { problems });
                }
            },
            Err(refusal) => Err(refusal),
        };
        let text = match &taken {
            Ok(answer) => Ok(serde_json::to_string(answer).expect("a JSON value serialises")),
            Err(refusal) => Err(refusal.as_str()),
        };
        let instance = question.instance.map_or(-1, |k| k as i64);
        if !self.store().answer(
            run_id,
            question.node,
            instance,
            &question.key,
            text.as_deref().map_err(|r| *r),
        )? {
            return Err(AnswerError::NoQuestion {
                run_id: run_id.to_owned(),
                node: question.node_id.clone(),
            });
        }
        let audited = match &taken {
            Ok(answer) => Reply::Answer(answer),
            Err(refusal) => Reply::Refused(*refusal),
        };
        self.audit_reply(run_id, question, audited, AuditOutcome::Ok);
        self.answers_changed();
        Ok(())
    }

    /// After an answer that does not fit, audited as rejected: the question `again` under
    /// a new key, or else refused for good, which fails its node.
    fn misfit(
        &self,
        run_id: &str,
        question: &OpenQuestion,
        answer: &Value,
        again: bool,
    ) -> Result<(), AnswerError> {
        let audited = Reply::Answer(answer);
        self.audit_reply(run_id, question, audited, AuditOutcome::Rejected);
        let instance = question.instance.map_or(-1, |k| k as i64);
        let (base, asked) = asking(&question.key);
        if again {
            let new_key = format!("{base}.r{}", asked + 1);
            self.store()
                .reask(run_id, question.node, instance, &question.key, &new_key)?;
        } else {
            let refusal = Err(Refusal::Invalid.as_str());
            self.store()
                .answer(run_id, question.node, instance, &question.key, refusal)?;
        }
        self.answers_changed();
        Ok(())
    }

    /// Writes a reply to a question to the audit log, under the name [`ANSWER_AUDIT`].
    fn audit_reply(
        &self,
        run_id: &str,
        question: &OpenQuestion,
        reply: Reply<'_>,
        outcome: AuditOutcome,
    ) {
        let request = &question.request;
        let args = request.audit_args(&question.key, question.instance, reply);
        // Only the run's owner reaches its questions where callers are told apart.
        let owner = self.store().run_owner(run_id).ok().flatten();
        let origin = Origin {
            run_id: Some(run_id),
            node_id: Some(&question.node_id),
            principal: owner.as_ref().and_then(|o| o.principal.as_deref()),
        };
        self.tools().audit(ANSWER_AUDIT, &args, outcome, origin);
    }
}

/// A question's key as first asked, and how many times it has been asked: `attempt-1` is
/// the first asking, `attempt-1.r2` the second.
pub fn asking(key: &str) -> (&str, u32) {
    match key.rsplit_once(".r") {
        Some((base, n)) => match n.parse::<u32>() {
            Ok(n) => (base, n),
            Err(_) => (key, 1),
        },
        None => (key, 1),
    }
}

/// A question that waits for its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenQuestion {
    pub node_id: String,
    /// The node's index in the plan.
    pub node: i64,
    pub instance: Option<usize>,
    /// Unique among the unit's questions, for the unit's lifetime.
    pub key: String,
    pub request: Question,
}
