//! The todo tools (the task manager's five): one file per tool, and the registry the engine calls by name.
//!
//! Every call goes through [`Tools::invoke`]: validate the raw arguments strictly, run,
//! append an audit row, and return a structured result. Nothing here knows MCP.

pub(crate) mod add_task;
pub(crate) mod complete_task;
pub(crate) mod delete_task;
pub(crate) mod list_tasks;
mod schema;
pub(crate) mod search_tasks;

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::Serialize;
use serde_json::{Map, Value};

pub use crate::store::AuditOutcome;
use crate::store::{ReadyAudit, Store, StoreError, Tx};

/// The `code` of every failure a caller reads: what a failed result's `error.code` says,
/// whether a todo tool, a run or one node failed. The todo tools answer with the first
/// three; a run's report and a sub-task's result carry a node's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidInput,
    NotFound,
    InternalError,
    /// A run ended failed; its report is under `data`.
    RunFailed,
    /// A run was cancelled; its report, when there is one, is under `data`.
    RunCancelled,
    /// The caller has as many unfinished runs as the server allows each one.
    TooManyRuns,
    /// The caller has as many `tasks/result` requests waiting as the server allows.
    TooManyResultWaits,
    /// A node's attempt ran out of time.
    Timeout,
    /// A node's template or expression could not be evaluated.
    TemplateError,
    /// A node's file could not be read or written, or its path was refused.
    FileError,
    /// A node needs what the run does not have (a client to ask).
    Unsupported,
    /// A node's question was declined, cancelled or never answered in time.
    Refused,
    /// A `value` node's value does not fit its schema.
    InvalidValue,
    /// A node went over one of its run's budgets.
    BudgetExceeded,
    /// A repeating node's `until` did not hold after its `max` iterations.
    RepeatExhausted,
    /// A `workflow` node's child run failed or was cancelled.
    WorkflowFailed,
    /// A `command` node names a command the operator's commands file does not (or there
    /// is no commands file), or one this kernel cannot confine as it asks.
    CommandNotAllowed,
    /// A `command` node's program exited with a code the operator does not list as fine,
    /// was killed by a signal, or could not be started.
    CommandFailed,
    /// A `command` node's program was running when the process driving its run stopped,
    /// and it is not run again: its `on_resume` says fail, or the person asked said so.
    CommandInterrupted,
    /// A unit ended failed without an error of its own.
    Failed,
    /// A unit was cancelled.
    Cancelled,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::NotFound => "not_found",
            ErrorCode::InternalError => "internal_error",
            ErrorCode::RunFailed => "run_failed",
            ErrorCode::RunCancelled => "run_cancelled",
            ErrorCode::TooManyRuns => "too_many_runs",
            ErrorCode::TooManyResultWaits => "too_many_result_waits",
            ErrorCode::Timeout => "timeout",
            ErrorCode::TemplateError => "template_error",
            ErrorCode::FileError => "file_error",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Refused => "refused",
            ErrorCode::InvalidValue => "invalid_value",
            ErrorCode::BudgetExceeded => "budget_exceeded",
            ErrorCode::RepeatExhausted => "repeat_exhausted",
            ErrorCode::WorkflowFailed => "workflow_failed",
            ErrorCode::CommandNotAllowed => "command_not_allowed",
            ErrorCode::CommandFailed => "command_failed",
            ErrorCode::CommandInterrupted => "command_interrupted",
            ErrorCode::Failed => "failed",
            ErrorCode::Cancelled => "cancelled",
        }
    }

    /// The code a todo tool answers with (the only ones it may), read back from its text.
    pub fn parse_tool(text: &str) -> Option<ErrorCode> {
        TOOL_CODES
            .iter()
            .copied()
            .find(|code| code.as_str() == text)
    }

    /// The outcome an audit row records for a call that failed with this code.
    pub(crate) fn audit_outcome(self) -> AuditOutcome {
        match self {
            ErrorCode::InvalidInput
            | ErrorCode::TooManyRuns
            | ErrorCode::TooManyResultWaits
            | ErrorCode::Refused
            | ErrorCode::InvalidValue
            | ErrorCode::CommandNotAllowed => AuditOutcome::Rejected,
            ErrorCode::NotFound => AuditOutcome::NotFound,
            _ => AuditOutcome::Error,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A code is the text it is written as.
impl PartialEq<&str> for ErrorCode {
    fn eq(&self, text: &&str) -> bool {
        self.as_str() == *text
    }
}

/// The error codes of the todo tools, which every tool may answer with.
pub(crate) const TOOL_CODES: &[ErrorCode] = &[
    ErrorCode::InvalidInput,
    ErrorCode::NotFound,
    ErrorCode::InternalError,
];

/// A failure the caller should read: a code and a message safe to show a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
}

/// A refusal of the schema checker is the caller's mistake: `invalid_input`.
impl From<crate::schema::InvalidArgs> for ToolError {
    fn from(refused: crate::schema::InvalidArgs) -> ToolError {
        ToolError::invalid_input(refused.0)
    }
}

impl ToolError {
    pub fn invalid_input(message: impl Into<String>) -> ToolError {
        ToolError {
            code: ErrorCode::InvalidInput,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> ToolError {
        ToolError {
            code: ErrorCode::NotFound,
            message: message.into(),
        }
    }

    /// The generic failure: the detail goes to the log, never to the caller.
    pub fn internal() -> ToolError {
        ToolError {
            code: ErrorCode::InternalError,
            message: "internal error; the server log has the details".to_owned(),
        }
    }
}

impl From<StoreError> for ToolError {
    fn from(error: StoreError) -> ToolError {
        tracing::error!(%error, "store failure");
        ToolError::internal()
    }
}

/// What a tool returns: its `data` on success.
pub type ToolResult = Result<Value, ToolError>;

/// The hints a tool publishes about its effects.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Effects {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
}

impl Effects {
    /// A reading tool's: no effect, safe to repeat.
    pub(crate) const READ_ONLY: Effects = Effects {
        read_only: true,
        destructive: false,
        idempotent: true,
    };
}

/// What a tool publishes for discovery.
#[derive(Debug, Clone)]
pub(crate) struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input_schema: Value,
    /// The schema of `data` on success; the published output schema wraps it in the envelope.
    pub data_schema: Value,
    pub effects: Effects,
}

type Handler = fn(&Tx<'_>, &Map<String, Value>) -> ToolResult;

/// A registered tool: its name, its published definition, and what runs it.
type Registration = (&'static str, fn() -> ToolSpec, Handler);

/// Where a call comes from: the run and node of the workflow that made it, if any, and
/// the principal it was made for, when the server tells callers apart.
#[derive(Debug, Clone, Copy, Default)]
pub struct Origin<'a> {
    pub run_id: Option<&'a str>,
    pub node_id: Option<&'a str>,
    pub principal: Option<&'a str>,
}

/// An [`Origin`] that owns its names, for a call that waits for a shared transaction.
#[derive(Debug, Clone, Default)]
pub struct OwnedOrigin {
    pub run_id: Option<String>,
    pub node_id: Option<String>,
    pub principal: Option<String>,
}

impl OwnedOrigin {
    pub(crate) fn borrowed(&self) -> Origin<'_> {
        Origin {
            run_id: self.run_id.as_deref(),
            node_id: self.node_id.as_deref(),
            principal: self.principal.as_deref(),
        }
    }
}

impl<'a> Origin<'a> {
    /// A call made outside any run, for `principal`.
    pub fn of(principal: Option<&'a str>) -> Origin<'a> {
        Origin {
            principal,
            ..Origin::default()
        }
    }
}

/// The registry: looks tools up by name and runs them on the one validated, audited path.
#[derive(Clone)]
pub struct Tools {
    store: Store,
}

const HANDLERS: &[Registration] = &[
    ("add_task", add_task::spec, add_task::call),
    ("list_tasks", list_tasks::spec, list_tasks::call),
    ("complete_task", complete_task::spec, complete_task::call),
    ("delete_task", delete_task::spec, delete_task::call),
    ("search_tasks", search_tasks::spec, search_tasks::call),
];

impl Tools {
    pub fn new(store: Store) -> Tools {
        Tools { store }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The published definitions, in a stable order.
    pub(crate) fn specs() -> Vec<ToolSpec> {
        HANDLERS.iter().map(|(_, spec, _)| spec()).collect()
    }

    pub fn exists(name: &str) -> bool {
        HANDLERS.iter().any(|(n, _, _)| *n == name)
    }

    /// Runs tool `name` on raw wire `args`. `None` when no such tool exists: that is the
    /// caller's protocol-level problem, and it is not audited.
    pub fn invoke(
        &self,
        name: &str,
        args: &Map<String, Value>,
        origin: Origin<'_>,
    ) -> Option<ToolResult> {
        let (name, _, handler) = HANDLERS.iter().find(|(n, _, _)| *n == name)?;
        // The effect and its audit row commit together, in one transaction; the row is
        // made ready before it.
        let row = ready_audit(name, args, origin);
        let committed = self
            .store
            .try_transaction(|tx| run_audited(tx, name, *handler, args, &row));
        Some(committed.unwrap_or_else(|error| {
            tracing::error!(tool = name, %error, "commit failed: the call's effect and its audit row are lost");
            Err(ToolError::internal())
        }))
    }

    /// [`Tools::invoke`], its effect and audit row committed in a transaction shared with
    /// the calls that arrive meanwhile (group commit); it resolves once that transaction
    /// has committed. `None` when no such tool exists.
    pub fn invoke_grouped(
        &self,
        name: &str,
        args: Map<String, Value>,
        origin: OwnedOrigin,
    ) -> Option<impl Future<Output = ToolResult> + Send + use<>> {
        let &(name, _, handler) = HANDLERS.iter().find(|(n, _, _)| *n == name)?;
        // The audit row is made ready here, before the call queues for the writer.
        let row = ready_audit(name, &args, origin.borrowed());
        let committed = self
            .store
            .grouped(move |tx| run_audited(tx, name, handler, &args, &row));
        Some(async move {
            committed.await.unwrap_or_else(|error| {
                tracing::error!(tool = name, %error, "commit failed: the call's effect and its audit row are lost");
                Err(ToolError::internal())
            })
        })
    }

    /// The call of tool `name` made ready to run inside a caller's transaction
    /// ([`ReadyCall::invoke_in`]): its audit row is made before the caller takes the
    /// writer. `None` when no such tool exists.
    pub(crate) fn ready<'a>(
        &self,
        name: &str,
        args: &'a Map<String, Value>,
        origin: Origin<'_>,
    ) -> Option<ReadyCall<'a>> {
        let &(name, _, handler) = HANDLERS.iter().find(|(n, _, _)| *n == name)?;
        Some(ReadyCall {
            name,
            handler,
            args,
            row: ready_audit(name, args, origin),
        })
    }

    /// Appends a row to the audit log, for a call that is not a todo tool's and
    /// wrote nothing else (a rejection, a read): in a transaction of its own.
    pub fn audit(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        outcome: AuditOutcome,
        origin: Origin<'_>,
    ) {
        let row = ready_audit(tool, args, origin);
        let written = self
            .store
            .try_transaction(|tx| append_ready(tx, &row, outcome));
        if let Err(error) = written {
            tracing::error!(tool, %error, "audit log write failed");
        }
    }
}

/// A todo tool's call whose audit row is ready: run inside a caller's transaction, its
/// effect and its row commit with whatever else the caller writes there.
pub(crate) struct ReadyCall<'a> {
    name: &'static str,
    handler: Handler,
    args: &'a Map<String, Value>,
    row: ReadyAudit,
}

