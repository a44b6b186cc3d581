//! The walk of a value against its schema, collecting every problem. The path is kept as a
//! stack of borrowed steps and written out only for a problem, so that a value that fits
//! costs no allocation.

use std::fmt::Write;

use serde_json::{Map, Value};

use super::rules::{self, Rule};
use super::{Dialect, FORMATS, Problem, is_calendar_date};

#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

pub(super) struct Walker<'a> {
    dialect: Dialect,
    /// The path of the value the walk started at (a JSON field's, for its content).
    prefix: String,
    at: Vec<Step<'a>>,
    problems: Vec<Problem>,
}

impl<'a> Walker<'a> {
    pub(super) fn new(dialect: Dialect) -> Walker<'a> {
        Walker {
            dialect,
            prefix: String::new(),
            at: Vec::new(),
            problems: Vec::new(),
        }
    }

    pub(super) fn finish(self) -> Vec<Problem> {
        self.problems
    }

    fn path(&self) -> String {
        let mut path = self.prefix.clone();
        for step in &self.at {
            match step {
                Step::Key(key) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                }
                Step::Index(i) => {
                    let _ = write!(path, "[{i}]");
                }
            }
        }
        path
    }

    fn report(&mut self, rule: Rule) {
        let path = self.path();
        self.problems.push(Problem { path, rule });
    }

    /// Checks the value at `step` below the current one.
    fn below(&mut self, step: Step<'a>, schema: &'a Value, value: &'a Value) {
        self.at.push(step);
        self.value(schema, value);
        self.at.pop();
    }

    fn report_below(&mut self, step: Step<'a>, rule: Rule) {
        self.at.push(step);
        self.report(rule);
        self.at.pop();
    }

    pub(super) fn value(&mut self, schema: &'a Value, value: &'a Value) {
        let Value::Object(schema) = schema else {
            return;
        };
        if let Some(kind) = schema.get("type")
            && !self.has_type(kind, value)
        {
            return self.report(Rule::Type(rules::wanted(schema)));
        }
        let chosen = match schema.get("const") {
            Some(constant) => constant == value,
            None => rules::choices(schema).is_none_or(|choices| choices.contains(&value)),
        };
        if !chosen {
            return self.report(Rule::Choice(rules::wanted(schema)));
        }
        match value {
            Value::Object(map) => self.object(schema, map),
            Value::Array(items) => self.array(schema, items),
            Value::String(text) => self.string(schema, text),
            Value::Number(_) => self.number(schema, value),
            Value::Bool(_) | Value::Null => {}
        }
    }

    /// Unknown keys first, in the order given; then the properties, in the schema's order.
    pub(super) fn object(&mut self, schema: &'a Map<String, Value>, map: &'a Map<String, Value>) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let known = |key: &str| properties.is_some_and(|p| p.contains_key(key));
        if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
            for key in map.keys().filter(|key| !known(key)) {
                self.report_below(Step::Key(key), Rule::Unknown);
            }
        }
        let required = match schema.get("required") {
            Some(Value::Array(names)) => names.as_slice(),
            _ => &[],
        };
        let is_required = |name: &str| required.iter().any(|r| r.as_str() == Some(name));
        for (name, property) in properties.into_iter().flatten() {
            match map.get(name) {
                Some(value) => self.below(Step::Key(name), property, value),
                None if is_required(name) => self.report_below(Step::Key(name), Rule::Required),
                None => {}
            }
        }
        for name in required.iter().filter_map(Value::as_str) {
            if !known(name) && !map.contains_key(name) {
                self.report_below(Step::Key(name), Rule::Required);
            }
        }
    }

    fn array(&mut self, schema: &'a Map<String, Value>, items: &'a [Value]) {
        let limit = |key: &str| schema.get(key).and_then(Value::as_u64);
        let (min, max) = (limit("minItems"), limit("maxItems"));
        let count = items.len() as u64;
        if min.is_some_and(|min| count < min) || max.is_some_and(|max| count > max) {
            self.report(Rule::Count(rules::bounds(min, max), items.len()));
        }
        if let Some(item) = schema.get("items") {
            for (i, value) in items.iter().enumerate() {
                self.below(Step::Index(i), item, value);
            }
        }
    }

    fn string(&mut self, schema: &'a Map<String, Value>, text: &str) {
        if self.dialect == Dialect::Arguments && text.contains('\0') {
            return self.report(Rule::Nul);
        }
        let limit = |key: &str| schema.get(key).and_then(Value::as_u64);
        let (min, max) = (limit("minLength"), limit("maxLength"));
        if min.is_some() || max.is_some() {
            let units = text.encode_utf16().count();
            let length = units as u64;
            if min.is_some_and(|min| length < min) || max.is_some_and(|max| length > max) {
                self.report(Rule::Length(rules::bounds(min, max), units));
            }
        }
        let format = schema.get("format").and_then(Value::as_str);
        if let Some(format) = format.and_then(|f| FORMATS.iter().find(|known| **known == f))
            && !has_format(format, text)
        {
            self.report(Rule::Format(format));
        }
        let json = schema
            .get("contentMediaType")
            .is_some_and(|m| m == "application/json");
        if let Some(content) = schema.get("contentSchema").filter(|_| json) {
            self.content(content, text);
        }
    }

    /// A JSON field: the JSON in `text`, read as the `from_json` filter reads it (so that
    /// a draft a model wrote in a code fence fits as it is), against `schema`.
    fn content(&mut self, schema: &Value, text: &str) {
        let parsed = match crate::engine::filters::json_in(text) {
            Ok(parsed) => parsed,
            Err(error) => return self.report(Rule::NotJson(error.to_string())),
        };
        let mut inner = Walker::new(self.dialect);
        inner.prefix = self.path();
        inner.value(schema, &parsed);
        self.problems.extend(inner.problems);
    }

    fn number(&mut self, schema: &'a Map<String, Value>, value: &Value) {
        let n = value.as_f64().unwrap_or_default();
        let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
        if bound("minimum").is_some_and(|min| n < min)
            || bound("maximum").is_some_and(|max| n > max)
        {
            self.report(Rule::Range(rules::wanted(schema), value.to_string()));
        }
    }

    fn has_type(&self, kind: &Value, value: &Value) -> bool {
        match kind {
            Value::String(name) => self.is(name, value),
            Value::Array(names) => names
                .iter()
                .any(|name| name.as_str().is_some_and(|name| self.is(name, value))),
            _ => true,
        }
    }

    fn is(&self, name: &str, value: &Value) -> bool {
        match (name, value) {
            ("object", Value::Object(_))
            | ("array", Value::Array(_))
            | ("string", Value::String(_))
            | ("number", Value::Number(_))
            | ("boolean", Value::Bool(_))
            | ("null", Value::Null) => true,
            ("integer", Value::Number(n)) => {
                n.is_i64()
                    || n.is_u64()
                    || (self.dialect == Dialect::Arguments
                        && n.as_f64().is_some_and(|f| f.fract() == 0.0))
            }
            _ => false,
        }
    }
}

fn has_format(format: &str, text: &str) -> bool {
    use time::format_description::well_known::Rfc3339;
    match format {
        "date" => is_calendar_date(text),
        "date-time" => time::OffsetDateTime::parse(text, &Rfc3339).is_ok(),
        "email" => text
            .split_once('@')
            .is_some_and(|(user, host)| !user.is_empty() && host.contains('.')),
        _ => text.split_once(':').is_some_and(|(scheme, _)| {
            scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }),
    }
}
