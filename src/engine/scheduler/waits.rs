//! Attempts that wait: a `wait`, and the questions of `input` and `sample` nodes, put to
//! whoever answers the run (parked in the journal, its caller, or nobody), each answer
//! audited. A `command` node's attempt waits too (`commands.rs`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Run;
use super::units::{Woken, contained_async, left_until, millis};
use crate::clock;
use crate::engine::actions::{self, BoxFuture, Resolved};
use crate::engine::attempt::{Outcome, timed_out, with_timeout};
use crate::engine::journal::{ANSWER_AUDIT, Answers};
use crate::engine::question::{Question, Reply};
use crate::engine::report::NodeError;
use crate::telemetry::metrics;
use crate::todos::AuditOutcome;

impl Run {
    /// An attempt of an action that waits (`wait`, `input`, `sample`, `workflow`), after
    /// `first_wait`.
    pub(super) fn waiting_attempt(
        &mut self,
        node: usize,
        instance: Option<usize>,
        action: Resolved,
        first_wait: Duration,
    ) -> BoxFuture<Woken> {
        if let Resolved::Command { .. } | Resolved::CommandResumed { .. } = action {
            return self.command_attempt(node, instance, action, first_wait);
        }
        self.trace_attempt(node, instance, first_wait);
        let number = self.state.unit(node, instance).attempts + 1;
        let timeout = self.plan.nodes[node].timeout;
        let stop = self.unit_token(node, instance);
        let attempt: BoxFuture<Result<Value, NodeError>> = match &action {
            &Resolved::Wait(duration) => {
                let stored = self.state.unit(node, instance).deadline_ms;
                let (first_wait, left) = match stored {
                    // Resumed: only what is left of the stored deadline, the wait's own
                    // part last (it may resume before the wait began, in its first wait).
                    Some(at) => {
                        let left = left_until(at);
                        (left.saturating_sub(duration), left.min(duration))
                    }
                    None => {
                        let at = clock::now_ms() + millis(first_wait + duration);
                        self.state.unit_mut(node, instance).deadline_ms = Some(at);
                        (first_wait, duration)
                    }
                };
                // A wait longer than its attempt's timeout times out `limit` into the wait,
                // whenever the run resumes: the time its process was down counts against
                // the timeout as it counts against the wait. A wait no longer than its
                // timeout cannot time out.
                let (sleep, end) = match timeout {
                    Some(limit) if limit < duration => {
                        (limit.saturating_sub(duration - left), Err(timed_out(limit)))
                    }
                    _ => (left, Ok(Value::Null)),
                };
                Box::pin(async move {
                    tokio::time::sleep(first_wait + sleep).await;
                    end
                })
            }
            // The child's own wait handles the node's timeout: it cancels the child then.
            Resolved::Workflow { name, inputs } => {
                let at = (node, instance);
                self.child_attempt(at, number, name.clone(), inputs.clone(), first_wait)
            }
            question => {
                let asked = self.ask(node, instance, number, question.clone());
                Box::pin(async move {
                    tokio::time::sleep(first_wait).await;
                    with_timeout(timeout, asked).await
                })
            }
        };
        let attempt = contained_async(attempt);
        Box::pin(async move {
            let outcome = tokio::select! {
                biased;
                _ = stop.cancelled() => Outcome::Cancelled,
                result = attempt => result.into(),
            };
            Woken::attempted(node, instance, outcome, action)
        })
    }

    /// Puts an `input` or `sample` question (or a resumed command's) to whoever answers
    /// this run's questions, recording it under a key that attempt `number` of this unit
    /// always gets.
    pub(super) fn ask(
        &mut self,
        node: usize,
        instance: Option<usize>,
        number: u32,
        question: Resolved,
    ) -> BoxFuture<Result<Value, NodeError>> {
        let answers = match (self.answers, &self.env.interaction, &self.journal) {
            (Answers::Caller, Some(_), _) => Answers::Caller,
            (Answers::Parked, _, Some(_)) => Answers::Parked,
            _ => Answers::Nobody,
        };
        if answers == Answers::Nobody {
            // A question recorded before a restart, whose asker is gone: nobody waits on it.
            if self.state.unit(node, instance).asking.is_some() {
                self.state.unit_mut(node, instance).asking = None;
            }
            let result = actions::unanswered(&question);
            return Box::pin(async move { result });
        }
        let key = crate::engine::question::first_asking(number);
        let request = Question::of(&question).expect("only questions are asked");
        self.state.ask(node, instance, key.clone(), request);
        self.state.unit_mut(node, instance).asking = Some(key.clone());
        self.state.asking += 1;
        self.trace_question(node, instance, &key, &question);
        let asked = match answers {
            Answers::Parked => {
                let journal = self.journal.as_ref().expect("checked above");
                journal.answer(&self.run_id, &self.plan.nodes[node].id, instance, &key)
            }
            _ => {
                let env = Arc::clone(&self.env);
                // The audit rows of the replies the caller gave, for the settling of the unit.
                let replies = Arc::new(parking_lot::Mutex::new(Vec::new()));
                self.replies.insert((node, instance), Arc::clone(&replies));
                let asking = actions::Asking { key, instance };
                Box::pin(async move {
                    let asked = actions::ask(&env, &question, asking).await;
                    *replies.lock() = asked.replies;
                    asked.result
                })
            }
        };
        if !metrics::on() {
            return asked;
        }
        // Counted while it waits: until answered, or until its attempt is dropped.
        let waiting = metrics::QuestionWaiting::start();
        Box::pin(async move {
            let _waiting = waiting;
            asked.await
        })
    }

    /// Writes the caller's reply to `question` to the audit log, under [`ANSWER_AUDIT`]:
    /// the answer, or why there is none. In a recorded run the row commits with the
    /// answer's record, in the run's next batch.
    pub(super) fn audit_answer(
        &mut self,
        node: usize,
        instance: Option<usize>,
        question: &Question,
        key: &str,
        result: &Result<Value, NodeError>,
    ) {
        let (reply, outcome) = match result {
            Ok(answer) => (Reply::Answer(answer), AuditOutcome::Ok),
            Err(error) => (Reply::Failed(&error.message), AuditOutcome::Error),
        };
        let args = question.audit_args(key, instance, reply);
        self.audit(node, ANSWER_AUDIT, args, outcome);
    }
}
