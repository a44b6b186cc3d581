//! A validated definition compiled for the scheduler: nodes by index, edges both ways,
//! and for each node the upstream outputs its templates read.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::definition::{
    ActionDef, HistoryLimit, NodeDef, OnFailure, Repeat, RetryPolicy, Trigger, WorkflowDef,
};
use super::template;

/// What a planned node does. A one-node tool call takes its arguments verbatim from the
/// run's inputs: they are wire data, never templates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum NodeAction {
    Defined(ActionDef),
    ToolWithRunInputs(String),
}

impl NodeAction {
    /// Whether the node writes a file under the workspace.
    pub fn is_write_file(&self) -> bool {
        matches!(self, NodeAction::Defined(ActionDef::WriteFile { .. }))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedNode {
    /// Shared with every report of every run of the plan.
    pub id: Arc<str>,
    pub action: NodeAction,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream: Vec<usize>,
    /// Rebuilt from `upstream` when a snapshot is read.
    #[serde(skip)]
    pub downstream: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub trigger: Trigger,
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_failure: OnFailure,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<String>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub retry: RetryPolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Repeat>,
    /// Nodes whose `output`/`status` this node's templates read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<usize>,
    /// Whether deciding the node evaluates anything against a template context; building
    /// one costs more than the rest of a plain node's scheduling.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_context: bool,
    /// The node's phase, an index into [`Plan::phases`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<usize>,
}

/// Whether a snapshot field holds its default, and can be left out.
fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// A workflow ready to run; shared by every run of it. It serialises as the snapshot a
/// durable run keeps: resuming needs no TOML parsing and no validation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub name: String,
    pub max_parallel: usize,
    pub timeout: Option<Duration>,
    pub nodes: Vec<PlannedNode>,
    pub output: IndexMap<String, String>,
    /// Nodes the `output` expressions read.
    pub output_reads: Vec<usize>,
    /// The workflow's phases in the order they first appear; empty when its nodes have
    /// none, and progress then counts nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<String>,
    /// The definition the plan was built from; not part of the snapshot.
    #[serde(skip)]
    pub def: Option<Arc<WorkflowDef>>,
    /// The snapshot, made the first time a run of the plan is recorded.
    #[serde(skip)]
    snapshot: OnceLock<Arc<Snapshot>>,
}

/// The form in which a durable run keeps its plan.
#[derive(Debug)]
pub struct Snapshot {
    pub text: String,
    /// A hash of `text`, under which the store keeps one copy per plan.
    pub hash: String,
}

/// Node ids named in a set of dotted references (`nodes.<id>...`).
fn referenced_nodes(refs: &BTreeSet<String>) -> BTreeSet<String> {
    refs.iter()
        .filter_map(|r| r.strip_prefix("nodes."))
        .map(|rest| rest.split('.').next().unwrap_or(rest).to_owned())
        .collect()
}

/// Every template and expression of a node, as references. Syntax errors were reported by
/// validation; here they simply contribute nothing.
fn node_references(node: &NodeDef) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    let mut add_template = |text: &str| {
        if template::is_template(text) {
            refs.extend(template::template_references(text).unwrap_or_default());
        }
    };
    match &node.action {
        ActionDef::Tool { args, .. }
        | ActionDef::Workflow { inputs: args, .. }
        | ActionDef::Command { args, .. } => {
            refs.extend(template::value_references(args).unwrap_or_default())
        }
        ActionDef::Render { template } => add_template(template),
        ActionDef::WriteFile { path, content, .. } => {
            add_template(path);
            add_template(content);
        }
        ActionDef::Input {
            message, schema, ..
        } => {
            add_template(message);
            refs.extend(template::value_references(schema).unwrap_or_default());
        }
        ActionDef::Sample { prompt, system, .. } => {
            add_template(prompt);
            if let Some(system) = system {
                add_template(system);
            }
        }
        ActionDef::Value { expr, .. } => {
            refs.extend(template::expression_references(expr).unwrap_or_default())
        }
        ActionDef::ListDir { path } | ActionDef::ReadFile { path, .. } => add_template(path),
        ActionDef::WaitFor { duration } => add_template(duration),
        ActionDef::History {
            workflow,
            limit,
            filter,
            ..
        } => {
            add_template(workflow);
            if let HistoryLimit::Template(limit) = limit {
                add_template(limit);
            }
            if let Some(filter) = filter {
                refs.extend(template::expression_references(filter).unwrap_or_default());
            }
        }
        ActionDef::Wait { .. } => {}
    }
    let until = node.repeat.as_ref().map(|repeat| &repeat.until);
    for expr in node.when.iter().chain(node.for_each.iter()).chain(until) {
        refs.extend(template::expression_references(expr).unwrap_or_default());
    }
    refs
}

