//! Deciding a node once its upstream nodes are terminal: its trigger rule, its `when`, its
//! `for_each` expansion, then its units queued with their templates resolved.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::Run;
use super::state::Fan;
use super::units::UnitWake;
use crate::engine::actions::{self, Resolved};
use crate::engine::attempt::Outcome;
use crate::engine::budget;
use crate::engine::plan::NodeAction;
use crate::engine::report::{NodeError, NodeErrorKind, NodeStatus};
use crate::engine::trigger;

impl Run {
    /// Decides every node whose upstream is complete: skip it, fail it, or queue its units.
    /// Decides nodes, and resolves `for_each` instances, for one time slice at most; true
    /// if some are left. Each evaluation is bounded by its fuel, and the run yields between
    /// slices, so that a run full of costly templates never holds its worker thread for
    /// long. The clock is read after a decision that evaluated a template or an
    /// expression, and after every `CLOCK_EVERY` others: a one-node run pays nothing for
    /// this, a wide run of plain nodes little.
    pub(super) fn decide_ready(&mut self) -> bool {
        const CLOCK_EVERY: u32 = 32;
        let mut started = None;
        let mut unclocked = 0u32;
        let mut evaluations = budget::evaluations();
        while self.stop.is_none() {
            if let Some((node, k)) = self.instance_ready.pop_front() {
                self.resolve_instance(node, k);
            } else if let Some(node) = self.node_ready.pop_front() {
                self.decide(node);
            } else {
                return false;
            }
            let evaluated = budget::evaluations();
            unclocked += 1;
            if evaluated == evaluations && unclocked < CLOCK_EVERY {
                continue;
            }
            (evaluations, unclocked) = (evaluated, 0);
            let started = started.get_or_insert_with(std::time::Instant::now);
            let more = !self.instance_ready.is_empty() || !self.node_ready.is_empty();
            if more && started.elapsed() >= super::DECIDE_SLICE {
                return true;
            }
        }
        false
    }

    /// Resolves instance `k` of `for_each` node `node` and queues it.
    fn resolve_instance(&mut self, node: usize, k: usize) {
        let Some(items) = self.fan_items.get(&node).map(Arc::clone) else {
            return;
        };
        // A repeating node's instances resolve their action again at each iteration.
        if k + 1 == items.len() && self.plan.nodes[node].repeat.is_none() {
            self.fan_items.remove(&node);
        }
        // Cancelled, or finished before a resume, meanwhile.
        if self.state.unit(node, Some(k)).status.is_terminal() {
            return;
        }
        let plan = Arc::clone(&self.plan);
        let NodeAction::Defined(action) = &plan.nodes[node].action else {
            unreachable!("a one-node plan has no for_each")
        };
        let ctx = self.context(node, Some((&items[k], k)));
        let resolved = actions::resolve(&self.env.templates, action, &ctx);
        self.queue_unit(node, Some(k), resolved);
    }

