//! What a run reports: states, errors and the run's result.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::todos::{ErrorCode, ToolError};

/// The state of a node. Terminal: all but `Pending` and `Running`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Skipped,
    Cancelled,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Pending => "pending",
            NodeStatus::Running => "running",
            NodeStatus::Succeeded => "succeeded",
            NodeStatus::Failed => "failed",
            NodeStatus::Skipped => "skipped",
            NodeStatus::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        !matches!(self, NodeStatus::Pending | NodeStatus::Running)
    }

    pub fn parse(text: &str) -> Option<NodeStatus> {
        Some(match text {
            "pending" => NodeStatus::Pending,
            "running" => NodeStatus::Running,
            "succeeded" => NodeStatus::Succeeded,
            "failed" => NodeStatus::Failed,
            "skipped" => NodeStatus::Skipped,
            "cancelled" => NodeStatus::Cancelled,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Succeeded,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<RunStatus> {
        Some(match text {
            "succeeded" => RunStatus::Succeeded,
            "failed" => RunStatus::Failed,
            "cancelled" => RunStatus::Cancelled,
            _ => return None,
        })
    }
}

/// Why a node attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeErrorKind {
    /// The tool returned `ok: false`; the code is the tool's.
    Tool(ErrorCode),
    /// The attempt ran out of time.
    Timeout,
    /// A template or expression could not be evaluated.
    Template,
    /// A file could not be written, or its path was refused.
    File,
    /// The action needs something this run does not have (an MCP client to ask).
    Unsupported,
    /// The person declined or cancelled the node's question.
    Refused,
    /// A `value` node's value does not fit its schema.
    Invalid,
    /// An evaluation or the run went over one of its budgets (fuel, output size, `for_each`
    /// instances, units per run): it would do so again, so it is never retried.
    BudgetExceeded,
    /// The node's work panicked: a bug, contained to the node (`internal_error`). A panic
    /// would recur on the same input, so it is not retried.
    Panicked,
    /// A repeating node ran its `max` iterations and `until` never held: another attempt
    /// would only be one more iteration, so it is not retried.
    RepeatExhausted,
    /// A `workflow` node's child run ended failed or cancelled. Retried as the node's
    /// `retry` says: each attempt is a new child run.
    WorkflowFailed,
    /// A `command` node's command is not one the operator allows here and now: it would
    /// be refused again, so it is not retried.
    CommandNotAllowed,
    /// A `command` node's program failed (an exit not listed as fine, a signal, a start
    /// that failed): retried as the node's `retry` says, each retry a new run of it.
    CommandFailed,
    /// A `command` node's program was cut off by the end of the process driving its run,
    /// and is not to run again.
    CommandInterrupted,
}

/// A node's failure: a code a program can test and a message a person can read. Reports
/// show the code and message; [`NodeError::to_stored`] keeps the kind too, so that a
/// stored error reads back as the same error (and is retried, or not, the same way).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(skip)]
    pub kind: NodeErrorKind,
}

impl NodeError {
    pub fn new(kind: NodeErrorKind, message: impl Into<String>) -> NodeError {
        let code = match kind {
            NodeErrorKind::Tool(code) => code,
            NodeErrorKind::Timeout => ErrorCode::Timeout,
            NodeErrorKind::Template => ErrorCode::TemplateError,
            NodeErrorKind::File => ErrorCode::FileError,
            NodeErrorKind::Unsupported => ErrorCode::Unsupported,
            NodeErrorKind::Refused => ErrorCode::Refused,
            NodeErrorKind::Invalid => ErrorCode::InvalidValue,
            NodeErrorKind::BudgetExceeded => ErrorCode::BudgetExceeded,
            NodeErrorKind::Panicked => ErrorCode::InternalError,
            NodeErrorKind::RepeatExhausted => ErrorCode::RepeatExhausted,
            NodeErrorKind::WorkflowFailed => ErrorCode::WorkflowFailed,
            NodeErrorKind::CommandNotAllowed => ErrorCode::CommandNotAllowed,
            NodeErrorKind::CommandFailed => ErrorCode::CommandFailed,
            NodeErrorKind::CommandInterrupted => ErrorCode::CommandInterrupted,
        };
        NodeError {
            code,
            message: message.into(),
            kind,
        }
    }

    /// Whether another attempt might succeed. Rejected input, a missing todo, a template
    /// error or a refused path fail the same way every time.
    pub(crate) fn is_retryable(&self) -> bool {
        match self.kind {
            NodeErrorKind::Tool(code) => code == ErrorCode::InternalError,
            NodeErrorKind::Timeout
            | NodeErrorKind::WorkflowFailed
            | NodeErrorKind::CommandFailed => true,
            NodeErrorKind::File => false,
            NodeErrorKind::Template
            | NodeErrorKind::Unsupported
            | NodeErrorKind::Refused
            | NodeErrorKind::Invalid
            | NodeErrorKind::BudgetExceeded
            | NodeErrorKind::Panicked
            | NodeErrorKind::RepeatExhausted
            | NodeErrorKind::CommandNotAllowed
            | NodeErrorKind::CommandInterrupted => false,
        }
    }

