//! A run's open question as a form, made from its schema by the same reading of the form
//! the terminal uses (`cli/fields.rs`), and the posted form read back into the answer,
//! checked field by field with the terminal's checks before the run's own check.

use maud::{Markup, html};
use serde_json::{Map, Value};

use crate::engine::actions::sampled_by_person;
use crate::engine::fields::{self, Field, FieldKind};
use crate::engine::question::Question;
use crate::runs::QuestionView;

/// The prefix of a question's fields among a posted form's, apart from `node` and
/// `instance`.
const FIELD: &str = "f.";

/// The form that answers open question `question` (as `run_view` shows it) of run
/// `run_id`, with the problems of the last answer posted to it. A model-only sample gets
/// no form: no person may answer it.
pub(super) fn question_form(run_id: &str, question: &QuestionView, problems: &[String]) -> Markup {
    let node = question.node.as_deref().unwrap_or_default();
    let instance = question.instance();
    let key = question.key.as_str();
    if let Some(Question::Sample {
        prompt,
        person: false,
        ..
    }) = question.question()
    {
        return html! {
            div.question {
                p.message { (prompt) }
                p { "Only the client's model answers this question: it waits for a client \
                     with a model, or for a model's reply passed with `workflows answer`." }
            }
        };
    }
    html! {
        form.question method="post" action=(format!("/runs/{run_id}/answer")) {
            input type="hidden" name="node" value=(node);
            @if let Some(instance) = instance {
                input type="hidden" name="instance" value=(instance);
            }
            @match question.question() {
                Some(Question::Sample { prompt, .. }) => {
                    p.message { (prompt) }
                    label for=(format!("{key}-text")) { "Your reply, in the model's place" }
                    textarea id=(format!("{key}-text")) name="f.text" rows="6" required {}
                }
                Some(Question::Input { message, schema }) => {
                    p.message { (message) }
                    (fields_of(key, &schema))
                }
                None => p.problem { "This question's record cannot be read." }
            }
            @if !problems.is_empty() {
                ul.problem role="alert" {
                    @for problem in problems { li { (problem) } }
                }
            }
            button type="submit" { "Answer" }
        }
    }
}

/// The labelled fields of an `input` question's form (`key` names the question).
pub(super) fn fields_of(key: &str, schema: &Value) -> Markup {
    html! {
        @for field in fields::fields(schema) {
            (field_input(key, &field))
        }
    }
}

/// One field of a form, labelled.
fn field_input(key: &str, field: &Field) -> Markup {
    let id = format!("{key}-{}", field.name);
    let name = format!("{FIELD}{}", field.name);
    html! {
        div.field {
            @match &field.kind {
                FieldKind::MultiSelect { choices, defaults } => {
                    fieldset {
                        legend { (field.label) }
                        @for (i, choice) in choices.iter().enumerate() {
                            @let value = choice.value.clone().unwrap_or_default();
                            label {
                                input type="checkbox" name=(name) value=(value) checked[defaults.contains(&i)];
                                " " (choice.label)
                            }
                        }
                    }
                }
                _ => {
                    label for=(id) { (field.label) @if field.required { " *" } }
                    (control(&id, &name, field))
                }
            }
            @if let Some(help) = &field.help { small { (help) } }
        }
    }
}

/// The control a field is answered with.
fn control(id: &str, name: &str, field: &Field) -> Markup {
    match &field.kind {
        FieldKind::Text { default } => html! {
            input id=(id) type="text" name=(name) value=[default] required[field.required];
        },
        FieldKind::Number { integer, default } => html! {
            input id=(id) type="text" inputmode=(if *integer { "numeric" } else { "decimal" })
                name=(name) value=[default] required[field.required];
        },
        FieldKind::Select { choices, default } => html! {
            select id=(id) name=(name) required[field.required] {
                @for (i, choice) in choices.iter().enumerate() {
                    option value=(choice.value.clone().unwrap_or_default())
                        selected[*default == Some(i)] { (choice.label) }
                }
            }
        },
        FieldKind::Confirm { default } => html! {
            select id=(id) name=(name) required[field.required] {
                @if !field.required { option value="" selected[default.is_none()] { (fields::LEAVE_OUT) } }
                option value="yes" selected[*default == Some(true)] { "Yes" }
                option value="no" selected[*default == Some(false)] { "No" }
            }
        },
        FieldKind::MultiSelect { .. } => html! {},
    }
}

/// The answer a posted form gives to `request` (a question as the run records it), or
/// every problem of it, each naming its field.
pub(super) fn posted_answer(
    question: &Question,
    posted: &[(String, String)],
) -> Result<Value, Vec<String>> {
    let values = |name: &str| -> Vec<&str> {
        posted
            .iter()
            .filter(|(key, _)| key.strip_prefix(FIELD) == Some(name))
            .map(|(_, value)| value.as_str())
            .collect()
    };
    let schema = match question {
        Question::Input { schema, .. } => schema,
        Question::Sample { .. } if question.model_only() => {
            return Err(vec![crate::engine::question::MODEL_ONLY.to_owned()]);
        }
        Question::Sample { .. } => {
            let text = values("text").concat();
            if text.trim().is_empty() {
                return Err(vec!["a reply is required".to_owned()]);
            }
            return Ok(sampled_by_person(&Value::String(text)));
        }
    };
    let mut answer = Map::new();
    let mut problems = Vec::new();
    for field in fields::fields(schema) {
        let given = values(&field.name);
        match field_value(&field, &given) {
            Ok(Some(value)) => {
                answer.insert(field.name.clone(), value);
            }
            Ok(None) => {}
            Err(found) => {
                problems.extend(found.into_iter().map(|p| format!("{}: {p}", field.label)))
            }
        }
    }
    match problems.is_empty() {
        true => Ok(Value::Object(answer)),
        false => Err(problems),
    }
}

