//! Problems, and typed reads of single values and of fields in a table.

use super::*;

/// Problems and typed reads of single values.
impl Decoder {
    pub(super) fn report(&mut self, path: &str, message: impl Into<String>) {
        if !self.silenced.contains(path) {
            self.problems.push(self.locations.problem(path, message));
        }
    }

    pub(super) fn type_name(&self, value: &Value) -> &'static str {
        match value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(n) if n.is_f64() => "a float",
            Value::Number(_) => "an integer",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) if self.toml => "a table",
            Value::Object(_) => "an object",
        }
    }

    pub(super) fn wrong_type<T>(&mut self, path: &str, expected: &str, found: &Value) -> Option<T> {
        let found = self.type_name(found);
        self.report(path, format!("expected {expected}, found {found}"));
        None
    }

    pub(super) fn table<'v>(
        &mut self,
        path: &str,
        value: &'v Value,
    ) -> Option<&'v Map<String, Value>> {
        match value {
            Value::Object(map) => Some(map),
            other => {
                let expected = if self.toml { "a table" } else { "an object" };
                self.wrong_type(path, expected, other)
            }
        }
    }

    /// A table whose keys must be among `allowed`.
    pub(super) fn fields<'v>(
        &mut self,
        path: &str,
        value: &'v Value,
        allowed: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let map = self.table(path, value)?;
        for key in map.keys().filter(|key| !allowed.contains(&key.as_str())) {
            let message = format!("unknown key `{key}`; allowed keys: {}", list(allowed));
            let before = self.problems.len();
            self.report(&join(path, key), message);
            self.unknown_keys += self.problems.len() - before;
        }
        Some(map)
    }

    pub(super) fn string(&mut self, path: &str, value: &Value) -> Option<String> {
        match value {
            Value::String(text) => Some(text.clone()),
            other => self.wrong_type(path, "a string", other),
        }
    }

    pub(super) fn boolean(&mut self, path: &str, value: &Value) -> Option<bool> {
        match value {
            Value::Bool(flag) => Some(*flag),
            other => self.wrong_type(path, "a boolean (true or false)", other),
        }
    }

    pub(super) fn integer(&mut self, path: &str, value: &Value, min: i64, max: i64) -> Option<i64> {
        let Some(n) = value.as_i64().filter(|_| !value.is_f64()) else {
            if value.is_u64() {
                self.report(
                    path,
                    format!("must be between {min} and {max}, got {value}"),
                );
                return None;
            }
            return self.wrong_type(path, "an integer", value);
        };
        if n < min || n > max {
            self.report(path, format!("must be between {min} and {max}, got {n}"));
            return None;
        }
        Some(n)
    }

    pub(super) fn duration(&mut self, path: &str, value: &Value) -> Option<Duration> {
        let text = self.string(path, value)?;
        parse_duration(&text)
            .map_err(|error| self.report(path, error))
            .ok()
    }

    /// A duration that must be longer than zero.
    pub(super) fn timeout(&mut self, path: &str, value: &Value) -> Option<Duration> {
        let duration = self.duration(path, value)?;
        if duration.is_zero() {
            self.report(path, "a timeout must be longer than 0s");
            return None;
        }
        Some(duration)
    }

    pub(super) fn choice<T: Named>(&mut self, path: &str, value: &Value) -> Option<T> {
        let text = self.string(path, value)?;
        let parsed = T::parse(&text);
        if parsed.is_none() {
            let message = format!("unknown value `{text}`; expected one of {}", list(T::NAMES));
            self.report(path, message);
        }
        parsed
    }
}

type Read<T> = fn(&mut Decoder, &str, &Value) -> Option<T>;

/// Reads of fields in a table.
impl Decoder {
    /// Reads `parent.key` if present.
    pub(super) fn opt<T>(
        &mut self,
        map: &Map<String, Value>,
        parent: &str,
        key: &str,
        read: Read<T>,
    ) -> Option<T> {
        let value = map.get(key)?;
        read(self, &join(parent, key), value)
    }

    /// Reads `parent.key` if present, else the field's default (`false`, empty, the
    /// enum's default).
    pub(super) fn or_default<T: Default>(
        &mut self,
        map: &Map<String, Value>,
        parent: &str,
        key: &str,
        read: Read<T>,
    ) -> T {
        self.opt(map, parent, key, read).unwrap_or_default()
    }

    /// Reads `parent.key`, reporting it when missing.
    pub(super) fn req<T: Default>(
        &mut self,
        map: &Map<String, Value>,
        parent: &str,
        key: &str,
        read: Read<T>,
    ) -> T {
        if !map.contains_key(key) {
            self.report(parent, format!("missing required key `{key}`"));
        }
        self.or_default(map, parent, key, read)
    }

    pub(super) fn any(&mut self, _path: &str, value: &Value) -> Option<Value> {
        Some(value.clone())
    }

    pub(super) fn strings(&mut self, path: &str, value: &Value) -> Option<Vec<String>> {
        let Value::Array(items) = value else {
            return self.wrong_type(path, "an array of strings", value);
        };
        let read = items.iter().enumerate();
        let strings: Vec<_> = read
            .filter_map(|(i, item)| self.string(&indexed(path, i), item))
            .collect();
        (strings.len() == items.len()).then_some(strings)
    }
}
