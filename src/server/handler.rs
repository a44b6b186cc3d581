//! `ServerHandler`: discovery and dispatch of tool calls.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::json;

use super::Server;
use super::results;
use crate::tools::{Origin, ToolSpec, Tools};

const INSTRUCTIONS: &str = "A task manager. add_task creates todos; list_tasks and \
search_tasks read them; complete_task marks one done; delete_task removes one permanently \
and needs the user's explicit consent (confirm: true). Every result is {ok, data} or \
{ok: false, error: {code, message}}.";

/// Turns our tool definition into the protocol's, schemas and annotations included.
fn published_tool(spec: &ToolSpec) -> Tool {
    let tool = json!({
        "name": spec.name,
        "title": spec.title,
        "description": spec.description,
        "inputSchema": spec.input_schema,
        "outputSchema": spec.output_schema(),
        "annotations": {
            "title": spec.title,
            "readOnlyHint": spec.effects.read_only,
            "destructiveHint": spec.effects.destructive,
            "idempotentHint": spec.effects.idempotent,
            "openWorldHint": false
        }
    });
    serde_json::from_value(tool).expect("our tool definitions match the protocol's shape")
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
        let tools = Tools::specs().iter().map(published_tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        match self.tools.invoke(&request.name, &args, Origin::default()) {
            Some(result) => Ok(results::tool_result(&result).into()),
            None => Err(results::unknown_tool(&request.name)),
        }
    }
}
