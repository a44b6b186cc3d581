//! Units at work: launching them under the concurrency limit, making their attempts, and
//! settling each outcome into the unit's record: success, a retry at a stored time, or
//! failure. Every attempt's outcome goes through [`settle_into`], and what follows from it
//! through `Run::after_settle`.

use std::time::Duration;

use serde_json::Value;

use super::Run;
use super::repeat::Judge;
use crate::clock;
use crate::engine::actions::{BoxFuture, Resolved};
use crate::engine::attempt::{Outcome, failure_event, jitter_seed, retry_delay};
use crate::engine::definition::RetryPolicy;
use crate::engine::journal::{Answers, Retried, ToolCall, UnitState};
use crate::engine::question::Question;
use crate::engine::report::{NodeError, NodeErrorKind, NodeStatus};
use crate::telemetry::metrics;
use crate::todos::{Origin, OwnedOrigin};

/// A waiting unit woke: its attempt ended, or its retry is due.
pub(super) enum Woken {
    Unit(UnitWake),
    /// A synchronous action's retry is due: attempt it now.
    Due {
        node: usize,
        instance: Option<usize>,
        action: Resolved,
    },
}

impl Woken {
    /// The end of an attempt of `action`, handed back for its retry.
    pub(super) fn attempted(
        node: usize,
        instance: Option<usize>,
        outcome: Outcome,
        action: Resolved,
    ) -> Woken {
        Woken::Unit(UnitWake {
            node,
            instance,
            outcome,
            attempted: true,
            action: Some(action),
        })
    }
}

/// How a unit's attempt (or the unit, when `attempted` is false) ended.
pub(super) struct UnitWake {
    pub node: usize,
    pub instance: Option<usize>,
    pub outcome: Outcome,
    pub attempted: bool,
    /// The action of a waiting attempt, handed back for its retry.
    pub action: Option<Resolved>,
}

/// Settles a unit's record, in place, after its attempt `number` ended with `result`:
/// succeeded, failed, or still running with its next attempt's time, when the error is one
/// a retry could cure, or when a repeating unit (`judge`) runs another iteration. `stamp`
/// records the finishing time and each failed attempt that is retried (only a journalled
/// run keeps them). The retry policy counts the attempts of the current iteration alone.
pub(super) fn settle_into(
    unit: &mut UnitState,
    number: u32,
    result: Result<Value, NodeError>,
    policy: &RetryPolicy,
    seed: impl FnOnce() -> u64,
    stamp: bool,
    judge: Option<&Judge>,
) {
    // Every node's attempt ends here: the plain case stays the short one, and the judge
    // of a repeating unit is kept out of its way.
    match judge {
        None => settle_attempt(unit, number, number, result, policy, seed, stamp),
        Some(judge) => settle_iteration(unit, number, result, policy, seed, stamp, judge),
    }
}

/// [`settle_into`] for a repeating unit: an attempt that succeeded ends an iteration,
/// which `judge` records and judges; the retry policy counts the attempts of the current
/// iteration alone.
#[inline(never)]
fn settle_iteration(
    unit: &mut UnitState,
    number: u32,
    result: Result<Value, NodeError>,
    policy: &RetryPolicy,
    seed: impl FnOnce() -> u64,
    stamp: bool,
    judge: &Judge,
) {
    let tried = number - unit.iterated_attempts();
    let result = match result {
        Ok(output) => {
            end_attempt(unit, number);
            match judge.iterate(unit, tried, output, stamp) {
                Some(result) => result,
                None => return,
            }
        }
        Err(error) => Err(error),
    };
    settle_attempt(unit, number, tried, result, policy, seed, stamp);
}

/// Clears what attempt `number` held while it ran.
fn end_attempt(unit: &mut UnitState, number: u32) {
    unit.attempts = number;
    unit.next_attempt_ms = None;
    unit.deadline_ms = None;
    unit.asking = None;
    unit.intent = None;
}

