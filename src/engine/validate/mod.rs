//! Semantic checks of a decoded workflow: tools exist, `needs` form a DAG, templates and
//! expressions name only what exists and is upstream, inputs are consistent.
//!
//! Every check runs; all problems come back at once, each at its field's location.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use petgraph::Direction;
use petgraph::algo::{DfsSpace, has_path_connecting, tarjan_scc, toposort};
use petgraph::graph::{DiGraph, NodeIndex};
use serde_json::Value;

use super::definition::{
    ActionDef, HistoryLimit, InputDef, NodeDef, PAST_RUN_FIELDS, Problem, Problems, WorkflowDef,
};
use super::template::{self, ROOTS};
use inputs::show;

mod commands;
mod inputs;
pub use commands::command_problems;
pub use inputs::{check_inputs, inputs_schema};

/// Limits that depend on where a definition comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_nodes: usize,
    /// Whether nodes may touch the host's files (`write_file`, `read_file`, `list_dir`)
    /// and run the operator's commands (`command`, `command_allowed`). Only workflows the
    /// operator installed may: an inline definition comes from a client, the workspace
    /// may hold what no client should read (`.env`, tokens), and a command is a program
    /// run as the server's user, named by the operator for the operator's workflows.
    pub host_files: bool,
    /// The most runs a `history` node may read (`--max-history-rows`): a greater `limit`
    /// written in the definition is a problem here; one a template gives fails its node.
    pub max_history_rows: usize,
}

impl Limits {
    /// A workflow file under the workspace.
    pub const FILE: Limits = Limits {
        max_nodes: 10_000,
        host_files: true,
        max_history_rows: crate::engine::DEFAULT_MAX_HISTORY_ROWS,
    };
    /// A definition passed inline in a tool call.
    pub(crate) const INLINE: Limits = Limits {
        max_nodes: 1_000,
        host_files: false,
        max_history_rows: crate::engine::DEFAULT_MAX_HISTORY_ROWS,
    };

    /// These limits, with the operator's cap on the runs a `history` node reads.
    pub fn with_history_rows(self, max_history_rows: usize) -> Limits {
        Limits {
            max_history_rows,
            ..self
        }
    }
}

/// The functions templates have as globals; they may appear as variables.
/// (`today` and `fail` are ours: see `filters.rs`; `command_allowed`, see `command/set.rs`.)
const GLOBALS: &[&str] = &[
    "range",
    "dict",
    "debug",
    "namespace",
    "today",
    "fail",
    COMMAND_ALLOWED,
];

/// The function that tells a workflow whether a command may run: the operator's own, so
/// that an inline definition cannot read the names of the commands file through it.
const COMMAND_ALLOWED: &str = "command_allowed";

/// Checks `def`; `tool_exists` says whether a `tool` node's tool is registered.
pub fn validate(
    def: &WorkflowDef,
    tool_exists: &dyn Fn(&str) -> bool,
    limits: Limits,
) -> Result<(), Problems> {
    let mut check = Checker::new(def, limits);
    check.size(limits);
    check.phases();
    for node in def.nodes.values() {
        check.action(node, tool_exists, limits);
        check.needs(node);
    }
    check.cycles();
    for node in def.nodes.values() {
        check.node_references(node);
    }
    check.output_references();
    for (name, input) in &def.inputs {
        check.input_declaration(name, input);
    }
    match check.problems.is_empty() {
        true => Ok(()),
        false => Err(Problems(check.problems)),
    }
}

/// What a template or expression may name where it appears.
#[derive(Clone, Copy)]
struct Scope<'d> {
    /// The node it belongs to; `None` for the workflow's `output`.
    node: Option<&'d NodeDef>,
    /// Whether `item` and `index` exist there.
    item: bool,
    /// Whether `repeat` exists there: in a repeating node's action and `until`.
    repeat: bool,
    /// Whether `output` exists there: in `until` alone, as the iteration's output.
    output: bool,
    /// Whether `past` exists there: in a `history` node's `where` only.
    past: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Syntax {
    Template,
    Expression,
}

