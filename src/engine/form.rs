//! Checking an answer against the form an `input` node asked with: the restricted schema
//! the loader accepts (`loader/form.rs`), so every keyword here is one it lets through.
//!
//! Every problem is reported at once, each naming its field.

use serde_json::{Map, Value};

/// The problems of `answer` as an answer to `schema`; empty when it fits.
pub fn answer_problems(schema: &Value, answer: &Value) -> Vec<String> {
    let Value::Object(answer) = answer else {
        return vec!["an answer is an object of the form's fields".to_owned()];
    };
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut problems = Vec::new();
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !answer.contains_key(name) {
            problems.push(format!("`{name}`: required"));
        }
    }
    for (name, value) in answer {
        match properties.get(name) {
            Some(property) => problems.extend(
                field_problems(property, value)
                    .into_iter()
                    .map(|p| format!("`{name}`: {p}")),
            ),
            None => problems.push(format!("`{name}`: the form has no such field")),
        }
    }
    problems
}

fn field_problems(property: &Value, value: &Value) -> Vec<String> {
    let number = |key: &str| property.get(key).and_then(Value::as_f64);
    match property.get("type").and_then(Value::as_str) {
        Some("string") => {
            let Some(text) = value.as_str() else {
                return vec!["expected a string".to_owned()];
            };
            string_problems(property, text)
        }
        Some(kind @ ("number" | "integer")) => {
            let fits = match kind {
                "integer" => value.is_i64() || value.is_u64(),
                _ => value.is_number(),
            };
            let Some(n) = value.as_f64().filter(|_| fits) else {
                return vec![format!("expected {}", article(kind))];
            };
            let mut problems = Vec::new();
            if let Some(min) = number("minimum").filter(|min| n < *min) {
                problems.push(format!("{n} is below the minimum {min}"));
            }
            if let Some(max) = number("maximum").filter(|max| n > *max) {
                problems.push(format!("{n} is above the maximum {max}"));
            }
            problems
        }
        Some("boolean") if !value.is_boolean() => vec!["expected a boolean".to_owned()],
        Some("array") => list_problems(property, value),
        _ => Vec::new(),
    }
}

/// The choices of a select: a string `enum`, or the constants of a `oneOf` or `anyOf`.
fn choices(select: &Value) -> Option<Vec<&Value>> {
    if let Some(options) = select.get("enum").and_then(Value::as_array) {
        return Some(options.iter().collect());
    }
    let titled = ["oneOf", "anyOf"]
        .iter()
        .find_map(|key| select.get(*key).and_then(Value::as_array))?;
    Some(
        titled
            .iter()
            .filter_map(|option| option.get("const"))
            .collect(),
    )
}

fn one_of(options: &[&Value]) -> String {
    let names: Vec<String> = options.iter().map(|option| option.to_string()).collect();
    format!("one of {}", names.join(", "))
}

/// A multi-select list: strings, each one of the items' choices, within the item counts.
fn list_problems(property: &Value, value: &Value) -> Vec<String> {
    let Some(picked) = value.as_array() else {
        return vec!["expected a list of choices".to_owned()];
    };
    let mut problems = Vec::new();
    let options = property.get("items").and_then(choices).unwrap_or_default();
    for item in picked {
        if !options.contains(&item) {
            problems.push(format!("{item} is not {}", one_of(&options)));
        }
    }
    let count = picked.len() as u64;
    let limit = |key: &str| property.get(key).and_then(Value::as_u64);
    if let Some(min) = limit("minItems").filter(|min| count < *min) {
        problems.push(format!("at least {min} choices"));
    }
    if let Some(max) = limit("maxItems").filter(|max| count > *max) {
        problems.push(format!("at most {max} choices"));
    }
    problems
}

fn article(kind: &str) -> String {
    match kind {
        "integer" => "an integer".to_owned(),
        other => format!("a {other}"),
    }
}

/// The form as a client is shown it: the keywords of the protocol's restricted schema
/// only. A field's `contentSchema` is checked here, on the answer, not by the client.
pub fn for_client(schema: &Value) -> Value {
    let mut form = schema.clone();
    if let Some(properties) = form.get_mut("properties").and_then(Value::as_object_mut) {
        for property in properties.values_mut().filter_map(Value::as_object_mut) {
            property.remove("contentSchema");
            property.remove("contentMediaType");
        }
    }
    form
}

