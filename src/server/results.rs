//! The one place where our results and failures become protocol values.
//!
//! A failure the model should read is a tool result with `isError: true`; only a call
//! the server cannot route (an unknown tool) is a JSON-RPC error.

use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResult;

use super::envelope::{self, Envelope};
use crate::tools::ToolResult;

/// The envelope, both as `structuredContent` and as JSON text, `isError` on failure.
pub(super) fn tool_result(result: &ToolResult) -> CallToolResult {
    reply(envelope::of_result(result))
}

/// `-32602`, as the MCP specification prescribes for an unknown tool.
pub(super) fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(format!("unknown tool: {name}"), None)
}

/// An envelope as structured and text content, `isError` unless ok.
pub(super) fn reply(reply: Envelope) -> CallToolResult {
    if reply.ok {
        CallToolResult::structured(reply.body)
    } else {
        CallToolResult::structured_error(reply.body)
    }
}
