//! The subset of JSON Schema that a workflow's structured data is checked against: a
//! `value` node's schema, and the `contentSchema` of a form field that holds JSON.
//!
//! Small on purpose: types, objects (`properties`, `required`, `additionalProperties`),
//! arrays (`items`, `minItems`, `maxItems`), `enum`, and bounds on numbers and strings.
//! Annotations (`title`, `description`, `default`, `format`) are allowed and not checked.
//! The loader refuses any other keyword, so a schema never promises a check it does not
//! make. Every problem is reported at once, each with the path of its value.

use serde_json::{Map, Value};

const KEYWORDS: &[&str] = &[
    "type",
    "title",
    "description",
    "default",
    "format",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
];

const TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// What is wrong with `schema` itself; empty when every keyword is one this module checks
/// or an annotation.
pub fn schema_problems(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    check_schema(schema, "", &mut problems);
    problems
}

fn check_schema(schema: &Value, at: &str, problems: &mut Vec<String>) {
    let Value::Object(map) = schema else {
        problems.push(format!("{}a schema is an object", prefix(at)));
        return;
    };
    for (key, value) in map {
        if !KEYWORDS.contains(&key.as_str()) {
            problems.push(format!(
                "{}`{key}` is not supported; use {}",
                prefix(at),
                KEYWORDS.join(", ")
            ));
            continue;
        }
        match key.as_str() {
            "type" => {
                let names: Vec<&Value> = match value {
                    Value::Array(items) => items.iter().collect(),
                    other => vec![other],
                };
                for name in names {
                    if !name.as_str().is_some_and(|n| TYPES.contains(&n)) {
                        problems.push(format!(
                            "{}`type` {name} is not one of {}",
                            prefix(at),
                            TYPES.join(", ")
                        ));
                    }
                }
            }
            "properties" => match value {
                Value::Object(properties) => {
                    for (name, property) in properties {
                        check_schema(property, &join(at, name), problems);
                    }
                }
                _ => problems.push(format!("{}`properties` is an object", prefix(at))),
            },
            "items" => check_schema(value, &format!("{at}[]"), problems),
            "required" if !is_strings(value) => {
                problems.push(format!("{}`required` is a list of names", prefix(at)));
            }
            "enum" if value.as_array().is_none_or(|items| items.is_empty()) => {
                problems.push(format!("{}`enum` is a non-empty list", prefix(at)));
            }
            "additionalProperties" if !value.is_boolean() => {
                problems.push(format!(
                    "{}`additionalProperties` is true or false",
                    prefix(at)
                ));
            }
            "minimum" | "maximum" if !value.is_number() => {
                problems.push(format!("{}`{key}` is a number", prefix(at)));
            }
            "minItems" | "maxItems" | "minLength" | "maxLength" if !value.is_u64() => {
                problems.push(format!("{}`{key}` is a whole number", prefix(at)));
            }
            _ => {}
        }
    }
}

/// Every way `value` misfits `schema` (a schema without problems), each with its path.
pub fn value_problems(schema: &Value, value: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    check_value(schema, value, "", &mut problems);
    problems
}

fn check_value(schema: &Value, value: &Value, at: &str, problems: &mut Vec<String>) {
    let Value::Object(schema) = schema else {
        return;
    };
    if let Some(kind) = schema.get("type")
        && !has_type(kind, value)
    {
        let expected = match kind {
            Value::Array(items) => items.iter().map(to_text).collect::<Vec<_>>().join(" or "),
            other => to_text(other),
        };
        problems.push(format!(
            "{}expected {expected}, found {}",
            prefix(at),
            type_of(value)
        ));
        return;
    }
    if let Some(choices) = schema.get("enum").and_then(Value::as_array)
        && !choices.contains(value)
    {
        let shown: Vec<String> = choices.iter().map(Value::to_string).collect();
        problems.push(format!("{}must be one of {}", prefix(at), shown.join(", ")));
    }
    match value {
        Value::Object(object) => check_object(schema, object, at, problems),
        Value::Array(items) => {
            check_count(
                schema,
                items.len(),
                "item",
                ("minItems", "maxItems"),
                at,
                problems,
            );
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check_value(item_schema, item, &format!("{at}[{i}]"), problems);
                }
            }
        }
        Value::String(text) => {
            let length = text.chars().count();
            let limits = ("minLength", "maxLength");
            check_count(schema, length, "character", limits, at, problems);
        }
        Value::Number(number) => {
            let n = number.as_f64().unwrap_or(0.0);
            let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
            if let Some(min) = bound("minimum").filter(|min| n < *min) {
                problems.push(format!("{}{n} is below the minimum {min}", prefix(at)));
            }
            if let Some(max) = bound("maximum").filter(|max| n > *max) {
                problems.push(format!("{}{n} is above the maximum {max}", prefix(at)));
            }
        }
        _ => {}
    }
}

