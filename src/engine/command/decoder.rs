//! The decoder of a commands file: TOML turned into JSON with the line of every field
//! recorded under its dotted path, and the problems found, each with its line.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Byte offsets to 1-based lines.
pub(super) struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub(super) fn new(text: &str) -> Lines {
        let breaks = text.match_indices('\n').map(|(at, _)| at + 1);
        Lines {
            starts: std::iter::once(0).chain(breaks).collect(),
        }
    }

    pub(super) fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&start| start <= offset)
    }
}

/// Reads the JSON form of the file, collecting problems with their lines.
#[derive(Default)]
pub(super) struct Decoder {
    /// The line of each field, by dotted path.
    lines: HashMap<String, usize>,
    problems: Vec<(usize, String)>,
}

impl Decoder {
    /// Records a problem at `path`, or at the nearest enclosing field with a known line.
    pub(super) fn report(&mut self, path: &str, message: impl Into<String>) {
        let mut at = path;
        let line = loop {
            if let Some(line) = self.lines.get(at) {
                break *line;
            }
            match at.rfind(['.', '[']) {
                Some(cut) => at = &at[..cut],
                None => break 0,
            }
        };
        let shown = match path {
            "" => String::new(),
            path => format!("`{path}`: "),
        };
        self.problems
            .push((line, format!("{shown}{}", message.into())));
    }

    /// How many problems are reported so far.
    pub(super) fn problem_count(&self) -> usize {
        self.problems.len()
    }

    pub(super) fn finish(mut self) -> Result<(), Vec<String>> {
        if self.problems.is_empty() {
            return Ok(());
        }
        self.problems.sort_by_key(|(line, _)| *line);
        Err(self
            .problems
            .into_iter()
            .map(|(line, problem)| match line {
                0 => problem,
                line => format!("line {line}: {problem}"),
            })
            .collect())
    }

    pub(super) fn toml_table(
        &mut self,
        lines: &Lines,
        path: &str,
        table: &DeTable,
    ) -> Map<String, Value> {
        let mut map = Map::new();
        for (key, value) in table.iter() {
            let path = join(path, key.get_ref());
            // A `[header]` table spans its whole header; its key is more telling.
            self.lines
                .insert(path.clone(), lines.line(key.span().start));
            let value = self.toml_value(lines, &path, value);
            map.insert(key.get_ref().to_string(), value);
        }
        map
    }

    fn toml_value(&mut self, lines: &Lines, path: &str, value: &Spanned<DeValue>) -> Value {
        if !value.get_ref().is_table() {
            self.lines
                .insert(path.to_owned(), lines.line(value.span().start));
        }
        match value.get_ref() {
            DeValue::String(text) => Value::String(text.to_string()),
            DeValue::Integer(integer) => {
                let (digits, radix) = (integer.as_str(), integer.radix());
                match i64::from_str_radix(digits, radix) {
                    Ok(n) => Value::Number(n.into()),
                    Err(_) => {
                        self.report(path, format!("the integer {integer} is out of range"));
                        Value::Null
                    }
                }
            }
            DeValue::Float(float) => {
                let number = float.as_str().parse::<f64>().ok();
                match number.and_then(Number::from_f64) {
                    Some(number) => Value::Number(number),
                    None => {
                        self.report(path, "only finite numbers are allowed");
                        Value::Null
                    }
                }
            }
            DeValue::Boolean(flag) => Value::Bool(*flag),
            DeValue::Datetime(_) => {
                self.report(
                    path,
                    "datetimes are not allowed; quote it to make it a string",
                );
                Value::Null
            }
            DeValue::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.toml_value(lines, &format!("{path}[{i}]"), item))
                    .collect(),
            ),
            DeValue::Table(table) => Value::Object(self.toml_table(lines, path, table)),
        }
    }
}

/// `parent.key`, or `key` at the top.
pub(super) fn join(parent: &str, key: &str) -> String {
    match parent {
        "" => key.to_owned(),
        parent => format!("{parent}.{key}"),
    }
}
