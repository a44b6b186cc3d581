//! The scheduler: one task per run that starts each node as soon as its upstream states
//! allow (no layer barriers), never more than `max_parallel` at once.
//!
//! Node attempts are futures polled by the scheduler's own task (`FuturesUnordered`), not
//! spawned tasks: a hand-off between nodes then costs no cross-thread wake-up, which on a
//! small VM is the dominant cost (tens of microseconds against well under one).

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::actions::{self, ActionEnv, BoxFuture, Resolved};
use super::attempt::{AttemptScope, Outcome, report_failure, run_attempts};
use super::observer::{Event, Observer, Progress};
use super::plan::{NodeAction, Plan};
use super::report::{
    NodeError, NodeErrorKind, NodeReport, NodeReports, NodeStatus, RunReport, RunStatus,
};
use super::{template, trigger};
use crate::tools::Origin;

/// How many units may finish synchronously before the run yields to other tasks.
const YIELD_EVERY: usize = 256;

/// Why a run stopped before every node was decided.
#[derive(Debug, Clone)]
enum Stop {
    Cancelled,
    NodeFailed(String),
    TimedOut,
}

/// One schedulable piece of work: a node, or one `for_each` instance of it.
struct UnitDone {
    node: usize,
    instance: Option<usize>,
    outcome: Outcome,
    attempts: u32,
}

/// The instances of a `for_each` node still being collected.
struct Instances {
    outputs: Vec<Option<Value>>,
    remaining: usize,
    first_error: Option<(usize, NodeError)>,
    cancelled: bool,
}

pub(super) struct Run {
    plan: Arc<Plan>,
    env: Arc<ActionEnv>,
    run_id: Arc<str>,
    inputs: Map<String, Value>,
    inputs_ctx: Option<minijinja::Value>,
    observer: Option<Arc<dyn Observer>>,
    cancel: CancellationToken,
    /// Cancelled when the run stops for any reason; running attempts watch it.
    stop_token: CancellationToken,
    stop: Option<Stop>,
    status: Vec<NodeStatus>,
    reason: Vec<Option<String>>,
    attempts: Vec<u32>,
    outputs: Vec<Option<Value>>,
    errors: Vec<Option<NodeError>>,
    waiting_on: Vec<usize>,
    instances: Vec<Option<Instances>>,
    node_ready: VecDeque<usize>,
    unit_ready: VecDeque<(usize, Option<usize>, Resolved)>,
    done: usize,
}

impl Run {
    pub(super) fn new(
        plan: Arc<Plan>,
        env: Arc<ActionEnv>,
        run_id: Arc<str>,
        inputs: Map<String, Value>,
        observer: Option<Arc<dyn Observer>>,
        cancel: CancellationToken,
    ) -> Run {
        let n = plan.nodes.len();
        Run {
            waiting_on: plan.nodes.iter().map(|node| node.upstream.len()).collect(),
            node_ready: (0..n)
                .filter(|&i| plan.nodes[i].upstream.is_empty())
                .collect(),
            stop_token: cancel.child_token(),
            plan,
            env,
            run_id,
            inputs,
            inputs_ctx: None,
            observer,
            cancel,
            stop: None,
            status: vec![NodeStatus::Pending; n],
            reason: vec![None; n],
            attempts: vec![0; n],
            outputs: vec![None; n],
            errors: vec![None; n],
            instances: (0..n).map(|_| None).collect(),
            unit_ready: VecDeque::new(),
            done: 0,
        }
    }

    fn emit(&self, event: Event<'_>) {
        if let Some(observer) = &self.observer {
            observer.event(&event);
        }
    }

