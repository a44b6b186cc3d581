//! Hand-written argument checks, reporting every problem at once, in the message format of
//! [`crate::engine::schema::check_args`], which checks a tool's arguments against its
//! published input schema. The todo tools use that; `list_workflows`, `run_workflow`,
//! `list_runs` and `get_run` still check with [`Checker`].

use serde_json::{Map, Value};

use super::ToolError;
use crate::engine::schema::is_calendar_date;

/// Largest integer a JSON number carries exactly in every client (2^53 - 1).
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// One broken rule: the field's path (`title`, `tags[3]`, `filter.status`) and what it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub rule: String,
}

/// Collects problems while the arguments are read, so a caller hears about all of them.
#[derive(Debug, Default)]
pub struct Checker {
    problems: Vec<Problem>,
}

/// Joins a parent path and a key into a child path.
pub fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

impl Checker {
    pub fn new() -> Checker {
        Checker::default()
    }

    pub fn problem(&mut self, field: impl Into<String>, rule: impl Into<String>) {
        self.problems.push(Problem {
            field: field.into(),
            rule: rule.into(),
        });
    }

    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// `Ok` when no rule was broken, else an `invalid_input` error naming every problem.
    pub fn finish(self) -> Result<(), ToolError> {
        if self.problems.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = self
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.field, p.rule))
            .collect();
        Err(ToolError::invalid_input(format!(
            "invalid arguments: {}",
            list.join("; ")
        )))
    }

    /// Checks that `value` is an object whose keys are all in `allowed`.
    pub fn object<'v>(
        &mut self,
        value: &'v Value,
        path: &str,
        allowed: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let Value::Object(map) = value else {
            self.problem(path, "must be an object");
            return None;
        };
        self.known_keys(map, path, allowed);
        Some(map)
    }

    /// Flags every key of `map` not in `allowed` (a `__proto__` key included).
    pub fn known_keys(&mut self, map: &Map<String, Value>, path: &str, allowed: &[&str]) {
        for key in map.keys() {
            if !allowed.contains(&key.as_str()) {
                self.problem(child(path, key), "unknown property");
            }
        }
    }

    /// The value at `key`, or a "required" problem.
    pub fn required<'v>(
        &mut self,
        map: &'v Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<&'v Value> {
        let value = map.get(key);
        if value.is_none() {
            self.problem(child(path, key), "is required");
        }
        value
    }

    /// A string of `min..=max` UTF-16 code units (what a JavaScript client counts), with
    /// no NUL character: PostgreSQL's `text` cannot hold one, and a store must take the same
    /// strings on both backends.
    pub fn string(&mut self, value: &Value, path: &str, min: usize, max: usize) -> Option<String> {
        let Value::String(text) = value else {
            self.problem(path, "must be a string");
            return None;
        };
        if text.contains('\0') {
            self.problem(path, "must not contain a NUL character (U+0000)");
            return None;
        }
        let units = text.encode_utf16().count();
        if units < min || units > max {
            self.problem(
                path,
                format!("must be {min} to {max} UTF-16 code units long (got {units})"),
            );
            return None;
        }
        Some(text.clone())
    }

    /// A `YYYY-MM-DD` string naming a real calendar date.
    pub fn date(&mut self, value: &Value, path: &str) -> Option<String> {
        let Value::String(text) = value else {
            self.problem(path, "must be a string in the form YYYY-MM-DD");
            return None;
        };
        if !is_calendar_date(text) {
            self.problem(path, "must be a real calendar date in the form YYYY-MM-DD");
            return None;
        }
        Some(text.clone())
    }

    /// A positive JSON integer no larger than 2^53 - 1 (`1.0` counts; `1.5`, `"1"` do not).
    pub fn id(&mut self, value: &Value, path: &str) -> Option<i64> {
        const RULE: &str = "must be a positive integer no larger than 9007199254740991";
        let Value::Number(number) = value else {
            self.problem(path, RULE);
            return None;
        };
        let id = if let Some(i) = number.as_i64() {
            Some(i)
        } else {
            number
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER as f64)
                .map(|f| f as i64)
        };
        match id {
            Some(id) if (1..=MAX_SAFE_INTEGER).contains(&id) => Some(id),
            _ => {
                self.problem(path, RULE);
                None
            }
        }
    }

    /// One of `options`, as a string.
    pub fn one_of<'o>(
        &mut self,
        value: &Value,
        path: &str,
        options: &[&'o str],
    ) -> Option<&'o str> {
        let found = value
            .as_str()
            .and_then(|s| options.iter().find(|o| **o == s).copied());
        if found.is_none() {
            self.problem(path, format!("must be one of: {}", options.join(", ")));
        }
        found
    }
}
