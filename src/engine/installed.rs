//! The workflows a server or the CLI knows: the built-in ones compiled into the binary,
//! and the files of a workflows folder. A file with problems is reported and left out.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;

use super::definition::{Problems, WorkflowDef};
use super::loader;
use super::plan::Plan;
use super::validate::{self, Limits};
use crate::todos::Tools;

/// The workflow files shipped in `workflows/`, compiled in: (file name, text).
const BUILT_IN: &[(&str, &str)] = &[
    (
        "adr_bootstrap_validation.toml",
        include_str!("../../workflows/adr_bootstrap_validation.toml"),
    ),
    (
        "adr_check.toml",
        include_str!("../../workflows/adr_check.toml"),
    ),
    (
        "adr_validation.toml",
        include_str!("../../workflows/adr_validation.toml"),
    ),
    (
        "bootstrap_iteration.toml",
        include_str!("../../workflows/bootstrap_iteration.toml"),
    ),
    (
        "bootstrap_validation_loop.toml",
        include_str!("../../workflows/bootstrap_validation_loop.toml"),
    ),
    (
        "deployment_readiness.toml",
        include_str!("../../workflows/deployment_readiness.toml"),
    ),
    (
        "interactive_adr_planning.toml",
        include_str!("../../workflows/interactive_adr_planning.toml"),
    ),
    (
        "release_checklist.toml",
        include_str!("../../workflows/release_checklist.toml"),
    ),
    (
        "research.toml",
        include_str!("../../workflows/research.toml"),
    ),
    (
        "troubleshoot.toml",
        include_str!("../../workflows/troubleshoot.toml"),
    ),
    (
        "troubleshoot_outcome.toml",
        include_str!("../../workflows/troubleshoot_outcome.toml"),
    ),
];

/// A loaded, validated workflow and its compiled plan.
#[derive(Debug, Clone)]
pub struct Entry {
    pub def: Arc<WorkflowDef>,
    pub plan: Arc<Plan>,
    /// The file it came from, or `built-in`.
    pub origin: String,
}

/// A file that could not be loaded, and why.
#[derive(Debug, Clone)]
pub struct Rejected {
    pub origin: String,
    pub problems: Problems,
}

#[derive(Debug, Clone, Default)]
pub struct Installed {
    entries: IndexMap<String, Entry>,
}

/// Decodes and validates one workflow file's text.
#[cfg(test)]
pub(crate) fn load_text(source: &str, text: &str) -> Result<WorkflowDef, Problems> {
    load_text_within(source, text, Limits::FILE)
}

/// Decodes and validates one workflow file's text under `limits`.
fn load_text_within(source: &str, text: &str, limits: Limits) -> Result<WorkflowDef, Problems> {
    let stem = Path::new(source)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("workflow");
    loader::parse_toml_checked(source, stem, text, &|def| {
        validate::validate(def, &Tools::exists, limits)
    })
}

/// Reads, decodes and validates one workflow file under `limits` (a file's, with the
/// operator's caps).
pub(crate) fn load_file_within(path: &Path, limits: Limits) -> Result<WorkflowDef, Problems> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        let locations = super::definition::Locations::new(source.as_str());
        Problems(vec![
            locations.problem("", format!("cannot read the file: {e}")),
        ])
    })?;
    load_text_within(&source, &text, limits)
}

/// The `.toml` files of `dir`, sorted by name.
pub(crate) fn workflow_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml") && path.is_file())
        .collect();
    files.sort();
    Ok(files)
}

impl Installed {
    /// The built-in workflows, then those of `dir` (a file overrides a built-in of the
    /// same name). Returns the workflows and every file that was left out.
    pub fn load(dir: Option<&Path>) -> (Installed, Vec<Rejected>) {
        Installed::load_within(dir, Limits::FILE)
    }

    /// [`Installed::load`], each file validated under `limits` (a file's, with the
    /// operator's caps).
    pub fn load_within(dir: Option<&Path>, limits: Limits) -> (Installed, Vec<Rejected>) {
        let mut installed = Installed::default();
        let mut rejected = Vec::new();
        for (file, text) in BUILT_IN {
            let origin = format!("built-in:{file}");
            match load_text_within(&origin, text, limits) {
                Ok(def) => installed.insert(def, origin),
                Err(problems) => rejected.push(Rejected { origin, problems }),
            }
        }
        let Some(dir) = dir else {
            return (installed, rejected);
        };
        let files = match workflow_files(dir) {
            Ok(files) => files,
            Err(e) => {
                let origin = dir.display().to_string();
                let problem = super::definition::Locations::new(origin.as_str())
                    .problem("", format!("cannot read the folder: {e}"));
                rejected.push(Rejected {
                    origin,
                    problems: Problems(vec![problem]),
                });
                return (installed, rejected);
            }
        };
        let mut from_dir = std::collections::HashSet::new();
        for path in files {
            let origin = path.display().to_string();
            match load_file_within(&path, limits) {
                Ok(def) if !from_dir.insert(def.name.clone()) => {
                    let problem = def.locations.problem(
                        "name",
                        format!(
                            "a workflow named `{}` is already loaded from this folder",
                            def.name
                        ),
                    );
                    rejected.push(Rejected {
                        origin,
                        problems: Problems(vec![problem]),
                    });
                }
                Ok(def) => installed.insert(def, origin),
                Err(problems) => rejected.push(Rejected { origin, problems }),
            }
        }
        installed.check_calls(&mut rejected);
        (installed, rejected)
    }