    pub(super) async fn drive(mut self) -> RunReport {
        self.emit(Event::RunStarted {
            run_id: &self.run_id,
            workflow: &self.plan.name,
            total: self.plan.nodes.len(),
        });
        let deadline = self.plan.timeout.map(|t| tokio::time::Instant::now() + t);
        let mut running: FuturesUnordered<BoxFuture<UnitDone>> = FuturesUnordered::new();
        let mut since_yield = 0;
        loop {
            if self.stop.is_none() && self.cancel.is_cancelled() {
                self.halt(Stop::Cancelled);
            }
            while self.stop.is_none() {
                self.decide_ready();
                let finished = self.launch(&mut running);
                if finished == 0 {
                    break;
                }
                // Units finished synchronously; a long chain of them must not hold this
                // worker for the whole run.
                since_yield += finished;
                if since_yield >= YIELD_EVERY {
                    since_yield = 0;
                    tokio::task::yield_now().await;
                }
            }
            if running.is_empty() {
                break;
            }
            let stopped = self.stop.is_some();
            tokio::select! {
                biased;
                Some(done) = running.next() => self.finish_unit(done),
                _ = self.cancel.cancelled(), if !stopped => self.halt(Stop::Cancelled),
                _ = sleep_until(deadline), if !stopped && deadline.is_some() => self.halt(Stop::TimedOut),
            }
        }
        self.finalize()
    }

    fn halt(&mut self, stop: Stop) {
        if self.stop.is_none() {
            self.stop = Some(stop);
            self.stop_token.cancel();
        }
    }

    fn stop_reason(&self) -> String {
        match &self.stop {
            Some(Stop::Cancelled) => "run cancelled".to_owned(),
            Some(Stop::NodeFailed(node)) => format!("run failed at node `{node}`"),
            Some(Stop::TimedOut) => match self.plan.timeout {
                Some(limit) => format!(
                    "run timed out after {}",
                    super::duration::format_duration(limit)
                ),
                None => "run timed out".to_owned(),
            },
            None => "not reached".to_owned(),
        }
    }

    /// Decides every node whose upstream is complete: skip it, fail it, or queue its units.
    fn decide_ready(&mut self) {
        while self.stop.is_none() {
            let Some(node) = self.node_ready.pop_front() else {
                break;
            };
            self.decide(node);
        }
    }

    fn decide(&mut self, i: usize) {
        let plan = Arc::clone(&self.plan);
        let node = &plan.nodes[i];
        let upstream = node.upstream.iter().map(|&u| self.status[u]);
        if let Err(reason) = trigger::verdict(node.trigger, upstream) {
            return self.complete(i, NodeStatus::Skipped, Some(reason.to_owned()), None, None);
        }
        let action = match &node.action {
            NodeAction::Defined(action) => action,
            NodeAction::ToolWithRunInputs(name) => {
                // A one-node plan's only node: the inputs are its wire arguments, handed over
                // as they are (nothing else reads them: such a plan has no `output`).
                let args = std::mem::take(&mut self.inputs);
                let name = name.clone();
                return self.queue_unit(i, None, Ok(Resolved::Tool { name, args }));
            }
        };
        let ctx = match node.needs_context {
            true => self.context(i, None),
            false => minijinja::Value::UNDEFINED,
        };
        if let Some(when) = &node.when {
            match template::eval_bool(when, &ctx) {
                Ok(true) => {}
                Ok(false) => {
                    return self.complete(
                        i,
                        NodeStatus::Skipped,
                        Some("condition false".into()),
                        None,
                        None,
                    );
                }
                Err(e) => {
                    return self.fail(
                        i,
                        NodeError::new(NodeErrorKind::Template, format!("when: {e}")),
                    );
                }
            }
        }
        let Some(expr) = &node.for_each else {
            let resolved = actions::resolve(action, &ctx);
            return self.queue_unit(i, None, resolved);
        };
        let items = match template::eval(expr, &ctx) {
            Ok(Value::Array(items)) => items,
            Ok(other) => {
                let kind = json_type(&other);
                let error = format!("for_each: expected a list, got {kind}");
                return self.fail(i, NodeError::new(NodeErrorKind::Template, error));
            }
            Err(e) => {
                return self.fail(
                    i,
                    NodeError::new(NodeErrorKind::Template, format!("for_each: {e}")),
                );
            }
        };
        if items.is_empty() {
            return self.complete(
                i,
                NodeStatus::Succeeded,
                None,
                Some(Value::Array(Vec::new())),
                None,
            );
        }
        self.instances[i] = Some(Instances {
            outputs: vec![None; items.len()],
            remaining: items.len(),
            first_error: None,
            cancelled: false,
        });
        for (k, item) in items.iter().enumerate() {
            let ctx = self.context(i, Some((item, k)));
            let resolved = actions::resolve(action, &ctx);
            self.queue_unit(i, Some(k), resolved);
        }
    }

