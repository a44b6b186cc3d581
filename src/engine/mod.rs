//! The DAG workflow engine: definitions, validation, planning and scheduling.
//!
//! Every tool call is a run: a direct `tools/call` of a task-manager tool is a one-node
//! workflow ([`Engine::call_tool`]) on the same path as a `tool` node of a workflow.
//! Invariant: the engine knows no SQL and no MCP; tools reach the store through `tools`.

pub mod actions;
pub mod attempt;
pub mod catalog;
pub mod definition;
pub mod duration;
pub mod loader;
pub mod observer;
pub mod plan;
pub mod report;
mod scheduler;
pub mod template;
pub mod trigger;
pub mod validate;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use actions::{ActionEnv, Interaction};
use observer::Observer;
use plan::Plan;
use report::{NodeStatus, RunReport};

use crate::tools::{ToolError, ToolResult, Tools};

/// Per-run settings.
#[derive(Default, Clone)]
pub struct RunOptions {
    pub observer: Option<Arc<dyn Observer>>,
    /// Who answers `input` and `sample` nodes; without one, they fail (or take their default).
    pub interaction: Option<Arc<dyn Interaction>>,
    /// Cancel this token to cancel the run.
    pub cancel: CancellationToken,
}

/// A run started in the background.
pub struct RunHandle {
    pub run_id: String,
    pub cancel: CancellationToken,
    pub join: JoinHandle<RunReport>,
}

/// The engine: cheap to clone, shared by every run.
#[derive(Clone)]
pub struct Engine {
    env: Arc<ActionEnv>,
    /// The one-node plans behind direct tool calls, built once.
    single: Arc<HashMap<&'static str, Arc<Plan>>>,
}

impl Engine {
    pub fn new(tools: Tools, workspace: &Path) -> Engine {
        let single = Tools::specs()
            .into_iter()
            .map(|spec| (spec.name, Arc::new(Plan::single_tool(spec.name))))
            .collect();
        Engine {
            env: Arc::new(ActionEnv {
                tools,
                workspace: workspace.to_path_buf(),
                interaction: None,
            }),
            single: Arc::new(single),
        }
    }

    pub fn tools(&self) -> &Tools {
        &self.env.tools
    }

    pub fn workspace(&self) -> &Path {
        &self.env.workspace
    }

    fn env_for(&self, options: &RunOptions) -> Arc<ActionEnv> {
        match &options.interaction {
            None => Arc::clone(&self.env),
            Some(interaction) => Arc::new(ActionEnv {
                interaction: Some(Arc::clone(interaction)),
                ..(*self.env).clone()
            }),
        }
    }

    /// Runs `plan` to the end on the current task. `inputs` must have passed
    /// [`validate::check_inputs`] (or be a tool's raw arguments, for a one-node plan).
    pub async fn run(
        &self,
        plan: Arc<Plan>,
        inputs: Map<String, Value>,
        options: RunOptions,
    ) -> RunReport {
        let run_id: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        self.run_with_id(plan, inputs, options, run_id).await
    }

    async fn run_with_id(
        &self,
        plan: Arc<Plan>,
        inputs: Map<String, Value>,
        options: RunOptions,
        run_id: Arc<str>,
    ) -> RunReport {
        let env = self.env_for(&options);
        scheduler::Run::new(plan, env, run_id, inputs, options.observer, options.cancel)
            .drive()
            .await
    }

    /// Starts `plan` as a task on the runtime and returns at once.
    pub fn start(
        &self,
        plan: Arc<Plan>,
        inputs: Map<String, Value>,
        options: RunOptions,
    ) -> RunHandle {
        let run_id: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let cancel = options.cancel.clone();
        let engine = self.clone();
        let id = Arc::clone(&run_id);
        let join = tokio::spawn(async move { engine.run_with_id(plan, inputs, options, id).await });
        RunHandle {
            run_id: run_id.to_string(),
            cancel,
            join,
        }
    }

    /// A direct call of a task-manager tool, as a one-node workflow. `None` if no such tool.
    pub async fn call_tool(&self, name: &str, args: Map<String, Value>) -> Option<ToolResult> {
        let plan = Arc::clone(self.single.get(name)?);
        let report = self.run(plan, args, RunOptions::default()).await;
        let (_, node) = report
            .nodes
            .into_iter()
            .next()
            .expect("a one-node plan has one node");
        Some(match (node.status, node.output, node.error) {
            (NodeStatus::Succeeded, Some(data), _) => Ok(data),
            (_, _, Some(error)) => Err(error.as_tool_error().unwrap_or_else(ToolError::internal)),
            _ => Err(ToolError::internal()),
        })
    }
}