/// Settles attempt `number`, the `tried`-th of its iteration (of the unit, when it does
/// not repeat), that ended with `result`. Inlined: it is the end of every attempt, and
/// a call would cost as much as its work.
#[inline(always)]
fn settle_attempt(
    unit: &mut UnitState,
    number: u32,
    tried: u32,
    result: Result<Value, NodeError>,
    policy: &RetryPolicy,
    seed: impl FnOnce() -> u64,
    stamp: bool,
) {
    end_attempt(unit, number);
    let error = match result {
        Ok(value) => {
            unit.status = NodeStatus::Succeeded;
            unit.output = Some(value);
            unit.error = None;
            unit.finished_ms = stamp.then(clock::now_ms);
            return;
        }
        Err(error) => error,
    };
    // The seed is only worth its hash when a retry may follow.
    let retry = match error.is_retryable() {
        true => retry_delay(policy, seed(), tried),
        false => None,
    };
    match retry {
        Some(delay) => {
            let failed_ms = clock::now_ms();
            let retry_at_ms = failed_ms + millis(delay);
            if stamp {
                let started_ms = unit.retried.last().map(|r| r.retry_at_ms);
                unit.retried.push(Retried {
                    started_ms: started_ms.or(unit.started_ms),
                    failed_ms,
                    code: error.code.as_str().to_owned(),
                    message: error.message.clone(),
                    retry_at_ms,
                });
            }
            unit.next_attempt_ms = Some(retry_at_ms);
        }
        None => {
            unit.status = NodeStatus::Failed;
            unit.finished_ms = stamp.then(clock::now_ms);
        }
    }
    unit.error = Some(error);
}

/// [`settle_into`] on a copy: the record a tool call's transaction commits.
pub(super) fn settle(
    unit: &UnitState,
    number: u32,
    result: Result<Value, NodeError>,
    policy: &RetryPolicy,
    seed: impl FnOnce() -> u64,
    judge: Option<&Judge>,
) -> UnitState {
    let mut next = unit.clone();
    settle_into(&mut next, number, result, policy, seed, true, judge);
    next
}

pub(super) fn millis(delay: Duration) -> i64 {
    i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)
}

/// What is left of a stored absolute time, from now.
pub(super) fn left_until(at_ms: i64) -> Duration {
    Duration::from_millis(at_ms.saturating_sub(clock::now_ms()).max(0) as u64)
}

/// Runs an attempt's work, a panic in it made the node's `internal_error`: the node fails,
/// the run goes on by its rules, and the call that started it is answered.
pub(super) fn contained<T>(work: impl FnOnce() -> T) -> Result<T, NodeError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|_| {
        tracing::error!("a node's work panicked; the node fails");
        NodeError::new(NodeErrorKind::Panicked, "the node's work panicked")
    })
}

/// [`contained`] for an attempt that waits: a panic while its future is polled (an
/// answer's handling, a client's interaction) is the node's `internal_error`, not the end
/// of the task that drives the whole run.
pub(super) fn contained_async(
    attempt: impl Future<Output = Result<Value, NodeError>> + Send + 'static,
) -> BoxFuture<Result<Value, NodeError>> {
    use futures::FutureExt;
    Box::pin(
        std::panic::AssertUnwindSafe(attempt)
            .catch_unwind()
            .map(|caught| {
                caught.unwrap_or_else(|payload| {
                    // The runtime shuts down under the attempt: no fault of the node's,
                    // and the run is left as stored (`Engine::drive`), not failed.
                    if crate::engine::shutting_down(payload.as_ref()) {
                        std::panic::resume_unwind(payload);
                    }
                    tracing::error!("a node's waiting attempt panicked; the node fails");
                    Err(NodeError::new(
                        NodeErrorKind::Panicked,
                        "the node's work panicked",
                    ))
                })
            }),
    )
}

fn is_synchronous(action: &Resolved) -> bool {
    matches!(
        action,
        Resolved::Tool { .. }
            | Resolved::WriteFile { .. }
            | Resolved::ListDir(_)
            | Resolved::ReadFile { .. }
            | Resolved::History(_)
    )
}

impl Run {
    /// Starts queued units while the concurrency limit allows. A unit whose action needs no
    /// waiting makes its attempt right here. Returns how many units finished here, since
    /// their downstream nodes may now be ready.
    pub(super) fn launch(&mut self) -> usize {
        let mut finished = 0;
        while self.stop.is_none() && self.running.len() < self.plan.max_parallel {
            let Some((node, instance, action)) = self.unit_ready.pop_front() else {
                break;
            };
            self.begin(node, instance);
            if metrics::on() {
                metrics::attempt(self.workflow_label(), false);
            }
            match self.start_unit(node, instance, action) {
                Some(waiting) => self.running.push(waiting),
                None => finished += 1,
            }
        }
        finished
    }

