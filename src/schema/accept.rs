//! Whether a schema is one the validator can keep: every keyword one it checks or an
//! annotation, each with a value of the right shape.

use serde_json::{Map, Value};

use super::FORMATS;

/// The keywords of the subset: checked, or annotations.
pub(crate) const KEYWORDS: &[&str] = &[
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
    "enumNames",
    "const",
    "oneOf",
    "anyOf",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "contentMediaType",
    "contentSchema",
];

const TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// The `pattern` that may stand beside `format: date`: the date's shape.
const DATE_PATTERN: &str = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$";

/// What is wrong with `schema` itself; empty when every keyword is one the validator
/// checks, or an annotation.
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
        let date_pattern = key == "pattern"
            && value == DATE_PATTERN
            && map.get("format").is_some_and(|f| f == "date");
        if !KEYWORDS.contains(&key.as_str()) && !date_pattern {
            problems.push(format!(
                "{}`{key}` is not supported; use {}",
                prefix(at),
                KEYWORDS.join(", ")
            ));
            continue;
        }
        if let Some(problem) = keyword_problem(key, value, map, at, problems) {
            problems.push(format!("{}{problem}", prefix(at)));
        }
    }
}

/// What is wrong with one keyword's value; nested schemas report their own problems.
fn keyword_problem(
    key: &str,
    value: &Value,
    map: &Map<String, Value>,
    at: &str,
    problems: &mut Vec<String>,
) -> Option<String> {
    match key {
        "type" => {
            let names: Vec<&Value> = match value {
                Value::Array(items) => items.iter().collect(),
                other => vec![other],
            };
            let wrong: Vec<String> = names
                .into_iter()
                .filter(|name| !name.as_str().is_some_and(|n| TYPES.contains(&n)))
                .map(|name| format!("`type` {name} is not one of {}", TYPES.join(", ")))
                .collect();
            (!wrong.is_empty()).then(|| wrong.join("; "))
        }
        "properties" => {
            let Value::Object(properties) = value else {
                return Some("`properties` is an object".to_owned());
            };
            for (name, property) in properties {
                check_schema(property, &join(at, name), problems);
            }
            None
        }
        "items" => {
            check_schema(value, &format!("{at}[]"), problems);
            None
        }
        "contentSchema" => {
            if map
                .get("contentMediaType")
                .is_none_or(|m| m != "application/json")
            {
                return Some(
                    "`contentSchema` goes with contentMediaType = \"application/json\"".to_owned(),
                );
            }
            check_schema(value, at, problems);
            None
        }
        "contentMediaType" if value != "application/json" => Some(format!(
            "`contentMediaType` is \"application/json\", not {value}"
        )),
        "required" | "enumNames" if !is_strings(value) => {
            Some(format!("`{key}` is a list of strings"))
        }
        "enum" if value.as_array().is_none_or(|items| items.is_empty()) => {
            Some("`enum` is a non-empty list".to_owned())
        }
        "oneOf" | "anyOf" if !is_titled_constants(value) => Some(format!(
            "`{key}` is a non-empty list of choices, each {{const, title}}"
        )),
        "format" if !value.as_str().is_some_and(|f| FORMATS.contains(&f)) => Some(format!(
            "unknown format {value}; formats: {}",
            FORMATS.join(", ")
        )),
        "additionalProperties" if !value.is_boolean() => {
            Some("`additionalProperties` is true or false".to_owned())
        }
        "minimum" | "maximum" if !value.is_number() => Some(format!("`{key}` is a number")),
        "minItems" | "maxItems" | "minLength" | "maxLength" if !value.is_u64() => {
            Some(format!("`{key}` is a whole number"))
        }
        _ => None,
    }
}

fn is_titled_constants(value: &Value) -> bool {
    let keys = ["const", "title", "description"];
    value.as_array().is_some_and(|options| {
        !options.is_empty()
            && options.iter().all(|option| {
                option.as_object().is_some_and(|o| {
                    o.contains_key("const") && o.keys().all(|k| keys.contains(&k.as_str()))
                })
            })
    })
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
