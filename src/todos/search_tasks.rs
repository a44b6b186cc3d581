//! `search_tasks`: substring search on titles.

use serde_json::{Map, Value, json};

use super::validate::Checker;
use super::{Effects, ToolError, ToolResult, ToolSpec, schema};
use crate::store::Tx;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "search_tasks",
        title: "Search todos",
        description: "Find todos whose title contains the query, case-insensitively for \
            ASCII letters (SQLite LIKE semantics). % and _ in the query match literally. \
            Results are in ascending id order.",
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string", "minLength": 1, "maxLength": 200,
                    "description": "Text to look for in titles: 1 to 200 UTF-16 code units."
                }
            },
            "required": ["query"],
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

pub(crate) fn parse(args: &Map<String, Value>) -> Result<String, ToolError> {
    let mut check = Checker::new();
    check.known_keys(args, "", &["query"]);
    let query = check
        .required(args, "", "query")
        .and_then(|v| check.string(v, "query", 1, 200));
    check.finish()?;
    Ok(query.expect("checked"))
}

pub(super) fn call(tx: &Tx<'_>, args: &Map<String, Value>) -> ToolResult {
    let query = parse(args)?;
    Ok(schema::todo_values(&tx.search_todos(&query)?))
}