struct Checker<'d> {
    def: &'d WorkflowDef,
    problems: Vec<Problem>,
    /// Edges run from a needed node to the node that needs it.
    graph: DiGraph<usize, ()>,
    space: DfsSpace<NodeIndex, <DiGraph<usize, ()> as petgraph::visit::Visitable>::Map>,
    /// Each node's transitive upstream nodes as a bit set, computed on first use;
    /// `Some(None)` when `needs` has a cycle.
    upstream: Option<Option<Vec<Vec<u64>>>>,
    /// Whether the definition may touch the host ([`Limits::host_files`]).
    host_files: bool,
}

impl<'d> Checker<'d> {
    fn new(def: &'d WorkflowDef, limits: Limits) -> Checker<'d> {
        let mut graph = DiGraph::new();
        for index in 0..def.nodes.len() {
            graph.add_node(index);
        }
        for (index, node) in def.nodes.values().enumerate() {
            let known: HashSet<usize> = node
                .needs
                .iter()
                .filter_map(|need| def.nodes.get_index_of(need))
                .filter(|&need| need != index)
                .collect();
            for need in known {
                graph.add_edge(NodeIndex::new(need), NodeIndex::new(index), ());
            }
        }
        let space = DfsSpace::new(&graph);
        Checker {
            def,
            problems: Vec::new(),
            graph,
            space,
            upstream: None,
            host_files: limits.host_files,
        }
    }

    fn report(&mut self, path: &str, message: impl Into<String>) {
        self.problems
            .push(self.def.locations.problem(path, message));
    }

    fn size(&mut self, limits: Limits) {
        let count = self.def.nodes.len();
        if count > limits.max_nodes {
            let message = format!(
                "too many nodes: {count}, at most {} allowed",
                limits.max_nodes
            );
            self.report("nodes", message);
        }
    }

    fn action(&mut self, node: &NodeDef, tool_exists: &dyn Fn(&str) -> bool, limits: Limits) {
        match &node.action {
            ActionDef::Tool { name, .. } if !tool_exists(name) => {
                self.report(
                    &format!("nodes.{}.tool", node.id),
                    format!("unknown tool `{name}`"),
                );
            }
            ActionDef::WriteFile { .. }
            | ActionDef::ReadFile { .. }
            | ActionDef::ListDir { .. }
                if !limits.host_files =>
            {
                let kind = node.action.kind();
                let path = format!("nodes.{}.{kind}", node.id);
                let message = format!(
                    "{kind} is not allowed in inline definitions: they never touch the \
                     host's files (run an installed workflow instead)"
                );
                self.report(&path, message);
            }
            ActionDef::Command { name, .. } if !limits.host_files => {
                let message = format!(
                    "command (`{name}`) is not allowed in inline definitions: a client never \
                     runs a program; only the operator's installed workflows run the \
                     operator's commands"
                );
                self.report(&format!("nodes.{}.command", node.id), message);
            }
            ActionDef::History {
                limit: HistoryLimit::Fixed(limit),
                ..
            } if *limit as usize > limits.max_history_rows => {
                let message = format!(
                    "limit {limit} is over the most runs a history node may read \
                     ({}, --max-history-rows)",
                    limits.max_history_rows
                );
                self.report(&format!("nodes.{}.history.limit", node.id), message);
            }
            _ => {}
        }
    }

    /// Phases are all or nothing: progress counts either phases or nodes.
    fn phases(&mut self) {
        let phased = self
            .def
            .nodes
            .values()
            .filter(|n| n.phase.is_some())
            .count();
        if phased == 0 || phased == self.def.nodes.len() {
            return;
        }
        for node in self.def.nodes.values().filter(|n| n.phase.is_none()) {
            let message = "this node has no `phase`, and others have one: give every node a \
                           phase, or none";
            self.report(&format!("nodes.{}", node.id), message);
        }
    }

    fn needs(&mut self, node: &NodeDef) {
        let mut seen = HashSet::new();
        for (i, need) in node.needs.iter().enumerate() {
            let path = format!("nodes.{}.needs[{i}]", node.id);
            if need == &node.id {
                self.report(&path, format!("`{need}` cannot need itself"));
            } else if !self.def.nodes.contains_key(need) {
                self.report(&path, format!("unknown node `{need}`"));
            } else if !seen.insert(need) {
                self.report(&path, format!("`{need}` is listed twice in needs"));
            }
        }
    }
}

/// Cycles.
impl Checker<'_> {
    fn cycles(&mut self) {
        let mut components: Vec<Vec<usize>> = tarjan_scc(&self.graph)
            .into_iter()
            .filter(|component| component.len() > 1)
            .map(|component| component.into_iter().map(NodeIndex::index).collect())
            .collect();
        for component in &mut components {
            component.sort_unstable();
        }
        components.sort_unstable();
        for component in components {
            let path = self.cycle_through(&component);
            let ids: Vec<&str> = path
                .iter()
                .map(|&i| self.def.nodes[i].id.as_str())
                .collect();
            let message = format!(
                "needs form a cycle: {} (each node needs the one before it)",
                ids.join(" -> ")
            );
            self.report(&format!("nodes.{}.needs", ids[0]), message);
        }
    }

