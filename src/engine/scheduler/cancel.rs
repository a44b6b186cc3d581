//! Cancelling one unit of a run (a node, or one `for_each` instance) while the rest goes
//! on: the unit ends `cancelled`, and the trigger rules of the nodes downstream decide
//! what follows, as for a failure. Cancelling a run stops every unit; that is `halt`.

use std::collections::HashMap;

use tokio_util::sync::CancellationToken;

use super::Run;
use crate::engine::report::NodeStatus;

/// Why a unit ended when it was cancelled on its own.
pub(super) const CANCELLED_ALONE: &str = "cancelled by the client";

/// A request to cancel one unit: the node's id, and the instance (`None`: the node, with
/// every instance of it).
pub type UnitCancel = (String, Option<usize>);

/// The cancel tokens of the units that wait, by (node, instance).
pub(super) type UnitTokens = HashMap<(usize, Option<usize>), CancellationToken>;

impl Run {
    /// The token a waiting unit watches: cancelled with the run, or on its own.
    pub(super) fn unit_token(&mut self, node: usize, instance: Option<usize>) -> CancellationToken {
        let token = self.stop_token.child_token();
        self.unit_tokens.insert((node, instance), token.clone());
        token
    }

    /// Whether a unit that reports a cancel was cancelled on its own, not with its run.
    pub(super) fn cancelled_alone(&mut self, node: usize, instance: Option<usize>) -> bool {
        self.unit_tokens.remove(&(node, instance));
        !self.stop_token.is_cancelled()
    }

    /// Cancels the unit a client asked to cancel; a finished one is left as it is.
    pub(super) fn cancel_unit(&mut self, (node_id, instance): UnitCancel) {
        let Some(node) = self.plan.nodes.iter().position(|n| *n.id == *node_id) else {
            return;
        };
        match (instance, &self.state.fans[node]) {
            (None, Some(fan)) => {
                let count = fan.units.len();
                for k in 0..count {
                    self.cancel_one(node, Some(k));
                }
            }
            (instance, _) => self.cancel_one(node, instance),
        }
    }

    fn cancel_one(&mut self, node: usize, instance: Option<usize>) {
        if instance.is_some() && self.state.fans[node].is_none() {
            return;
        }
        if self.state.unit(node, instance).status.is_terminal() {
            return;
        }
        // Waiting: its wait ends now, and it settles as cancelled.
        if let Some(token) = self.unit_tokens.get(&(node, instance)) {
            token.cancel();
            return;
        }
        let reason = Some(CANCELLED_ALONE.to_owned());
        // Ready, but held back by `max_parallel`.
        if let Some(at) = self
            .unit_ready
            .iter()
            .position(|(n, k, _)| *n == node && *k == instance)
        {
            self.unit_ready.remove(at);
            return self.end_unit(node, instance, NodeStatus::Cancelled, reason);
        }
        // Not decided yet: it never runs; `decide` skips a node that already ended.
        if instance.is_none() && self.state.status(node) == NodeStatus::Pending {
            self.complete(node, NodeStatus::Cancelled, reason, None, None);
        }
    }
}
