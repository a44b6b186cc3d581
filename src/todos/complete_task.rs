//! `complete_task`: mark a todo done.

use serde_json::{Map, Value, json};

use super::validate::Checker;
use super::{Effects, ToolError, ToolResult, ToolSpec, schema};
use crate::store::Tx;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "complete_task",
        title: "Complete a todo",
        description: "Mark the todo with this id as done and return it. Completing a todo \
            that is already done succeeds and changes nothing.",
        input_schema: json!({
            "type": "object",
            "properties": { "id": schema::id() },
            "required": ["id"],
            "additionalProperties": false
        }),
        data_schema: schema::todo(),
        effects: Effects {
            read_only: false,
            destructive: false,
            idempotent: true,
        },
    }
}

/// The id of `complete_task` and `delete_task`, checked alongside other known keys.
pub(super) fn parse_id(check: &mut Checker, args: &Map<String, Value>) -> Option<i64> {
    check
        .required(args, "", "id")
        .and_then(|v| check.id(v, "id"))
}

pub(crate) fn parse(args: &Map<String, Value>) -> Result<i64, ToolError> {
    let mut check = Checker::new();
    check.known_keys(args, "", &["id"]);
    let id = parse_id(&mut check, args);
    check.finish()?;
    Ok(id.expect("checked"))
}

pub(super) fn call(tx: &Tx<'_>, args: &Map<String, Value>) -> ToolResult {
    let id = parse(args)?;
    match tx.complete_todo(id)? {
        Some(todo) => Ok(schema::todo_value(&todo)),
        None => Err(ToolError::not_found(format!("no todo with id {id}"))),
    }
}