    /// A shortest cycle through the first node of a strongly connected component,
    /// as node indexes from that node back to it.
    fn cycle_through(&self, component: &[usize]) -> Vec<usize> {
        let members: HashSet<usize> = component.iter().copied().collect();
        let start = component[0];
        let mut parent: HashMap<usize, usize> = HashMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(at) = queue.pop_front() {
            let mut next: Vec<usize> = self
                .graph
                .neighbors(NodeIndex::new(at))
                .map(NodeIndex::index)
                .filter(|n| members.contains(n))
                .collect();
            next.sort_unstable();
            for n in next {
                if n == start {
                    let mut path = vec![at];
                    while let Some(&before) = parent.get(&path[path.len() - 1]) {
                        path.push(before);
                    }
                    path.reverse();
                    path.push(start);
                    return path;
                }
                if let Entry::Vacant(entry) = parent.entry(n) {
                    entry.insert(at);
                    queue.push_back(n);
                }
            }
        }
        vec![start, start]
    }
}

/// Templates and expressions.
impl<'d> Checker<'d> {
    fn node_references(&mut self, node: &'d NodeDef) {
        let id = &node.id;
        let scope = Scope {
            node: Some(node),
            item: node.for_each.is_some(),
            repeat: node.repeat.is_some(),
            output: false,
            past: false,
        };
        match &node.action {
            ActionDef::Tool { args, .. } => self.value(&format!("nodes.{id}.args"), args, scope),
            ActionDef::Workflow { inputs, .. } => {
                self.value(&format!("nodes.{id}.workflow.inputs"), inputs, scope)
            }
            ActionDef::Command { args, .. } => {
                self.value(&format!("nodes.{id}.command.args"), args, scope)
            }
            ActionDef::Input { schema, .. } => {
                self.value(&format!("nodes.{id}.input.schema"), schema, scope)
            }
            ActionDef::Value { expr, .. } => {
                let path = format!("nodes.{id}.value");
                self.text(&path, expr, Syntax::Expression, scope);
            }
            ActionDef::History {
                filter: Some(filter),
                ..
            } => {
                let path = format!("nodes.{id}.history.where");
                let scope = Scope {
                    past: true,
                    ..scope
                };
                self.text(&path, filter, Syntax::Expression, scope);
            }
            _ => {}
        }
        for (field, text) in action_templates(&node.action) {
            self.text(
                &format!("nodes.{id}.{field}"),
                text,
                Syntax::Template,
                scope,
            );
        }
        if let Some(repeat) = &node.repeat {
            let until = Scope {
                output: true,
                ..scope
            };
            let path = format!("nodes.{id}.repeat.until");
            self.text(&path, &repeat.until, Syntax::Expression, until);
        }
        // `when` and `for_each` are evaluated once for the node, before the fan-out and
        // before any iteration.
        let outer = Scope {
            item: false,
            repeat: false,
            ..scope
        };
        if let Some(when) = &node.when {
            self.text(&format!("nodes.{id}.when"), when, Syntax::Expression, outer);
        }
        if let Some(for_each) = &node.for_each {
            let path = format!("nodes.{id}.for_each");
            self.text(&path, for_each, Syntax::Expression, outer);
        }
    }

    fn output_references(&mut self) {
        let scope = Scope {
            node: None,
            item: false,
            repeat: false,
            output: false,
            past: false,
        };
        for (name, expr) in &self.def.output {
            self.text(&format!("output.{name}"), expr, Syntax::Expression, scope);
        }
        let text = self.def.result == crate::engine::definition::ResultForm::Text;
        if text && self.def.output.len() != 1 {
            self.report(
                "result",
                format!(
                    "`result = \"text\"` answers with the one value of `output`, which has {}",
                    self.def.output.len()
                ),
            );
        }
    }