    fn decide(&mut self, i: usize) {
        // Cancelled on its own before its upstream nodes were done.
        if self.state.status(i).is_terminal() {
            return;
        }
        let plan = Arc::clone(&self.plan);
        let node = &plan.nodes[i];
        if self.units > self.env.limits.max_run_units {
            let message = format!(
                "node `{}`: the run has {} nodes, over the max-run-units budget ({})",
                node.id,
                plan.nodes.len(),
                self.env.limits.max_run_units
            );
            return self.fail(i, NodeError::new(NodeErrorKind::BudgetExceeded, message));
        }
        if let Some(repeat) = node.repeat.as_ref()
            && repeat.max > self.env.limits.max_repeat
        {
            let message = format!(
                "node `{}`: `repeat.max` is {}, over the max-repeat budget ({})",
                node.id, repeat.max, self.env.limits.max_repeat
            );
            return self.fail(i, NodeError::new(NodeErrorKind::BudgetExceeded, message));
        }
        let upstream = node.upstream.iter().map(|&u| self.state.status(u));
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
            match self.env.templates.eval_bool(when, &ctx) {
                Ok(true) => {}
                Ok(false) => {
                    let reason = Some("condition false".into());
                    return self.complete(i, NodeStatus::Skipped, reason, None, None);
                }
                Err(e) => return self.fail(i, actions::template_error("when", e)),
            }
        }
        let Some(expr) = &node.for_each else {
            let resolved = actions::resolve(&self.env.templates, action, &ctx);
            return self.queue_unit(i, None, resolved);
        };
        let items = match self.env.templates.eval(expr, &ctx) {
            Ok(Value::Array(items)) => items,
            Ok(other) => {
                let kind = json_type(&other);
                let error = format!("for_each: expected a list, got {kind}");
                return self.fail(i, NodeError::new(NodeErrorKind::Template, error));
            }
            Err(e) => return self.fail(i, actions::template_error("for_each", e)),
        };
        if let Err(error) = self.admit_instances(i, items.len()) {
            return self.fail(i, error);
        }
        if items.is_empty() {
            let output = Some(Value::Array(Vec::new()));
            return self.complete(i, NodeStatus::Succeeded, None, output, None);
        }
        // A resumed node keeps the instances that finished; the items are the same, since
        // they come from the same inputs and upstream outputs.
        let restored = (self.state.restored_instances.get_mut(i))
            .map(std::mem::take)
            .unwrap_or_default();
        self.state.expand(i, Fan::new(items.len(), restored));
        // The instances are resolved in turn by `decide_ready`, a slice at a time.
        self.instance_ready.extend((0..items.len()).map(|k| (i, k)));
        self.fan_items.insert(i, Arc::new(items));
        if self.state.fans[i]
            .as_ref()
            .is_some_and(|fan| fan.remaining == 0)
        {
            self.collect(i);
        }
    }

    /// Counts `n` instances of node `i` against the `for_each` and the run's unit budgets:
    /// over either, the node fails before any instance is made.
    fn admit_instances(&mut self, i: usize, n: usize) -> Result<(), NodeError> {
        let limits = self.env.limits;
        let id = &self.plan.nodes[i].id;
        if n > limits.max_for_each {
            let message = format!(
                "for_each: node `{id}` expands to {n} instances, over the max-for-each \
                 budget ({})",
                limits.max_for_each
            );
            return Err(NodeError::new(NodeErrorKind::BudgetExceeded, message));
        }
        // Each instance is a unit (a stored row) beside its node's own; the units of the
        // runs above and below this one count too.
        let units = self.units.saturating_add(n);
        let limit = limits.max_run_units.min(self.tree.limit());
        let admitted = match units > limit {
            true => Err(units),
            false => self.tree.admit(&self.run_id, units),
        };
        if let Err(total) = admitted {
            let of = match self.tree.nested() {
                true => "the runs of this tree",
                false => "the run",
            };
            let message = format!(
                "for_each: node `{id}` would bring {of} to {total} units, over the \
                 max-run-units budget ({limit})"
            );
            return Err(NodeError::new(NodeErrorKind::BudgetExceeded, message));
        }
        self.units = units;
        Ok(())
    }

    pub(super) fn queue_unit(
        &mut self,
        node: usize,
        instance: Option<usize>,
        resolved: Result<Resolved, NodeError>,
    ) {
        match resolved {
            Ok(action) => self.unit_ready.push_back((node, instance, action)),
            Err(error) => self.settle_wake(UnitWake {
                outcome: Outcome::Failed(self.named(node, error)),
                node,
                instance,
                attempted: false,
                action: None,
            }),
        }
    }

    /// Fails node `i`; a `fail_run` node stops the run (see `node_finished`).
    pub(super) fn fail(&mut self, i: usize, error: NodeError) {
        let error = self.named(i, error);
        self.complete(i, NodeStatus::Failed, None, None, Some(error));
    }

    /// A budget error names its node, so that the message alone says where it happened.
    fn named(&self, i: usize, error: NodeError) -> NodeError {
        let id = &self.plan.nodes[i].id;
        let tag = format!("node `{id}`");
        if error.kind != NodeErrorKind::BudgetExceeded || error.message.contains(&tag) {
            return error;
        }
        let message = format!("{tag}: {}", error.message);
        NodeError { message, ..error }
    }

    /// The template context of node `i`: inputs, the nodes it reads, the run, the item.
    pub(super) fn context(&mut self, i: usize, item: Option<(&Value, usize)>) -> minijinja::Value {
        let reads = &self.plan.nodes[i].reads;
        let nodes = self.nodes_context(reads);
        let inputs = self
            .inputs_ctx
            .get_or_insert_with(|| minijinja::Value::from_serialize(&self.inputs))
            .clone();
        let run = minijinja::context! { id => &*self.run_id };
        let ctx = match item {
            Some((item, index)) => minijinja::context! { inputs, nodes, run, item, index },
            None => minijinja::context! { inputs, nodes, run },
        };
        match self.plan.nodes[i].repeat.is_some() {
            true => {
                let repeat = self.repeat_context(i, item.map(|(_, k)| k));
                minijinja::context! { repeat, ..ctx }
            }
            false => ctx,
        }
    }

    pub(super) fn nodes_context(&self, reads: &[usize]) -> minijinja::Value {
        let mut nodes = Map::new();
        for &r in reads {
            let mut entry = Map::new();
            let unit = &self.state.nodes[r];
            entry.insert("status".into(), Value::String(unit.status.as_str().into()));
            if let Some(output) = &unit.output {
                entry.insert("output".into(), output.clone());
            }
            // Why a failed node failed, `{code, message}` as reports show it, for a node
            // downstream that goes on without it.
            if let Some(error) = &unit.error {
                let error = serde_json::to_value(error).unwrap_or_default();
                entry.insert("error".into(), error);
            }
            nodes.insert(self.plan.nodes[r].id.to_string(), Value::Object(entry));
        }
        minijinja::Value::from_serialize(&nodes)
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
