//! The run's trace (`telemetry/runs.rs`), told of each attempt as it starts and as it is
//! settled, of each question put, and of the drive's end.
//!
//! Every hook tests `self.trace` inline and does its work out of line: a run that is not
//! traced (the engine has no tracer, or the run is a direct call of a todo tool) pays
//! that test and nothing else, no formatting and no allocation.

use std::time::{Duration, SystemTime};

use super::units::left_until;
use super::{Run, Stop};
use crate::engine::actions::Resolved;
use crate::engine::question::Question;
use crate::engine::report::{NodeError, NodeStatus, RunStatus};
use crate::telemetry::runs::{Attempt, AttemptEnd, DriveEnd, Next, Outcome, TraceFrom};
use crate::todos::ErrorCode;

impl Run {
    /// An attempt of the unit starts, once `wait` (a retry's backoff) is over.
    #[inline]
    pub(super) fn trace_attempt(&mut self, node: usize, instance: Option<usize>, wait: Duration) {
        if self.trace.is_some() {
            self.trace_attempt_now(node, instance, wait);
        }
    }

    #[cold]
    #[inline(never)]
    fn trace_attempt_now(&mut self, node: usize, instance: Option<usize>, wait: Duration) {
        let Some(trace) = self.trace.as_deref_mut() else {
            return;
        };
        let unit = self.state.unit(node, instance);
        let planned = &self.plan.nodes[node];
        let iteration = (planned.repeat.as_ref()).map(|_| unit.iterations.len() as u32 + 1);
        let attempt = Attempt {
            node: &planned.id,
            number: unit.attempts + 1,
            instance,
            iteration,
            at: SystemTime::now() + wait,
        };
        trace.attempt((node, instance), attempt);
    }

    /// The unit's attempt asks `question` under `key`, and waits for its answer.
    #[inline]
    pub(super) fn trace_question(
        &mut self,
        node: usize,
        instance: Option<usize>,
        key: &str,
        question: &Resolved,
    ) {
        if let Some(trace) = self.trace.as_deref_mut() {
            let kind = match question {
                Resolved::CommandResumed { .. } => "command",
                other => match Question::of(other) {
                    Some(Question::Sample { .. }) => "sample",
                    _ => "input",
                },
            };
            trace.question((node, instance), &self.plan.nodes[node].id, key, kind);
        }
    }

    /// The unit's attempt was settled: the record says how it ended and what follows.
    #[inline]
    pub(super) fn trace_settled(&mut self, node: usize, instance: Option<usize>) {
        if self.trace.is_some() {
            self.trace_settled_now(node, instance);
        }
    }

    #[cold]
    #[inline(never)]
    fn trace_settled_now(&mut self, node: usize, instance: Option<usize>) {
        let Some(trace) = self.trace.as_deref_mut() else {
            return;
        };
        let unit = self.state.unit(node, instance);
        let (outcome, next) = match unit.status {
            NodeStatus::Succeeded => (Outcome::Ok, Next::Nothing),
            NodeStatus::Running if unit.between_iterations() => {
                let delay = unit.next_attempt_ms.map(left_until).unwrap_or_default();
                (Outcome::Ok, Next::Repeat(delay))
            }
            NodeStatus::Running => {
                let delay = unit.next_attempt_ms.map(left_until).unwrap_or_default();
                (failure(unit.error.as_ref()), Next::Retry(delay))
            }
            NodeStatus::Cancelled => (Outcome::Cancelled, Next::Nothing),
            _ => (failure(unit.error.as_ref()), Next::Nothing),
        };
        let error = match outcome {
            Outcome::Failed | Outcome::TimedOut => unit.error.as_ref().map(described),
            _ => None,
        };
        let end = AttemptEnd {
            outcome,
            error,
            next,
        };
        trace.attempt_ended((node, instance), end);
    }

    /// The unit ended without its attempt settling: cancelled, or failed before any
    /// attempt could be made (its action could not be resolved), which is then shown as
    /// an attempt that failed at once.
    #[inline]
    pub(super) fn trace_ended(&mut self, node: usize, instance: Option<usize>) {
        if self.trace.is_some() {
            self.trace_ended_now(node, instance);
        }
    }

    #[cold]
    #[inline(never)]
    fn trace_ended_now(&mut self, node: usize, instance: Option<usize>) {
        let failed = self.state.unit(node, instance).status == NodeStatus::Failed;
        let open = (self.trace.as_deref()).is_some_and(|trace| trace.is_open((node, instance)));
        if failed && !open {
            self.trace_attempt_now(node, instance, Duration::ZERO);
        }
        let lost = matches!(self.stop, Some(Stop::Lost(_)));
        let Some(trace) = self.trace.as_deref_mut() else {
            return;
        };
        let unit = self.state.unit(node, instance);
        let (outcome, error) = match unit.status {
            NodeStatus::Failed => (
                failure(unit.error.as_ref()),
                unit.error.as_ref().map(described),
            ),
            _ if lost => (Outcome::Abandoned, None),
            _ => (Outcome::Cancelled, None),
        };
        let end = AttemptEnd {
            outcome,
            error,
            next: Next::Nothing,
        };
        trace.attempt_ended((node, instance), end);
    }

    /// The unit's attempt got its answer, and what follows is a new attempt (a resumed
    /// command's person said to run it again).
    pub(super) fn trace_answered(&mut self, node: usize, instance: Option<usize>) {
        if let Some(trace) = self.trace.as_deref_mut() {
            let end = AttemptEnd {
                outcome: Outcome::Ok,
                error: None,
                next: Next::Nothing,
            };
            trace.attempt_ended((node, instance), end);
        }
    }

    /// Where the child run that the unit's attempt starts hangs in the trace: under the
    /// attempt's span.
    pub(super) fn trace_child(&self, node: usize, instance: Option<usize>) -> TraceFrom {
        let attempt = (self.trace.as_deref()).and_then(|t| t.attempt_context((node, instance)));
        attempt.map_or(TraceFrom::Nothing, TraceFrom::Parent)
    }

    /// This process's drive of the run ended: with the run (its status and error), or
    /// given up to another process or to a later pick-up.
    pub(super) fn trace_finished(&mut self, status: RunStatus, error: Option<&str>) {
        let Some(trace) = self.trace.take() else {
            return;
        };
        let kind = match &self.stop {
            Some(Stop::Lost(_)) => return trace.finish(DriveEnd::GivenUp),
            None => "output_error",
            Some(Stop::NodeFailed(_)) => "node_failed",
            Some(Stop::TimedOut) => "timeout",
            Some(Stop::Poisoned(_)) => "run_poisoned",
            Some(Stop::Cancelled) => "cancelled",
        };
        let error = match status {
            RunStatus::Failed => error.map(|message| (kind, message)),
            _ => None,
        };
        let status = status.as_str();
        trace.finish(DriveEnd::Finished { status, error });
    }
}

/// How an attempt that ended with `error` failed: it ran out of time, or failed.
fn failure(error: Option<&NodeError>) -> Outcome {
    match error {
        Some(error) if error.code == ErrorCode::Timeout => Outcome::TimedOut,
        _ => Outcome::Failed,
    }
}

/// An error as a span says it: its code (the span's `error.type`) and its message.
fn described(error: &NodeError) -> (&str, &str) {
    (error.code.as_str(), error.message.as_str())
}
