//! The one place where our results and failures become protocol values.
//!
//! A failure the model should read is a tool result with `isError: true`; only a call
//! the server cannot route (an unknown tool) is a JSON-RPC error.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, Resource};

use super::envelope::{self, Envelope};
use crate::tools::ToolResult;

/// The envelope, both as `structuredContent` and as JSON text, `isError` on failure.
pub(super) fn tool_result(result: &ToolResult) -> CallToolResult {
    reply(envelope::of_result(result))
}

/// A `file://` URI of an absolute path, each byte outside the URI's unreserved characters
/// and `/` percent-encoded.
fn file_uri(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file://");
    for &byte in path.as_os_str().as_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(byte as char)
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    uri
}

/// `-32602`, as the MCP specification prescribes for an unknown tool.
pub(super) fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(format!("unknown tool: {name}"), None)
}

/// An envelope as structured and text content, `isError` unless ok, and a
/// `resource_link` to each file the call wrote.
pub(super) fn reply(reply: Envelope) -> CallToolResult {
    let mut result = if reply.ok {
        CallToolResult::structured(reply.body)
    } else {
        CallToolResult::structured_error(reply.body)
    };
    for (path, bytes) in reply.files {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut link = Resource::new(file_uri(&path), name).with_size(bytes);
        if path.extension().is_some_and(|e| e == "md") {
            link = link.with_mime_type("text/markdown");
        }
        result.content.push(ContentBlock::resource_link(link));
    }
    result
}
