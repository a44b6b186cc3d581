//! The workflow model: what a workflow file or an inline definition says, after decoding.
//!
//! These types carry no behaviour; `loader` builds them from TOML or JSON, `validate`
//! checks them, `plan` compiles them for the scheduler.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::report::RunStatus;

/// Where a piece of a definition came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file path, or `inline` for a definition passed in a tool call.
    pub source: Arc<str>,
    /// 1-based; 0 when unknown (inline JSON reports the path instead).
    pub line: u32,
    pub column: u32,
    /// The dotted path of the field, e.g. `nodes.create.tool`.
    pub path: String,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}:{}", self.source, self.line, self.column)?;
        } else {
            write!(f, "{}", self.source)?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        Ok(())
    }
}

/// One thing wrong with a definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub location: Location,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// Every problem found in a definition; never empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

/// The JSON type an input must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
}

/// A setting a workflow file names by one of a fixed list of words.
pub(crate) trait Named: Copy + 'static {
    /// Every value, in the order of [`Named::NAMES`].
    const ALL: &'static [Self];
    /// The word for each value, in the order an error lists them.
    const NAMES: &'static [&'static str];

    fn parse(name: &str) -> Option<Self> {
        let at = Self::NAMES.iter().position(|known| *known == name)?;
        Some(Self::ALL[at])
    }
}

impl ValueType {
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn matches(self, value: &Value) -> bool {
        match self {
            ValueType::String => value.is_string(),
            ValueType::Integer => value.is_i64() || value.is_u64(),
            ValueType::Number => value.is_number(),
            ValueType::Boolean => value.is_boolean(),
            ValueType::Array => value.is_array(),
            ValueType::Object => value.is_object(),
        }
    }
}

impl Named for ValueType {
    const ALL: &'static [ValueType] = &[
        ValueType::String,
        ValueType::Integer,
        ValueType::Number,
        ValueType::Boolean,
        ValueType::Array,
        ValueType::Object,
    ];
    const NAMES: &'static [&'static str] =
        &["string", "integer", "number", "boolean", "array", "object"];
}

/// A declared input of a workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct InputDef {
    pub kind: ValueType,
    pub description: String,
    pub required: bool,
    pub default: Option<Value>,
    /// The allowed values (`enum` in the file).
    pub choices: Option<Vec<Value>>,
}

/// When a node runs, given the states of its upstream nodes. See ARCHITECTURE.md for the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Trigger {
    #[default]
    AllSuccess,
    AllDone,
    OneSuccess,
    NoneFailed,
}

impl Named for Trigger {
    const ALL: &'static [Trigger] = &[
        Trigger::AllSuccess,
        Trigger::AllDone,
        Trigger::OneSuccess,
        Trigger::NoneFailed,
    ];
    const NAMES: &'static [&'static str] =
        &["all_success", "all_done", "one_success", "none_failed"];
}

/// Whether a workflow's tool runs as an MCP task: as the client asks (`optional`), always
/// (`required`), or never (`forbidden`, for a quick call answered at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum TaskSupport {
    Forbidden,
    #[default]
    Optional,
    Required,
}

impl Named for TaskSupport {
    const ALL: &'static [TaskSupport] = &[
        TaskSupport::Forbidden,
        TaskSupport::Optional,
        TaskSupport::Required,
    ];
    const NAMES: &'static [&'static str] = &["forbidden", "optional", "required"];
}

impl TaskSupport {
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// What a workflow's tool answers: the `{ok, data}` envelope with the run's report
/// (`envelope`), or the one value of its `output` as plain text (`text`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ResultForm {
    #[default]
    Envelope,
    Text,
}

impl Named for ResultForm {
    const ALL: &'static [ResultForm] = &[ResultForm::Envelope, ResultForm::Text];
    const NAMES: &'static [&'static str] = &["envelope", "text"];
}

/// What a node's failure does to its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OnFailure {
    /// Fail the run: cancel what is running, start nothing new.
    #[default]
    FailRun,
    /// Record the failure and let downstream trigger rules decide.
    Continue,
}

impl Named for OnFailure {
    const ALL: &'static [OnFailure] = &[OnFailure::FailRun, OnFailure::Continue];
    const NAMES: &'static [&'static str] = &["fail_run", "continue"];
}

