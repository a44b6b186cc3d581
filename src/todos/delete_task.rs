//! `delete_task`: permanently delete a todo, with an explicit confirmation.

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::complete_task;
use super::{Effects, ToolError, ToolResult, ToolSpec, schema};
use crate::schema::Schema;
use crate::store::Tx;

/// The published input schema, which the arguments are checked against: built once.
static INPUT_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": {
            "id": schema::id(),
            "confirm": {
                "type": "boolean", "const": true,
                "description": "Must be the boolean true, set only after the user agreed to the deletion."
            }
        },
        "required": ["id", "confirm"],
        "additionalProperties": false
    })
});

/// [`INPUT_SCHEMA`] compiled, for the check of every call.
static CHECK: LazyLock<Schema> = LazyLock::new(|| Schema::compile(&INPUT_SCHEMA));

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "delete_task",
        title: "Delete a todo",
        description: "Permanently delete the todo with this id and return it as it was. \
            This cannot be undone: ask the user for explicit consent before calling, and \
            pass confirm: true only after they have given it. Calls without confirm: true \
            are rejected.",
        input_schema: INPUT_SCHEMA.clone(),
        data_schema: schema::todo(),
        effects: Effects {
            read_only: false,
            destructive: true,
            idempotent: true,
        },
    }
}

pub(crate) fn parse(args: &Map<String, Value>) -> Result<i64, ToolError> {
    CHECK.check_args(args)?;
    Ok(complete_task::id(args))
}

pub(super) fn call(tx: &Tx<'_>, args: &Map<String, Value>) -> ToolResult {
    let id = parse(args)?;
    match tx.delete_todo(id)? {
        Some(todo) => Ok(schema::todo_value(&todo)),
        None => Err(ToolError::not_found(format!("no todo with id {id}"))),
    }
}
