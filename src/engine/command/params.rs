//! A command's parameters: their schemas, read at load, and the argv a call's values
//! build, each value one whole element, checked against its schema and the guards every
//! value passes (no NUL; no leading `-` unless allowed; no line break unless allowed).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::CommandSpec;
use crate::schema::{schema_problems, value_problems};

/// The keys of a parameter's table that are this module's, not the schema's.
const OWN_KEYS: &[&str] = &["allowLeadingDash", "multiline"];

/// One element of an argv template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Element {
    /// Text passed as is.
    Fixed(String),
    /// The value of the named parameter.
    Param(String),
}

/// The element an item of `argv` in the commands file is: a placeholder when the whole
/// item is `{name}`, else fixed text, which may hold no placeholder.
pub(crate) fn element(item: &str) -> Result<Element, String> {
    if let Some(name) = placeholder(item) {
        return Ok(Element::Param(name.to_owned()));
    }
    let embedded = item
        .char_indices()
        .filter(|(_, c)| *c == '{')
        .find_map(|(at, _)| {
            let end = item[at..].find('}')?;
            placeholder(&item[at..=at + end])
        });
    match embedded {
        Some(name) => Err(format!(
            "the placeholder `{{{name}}}` is inside a larger element; a value fills a whole \
             element: make `{{{name}}}` an element of its own (`--out`, `{{dir}}` rather than \
             `--out={{dir}}`)"
        )),
        None => Ok(Element::Fixed(item.to_owned())),
    }
}

/// The name in `{name}`, when `item` is exactly that: letters, digits or `_` between braces.
fn placeholder(item: &str) -> Option<&str> {
    let name = item.strip_prefix('{')?.strip_suffix('}')?;
    let named = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    named.then_some(name)
}

/// The types a parameter may have: each fills one element with its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    String,
    Integer,
    Boolean,
}

/// A parameter: its schema (the project's subset) and the guards it relaxes.
#[derive(Debug, Clone)]
pub(crate) struct Param {
    /// The schema, without this module's own keys.
    pub(crate) schema: Value,
    pub(crate) kind: Kind,
    /// `allowLeadingDash = true`: a value may start with `-`.
    pub(crate) allow_leading_dash: bool,
    /// `multiline = true`: a string may hold line breaks.
    pub(crate) multiline: bool,
    /// The value taken when a call gives none.
    pub(crate) default: Option<Value>,
}

impl Param {
    /// A parameter from its table in the commands file, or every problem of it.
    pub(crate) fn from_schema(table: &Value) -> Result<Param, Vec<String>> {
        let Value::Object(table) = table else {
            return Err(vec![
                "a parameter is a table: its schema, like `type = \"string\"`".to_owned(),
            ]);
        };
        let mut problems = Vec::new();
        let mut schema = table.clone();
        let mut flag = |key: &str| match schema.remove(key) {
            None => false,
            Some(Value::Bool(flag)) => flag,
            Some(_) => {
                problems.push(format!("`{key}` is true or false"));
                false
            }
        };
        let allow_leading_dash = flag("allowLeadingDash");
        let multiline = flag("multiline");
        let schema = Value::Object(schema);
        problems.extend(schema_problems(&schema).into_iter().map(|problem| {
            // The refusal of an unknown keyword lists the schema's; this module's too.
            match problem.contains("is not supported; use ") {
                true => format!("{problem}, {}", OWN_KEYS.join(", ")),
                false => problem,
            }
        }));
        let kind = match schema.get("type").and_then(Value::as_str) {
            Some("string") => Some(Kind::String),
            Some("integer") => Some(Kind::Integer),
            Some("boolean") => Some(Kind::Boolean),
            _ => {
                problems.push(
                    "`type` is \"string\", \"integer\" or \"boolean\": a value fills one \
                     element of argv"
                        .to_owned(),
                );
                None
            }
        };
        if multiline && kind != Some(Kind::String) {
            problems.push("`multiline` goes with type = \"string\"".to_owned());
        }
        if allow_leading_dash && kind == Some(Kind::Boolean) {
            problems.push("`allowLeadingDash` goes with a string or an integer".to_owned());
        }
        let (Some(kind), true) = (kind, problems.is_empty()) else {
            return Err(problems);
        };
        let param = Param {
            default: schema.get("default").cloned(),
            schema,
            kind,
            allow_leading_dash,
            multiline,
        };
        if let Some(default) = &param.default {
            let refused = param.text(default).err().into_iter().flatten();
            problems.extend(refused.map(|problem| format!("`default`: {problem}")));
        }
        match problems.is_empty() {
            true => Ok(param),
            false => Err(problems),
        }
    }

