//! `command` nodes: the operator's command looked up and its argv built when its attempt
//! starts, the start committed before the program is spawned, the program run in its
//! sandbox until it ends, times out or is cancelled (its process group killed then, and
//! when the attempt is dropped), and each run or refusal audited.
//!
//! A command is run at least once. A run resumed with a command marked started and never
//! settled does what its `on_resume` says: asks the person whether it completed (the
//! default), runs it again, or fails the node.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use serde_json::{Map, Value};

use super::Run;
use super::units::{UnitWake, Woken};
use crate::engine::actions::{BoxFuture, Resolved};
use crate::engine::attempt::{Outcome, with_timeout};
use crate::engine::command::node::{self, Answer, COMMAND_AUDIT, Resumed};
use crate::engine::report::{NodeError, NodeErrorKind};
use crate::todos::AuditOutcome;

/// The audit row of a unit's command run, filled by its attempt, written as it settles.
pub(super) type RanRow = Arc<parking_lot::Mutex<Option<(Map<String, Value>, AuditOutcome)>>>;

impl Run {
    /// An attempt of a `command` node after `first_wait`: its command run, refused, or
    /// (resumed after a crash in the middle of it) what its `on_resume` says.
    pub(super) fn command_attempt(
        &mut self,
        node: usize,
        instance: Option<usize>,
        action: Resolved,
        first_wait: Duration,
    ) -> BoxFuture<Woken> {
        if !first_wait.is_zero() {
            // Nothing is marked started until the wait is over: a crash in a retry's
            // backoff has run nothing.
            return self.due_after(node, instance, action, first_wait);
        }
        self.trace_attempt(node, instance, Duration::ZERO);
        let command = match action {
            Resolved::CommandResumed { command, .. } => *command,
            command => command,
        };
        let Resolved::Command { name, args } = &command else {
            unreachable!("only commands are attempted here")
        };
        let commands = &self.env.commands;
        let spec = match commands.get(name) {
            Some(spec) => spec,
            None => {
                let error = node::not_allowed(name, commands.path());
                return self.command_refused(node, instance, command, None, error);
            }
        };
        if let Some(lack) = commands.runner().confinement().lacks(&spec)
            && !spec.unconfined
        {
            let error = node::unconfinable(name, &lack);
            return self.command_refused(node, instance, command, None, error);
        }
        let argv = match spec.argv(args) {
            Ok(argv) => argv,
            Err(problems) => {
                let error = node::refused_args(name, &problems);
                return self.command_refused(node, instance, command, None, error);
            }
        };
        let unit = self.state.unit(node, instance);
        if node::started(unit.intent.as_deref()) {
            match node::resumed(&spec, &argv) {
                Resumed::Rerun => {
                    tracing::info!(run_id = %self.run_id, node = %self.plan.nodes[node].id, command = %name,
                        "the command was cut off by the end of the process that ran it; its on_resume runs it again");
                }
                Resumed::Fail(error) => {
                    return self.command_refused(node, instance, command, Some(&argv), error);
                }
                Resumed::Ask(question) => {
                    let asking = Resolved::CommandResumed {
                        question,
                        command: Box::new(command),
                    };
                    return self.ask_resumed(node, instance, asking);
                }
            }
        }
        // The start is committed before the program is spawned: a crash from here on
        // leaves the mark that makes the resumed run do what `on_resume` says.
        self.state.unit_mut(node, instance).intent = Some(node::intent(&argv));
        self.flush();
        if self.lost() {
            return ready(Woken::Unit(UnitWake {
                node,
                instance,
                outcome: Outcome::Cancelled,
                attempted: false,
                action: None,
            }));
        }
        let mut spec = spec;
        if let Some(limit) = self.plan.nodes[node].timeout {
            // The node's own timeout bounds each attempt, the command's run among them.
            spec.timeout = spec.timeout.min(limit);
        }
        let row = RanRow::default();
        self.commands_ran.insert((node, instance), Arc::clone(&row));
        let stop = self.unit_token(node, instance);
        let env = Arc::clone(&self.env);
        Box::pin(async move {
            let runner = env.commands.runner();
            let running = runner.run(&spec, &argv, &env.workspace, stop);
            let outcome = match std::panic::AssertUnwindSafe(running).catch_unwind().await {
                Ok(Ok(ran)) => {
                    *row.lock() = Some(node::audit_row(&ran, instance));
                    match node::result(&spec, &ran) {
                        Some(result) => result.into(),
                        None => Outcome::Cancelled,
                    }
                }
                Ok(Err(error)) => {
                    let error = node::run_error(spec.name(), &error);
                    *row.lock() = Some(node::refusal_row(
                        spec.name(),
                        Some(&argv),
                        instance,
                        &error,
                    ));
                    Outcome::Failed(error)
                }
                Err(_) => {
                    tracing::error!("a command's run panicked; the node fails");
                    Outcome::Failed(NodeError::new(
                        NodeErrorKind::Panicked,
                        "the node's work panicked",
                    ))
                }
            };
            Woken::attempted(node, instance, outcome, command)
        })
    }