    /// Every template string inside a JSON value (tool `args`, an `input` schema).
    fn value(&mut self, path: &str, value: &Value, scope: Scope<'d>) {
        match value {
            Value::String(text) if template::is_template(text) => {
                self.text(path, text, Syntax::Template, scope);
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.value(&format!("{path}[{i}]"), item, scope);
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    self.value(&format!("{path}.{key}"), item, scope);
                }
            }
            _ => {}
        }
    }

    fn text(&mut self, path: &str, text: &str, syntax: Syntax, scope: Scope<'d>) {
        if syntax == Syntax::Template && !template::is_template(text) {
            return; // plain text, taken literally: it names nothing
        }
        let references = match syntax {
            Syntax::Template => template::template_references(text),
            Syntax::Expression => template::expression_references(text),
        };
        let references = match references {
            Ok(references) => references,
            Err(error) => {
                let kind = if syntax == Syntax::Template {
                    "template"
                } else {
                    "expression"
                };
                return self.report(path, format!("{kind} syntax error: {error}"));
            }
        };
        let messages: BTreeSet<String> = references
            .iter()
            .filter_map(|reference| self.reference(reference, path, scope))
            .collect();
        for message in messages {
            self.report(path, message);
        }
    }

    /// What is wrong with one dotted reference, if anything.
    fn reference(&mut self, reference: &str, path: &str, scope: Scope<'d>) -> Option<String> {
        let mut parts = reference.split('.');
        let root = parts.next().unwrap_or_default();
        match root {
            "inputs" => {
                let name = parts.next()?;
                (!self.def.inputs.contains_key(name)).then(|| self.unknown_input(name))
            }
            "nodes" => self.node_reference(parts.next()?, parts.next(), scope),
            "past" if !scope.past => Some(
                "`past` is only available in a history node's `where`, where it is the \
                 earlier run being considered"
                    .to_owned(),
            ),
            "past" => {
                let field = parts.next()?;
                (!PAST_RUN_FIELDS.contains(&field)).then(|| {
                    format!(
                        "unknown field `past.{field}`; a past run has {}",
                        PAST_RUN_FIELDS.join(", ")
                    )
                })
            }
            "item" | "index" if !scope.item => Some(match scope.node {
                Some(node) if node.for_each.is_some() => {
                    format!(
                        "`{root}` is not available in `when` or `for_each`, which are evaluated once for the node"
                    )
                }
                _ if path.starts_with("output.") => {
                    format!("`{root}` is not available in `output`")
                }
                _ => format!("`{root}` is only available in a node with `for_each`"),
            }),
            "repeat" if !scope.repeat => Some(match scope.node {
                Some(node) if node.repeat.is_some() => {
                    "`repeat` is not available in `when` or `for_each`, which are evaluated \
                     once for the node, before its first iteration"
                        .to_owned()
                }
                _ => "`repeat` is only available in a node with `repeat`".to_owned(),
            }),
            "repeat" => match parts.next() {
                None | Some("iteration" | "previous") => None,
                Some(field) => Some(format!(
                    "unknown field `repeat.{field}`; `repeat` has `iteration` and `previous`"
                )),
            },
            "output" if !scope.output => Some(
                "`output` is only available in `repeat.until`, as the output of the \
                      iteration that just ended"
                    .to_owned(),
            ),
            "output" => None,
            COMMAND_ALLOWED if !self.host_files => Some(
                "`command_allowed` is not available in inline definitions, which run no \
                 command"
                    .to_owned(),
            ),
            _ if ROOTS.contains(&root) || GLOBALS.contains(&root) => None,
            _ => Some(format!(
                "unknown variable `{root}`; templates can use {}",
                ROOTS.join(", ")
            )),
        }
    }

    fn unknown_input(&self, name: &str) -> String {
        let declared: Vec<&str> = self.def.inputs.keys().map(String::as_str).collect();
        match declared.is_empty() {
            true => format!("unknown input `inputs.{name}`; this workflow declares no inputs"),
            false => format!(
                "unknown input `inputs.{name}`; declared inputs: {}",
                declared.join(", ")
            ),
        }
    }

    fn node_reference(&mut self, id: &str, field: Option<&str>, scope: Scope) -> Option<String> {
        let Some(target) = self.def.nodes.get_index_of(id) else {
            return Some(format!("unknown node `nodes.{id}`"));
        };
        if let Some(field) = field.filter(|field| !matches!(*field, "output" | "status" | "error"))
        {
            return Some(format!(
                "unknown field `nodes.{id}.{field}`; a node has `output`, `status` and `error`"
            ));
        }
        let node = scope.node?;
        if node.id == id {
            return Some(format!("`{id}` cannot refer to itself"));
        }
        if node.needs.iter().any(|need| need == id) {
            return None;
        }
        let here = self.def.nodes.get_index_of(&node.id)?;
        if self.is_upstream(target, here) {
            return None;
        }
        Some(format!(
            "`nodes.{id}` is not upstream of `{}`: add it to needs",
            node.id
        ))
    }
}

