//! `add_task`: create a todo.

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::{Effects, ToolError, ToolResult, ToolSpec, schema};
use crate::schema::Schema;
use crate::store::{NewTodo, Tx};

/// The published input schema, which the arguments are checked against: built once.
static INPUT_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    json!({
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
    })
});

/// [`INPUT_SCHEMA`] compiled, for the check of every call.
static CHECK: LazyLock<Schema> = LazyLock::new(|| Schema::compile(&INPUT_SCHEMA));

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "add_task",
        title: "Add a todo",
        description: "Create a todo with a title, an optional due date and optional tags. \
            Returns the new todo with its id.",
        input_schema: INPUT_SCHEMA.clone(),
        data_schema: schema::todo(),
        effects: Effects {
            read_only: false,
            destructive: false,
            idempotent: false,
        },
    }
}

pub(crate) fn parse(args: &Map<String, Value>) -> Result<NewTodo, ToolError> {
    read(&CHECK, args)
}

/// The arguments checked against `schema` (the published one, but in tests), then read.
pub(super) fn read(schema: &Schema, args: &Map<String, Value>) -> Result<NewTodo, ToolError> {
    schema.check_args(args)?;
    let text = |value: &Value| value.as_str().expect("checked: a string").to_owned();
    let tags = match args.get("tags") {
        Some(Value::Array(tags)) => tags.iter().map(text).collect(),
        _ => Vec::new(),
    };
    Ok(NewTodo {
        title: text(&args["title"]),
        due: args.get("due").map(text),
        tags,
    })
}

pub(super) fn call(tx: &Tx<'_>, args: &Map<String, Value>) -> ToolResult {
    let new = parse(args)?;
    Ok(schema::todo_value(&tx.insert_todo(&new)?))
}
