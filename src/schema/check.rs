//! The walk of a value against its schema, collecting every problem. The path is a chain
//! of steps on the stack, written out only for a problem, so that a value that fits costs
//! no allocation.

use std::fmt::Write;

use serde_json::{Map, Value};

use super::compile::{Schema, kind};
use super::rules::{self, Rule};
use super::{Dialect, Problem, is_calendar_date};

#[derive(Clone, Copy)]
enum Step<'s> {
    Key(&'s str),
    Index(usize),
}

/// Where the walk is: a step below the value where the one before it was (`None` for the
/// value the walk started at).
#[derive(Clone, Copy)]
pub(super) struct At<'s> {
    step: Step<'s>,
    up: Option<&'s At<'s>>,
}

pub(super) struct Walker {
    dialect: Dialect,
    /// The path of the value the walk started at (a JSON field's, for its content).
    prefix: Option<String>,
    problems: Vec<Problem>,
}

impl Walker {
    pub(super) fn new(dialect: Dialect) -> Walker {
        Walker {
            dialect,
            prefix: None,
            problems: Vec::new(),
        }
    }

    pub(super) fn finish(self) -> Vec<Problem> {
        self.problems
    }

    fn path(&self, at: Option<&At<'_>>) -> String {
        let mut steps = Vec::new();
        let mut next = at;
        while let Some(here) = next {
            steps.push(here.step);
            next = here.up;
        }
        let mut path = self.prefix.clone().unwrap_or_default();
        for step in steps.iter().rev() {
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

    fn report(&mut self, at: Option<&At<'_>>, rule: Rule) {
        let path = self.path(at);
        let whole = at.is_none() && self.prefix.is_none();
        self.problems.push(Problem { path, whole, rule });
    }

    /// Checks the value at `step` below `at`.
    fn below(&mut self, at: Option<&At<'_>>, step: Step<'_>, schema: &Schema, value: &Value) {
        let here = At { step, up: at };
        self.value(schema, value, Some(&here));
    }

    fn report_below(&mut self, at: Option<&At<'_>>, step: Step<'_>, rule: Rule) {
        let here = At { step, up: at };
        self.report(Some(&here), rule);
    }

    pub(super) fn value(&mut self, schema: &Schema, value: &Value, at: Option<&At<'_>>) {
        if let Some(types) = schema.types
            && !self.has_type(types, value)
        {
            return self.report(at, Rule::Type(schema.wanted.clone()));
        }
        let chosen = match (&schema.constant, &schema.choices) {
            (Some(constant), _) => constant == value,
            (None, Some(choices)) => choices.contains(value),
            (None, None) => true,
        };
        if !chosen {
            return self.report(at, Rule::Choice(schema.wanted.clone()));
        }
        match value {
            Value::Object(map) => self.object(schema, map, at),
            Value::Array(items) => self.array(schema, items, at),
            Value::String(text) => self.string(schema, text, at),
            Value::Number(_) => self.number(schema, value, at),
            Value::Bool(_) | Value::Null => {}
        }
    }

    /// Unknown keys first, in the order given; then the properties, in the schema's order.
    pub(super) fn object(
        &mut self,
        schema: &Schema,
        map: &Map<String, Value>,
        at: Option<&At<'_>>,
    ) {
        let known = |key: &str| schema.properties.iter().any(|(name, _)| name == key);
        if schema.closed {
            for key in map.keys().filter(|key| !known(key)) {
                self.report_below(at, Step::Key(key), Rule::Unknown);
            }
        }
        let required = |name: &str| schema.required.iter().any(|r| r == name);
        for (name, property) in &schema.properties {
            match map.get(name) {
                Some(value) => self.below(at, Step::Key(name), property, value),
                None if required(name) => self.report_below(at, Step::Key(name), Rule::Required),
                None => {}
            }
        }
        for name in &schema.required {
            if !known(name) && !map.contains_key(name) {
                self.report_below(at, Step::Key(name), Rule::Required);
            }
        }
    }

    fn array(&mut self, schema: &Schema, items: &[Value], at: Option<&At<'_>>) {
        let (min, max) = (schema.min_items, schema.max_items);
        let count = items.len() as u64;
        if min.is_some_and(|min| count < min) || max.is_some_and(|max| count > max) {
            self.report(at, Rule::Count(rules::bounds(min, max), items.len()));
        }
        if let Some(item) = &schema.items {
            for (i, value) in items.iter().enumerate() {
                self.below(at, Step::Index(i), item, value);
            }
        }
    }

    fn string(&mut self, schema: &Schema, text: &str, at: Option<&At<'_>>) {
        if self.dialect == Dialect::Arguments && text.contains('\0') {
            return self.report(at, Rule::Nul);
        }
        let (min, max) = (schema.min_length, schema.max_length);
        if min.is_some() || max.is_some() {
            let units = text.encode_utf16().count();
            let length = units as u64;
            if min.is_some_and(|min| length < min) || max.is_some_and(|max| length > max) {
                self.report(at, Rule::Length(rules::bounds(min, max), units));
            }
        }
        if let Some(format) = schema.format
            && !has_format(format, text)
        {
            self.report(at, Rule::Format(format));
        }
        if let Some(content) = &schema.content {
            self.content(content, text, at);
        }
    }

    /// A JSON field: the JSON in `text`, read as the `from_json` filter reads it (so that
    /// a draft a model wrote in a code fence fits as it is), against `schema`.
    fn content(&mut self, schema: &Schema, text: &str, at: Option<&At<'_>>) {
        let parsed = match super::json_in(text) {
            Ok(parsed) => parsed,
            Err(error) => return self.report(at, Rule::NotJson(error.to_string())),
        };
        let mut inner = Walker::new(self.dialect);
        inner.prefix = Some(self.path(at));
        inner.value(schema, &parsed, None);
        self.problems.extend(inner.problems);
    }

    fn number(&mut self, schema: &Schema, value: &Value, at: Option<&At<'_>>) {
        let n = value.as_f64().unwrap_or_default();
        if schema.minimum.is_some_and(|min| n < min) || schema.maximum.is_some_and(|max| n > max) {
            self.report(at, Rule::Range(schema.wanted.clone(), value.to_string()));
        }
    }

    fn has_type(&self, types: u8, value: &Value) -> bool {
        let bit = match value {
            Value::Object(_) => kind::OBJECT,
            Value::Array(_) => kind::ARRAY,
            Value::String(_) => kind::STRING,
            Value::Bool(_) => kind::BOOLEAN,
            Value::Null => kind::NULL,
            Value::Number(n) => {
                let integer = n.is_i64()
                    || n.is_u64()
                    || (self.dialect == Dialect::Arguments
                        && n.as_f64().is_some_and(|f| f.fract() == 0.0));
                match integer {
                    true => kind::NUMBER | kind::INTEGER,
                    false => kind::NUMBER,
                }
            }
        };
        types & bit != 0
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
