//! A run's state: one [`UnitState`] record per node and per `for_each` instance, with the
//! set of records changed since they were last committed, and the run's progress.
//!
//! This is the whole of what a run needs to go on: the scheduler's queues are derived
//! from it, so a run rebuilt from stored records continues where the stored one stopped.

use crate::engine::journal::{NewQuestion, RunProgress, UnitChange, UnitState};
use crate::engine::plan::Plan;
use crate::engine::question::Question;
use crate::engine::report::NodeStatus;
use serde_json::Value;

/// The instances of a `for_each` node, once it has expanded.
#[derive(Debug, Default)]
pub(super) struct Fan {
    pub units: Vec<UnitState>,
    /// Instances not yet terminal.
    pub remaining: usize,
    dirty: Vec<bool>,
}

impl Fan {
    pub fn new(count: usize, restored: Vec<(usize, UnitState)>) -> Fan {
        let mut units: Vec<UnitState> = std::iter::repeat_with(UnitState::default)
            .take(count)
            .collect();
        for (k, state) in restored {
            if k < count {
                units[k] = state;
            }
        }
        let remaining = units.iter().filter(|u| !u.status.is_terminal()).count();
        Fan {
            units,
            remaining,
            dirty: vec![false; count],
        }
    }

    /// The share of this node's progress unit that is done.
    fn fraction(&self) -> f64 {
        match self.units.len() {
            0 => 0.0,
            n => (n - self.remaining) as f64 / n as f64,
        }
    }
}

/// What waits to be recorded for a unit's question `key`: the question itself (`T` its
/// request), or an answer given directly (`T` the answer).
struct Pending<T> {
    node: usize,
    instance: Option<usize>,
    key: String,
    value: T,
}

impl<T> Pending<T> {
    fn new(node: usize, instance: Option<usize>, key: String, value: T) -> Pending<T> {
        Pending {
            node,
            instance,
            key,
            value,
        }
    }
}

/// What changed: units, new questions, and answers given directly.
pub(super) type Changes<'a> = (
    Vec<UnitChange<'a>>,
    Vec<NewQuestion<'a>>,
    Vec<(UnitChange<'a>, &'a str, &'a Value)>,
);

pub(super) struct RunState {
    pub nodes: Vec<UnitState>,
    pub fans: Vec<Option<Fan>>,
    /// Instance states read back from the store, until their node expands (empty for a
    /// fresh run).
    pub restored_instances: Vec<Vec<(usize, UnitState)>>,
    /// Nodes in a terminal state.
    pub done: usize,
    /// Units waiting for an answer.
    pub asking: usize,
    /// Expanded `for_each` nodes not yet terminal: their instances count towards progress.
    open_fans: Vec<usize>,
    /// The node the run is at: the last one that started or finished.
    pub current: Option<usize>,
    /// Whether changes are tracked at all (only for a run with a journal).
    tracking: bool,
    node_dirty: Vec<bool>,
    dirty: Vec<(usize, Option<usize>)>,
    asked: Vec<Pending<Question>>,
    answered: Vec<Pending<Value>>,
    /// The share of their child runs done, of `workflow` nodes waiting for them.
    child_shares: std::collections::HashMap<usize, f64>,
    /// A child's progress moved the run's since the last commit.
    progress_moved: bool,
    /// The `workflow` units whose child runs wait for an answer.
    children_asking: std::collections::HashSet<(usize, Option<usize>)>,
}

impl RunState {
    pub fn new(n: usize, tracking: bool) -> RunState {
        RunState {
            nodes: std::iter::repeat_with(UnitState::default).take(n).collect(),
            fans: (0..n).map(|_| None).collect(),
            restored_instances: Vec::new(),
            done: 0,
            asking: 0,
            open_fans: Vec::new(),
            current: None,
            tracking,
            node_dirty: vec![false; if tracking { n } else { 0 }],
            dirty: Vec::new(),
            asked: Vec::new(),
            answered: Vec::new(),
            child_shares: Default::default(),
            progress_moved: false,
            children_asking: Default::default(),
        }
    }

    /// Whether unit `at`'s child run waits for an answer; the run asks while one does.
    pub fn child_asking(&mut self, at: (usize, Option<usize>), asking: bool) {
        let changed = match asking {
            true => self.children_asking.insert(at),
            false => self.children_asking.remove(&at),
        };
        self.progress_moved |= changed && self.tracking;
    }

    /// Whether some unit, or a child run of one, waits for an answer.
    fn is_asking(&self) -> bool {
        self.asking > 0
            || (self.children_asking.iter())
                .any(|&(node, instance)| !self.unit(node, instance).status.is_terminal())
    }

    /// Counts `share` (0 to 1) of node `node`'s child run as done, in the run's progress.
    pub fn child_share(&mut self, node: usize, share: f64) {
        self.child_shares.insert(node, share.clamp(0.0, 1.0));
        self.progress_moved = self.tracking;
    }

    /// Expands `node` into its instances. Each unfinished instance is marked as changed,
    /// so that its record (and with it its sub-task) exists from the expansion on.
    pub fn expand(&mut self, node: usize, fan: Fan) {
        let unfinished: Vec<usize> = (0..fan.units.len())
            .filter(|&k| !fan.units[k].status.is_terminal())
            .collect();
        self.fans[node] = Some(fan);
        self.open_fans.push(node);
        for k in unfinished {
            self.mark(node, Some(k));
        }
    }

    pub fn unit(&self, node: usize, instance: Option<usize>) -> &UnitState {
        match instance {
            None => &self.nodes[node],
            Some(k) => &self.fans[node].as_ref().expect("an expanded node").units[k],
        }
    }

