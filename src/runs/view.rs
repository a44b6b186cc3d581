//! Reading runs and tasks back for people and clients: the run report as stored, the list
//! of runs, and tasks by id or by parent.

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;

use super::Registry;
use super::ids;
use super::records::{self, instance_number};
use super::status::{TaskStatus, unit_message};
use crate::clock;
use crate::store::{NodeRow, Owner, RunHead, RunSummary, Scope, StoreError, TaskRow};

/// A task as the task protocols answer it.
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
    /// The task protocol the task (or its parent) was created under, if a client asked.
    pub era: Option<String>,
    /// The tool whose call created the task; `None` for a sub-task.
    pub tool: Option<String>,
    /// A run's own task carries its run as the sub-tasks need it, read with the task, so
    /// that listing them reads the run no second time.
    #[serde(skip)]
    pub(crate) head: Option<Box<RunHead>>,
    /// Who owns the task's run.
    #[serde(skip)]
    pub(crate) owner: Owner,
}

impl TaskView {
    fn from_row(row: TaskRow) -> TaskView {
        let head = row.head;
        TaskView {
            owner: head.owner.clone(),
            task_id: head.run_id.clone(),
            parent_task_id: None,
            run_id: head.run_id.clone(),
            node_id: None,
            instance: None,
            status: row.status,
            status_message: row.status_message,
            progress: row.progress,
            created_at: head.created_at.clone(),
            last_updated_at: row.updated_at,
            ttl_ms: head.timing.ttl_ms,
            poll_interval_ms: head.timing.poll_interval_ms,
            era: head.era.clone(),
            tool: row.tool,
            head: Some(Box::new(head)),
        }
    }

    pub fn status(&self) -> TaskStatus {
        TaskStatus::parse(&self.status).unwrap_or(TaskStatus::Working)
    }
}

/// A unit's sub-task: what its row says, or `pending` while it has none.
fn sub_view(
    key: &ids::SubTaskKey,
    head: &RunHead,
    index: usize,
    instance: Option<usize>,
    node_id: String,
    row: Option<&NodeRow>,
) -> TaskView {
    let unit = row.and_then(|row| records::unit_summary(row).ok());
    let status = unit.as_ref().map_or(TaskStatus::Working, |unit| {
        TaskStatus::of_unit(unit.status, unit.asking.is_some())
    });
    let created_at = match (instance, row) {
        // An instance's task exists from its node's expansion, which its first row records.
        (Some(_), Some(row)) => row.started_at.clone().unwrap_or(row.updated_at.clone()),
        _ => head.created_at.clone(),
    };
    // A child run's units are sub-tasks of the `workflow` node's unit that started it.
    let parent_task_id = match &head.parent {
        Some(parent) => {
            let (index, instance) = (parent.index as usize, parent.instance.map(|k| k as usize));
            ids::sub_task_id(key, &parent.run_id, index, instance).unwrap_or_default()
        }
        None => head.run_id.clone(),
    };
    TaskView {
        owner: head.owner.clone(),
        task_id: ids::sub_task_id(key, &head.run_id, index, instance).unwrap_or_default(),
        parent_task_id: Some(parent_task_id),
        run_id: head.run_id.clone(),
        node_id: Some(node_id),
        instance: instance.map(|k| k as i64),
        status: status.as_str().to_owned(),
        status_message: Some(
            unit.as_ref()
                .map_or_else(|| "pending".to_owned(), unit_message),
        ),
        progress: if status.is_terminal() { 100 } else { 0 },
        created_at,
        last_updated_at: row.map_or_else(|| head.created_at.clone(), |r| r.updated_at.clone()),
        ttl_ms: head.timing.ttl_ms,
        poll_interval_ms: head.timing.poll_interval_ms,
        era: head.era.clone(),
        tool: None,
        head: None,
    }
}

fn parsed(text: Option<&str>) -> Value {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null)
}

/// The run's node ids in plan order, read with its head.
fn node_ids(head: &RunHead) -> Vec<String> {
    serde_json::from_str(&head.node_ids).unwrap_or_default()
}

