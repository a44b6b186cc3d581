//! JSON Schema fragments shared by the tools' published definitions, and the JSON shape of a
//! todo that those schemas publish.

use serde_json::{Value, json};

use crate::store::Todo;

/// Largest integer a JSON number carries exactly in every client (2^53 - 1).
pub(crate) const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

pub(super) fn id() -> Value {
    json!({
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_SAFE_INTEGER,
        "description": "The todo's id, as returned by add_task or list_tasks."
    })
}

pub(super) fn date(description: &str) -> Value {
    json!({
        "type": "string",
        "format": "date",
        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
        "description": description
    })
}

pub(super) fn tag() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": 40 })
}

pub(super) fn todo() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": { "type": "integer" },
            "title": { "type": "string" },
            "status": { "type": "string", "enum": ["open", "done"] },
            "due": { "type": ["string", "null"] },
            "tags": { "type": "array", "items": { "type": "string" } },
            "createdAt": { "type": "string" },
            "completedAt": { "type": ["string", "null"] }
        },
        "required": ["id", "title", "status", "due", "tags", "createdAt", "completedAt"],
        "additionalProperties": false
    })
}

/// A todo as the tools return it, and as workflow templates read it: the shape [`todo`]
/// publishes.
pub(super) fn todo_value(todo: &Todo) -> Value {
    json!({
        "id": todo.id,
        "title": todo.title,
        "status": todo.status.as_str(),
        "due": todo.due,
        "tags": todo.tags,
        "createdAt": todo.created_at,
        "completedAt": todo.completed_at,
    })
}

/// A list of todos as the tools return it.
pub(super) fn todo_values(todos: &[Todo]) -> Value {
    Value::Array(todos.iter().map(todo_value).collect())
}

pub(super) fn todo_list() -> Value {
    json!({ "type": "array", "items": todo() })
}
