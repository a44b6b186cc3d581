//! An `input` node's form as terminal prompts: which prompt each field becomes, and what
//! typed text means as that field's value. Pure, so that it is tested without a terminal.
//!
//! The form is the restricted schema the loader accepts (`engine/loader/form.rs`): flat,
//! with string, number, integer and boolean fields.

use serde_json::{Map, Value, json};

use super::form;

/// One field of a form, ready to be asked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    pub name: String,
    /// What the prompt says: the field's `title`, else its `description`, else its name.
    pub label: String,
    /// The `description` when the title is the label, and the field's bounds or format.
    pub help: Option<String>,
    pub required: bool,
    pub kind: FieldKind,
    /// The field's schema, which typed values are checked against.
    schema: Value,
}

/// The prompt a field becomes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FieldKind {
    /// A line of text, pre-filled with the default.
    Text { default: Option<String> },
    /// A pick from a list; an optional field's list ends with a choice to leave it out.
    Select {
        choices: Vec<Choice>,
        /// The index of the default choice.
        default: Option<usize>,
    },
    /// A number typed as text, within its bounds.
    Number {
        integer: bool,
        default: Option<String>,
    },
    /// Yes or no.
    Confirm { default: Option<bool> },
    /// Any number of picks from a list.
    MultiSelect {
        choices: Vec<Choice>,
        /// The indices of the choices picked by default.
        defaults: Vec<usize>,
    },
}

/// One choice of a select list: the value it answers, and what the list shows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Choice {
    /// `None` for the choice that leaves an optional field out.
    pub value: Option<String>,
    pub label: String,
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

/// The label of the choice that leaves an optional field out.
pub(crate) const LEAVE_OUT: &str = "(leave empty)";

/// The fields of a form, in the order it declares them.
pub(crate) fn fields(schema: &Value) -> Vec<Field> {
    let required = form::required_fields(schema);
    let properties = schema["properties"].as_object().into_iter().flatten();
    properties
        .map(|(name, property)| field(name, property, required.contains(&name.as_str())))
        .collect()
}

fn field(name: &str, property: &Value, required: bool) -> Field {
    let text = |key: &str| property[key].as_str().filter(|s| !s.is_empty());
    let (label, mut help) = match (text("title"), text("description")) {
        (Some(title), description) => (title, description.map(str::to_owned)),
        (None, Some(description)) => (description, None),
        (None, None) => (name, None),
    };
    if let Some(hint) = hint(property) {
        help = Some(match help {
            Some(help) => format!("{help} ({hint})"),
            None => hint,
        });
    }
    Field {
        name: name.to_owned(),
        label: label.to_owned(),
        help,
        required,
        kind: kind(property, required),
        schema: property.clone(),
    }
}

fn kind(property: &Value, required: bool) -> FieldKind {
    let default = property.get("default");
    match property["type"].as_str() {
        Some("boolean") => FieldKind::Confirm {
            default: default.and_then(Value::as_bool),
        },
        Some(kind @ ("number" | "integer")) => FieldKind::Number {
            integer: kind == "integer",
            default: default.filter(|d| d.is_number()).map(Value::to_string),
        },
        Some("array") => {
            let choices = titled_choices(&property["items"]);
            let picked: Vec<&str> = default
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let defaults = choices
                .iter()
                .enumerate()
                .filter(|(_, c)| c.value.as_deref().is_some_and(|v| picked.contains(&v)))
                .map(|(i, _)| i)
                .collect();
            FieldKind::MultiSelect { choices, defaults }
        }
        _ if property["oneOf"].is_array() || property["enum"].is_array() => {
            select(property, titled_choices(property), required)
        }
        _ => FieldKind::Text {
            default: default.and_then(Value::as_str).map(str::to_owned),
        },
    }
}

/// The choices of a string `enum` (named by `enumNames` where it gives a name), or of a
/// `oneOf` or `anyOf` of `{const, title}`.
fn titled_choices(select: &Value) -> Vec<Choice> {
    let choice = |value: &str, label: Option<&str>| Choice {
        value: Some(value.to_owned()),
        label: label.unwrap_or(value).to_owned(),
    };
    if let Some(options) = ["oneOf", "anyOf"]
        .iter()
        .find_map(|key| select[*key].as_array())
    {
        return options
            .iter()
            .filter_map(|option| Some(choice(option["const"].as_str()?, option["title"].as_str())))
            .collect();
    }
    let names = select["enumNames"].as_array();
    let options = select["enum"].as_array().into_iter().flatten();
    options
        .filter_map(Value::as_str)
        .enumerate()
        .map(|(i, value)| choice(value, names.and_then(|n| n.get(i)).and_then(Value::as_str)))
        .collect()
}