/// Upstream sets.
impl Checker<'_> {
    /// Whether node `target` is upstream of node `here`, transitively through `needs`.
    fn is_upstream(&mut self, target: usize, here: usize) -> bool {
        let graph = &self.graph;
        match self.upstream.get_or_insert_with(|| upstream_sets(graph)) {
            Some(sets) => sets[here][target / 64] & (1 << (target % 64)) != 0,
            None => {
                let (from, to) = (NodeIndex::new(target), NodeIndex::new(here));
                has_path_connecting(&self.graph, from, to, Some(&mut self.space))
            }
        }
    }
}

/// For each node, the bit set of its transitive upstream nodes; `None` with a cycle.
fn upstream_sets(graph: &DiGraph<usize, ()>) -> Option<Vec<Vec<u64>>> {
    let order = toposort(graph, None).ok()?;
    let words = graph.node_count().div_ceil(64);
    let mut sets = vec![Vec::new(); graph.node_count()];
    for node in order {
        let mut set = vec![0u64; words];
        for parent in graph.neighbors_directed(node, Direction::Incoming) {
            let p = parent.index();
            for (word, parent_word) in set.iter_mut().zip(&sets[p]) {
                *word |= parent_word;
            }
            set[p / 64] |= 1 << (p % 64);
        }
        sets[node.index()] = set;
    }
    Some(sets)
}

/// Declared inputs.
impl Checker<'_> {
    fn input_declaration(&mut self, name: &str, input: &InputDef) {
        let path = format!("inputs.{name}");
        let type_name = input.kind.name();
        for (i, choice) in input.choices.iter().flatten().enumerate() {
            if !input.kind.matches(choice) {
                let message = format!("enum value {choice} is not of type {type_name}");
                self.report(&format!("{path}.enum[{i}]"), message);
            }
        }
        let Some(default) = &input.default else {
            return;
        };
        let at = format!("{path}.default");
        if !input.kind.matches(default) {
            self.report(
                &at,
                format!("the default {default} is not of type {type_name}"),
            );
        } else if let Some(choices) = input.choices.as_ref().filter(|c| !c.contains(default)) {
            let message = format!("the default {default} is not one of {}", show(choices));
            self.report(&at, message);
        }
    }
}

/// The template fields of an action other than tool `args`, by their path in the node.
fn action_templates(action: &ActionDef) -> Vec<(&'static str, &str)> {
    match action {
        ActionDef::Render { template } => vec![("render", template)],
        ActionDef::WriteFile { path, content, .. } => {
            vec![("write_file.path", path), ("write_file.content", content)]
        }
        ActionDef::Input { message, .. } => vec![("input.message", message)],
        ActionDef::Sample { prompt, system, .. } => {
            let mut fields = vec![("sample.prompt", prompt.as_str())];
            fields.extend(system.as_deref().map(|system| ("sample.system", system)));
            fields
        }
        ActionDef::ListDir { path } => vec![("list_dir", path)],
        ActionDef::ReadFile { path, .. } => vec![("read_file.path", path)],
        ActionDef::WaitFor { duration } => vec![("wait", duration)],
        ActionDef::History {
            workflow, limit, ..
        } => {
            let mut fields = vec![("history.workflow", workflow.as_str())];
            if let HistoryLimit::Template(limit) = limit {
                fields.push(("history.limit", limit));
            }
            fields
        }
        ActionDef::Tool { .. }
        | ActionDef::Command { .. }
        | ActionDef::Wait { .. }
        | ActionDef::Value { .. }
        | ActionDef::Workflow { .. } => vec![],
    }
}

#[cfg(test)]
mod tests;
