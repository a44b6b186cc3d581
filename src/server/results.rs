//! The one place where our results and failures become protocol values.
//!
//! A failure the model should read is a tool result with `isError: true`; only a call
//! the server cannot route (an unknown tool) is a JSON-RPC error.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, Resource, TASKS_EXTENSION_ID};
use serde_json::{Map, Value};

use crate::app::envelope::{self, Envelope};
use crate::engine::definition::ResultForm;
use crate::todos::ToolResult;

/// The envelope, both as `structuredContent` and as JSON text, `isError` on failure.
pub(super) fn tool_result(result: ToolResult) -> CallToolResult {
    reply(envelope::of_result(result))
}

/// `-32602`, as the MCP specification prescribes for an unknown tool.
pub(super) fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(format!("unknown tool: {name}"), None)
}

/// `-32021` for a 2026-07-28 call of a tool that runs only as a task, from a client that
/// did not declare the task extension.
pub(super) fn task_required(name: &str) -> McpError {
    tasks_extension_required(format!(
        "tool `{name}` runs only as a task; declare the {TASKS_EXTENSION_ID} extension"
    ))
}

/// `-32021` naming the tasks extension as the capability a request needs, with `message`.
pub(super) fn tasks_extension_required(message: String) -> McpError {
    let tasks = serde_json::json!({ "extensions": { TASKS_EXTENSION_ID: {} } });
    let required = serde_json::from_value(tasks).expect("client capabilities");
    let mut error = McpError::missing_required_client_capability(required);
    error.message = message.into();
    error
}

/// `-32601` for a 2025-11-25 call of a tool that runs only as a task, made without
/// `params.task`, as that protocol prescribes.
pub(super) fn task_required_2025(name: &str) -> McpError {
    McpError::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!("tool `{name}` runs only as a task: call it with `params.task`"),
        None,
    )
}

/// `-32601` for a 2025-11-25 task requested of a tool that never runs as one.
pub(super) fn task_forbidden(name: &str) -> McpError {
    McpError::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!("tool `{name}` does not run as a task: call it without `params.task`"),
        None,
    )
}

/// An envelope as its tool answers it: as [`reply`] does, or, for a workflow whose
/// `result` is `text`, the one value of the run's output as text (a string as it is,
/// anything else as JSON); a failure is its message, `isError`.
pub(super) fn reply_as(envelope: Envelope, form: ResultForm) -> CallToolResult {
    if form == ResultForm::Envelope {
        return reply(envelope);
    }
    if !envelope.ok {
        let message = envelope.body["error"]["message"]
            .as_str()
            .unwrap_or("the run failed");
        return CallToolResult::error(vec![ContentBlock::text(message.to_owned())]);
    }
    let output = envelope.body["data"]["output"].as_object();
    let text = match output.and_then(|output| output.values().next()) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// An envelope as structured and text content, `isError` unless ok, and a
/// `resource_link` to each file the call wrote.
pub(super) fn reply(reply: Envelope) -> CallToolResult {
    // rmcp's `structured` constructors would do the same, but through `Display`, which
    // formats the text a few bytes at a time: twice the cost of serialising it at once.
    let text = serde_json::to_string(&reply.body).expect("a JSON value serialises");
    let content = vec![ContentBlock::text(text)];
    let mut result = if reply.ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    result.structured_content = Some(reply.body);
    for (path, bytes) in reply.files {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut link = Resource::new(crate::app::resources::file_uri(&path), name).with_size(bytes);
        if path.extension().is_some_and(|e| e == "md") {
            link = link.with_mime_type("text/markdown");
        }
        result.content.push(ContentBlock::resource_link(link));
    }
    result
}

/// A finished task's result as a JSON object, without the `resultType` that rmcp puts on
/// a call's own reply: neither the 2025-11-25 `tasks/result` nor a SEP-2663 inlined
/// result carries one.
///
/// Built field by field, moving the structured content: serialising the whole result
/// into a `Value` would copy that content once more, and it is most of a run's reply.
pub(super) fn task_result(result: CallToolResult) -> Result<Map<String, Value>, McpError> {
    let serialises = |_| McpError::internal_error("a tool result serialises", None);
    let mut object = Map::new();
    object.insert(
        "content".into(),
        serde_json::to_value(&result.content).map_err(serialises)?,
    );
    if let Some(structured) = result.structured_content {
        object.insert("structuredContent".into(), structured);
    }
    if let Some(is_error) = result.is_error {
        object.insert("isError".into(), Value::Bool(is_error));
    }
    if let Some(meta) = result.meta {
        object.insert(
            "_meta".into(),
            serde_json::to_value(meta).map_err(serialises)?,
        );
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::MetaObject;
    use serde_json::json;

    #[test]
    fn a_task_result_is_the_call_result_without_its_result_type() {
        let mut with_meta = CallToolResult::success(vec![ContentBlock::text("hi")]);
        with_meta.meta = Some(MetaObject(json!({"k": 1}).as_object().unwrap().clone()));
        let results = [
            reply(envelope::ok(json!({"n": [1, 2], "s": "x"}))),
            reply(envelope::failed(
                crate::todos::ErrorCode::InvalidInput,
                "no title",
                None,
            )),
            reply(Envelope {
                files: vec![("/tmp/a b.md".into(), 3)],
                ..envelope::ok(json!(null))
            }),
            with_meta,
        ];
        for result in results {
            let Value::Object(mut expected) = serde_json::to_value(&result).unwrap() else {
                panic!("a result is an object");
            };
            assert!(expected.shift_remove("resultType").is_some());
            let object = task_result(result).unwrap();
            assert_eq!(Value::Object(object), Value::Object(expected));
        }
    }
}
