//! TOML to JSON, recording the line and column of every field; TOML syntax problems.

use super::*;

pub(super) fn syntax_problem(source: &str, text: &str, error: &toml::de::Error) -> Problem {
    let span = error.span();
    let (line, column) = span
        .clone()
        .map_or((0, 0), |span| Lines::new(text).position(span.start));
    let mut message = format!("invalid TOML: {}", error.message());
    let duplicate = error.message().starts_with("duplicate key");
    if let Some(named) = span
        .filter(|_| duplicate)
        .and_then(|s| duplicate_name(text, s))
    {
        message = format!("invalid TOML: {named} is defined twice");
    }
    Problem {
        location: Location {
            source: source.into(),
            line,
            column,
            path: String::new(),
        },
        message,
    }
}

/// What a duplicate-key error at `span` redefines: a `[table]` header or a `key`.
pub(super) fn duplicate_name(text: &str, span: std::ops::Range<usize>) -> Option<String> {
    let key = text.get(span.clone()).filter(|key| !key.is_empty())?;
    let line_start = text[..span.start].rfind('\n').map_or(0, |at| at + 1);
    let line = text[line_start..].lines().next().unwrap_or("").trim_start();
    let header = line.strip_prefix('[').filter(|_| !line.starts_with("[["));
    match header.and_then(|rest| rest.split_once(']')) {
        Some((name, _)) => Some(format!("table `[{}]`", name.trim())),
        None => Some(format!("key `{key}`")),
    }
}

/// Byte offsets to 1-based line and column (columns count characters).
pub(super) struct Lines<'t> {
    text: &'t str,
    starts: Vec<usize>,
}

impl<'t> Lines<'t> {
    pub(super) fn new(text: &'t str) -> Lines<'t> {
        let breaks = text.match_indices('\n').map(|(at, _)| at + 1);
        Lines {
            text,
            starts: std::iter::once(0).chain(breaks).collect(),
        }
    }

    pub(super) fn position(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&start| start <= offset) - 1;
        let before = self.text.get(self.starts[line]..offset).unwrap_or("");
        (line as u32 + 1, before.chars().count() as u32 + 1)
    }
}

/// TOML to JSON, recording where each value starts.
impl Decoder {
    pub(super) fn new(locations: Locations, toml: bool) -> Decoder {
        Decoder {
            locations,
            problems: Vec::new(),
            silenced: HashSet::new(),
            unknown_keys: 0,
            toml,
        }
    }

    pub(super) fn toml_table(
        &mut self,
        lines: &Lines,
        path: &str,
        table: &DeTable,
    ) -> Map<String, Value> {
        table
            .iter()
            .map(|(key, value)| {
                let path = join(path, key.get_ref());
                if value.get_ref().is_table() {
                    // A `[header]` table spans the whole header; its key is more telling.
                    let position = lines.position(key.span().start);
                    self.locations.by_path.insert(path.clone(), position);
                }
                let value = self.toml_value(lines, &path, value);
                (key.get_ref().to_string(), value)
            })
            .collect()
    }

    pub(super) fn toml_value(
        &mut self,
        lines: &Lines,
        path: &str,
        value: &Spanned<DeValue>,
    ) -> Value {
        if !value.get_ref().is_table() {
            let position = lines.position(value.span().start);
            self.locations.by_path.insert(path.to_owned(), position);
        }
        match value.get_ref() {
            DeValue::String(text) => Value::String(text.to_string()),
            DeValue::Integer(integer) => self.toml_integer(path, integer),
            DeValue::Float(float) => self.toml_float(path, float.as_str()),
            DeValue::Boolean(flag) => Value::Bool(*flag),
            DeValue::Datetime(_) => {
                self.report(
                    path,
                    "datetimes are not allowed; quote the value to make it a string",
                );
                self.silenced.insert(path.to_owned());
                Value::Null
            }
            DeValue::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.toml_value(lines, &indexed(path, i), item))
                    .collect(),
            ),
            DeValue::Table(table) => Value::Object(self.toml_table(lines, path, table)),
        }
    }

    pub(super) fn toml_integer(&mut self, path: &str, integer: &DeInteger) -> Value {
        let (digits, radix) = (integer.as_str(), integer.radix());
        if let Ok(n) = i64::from_str_radix(digits, radix) {
            return Value::Number(n.into());
        }
        if let Ok(n) = u64::from_str_radix(digits, radix) {
            return Value::Number(n.into());
        }
        self.report(path, format!("the integer {integer} is out of range"));
        self.silenced.insert(path.to_owned());
        Value::Null
    }

    pub(super) fn toml_float(&mut self, path: &str, text: &str) -> Value {
        let number = text.parse::<f64>().ok().and_then(Number::from_f64);
        number.map(Value::Number).unwrap_or_else(|| {
            self.report(path, format!("only finite numbers are allowed, not {text}"));
            self.silenced.insert(path.to_owned());
            Value::Null
        })
    }
}
