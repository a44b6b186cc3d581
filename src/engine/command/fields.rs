//! Typed reads of a command's fields, each reporting what it refuses: strings, flags,
//! durations, sizes, counts, variable names, writable folders, exit codes.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::OnResume;
use super::decoder::Decoder;
use super::units::parse_size;
use crate::engine::duration::parse_duration;

/// The longest timeout a command may have.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

impl Decoder {
    /// A list of strings at `path`, or `None` (reported when present and not such a list).
    pub(super) fn strings(
        &mut self,
        path: &str,
        value: Option<&Value>,
        what: &str,
    ) -> Option<Vec<String>> {
        let items = match value? {
            Value::Array(items) => items,
            _ => {
                self.report(path, format!("expected a list of strings: {what}"));
                return None;
            }
        };
        let mut strings = Vec::new();
        for (index, item) in items.iter().enumerate() {
            match item {
                Value::String(text) if text.contains('\0') => {
                    self.report(&format!("{path}[{index}]"), "holds a NUL character")
                }
                Value::String(text) => strings.push(text.clone()),
                _ => self.report(&format!("{path}[{index}]"), "expected a string"),
            }
        }
        (strings.len() == items.len()).then_some(strings)
    }

    pub(super) fn string(&mut self, (path, value): (String, Option<&Value>)) -> Option<String> {
        match value? {
            Value::String(text) => Some(text.clone()),
            _ => {
                self.report(&path, "expected a string");
                None
            }
        }
    }

    pub(super) fn flag(&mut self, (path, value): (String, Option<&Value>)) -> bool {
        match value {
            None => false,
            Some(Value::Bool(flag)) => *flag,
            Some(_) => {
                self.report(&path, "expected true or false");
                false
            }
        }
    }

    pub(super) fn duration(&mut self, (path, value): (String, Option<&Value>)) -> Option<Duration> {
        let text = self.string((path.clone(), value))?;
        match parse_duration(&text) {
            Ok(duration) if duration.is_zero() || duration > MAX_TIMEOUT => {
                self.report(&path, "a timeout is longer than 0s and at most 24h");
                None
            }
            Ok(duration) => Some(duration),
            Err(problem) => {
                self.report(&path, problem);
                None
            }
        }
    }

    /// A size: a whole number of bytes, or text with a unit; at least one byte.
    pub(super) fn size(&mut self, (path, value): (String, Option<&Value>), default: u64) -> u64 {
        let size = match value {
            None => return default,
            Some(Value::String(text)) => parse_size(text),
            Some(Value::Number(n)) => n.as_u64().ok_or_else(|| "expected a size".to_owned()),
            Some(_) => Err("expected a size, like `64KiB` or `1MiB`".to_owned()),
        };
        match size {
            Ok(0) => self.report(&path, "a size is at least 1 byte"),
            Ok(size) => return size,
            Err(problem) => self.report(&path, problem),
        }
        default
    }

    pub(super) fn count(&mut self, (path, value): (String, Option<&Value>), default: u64) -> u64 {
        match value {
            None => default,
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => n.as_u64().unwrap(),
            Some(_) => {
                self.report(&path, "expected a whole number, at least 1");
                default
            }
        }
    }

    /// Names of environment variables: letters, digits and `_`, no leading digit.
    pub(super) fn env(&mut self, (path, value): (String, Option<&Value>)) -> Vec<String> {
        let names = self
            .strings(&path, value, "names of environment variables")
            .unwrap_or_default();
        for (index, name) in names.iter().enumerate() {
            let mut chars = name.chars();
            let first = chars.next();
            let named = first.is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !named {
                let message = "a variable's name is letters, digits and `_`, no leading digit";
                self.report(&format!("{path}[{index}]"), message);
            }
            if names[..index].contains(name) {
                self.report(&format!("{path}[{index}]"), "is named twice");
            }
        }
        names
    }

    /// Folders relative to the workspace that stay inside it: no `..`, not absolute.
    pub(super) fn writable(&mut self, (path, value): (String, Option<&Value>)) -> Vec<PathBuf> {
        let folders = self
            .strings(&path, value, "folders of the workspace")
            .unwrap_or_default();
        let mut writable = Vec::new();
        for (index, folder) in folders.iter().enumerate() {
            let at = format!("{path}[{index}]");
            let relative = Path::new(folder);
            let inside = relative
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
            if folder.is_empty() || !inside {
                self.report(
                    &at,
                    "a writable folder is relative to the workspace, without `..`; \
                     `.` is the workspace itself",
                );
                continue;
            }
            let folder: PathBuf = (relative.components())
                .filter(|c| *c != Component::CurDir)
                .collect();
            let folder = if folder.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                folder
            };
            if !writable.contains(&folder) {
                writable.push(folder);
            }
        }
        writable
    }

    pub(super) fn exit_codes(&mut self, (path, value): (String, Option<&Value>)) -> Vec<i32> {
        let Some(value) = value else {
            return vec![0];
        };
        let codes: Option<Vec<i32>> = value.as_array().and_then(|items| {
            items
                .iter()
                .map(|item| item.as_u64().filter(|c| *c <= 255).map(|c| c as i32))
                .collect()
        });
        match codes {
            Some(codes) if !codes.is_empty() => codes,
            _ => {
                self.report(
                    &path,
                    "expected a non-empty list of exit codes, each 0 to 255",
                );
                vec![0]
            }
        }
    }

    pub(super) fn on_resume(&mut self, (path, value): (String, Option<&Value>)) -> OnResume {
        match value.map(|v| v.as_str()) {
            None => OnResume::Ask,
            Some(Some("ask")) => OnResume::Ask,
            Some(Some("rerun")) => OnResume::Rerun,
            Some(Some("fail")) => OnResume::Fail,
            Some(_) => {
                self.report(&path, "expected \"ask\", \"rerun\" or \"fail\"");
                OnResume::Ask
            }
        }
    }
}