/// How a node is retried. `max_attempts` counts every try, the first included.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub initial_delay: Duration,
    pub max_delay: Duration,
    pub factor: f32,
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 1,
            initial_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(30),
            factor: 2.0,
            jitter: false,
        }
    }
}

/// How a node repeats: its work runs again, after `delay`, until `until` holds of what an
/// iteration produced, at most `max` times in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    /// An expression over the node's context, `output` (this iteration's) and `repeat`.
    pub until: String,
    /// Iterations at most, the first included.
    pub max: u32,
    /// The pause between the end of one iteration and the start of the next.
    #[serde(default, skip_serializing_if = "Duration::is_zero")]
    pub delay: Duration,
}

/// The one thing a node does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ActionDef {
    /// Call a registered tool; string values in `args` are templates.
    Tool { name: String, args: Value },
    /// Render a template to text.
    Render { template: String },
    /// Write a file under the workspace root.
    WriteFile {
        path: String,
        content: String,
        overwrite: bool,
    },
    /// Sleep.
    Wait { duration: Duration },
    /// Sleep for as long as a template says (`"{{ inputs.seconds }}s"`), read when the
    /// node runs.
    WaitFor { duration: String },
    /// Ask the user, with a flat JSON Schema form.
    Input {
        message: String,
        schema: Value,
        default: Option<Value>,
    },
    /// Ask the client's model.
    Sample {
        prompt: String,
        system: Option<String>,
        max_tokens: Option<u32>,
        /// Whether a person may write the reply when the client has no model
        /// (`person = false`: only a model answers).
        person: bool,
    },
    /// Evaluate an expression to a JSON value, checked against `schema` when it has one.
    Value { expr: String, schema: Option<Value> },
    /// List a folder under the workspace root: its entries' names, kinds and sizes.
    ListDir { path: String },
    /// Read a text file under the workspace root, at most `max_bytes` of it.
    ReadFile { path: String, max_bytes: u64 },
    /// Run installed workflow `name` as a run of its own, a child of this one; string
    /// values in `inputs` are templates. Its output is the node's.
    Workflow { name: String, inputs: Value },
    /// Run the operator's command `name` (of the commands file) with `args` for its
    /// parameters; string values in `args` are templates. Installed workflows only.
    Command { name: String, args: Value },
    /// Read earlier finished runs of a workflow, newest first: those the run's principal
    /// may see, at most `limit`, of the given statuses (any, when empty), and only those
    /// for which the `filter` expression (`where` in the file) holds, with the candidate
    /// run bound as `past`.
    History {
        /// The workflow whose runs are read: a name, or a template read when the node runs.
        workflow: String,
        limit: HistoryLimit,
        status: Vec<RunStatus>,
        filter: Option<String>,
    },
}

/// How many runs a `history` node reads at most: a number, or a template that gives one
/// when the node runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HistoryLimit {
    /// Unsaid: [`DEFAULT_HISTORY_LIMIT`], or the operator's cap where it is lower, so that
    /// lowering the cap refuses no definition that never named a limit.
    Default,
    Fixed(u32),
    Template(String),
}

/// The runs a `history` node reads unless it says otherwise.
pub const DEFAULT_HISTORY_LIMIT: usize = 20;

/// The fields of a past run, as a `history` node's output lists it and as its `where`
/// expression sees it (`past`).
pub(crate) const PAST_RUN_FIELDS: &[&str] = &[
    "run_id",
    "workflow",
    "status",
    "created_at",
    "finished_at",
    "inputs",
    "output",
    "error",
];

impl Named for RunStatus {
    const ALL: &'static [RunStatus] = &[
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];
    const NAMES: &'static [&'static str] = &["succeeded", "failed", "cancelled"];
}

