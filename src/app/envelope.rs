//! The `{ok: true, data}` / `{ok: false, error: {code, message}, data?}` envelope every
//! tool answers with: the one place it is built, and the one place its output schema is.

use serde_json::{Map, Value, json};

use crate::todos::{ToolError, ToolResult};

/// The `code` of a failed call: the three a todo tool answers with, and those of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    InvalidInput,
    NotFound,
    InternalError,
    /// A run ended failed; its report is under `data`.
    RunFailed,
    /// A run was cancelled; its report, when there is one, is under `data`.
    RunCancelled,
    /// The caller has as many unfinished runs as the server allows each one.
    TooManyRuns,
    /// The caller has as many `tasks/result` requests waiting as the server allows.
    TooManyResultWaits,
}

impl Code {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Code::InvalidInput => "invalid_input",
            Code::NotFound => "not_found",
            Code::InternalError => "internal_error",
            Code::RunFailed => "run_failed",
            Code::RunCancelled => "run_cancelled",
            Code::TooManyRuns => "too_many_runs",
            Code::TooManyResultWaits => "too_many_result_waits",
        }
    }
}

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
pub(crate) fn failed(code: Code, message: &str, data: Option<Value>) -> Envelope {
    failed_as(code.as_str(), message, data)
}

/// A todo tool's failure, as it was raised.
pub(crate) fn of_error(error: &ToolError) -> Envelope {
    failed_as(error.code.as_str(), &error.message, None)
}

/// Failure with the code a node's stored error carries.
pub(crate) fn failed_as(code: &str, message: &str, data: Option<Value>) -> Envelope {
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
pub(crate) fn of_result(result: ToolResult) -> Envelope {
    match result {
        Ok(data) => ok(data),
        Err(error) => of_error(&error),
    }
}

/// The error codes of the task-manager tools, which every tool may answer with.
pub(crate) const TOOL_CODES: &[Code] = &[Code::InvalidInput, Code::NotFound, Code::InternalError];

/// The error codes of a workflow run, beside [`TOOL_CODES`].
pub(crate) const RUN_CODES: &[Code] = &[
    Code::InvalidInput,
    Code::NotFound,
    Code::InternalError,
    Code::RunFailed,
    Code::RunCancelled,
    Code::TooManyRuns,
];

/// The published output schema of a tool whose `data` fits `data` and whose errors carry
/// one of `codes`: either `{ok: true, data}` or `{ok: false, error, data?}`.
pub(crate) fn schema(data: &Value, codes: &[Code]) -> Value {
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
