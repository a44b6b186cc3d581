//! The `tool_args` target: each tool's argument parser against the input schema the tool
//! publishes.

use serde_json::{Map, Value};

use crate::todos::{ToolError, Tools};
use crate::todos::{add_task, complete_task, delete_task, list_tasks, search_tasks};

/// `tool_args`: a tool accepts exactly the arguments its published input schema accepts
/// (the schema read by the small interpreter below, with `format: date` a real calendar
/// date, and no string holding U+0000, which PostgreSQL's `text` cannot store); a rejection
/// names every field the schema finds wrong; and what is accepted comes out as it was
/// sent.
///
/// Input: a byte choosing the tool, then the arguments as JSON.
pub fn tool_args(data: &[u8]) {
    let [which, json @ ..] = data else {
        return;
    };
    let Ok(Value::Object(args)) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let specs = Tools::specs();
    let spec = &specs[usize::from(*which) % specs.len()];
    let mut wrong = Vec::new();
    schema_misfits(
        &spec.input_schema,
        &Value::Object(args.clone()),
        "",
        &mut wrong,
    );
    let result = parse(spec.name, &args);
    match result {
        Ok(()) => assert!(
            wrong.is_empty(),
            "{} accepts {args:?}: {wrong:?}",
            spec.name
        ),
        Err(error) => {
            assert!(!wrong.is_empty(), "{} refuses {args:?}: {error}", spec.name);
            for field in &wrong {
                let named = format!("{field}: ");
                assert!(error.message.contains(&named), "`{field}` unnamed: {error}");
            }
        }
    }
}

/// Runs the tool's parser, checking that what it accepts is what was sent.
fn parse(tool: &str, args: &Map<String, Value>) -> Result<(), ToolError> {
    let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
    match tool {
        "add_task" => {
            let todo = add_task::parse(args)?;
            assert_eq!(Some(todo.title), text("title"));
            assert_eq!(todo.due, text("due"));
            let tags: Vec<String> = match args.get("tags") {
                Some(Value::Array(tags)) => tags
                    .iter()
                    .filter_map(|t| t.as_str())
                    .map(str::to_owned)
                    .collect(),
                _ => Vec::new(),
            };
            assert_eq!(todo.tags, tags);
        }
        "complete_task" | "delete_task" => {
            let id = match tool {
                "complete_task" => complete_task::parse(args)?,
                _ => delete_task::parse(args)?,
            };
            assert_eq!(Some(id as f64), args["id"].as_f64());
        }
        "list_tasks" => {
            let filter = list_tasks::parse(args)?;
            let given = |key: &str| {
                args.get("filter")
                    .and_then(|f| f.get(key))
                    .and_then(Value::as_str)
            };
            assert_eq!(filter.status.map(|s| s.as_str()), given("status"));
            assert_eq!(filter.tag.as_deref(), given("tag"));
            assert_eq!(filter.due_after.as_deref(), given("dueAfter"));
            assert_eq!(filter.due_before.as_deref(), given("dueBefore"));
        }
        "search_tasks" => assert_eq!(Some(search_tasks::parse(args)?), text("query")),
        other => panic!("no parser for tool {other}"),
    }
    Ok(())
}

/// The paths where `value` misfits `schema`, read as JSON Schema: the keywords the tools
/// publish, no more. Written apart from `engine/schema`, so the two check each other.
fn schema_misfits(schema: &Value, value: &Value, at: &str, wrong: &mut Vec<String>) {
    let fits = match schema.get("type").and_then(Value::as_str) {
        Some("object") => return object_misfits(schema, value, at, wrong),
        Some("array") => {
            let Some(items) = value.as_array() else {
                wrong.push(at.to_owned());
                return;
            };
            let max = schema.get("maxItems").and_then(Value::as_u64);
            if max.is_some_and(|max| items.len() as u64 > max) {
                wrong.push(at.to_owned());
            }
            for (i, item) in items.iter().enumerate() {
                schema_misfits(&schema["items"], item, &format!("{at}[{i}]"), wrong);
            }
            return;
        }
        Some("string") => value.as_str().is_some_and(|text| string_fits(schema, text)),
        Some("integer") => value.as_f64().is_some_and(|n| {
            let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
            n.fract() == 0.0
                && bound("minimum").is_none_or(|min| n >= min)
                && bound("maximum").is_none_or(|max| n <= max)
        }),
        Some("boolean") => value.is_boolean(),
        _ => true,
    };
    let constant = schema.get("const").is_none_or(|c| c == value);
    if !fits || !constant {
        wrong.push(at.to_owned());
    }
}

fn object_misfits(schema: &Value, value: &Value, at: &str, wrong: &mut Vec<String>) {
    let Some(object) = value.as_object() else {
        wrong.push(at.to_owned());
        return;
    };
    let path = |key: &str| match at {
        "" => key.to_owned(),
        _ => format!("{at}.{key}"),
    };
    let required = schema["required"].as_array().into_iter().flatten();
    for key in required.filter_map(Value::as_str) {
        if !object.contains_key(key) {
            wrong.push(path(key));
        }
    }
    for (key, item) in object {
        match schema["properties"].get(key) {
            Some(property) => schema_misfits(property, item, &path(key), wrong),
            None if schema["additionalProperties"] == false => wrong.push(path(key)),
            None => {}
        }
    }
}

fn string_fits(schema: &Value, text: &str) -> bool {
    let units = text.encode_utf16().count() as u64;
    let limit = |key: &str| schema.get(key).and_then(Value::as_u64);
    let options = schema.get("enum").and_then(Value::as_array);
    // Beyond what a schema states: the store takes no NUL, on either backend.
    !text.contains('\0')
        && limit("minLength").is_none_or(|min| units >= min)
        && limit("maxLength").is_none_or(|max| units <= max)
        && options.is_none_or(|options| options.iter().any(|o| o == text))
        && (schema.get("format").is_none_or(|f| f != "date") || is_date(text))
}

/// `^[0-9]{4}-[0-9]{2}-[0-9]{2}$` naming a day of the proleptic Gregorian calendar.
fn is_date(text: &str) -> bool {
    let digits = |range: std::ops::Range<usize>| {
        let part = text.get(range)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse::<i32>().ok())?
    };
    let shaped = text.len() == 10 && text.as_bytes()[4] == b'-' && text.as_bytes()[7] == b'-';
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let Ok(month) = time::Month::try_from(month as u8) else {
        return false;
    };
    shaped && time::Date::from_calendar_date(year, month, day as u8).is_ok()
}