impl Plan {
    /// Compiles a definition that passed validation (unknown `needs` are ignored here).
    pub fn new(def: Arc<WorkflowDef>) -> Plan {
        let index: IndexMap<&str, usize> = def
            .nodes
            .keys()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        let ids_to_indices = |ids: BTreeSet<String>| -> Vec<usize> {
            ids.iter()
                .filter_map(|id| index.get(id.as_str()).copied())
                .collect()
        };
        let mut phases: Vec<String> = Vec::new();
        for phase in def.nodes.values().filter_map(|node| node.phase.as_ref()) {
            if !phases.contains(phase) {
                phases.push(phase.clone());
            }
        }
        let mut nodes: Vec<PlannedNode> = def
            .nodes
            .values()
            .map(|node| PlannedNode {
                id: node.id.as_str().into(),
                action: NodeAction::Defined(node.action.clone()),
                upstream: node
                    .needs
                    .iter()
                    .filter_map(|n| index.get(n.as_str()).copied())
                    .collect(),
                downstream: Vec::new(),
                when: node.when.clone(),
                trigger: node.trigger,
                on_failure: node.on_failure,
                timeout: node.timeout,
                for_each: node.for_each.clone(),
                retry: node.retry,
                repeat: node.repeat.clone(),
                reads: ids_to_indices(referenced_nodes(&node_references(node))),
                needs_context: needs_context(node),
                phase: node
                    .phase
                    .as_ref()
                    .and_then(|p| phases.iter().position(|q| q == p)),
            })
            .collect();
        for node in &mut nodes {
            node.upstream.sort_unstable();
            node.upstream.dedup();
        }
        link_downstream(&mut nodes);
        debug_assert!(is_acyclic(&nodes), "validated plans are acyclic");
        let mut output_refs = BTreeSet::new();
        for expr in def.output.values() {
            output_refs.extend(template::expression_references(expr).unwrap_or_default());
        }
        Plan {
            name: def.name.clone(),
            max_parallel: def.max_parallel.max(1),
            timeout: def.timeout,
            output_reads: ids_to_indices(referenced_nodes(&output_refs)),
            output: def.output.clone(),
            phases,
            nodes,
            def: Some(def),
            snapshot: OnceLock::new(),
        }
    }

    /// What a run's progress counts up to: its phases when it has them, else its nodes.
    pub fn steps(&self) -> usize {
        match self.phases.len() {
            0 => self.nodes.len(),
            phases => phases,
        }
    }

    /// The snapshot a durable run keeps of its plan.
    ///
    /// Made once per plan: a server runs the same workflows over and over, and a large
    /// plan's snapshot is megabytes of JSON to write and to hash.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        let made = self.snapshot.get_or_init(|| {
            let text = serde_json::to_string(self).expect("a plan serialises");
            let hash = super::files::content_hash(&text);
            Arc::new(Snapshot { text, hash })
        });
        Arc::clone(made)
    }

    /// A plan read back from its snapshot.
    pub fn from_snapshot(text: &str) -> Result<Plan, serde_json::Error> {
        let mut plan: Plan = serde_json::from_str(text)?;
        link_downstream(&mut plan.nodes);
        Ok(plan)
    }

    /// Whether runs of this plan are recorded: every workflow's are; the one-node plan of a
    /// direct tool call is not (its audit row is its record).
    pub(crate) fn is_durable(&self) -> bool {
        !matches!(
            self.nodes.as_slice(),
            [PlannedNode {
                action: NodeAction::ToolWithRunInputs(_),
                ..
            }]
        )
    }

    /// The one-node workflow behind a direct call of tool `name`.
    pub(crate) fn single_tool(name: &str) -> Plan {
        Plan {
            name: name.to_owned(),
            max_parallel: 1,
            timeout: None,
            nodes: vec![PlannedNode {
                id: name.into(),
                action: NodeAction::ToolWithRunInputs(name.to_owned()),
                upstream: Vec::new(),
                downstream: Vec::new(),
                when: None,
                trigger: Trigger::AllSuccess,
                on_failure: OnFailure::FailRun,
                timeout: None,
                for_each: None,
                retry: RetryPolicy::default(),
                repeat: None,
                reads: Vec::new(),
                needs_context: false,
                phase: None,
            }],
            snapshot: OnceLock::new(),
            output: IndexMap::new(),
            output_reads: Vec::new(),
            phases: Vec::new(),
            def: None,
        }
    }
}

/// Fills each node's `downstream` from the others' `upstream`.
fn link_downstream(nodes: &mut [PlannedNode]) {
    for i in 0..nodes.len() {
        for k in 0..nodes[i].upstream.len() {
            let u = nodes[i].upstream[k];
            nodes[u].downstream.push(i);
        }
    }
}

/// Whether deciding `node` evaluates anything against a template context: a `when`, a
/// `for_each`, or templates in its action. `input` and `sample` always get one.
fn needs_context(node: &NodeDef) -> bool {
    if node.when.is_some() || node.for_each.is_some() || node.repeat.is_some() {
        return true;
    }
    match &node.action {
        ActionDef::Render { template } => template::is_template(template),
        ActionDef::Tool { args, .. }
        | ActionDef::Workflow { inputs: args, .. }
        | ActionDef::Command { args, .. } => template::has_template(args),
        ActionDef::Wait { .. } => false,
        ActionDef::WaitFor { .. } => true,
        ActionDef::ListDir { path } | ActionDef::ReadFile { path, .. } => {
            template::is_template(path)
        }
        // A `where` is evaluated in the node's context, for each earlier run.
        ActionDef::History {
            workflow,
            limit,
            filter,
            ..
        } => {
            template::is_template(workflow)
                || matches!(limit, HistoryLimit::Template(_))
                || filter.is_some()
        }
        ActionDef::WriteFile { .. }
        | ActionDef::Input { .. }
        | ActionDef::Sample { .. }
        | ActionDef::Value { .. } => true,
    }
}

/// Whether the planned edges form a DAG (validation guarantees it; debug builds check).
fn is_acyclic(nodes: &[PlannedNode]) -> bool {
    let mut graph = petgraph::graph::DiGraph::<(), ()>::new();
    let vertices: Vec<_> = nodes.iter().map(|_| graph.add_node(())).collect();
    for (i, node) in nodes.iter().enumerate() {
        for &u in &node.upstream {
            graph.add_edge(vertices[u], vertices[i], ());
        }
    }
    !petgraph::algo::is_cyclic_directed(&graph)
}