    /// The tool's own error, when the node's failure is one.
    pub(crate) fn as_tool_error(&self) -> Option<ToolError> {
        match self.kind {
            NodeErrorKind::Tool(code) => Some(ToolError {
                code,
                message: self.message.clone(),
            }),
            _ => None,
        }
    }
}

/// The stored form of a node error.
#[derive(Serialize, Deserialize)]
struct StoredError {
    kind: String,
    message: String,
}

impl NodeError {
    /// The error as JSON that [`NodeError::from_stored`] reads back.
    pub(crate) fn to_stored(&self) -> String {
        let kind = match self.kind {
            NodeErrorKind::Tool(code) => format!("tool:{}", code.as_str()),
            // Its code is a tool's code; the stored kind keeps it apart.
            NodeErrorKind::Panicked => "panicked".to_owned(),
            _ => self.code.as_str().to_owned(),
        };
        let stored = StoredError {
            kind,
            message: self.message.clone(),
        };
        serde_json::to_string(&stored).expect("an error serialises")
    }

    pub(crate) fn from_stored(text: &str) -> Option<NodeError> {
        let stored: StoredError = serde_json::from_str(text).ok()?;
        let kind = match stored.kind.as_str() {
            "timeout" => NodeErrorKind::Timeout,
            "template_error" => NodeErrorKind::Template,
            "file_error" => NodeErrorKind::File,
            "unsupported" => NodeErrorKind::Unsupported,
            "refused" => NodeErrorKind::Refused,
            "invalid_value" => NodeErrorKind::Invalid,
            "budget_exceeded" => NodeErrorKind::BudgetExceeded,
            "panicked" => NodeErrorKind::Panicked,
            "repeat_exhausted" => NodeErrorKind::RepeatExhausted,
            "workflow_failed" => NodeErrorKind::WorkflowFailed,
            "command_not_allowed" => NodeErrorKind::CommandNotAllowed,
            "command_failed" => NodeErrorKind::CommandFailed,
            "command_interrupted" => NodeErrorKind::CommandInterrupted,
            other => NodeErrorKind::Tool(ErrorCode::parse_tool(other.strip_prefix("tool:")?)?),
        };
        Some(NodeError::new(kind, stored.message))
    }
}

impl From<ToolError> for NodeError {
    fn from(error: ToolError) -> NodeError {
        NodeError::new(NodeErrorKind::Tool(error.code), error.message)
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct NodeReport {
    pub status: NodeStatus,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<NodeError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl NodeReport {
    /// A todo tool's result, from the one node of its call's run: its output, or the
    /// error its tool raised; anything else is an internal error.
    pub(crate) fn into_tool_result(self) -> Result<Value, ToolError> {
        match (self.status, self.output, self.error) {
            (NodeStatus::Succeeded, Some(data), _) => Ok(data),
            (_, _, Some(error)) => Err(error.as_tool_error().unwrap_or_else(ToolError::internal)),
            _ => Err(ToolError::internal()),
        }
    }
}

/// The nodes of a report, by id, in the order of the definition. The ids are the plan's
/// own, shared; the hasher is a fast one, since the keys are ours, not an attacker's.
pub(crate) type NodeReports = IndexMap<std::sync::Arc<str>, NodeReport, foldhash::fast::FixedState>;

/// The result of a run, as the CLI prints it and `run_workflow` returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    pub run_id: String,
    pub workflow: String,
    pub status: RunStatus,
    pub output: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub nodes: NodeReports,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_error_reads_back_as_the_same_error_and_retries_the_same_way() {
        let errors = [
            NodeError::new(NodeErrorKind::Tool(ErrorCode::InternalError), "db gone"),
            NodeError::new(NodeErrorKind::Tool(ErrorCode::NotFound), "no todo 7"),
            NodeError::new(NodeErrorKind::Timeout, "attempt timed out after 1s"),
            NodeError::new(NodeErrorKind::Template, "undefined value"),
            NodeError::new(NodeErrorKind::File, "exists"),
            NodeError::new(NodeErrorKind::Unsupported, "nobody to ask"),
            NodeError::new(NodeErrorKind::Refused, "the user declined to answer"),
            NodeError::new(NodeErrorKind::BudgetExceeded, "the template-fuel budget"),
            NodeError::new(NodeErrorKind::Panicked, "the node's work panicked"),
            NodeError::new(NodeErrorKind::RepeatExhausted, "until did not hold"),
            NodeError::new(NodeErrorKind::CommandNotAllowed, "no such command"),
            NodeError::new(NodeErrorKind::CommandFailed, "exited with 2"),
            NodeError::new(NodeErrorKind::CommandInterrupted, "cut off"),
        ];
        for error in errors {
            let back = NodeError::from_stored(&error.to_stored()).expect("reads back");
            assert_eq!(back, error);
            assert_eq!(back.is_retryable(), error.is_retryable());
        }
        assert_eq!(
            NodeError::from_stored(r#"{"kind":"tool:bogus","message":""}"#),
            None
        );
    }
}