fn string_problems(property: &Value, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(schema) = property.get("contentSchema") {
        // Read as the `from_json` filter reads it, so that a draft a model wrote in a code
        // fence can be confirmed as it is.
        match super::filters::json_in(text) {
            Ok(value) => problems.extend(super::schema::value_problems(schema, &value)),
            Err(error) => problems.push(format!("not JSON: {error}")),
        }
    }
    let length = text.chars().count();
    let limit = |key: &str| property.get(key).and_then(Value::as_u64);
    if let Some(min) = limit("minLength").filter(|min| (length as u64) < *min) {
        problems.push(format!("at least {min} characters"));
    }
    if let Some(max) = limit("maxLength").filter(|max| (length as u64) > *max) {
        problems.push(format!("at most {max} characters"));
    }
    if let Some(options) = choices(property)
        && !options.iter().any(|option| *option == text)
    {
        problems.push(one_of(&options));
    }
    if let Some(format) = property.get("format").and_then(Value::as_str)
        && !has_format(format, text)
    {
        problems.push(format!("not a valid {format}"));
    }
    problems
}

fn has_format(format: &str, text: &str) -> bool {
    use time::format_description::well_known::{Iso8601, Rfc3339};
    match format {
        "email" => text
            .split_once('@')
            .is_some_and(|(user, host)| !user.is_empty() && host.contains('.')),
        "uri" => text.split_once(':').is_some_and(|(scheme, _)| {
            scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }),
        "date" => text.len() == 10 && time::Date::parse(text, &Iso8601::DATE).is_ok(),
        "date-time" => time::OffsetDateTime::parse(text, &Rfc3339).is_ok(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Value {
        json!({
            "type": "object",
            "required": ["choice", "count"],
            "properties": {
                "choice": { "type": "string", "enum": ["a", "b"] },
                "mail": { "type": "string", "format": "email", "maxLength": 20 },
                "count": { "type": "integer", "minimum": 1, "maximum": 9 },
                "ratio": { "type": "number" },
                "ok": { "type": "boolean" },
                "day": { "type": "string", "format": "date" },
            }
        })
    }

    #[test]
    fn titled_and_multiple_choices_are_checked_against_their_constants() {
        let form = json!({
            "type": "object",
            "properties": {
                "one": { "type": "string", "oneOf": [{ "const": "a", "title": "A" }] },
                "many": { "type": "array", "maxItems": 2,
                          "items": { "anyOf": [{ "const": "x" }, { "const": "y" }] } },
            }
        });
        let fits = json!({ "one": "a", "many": ["x", "y"] });
        assert_eq!(answer_problems(&form, &fits), Vec::<String>::new());
        let misfit = json!({ "one": "b", "many": ["x", "z", "y"] });
        assert_eq!(
            answer_problems(&form, &misfit),
            [
                "`one`: one of \"a\"",
                "`many`: \"z\" is not one of \"x\", \"y\"",
                "`many`: at most 2 choices",
            ]
        );
        let not_a_list = json!({ "many": "x" });
        assert_eq!(
            answer_problems(&form, &not_a_list),
            ["`many`: expected a list of choices"]
        );
    }

    #[test]
    fn an_answer_that_fits_its_form_has_no_problems() {
        let answer = json!({ "choice": "a", "mail": "me@example.org", "count": 3,
            "ratio": 0.5, "ok": true, "day": "2026-12-01" });
        assert_eq!(answer_problems(&form(), &answer), Vec::<String>::new());
    }

    #[test]
    fn every_misfit_of_an_answer_is_named_at_once() {
        let answer = json!({ "choice": "c", "mail": "not an address", "ratio": "half",
            "ok": "yes", "day": "2026-13-01", "extra": 1 });
        let problems = answer_problems(&form(), &answer);
        for expected in [
            "`count`: required",
            "`choice`: one of \"a\", \"b\"",
            "`mail`: not a valid email",
            "`ratio`: expected a number",
            "`ok`: expected a boolean",
            "`day`: not a valid date",
            "`extra`: the form has no such field",
        ] {
            assert!(
                problems.iter().any(|p| p == expected),
                "{expected} in {problems:?}"
            );
        }
        let bounds = answer_problems(&form(), &json!({ "choice": "a", "count": 12 }));
        assert_eq!(bounds, ["`count`: 12 is above the maximum 9"]);
        assert_eq!(
            answer_problems(&form(), &json!("a")),
            ["an answer is an object of the form's fields"]
        );
    }

    #[test]
    fn a_json_field_is_read_as_a_model_writes_it_and_checked_against_its_content_schema() {
        let form = json!({
            "type": "object",
            "properties": { "items": {
                "type": "string", "contentMediaType": "application/json",
                "contentSchema": { "type": "array", "items": { "type": "integer" } }
            } }
        });
        let fenced = json!({ "items": "```json\n[1, 2]\n```" });
        assert_eq!(answer_problems(&form, &fenced), Vec::<String>::new());
        let wrong = json!({ "items": "[1, \"two\"]" });
        assert_eq!(
            answer_problems(&form, &wrong),
            ["`items`: `[1]`: expected integer, found a string"]
        );
        assert!(answer_problems(&form, &json!({ "items": "nope" }))[0].contains("not JSON"));
        // The client sees a text field only.
        let shown = for_client(&form);
        assert_eq!(shown["properties"]["items"], json!({ "type": "string" }));
    }
}