    fn queue_unit(
        &mut self,
        node: usize,
        instance: Option<usize>,
        resolved: Result<Resolved, NodeError>,
    ) {
        match resolved {
            Ok(action) => self.unit_ready.push_back((node, instance, action)),
            Err(error) => self.finish_unit(UnitDone {
                node,
                instance,
                outcome: Outcome::Failed(error),
                attempts: 0,
            }),
        }
    }

    /// Starts queued units while the concurrency limit allows. A unit whose action needs no
    /// waiting (a tool call, text, a file) makes its first attempt right here, and only goes
    /// on to the attempt loop if that attempt failed in a way a retry could cure. Returns how
    /// many units finished here, since their downstream nodes may now be ready.
    fn launch(&mut self, running: &mut FuturesUnordered<BoxFuture<UnitDone>>) -> usize {
        let mut finished = 0;
        while self.stop.is_none() && running.len() < self.plan.max_parallel {
            let Some((node, instance, action)) = self.unit_ready.pop_front() else {
                break;
            };
            if self.status[node] == NodeStatus::Pending {
                self.set_status(node, NodeStatus::Running, None);
            }
            if let Resolved::Text(text) = action {
                // Text cannot fail; it becomes the output as it is, without a copy.
                let outcome = Outcome::Succeeded(Value::String(text));
                self.finish_unit(UnitDone {
                    node,
                    instance,
                    outcome,
                    attempts: 1,
                });
                finished += 1;
                continue;
            }
            let first = match self.attempt_now(node, instance, &action) {
                Ok(done) => {
                    self.finish_unit(done);
                    finished += 1;
                    continue;
                }
                Err(first) => first,
            };
            running.push(Box::pin(attempt_unit(
                Arc::clone(&self.plan),
                Arc::clone(&self.env),
                Arc::clone(&self.run_id),
                self.stop_token.clone(),
                self.observer.clone(),
                (node, instance, action),
                first,
            )));
        }
        finished
    }

    /// The first attempt of a unit that needs no waiting, made synchronously: `Ok` when the
    /// unit is done, `Err` with the attempt loop's starting point otherwise (`None` when no
    /// attempt was made, or the retryable error of the one that was).
    fn attempt_now(
        &self,
        node: usize,
        instance: Option<usize>,
        action: &Resolved,
    ) -> Result<UnitDone, Option<NodeError>> {
        let planned = &self.plan.nodes[node];
        let origin = Origin {
            run_id: Some(&self.run_id),
            node_id: Some(&planned.id),
        };
        let outcome = match actions::perform_now(&self.env, action, origin).ok_or(None)? {
            Ok(value) => Outcome::Succeeded(value),
            Err(error) if error.is_retryable() && planned.retry.max_attempts > 1 => {
                return Err(Some(error));
            }
            Err(error) => {
                let scope = AttemptScope {
                    run_id: &self.run_id,
                    node_id: &planned.id,
                    instance,
                    policy: planned.retry,
                    timeout: planned.timeout,
                    stop: &self.stop_token,
                    observer: self.observer.as_ref(),
                };
                report_failure(&scope, 1, &error, None);
                Outcome::Failed(error)
            }
        };
        Ok(UnitDone {
            node,
            instance,
            outcome,
            attempts: 1,
        })
    }