impl Registry {
    /// A task by id: a run's own task, or the sub-task of one of its units.
    pub fn task(&self, task_id: &str) -> Result<Option<TaskView>, StoreError> {
        if let Some(row) = self.store().run_task(task_id)? {
            return Ok(Some(TaskView::from_row(row)));
        }
        let Some(prefix) = ids::run_prefix(task_id) else {
            return Ok(None);
        };
        let key = self.sub_task_key()?;
        for head in self.store().run_heads_with_prefix(&prefix)? {
            for (index, instance) in ids::units_of(key, &head.run_id, task_id) {
                if let Some(view) = self.sub_task_at(key, &head, index, instance)? {
                    return Ok(Some(view));
                }
            }
        }
        Ok(None)
    }

    /// The sub-task of unit (`index`, `instance`) of a run, if the run has that unit.
    fn sub_task_at(
        &self,
        key: &ids::SubTaskKey,
        head: &RunHead,
        index: usize,
        instance: Option<usize>,
    ) -> Result<Option<TaskView>, StoreError> {
        if index as i64 >= head.nodes {
            return Ok(None);
        }
        let row = self
            .store()
            .unit(head.key, index as i64, instance_number(instance))?;
        let node_id = match (&row, instance) {
            (Some(row), _) => row.node_id.clone(),
            // A node has its task from the start of its run; an instance only once its
            // node expanded, which writes the instance's row.
            (None, None) => match self.store().node_id_at(head.key, index as i64)? {
                Some(id) => id,
                None => return Ok(None),
            },
            (None, Some(_)) => return Ok(None),
        };
        Ok(Some(sub_view(
            key,
            head,
            index,
            instance,
            node_id,
            row.as_ref(),
        )))
    }

    /// The sub-tasks of a run's task: its units in plan order (a node, then its
    /// instances), then those of each run below it (`tree_tasks.rs`), after the sub-task
    /// `after`, at most `limit`.
    pub fn sub_tasks(
        &self,
        parent: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TaskView>, StoreError> {
        match self.store().run_head(parent)? {
            Some(head) => self.tree_sub_tasks(&head, after, limit),
            None => Ok(Vec::new()),
        }
    }

    /// The first sub-tasks of a run's own task, at most `limit`.
    pub(crate) fn first_sub_tasks(
        &self,
        parent: &TaskView,
        limit: usize,
    ) -> Result<Vec<TaskView>, StoreError> {
        match &parent.head {
            Some(head) => self.tree_sub_tasks(head, None, limit),
            None => self.sub_tasks(&parent.task_id, None, limit),
        }
    }

    /// The sub-tasks of one run's units, after `after` (one of them), at most `limit`.
    pub(super) fn units_under(
        &self,
        head: &RunHead,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TaskView>, StoreError> {
        let parent = head.run_id.as_str();
        let key = self.sub_task_key()?;
        let cursor = match after {
            None => None,
            Some(id) => {
                match ids::units_of(key, parent, id).find(|(node, _)| (*node as i64) < head.nodes) {
                    Some(unit) => Some(unit),
                    None => return Ok(Vec::new()),
                }
            }
        };
        let node_ids = node_ids(head);
        let after_row = cursor.map(|(node, instance)| (node as i64, instance_number(instance)));
        let mut rows = self
            .store()
            .units_after(head.key, after_row, limit)?
            .into_iter()
            .peekable();
        let mut tasks = Vec::with_capacity(limit.min(node_ids.len()));
        let first = cursor.map_or(0, |(node, _)| node);
        'nodes: for (index, node_id) in node_ids.iter().enumerate().skip(first) {
            if tasks.len() >= limit {
                break;
            }
            // The cursor's node was listed on an earlier page, itself or an instance of it.
            if cursor.is_none_or(|(node, _)| node != index) {
                let row = rows.next_if(|r| r.node == index as i64 && r.instance < 0);
                tasks.push(sub_view(
                    key,
                    head,
                    index,
                    None,
                    node_id.clone(),
                    row.as_ref(),
                ));
            }
            while let Some(row) = rows.next_if(|r| r.node == index as i64) {
                if tasks.len() >= limit {
                    break 'nodes;
                }
                let instance = usize::try_from(row.instance).ok();
                tasks.push(sub_view(
                    key,
                    head,
                    index,
                    instance,
                    row.node_id.clone(),
                    Some(&row),
                ));
            }
        }
        Ok(tasks)
    }

    /// The runs' own tasks created under task protocol `era`, newest first, after the
    /// task `after`, at most `limit`.
    pub(crate) fn tasks_page(
        &self,
        era: &str,
        scope: Scope<'_>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TaskView>, StoreError> {
        let rows = self.store().list_tasks_page(era, scope, after, limit)?;
        Ok(rows.into_iter().map(TaskView::from_row).collect())
    }

    /// How many of `principal`'s runs are unfinished.
    pub(crate) fn running_runs_of(&self, principal: &str) -> Result<u64, StoreError> {
        self.store().running_runs_of(principal)
    }

    /// Who owns run `run_id`; `None` if there is no such run.
    pub fn run_owner(&self, run_id: &str) -> Result<Option<Owner>, StoreError> {
        self.store().run_owner(run_id)
    }

    /// The run `principal` started under idempotency key `key`, with the call that started
    /// it (another principal's key finds nothing).
    pub fn run_by_idempotency_key(
        &self,
        principal: Option<&str>,
        key: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
        self.store().run_by_idempotency_key(principal, key)
    }

    /// Runs `work`, the reads that answer one request, in one read transaction of the
    /// store: one snapshot, and one read lock instead of one per statement.
    pub fn reading<T>(&self, work: impl FnOnce() -> T) -> Result<T, StoreError> {
        self.store().reading(work)
    }

    /// Resolves when the database tells of a task's change made elsewhere (PostgreSQL
    /// tells of those of every host; SQLite of none).
    pub(crate) async fn task_changed_elsewhere(&self) {
        self.store().wakes().tasks.notified().await
    }

    /// Run `run_id`'s status; `None` if there is no such run.
    pub fn run_status(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.store().run(run_id)?.map(|run| run.status))
    }

