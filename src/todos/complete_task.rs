//! `complete_task`: mark a todo done.

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::{Effects, ToolError, ToolResult, ToolSpec, schema};
use crate::schema::Schema;
use crate::store::Tx;

/// The published input schema, which the arguments are checked against: built once.
static INPUT_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": { "id": schema::id() },
        "required": ["id"],
        "additionalProperties": false
    })
});

/// [`INPUT_SCHEMA`] compiled, for the check of every call.
static CHECK: LazyLock<Schema> = LazyLock::new(|| Schema::compile(&INPUT_SCHEMA));

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "complete_task",
        title: "Complete a todo",
        description: "Mark the todo with this id as done and return it. Completing a todo \
            that is already done succeeds and changes nothing.",
        input_schema: INPUT_SCHEMA.clone(),
        data_schema: schema::todo(),
        effects: Effects {
            read_only: false,
            destructive: false,
            idempotent: true,
        },
    }
}

pub(crate) fn parse(args: &Map<String, Value>) -> Result<i64, ToolError> {
    CHECK.check_args(args)?;
    Ok(id(args))
}

/// The id of `complete_task` and `delete_task`, once checked.
pub(super) fn id(args: &Map<String, Value>) -> i64 {
    crate::schema::whole(&args["id"]).expect("checked: an integer")
}

pub(super) fn call(tx: &Tx<'_>, args: &Map<String, Value>) -> ToolResult {
    let id = parse(args)?;
    match tx.complete_todo(id)? {
        Some(todo) => Ok(schema::todo_value(&todo)),
        None => Err(ToolError::not_found(format!("no todo with id {id}"))),
    }
}