impl ActionDef {
    pub(crate) const NAMES: &'static [&'static str] = &[
        "tool",
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
    ];

    pub fn kind(&self) -> &'static str {
        match self {
            ActionDef::Tool { .. } => "tool",
            ActionDef::Render { .. } => "render",
            ActionDef::WriteFile { .. } => "write_file",
            ActionDef::Wait { .. } | ActionDef::WaitFor { .. } => "wait",
            ActionDef::Input { .. } => "input",
            ActionDef::Sample { .. } => "sample",
            ActionDef::Value { .. } => "value",
            ActionDef::ListDir { .. } => "list_dir",
            ActionDef::ReadFile { .. } => "read_file",
            ActionDef::Workflow { .. } => "workflow",
            ActionDef::Command { .. } => "command",
            ActionDef::History { .. } => "history",
        }
    }
}

/// A vertex of the DAG.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDef {
    pub id: String,
    pub description: String,
    pub action: ActionDef,
    pub needs: Vec<String>,
    /// An expression; false skips the node with reason "condition false".
    pub when: Option<String>,
    pub trigger: Trigger,
    pub on_failure: OnFailure,
    /// Per attempt.
    pub timeout: Option<Duration>,
    /// An expression yielding a list: one instance per item.
    pub for_each: Option<String>,
    pub retry: RetryPolicy,
    /// Run the node's work again until a condition holds.
    pub repeat: Option<Repeat>,
    /// The phase the node belongs to. When a workflow's nodes have phases, its progress
    /// counts phases rather than nodes.
    pub phase: Option<String>,
}

/// A whole workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowDef {
    pub name: String,
    pub description: String,
    /// What its prompt says to the model when a person starts it as a command, in place of
    /// the text made from its description and phases.
    pub prompt: Option<String>,
    pub expose_as_tool: bool,
    /// Whether its tool runs as an MCP task.
    pub task_support: TaskSupport,
    /// Under the SEP-2663 extension, whether its first questions are asked in rounds of
    /// the call (`input_required`) before the call becomes a task.
    pub ask_before_task: bool,
    /// What its tool answers.
    pub result: ResultForm,
    pub max_parallel: usize,
    pub timeout: Option<Duration>,
    pub inputs: IndexMap<String, InputDef>,
    pub nodes: IndexMap<String, NodeDef>,
    /// The run's result: names mapped to expressions.
    pub output: IndexMap<String, String>,
    /// Where each field came from, keyed by its dotted path (`nodes.create.tool`).
    pub locations: Locations,
}

pub(crate) const DEFAULT_MAX_PARALLEL: usize = 8;

/// Field locations of a decoded definition.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Locations {
    pub source: Arc<str>,
    /// A fast hasher: the keys are our own paths, and a 10 000-node file has ~50 000 of them.
    pub by_path: std::collections::HashMap<String, (u32, u32), foldhash::fast::FixedState>,
}

impl Locations {
    pub fn new(source: impl Into<Arc<str>>) -> Locations {
        Locations {
            source: source.into(),
            by_path: Default::default(),
        }
    }

    /// The location of `path`, or of its nearest recorded parent.
    pub fn at(&self, path: &str) -> Location {
        let mut probe = path;
        let (line, column) = loop {
            if let Some(found) = self.by_path.get(probe) {
                break *found;
            }
            match probe.rfind('.') {
                Some(dot) => probe = &probe[..dot],
                None => break (0, 0),
            }
        };
        Location {
            source: self.source.clone(),
            line,
            column,
            path: path.to_owned(),
        }
    }

    pub fn problem(&self, path: &str, message: impl Into<String>) -> Problem {
        Problem {
            location: self.at(path),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads_back_its_names<T: Named + std::fmt::Debug + PartialEq>(name: fn(T) -> &'static str) {
        assert_eq!(T::ALL.len(), T::NAMES.len());
        for &value in T::ALL {
            assert_eq!(T::parse(name(value)), Some(value), "{value:?}");
        }
    }

    #[test]
    fn every_named_setting_reads_back_the_name_it_is_written_with() {
        reads_back_its_names(ValueType::name);
        reads_back_its_names(TaskSupport::as_str);
        reads_back_its_names(|value: Trigger| Trigger::NAMES[value as usize]);
        reads_back_its_names(|value: ResultForm| ResultForm::NAMES[value as usize]);
        reads_back_its_names(|value: OnFailure| OnFailure::NAMES[value as usize]);
        reads_back_its_names(RunStatus::as_str);
        assert_eq!(OnFailure::parse("ignore"), None);
    }
}
