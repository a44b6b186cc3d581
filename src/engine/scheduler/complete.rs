//! Units and nodes at their end: a unit closed, a `for_each` node's instances collected
//! into its output, a node completed and counted, its downstream released, and the
//! observer told.

use std::sync::Arc;

use serde_json::Value;

use super::Run;
use crate::clock;
use crate::engine::journal::UnitState;
use crate::engine::report::{NodeError, NodeErrorKind, NodeStatus};

impl Run {
    /// Ends a unit without an attempt (cancelled), with a reason.
    pub(super) fn end_unit(
        &mut self,
        node: usize,
        instance: Option<usize>,
        status: NodeStatus,
        reason: Option<String>,
    ) {
        let stamp = self.journal.is_some();
        close(self.state.unit_mut(node, instance), status, reason, stamp);
        self.trace_ended(node, instance);
        self.unit_finished(node, instance);
    }

    /// A unit reached a terminal state: a node is complete; an instance counts down its
    /// node's remaining instances.
    pub(super) fn unit_finished(&mut self, node: usize, instance: Option<usize>) {
        let Some(_) = instance else {
            return self.node_finished(node);
        };
        let fan = self.state.fans[node].as_mut().expect("an expanded node");
        fan.remaining -= 1;
        if fan.remaining == 0 {
            self.collect(node);
        }
    }

    /// Completes a `for_each` node from its instances: cancelled if one was, else failed
    /// with the first failure in item order, else succeeded with the list of outputs.
    pub(super) fn collect(&mut self, node: usize) {
        let fan = self.state.fans[node].as_ref().expect("an expanded node");
        let attempts = fan.units.iter().map(|u| u.attempts).sum();
        let cancelled = fan
            .units
            .iter()
            .find(|u| u.status == NodeStatus::Cancelled)
            .map(|u| u.reason.clone());
        let failure = fan
            .units
            .iter()
            .enumerate()
            .find_map(|(k, u)| (u.status == NodeStatus::Failed).then(|| (k, u.error.clone())));
        let outputs: Vec<Value> = fan
            .units
            .iter()
            .map(|u| u.output.clone().unwrap_or(Value::Null))
            .collect();
        self.state.unit_mut(node, None).attempts = attempts;
        self.state.close_fan(node);
        self.fan_items.remove(&node);
        if let Some(reason) = cancelled {
            let reason = match self.stop {
                Some(_) => Some(self.stop_reason()),
                // Instances cancelled on their own: the node says why.
                None => reason,
            };
            self.complete(node, NodeStatus::Cancelled, reason, None, None);
        } else if let Some((k, error)) = failure {
            let error = error.unwrap_or_else(|| NodeError::new(NodeErrorKind::Unsupported, ""));
            let message = format!("item {k}: {}", error.message);
            self.fail(node, NodeError { message, ..error });
        } else {
            self.complete(
                node,
                NodeStatus::Succeeded,
                None,
                Some(Value::Array(outputs)),
                None,
            );
        }
    }

    /// Records a node's terminal state and what follows from it.
    pub(super) fn complete(
        &mut self,
        node: usize,
        status: NodeStatus,
        reason: Option<String>,
        output: Option<Value>,
        error: Option<NodeError>,
    ) {
        let stamp = self.journal.is_some();
        let unit = self.state.unit_mut(node, None);
        unit.output = output;
        unit.error = error;
        close(unit, status, reason, stamp);
        self.node_finished(node);
    }

    /// A node is terminal: count it, tell the observer, release the nodes waiting on it,
    /// and stop the run if it failed with `fail_run`.
    pub(super) fn node_finished(&mut self, node: usize) {
        if let Some(error) = self.state.nodes[node].error.clone() {
            self.audit_fault(node, &error);
        }
        self.state.done += 1;
        self.state.current = Some(node);
        self.node_changed(node);
        let plan = Arc::clone(&self.plan);
        for &d in &plan.nodes[node].downstream {
            self.waiting_on[d] -= 1;
            if self.waiting_on[d] == 0 {
                self.node_ready.push_back(d);
            }
        }
        let planned = &plan.nodes[node];
        if self.state.status(node) == NodeStatus::Failed
            && planned.on_failure == crate::engine::definition::OnFailure::FailRun
        {
            self.halt(super::Stop::NodeFailed(node));
        }
    }

    /// A node that failed over a budget, or whose work panicked, leaves an audit row: the
    /// operator sees what was refused, or what broke, and for whom. In a recorded run the
    /// row commits with the node's record, under the lease; a run given up here writes none.
    fn audit_fault(&mut self, node: usize, error: &NodeError) {
        let audit = match error.kind {
            NodeErrorKind::BudgetExceeded => crate::engine::journal::BUDGET_AUDIT,
            NodeErrorKind::Panicked => crate::engine::journal::PANIC_AUDIT,
            _ => return,
        };
        let mut args = serde_json::Map::new();
        args.insert("code".into(), Value::String(error.code.as_str().to_owned()));
        args.insert("error".into(), Value::String(error.message.clone()));
        self.audit(node, audit, args, crate::todos::AuditOutcome::Error);
    }

    pub(super) fn node_changed(&self, node: usize) {
        if let Some(observer) = &self.observer {
            let unit = &self.state.nodes[node];
            // Phases, or nodes: what the run's task reports too.
            let progress = self.state.progress(&self.plan);
            observer.event(&crate::engine::observer::Event::NodeChanged {
                run_id: &self.run_id,
                node: &self.plan.nodes[node].id,
                status: unit.status,
                reason: unit.reason.as_deref(),
                progress: crate::engine::observer::Progress {
                    done: progress.done,
                    total: progress.total,
                },
            });
        }
    }
}

/// Puts a unit in a terminal state: nothing is awaited or asked any more. `stamp` records
/// the time (only a journalled run keeps it).
pub(super) fn close(unit: &mut UnitState, status: NodeStatus, reason: Option<String>, stamp: bool) {
    unit.status = status;
    unit.reason = reason;
    unit.asking = None;
    unit.next_attempt_ms = None;
    unit.deadline_ms = None;
    unit.finished_ms = stamp.then(clock::now_ms);
}