    /// Leaves out each workflow with a `workflow` node that names no installed workflow,
    /// or that calls itself through the workflows it calls, naming the cycle; again until
    /// none is left out, since a workflow left out leaves out those that call it.
    fn check_calls(&mut self, rejected: &mut Vec<Rejected>) {
        let mut left_out = std::collections::HashSet::new();
        loop {
            let mut problems: IndexMap<String, Vec<super::definition::Problem>> = IndexMap::new();
            for entry in self.entries.values() {
                for (id, callee) in calls(&entry.def) {
                    if !self.entries.contains_key(callee) {
                        let message = match left_out.contains(callee) {
                            true => format!(
                                "calls workflow `{callee}`, which is left out for its problems"
                            ),
                            false => format!("calls workflow `{callee}`, which is not installed"),
                        };
                        let problem = entry
                            .def
                            .locations
                            .problem(&format!("nodes.{id}.workflow"), message);
                        problems
                            .entry(entry.def.name.clone())
                            .or_default()
                            .push(problem);
                    }
                }
            }
            for cycle in self.cycles() {
                let path = cycle.join(" → ");
                for name in &cycle[..cycle.len() - 1] {
                    let def = &self.entries[name.as_str()].def;
                    let message = format!("workflows call each other in a cycle: {path}");
                    let problem = def.locations.problem("", message);
                    problems.entry(name.clone()).or_default().push(problem);
                }
            }
            if problems.is_empty() {
                return;
            }
            for (name, problems) in problems {
                if let Some(entry) = self.entries.shift_remove(&name) {
                    left_out.insert(name);
                    rejected.push(Rejected {
                        origin: entry.origin,
                        problems: Problems(problems),
                    });
                }
            }
        }
    }

    /// The cycles of calls among the installed workflows, each as the path that closes
    /// it (its first name again at its end); one per strongly connected group.
    fn cycles(&self) -> Vec<Vec<String>> {
        let mut graph = petgraph::graph::DiGraph::<&str, ()>::new();
        let index: std::collections::HashMap<&str, _> = (self.entries.keys())
            .map(|name| (name.as_str(), graph.add_node(name.as_str())))
            .collect();
        for entry in self.entries.values() {
            for (_, callee) in calls(&entry.def) {
                if let Some(&to) = index.get(callee) {
                    graph.update_edge(index[entry.def.name.as_str()], to, ());
                }
            }
        }
        let mut cycles = Vec::new();
        for group in petgraph::algo::tarjan_scc(&graph) {
            // From the first by name, so that a cycle is always told the same way.
            let first = *group.iter().min_by_key(|&&n| graph[n]).expect("not empty");
            let closed = group.len() > 1 || graph.contains_edge(first, first);
            if !closed {
                continue;
            }
            // A path around the group: from its first workflow, along calls that stay in
            // it, until the path comes back to a workflow already on it.
            let mut path = vec![first];
            loop {
                let at = *path.last().expect("not empty");
                let next = (graph.neighbors(at))
                    .filter(|n| group.contains(n))
                    .min_by_key(|n| n.index())
                    .expect("a workflow in a cycle calls one in it");
                if let Some(start) = path.iter().position(|&n| n == next) {
                    let mut cycle: Vec<String> =
                        path[start..].iter().map(|&n| graph[n].to_owned()).collect();
                    cycle.push(graph[next].to_owned());
                    cycles.push(cycle);
                    break;
                }
                path.push(next);
            }
        }
        cycles
    }

    fn insert(&mut self, def: WorkflowDef, origin: String) {
        let def = Arc::new(def);
        let plan = Arc::new(Plan::new(Arc::clone(&def)));
        self.entries
            .insert(def.name.clone(), Entry { def, plan, origin });
    }

    /// The text of the file workflow `name` was loaded from: a built-in's own, or the
    /// file of the workflows folder as it is now.
    pub fn source(&self, name: &str) -> Option<String> {
        let entry = self.get(name)?;
        match entry.origin.strip_prefix("built-in:") {
            Some(file) => BUILT_IN
                .iter()
                .find(|(name, _)| *name == file)
                .map(|(_, text)| (*text).to_owned()),
            None => std::fs::read_to_string(&entry.origin).ok(),
        }
    }

    /// A problem for each `workflow` node of `def` (an inline definition) that names no
    /// installed workflow.
    pub fn unknown_calls(&self, def: &WorkflowDef) -> Vec<super::definition::Problem> {
        calls(def)
            .filter(|(_, callee)| !self.entries.contains_key(*callee))
            .map(|(id, callee)| {
                let message = format!("calls workflow `{callee}`, which is not installed");
                def.locations
                    .problem(&format!("nodes.{id}.workflow"), message)
            })
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }
}

/// The workflows `def`'s `workflow` nodes call: (node id, workflow name).
fn calls(def: &WorkflowDef) -> impl Iterator<Item = (&str, &str)> {
    def.nodes
        .iter()
        .filter_map(|(id, node)| match &node.action {
            super::definition::ActionDef::Workflow { name, .. } => {
                Some((id.as_str(), name.as_str()))
            }
            _ => None,
        })
}

/// Logs each workflow file left out of the installed workflows, with its problems.
pub(crate) fn log_rejected(rejected: &[Rejected]) {
    for file in rejected {
        for problem in &file.problems.0 {
            tracing::error!("{problem}");
        }
        tracing::warn!(file = %file.origin, "workflow file left out because of the problems above");
    }
}
