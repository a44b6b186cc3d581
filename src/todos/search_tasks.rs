//! `search_tasks`: substring search on titles.

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::{Effects, ToolError, ToolResult, ToolSpec, schema};
use crate::schema::Schema;
use crate::store::Tx;

/// The published input schema, which the arguments are checked against: built once.
static INPUT_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string", "minLength": 1, "maxLength": 200,
                "description": "Text to look for in titles: 1 to 200 UTF-16 code units."
            }
        },
        "required": ["query"],
        "additionalProperties": false
    })
});

/// [`INPUT_SCHEMA`] compiled, for the check of every call.
static CHECK: LazyLock<Schema> = LazyLock::new(|| Schema::compile(&INPUT_SCHEMA));

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "search_tasks",
        title: "Search todos",
        description: "Find todos whose title contains the query, case-insensitively for \
            ASCII letters (SQLite LIKE semantics). % and _ in the query match literally. \
            Results are in ascending id order.",
        input_schema: INPUT_SCHEMA.clone(),
        data_schema: schema::todo_list(),
        effects: Effects::READ_ONLY,
    }
}

pub(crate) fn parse(args: &Map<String, Value>) -> Result<String, ToolError> {
    CHECK.check_args(args)?;
    Ok(args["query"]
        .as_str()
        .expect("checked: a string")
        .to_owned())
}

pub(super) fn call(tx: &Tx<'_>, args: &Map<String, Value>) -> ToolResult {
    let query = parse(args)?;
    Ok(schema::todo_values(&tx.search_todos(&query)?))
}