impl ReadyCall<'_> {
    /// Runs the call in `tx`. The outer `Err` when the audit row could not be written, and
    /// the caller's transaction must fail.
    pub(crate) fn invoke_in(&self, tx: &Tx<'_>) -> Result<ToolResult, StoreError> {
        run_audited(tx, self.name, self.handler, self.args, &self.row)
    }
}

/// Runs a handler and appends its audit row, made ready before (`row`), on the same
/// transaction. The outer `Err` is the audit row's: then the transaction must not commit,
/// lest the effect stand unaudited.
fn run_audited(
    tx: &Tx<'_>,
    name: &str,
    handler: Handler,
    args: &Map<String, Value>,
    row: &ReadyAudit,
) -> Result<ToolResult, StoreError> {
    let result = catch_unwind(AssertUnwindSafe(|| handler(tx, args))).unwrap_or_else(|_| {
        tracing::error!(tool = name, "tool panicked");
        Err(ToolError::internal())
    });
    let outcome = match &result {
        Ok(_) => AuditOutcome::Ok,
        Err(error) => error.code.audit_outcome(),
    };
    append_ready(tx, row, outcome)?;
    Ok(result)
}

/// The audit row of a call of `tool` with `args`, made ready to append (serialised,
/// digested, encoded) before the writer is taken. The payload it digests is the arguments
/// as received, serialised by `serde_json` (compact, keys in the order received).
pub(crate) fn ready_audit(tool: &str, args: &Map<String, Value>, origin: Origin<'_>) -> ReadyAudit {
    let text = serde_json::to_string(args).expect("a JSON map serialises");
    ReadyAudit::owning(
        tool,
        text,
        (origin.run_id, origin.node_id, origin.principal),
    )
}

/// Appends `row` with `outcome` inside the caller's transaction. `Err` fails that
/// transaction: no effect commits without its row.
pub(crate) fn append_ready(
    tx: &Tx<'_>,
    row: &ReadyAudit,
    outcome: AuditOutcome,
) -> Result<(), StoreError> {
    let tool = row.tool();
    match tx.append_ready(row, outcome) {
        // A database opened read-only is served for reads: no write of the call can have
        // happened either, so there is no effect to leave unaudited.
        Err(error) if tx.on_read_only_database() => {
            tracing::error!(tool, %error, "audit log write failed: the database is read-only");
            Ok(())
        }
        Err(error) => {
            tracing::error!(tool, %error, "audit log write failed: the call's transaction fails");
            Err(error)
        }
        Ok(()) => Ok(()),
    }
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
