//! Helpers for the engine tests: building plans from TOML, and running them with an
//! event recorder.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_task_server::engine::loader;
use mcp_task_server::engine::observer::{Event, Observer};
use mcp_task_server::engine::plan::Plan;
use mcp_task_server::engine::report::{NodeStatus, RunReport};
use mcp_task_server::engine::validate::{self, Limits};
use mcp_task_server::engine::{Engine, RunOptions};
use mcp_task_server::store::Store;
use mcp_task_server::todos::Tools;
use serde_json::{Map, Value};
use tempfile::TempDir;
use tokio::time::Instant;

/// Decodes and validates a workflow, returning every problem as text.
pub(crate) fn try_plan(toml: &str) -> Result<Arc<Plan>, Vec<String>> {
    let def = loader::parse_toml("test.toml", "test", toml).map_err(|problems| {
        problems
            .0
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    })?;
    validate::validate(&def, &Tools::exists, Limits::FILE).map_err(|problems| {
        problems
            .0
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    })?;
    Ok(Arc::new(Plan::new(Arc::new(def))))
}

/// A plan for a workflow that must be valid.
pub(crate) fn plan(toml: &str) -> Arc<Plan> {
    match try_plan(toml) {
        Ok(plan) => plan,
        Err(problems) => panic!("invalid workflow:\n{}\n---\n{toml}", problems.join("\n")),
    }
}

/// The validation problems of a workflow that must be invalid.
pub(crate) fn problems(toml: &str) -> Vec<String> {
    match try_plan(toml) {
        Ok(_) => panic!("expected validation problems for:\n{toml}"),
        Err(problems) => problems,
    }
}

/// Asserts that some problem contains `needle`.
pub(crate) fn assert_problem(problems: &[String], needle: &str) {
    assert!(
        problems.iter().any(|p| p.contains(needle)),
        "no problem contains {needle:?}:\n{}",
        problems.join("\n")
    );
}

/// An engine over a fresh in-memory store, with a temporary workspace.
pub(crate) struct Harness {
    pub(crate) engine: Engine,
    pub(crate) workspace: TempDir,
}

impl Harness {
    pub(crate) fn new() -> Harness {
        let workspace = tempfile::tempdir().expect("a temporary workspace");
        let store = Store::open_in_memory().expect("an in-memory store");
        let engine = Engine::new(Tools::new(store), workspace.path());
        Harness { engine, workspace }
    }

    pub(crate) fn store(&self) -> &Store {
        self.engine.todo_tools().store()
    }

    /// Runs `plan` with `inputs` (checked against its declarations) and records every event.
    pub(crate) async fn run(&self, plan: &Arc<Plan>, inputs: Value) -> Recorded {
        let recorder = Recorder::default();
        let options = RunOptions {
            observer: Some(recorder.observer()),
            ..RunOptions::default()
        };
        let inputs = checked_inputs(plan, inputs);
        let started = Instant::now();
        let report = self.engine.run(Arc::clone(plan), inputs, options).await;
        Recorded {
            elapsed: started.elapsed(),
            report,
            events: recorder.take(),
        }
    }
}

/// `inputs` checked against the plan's declarations, defaults filled in.
pub(crate) fn checked_inputs(plan: &Plan, inputs: Value) -> Map<String, Value> {
    let Value::Object(given) = inputs else {
        panic!("inputs must be an object, got {inputs}");
    };
    let def = plan.def.as_ref().expect("a plan built from a definition");
    validate::check_inputs(def, &given).unwrap_or_else(|problems| panic!("bad inputs: {problems}"))
}

/// One event of a run, owned, with the virtual time it happened at.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rec {
    Node {
        node: String,
        status: NodeStatus,
        reason: Option<String>,
        at: Instant,
    },
    AttemptFailed {
        node: String,
        attempt: u32,
        code: &'static str,
        retry_in: Option<Duration>,
        at: Instant,
    },
}

