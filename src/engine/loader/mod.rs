//! Decodes a workflow from TOML (a file) or JSON (inline in a tool call) into a
//! `WorkflowDef`, reporting every structural problem at once, each with where it is.
//!
//! TOML is first turned into JSON while the position of every field is recorded under
//! its dotted path (`nodes.create.tool`, `nodes.create.needs[0]`); one decoder then
//! reads the JSON for both formats.

mod form;
mod model;
mod toml_source;
mod values;

use toml_source::{Lines, syntax_problem};
#[cfg(test)]
pub(crate) mod tests;

use std::collections::HashSet;
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::{Map, Number, Value};
use toml::Spanned;
use toml::de::{DeInteger, DeTable, DeValue};

use super::definition::{
    ActionDef, DEFAULT_MAX_PARALLEL, HistoryLimit, InputDef, Location, Locations, Named, NodeDef,
    Problem, Problems, Repeat, RetryPolicy, ValueType, WorkflowDef,
};
use super::duration::{format_duration, parse_duration};
use super::report::RunStatus;

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "prompt",
    "expose_as_tool",
    "task_support",
    "ask_before_task",
    "result",
    "max_parallel",
    "timeout",
    "inputs",
    "nodes",
    "output",
];
const INPUT_KEYS: &[&str] = &["type", "description", "required", "default", "enum"];
const NODE_KEYS: &[&str] = &[
    "description",
    "tool",
    "args",
    "render",
    "write_file",
    "wait",
    "input",
    "sample",
    "value",
    "list_dir",
    "read_file",
    "workflow",
    "command",
    "history",
    "phase",
    "needs",
    "when",
    "trigger",
    "on_failure",
    "timeout",
    "for_each",
    "retry",
    "repeat",
];
const REPEAT_KEYS: &[&str] = &["until", "max", "delay"];
/// The most iterations a `repeat` may ask for in a file; the operator's `--max-repeat`
/// caps what a run may do.
pub(crate) const MAX_REPEAT: i64 = 1_000_000;
const RETRY_KEYS: &[&str] = &[
    "max_attempts",
    "initial_delay",
    "max_delay",
    "factor",
    "jitter",
];
const WRITE_FILE_KEYS: &[&str] = &["path", "content", "overwrite"];
const INPUT_ACTION_KEYS: &[&str] = &["message", "schema", "default"];
const SAMPLE_KEYS: &[&str] = &["prompt", "system", "max_tokens", "person"];
const VALUE_KEYS: &[&str] = &["expr", "schema"];
const READ_FILE_KEYS: &[&str] = &["path", "max_bytes"];
const WORKFLOW_KEYS: &[&str] = &["name", "inputs"];
const COMMAND_KEYS: &[&str] = &["name", "args"];
const HISTORY_KEYS: &[&str] = &["workflow", "limit", "status", "where"];
/// What a `read_file` node reads unless it says otherwise, and the most it may ask for.
pub(crate) const DEFAULT_READ_BYTES: u64 = 64 * 1024;
pub(crate) const MAX_READ_BYTES: u64 = 1024 * 1024;

/// The rule for workflow names and node ids.
pub(crate) const ID_RULE: &str = "[a-z][a-z0-9_]{0,63}";

/// Whether `text` matches [`ID_RULE`].
pub(crate) fn is_id(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && text.len() <= 64
}

/// Whether `text` can follow `inputs.` in a template: letters, digits, `_`, no leading digit.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Decodes a workflow file. `source` is the path shown in messages, `default_name` the
/// name used when the file sets none (its stem).
pub fn parse_toml(source: &str, default_name: &str, text: &str) -> Result<WorkflowDef, Problems> {
    parse_toml_checked(source, default_name, text, &|_| Ok(()))
}

/// Decodes a definition given inline as JSON; messages name the dotted path of each field.
pub fn parse_json(value: &Value) -> Result<WorkflowDef, Problems> {
    parse_json_checked(value, &|_| Ok(()))
}

/// The semantic checks run on a decoded definition (`validate::validate` with its tools and
/// limits).
pub type Check<'c> = &'c dyn Fn(&WorkflowDef) -> Result<(), Problems>;

/// [`parse_toml`], then `check`. Unknown keys do not stop `check` (the rest of the
/// definition decodes as it would without them), so their problems and its come together;
/// any other decoding problem leaves the definition incomplete and stops before `check`.
pub(crate) fn parse_toml_checked(
    source: &str,
    default_name: &str,
    text: &str,
    check: Check<'_>,
) -> Result<WorkflowDef, Problems> {
    let root = DeTable::parse(text)
        .map_err(|error| Problems(vec![syntax_problem(source, text, &error)]))?;
    let mut decoder = Decoder::new(Locations::new(source), true);
    let value = decoder.toml_table(&Lines::new(text), "", root.get_ref());
    decoder.workflow(&Value::Object(value), default_name, check)
}

/// [`parse_json`], then `check`, as [`parse_toml_checked`] does.
pub(crate) fn parse_json_checked(value: &Value, check: Check<'_>) -> Result<WorkflowDef, Problems> {
    Decoder::new(Locations::new("inline"), false).workflow(value, "inline", check)
}

/// `parent.key`, or `key` at the top. Built by hand: it runs for every field of a file.
fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        return key.to_owned();
    }
    let mut path = String::with_capacity(parent.len() + 1 + key.len());
    path.push_str(parent);
    path.push('.');
    path.push_str(key);
    path
}

/// `path[index]`, for the items of an array.
fn indexed(path: &str, index: usize) -> String {
    let mut indexed = String::with_capacity(path.len() + 6);
    indexed.push_str(path);
    indexed.push('[');
    indexed.push_str(&index.to_string());
    indexed.push(']');
    indexed
}

fn list(names: &[&str]) -> String {
    names.join(", ")
}

/// Reads the JSON form of a definition, collecting problems.
struct Decoder {
    locations: Locations,
    problems: Vec<Problem>,
    /// Paths already reported while converting TOML; later problems there are noise.
    silenced: HashSet<String>,
    /// How many of `problems` are unknown keys, which leave the rest of the definition as
    /// it would be without them.
    unknown_keys: usize,
    toml: bool,
}
