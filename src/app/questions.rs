//! The questions of runs as the task protocols carry them: a task's open questions, a
//! client's reply to one, the pages of `tasks/list` with each run's sub-tasks, and the
//! rounds of questions put to a client that answers by retrying its call. The registry
//! does the work; these are the doors a face goes through.

use serde_json::Value;

use super::{App, Caller};
use crate::engine::question::Answerer;
use crate::runs::{AnswerError, OpenQuestion, Refusal, TaskView};
use crate::store::StoreError;

/// One page of a task listing: runs' tasks newest first, each followed by its sub-tasks,
/// and the cursor of the next page (the last task listed), when the page is full.
pub(crate) struct TaskPage {
    pub tasks: Vec<TaskView>,
    pub next: Option<String>,
}

/// Why a page of tasks could not be listed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PageError {
    #[error("invalid cursor")]
    BadCursor,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl App {
    /// The open questions that belong to `task`: all of its run's (the runs' below it
    /// included), or its unit's.
    pub(crate) fn open_questions_of(
        &self,
        task: &TaskView,
    ) -> Result<Vec<OpenQuestion>, AnswerError> {
        let questions = self.registry.open_questions(&task.run_id)?;
        Ok(match &task.node_id {
            None => questions,
            Some(node) => {
                // A `workflow` node's sub-task holds the questions of the runs below it.
                let below = match task.instance {
                    Some(k) => format!("{node}#{k}>"),
                    None => format!("{node}>"),
                };
                let own = |q: &OpenQuestion| {
                    q.path.is_empty()
                        && &q.node_id == node
                        && q.instance.map(|k| k as i64) == task.instance
                };
                (questions.into_iter())
                    .filter(|q| own(q) || q.path.starts_with(&below))
                    .collect()
            }
        })
    }

    /// Records `answerer`'s reply to `question` of run `run_id`, or its refusal; an answer
    /// that does not fit is refused and the question asked again under a new key (see
    /// [`Registry::reply_from`](crate::runs::Registry::reply_from)); every reply is
    /// audited.
    pub(crate) fn reply_to(
        &self,
        run_id: &str,
        question: &OpenQuestion,
        answerer: Answerer,
        reply: Result<&Value, Refusal>,
    ) -> Result<(), AnswerError> {
        self.registry.reply_from(run_id, question, answerer, reply)
    }

    /// The questions of run `run_id` that wait for an answer, in the order they were asked.
    pub(crate) fn open_questions(&self, run_id: &str) -> Result<Vec<OpenQuestion>, AnswerError> {
        self.registry.open_questions(run_id)
    }

    /// Answers `question` of run `run_id` as its own answerer would (the terminal, an
    /// answers file, a node's default), or records its refusal; checked, audited and
    /// asked again as [`App::reply_to`] does.
    pub(crate) fn reply(
        &self,
        run_id: &str,
        question: &OpenQuestion,
        reply: Result<&Value, Refusal>,
    ) -> Result<(), AnswerError> {
        self.registry.reply(run_id, question, reply)
    }

    /// The first sub-tasks of a run's own task, at most `limit`.
    pub(crate) fn first_sub_tasks(
        &self,
        parent: &TaskView,
        limit: usize,
    ) -> Result<Vec<TaskView>, StoreError> {
        self.registry.first_sub_tasks(parent, limit)
    }

    /// A page of at most `size` tasks of `protocol` that `caller` lists: runs' tasks newest
    /// first, each followed by its sub-tasks in plan order, after the task `cursor` names
    /// (a run's, or a sub-task's, whose run's other sub-tasks come first).
    pub(crate) fn task_page(
        &self,
        protocol: &str,
        caller: &Caller,
        cursor: Option<&str>,
        size: usize,
    ) -> Result<TaskPage, PageError> {
        let (mut after_run, after_sub) = match cursor {
            None => (None, None),
            Some(text) => {
                let view = self
                    .registry
                    .task(text)?
                    .filter(|view| caller.may_see(&view.owner))
                    .ok_or(PageError::BadCursor)?;
                match view.parent_task_id {
                    // A unit of any run of a tree is paged under the run at its top.
                    Some(_) => {
                        let root = self.registry.root_of(&view.run_id)?;
                        (Some(root), Some(view.task_id))
                    }
                    None => (Some(view.task_id), None),
                }
            }
        };
        let mut tasks: Vec<TaskView> = Vec::new();
        if let (Some(run), Some(sub)) = (&after_run, after_sub) {
            tasks.extend(self.registry.sub_tasks(run, Some(&sub), size)?);
        }
        let mut exhausted = false;
        while tasks.len() < size {
            let listing = caller.listing();
            let runs = (self.registry).tasks_page(protocol, listing, after_run.as_deref(), size)?;
            if runs.is_empty() {
                exhausted = true;
                break;
            }
            for run in runs {
                if tasks.len() >= size {
                    break;
                }
                after_run = Some(run.task_id.clone());
                let room = size - tasks.len() - 1;
                let subs = match room {
                    0 => Vec::new(),
                    room => self.registry.sub_tasks(&run.task_id, None, room)?,
                };
                tasks.push(run);
                tasks.extend(subs);
            }
        }
        let next = match (exhausted, tasks.len() >= size) {
            (false, true) => tasks.last().map(|task| task.task_id.clone()),
            _ => None,
        };
        Ok(TaskPage { tasks, next })
    }

    /// The key that signs the state of a round of questions (the server's secret).
    pub(crate) fn round_state_key(&self) -> Result<&[u8], StoreError> {
        self.registry.state_key()
    }

    /// Opens the next round of questions of run `run_id`; its number. `None` if the run is
    /// gone.
    pub(crate) fn next_round(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        self.registry.next_round(run_id)
    }

    /// The number of run `run_id`'s latest round of questions. `None` if the run is gone.
    pub(crate) fn latest_round(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        self.registry.round(run_id)
    }

    /// The client answered the run's latest round: it no longer expires.
    pub(crate) fn answered_round(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        self.registry.answered_round(run_id)
    }

    /// How long a round of questions waits for the client's retry (`--answer-timeout`).
    pub(crate) fn answer_timeout(&self) -> std::time::Duration {
        self.registry.config().answer_timeout
    }
}