    /// Runs in `scope`, newest first, optionally of one status.
    pub fn runs(
        &self,
        status: Option<&str>,
        scope: Scope<'_>,
        limit: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        self.store().list_runs(status, scope, limit)
    }

    /// The run's report as stored: the run, its task, every node in definition order
    /// (with its task and its instances), and its questions. `None` if no such run.
    pub fn run_view(&self, run_id: &str) -> Result<Option<RunView>, StoreError> {
        let store = self.store();
        let Some(run) = store.run(run_id)? else {
            return Ok(None);
        };
        let key = self.sub_task_key()?;
        let task = store.run_task(run_id)?;
        let head = store.run_head(run_id)?;
        let order = match &head {
            Some(head) => node_ids(head),
            None => Vec::new(),
        };
        let mut nodes: IndexMap<String, NodeView> = IndexMap::new();
        for (index, id) in order.iter().enumerate() {
            let task_id = ids::sub_task_id(key, run_id, index, None);
            nodes.insert(id.clone(), NodeView::pending(task_id));
        }
        let mut children: std::collections::HashMap<(String, Option<i64>), Vec<ChildRunView>> =
            Default::default();
        for child in store.child_runs(run_id)? {
            let at = (child.parent_node, child.parent_instance);
            children.entry(at).or_default().push(ChildRunView {
                run_id: child.id,
                workflow: child.workflow,
                status: child.status,
            });
        }
        for row in store.nodes(run_id)? {
            let Ok((instance, unit)) = records::unit_state(&row) else {
                continue;
            };
            let runs = children.remove(&(row.node_id.clone(), instance.map(|k| k as i64)));
            let index = usize::try_from(row.node).unwrap_or(usize::MAX);
            let entry = NodeView {
                status: unit.status.as_str().to_owned(),
                attempts: unit.attempts,
                times: Some(Times {
                    started_at: row.started_at.clone(),
                    finished_at: row.finished_at.clone(),
                }),
                reason: unit.reason.clone(),
                output: unit.output.clone(),
                error: unit.error.as_ref().map(|error| ErrorView {
                    code: error.code.as_str().to_owned(),
                    message: error.message.clone(),
                }),
                retried: (!unit.retried.is_empty()).then(|| retried(&unit.retried)),
                iterations: (!unit.iterations.is_empty()).then(|| iterations(&unit.iterations)),
                runs,
                task_id: Skipped::Is(ids::sub_task_id(key, run_id, index, instance)),
                instances: None,
            };
            let node = nodes
                .entry(row.node_id.clone())
                .or_insert_with(|| NodeView::pending(None).without_task());
            match instance {
                None => {
                    let instances = node.instances.take();
                    *node = NodeView { instances, ..entry };
                }
                Some(k) => {
                    let list = node.instances.get_or_insert_with(IndexMap::new);
                    list.insert(k.to_string(), entry);
                }
            }
        }
        let questions = store
            .questions(run_id)?
            .into_iter()
            .map(|q| QuestionView {
                node: q.node_id,
                instance: (q.instance >= 0).then_some(q.instance),
                key: q.key,
                request: parsed(Some(&q.request)),
                answer: parsed(q.answer.as_deref()),
                answered: q.answer.is_some(),
            })
            .collect();
        Ok(Some(RunView {
            run_id: run.id,
            workflow: run.workflow,
            status: run.status,
            progress: task.as_ref().map_or(0, |t| t.progress),
            message: task.as_ref().and_then(|t| t.status_message.clone()),
            task_status: task.as_ref().map(|t| t.status.clone()),
            origin: run.origin,
            retry_of: run.retry_of,
            created_at: run.created_at,
            updated_at: run.updated_at,
            finished_at: run.finished_at,
            error: run.error,
            output: parsed(run.output.as_deref()),
            inputs: parsed(Some(&run.inputs)),
            parent: run.parent.map(|p| ParentView {
                run_id: p.run_id,
                node: p.node,
                instance: p.instance,
            }),
            nodes,
            questions,
        }))
    }
}