/// A field's value from the texts posted for it.
fn field_value(field: &Field, given: &[&str]) -> Result<Option<Value>, Vec<String>> {
    let one = given.first().copied().unwrap_or("");
    let value = match &field.kind {
        FieldKind::Text { .. } | FieldKind::Number { .. } => return field.parse(one),
        FieldKind::MultiSelect { .. } => Value::Array(
            given
                .iter()
                .map(|v| Value::String((*v).to_owned()))
                .collect(),
        ),
        _ if one.is_empty() => {
            return match field.required {
                true => Err(vec!["an answer is required".to_owned()]),
                false => Ok(None),
            };
        }
        FieldKind::Confirm { .. } => Value::Bool(one == "yes"),
        FieldKind::Select { .. } => Value::String(one.to_owned()),
    };
    field.check(&value).map(|()| Some(value))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request() -> Value {
        json!({
            "kind": "input",
            "message": "Release <now>?",
            "schema": {
                "type": "object",
                "required": ["name", "count", "ok"],
                "properties": {
                    "name": { "type": "string", "title": "Name", "maxLength": 4 },
                    "count": { "type": "integer", "title": "Count", "minimum": 1 },
                    "ok": { "type": "boolean", "title": "Ship" },
                    "colour": { "type": "string", "enum": ["r", "g"] },
                    "tags": { "type": "array", "items": { "type": "string", "enum": ["a", "b"] } },
                }
            }
        })
    }

    fn input() -> Question {
        serde_json::from_value(request()).unwrap()
    }

    fn posted(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_posted_form_becomes_the_answer_each_field_typed_as_its_schema_says() {
        let form = posted(&[
            ("node", "ask"),
            ("f.name", "v1"),
            ("f.count", " 3 "),
            ("f.ok", "yes"),
            ("f.colour", ""),
            ("f.tags", "a"),
            ("f.tags", "b"),
        ]);
        let answer = posted_answer(&input(), &form).unwrap();
        assert_eq!(
            answer,
            json!({ "name": "v1", "count": 3, "ok": true, "tags": ["a", "b"] })
        );
    }

    #[test]
    fn every_problem_of_a_posted_form_is_named_with_its_field() {
        let form = posted(&[
            ("f.name", "too long"),
            ("f.count", "x"),
            ("f.colour", "blue"),
        ]);
        let problems = posted_answer(&input(), &form).unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].starts_with("Name: "), "{problems:?}");
        assert_eq!(problems[1], "Count: `x` is not an integer");
        assert_eq!(problems[2], "Ship: an answer is required");
        assert!(problems[3].starts_with("colour: "), "{problems:?}");
    }

    #[test]
    fn a_question_for_the_model_is_answered_by_a_person_in_its_place() {
        let request = json!({ "kind": "sample", "prompt": "Summarise", "maxTokens": 100 });
        let question: Question = serde_json::from_value(request).unwrap();
        let answer = posted_answer(&question, &posted(&[("f.text", "A summary")])).unwrap();
        assert_eq!(answer, json!({ "text": "A summary", "model": "person" }));
        assert!(posted_answer(&question, &posted(&[("f.text", " ")])).is_err());
    }

    #[test]
    fn a_question_for_the_model_only_gets_no_form_and_a_posted_reply_is_refused() {
        let request = json!({ "kind": "sample", "prompt": "Review <this>", "system": null,
            "maxTokens": 100, "person": false });
        let question: Question = serde_json::from_value(request.clone()).unwrap();
        let problems = posted_answer(&question, &posted(&[("f.text", "A review")])).unwrap_err();
        assert_eq!(problems, [crate::engine::question::MODEL_ONLY]);
        let view = QuestionView {
            node: Some("analyse".to_owned()),
            instance: None,
            key: "k1".to_owned(),
            request,
            answer: Value::Null,
            answered: false,
        };
        let html = question_form("run-1", &view, &[]).into_string();
        assert!(html.contains("Review &lt;this&gt;"), "{html}");
        assert!(html.contains("Only the client's model answers"), "{html}");
        assert!(!html.contains("<form"), "{html}");
        assert!(!html.contains("<textarea"), "{html}");
    }

    #[test]
    fn a_form_labels_every_field_and_escapes_the_question() {
        let question = QuestionView {
            node: Some("ask".to_owned()),
            instance: None,
            key: "k1".to_owned(),
            request: request(),
            answer: Value::Null,
            answered: false,
        };
        let html = question_form("run-1", &question, &["<b>bad</b>".to_owned()]).into_string();
        assert!(html.contains("Release &lt;now&gt;?"), "{html}");
        assert!(html.contains("&lt;b&gt;bad&lt;/b&gt;"), "{html}");
        for id in ["k1-name", "k1-count", "k1-ok", "k1-colour"] {
            assert!(
                html.contains(&format!(r#"<label for="{id}">"#)),
                "{id}: {html}"
            );
            assert!(html.contains(&format!(r#"id="{id}""#)), "{id}: {html}");
        }
        assert!(html.contains("<legend>tags</legend>"), "{html}");
    }
}
