//! The one validator of values against schemas: the arguments of a tool against the input
//! schema it publishes, a form's answer against the form, a `value` node's output against
//! its schema, and a run's inputs against the workflow's inputs schema. A leaf: it knows
//! no other module of the crate; a tool maps its refusal ([`InvalidArgs`]) to its own
//! error.
//!
//! Our subset of JSON Schema, every keyword of it checked:
//! - `type` (one name or a list): `object`, `array`, `string`, `number`, `integer`,
//!   `boolean`, `null`;
//! - objects: `properties`, `required`, `additionalProperties` (`false` refuses every other
//!   key);
//! - arrays: `items`, `minItems`, `maxItems`;
//! - strings: `minLength`, `maxLength`, counted in UTF-16 code units (what a JavaScript
//!   client counts, and what the tools document); `format`: `date` (a real calendar date,
//!   `YYYY-MM-DD`), `date-time` (RFC 3339), `email`, `uri`; `contentMediaType =
//!   "application/json"` with a `contentSchema` that the JSON read from the string fits;
//! - numbers: `minimum`, `maximum`;
//! - choices: `enum`, `const`, and `oneOf` or `anyOf` of `{const, title}` (a form's titled
//!   choices).
//!
//! `title`, `description`, `default` and `enumNames` are annotations. A `pattern` is taken
//! only beside `format: date`, as the date's shape, which the calendar check makes and more.
//! [`schema_problems`] refuses every other keyword, so a schema never promises a check
//! that is not made.
//!
//! Two readings ([`Dialect`]) differ where wire arguments and stored data differ: a tool's
//! arguments take `1.0` as an integer and refuse U+0000 in strings (the store keeps them as
//! text, which PostgreSQL cannot hold a NUL in); data kept as JSON (answers, outputs,
//! inputs) takes an integer only without a fraction, as templates show it, and may hold
//! any character.
//!
//! Every problem is reported at once, each with the path of its value (`tags[3]`,
//! `filter.status`): unknown keys of an object first, then its properties in the schema's
//! order.

mod accept;
mod check;
mod compile;
mod rules;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

#[cfg(test)]
pub(crate) use accept::KEYWORDS;
pub use accept::schema_problems;
pub(crate) use compile::Schema;
pub(crate) use rules::Rule;

/// A tool's arguments refused, with every problem named: `invalid arguments: field:
/// rule; field: rule`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidArgs(pub String);

/// How a value is read: see the module's documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// A tool's wire arguments.
    Arguments,
    /// Data kept as JSON.
    Data,
}

/// One broken rule: the path of the value and the rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub path: String,
    /// Whether the value is the one checked itself, not a part of it (whose path may be
    /// empty too: a key `""`).
    pub whole: bool,
    pub rule: Rule,
}

/// Every way `value` misfits `schema`, in the order described above.
pub(crate) fn problems(schema: &Value, value: &Value, dialect: Dialect) -> Vec<Problem> {
    let schema = Schema::compile(schema);
    let mut walker = check::Walker::new(dialect);
    walker.value(&schema, value, None);
    walker.finish()
}

/// The problems of a tool's `args` against its published input `schema`: `Ok` when none,
/// else the refusal that names every one, `invalid arguments: field: rule;
/// field: rule`. A tool called often compiles its schema once and calls
/// [`Schema::check_args`].
pub(crate) fn check_args(schema: &Value, args: &Map<String, Value>) -> Result<(), InvalidArgs> {
    Schema::compile(schema).check_args(args)
}

/// `Ok` without problems, else the refusal that names every one.
fn refusal(list: Vec<String>) -> Result<(), InvalidArgs> {
    if list.is_empty() {
        return Ok(());
    }
    Err(InvalidArgs(format!(
        "invalid arguments: {}",
        list.join("; ")
    )))
}

impl Schema {
    /// [`check_args`] against this compiled schema.
    pub(crate) fn check_args(&self, args: &Map<String, Value>) -> Result<(), InvalidArgs> {
        self.check_args_with(args, &[])
    }

    /// [`Schema::check_args`], with the problems of rules the subset cannot state (`more`:
    /// each a path and what it says) reported after the schema's own, all at once.
    pub(crate) fn check_args_with(
        &self,
        args: &Map<String, Value>,
        more: &[(&str, &str)],
    ) -> Result<(), InvalidArgs> {
        let mut walker = check::Walker::new(Dialect::Arguments);
        walker.object(self, args, None);
        let mut list: Vec<String> = (walker.finish().iter())
            .map(|p| format!("{}: {}", p.path, p.rule))
            .collect();
        list.extend(more.iter().map(|(path, rule)| format!("{path}: {rule}")));
        refusal(list)
    }
}

/// Every way `value` misfits `schema` (a schema without problems), each as
/// `` `path`: rule `` (the rule alone for the value itself).
pub(crate) fn value_problems(schema: &Value, value: &Value) -> Vec<String> {
    problems(schema, value, Dialect::Data)
        .into_iter()
        .map(|problem| match problem.whole {
            true => problem.rule.to_string(),
            false => format!("`{}`: {}", problem.path, problem.rule),
        })
        .collect()
}

/// The integer a checked `integer` argument holds (`1.0` is 1).
pub(crate) fn whole(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0)
            .map(|f| f as i64)
    })
}

/// `YYYY-MM-DD` naming a day of the proleptic Gregorian calendar (`format: date`): the
/// shape by hand (ISO 8601 parsers also take week and ordinal dates), the day by `time`.
pub(crate) fn is_calendar_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    let shaped = bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        });
    if !shaped {
        return false;
    }
    let number = |range: std::ops::Range<usize>| text[range].parse::<u16>().unwrap_or(0);
    let Ok(month) = time::Month::try_from(number(5..7) as u8) else {
        return false;
    };
    time::Date::from_calendar_date(i32::from(number(0..4)), month, number(8..10) as u8).is_ok()
}

/// The formats `format` may name.
pub(crate) const FORMATS: &[&str] = &["date", "date-time", "email", "uri"];

/// The JSON in `text`, read as the templates' `from_json` filter reads it: the whole text,
/// or else what lies between its first `{` or `[` and its last `}` or `]` (a draft a
/// model wrote in a code fence, say).
pub(crate) fn json_in(text: &str) -> Result<Value, serde_json::Error> {
    let trimmed = text.trim();
    serde_json::from_str::<Value>(trimmed).or_else(|first| {
        let start = trimmed.find(['{', '[']);
        let end = trimmed.rfind(['}', ']']);
        match (start, end) {
            (Some(start), Some(end)) if start < end => {
                serde_json::from_str(&trimmed[start..=end]).map_err(|_| first)
            }
            _ => Err(first),
        }
    })
}