/// A run as its report shows it, to clients (serialised) and to the pages (read by field).
/// Its JSON is the report's wire form, key for key: `get_run`, `workflows status` and the
/// `report.json` resource give it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunView {
    pub run_id: String,
    pub workflow: String,
    pub status: String,
    pub progress: i64,
    pub message: Option<String>,
    pub task_status: Option<String>,
    pub origin: String,
    pub retry_of: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
    pub error: Option<String>,
    pub output: Value,
    pub inputs: Value,
    /// The `workflow` node of another run that started this one, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentView>,
    /// Every node, in definition order.
    pub nodes: IndexMap<String, NodeView>,
    pub questions: Vec<QuestionView>,
}

/// The node that started a child run: its run, its id, its `for_each` instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParentView {
    pub run_id: String,
    pub node: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<i64>,
}

/// A child run a `workflow` node started, one per attempt (or iteration).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChildRunView {
    pub run_id: String,
    pub workflow: String,
    pub status: String,
}

impl RunView {
    /// The questions still waiting for an answer.
    pub fn open_questions(&self) -> impl Iterator<Item = &QuestionView> {
        self.questions.iter().filter(|q| !q.answered)
    }
}

/// A node (or one `for_each` instance) as a report shows it. A node that has not run
/// has no times; a node with instances lists them by their index.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeView {
    pub status: String,
    pub attempts: u32,
    #[serde(flatten)]
    pub times: Option<Times>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retried: Option<Vec<RetriedView>>,
    /// A repeating unit's finished iterations, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations: Option<Vec<IterationView>>,
    /// A `workflow` unit's child runs, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<Vec<ChildRunView>>,
    /// Its sub-task; `None` only for an entry made from an instance before its node's row.
    #[serde(skip_serializing_if = "Skipped::is_skipped")]
    pub task_id: Skipped<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instances: Option<IndexMap<String, NodeView>>,
}

