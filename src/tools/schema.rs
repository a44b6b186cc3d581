//! JSON Schema fragments shared by the tools' published definitions.

use serde_json::{Value, json};

use super::validate::MAX_SAFE_INTEGER;

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

pub(super) fn todo_list() -> Value {
    json!({ "type": "array", "items": todo() })
}