    /// Marks the node, and the instance, running.
    fn begin(&mut self, node: usize, instance: Option<usize>) {
        let now = self.journal.is_some().then(clock::now_ms);
        self.state.current = Some(node);
        if self.state.status(node) == NodeStatus::Pending {
            let unit = self.state.unit_mut(node, None);
            unit.status = NodeStatus::Running;
            unit.started_ms = now;
            self.node_changed(node);
        }
        if instance.is_some() && self.state.unit(node, instance).status == NodeStatus::Pending {
            let unit = self.state.unit_mut(node, instance);
            unit.status = NodeStatus::Running;
            unit.started_ms = now;
        }
    }

    /// Makes the unit's first attempt now, or returns what it waits on.
    fn start_unit(
        &mut self,
        node: usize,
        instance: Option<usize>,
        action: Resolved,
    ) -> Option<BoxFuture<Woken>> {
        let next_at = self.state.unit(node, instance).next_attempt_ms;
        let ready = match action {
            Resolved::Text(text) => Ok(Value::String(text)),
            Resolved::Value(value) => Ok(value),
            other => Err(other),
        };
        let action = match ready {
            // Text, or a checked value, cannot fail: it becomes the output as it is.
            Ok(output) => {
                self.trace_attempt(node, instance, Duration::ZERO);
                self.settle_wake(UnitWake {
                    node,
                    instance,
                    outcome: Outcome::Succeeded(output),
                    attempted: true,
                    action: None,
                });
                return None;
            }
            Err(action) => action,
        };
        if is_synchronous(&action) {
            // A stored retry time that has not come yet is waited for first.
            if let Some(at) = next_at.filter(|&at| at > clock::now_ms()) {
                return Some(self.due_after(node, instance, action, left_until(at)));
            }
            return self.attempt_now(node, instance, action);
        }
        let first_wait = next_at.map(left_until).unwrap_or_default();
        Some(self.waiting_attempt(node, instance, action, first_wait))
    }

    /// Handles a unit that woke.
    pub(super) fn wake(&mut self, woken: Woken) {
        match woken {
            Woken::Unit(wake) => self.settle_wake(wake),
            Woken::Due {
                node,
                instance,
                action,
            } => {
                let waiting = match is_synchronous(&action) {
                    true => self.attempt_now(node, instance, action),
                    false => Some(self.waiting_attempt(node, instance, action, Duration::ZERO)),
                };
                if let Some(waiting) = waiting {
                    self.running.push(waiting);
                }
            }
        }
    }

    /// One attempt of a synchronous action (a tool call or a file), made on this task.
    /// Returns the wait for the retry it scheduled, if it did.
    fn attempt_now(
        &mut self,
        node: usize,
        instance: Option<usize>,
        action: Resolved,
    ) -> Option<BoxFuture<Woken>> {
        if self.lost() {
            // Given up here: another process drives the run, and this one writes nothing.
            return None;
        }
        self.trace_attempt(node, instance, Duration::ZERO);
        let number = self.state.unit(node, instance).attempts + 1;
        let retry = match &action {
            Resolved::Tool { .. } if self.journal.is_none() => {
                return Some(self.grouped_call(node, instance, action));
            }
            Resolved::Tool { name, args } => {
                match contained(|| self.call_tool(node, instance, number, name, args)) {
                    Ok(retry) => retry?,
                    Err(error) => self.settle_here(node, instance, number, Err(error)),
                }
            }
            Resolved::WriteFile {
                path,
                content,
                overwrite,
            } => {
                let result =
                    contained(|| self.write_file(node, instance, path, content, *overwrite))
                        .unwrap_or_else(|error| Some(Err(error)))?;
                self.settle_here(node, instance, number, result)
            }
            Resolved::ListDir(_) | Resolved::ReadFile { .. } => {
                let result =
                    contained(|| self.read(node, instance, &action)).and_then(|result| result);
                self.settle_here(node, instance, number, result)
            }
            Resolved::History(request) => {
                let result = contained(|| self.read_history(request)).and_then(|result| result);
                self.settle_here(node, instance, number, result)
            }
            _ => unreachable!("only synchronous actions are attempted now"),
        };
        retry.map(|delay| self.due_after(node, instance, action, delay))
    }

