//! `list_tasks`: list todos, optionally filtered.

use serde_json::{Map, Value, json};

use super::validate::Checker;
use super::{Effects, ToolError, ToolResult, ToolSpec, schema};
use crate::store::{TodoFilter, TodoStatus, Tx};

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "list_tasks",
        title: "List todos",
        description: "List todos in ascending id order, optionally filtered by status, tag \
            and due-date range. Both due bounds are inclusive; todos without a due date never \
            match a due bound.",
        input_schema: json!({
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
        }),
        data_schema: schema::todo_list(),
        effects: Effects {
            read_only: true,
            destructive: false,
            idempotent: true,
        },
    }
}

pub(crate) fn parse(args: &Map<String, Value>) -> Result<TodoFilter, ToolError> {
    let mut check = Checker::new();
    check.known_keys(args, "", &["filter"]);
    let mut filter = TodoFilter::default();
    if let Some(value) = args.get("filter") {
        let allowed = ["status", "tag", "dueAfter", "dueBefore"];
        if let Some(map) = check.object(value, "filter", &allowed) {
            filter.status = map.get("status").and_then(|v| {
                match check.one_of(v, "filter.status", &["open", "done"])? {
                    "done" => Some(TodoStatus::Done),
                    _ => Some(TodoStatus::Open),
                }
            });
            filter.tag = map
                .get("tag")
                .and_then(|v| check.string(v, "filter.tag", 1, 40));
            filter.due_after = map
                .get("dueAfter")
                .and_then(|v| check.date(v, "filter.dueAfter"));
            filter.due_before = map
                .get("dueBefore")
                .and_then(|v| check.date(v, "filter.dueBefore"));
        }
    }
    check.finish()?;
    Ok(filter)
}

pub(super) fn call(tx: &Tx<'_>, args: &Map<String, Value>) -> ToolResult {
    let filter = parse(args)?;
    Ok(schema::todo_values(&tx.list_todos(&filter)?))
}
