//! The history of finished runs as the engine's `history` nodes read it
//! ([`History`](crate::engine::history::History)), on the store's `run_history`.

use serde_json::Value;

use super::Registry;
use crate::engine::history::{History, HistoryPage, HistoryQuery, PastRun};
use crate::store::{self, HistoryRow};

impl History for Registry {
    fn finished_runs(&self, query: &HistoryQuery<'_>) -> Result<HistoryPage, String> {
        let statuses: Vec<&str> = query.status.iter().map(|s| s.as_str()).collect();
        // One row more than asked for says whether older runs follow.
        let asked = store::HistoryQuery {
            workflow: query.workflow,
            principal: query.principal,
            statuses: &statuses,
            after: query.after.map(|at| (at.finished_ms, at.run_id)),
            limit: query.limit.saturating_add(1),
        };
        let mut rows = self.store().history(&asked).map_err(|e| e.to_string())?;
        let more = rows.len() > query.limit;
        rows.truncate(query.limit);
        Ok(HistoryPage {
            runs: rows.into_iter().map(past_run).collect(),
            more,
        })
    }
}

/// A history row as the engine reads it: its JSON columns parsed (text that is not JSON,
/// which the store never writes, is kept as a string).
fn past_run(row: HistoryRow) -> PastRun {
    let json = |text: String| serde_json::from_str(&text).unwrap_or(Value::String(text));
    PastRun {
        run_id: row.run_id,
        workflow: row.workflow,
        status: row.status,
        created_at: row.created_at,
        finished_at: row.finished_at,
        finished_ms: row.finished_ms,
        inputs: json(row.inputs),
        output: row.output.map_or(Value::Null, json),
        error: row.error,
    }
}