    fn finish_unit(&mut self, done: UnitDone) {
        let UnitDone {
            node,
            instance,
            outcome,
            attempts,
        } = done;
        self.attempts[node] += attempts;
        // Attempts watch a child of the caller's token, so one can report a cancel before
        // this loop has seen it: that cancel is the run's, whatever the order.
        if matches!(outcome, Outcome::Cancelled) {
            self.halt(Stop::Cancelled);
        }
        let Some(k) = instance else {
            return match outcome {
                Outcome::Succeeded(value) => {
                    self.complete(node, NodeStatus::Succeeded, None, Some(value), None)
                }
                Outcome::Failed(error) => self.fail(node, error),
                Outcome::Cancelled => {
                    let reason = self.stop_reason();
                    self.complete(node, NodeStatus::Cancelled, Some(reason), None, None)
                }
            };
        };
        let set = self.instances[node]
            .as_mut()
            .expect("instances exist for a for_each node");
        set.remaining -= 1;
        match outcome {
            Outcome::Succeeded(value) => set.outputs[k] = Some(value),
            Outcome::Failed(error) => {
                if set.first_error.as_ref().is_none_or(|(first, _)| k < *first) {
                    set.first_error = Some((k, error));
                }
            }
            Outcome::Cancelled => set.cancelled = true,
        }
        if set.remaining > 0 {
            return;
        }
        let set = self.instances[node].take().expect("checked above");
        if set.cancelled {
            let reason = self.stop_reason();
            self.complete(node, NodeStatus::Cancelled, Some(reason), None, None);
        } else if let Some((k, error)) = set.first_error {
            let message = format!("item {k}: {}", error.message);
            self.fail(node, NodeError { message, ..error });
        } else {
            let outputs = set
                .outputs
                .into_iter()
                .map(|o| o.unwrap_or(Value::Null))
                .collect();
            self.complete(
                node,
                NodeStatus::Succeeded,
                None,
                Some(Value::Array(outputs)),
                None,
            );
        }
    }

    fn fail(&mut self, i: usize, error: NodeError) {
        let fails_run = self.plan.nodes[i].on_failure == super::definition::OnFailure::FailRun;
        self.complete(i, NodeStatus::Failed, None, None, Some(error));
        if fails_run {
            let id = self.plan.nodes[i].id.to_string();
            self.halt(Stop::NodeFailed(id));
        }
    }

    fn set_status(&mut self, i: usize, status: NodeStatus, reason: Option<String>) {
        self.status[i] = status;
        self.reason[i] = reason;
        if status.is_terminal() {
            self.done += 1;
        }
        if let Some(observer) = &self.observer {
            observer.event(&Event::NodeChanged {
                run_id: &self.run_id,
                node: &self.plan.nodes[i].id,
                status,
                reason: self.reason[i].as_deref(),
                progress: Progress {
                    done: self.done,
                    total: self.plan.nodes.len(),
                },
            });
        }
    }

    /// Records a node's terminal state and releases the nodes that were waiting on it.
    fn complete(
        &mut self,
        i: usize,
        status: NodeStatus,
        reason: Option<String>,
        output: Option<Value>,
        error: Option<NodeError>,
    ) {
        self.outputs[i] = output;
        self.errors[i] = error;
        self.set_status(i, status, reason);
        for &d in &self.plan.nodes[i].downstream {
            self.waiting_on[d] -= 1;
            if self.waiting_on[d] == 0 {
                self.node_ready.push_back(d);
            }
        }
    }

    /// The template context of node `i`: inputs, the nodes it reads, the run, the item.
    fn context(&mut self, i: usize, item: Option<(&Value, usize)>) -> minijinja::Value {
        let reads = &self.plan.nodes[i].reads;
        let nodes = self.nodes_context(reads);
        let inputs = self
            .inputs_ctx
            .get_or_insert_with(|| minijinja::Value::from_serialize(&self.inputs))
            .clone();
        let run = minijinja::context! { id => &*self.run_id };
        match item {
            Some((item, index)) => minijinja::context! { inputs, nodes, run, item, index },
            None => minijinja::context! { inputs, nodes, run },
        }
    }

