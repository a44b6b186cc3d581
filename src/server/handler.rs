//! `ServerHandler`: discovery and dispatch of tool calls.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelledNotificationParam, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::workflow_tools::{self, LIST_WORKFLOWS, RUN_WORKFLOW};
use super::{Server, progress, results};
use crate::engine::RunOptions;
use crate::engine::journal::RunOrigin;
use crate::tools::{Effects, Tools};

const INSTRUCTIONS: &str = "A task manager and workflow engine. add_task creates todos; \
list_tasks and search_tasks read them; complete_task marks one done; delete_task removes \
one permanently and needs the user's explicit consent (confirm: true). list_workflows shows \
the multi-step workflows and run_workflow runs one. Every result is {ok, data} or \
{ok: false, error: {code, message}}.";

struct Published<'a> {
    name: &'a str,
    title: &'a str,
    description: &'a str,
    input_schema: Value,
    output_schema: Value,
    effects: Effects,
}

/// Turns a definition into the protocol's, schemas and annotations included.
fn published_tool(p: Published<'_>) -> Tool {
    let tool = json!({
        "name": p.name,
        "title": p.title,
        "description": p.description,
        "inputSchema": p.input_schema,
        "outputSchema": p.output_schema,
        "annotations": {
            "title": p.title,
            "readOnlyHint": p.effects.read_only,
            "destructiveHint": p.effects.destructive,
            "idempotentHint": p.effects.idempotent,
            "openWorldHint": false
        }
    });
    serde_json::from_value(tool).expect("our tool definitions match the protocol's shape")
}

impl Server {
    fn all_tools(&self) -> Vec<Tool> {
        let mut tools: Vec<Tool> = Tools::specs()
            .iter()
            .map(|spec| {
                published_tool(Published {
                    name: spec.name,
                    title: spec.title,
                    description: spec.description,
                    input_schema: spec.input_schema.clone(),
                    output_schema: spec.output_schema(),
                    effects: spec.effects,
                })
            })
            .collect();
        for (name, title, description, input_schema, effects) in workflow_tools::fixed_tools() {
            tools.push(published_tool(Published {
                name,
                title,
                description,
                input_schema,
                output_schema: workflow_tools::output_schema(),
                effects,
            }));
        }
        for entry in self.exposed() {
            let description = format!(
                "Runs the workflow `{}`: {}",
                entry.def.name, entry.def.description
            );
            tools.push(published_tool(Published {
                name: &entry.def.name,
                title: &entry.def.name,
                description: &description,
                input_schema: workflow_tools::inputs_schema(&entry.def),
                output_schema: workflow_tools::output_schema(),
                effects: workflow_tools::RUN_EFFECTS,
            }));
        }
        tools
    }

    /// Workflows published as tools of their own (never shadowing a fixed tool).
    fn exposed(&self) -> impl Iterator<Item = &crate::engine::catalog::Entry> {
        self.catalog.entries().filter(|entry| {
            let name = entry.def.name.as_str();
            entry.def.expose_as_tool
                && !Tools::exists(name)
                && name != LIST_WORKFLOWS
                && name != RUN_WORKFLOW
        })
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                env!("CARGO_PKG_NAME"),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.all_tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let name = request.name.as_ref();
        if Tools::exists(name) {
            let result = self.engine.call_tool(name, args).await;
            let result = result.expect("the engine runs every registered tool");
            return Ok(results::tool_result(&result).into());
        }
        if name == LIST_WORKFLOWS {
            let reply = workflow_tools::list_workflows(&self.catalog, self.engine.tools(), &args);
            return Ok(results::reply(reply).into());
        }
        if name == RUN_WORKFLOW || self.exposed().any(|e| e.def.name == name) {
            let request = context.id.to_string();
            let mut options = RunOptions {
                origin: RunOrigin::Mcp,
                ..RunOptions::default()
            };
            self.lock_runs()
                .insert(request.clone(), options.cancel.clone());
            let mut forwarder = None;
            if let Some(token) = context.meta.get_progress_token() {
                let (observer, task) = progress::reporter(context.peer.clone(), token);
                options.observer = Some(observer);
                forwarder = Some(task);
            }
            let reply =
                workflow_tools::run_workflow(&self.engine, &self.catalog, name, &args, options)
                    .await;
            self.lock_runs().remove(&request);
            if let Some(task) = forwarder {
                // The run and its observer are gone; wait for the last notifications.
                let _ = task.await;
            }
            return Ok(results::reply(reply).into());
        }
        Err(results::unknown_tool(name))
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        let Some(request) = notification.request_id else {
            return;
        };
        if let Some(cancel) = self.lock_runs().get(&request.to_string()) {
            cancel.cancel();
        }
    }
}
