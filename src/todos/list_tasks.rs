//! `list_tasks`: list todos, optionally filtered.

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::{Effects, ToolError, ToolResult, ToolSpec, schema};
use crate::schema::Schema;
use crate::store::{TodoFilter, TodoStatus, Tx};

/// The published input schema, which the arguments are checked against: built once.
static INPUT_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": {
            "filter": {
                "type": "object",
                "properties": {
                    "status": { "type": "string", "enum": ["open", "done"] },
                    "tag": schema::tag(),
                    "dueAfter": schema::date("Only todos due on or after this date (YYYY-MM-DD)."),
                    "dueBefore": schema::date("Only todos due on or before this date (YYYY-MM-DD).")
                },
                "additionalProperties": false
            }
        },
        "additionalProperties": false
    })
});

/// [`INPUT_SCHEMA`] compiled, for the check of every call.
static CHECK: LazyLock<Schema> = LazyLock::new(|| Schema::compile(&INPUT_SCHEMA));

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "list_tasks",
        title: "List todos",
        description: "List todos in ascending id order, optionally filtered by status, tag \
            and due-date range. Both due bounds are inclusive; todos without a due date never \
            match a due bound.",
        input_schema: INPUT_SCHEMA.clone(),
        data_schema: schema::todo_list(),
        effects: Effects::READ_ONLY,
    }
}

pub(crate) fn parse(args: &Map<String, Value>) -> Result<TodoFilter, ToolError> {
    CHECK.check_args(args)?;
    let Some(filter) = args.get("filter") else {
        return Ok(TodoFilter::default());
    };
    let text = |key: &str| filter.get(key).and_then(Value::as_str).map(str::to_owned);
    Ok(TodoFilter {
        status: filter.get("status").map(|status| match status.as_str() {
            Some("done") => TodoStatus::Done,
            _ => TodoStatus::Open,
        }),
        tag: text("tag"),
        due_after: text("dueAfter"),
        due_before: text("dueBefore"),
    })
}

pub(super) fn call(tx: &Tx<'_>, args: &Map<String, Value>) -> ToolResult {
    let filter = parse(args)?;
    Ok(schema::todo_values(&tx.list_todos(&filter)?))
}