impl Rec {
    /// The node and status of a `NodeChanged` event.
    pub(crate) fn node_change(&self) -> Option<(&str, NodeStatus)> {
        match self {
            Rec::Node { node, status, .. } => Some((node, *status)),
            Rec::AttemptFailed { .. } => None,
        }
    }
}

/// Records node changes and failed attempts, in order.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    events: Arc<Mutex<Vec<Rec>>>,
}

impl Recorder {
    pub(crate) fn observer(&self) -> Arc<dyn Observer> {
        let events = Arc::clone(&self.events);
        Arc::new(move |event: &Event<'_>| {
            let rec = match event {
                Event::NodeChanged {
                    node,
                    status,
                    reason,
                    ..
                } => Rec::Node {
                    node: node.to_string(),
                    status: *status,
                    reason: reason.map(str::to_owned),
                    at: Instant::now(),
                },
                Event::AttemptFailed {
                    node,
                    attempt,
                    error,
                    retry_in,
                    ..
                } => Rec::AttemptFailed {
                    node: node.to_string(),
                    attempt: *attempt,
                    code: error.code.as_str(),
                    retry_in: *retry_in,
                    at: Instant::now(),
                },
                _ => return,
            };
            events.lock().unwrap().push(rec);
        })
    }

    pub(crate) fn count(&self) -> usize {
        self.events.lock().unwrap().len()
    }

    pub(crate) fn take(&self) -> Vec<Rec> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }
}

/// A finished run: its report, its events, and the virtual time it took.
pub(crate) struct Recorded {
    pub(crate) report: RunReport,
    pub(crate) events: Vec<Rec>,
    pub(crate) elapsed: Duration,
}

impl Recorded {
    pub(crate) fn status(&self, node: &str) -> NodeStatus {
        self.node(node).status
    }

    pub(crate) fn node(&self, node: &str) -> &mcp_task_server::engine::report::NodeReport {
        self.report
            .nodes
            .get(node)
            .unwrap_or_else(|| panic!("no node `{node}` in the report"))
    }

    pub(crate) fn output(&self, node: &str) -> &Value {
        self.node(node)
            .output
            .as_ref()
            .unwrap_or_else(|| panic!("node `{node}` has no output: {:?}", self.node(node)))
    }

    pub(crate) fn error_code(&self, node: &str) -> &'static str {
        self.node(node)
            .error
            .as_ref()
            .unwrap_or_else(|| panic!("node `{node}` has no error: {:?}", self.node(node)))
            .code
            .as_str()
    }

    pub(crate) fn error_message(&self, node: &str) -> &str {
        &self
            .node(node)
            .error
            .as_ref()
            .unwrap_or_else(|| panic!("node `{node}` has no error: {:?}", self.node(node)))
            .message
    }

    pub(crate) fn reason(&self, node: &str) -> Option<&str> {
        self.node(node).reason.as_deref()
    }

    /// The position of the first event where `node` entered `status`.
    pub(crate) fn position(&self, node: &str, status: NodeStatus) -> usize {
        self.events
            .iter()
            .position(|e| e.node_change() == Some((node, status)))
            .unwrap_or_else(|| panic!("`{node}` never became {status:?}: {:#?}", self.events))
    }

    /// The virtual time at which `node` entered `status`.
    pub(crate) fn time_of(&self, node: &str, status: NodeStatus) -> Instant {
        match &self.events[self.position(node, status)] {
            Rec::Node { at, .. } => *at,
            Rec::AttemptFailed { .. } => unreachable!("position finds node changes only"),
        }
    }

    /// The nodes that became `running` at or after event `from`.
    pub(crate) fn started_from(&self, from: usize) -> Vec<&str> {
        self.events[from..]
            .iter()
            .filter_map(Rec::node_change)
            .filter(|(_, status)| *status == NodeStatus::Running)
            .map(|(node, _)| node)
            .collect()
    }
}