    /// A command refused before it ran: audited, and the attempt's failure.
    fn command_refused(
        &mut self,
        node: usize,
        instance: Option<usize>,
        command: Resolved,
        argv: Option<&crate::engine::command::Argv>,
        error: NodeError,
    ) -> BoxFuture<Woken> {
        let Resolved::Command { name, .. } = &command else {
            unreachable!("only commands are refused here")
        };
        let (args, outcome) = node::refusal_row(name, argv, instance, &error);
        self.audit(node, COMMAND_AUDIT, args, outcome);
        ready(Woken::attempted(
            node,
            instance,
            Outcome::Failed(error),
            command,
        ))
    }

    /// Asks the person whether a command cut off by the end of its process completed,
    /// under the key of this attempt, as an `input` node asks.
    fn ask_resumed(
        &mut self,
        node: usize,
        instance: Option<usize>,
        asking: Resolved,
    ) -> BoxFuture<Woken> {
        let number = self.state.unit(node, instance).attempts + 1;
        let timeout = self.plan.nodes[node].timeout;
        let stop = self.unit_token(node, instance);
        let asked = self.ask(node, instance, number, asking.clone());
        Box::pin(async move {
            let outcome = tokio::select! {
                biased;
                _ = stop.cancelled() => Outcome::Cancelled,
                result = with_timeout(timeout, asked) => result.into(),
            };
            Woken::attempted(node, instance, outcome, asking)
        })
    }

    /// Writes the audit row of the unit's command run, if its attempt left one.
    pub(super) fn audit_command_run(&mut self, node: usize, instance: Option<usize>) {
        // Every unit's settling passes here: a run without commands hashes nothing.
        if self.commands_ran.is_empty() {
            return;
        }
        let Some(row) = self.commands_ran.remove(&(node, instance)) else {
            return;
        };
        if let Some((args, outcome)) = row.lock().take() {
            self.audit(node, COMMAND_AUDIT, args, outcome);
        }
    }

    /// What the person's answer to a resumed command's question does: the node's result
    /// (it completed, or it did not), or `None` when the command runs again here, as a
    /// new attempt (so that a crash in it asks again, under that attempt's key).
    pub(super) fn command_answered(
        &mut self,
        node: usize,
        instance: Option<usize>,
        command: &Resolved,
        result: Result<Value, NodeError>,
    ) -> Option<Result<Value, NodeError>> {
        let Resolved::Command { name, .. } = command else {
            unreachable!("a resumed command's question holds its command")
        };
        let answer = match result.and_then(|answer| Answer::of(&answer)) {
            Ok(answer) => answer,
            // Never retried: a retry settles with the mark gone, and would run the command
            // again without the person's word.
            Err(error) => return Some(Err(node::unanswered(name, &error))),
        };
        match answer {
            Answer::Completed => Some(Ok(node::completed_by_person())),
            Answer::Failed => Some(Err(node::failed_by_person(name))),
            Answer::Rerun => {
                self.trace_answered(node, instance);
                let unit = self.state.unit_mut(node, instance);
                unit.attempts += 1;
                unit.asking = None;
                unit.intent = None;
                let attempt = self.command_attempt(node, instance, command.clone(), Duration::ZERO);
                self.running.push(attempt);
                None
            }
        }
    }
}

fn ready(woken: Woken) -> BoxFuture<Woken> {
    Box::pin(std::future::ready(woken))
}
