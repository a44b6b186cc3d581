//! The `{ok: true, data}` / `{ok: false, error: {code, message}, data?}` envelope every
//! tool answers with: the one place it is built, and the one place its output schema is.

use serde_json::{Map, Value, json};

pub(crate) use crate::todos::TOOL_CODES;
use crate::todos::{ErrorCode, ToolError, ToolResult};

/// A tool's answer, before it becomes protocol content.
#[derive(Debug)]
pub(crate) struct Envelope {
    pub ok: bool,
    pub body: Value,
    /// Files the call wrote, as absolute paths: the result links to each.
    pub files: Vec<(std::path::PathBuf, u64)>,
}

/// Success, carrying `data`.
pub(crate) fn ok(data: Value) -> Envelope {
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
pub(crate) fn failed(code: ErrorCode, message: &str, data: Option<Value>) -> Envelope {
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

/// A todo tool's failure, as it was raised.
pub(crate) fn of_error(error: &ToolError) -> Envelope {
    failed(error.code, &error.message, None)
}

/// A todo tool's result.
pub(crate) fn of_result(result: ToolResult) -> Envelope {
    match result {
        Ok(data) => ok(data),
        Err(error) => of_error(&error),
    }
}

/// The error codes of a workflow run, beside [`TOOL_CODES`].
pub(crate) const RUN_CODES: &[ErrorCode] = &[
    ErrorCode::InvalidInput,
    ErrorCode::NotFound,
    ErrorCode::InternalError,
    ErrorCode::RunFailed,
    ErrorCode::RunCancelled,
    ErrorCode::TooManyRuns,
];

/// The published output schema of a tool whose `data` fits `data` and whose errors carry
/// one of `codes`: either `{ok: true, data}` or `{ok: false, error, data?}`.
pub(crate) fn schema(data: &Value, codes: &[ErrorCode]) -> Value {
    let codes: Vec<&str> = codes.iter().map(|code| code.as_str()).collect();
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
