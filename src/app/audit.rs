//! The audit rows the application writes itself: of a call refused before it ran (bad
//! arguments, an unknown workflow, a key used for other arguments, the run quota), of a
//! read, and of a synchronous run's end.
//!
//! A todo tool's call writes its own row with its effect, in one transaction (`todos/`);
//! a run started as a task writes its call's row in the transaction that records the run.

use serde_json::{Map, Value};

use super::envelope::{self, Envelope};
use super::{App, Caller};
use crate::store::AuditOutcome;
use crate::todos::{Origin, ToolError};

impl App {
    /// Appends the audit row of a call of `tool` by `caller`, made for run `run_id`.
    pub(super) fn audit(
        &self,
        (tool, args): (&str, &Map<String, Value>),
        outcome: AuditOutcome,
        run_id: Option<&str>,
        caller: &Caller,
    ) {
        let origin = Origin {
            run_id,
            node_id: None,
            principal: caller.principal(),
        };
        self.engine.todo_tools().audit(tool, args, outcome, origin);
    }

    /// Refuses a call: its audit row, with the outcome its error's code says, and its
    /// envelope.
    pub(super) fn refuse(
        &self,
        call: (&str, &Map<String, Value>),
        error: &ToolError,
        caller: &Caller,
    ) -> Envelope {
        self.audit(call, error.code.audit_outcome(), None, caller);
        envelope::of_error(error)
    }

    /// A read's answer, audited with its outcome.
    pub(super) fn answer_read(
        &self,
        call: (&str, &Map<String, Value>),
        result: Result<Value, ToolError>,
        caller: &Caller,
    ) -> Envelope {
        match result {
            Ok(data) => {
                self.audit(call, AuditOutcome::Ok, None, caller);
                envelope::ok(data)
            }
            Err(error) => self.refuse(call, &error, caller),
        }
    }
}