    /// A tool call of a run without a journal (a direct call of a todo tool): its effect
    /// and audit row commit in a transaction shared with the calls made meanwhile (group
    /// commit), and the unit settles once it has.
    fn grouped_call(
        &mut self,
        node: usize,
        instance: Option<usize>,
        action: Resolved,
    ) -> BoxFuture<Woken> {
        let Resolved::Tool { name, args } = &action else {
            unreachable!("only tool calls are grouped")
        };
        let origin = OwnedOrigin {
            run_id: Some(self.run_id.to_string()),
            node_id: Some(self.plan.nodes[node].id.to_string()),
            principal: self.env.principal.as_deref().map(str::to_owned),
        };
        let call = match self.env.tools.invoke_grouped(name, args.clone(), origin) {
            Some(call) => Ok(call),
            None => Err(unknown_tool(name)),
        };
        Box::pin(async move {
            let result = match call {
                Ok(call) => {
                    contained_async(async move { call.await.map_err(NodeError::from) }).await
                }
                Err(unknown) => Err(unknown),
            };
            Woken::attempted(node, instance, result.into(), action)
        })
    }

    /// A tool call. With a journal, the call's effect, its audit row and the unit's new
    /// record commit in one transaction, together with every change not yet committed.
    /// `None` if the journal refused: the run is then lost to this process.
    fn call_tool(
        &mut self,
        node: usize,
        instance: Option<usize>,
        number: u32,
        name: &str,
        args: &serde_json::Map<String, Value>,
    ) -> Option<Option<Duration>> {
        let judge = self.judge(node, instance);
        let planned = &self.plan.nodes[node];
        let origin = Origin {
            run_id: Some(&self.run_id),
            node_id: Some(&planned.id),
            principal: self.env.principal.as_deref(),
        };
        let Some(journal) = self.journal.clone() else {
            unreachable!("a run without a journal groups its tool calls")
        };
        let policy = planned.retry;
        let seed = || jitter_seed(&self.run_id, &planned.id, instance);
        let unit = self.state.unit(node, instance).clone();
        let call = ToolCall {
            name,
            args,
            origin,
            node: &planned.id,
            index: node,
            instance,
        };
        let settle_result = |result: &crate::todos::ToolResult| {
            let result = result.clone().map_err(NodeError::from);
            settle(&unit, number, result, &policy, seed, judge.as_ref())
        };
        let committed = {
            let batch = self.batch(None);
            journal.commit_tool_call(&batch, &call, &settle_result)
        };
        match committed {
            Ok((_, settled)) => {
                self.committed();
                *self.state.unit_mut_clean(node, instance) = settled;
                Some(self.after_settle(node, instance))
            }
            Err(error) => {
                self.lose(error);
                None
            }
        }
    }

    /// Settles the unit's record in place after attempt `number`, and carries out what
    /// follows. Returns the delay before the retry it schedules, if it does.
    fn settle_here(
        &mut self,
        node: usize,
        instance: Option<usize>,
        number: u32,
        result: Result<Value, NodeError>,
    ) -> Option<Duration> {
        // Every synchronous attempt ends here: an iteration of a repeating unit is settled
        // apart, so that the plain case costs what it did before nodes could repeat.
        if result.is_ok() && self.plan.nodes[node].repeat.is_some() {
            return self.settle_iteration_here(node, instance, number, result);
        }
        let stamp = self.journal.is_some();
        let (plan, run_id) = (&self.plan, &self.run_id);
        let planned = &plan.nodes[node];
        let seed = || jitter_seed(run_id, &planned.id, instance);
        let unit = self.state.unit_mut(node, instance);
        settle_attempt(unit, number, number, result, &planned.retry, seed, stamp);
        self.after_settle(node, instance)
    }

    /// [`Self::settle_here`] for an attempt of a repeating unit that succeeded: the end of
    /// an iteration, which the unit's judge records and judges.
    #[inline(never)]
    fn settle_iteration_here(
        &mut self,
        node: usize,
        instance: Option<usize>,
        number: u32,
        result: Result<Value, NodeError>,
    ) -> Option<Duration> {
        let judge = self.judge(node, instance);
        let stamp = self.journal.is_some();
        let (plan, run_id) = (&self.plan, &self.run_id);
        let planned = &plan.nodes[node];
        let seed = || jitter_seed(run_id, &planned.id, instance);
        let unit = self.state.unit_mut(node, instance);
        let policy = &planned.retry;
        settle_into(unit, number, result, policy, seed, stamp, judge.as_ref());
        self.after_settle(node, instance)
    }

    /// A wait, then a `Due` wake for the unit's next synchronous attempt (or command).
    pub(super) fn due_after(
        &mut self,
        node: usize,
        instance: Option<usize>,
        action: Resolved,
        delay: Duration,
    ) -> BoxFuture<Woken> {
        let stop = self.unit_token(node, instance);
        Box::pin(async move {
            tokio::select! {
                biased;
                _ = stop.cancelled() => Woken::Unit(UnitWake {
                    node,
                    instance,
                    outcome: Outcome::Cancelled,
                    attempted: false,
                    action: None,
                }),
                _ = tokio::time::sleep(delay) => Woken::Due { node, instance, action },
            }
        })
    }

