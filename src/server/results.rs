//! The one place where our results and failures become protocol values.
//!
//! A failure the model should read is a tool result with `isError: true`; only a call
//! the server cannot route (an unknown tool) is a JSON-RPC error.

use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResult;

use crate::tools::{ToolResult, envelope};

/// The envelope, both as `structuredContent` and as JSON text, `isError` on failure.
pub(super) fn tool_result(result: &ToolResult) -> CallToolResult {
    let body = envelope(result);
    match result {
        Ok(_) => CallToolResult::structured(body),
        Err(_) => CallToolResult::structured_error(body),
    }
}

/// `-32602`, as the MCP specification prescribes for an unknown tool.
pub(super) fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(format!("unknown tool: {name}"), None)
}

/// A workflow tool's reply: its body as structured and text content, `isError` unless ok.
pub(super) fn reply(reply: super::workflow_tools::Reply) -> CallToolResult {
    if reply.ok {
        CallToolResult::structured(reply.body)
    } else {
        CallToolResult::structured_error(reply.body)
    }
}
