//! `add_task`: create a todo.

use serde_json::{Map, Value, json};

use super::validate::Checker;
use super::{Effects, ToolResult, ToolSpec, schema};
use crate::store::{NewTodo, Tx};

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "add_task",
        title: "Add a todo",
        description: "Create a todo with a title, an optional due date and optional tags. \
            Returns the new todo with its id.",
        input_schema: json!({
            "type": "object",
            "properties": {
                "title": {
                    "type": "string", "minLength": 1, "maxLength": 200,
                    "description": "What needs doing: 1 to 200 UTF-16 code units."
                },
                "due": schema::date("Due date as YYYY-MM-DD; must be a real calendar date."),
                "tags": {
                    "type": "array", "maxItems": 10, "items": schema::tag(),
                    "description": "Up to 10 tags, each 1 to 40 UTF-16 code units."
                }
            },
            "required": ["title"],
            "additionalProperties": false
        }),
        data_schema: schema::todo(),
        effects: Effects {
            read_only: false,
            destructive: false,
            idempotent: false,
        },
    }
}

pub(crate) fn parse(args: &Map<String, Value>) -> Result<NewTodo, super::ToolError> {
    let mut check = Checker::new();
    check.known_keys(args, "", &["title", "due", "tags"]);
    let title = check
        .required(args, "", "title")
        .and_then(|v| check_title(&mut check, v));
    let due = args.get("due").and_then(|v| check.date(v, "due"));
    let tags = args.get("tags").and_then(|v| check_tags(&mut check, v));
    check.finish()?;
    Ok(NewTodo {
        title: title.expect("checked"),
        due,
        tags: tags.unwrap_or_default(),
    })
}

fn check_title(check: &mut Checker, value: &Value) -> Option<String> {
    check.string(value, "title", 1, 200)
}

fn check_tags(check: &mut Checker, value: &Value) -> Option<Vec<String>> {
    let Value::Array(items) = value else {
        check.problem("tags", "must be an array of strings");
        return None;
    };
    if items.len() > 10 {
        check.problem(
            "tags",
            format!("must hold at most 10 tags (got {})", items.len()),
        );
    }
    let tags: Vec<Option<String>> = items
        .iter()
        .enumerate()
        .map(|(i, item)| check.string(item, &format!("tags[{i}]"), 1, 40))
        .collect();
    tags.into_iter().collect()
}

pub(super) fn call(tx: &Tx<'_>, args: &Map<String, Value>) -> ToolResult {
    let new = parse(args)?;
    Ok(schema::todo_value(&tx.insert_todo(&new)?))
}