/// When a node ran: both keys are in the report once the node has a record, `null` while
/// it did not start or finish.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Times {
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
}

/// A value that may be left out of the report altogether (`Skip`), or be there, `null`
/// included.
#[derive(Debug, Clone, PartialEq)]
pub enum Skipped<T> {
    Skip,
    Is(Option<T>),
}

impl<T> Skipped<T> {
    fn is_skipped(&self) -> bool {
        matches!(self, Skipped::Skip)
    }

    /// The value, when there is one.
    pub fn as_ref(&self) -> Option<&T> {
        match self {
            Skipped::Is(Some(value)) => Some(value),
            _ => None,
        }
    }
}

impl<T: Serialize> Serialize for Skipped<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Skipped::Is(value) => value.serialize(serializer),
            Skipped::Skip => serializer.serialize_none(),
        }
    }
}

impl NodeView {
    /// A node without a record: pending, under its sub-task.
    fn pending(task_id: Option<String>) -> NodeView {
        NodeView {
            status: "pending".to_owned(),
            attempts: 0,
            times: None,
            reason: None,
            output: None,
            error: None,
            retried: None,
            iterations: None,
            runs: None,
            task_id: Skipped::Is(task_id),
            instances: None,
        }
    }

    /// The same, without a sub-task named.
    fn without_task(self) -> NodeView {
        NodeView {
            task_id: Skipped::Skip,
            ..self
        }
    }

    /// When it started, if it did.
    pub fn started_at(&self) -> Option<&str> {
        self.times.as_ref()?.started_at.as_deref()
    }

    /// When it finished, if it did.
    pub fn finished_at(&self) -> Option<&str> {
        self.times.as_ref()?.finished_at.as_deref()
    }
}

/// A node's error as a report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorView {
    pub code: String,
    pub message: String,
}

/// A question of the run: what was asked (the question's stored form), and its answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionView {
    pub node: Option<String>,
    pub instance: Option<i64>,
    pub key: String,
    pub request: Value,
    pub answer: Value,
    pub answered: bool,
}

impl QuestionView {
    /// What was asked, read from its stored form; `None` for a record that does not read.
    pub fn question(&self) -> Option<crate::engine::question::Question> {
        serde_json::from_value(self.request.clone()).ok()
    }

    /// The instance of its node's `for_each` it was asked for, if any.
    pub fn instance(&self) -> Option<usize> {
        self.instance.and_then(|k| usize::try_from(k).ok())
    }
}

/// A failed attempt that was retried, as a report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetriedView {
    pub attempt: usize,
    pub started_at: Option<String>,
    pub failed_at: String,
    pub error: ErrorView,
    pub retry_at: String,
    pub retry_delay_ms: i64,
}

/// A finished iteration of a repeating unit, as a report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IterationView {
    pub iteration: usize,
    pub attempts: u32,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub output: Value,
}

fn iterations(done: &[crate::engine::journal::Iteration]) -> Vec<IterationView> {
    (done.iter().enumerate())
        .map(|(n, iteration)| IterationView {
            iteration: n + 1,
            attempts: iteration.attempts,
            started_at: iteration.started_ms.map(clock::iso_from_ms),
            finished_at: iteration.finished_ms.map(clock::iso_from_ms),
            output: iteration.output.clone(),
        })
        .collect()
}

/// A unit's failed attempts that were retried, as a report shows them: each with its
/// number, times, error and the delay before the next.
fn retried(attempts: &[crate::engine::journal::Retried]) -> Vec<RetriedView> {
    attempts
        .iter()
        .enumerate()
        .map(|(n, attempt)| RetriedView {
            attempt: n + 1,
            started_at: attempt.started_ms.map(clock::iso_from_ms),
            failed_at: clock::iso_from_ms(attempt.failed_ms),
            error: ErrorView {
                code: attempt.code.clone(),
                message: attempt.message.clone(),
            },
            retry_at: clock::iso_from_ms(attempt.retry_at_ms),
            retry_delay_ms: attempt.retry_at_ms - attempt.failed_ms,
        })
        .collect()
}
