//! Task states, and the one table that maps a node's state to its task's.
//!
//! | node state                     | task state       | status message              |
//! |--------------------------------|------------------|-----------------------------|
//! | pending                        | `working`        | `pending`                   |
//! | running                        | `working`        | `running` (or the retry)    |
//! | running, waiting for an answer | `input_required` | `waiting for an answer`     |
//! | succeeded                      | `completed`      | `succeeded`                 |
//! | skipped                        | `completed`      | the reason it was skipped   |
//! | failed                         | `failed`         | the error message           |
//! | cancelled                      | `cancelled`      | the reason it was cancelled |
//!
//! Invariant: a terminal task state (`completed`, `failed`, `cancelled`) never changes.

use crate::engine::journal::UnitState;
use crate::engine::report::{NodeStatus, RunStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<TaskStatus> {
        Some(match text {
            "working" => TaskStatus::Working,
            "input_required" => TaskStatus::InputRequired,
            "completed" => TaskStatus::Completed,
            "failed" => TaskStatus::Failed,
            "cancelled" => TaskStatus::Cancelled,
            _ => return None,
        })
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// The task state of a unit (a node or a `for_each` instance), by the table above.
    pub fn of_unit(status: NodeStatus, asking: bool) -> TaskStatus {
        match status {
            NodeStatus::Pending | NodeStatus::Running if asking => TaskStatus::InputRequired,
            NodeStatus::Pending | NodeStatus::Running => TaskStatus::Working,
            NodeStatus::Succeeded | NodeStatus::Skipped => TaskStatus::Completed,
            NodeStatus::Failed => TaskStatus::Failed,
            NodeStatus::Cancelled => TaskStatus::Cancelled,
        }
    }

    /// The state of a run's own task once the run ended.
    pub fn of_run(status: RunStatus) -> TaskStatus {
        match status {
            RunStatus::Succeeded => TaskStatus::Completed,
            RunStatus::Failed => TaskStatus::Failed,
            RunStatus::Cancelled => TaskStatus::Cancelled,
        }
    }
}

/// The status message of a unit's task, by the table above.
pub fn unit_message(unit: &UnitState) -> String {
    match unit.status {
        NodeStatus::Pending => "pending".to_owned(),
        NodeStatus::Running if unit.asking.is_some() => "waiting for an answer".to_owned(),
        NodeStatus::Running => match (&unit.error, unit.next_attempt_ms) {
            (Some(error), Some(_)) => format!(
                "attempt {} failed ({}); retrying",
                unit.attempts, error.message
            ),
            _ => "running".to_owned(),
        },
        NodeStatus::Succeeded => "succeeded".to_owned(),
        NodeStatus::Failed => unit
            .error
            .as_ref()
            .map_or_else(|| "failed".to_owned(), |e| e.message.clone()),
        NodeStatus::Skipped | NodeStatus::Cancelled => unit
            .reason
            .clone()
            .unwrap_or_else(|| unit.status.as_str().to_owned()),
    }
}
