//! Conversions between the engine's records and the store's rows: a unit's state to its
//! node row (which its sub-task reports), and node rows back to unit states.

use serde_json::Value;

use super::progress;
use super::status::TaskStatus;
use crate::clock;
use crate::engine::journal::{RunBatch, RunProgress, UnitChange, UnitState};
use crate::engine::report::{NodeError, NodeStatus};
use crate::store::{AuditRecord, FileWrite, NodeRow, ReadyAudit, RunEnd, Write};

/// The stored instance number: `-1` for the node itself.
pub(super) fn instance_number(instance: Option<usize>) -> i64 {
    instance.map_or(-1, |k| i64::try_from(k).unwrap_or(i64::MAX))
}

fn json_text(value: &Value) -> String {
    serde_json::to_string(value).expect("a JSON value serialises")
}

pub(super) fn node_row(change: &UnitChange<'_>) -> NodeRow {
    let unit = change.state;
    NodeRow {
        node: change.index as i64,
        node_id: change.node.to_owned(),
        instance: instance_number(change.instance),
        status: unit.status.as_str().to_owned(),
        reason: unit.reason.clone(),
        attempts: i64::from(unit.attempts),
        next_attempt_ms: unit.next_attempt_ms,
        deadline_ms: unit.deadline_ms,
        asking: unit.asking.clone(),
        output: unit.output.as_ref().map(json_text),
        error: unit.error.as_ref().map(NodeError::to_stored),
        intent: unit.intent.clone(),
        started_at: unit.started_ms.map(clock::iso_from_ms),
        finished_at: unit.finished_ms.map(clock::iso_from_ms),
        retried: (!unit.retried.is_empty())
            .then(|| serde_json::to_string(&unit.retried).expect("attempts serialise")),
        iterations: (!unit.iterations.is_empty())
            .then(|| serde_json::to_string(&unit.iterations).expect("iterations serialise")),
        updated_at: String::new(),
    }
}

/// The run's own task while the run goes on.
fn run_task(progress: &RunProgress<'_>) -> Write {
    let status = match progress.asking {
        true => TaskStatus::InputRequired,
        false => TaskStatus::Working,
    };
    Write::RunTask {
        status: status.as_str(),
        message: progress::message(progress),
        progress: i64::from(progress.percent),
        result: None,
        error: None,
    }
}

/// The writes of a batch: each unit's row, questions, answers, the run's task,
/// and the run's end.
pub(super) fn writes(batch: &RunBatch<'_>) -> Vec<Write> {
    let mut writes = Vec::with_capacity(6);
    if !batch.units.is_empty() {
        writes.push(Write::Nodes(batch.units.iter().map(node_row).collect()));
    }
    for question in &batch.questions {
        writes.push(Write::Question {
            node: question.index as i64,
            instance: instance_number(question.instance),
            key: question.key.to_owned(),
            request: serde_json::to_string(&question.request).expect("a question serialises"),
        });
    }
    for (unit, key, answer) in &batch.answers {
        writes.push(Write::Answer {
            node: unit.index as i64,
            instance: instance_number(unit.instance),
            key: (*key).to_owned(),
            answer: json_text(answer),
        });
    }
    for audit in batch.audits {
        // Made ready here, before the batch queues for the writer.
        let args = serde_json::to_string(&audit.args).expect("a JSON map serialises");
        let origin = (
            Some(batch.run_id),
            Some(&*audit.node_id),
            audit.principal.as_deref(),
        );
        writes.push(Write::Audit(AuditRecord {
            row: ReadyAudit::owning(audit.action, args, origin),
            outcome: audit.outcome,
        }));
        if let Some(wrote) = &audit.wrote {
            writes.push(Write::FileWritten(FileWrite {
                path: wrote.path.clone(),
                sha256: wrote.sha256.clone(),
                bytes: i64::try_from(wrote.bytes).unwrap_or(i64::MAX),
                node_id: audit.node_id.to_string(),
            }));
        }
    }
    let Some(end) = &batch.end else {
        writes.push(run_task(&batch.progress));
        return writes;
    };
    let status = TaskStatus::of_run(end.status);
    let succeeded = status == TaskStatus::Completed;
    let message = match end.error {
        Some(error) => error.to_owned(),
        None => format!(
            "{}/{} · {}",
            batch.progress.done,
            batch.progress.total,
            status.as_str()
        ),
    };
    writes.push(Write::RunTask {
        status: status.as_str(),
        message,
        progress: if succeeded {
            100
        } else {
            i64::from(batch.progress.percent)
        },
        result: succeeded.then(|| json_text(end.output)),
        error: end
            .error
            .map(|e| json_text(&serde_json::json!({ "message": e }))),
    });
    writes.push(Write::Finish(RunEnd {
        status: end.status.as_str(),
        error: end.error.map(str::to_owned),
        output: Some(json_text(end.output)),
    }));
    writes
}

/// A stored row back as the unit state it was written from.
pub(super) fn unit_state(row: &NodeRow) -> Result<(Option<usize>, UnitState), String> {
    let mut state = unit_summary(row)?;
    if let Some(text) = &row.output {
        let output = serde_json::from_str(text)
            .map_err(|e| format!("node `{}` output: {e}", row.node_id))?;
        state.output = Some(output);
    }
    if let Some(text) = &row.iterations {
        state.iterations = serde_json::from_str(text)
            .map_err(|e| format!("node `{}` iterations: {e}", row.node_id))?;
    }
    state.started_ms = row.started_at.as_deref().and_then(clock::ms_from_iso);
    state.finished_ms = row.finished_at.as_deref().and_then(clock::ms_from_iso);
    Ok((usize::try_from(row.instance).ok(), state))
}

/// A stored row's unit state without its output, its iterations and its times, which a
/// task's view does not show: parsing them was most of the cost of listing a run's
/// sub-tasks.
pub(super) fn unit_summary(row: &NodeRow) -> Result<UnitState, String> {
    let status = NodeStatus::parse(&row.status).ok_or_else(|| {
        format!(
            "node `{}` has an unknown status `{}`",
            row.node_id, row.status
        )
    })?;
    let error = match &row.error {
        Some(text) => Some(
            NodeError::from_stored(text)
                .ok_or_else(|| format!("node `{}` has an unreadable error", row.node_id))?,
        ),
        None => None,
    };
    // Read with the summary: NULL unless the unit retried, so it costs nothing to skip.
    let retried = match &row.retried {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| format!("node `{}` retried attempts: {e}", row.node_id))?,
        None => Vec::new(),
    };
    Ok(UnitState {
        status,
        reason: row.reason.clone(),
        attempts: u32::try_from(row.attempts).unwrap_or(0),
        next_attempt_ms: row.next_attempt_ms,
        deadline_ms: row.deadline_ms,
        asking: row.asking.clone(),
        output: None,
        error,
        intent: row.intent.clone(),
        started_ms: None,
        finished_ms: None,
        retried,
        iterations: Vec::new(),
    })
}