    fn nodes_context(&self, reads: &[usize]) -> minijinja::Value {
        let mut nodes = Map::new();
        for &r in reads {
            let mut entry = Map::new();
            entry.insert(
                "status".into(),
                Value::String(self.status[r].as_str().into()),
            );
            if let Some(output) = &self.outputs[r] {
                entry.insert("output".into(), output.clone());
            }
            nodes.insert(self.plan.nodes[r].id.to_string(), Value::Object(entry));
        }
        minijinja::Value::from_serialize(&nodes)
    }

    fn finalize(mut self) -> RunReport {
        let reason = self.stop_reason();
        for i in 0..self.plan.nodes.len() {
            if !self.status[i].is_terminal() {
                self.set_status(i, NodeStatus::Cancelled, Some(reason.clone()));
            }
        }
        let mut status = match self.stop {
            None => RunStatus::Succeeded,
            Some(Stop::Cancelled) => RunStatus::Cancelled,
            Some(_) => RunStatus::Failed,
        };
        let mut error = self.stop.as_ref().map(|_| reason);
        let (output, output_error) = self.evaluate_output();
        if status == RunStatus::Succeeded && output_error.is_some() {
            status = RunStatus::Failed;
            error = output_error;
        }
        self.emit(Event::RunFinished {
            run_id: &self.run_id,
            status,
        });
        self.report(status, output, error)
    }

    /// The run's `output` map; an expression that fails is left out and its error returned.
    fn evaluate_output(&self) -> (Value, Option<String>) {
        let mut output = Map::new();
        if self.plan.output.is_empty() {
            return (Value::Object(output), None);
        }
        // The nodes' context of the inputs, when one was built, is the same value.
        let inputs = (self.inputs_ctx.clone())
            .unwrap_or_else(|| minijinja::Value::from_serialize(&self.inputs));
        let nodes = self.nodes_context(&self.plan.output_reads);
        let ctx = minijinja::context! { inputs, nodes, run => minijinja::context! { id => &*self.run_id } };
        let mut first_error = None;
        for (name, expr) in &self.plan.output {
            match template::eval(expr, &ctx) {
                Ok(value) => {
                    output.insert(name.clone(), value);
                }
                Err(e) => {
                    first_error.get_or_insert_with(|| format!("output `{name}`: {e}"));
                }
            }
        }
        (Value::Object(output), first_error)
    }

    fn report(self, status: RunStatus, output: Value, error: Option<String>) -> RunReport {
        let mut nodes =
            NodeReports::with_capacity_and_hasher(self.plan.nodes.len(), Default::default());
        let parts = self.outputs.into_iter().zip(self.errors).zip(self.reason);
        for (i, ((output, error), reason)) in parts.enumerate() {
            let report = NodeReport {
                status: self.status[i],
                attempts: self.attempts[i],
                output,
                error,
                reason,
            };
            nodes.insert(Arc::clone(&self.plan.nodes[i].id), report);
        }
        RunReport {
            run_id: self.run_id.to_string(),
            workflow: self.plan.name.clone(),
            status,
            output,
            error,
            nodes,
        }
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Every attempt of one unit, with its retries, timeouts and cancellation.
async fn attempt_unit(
    plan: Arc<Plan>,
    env: Arc<ActionEnv>,
    run_id: Arc<str>,
    stop: CancellationToken,
    observer: Option<Arc<dyn Observer>>,
    (node, instance, action): (usize, Option<usize>, Resolved),
    first: Option<NodeError>,
) -> UnitDone {
    let planned = &plan.nodes[node];
    let scope = AttemptScope {
        run_id: &run_id,
        node_id: &planned.id,
        instance,
        policy: planned.retry,
        timeout: planned.timeout,
        stop: &stop,
        observer: observer.as_ref(),
    };
    let origin = Origin {
        run_id: Some(&run_id),
        node_id: Some(&planned.id),
    };
    let (outcome, attempts) =
        run_attempts(scope, first, |_| actions::perform(&env, &action, origin)).await;
    UnitDone {
        node,
        instance,
        outcome,
        attempts,
    }
}
