//! What a `history` node reads: the finished runs of a workflow, newest first. The engine
//! owns this interface and knows nothing of what implements it (`runs/history.rs`, on the
//! store); an engine without it fails such a node as `unsupported`.

use serde_json::{Map, Value};

use super::report::RunStatus;

/// The record of finished runs, read a page at a time.
pub trait History: Send + Sync {
    /// The page of finished runs `query` names, newest first; the message says why not.
    fn finished_runs(&self, query: &HistoryQuery<'_>) -> Result<HistoryPage, String>;
}

/// Which finished runs a page holds.
#[derive(Debug, Clone, Copy)]
pub struct HistoryQuery<'a> {
    pub workflow: &'a str,
    /// Only the runs of this principal; `None`: every principal's (the local user sees
    /// every run, as `get_run` lets it).
    pub principal: Option<&'a str>,
    /// Only runs that ended so; empty: any.
    pub status: &'a [RunStatus],
    /// Only runs older than this one (the last of the page before).
    pub after: Option<Cursor<'a>>,
    /// At most this many.
    pub limit: usize,
}

/// Where a run stands in the order of a history, newest first: when it finished, then its
/// id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor<'a> {
    pub finished_ms: i64,
    pub run_id: &'a str,
}

/// A page of finished runs, and whether older ones follow it.
#[derive(Debug, Clone, Default)]
pub struct HistoryPage {
    pub runs: Vec<PastRun>,
    pub more: bool,
}

/// A finished run, as a `history` node reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct PastRun {
    pub run_id: String,
    pub workflow: String,
    pub status: String,
    /// ISO 8601, UTC.
    pub created_at: String,
    pub finished_at: String,
    /// When it finished, in ms since the Unix epoch: its place in the order.
    pub finished_ms: i64,
    pub inputs: Value,
    /// `null` when it has none.
    pub output: Value,
    pub error: Option<String>,
}

impl PastRun {
    /// The run as the node's output lists it and its `where` sees it (`past`): the fields
    /// of [`PAST_RUN_FIELDS`](super::definition::PAST_RUN_FIELDS).
    pub fn to_json(&self) -> Value {
        let mut run = Map::with_capacity(8);
        run.insert("run_id".into(), Value::String(self.run_id.clone()));
        run.insert("workflow".into(), Value::String(self.workflow.clone()));
        run.insert("status".into(), Value::String(self.status.clone()));
        run.insert("created_at".into(), Value::String(self.created_at.clone()));
        run.insert(
            "finished_at".into(),
            Value::String(self.finished_at.clone()),
        );
        run.insert("inputs".into(), self.inputs.clone());
        run.insert("output".into(), self.output.clone());
        let error = self.error.clone().map_or(Value::Null, Value::String);
        run.insert("error".into(), error);
        Value::Object(run)
    }

    pub fn cursor(&self) -> Cursor<'_> {
        Cursor {
            finished_ms: self.finished_ms,
            run_id: &self.run_id,
        }
    }
}

/// A `history` node's action with its templates expanded.
#[derive(Debug, Clone)]
pub struct HistoryRequest {
    pub workflow: String,
    /// The most runs to read; `None`: the default, within the operator's cap.
    pub limit: Option<usize>,
    pub status: Vec<RunStatus>,
    /// The `where` expression, with the node's template context it is evaluated in
    /// (`past` is added for each run).
    pub filter: Option<(String, minijinja::Value)>,
}
