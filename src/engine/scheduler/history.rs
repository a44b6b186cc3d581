//! A run's `history` nodes: earlier finished runs of a workflow, read synchronously from
//! the record the engine was given (`ActionEnv::history`), newest first, within the node's
//! `limit` and the operator's caps on rows, bytes and runs scanned. Nothing is audited:
//! the node reads only the server's own record of runs, and only what its run's principal
//! may read with `get_run`.

use serde_json::{Value, json};

use super::Run;
use crate::engine::actions::template_error;
use crate::engine::definition::DEFAULT_HISTORY_LIMIT;
use crate::engine::history::{HistoryQuery, HistoryRequest, PastRun};
use crate::engine::report::{NodeError, NodeErrorKind};
use crate::todos::ErrorCode;

/// How many earlier runs one read brings when a `where` picks among them.
const PAGE: usize = 100;

impl Run {
    /// A `history` attempt: the node's output, `{runs, truncated}`.
    pub(super) fn read_history(&self, request: &HistoryRequest) -> Result<Value, NodeError> {
        let Some(history) = &self.env.history else {
            return Err(NodeError::new(
                NodeErrorKind::Unsupported,
                "history: this server keeps no record of finished runs to read",
            ));
        };
        let limits = self.env.limits;
        let limit = match request.limit {
            None => DEFAULT_HISTORY_LIMIT.min(limits.max_history_rows),
            Some(limit) if limit > limits.max_history_rows => {
                let message = format!(
                    "history: a limit of {limit} is over the max-history-rows budget ({})",
                    limits.max_history_rows
                );
                return Err(NodeError::new(NodeErrorKind::BudgetExceeded, message));
            }
            Some(limit) => limit,
        };
        let mut out = Collected::new(limits.max_history_bytes);
        let mut scanned = 0;
        let mut last: Option<PastRun> = None;
        loop {
            let size = match &request.filter {
                None => limit - out.runs.len(),
                Some(_) => PAGE.min(limits.max_history_scan - scanned),
            };
            let query = HistoryQuery {
                workflow: &request.workflow,
                principal: self.env.principal.as_deref(),
                status: &request.status,
                after: last.as_ref().map(PastRun::cursor),
                limit: size,
            };
            let page = history.finished_runs(&query).map_err(|error| {
                let message = format!("history: the record of runs cannot be read: {error}");
                NodeError::new(NodeErrorKind::Tool(ErrorCode::InternalError), message)
            })?;
            let more = page.more;
            for run in page.runs {
                scanned += 1;
                let row = run.to_json();
                if let Some((filter, ctx)) = &request.filter {
                    let ctx = minijinja::context! { past => minijinja::Value::from_serialize(&row), ..ctx.clone() };
                    let holds = self
                        .env
                        .templates
                        .eval_bool(filter, &ctx)
                        .map_err(|error| {
                            template_error(&format!("history.where, on run {}", run.run_id), error)
                        })?;
                    if !holds {
                        last = Some(run);
                        continue;
                    }
                }
                if !out.push(row) || out.runs.len() == limit {
                    return Ok(out.into_output());
                }
                last = Some(run);
            }
            if !more {
                return Ok(out.into_output());
            }
            if request.filter.is_some() && scanned >= limits.max_history_scan {
                out.truncated = true;
                return Ok(out.into_output());
            }
        }
    }
}

/// The runs a `history` node outputs, kept within its byte cap.
struct Collected {
    runs: Vec<Value>,
    /// Bytes of the output as JSON so far, the runs and the object around them.
    bytes: usize,
    max_bytes: usize,
    truncated: bool,
}

impl Collected {
    fn new(max_bytes: usize) -> Collected {
        let empty = json!({ "runs": [], "truncated": false });
        Collected {
            runs: Vec::new(),
            bytes: serde_json::to_string(&empty).map_or(0, |text| text.len()),
            max_bytes,
            truncated: false,
        }
    }

    /// Adds a run, unless the output would go over its cap: then it is marked truncated,
    /// and false says that nothing more is to be added.
    fn push(&mut self, run: Value) -> bool {
        let comma = usize::from(!self.runs.is_empty());
        let size = serde_json::to_string(&run).map_or(usize::MAX, |text| text.len());
        let bytes = self.bytes.saturating_add(size).saturating_add(comma);
        if bytes > self.max_bytes {
            self.truncated = true;
            return false;
        }
        self.bytes = bytes;
        self.runs.push(run);
        true
    }

    fn into_output(self) -> Value {
        json!({ "runs": self.runs, "truncated": self.truncated })
    }
}