fn check_object(
    schema: &Map<String, Value>,
    object: &Map<String, Value>,
    at: &str,
    problems: &mut Vec<String>,
) {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if !object.contains_key(name) {
            problems.push(format!("{}required", prefix(&join(at, name))));
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (name, value) in object {
        match properties.get(name) {
            Some(property) => check_value(property, value, &join(at, name), problems),
            None if closed => problems.push(format!("{}no such field", prefix(&join(at, name)))),
            None => {}
        }
    }
}

fn check_count(
    schema: &Map<String, Value>,
    count: usize,
    unit: &str,
    (min_key, max_key): (&str, &str),
    at: &str,
    problems: &mut Vec<String>,
) {
    let limit = |key: &str| schema.get(key).and_then(Value::as_u64);
    let count = count as u64;
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    if let Some(min) = limit(min_key).filter(|min| count < *min) {
        problems.push(format!(
            "{}at least {min} {unit}{}",
            prefix(at),
            plural(min)
        ));
    }
    if let Some(max) = limit(max_key).filter(|max| count > *max) {
        problems.push(format!("{}at most {max} {unit}{}", prefix(at), plural(max)));
    }
}

fn has_type(kind: &Value, value: &Value) -> bool {
    match kind {
        Value::Array(kinds) => kinds.iter().any(|k| has_type(k, value)),
        Value::String(name) => match name.as_str() {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "number" => value.is_number(),
            "integer" => value.is_i64() || value.is_u64(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            _ => false,
        },
        _ => false,
    }
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn to_text(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

fn is_strings(value: &Value) -> bool {
    value
        .as_array()
        .is_some_and(|items| items.iter().all(Value::is_string))
}

fn join(at: &str, name: &str) -> String {
    match at {
        "" => name.to_owned(),
        _ => format!("{at}.{name}"),
    }
}

fn prefix(at: &str) -> String {
    match at {
        "" => String::new(),
        _ => format!("`{at}`: "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn options() -> Value {
        json!({
            "type": "array", "minItems": 2,
            "items": {
                "type": "object", "required": ["name", "effort"], "additionalProperties": false,
                "properties": {
                    "name": { "type": "string", "minLength": 1 },
                    "pros": { "type": "array", "items": { "type": "string" } },
                    "effort": { "enum": ["low", "medium", "high"] },
                    "confidence": { "type": "integer", "minimum": 0, "maximum": 100 }
                }
            }
        })
    }

    #[test]
    fn a_value_that_fits_has_no_problems() {
        let value = json!([
            { "name": "a", "pros": ["fast"], "effort": "low", "confidence": 80 },
            { "name": "b", "effort": "high" }
        ]);
        assert_eq!(value_problems(&options(), &value), Vec::<String>::new());
    }

    #[test]
    fn every_misfit_is_named_with_its_path() {
        let value = json!([
            { "name": "", "pros": ["fast", 3], "effort": "huge", "confidence": 101, "x": 1 }
        ]);
        let problems = value_problems(&options(), &value);
        assert_eq!(
            problems,
            [
                "at least 2 items",
                "`[0].name`: at least 1 character",
                "`[0].pros[1]`: expected string, found an integer",
                "`[0].effort`: must be one of \"low\", \"medium\", \"high\"",
                "`[0].confidence`: 101 is above the maximum 100",
                "`[0].x`: no such field",
            ]
        );
        assert_eq!(
            value_problems(&options(), &json!({})),
            ["expected array, found an object"]
        );
    }

    #[test]
    fn a_schema_with_a_keyword_it_cannot_check_is_refused() {
        assert_eq!(schema_problems(&options()), Vec::<String>::new());
        let problems = schema_problems(&json!({
            "type": "objet",
            "properties": { "a": { "pattern": "^x" } },
            "required": "a"
        }));
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("`type` \"objet\""), "{problems:?}");
        assert!(problems[1].starts_with("`a`: `pattern` is not supported"));
        assert!(problems[2].contains("`required` is a list"));
    }
}
