//! The `{ok: true, data}` / `{ok: false, error: {code, message}, data?}` envelope every
//! tool answers with: the one place it is built.

use serde_json::{Value, json};

use crate::tools::ToolResult;

/// A tool's answer, before it becomes protocol content.
pub(super) struct Envelope {
    pub ok: bool,
    pub body: Value,
}

/// Success, carrying `data`.
pub(super) fn ok(data: Value) -> Envelope {
    Envelope {
        ok: true,
        body: json!({ "ok": true, "data": data }),
    }
}

/// Failure with a code and a message; `data` when there is something to show anyway (a
/// failed run's report).
pub(super) fn failed(code: &str, message: &str, data: Option<Value>) -> Envelope {
    let mut body = json!({ "ok": false, "error": { "code": code, "message": message } });
    if let Some(data) = data {
        body["data"] = data;
    }
    Envelope { ok: false, body }
}

/// A task-manager tool's result.
pub(super) fn of_result(result: &ToolResult) -> Envelope {
    match result {
        Ok(data) => ok(data.clone()),
        Err(error) => failed(error.code.as_str(), &error.message, None),
    }
}
