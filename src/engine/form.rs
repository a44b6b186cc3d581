//! Checking an answer against the form an `input` node asked with (the restricted schema
//! the loader accepts, `loader/form.rs`), and the form as a client is shown it.
//!
//! Every problem is reported at once, each naming its field.

use serde_json::Value;

/// The problems of `answer` as an answer to `schema`, checked by the one validator
/// (`engine/schema`), each naming its field; empty when it fits. A form has no fields but
/// its properties.
pub(crate) fn answer_problems(schema: &Value, answer: &Value) -> Vec<String> {
    if !answer.is_object() {
        return vec!["an answer is an object of the form's fields".to_owned()];
    }
    let mut form = schema.clone();
    if let Some(form) = form.as_object_mut() {
        form.insert("additionalProperties".to_owned(), Value::Bool(false));
    }
    crate::schema::value_problems(&form, answer)
}

/// The names of the fields a form requires, in the order its `required` lists them.
pub(crate) fn required_fields(schema: &Value) -> Vec<&str> {
    schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The form as a client is shown it: the keywords of the protocol's restricted schema
/// only. A field's `contentSchema` is checked here, on the answer, not by the client.
pub(crate) fn for_client(schema: &Value) -> Value {
    let mut form = schema.clone();
    if let Some(properties) = form.get_mut("properties").and_then(Value::as_object_mut) {
        for property in properties.values_mut().filter_map(Value::as_object_mut) {
            property.remove("contentSchema");
            property.remove("contentMediaType");
        }
    }
    form
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
                "`one`: must be one of: \"a\"",
                "`many`: must hold at most 2 items (got 3)",
                "`many[1]`: must be one of: \"x\", \"y\"",
            ]
        );
        let not_a_list = json!({ "many": "x" });
        assert_eq!(
            answer_problems(&form, &not_a_list),
            ["`many`: must be an array"]
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
            "`count`: is required",
            "`choice`: must be one of: \"a\", \"b\"",
            "`mail`: must be an email address",
            "`ratio`: must be a number",
            "`ok`: must be a boolean",
            "`day`: must be a real calendar date in the form YYYY-MM-DD",
            "`extra`: unknown property",
        ] {
            assert!(
                problems.iter().any(|p| p == expected),
                "{expected} in {problems:?}"
            );
        }
        let bounds = answer_problems(&form(), &json!({ "choice": "a", "count": 12 }));
        assert_eq!(
            bounds,
            ["`count`: must be a positive integer no larger than 9 (got 12)"]
        );
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
            ["`items[1]`: must be an integer"]
        );
        assert!(answer_problems(&form, &json!({ "items": "nope" }))[0].contains("not JSON"));
        // The client sees a text field only.
        let shown = for_client(&form);
        assert_eq!(shown["properties"]["items"], json!({ "type": "string" }));
    }
}
