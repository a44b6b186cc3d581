//! Reading runs and tasks back for people and clients: the run report as stored, the list
//! of runs, and tasks by id or by parent.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::Registry;
use super::records;
use crate::engine::plan::Plan;
use crate::store::{StoreError, TaskRow};

/// A run as `workflows runs` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunListing {
    pub id: String,
    pub workflow: String,
    pub status: String,
    pub progress: i64,
    pub message: Option<String>,
    pub origin: String,
    pub created_at: String,
}

/// A task as the wire layer will answer it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskView {
    pub task_id: String,
    pub parent_task_id: Option<String>,
    pub run_id: String,
    pub node_id: Option<String>,
    pub instance: Option<i64>,
    pub status: String,
    pub status_message: Option<String>,
    pub progress: i64,
    pub created_at: String,
    pub last_updated_at: String,
    pub ttl_ms: i64,
    pub poll_interval_ms: i64,
}

impl TaskView {
    fn from_row(row: TaskRow) -> TaskView {
        TaskView {
            task_id: row.task_id,
            parent_task_id: row.parent_id,
            run_id: row.run_id,
            node_id: row.node_id,
            instance: (row.instance >= 0).then_some(row.instance),
            status: row.status,
            status_message: row.status_message,
            progress: row.progress,
            created_at: row.created_at,
            last_updated_at: row.updated_at,
            ttl_ms: row.ttl_ms,
            poll_interval_ms: row.poll_interval_ms,
        }
    }
}

fn parsed(text: Option<&str>) -> Value {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null)
}

impl Registry {
    pub fn task(&self, task_id: &str) -> Result<Option<TaskView>, StoreError> {
        Ok(self.store().task(task_id)?.map(TaskView::from_row))
    }

    /// The sub-tasks of a task in creation order, after the sub-task `after`.
    pub fn sub_tasks(
        &self,
        parent: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TaskView>, StoreError> {
        let rows = self.store().child_tasks(parent, after, limit)?;
        Ok(rows.into_iter().map(TaskView::from_row).collect())
    }

    /// Runs, newest first, optionally of one status.
    pub fn runs(&self, status: Option<&str>, limit: usize) -> Result<Vec<RunListing>, StoreError> {
        let runs = self.store().list_runs(status, limit)?;
        Ok(runs
            .into_iter()
            .map(|r| RunListing {
                id: r.id,
                workflow: r.workflow,
                status: r.status,
                progress: r.progress,
                message: r.status_message,
                origin: r.origin,
                created_at: r.created_at,
            })
            .collect())
    }

    /// The run's report as stored: the run, its task, every node in definition order
    /// (with its task and its instances), and its questions. `None` if no such run.
    pub fn run_view(&self, run_id: &str) -> Result<Option<Value>, StoreError> {
        let store = self.store();
        let Some(run) = store.run(run_id)? else {
            return Ok(None);
        };
        let task = store.task(run_id)?;
        let order: Vec<String> = Plan::from_snapshot(&run.snapshot)
            .map(|plan| plan.nodes.iter().map(|n| n.id.to_string()).collect())
            .unwrap_or_default();
        let mut nodes = Map::new();
        for id in &order {
            nodes.insert(id.clone(), json!({ "status": "pending", "attempts": 0 }));
        }
        let mut tasks = std::collections::HashMap::new();
        let mut after = None;
        loop {
            let page = store.child_tasks(run_id, after.as_deref(), 1000)?;
            let Some(last) = page.last() else { break };
            after = Some(last.task_id.clone());
            for row in page {
                tasks.insert(
                    (row.node_id.clone().unwrap_or_default(), row.instance),
                    row.task_id,
                );
            }
        }
        for row in store.nodes(run_id)? {
            let Ok((instance, unit)) = records::unit_state(&row) else {
                continue;
            };
            let mut entry = json!({
                "status": unit.status.as_str(),
                "attempts": unit.attempts,
                "started_at": row.started_at,
                "finished_at": row.finished_at,
            });
            if let Some(reason) = &unit.reason {
                entry["reason"] = json!(reason);
            }
            if let Some(output) = &unit.output {
                entry["output"] = output.clone();
            }
            if let Some(error) = &unit.error {
                entry["error"] = json!({ "code": error.code, "message": error.message });
            }
            if let Some(task_id) = tasks.get(&(row.node_id.clone(), row.instance)) {
                entry["task_id"] = json!(task_id);
            }
            let node = nodes
                .entry(row.node_id.clone())
                .or_insert_with(|| json!({ "status": "pending", "attempts": 0 }));
            match instance {
                None => {
                    let instances = node.get("instances").cloned();
                    *node = entry;
                    if let Some(instances) = instances {
                        node["instances"] = instances;
                    }
                }
                Some(k) => {
                    let list = node
                        .as_object_mut()
                        .expect("a node entry is an object")
                        .entry("instances")
                        .or_insert_with(|| json!({}));
                    list[k.to_string()] = entry;
                }
            }
        }
        for (id, node) in nodes.iter_mut() {
            if node.get("task_id").is_none()
                && let Some(task_id) = tasks.get(&(id.clone(), -1))
            {
                node["task_id"] = json!(task_id);
            }
        }
        let questions: Vec<Value> = store
            .questions(run_id)?
            .into_iter()
            .map(|q| {
                json!({
                    "node": q.node_id,
                    "instance": (q.instance >= 0).then_some(q.instance),
                    "key": q.key,
                    "request": parsed(Some(&q.request)),
                    "answer": parsed(q.answer.as_deref()),
                    "answered": q.answer.is_some(),
                })
            })
            .collect();
        Ok(Some(json!({
            "run_id": run.id,
            "workflow": run.workflow,
            "status": run.status,
            "progress": task.as_ref().map_or(0, |t| t.progress),
            "message": task.as_ref().and_then(|t| t.status_message.clone()),
            "task_status": task.as_ref().map(|t| t.status.clone()),
            "origin": run.origin,
            "retry_of": run.retry_of,
            "created_at": run.created_at,
            "updated_at": run.updated_at,
            "finished_at": run.finished_at,
            "error": run.error,
            "output": parsed(run.output.as_deref()),
            "inputs": parsed(Some(&run.inputs)),
            "nodes": nodes,
            "questions": questions,
        })))
    }
}