    /// Settles a unit that woke, or whose action could not even be resolved.
    pub(super) fn settle_wake(&mut self, wake: UnitWake) {
        let UnitWake {
            node,
            instance,
            outcome,
            attempted,
            action,
        } = wake;
        if self.state.unit(node, instance).asking.is_some() {
            self.state.asking -= 1;
        }
        self.audit_command_run(node, instance);
        let result = match outcome {
            Outcome::Cancelled if self.cancelled_alone(node, instance) => {
                let reason = Some(super::cancel::CANCELLED_ALONE.to_owned());
                return self.end_unit(node, instance, NodeStatus::Cancelled, reason);
            }
            // Attempts watch a child of the caller's token, so one can report a cancel
            // before this loop has seen it: that cancel is the run's, whatever the order.
            Outcome::Cancelled => {
                self.halt(super::Stop::Cancelled);
                let reason = self.stop_reason();
                return self.end_unit(node, instance, NodeStatus::Cancelled, Some(reason));
            }
            Outcome::Succeeded(value) => Ok(value),
            Outcome::Failed(error) => Err(error),
        };
        if let (Some(key), Answers::Caller) =
            (self.state.unit(node, instance).asking.clone(), self.answers)
            && let Some(question) = action.as_ref().and_then(Question::of)
        {
            let replies = (self.replies.remove(&(node, instance)))
                .map(|replies| std::mem::take(&mut *replies.lock()))
                .unwrap_or_default();
            match replies.is_empty() {
                // Nothing the caller gave was judged: the answer (a default standing in) or
                // why there is none, under the asking's key.
                true => self.audit_answer(node, instance, &question, &key, &result),
                false => {
                    for (args, outcome) in replies {
                        self.audit(node, crate::engine::journal::ANSWER_AUDIT, args, outcome);
                    }
                }
            }
            if let Ok(answer) = &result {
                self.state.answered(node, instance, key, answer.clone());
            }
        }
        let result = match &action {
            Some(Resolved::CommandResumed { command, .. }) if attempted => {
                match self.command_answered(node, instance, command, result) {
                    Some(result) => result,
                    None => return,
                }
            }
            _ => result,
        };
        let attempts = self.state.unit(node, instance).attempts;
        let result = match (attempted, result) {
            // An action that could not be resolved is never retried.
            (false, Err(error)) => {
                let unit = self.state.unit_mut(node, instance);
                unit.error = Some(error);
                return self.end_unit(node, instance, NodeStatus::Failed, None);
            }
            (_, result) => result,
        };
        if let Some(delay) = self.settle_here(node, instance, attempts + 1, result) {
            let action = action.expect("only a waiting attempt's failure is retried here");
            let waiting = match is_synchronous(&action) {
                true => self.due_after(node, instance, action, delay),
                false => self.waiting_attempt(node, instance, action, delay),
            };
            self.running.push(waiting);
        }
    }

    /// Carries out what follows from a unit's settled record: the failure event, the
    /// unit's end, its next iteration. Returns the delay before the retry the record
    /// schedules, if it does.
    fn after_settle(&mut self, node: usize, instance: Option<usize>) -> Option<Duration> {
        self.trace_settled(node, instance);
        let unit = self.state.unit(node, instance);
        if unit.between_iterations() {
            self.next_iteration(node, instance);
            return None;
        }
        let status = unit.status;
        let retry_in = unit
            .next_attempt_ms
            .filter(|_| status == NodeStatus::Running)
            .map(left_until);
        if let (Some(observer), Some(error)) = (&self.observer, &unit.error)
            && status != NodeStatus::Succeeded
        {
            let id = &self.plan.nodes[node].id;
            observer.event(&failure_event(
                &self.run_id,
                id,
                unit.attempts,
                error,
                retry_in,
            ));
        }
        if retry_in.is_some() && metrics::on() {
            metrics::attempt(self.workflow_label(), true);
        }
        if status.is_terminal() {
            self.unit_finished(node, instance);
        }
        retry_in
    }
}

fn unknown_tool(name: &str) -> NodeError {
    NodeError::new(NodeErrorKind::Unsupported, format!("unknown tool `{name}`"))
}