    /// The text of `value` as its element, or why it is refused: its schema's problems,
    /// then the guards'.
    pub(crate) fn text(&self, value: &Value) -> Result<String, Vec<String>> {
        let problems = value_problems(&self.schema, value);
        if !problems.is_empty() {
            return Err(problems);
        }
        let text = match value {
            Value::String(text) => text.clone(),
            Value::Bool(flag) => flag.to_string(),
            Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
            _ => return Err(vec![format!("must be {}", self.kind_name())]),
        };
        let mut problems = Vec::new();
        if text.contains('\0') {
            problems.push("must not contain a NUL character (U+0000)".to_owned());
        }
        if text.starts_with('-') && !self.allow_leading_dash {
            problems.push(
                "must not start with `-`, which a program may take for an option (the \
                 parameter allows it with `allowLeadingDash = true`)"
                    .to_owned(),
            );
        }
        if text.contains(['\n', '\r']) && !self.multiline {
            problems.push(
                "must not contain a line break (the parameter allows them with \
                 `multiline = true`)"
                    .to_owned(),
            );
        }
        match problems.is_empty() {
            true => Ok(text),
            false => Err(problems),
        }
    }

    fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::String => "a string",
            Kind::Integer => "an integer",
            Kind::Boolean => "a boolean",
        }
    }
}

/// The argv of one run of a command, built by [`CommandSpec::argv`] alone: every element
/// is the file's fixed text or one whole checked value, and all are UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Argv {
    pub(crate) command: String,
    pub(crate) elements: Vec<String>,
}

impl Argv {
    /// The name of the command it was built for.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The elements, the program first.
    pub fn elements(&self) -> &[String] {
        &self.elements
    }
}

impl CommandSpec {
    /// The argv for a call with `args`: each parameter's value (or its default) checked
    /// against its schema and the guards, and put, as is, in the elements its placeholders
    /// fill. Every problem at once, each naming its parameter, when some value is refused,
    /// missing, or names no parameter.
    pub fn argv(&self, args: &Map<String, Value>) -> Result<Argv, Vec<String>> {
        let mut problems = Vec::new();
        for key in args.keys().filter(|key| !self.params.contains_key(*key)) {
            let names: Vec<&str> = self.param_names().collect();
            let known = match names.is_empty() {
                true => "it has none".to_owned(),
                false => format!("its parameters: {}", names.join(", ")),
            };
            problems.push(format!(
                "`{key}`: `{}` has no such parameter; {known}",
                self.name
            ));
        }
        let mut texts = HashMap::new();
        for (name, param) in &self.params {
            let Some(value) = args.get(name).or(param.default.as_ref()) else {
                problems.push(format!("`{name}`: is required"));
                continue;
            };
            match param.text(value) {
                Ok(text) => {
                    texts.insert(name.as_str(), text);
                }
                Err(refused) => {
                    problems.extend(refused.into_iter().map(|p| format!("`{name}`: {p}")))
                }
            }
        }
        let mut elements = Vec::with_capacity(self.template.len());
        for element in &self.template {
            match element {
                Element::Fixed(text) => elements.push(text.clone()),
                Element::Param(name) => match texts.get(name.as_str()) {
                    Some(text) => elements.push(text.clone()),
                    // A refused or missing value, reported above; or (which the loader
                    // refuses) a placeholder of no parameter.
                    None if self.params.contains_key(name) => {}
                    None => problems.push(format!("`{name}`: names no parameter")),
                },
            }
        }
        match problems.is_empty() {
            true => Ok(Argv {
                command: self.name.clone(),
                elements,
            }),
            false => Err(problems),
        }
    }
}