/// A select list of `choices`; an optional field's list ends with a choice to leave it
/// out.
fn select(property: &Value, mut choices: Vec<Choice>, required: bool) -> FieldKind {
    if !required {
        choices.push(Choice {
            value: None,
            label: LEAVE_OUT.to_owned(),
        });
    }
    let default = property["default"].as_str();
    let default = choices
        .iter()
        .position(|c| c.value.is_some() && c.value.as_deref() == default);
    FieldKind::Select { choices, default }
}

/// What the person should know beside the label: bounds, lengths, a format.
fn hint(property: &Value) -> Option<String> {
    let number = |key: &str| property.get(key).filter(|v| v.is_number());
    let mut parts = Vec::new();
    match (number("minimum"), number("maximum")) {
        (Some(min), Some(max)) => parts.push(format!("from {min} to {max}")),
        (Some(min), None) => parts.push(format!("at least {min}")),
        (None, Some(max)) => parts.push(format!("at most {max}")),
        (None, None) => {}
    }
    match (number("minLength"), number("maxLength")) {
        (Some(min), Some(max)) => parts.push(format!("{min} to {max} characters")),
        (Some(min), None) => parts.push(format!("at least {min} characters")),
        (None, Some(max)) => parts.push(format!("at most {max} characters")),
        (None, None) => {}
    }
    match property["format"].as_str() {
        Some("email") => parts.push("an email address".to_owned()),
        Some("uri") => parts.push("a URI".to_owned()),
        Some("date") => parts.push("a date, YYYY-MM-DD".to_owned()),
        Some("date-time") => parts.push("a date and time, RFC 3339".to_owned()),
        _ => {}
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

impl Field {
    /// The value of text typed for a text or number field: `None` leaves an optional
    /// field out; `Err` holds every problem of the text, as the form check names them.
    pub(crate) fn parse(&self, typed: &str) -> Result<Option<Value>, Vec<String>> {
        let number = matches!(self.kind, FieldKind::Number { .. });
        let typed = if number { typed.trim() } else { typed };
        if typed.is_empty() {
            return match self.required {
                true => Err(vec!["an answer is required".to_owned()]),
                false => Ok(None),
            };
        }
        let value = match self.kind {
            FieldKind::Number { integer: true, .. } => match typed.parse::<i64>() {
                Ok(n) => Value::from(n),
                Err(_) => return Err(vec![format!("`{typed}` is not an integer")]),
            },
            FieldKind::Number { integer: false, .. } => {
                let n = typed
                    .parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64);
                match n {
                    Some(n) => Value::Number(n),
                    None => return Err(vec![format!("`{typed}` is not a number")]),
                }
            }
            _ => Value::String(typed.to_owned()),
        };
        self.check(&value).map(|()| Some(value))
    }

    /// The problems of `value` as this field's value, without the field's name before
    /// each (the prompt shows which field it is).
    pub(crate) fn check(&self, value: &Value) -> Result<(), Vec<String>> {
        let schema = json!({ "properties": { &self.name: self.schema } });
        let mut answer = Map::new();
        answer.insert(self.name.clone(), value.clone());
        let prefix = format!("`{}`: ", self.name);
        let problems: Vec<String> = form::answer_problems(&schema, &Value::Object(answer))
            .into_iter()
            .map(|p| p.strip_prefix(&prefix).map(str::to_owned).unwrap_or(p))
            .collect();
        match problems.is_empty() {
            true => Ok(()),
            false => Err(problems),
        }
    }
}

/// A sample node's answer as the terminal gives it: the lines typed, and who wrote them
/// (the terminal has no model; a person answers in its place).
pub(crate) fn sample_answer(lines: &[String]) -> Value {
    crate::engine::actions::sampled_by_person(&Value::String(lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Value {
        json!({
            "type": "object",
            "required": ["name", "count", "colour"],
            "properties": {
                "name": { "type": "string", "title": "Release name",
                          "description": "As in the changelog", "default": "1.4",
                          "maxLength": 8 },
                "count": { "type": "integer", "description": "How many",
                           "minimum": 1, "maximum": 9, "default": 3 },
                "ratio": { "type": "number" },
                "ok": { "type": "boolean", "title": "Ship it?", "default": true },
                "colour": { "type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"],
                            "default": "g" },
                "size": { "type": "string", "enum": ["s", "m"] },
                "mail": { "type": "string", "format": "email" },
            }
        })
    }

    fn field_named(name: &str) -> Field {
        fields(&form())
            .into_iter()
            .find(|f| f.name == name)
            .expect("a field")
    }

    #[test]
    fn titled_and_multiple_choices_become_lists_labelled_by_their_titles() {
        let form = json!({
            "type": "object",
            "properties": {
                "one": { "type": "string", "default": "b",
                         "oneOf": [{ "const": "a", "title": "First" }, { "const": "b", "title": "Second" }] },
                "many": { "type": "array", "default": ["y"],
                          "items": { "type": "string", "enum": ["x", "y"] } },
            }
        });
        let choice = |value: &str, label: &str| Choice {
            value: Some(value.to_owned()),
            label: label.to_owned(),
        };
        let kinds: Vec<FieldKind> = fields(&form).into_iter().map(|f| f.kind).collect();
        let leave_out = Choice {
            value: None,
            label: LEAVE_OUT.to_owned(),
        };
        assert_eq!(
            kinds,
            [
                FieldKind::Select {
                    choices: vec![choice("a", "First"), choice("b", "Second"), leave_out],
                    default: Some(1),
                },
                FieldKind::MultiSelect {
                    choices: vec![choice("x", "x"), choice("y", "y")],
                    defaults: vec![1],
                },
            ]
        );
    }

    #[test]
    fn each_field_type_becomes_its_prompt_with_its_default() {
        let kinds: Vec<(String, FieldKind)> = fields(&form())
            .into_iter()
            .map(|f| (f.name, f.kind))
            .collect();
        let choice = |value: Option<&str>, label: &str| Choice {
            value: value.map(str::to_owned),
            label: label.to_owned(),
        };
        let expected = [
            (
                "name",
                FieldKind::Text {
                    default: Some("1.4".into()),
                },
            ),
            (
                "count",
                FieldKind::Number {
                    integer: true,
                    default: Some("3".into()),
                },
            ),
            (
                "ratio",
                FieldKind::Number {
                    integer: false,
                    default: None,
                },
            ),
            (
                "ok",
                FieldKind::Confirm {
                    default: Some(true),
                },
            ),
            (
                "colour",
                FieldKind::Select {
                    choices: vec![choice(Some("r"), "Red"), choice(Some("g"), "Green")],
                    default: Some(1),
                },
            ),
            (
                "size",
                FieldKind::Select {
                    choices: vec![
                        choice(Some("s"), "s"),
                        choice(Some("m"), "m"),
                        choice(None, LEAVE_OUT),
                    ],
                    default: None,
                },
            ),
            ("mail", FieldKind::Text { default: None }),
        ];
        let expected: Vec<(String, FieldKind)> = expected
            .into_iter()
            .map(|(n, k)| (n.to_owned(), k))
            .collect();
        assert_eq!(kinds, expected);
    }

    #[test]
    fn a_field_is_labelled_by_its_title_or_description_with_its_bounds_as_help() {
        let name = field_named("name");
        assert_eq!(name.label, "Release name");
        assert_eq!(
            name.help.as_deref(),
            Some("As in the changelog (at most 8 characters)")
        );
        assert!(name.required);
        let count = field_named("count");
        assert_eq!(count.label, "How many");
        assert_eq!(count.help.as_deref(), Some("from 1 to 9"));
        let ratio = field_named("ratio");
        assert_eq!(
            (ratio.label.as_str(), ratio.help, ratio.required),
            ("ratio", None, false)
        );
        assert_eq!(
            field_named("mail").help.as_deref(),
            Some("an email address")
        );
    }

    /// Checks what the field `name` makes of each text typed: a value (`None` where the
    /// field is left out) or the one problem it names.
    fn check_parses(name: &str, cases: &[(&str, Result<Option<Value>, &str>)]) {
        let field = field_named(name);
        for (typed, expected) in cases {
            let expected = expected.clone().map_err(|problem| vec![problem.to_owned()]);
            assert_eq!(field.parse(typed), expected, "{name}: {typed:?}");
        }
    }

    #[test]
    fn typed_numbers_are_parsed_and_checked_against_their_bounds() {
        check_parses(
            "count",
            &[
                (" 4 ", Ok(Some(json!(4)))),
                (
                    "12",
                    Err("must be a positive integer no larger than 9 (got 12)"),
                ),
                ("2.5", Err("`2.5` is not an integer")),
                ("", Err("an answer is required")),
            ],
        );
        check_parses(
            "ratio",
            &[
                ("0.25", Ok(Some(json!(0.25)))),
                ("half", Err("`half` is not a number")),
                ("NaN", Err("`NaN` is not a number")),
                // An optional field may be left out.
                ("", Ok(None)),
            ],
        );
    }

    #[test]
    fn typed_text_is_checked_against_its_length_and_format() {
        check_parses(
            "name",
            &[
                ("1.5", Ok(Some(json!("1.5")))),
                (
                    "a very long name",
                    Err("must be at most 8 UTF-16 code units long (got 16)"),
                ),
            ],
        );
        check_parses(
            "mail",
            &[
                ("not an address", Err("must be an email address")),
                ("me@example.org", Ok(Some(json!("me@example.org")))),
                ("", Ok(None)),
            ],
        );
    }

    #[test]
    fn a_sample_typed_at_the_terminal_is_answered_by_a_person() {
        let lines = ["first".to_owned(), "second".to_owned()];
        assert_eq!(
            sample_answer(&lines),
            json!({ "text": "first\nsecond", "model": "person" })
        );
    }
}
