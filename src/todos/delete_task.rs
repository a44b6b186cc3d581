//! `delete_task`: permanently delete a todo, with an explicit confirmation.

use serde_json::{Map, Value, json};

use super::complete_task::parse_id;
use super::validate::Checker;
use super::{Effects, ToolError, ToolResult, ToolSpec, schema};
use crate::store::Tx;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "delete_task",
        title: "Delete a todo",
        description: "Permanently delete the todo with this id and return it as it was. \
            This cannot be undone: ask the user for explicit consent before calling, and \
            pass confirm: true only after they have given it. Calls without confirm: true \
            are rejected.",
        input_schema: json!({
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
        }),
        data_schema: schema::todo(),
        effects: Effects {
            read_only: false,
            destructive: true,
            idempotent: true,
        },
    }
}

pub(crate) fn parse(args: &Map<String, Value>) -> Result<i64, ToolError> {
    let mut check = Checker::new();
    check.known_keys(args, "", &["id", "confirm"]);
    let id = parse_id(&mut check, args);
    if let Some(confirm) = check.required(args, "", "confirm")
        && confirm != &Value::Bool(true)
    {
        check.problem("confirm", "must be the boolean literal true");
    }
    check.finish()?;
    Ok(id.expect("checked"))
}

pub(super) fn call(tx: &Tx<'_>, args: &Map<String, Value>) -> ToolResult {
    let id = parse(args)?;
    match tx.delete_todo(id)? {
        Some(todo) => Ok(schema::todo_value(&todo)),
        None => Err(ToolError::not_found(format!("no todo with id {id}"))),
    }
}
