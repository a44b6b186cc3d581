//! Strict validation of raw wire arguments, reporting every problem at once.
//!
//! The checks mirror the JSON Schemas the tools publish, with the rules a schema cannot
//! express (lengths in UTF-16 code units, real calendar dates, safe integers).

use serde_json::{Map, Value};

use super::ToolError;

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

/// `YYYY-MM-DD` with four, two and two ASCII digits, and a day that exists in that month.
pub fn is_calendar_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    let shape_ok = bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit());
    if !shape_ok {
        return false;
    }
    let number = |range: std::ops::Range<usize>| text[range].parse::<u32>().unwrap_or(0);
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days_in_month).contains(&day)
}