    /// The unit's record, marked as changed.
    pub(crate) fn unit_mut(&mut self, node: usize, instance: Option<usize>) -> &mut UnitState {
        self.mark(node, instance);
        self.unit_mut_clean(node, instance)
    }

    /// The unit's record, for a change that is already committed.
    pub(crate) fn unit_mut_clean(
        &mut self,
        node: usize,
        instance: Option<usize>,
    ) -> &mut UnitState {
        match instance {
            None => &mut self.nodes[node],
            Some(k) => &mut self.fans[node].as_mut().expect("an expanded node").units[k],
        }
    }

    pub fn mark(&mut self, node: usize, instance: Option<usize>) {
        if !self.tracking {
            return;
        }
        let flag = match instance {
            None => &mut self.node_dirty[node],
            Some(k) => &mut self.fans[node].as_mut().expect("an expanded node").dirty[k],
        };
        if !*flag {
            *flag = true;
            self.dirty.push((node, instance));
        }
    }

    pub fn ask(&mut self, node: usize, instance: Option<usize>, key: String, request: Question) {
        if self.tracking {
            self.asked.push(Pending::new(node, instance, key, request));
        }
    }

    pub fn answered(&mut self, node: usize, instance: Option<usize>, key: String, answer: Value) {
        if self.tracking {
            self.answered
                .push(Pending::new(node, instance, key, answer));
        }
    }

    pub(crate) fn has_changes(&self) -> bool {
        !self.dirty.is_empty()
            || !self.asked.is_empty()
            || !self.answered.is_empty()
            || self.progress_moved
    }

    /// The changed units and new questions, by reference, in the order they changed.
    pub fn changes<'a>(&'a self, plan: &'a Plan) -> Changes<'a> {
        let change = |node: usize, instance: Option<usize>| UnitChange {
            node: &plan.nodes[node].id,
            index: node,
            instance,
            state: self.unit(node, instance),
        };
        let units = self.dirty.iter().map(|&(n, k)| change(n, k)).collect();
        let questions = self
            .asked
            .iter()
            .map(|a| NewQuestion {
                node: &plan.nodes[a.node].id,
                index: a.node,
                instance: a.instance,
                key: &a.key,
                request: a.value.clone(),
            })
            .collect();
        let answers = self
            .answered
            .iter()
            .map(|a| (change(a.node, a.instance), a.key.as_str(), &a.value))
            .collect();
        (units, questions, answers)
    }

    /// Marks every change as committed.
    pub(crate) fn clear_changes(&mut self) {
        for (node, instance) in std::mem::take(&mut self.dirty) {
            match instance {
                None => self.node_dirty[node] = false,
                Some(k) => {
                    if let Some(fan) = self.fans[node].as_mut() {
                        fan.dirty[k] = false;
                    }
                }
            }
        }
        self.asked.clear();
        self.answered.clear();
        self.progress_moved = false;
    }

    pub fn progress<'a>(&self, plan: &'a Plan) -> RunProgress<'a> {
        if !plan.phases.is_empty() {
            return self.phase_progress(plan);
        }
        let total = plan.nodes.len();
        let fanned: f64 = self
            .open_fans
            .iter()
            .filter(|&&i| !self.nodes[i].status.is_terminal())
            .filter_map(|&i| self.fans[i].as_ref().map(Fan::fraction))
            .sum::<f64>()
            + (self.child_shares.iter())
                .filter(|&(&i, _)| !self.nodes[i].status.is_terminal())
                .map(|(_, share)| share)
                .sum::<f64>();
        let percent = match total {
            0 => 100.0,
            _ => 100.0 * (self.done as f64 + fanned) / total as f64,
        };
        RunProgress {
            percent: percent.floor().clamp(0.0, 100.0) as u8,
            done: self.done,
            total,
            current: self.current.map(|i| &*plan.nodes[i].id),
            asking: self.is_asking(),
            iteration: self.iteration(plan),
        }
    }

    /// Progress in phases: a phase is done when all its nodes are, and the run is at the
    /// phase of the node it is at. Phased workflows are small, so counting is cheap.
    fn phase_progress<'a>(&self, plan: &'a Plan) -> RunProgress<'a> {
        let total = plan.phases.len();
        let mut open = vec![false; total];
        for (node, planned) in plan.nodes.iter().enumerate() {
            if let Some(phase) = planned.phase
                && !self.nodes[node].status.is_terminal()
            {
                open[phase] = true;
            }
        }
        let done = open.iter().filter(|open| !**open).count();
        let current = self
            .current
            .and_then(|node| plan.nodes[node].phase)
            .map(|phase| plan.phases[phase].as_str());
        RunProgress {
            percent: (100 * done / total.max(1)) as u8,
            done,
            total,
            current,
            asking: self.is_asking(),
            iteration: self.iteration(plan),
        }
    }

    /// The iteration the current node runs, and its `max`, while it repeats (a node
    /// repeated per `for_each` instance says it per instance, in its sub-task).
    fn iteration(&self, plan: &Plan) -> Option<(u32, u32)> {
        let node = self.current?;
        let repeat = plan.nodes[node].repeat.as_ref()?;
        let unit = &self.nodes[node];
        let running = !unit.status.is_terminal() && !unit.iterations.is_empty();
        running.then(|| (unit.iterations.len() as u32 + 1, repeat.max))
    }

    pub fn status(&self, node: usize) -> NodeStatus {
        self.nodes[node].status
    }

    /// Forgets a `for_each` node's share of progress once the node is terminal.
    pub(crate) fn close_fan(&mut self, node: usize) {
        self.open_fans.retain(|&i| i != node);
    }
}
