//! What the registry does for the process and its operators beside journalling: cancel
//! requests, answers, and purging finished runs.

use std::time::Duration;

use serde_json::Value;

use super::registry::Registry;
use crate::clock;
use crate::engine::journal::ANSWER_AUDIT;
use crate::engine::question::{Answerer, Decision, Question, Refusal};
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
    /// Asks whoever drives the run to cancel it; false if the run is not unfinished.
    pub fn request_cancel(&self, run_id: &str) -> Result<bool, StoreError> {
        self.store().request_cancel(run_id)
    }

    /// Deletes finished runs, with their tasks, whose TTL has run out.
    pub fn purge_expired(&self) -> Result<usize, StoreError> {
        let now = clock::now_ms();
        self.store().purge_runs(now, now, false)
    }

    /// Deletes the history of finished runs (what `history` nodes read) whose own TTL,
    /// `history_ttl`, has run out. The history outlives the runs it tells of.
    pub fn purge_expired_history(&self) -> Result<usize, StoreError> {
        let ttl = super::registry::ms(self.config().history_ttl);
        self.store()
            .purge_history(clock::now_ms().saturating_sub(ttl))
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

    /// The questions of a run that wait for an answer, in the order they were asked, then
    /// those of the unfinished runs below it (its `workflow` nodes' children, theirs, and
    /// so on), each named with the path of nodes that leads to it. A run that ended waits
    /// for nothing: a question it left unanswered (cancelled, or timed out) takes no answer.
    pub fn open_questions(&self, run_id: &str) -> Result<Vec<OpenQuestion>, AnswerError> {
        let Some(run) = self.store().run_poll(run_id)? else {
            return Err(AnswerError::NoRun(run_id.to_owned()));
        };
        if run.status != "running" {
            return Ok(Vec::new());
        }
        let mut open = self.open_questions_of(run_id, String::new())?;
        let mut paths = std::collections::HashMap::from([(run_id.to_owned(), String::new())]);
        for child in self.store().runs_below(run_id, true)? {
            let Some(above) = paths.get(&child.parent_id) else {
                continue;
            };
            let path = match child.parent_instance {
                Some(k) => format!("{above}{}#{k}>", child.parent_node),
                None => format!("{above}{}>", child.parent_node),
            };
            open.extend(self.open_questions_of(&child.id, path.clone())?);
            paths.insert(child.id, path);
        }
        Ok(open)
    }

    /// The open questions of run `run_id` alone, each named as `path` says.
    fn open_questions_of(
        &self,
        run_id: &str,
        path: String,
    ) -> Result<Vec<OpenQuestion>, AnswerError> {
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
                    run_id: run_id.to_owned(),
                    path: path.clone(),
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
        // The question knows the run that asks it: the run asked about, or one below it.
        let run_id = match question.run_id.is_empty() {
            true => run_id,
            false => question.run_id.as_str(),
        };
        let judged = (question.request).decide(&question.key, question.instance, answerer, reply);
        self.audit_reply(run_id, question, judged.audit, judged.outcome);
        let instance = question.instance.map_or(-1, |k| k as i64);
        let recorded = match judged.decision {
            Decision::Take(answer) => {
                let text = serde_json::to_string(&answer).expect("a JSON value serialises");
                (self.store()).answer(run_id, question.node, instance, &question.key, Ok(&text))?
            }
            Decision::Refuse(refusal) => {
                let refusal = Err(refusal.as_str());
                (self.store()).answer(run_id, question.node, instance, &question.key, refusal)?
            }
            Decision::AskAgain { problems, next_key } => {
                (self.store()).reask(run_id, question.node, instance, &question.key, &next_key)?;
                self.answers_changed();
                return Err(AnswerError::Invalid { problems });
            }
            Decision::GiveUp(problems) => {
                let refusal = Err(Refusal::Invalid.as_str());
                (self.store()).answer(run_id, question.node, instance, &question.key, refusal)?;
                self.answers_changed();
                return Err(AnswerError::Invalid { problems });
            }
        };
        if !recorded {
            return Err(AnswerError::NoQuestion {
                run_id: run_id.to_owned(),
                node: question.node_id.clone(),
            });
        }
        self.answers_changed();
        Ok(())
    }

    /// Writes a reply to a question to the audit log, under the name [`ANSWER_AUDIT`],
    /// for the run's owner.
    fn audit_reply(
        &self,
        run_id: &str,
        question: &OpenQuestion,
        args: serde_json::Map<String, Value>,
        outcome: AuditOutcome,
    ) {
        // Only the run's owner reaches its questions where callers are told apart.
        let owner = self.store().run_owner(run_id).ok().flatten();
        let origin = Origin {
            run_id: Some(run_id),
            node_id: Some(&question.node_id),
            principal: owner.as_ref().and_then(|o| o.principal.as_deref()),
        };
        self.todo_tools()
            .audit(ANSWER_AUDIT, &args, outcome, origin);
    }
}

/// A question that waits for its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenQuestion {
    /// The run that asks it: the run asked about, or a run below it.
    pub run_id: String,
    /// The nodes that lead from the run asked about to the one that asks, each with `>`
    /// after it (`check>` , `each#2>inner>`); empty for the run's own questions.
    pub path: String,
    pub node_id: String,
    /// The node's index in the plan.
    pub node: i64,
    pub instance: Option<usize>,
    /// Unique among the unit's questions, for the unit's lifetime.
    pub key: String,
    pub request: Question,
}
