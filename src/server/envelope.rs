//! The `{ok: true, data}` / `{ok: false, error: {code, message}, data?}` envelope every
//! tool answers with: the one place it is built, and the one place its output schema is.

use serde_json::{Map, Value, json};

use crate::todos::ToolResult;

/// A tool's answer, before it becomes protocol content.
pub(super) struct Envelope {
    pub ok: bool,
    pub body: Value,
    /// Files the call wrote, as absolute paths: the result links to each.
    pub files: Vec<(std::path::PathBuf, u64)>,
}

/// Success, carrying `data`.
pub(super) fn ok(data: Value) -> Envelope {
    Envelope {
        ok: true,
        // Not `json!`: it would serialise `data` into a copy of itself.
        body: Value::Object(Map::from_iter([
            ("ok".to_owned(), Value::Bool(true)),
            ("data".to_owned(), data),
        ])),
        files: Vec::new(),
    }
}

/// Failure with a code and a message; `data` when there is something to show anyway (a
/// failed run's report).
pub(super) fn failed(code: &str, message: &str, data: Option<Value>) -> Envelope {
    let mut body = json!({ "ok": false, "error": { "code": code, "message": message } });
    if let Some(data) = data {
        body["data"] = data;
    }
    Envelope {
        ok: false,
        body,
        files: Vec::new(),
    }
}

/// A task-manager tool's result.
pub(super) fn of_result(result: ToolResult) -> Envelope {
    match result {
        Ok(data) => ok(data),
        Err(error) => failed(error.code.as_str(), &error.message, None),
    }
}

/// The error codes of the task-manager tools, which every tool may answer with.
pub(super) const TOOL_CODES: &[&str] = &["invalid_input", "not_found", "internal_error"];

/// The error codes of a workflow run, beside [`TOOL_CODES`].
pub(super) const RUN_CODES: &[&str] = &[
    "invalid_input",
    "not_found",
    "internal_error",
    "run_failed",
    "run_cancelled",
    "too_many_runs",
];

/// The published output schema of a tool whose `data` fits `data` and whose errors carry
/// one of `codes`: either `{ok: true, data}` or `{ok: false, error, data?}`.
pub(super) fn schema(data: &Value, codes: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": {
            "ok": { "type": "boolean" },
            "data": data,
            "error": {
                "type": "object",
                "properties": {
                    "code": { "type": "string", "enum": codes },
                    "message": { "type": "string" }
                },
                "required": ["code", "message"],
                "additionalProperties": false
            }
        },
        "required": ["ok"],
        "additionalProperties": false,
        "oneOf": [
            { "properties": { "ok": { "const": true } }, "required": ["data"] },
            { "properties": { "ok": { "const": false } }, "required": ["error"] }
        ]
    })
}
