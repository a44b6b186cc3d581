//! What the dashboard reads beside the run operations every face shares: a page of the
//! runs list with what its rows show, the workflows runs ran, and the plan a run was
//! started with (its DAG, as it stood when the run began).

use super::runs::RunError;
use super::{App, Caller};
use crate::engine::plan::Plan;
use crate::store::{ListedRun, RunQuery};

impl App {
    /// A page of the runs `caller` may see that `query` names, newest first.
    pub(crate) fn listed_runs(
        &self,
        query: &RunQuery<'_>,
        caller: &Caller,
    ) -> Result<Vec<ListedRun>, RunError> {
        Ok(self.registry.store().listed_runs(query, caller.listing())?)
    }

    /// The workflows of the runs `caller` may see.
    pub(crate) fn listed_workflows(&self, caller: &Caller) -> Result<Vec<String>, RunError> {
        Ok(self.registry.store().listed_workflows(caller.listing())?)
    }

    /// The plan run `run_id` was started with, kept with the run.
    pub(crate) fn run_plan(&self, run_id: &str, caller: &Caller) -> Result<Plan, RunError> {
        self.may_see_run(run_id, caller)?;
        let run = self.registry.store().run(run_id)?;
        let run = run.ok_or_else(|| RunError::NotFound(run_id.to_owned()))?;
        Plan::from_snapshot(&run.snapshot).map_err(|error| {
            RunError::Store(crate::store::StoreError::Corrupt {
                detail: format!("the plan of run {run_id}: {error}"),
            })
        })
    }
}

/// A file a run wrote, as the dashboard shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WrittenFile {
    /// The node that wrote it.
    pub node: String,
    /// Its path under the workspace.
    pub path: String,
    pub bytes: u64,
}

/// The most of a file the dashboard shows.
const MAX_SHOWN: u64 = 4 * 1024 * 1024;

impl App {
    /// The files run `run_id`'s `write_file` nodes wrote, in plan order.
    pub(crate) fn run_files(
        &self,
        run_id: &str,
        caller: &Caller,
    ) -> Result<Vec<WrittenFile>, RunError> {
        let plan = self.run_plan(run_id, caller)?;
        let run = self.get_run(run_id, caller)?;
        let files = plan
            .nodes
            .iter()
            .filter(|node| node.action.is_write_file())
            .filter_map(|node| {
                let output = run.nodes.get(node.id.as_ref())?.output.as_ref()?;
                Some(WrittenFile {
                    node: node.id.to_string(),
                    path: output["path"].as_str()?.to_owned(),
                    bytes: output["bytes"].as_u64()?,
                })
            })
            .collect();
        Ok(files)
    }

    /// The text of the file node `node` of run `run_id` wrote, read under the workspace
    /// as a `read_file` node reads (never outside it, nor through a link); `None` when
    /// that node wrote none or it cannot be read now.
    pub(crate) fn run_file(
        &self,
        run_id: &str,
        node: &str,
        caller: &Caller,
    ) -> Result<Option<(WrittenFile, String)>, RunError> {
        let files = self.run_files(run_id, caller)?;
        let Some(file) = files.into_iter().find(|file| file.node == node) else {
            return Ok(None);
        };
        let read = crate::engine::files::read_file(self.engine.workspace(), &file.path, MAX_SHOWN);
        Ok(read.ok().and_then(|read| {
            let content = read["content"].as_str()?.to_owned();
            Some((file, content))
        }))
    }
}

impl App {
    /// Starts a run of `run_workflow`'s `args` for `caller`, by the call path a task's
    /// start takes (validated, under the run quota, audited with the run), its questions
    /// parked for whoever answers; its task is labelled `label`. The run's id, or what
    /// was wrong.
    pub(crate) fn start_run(
        &self,
        args: serde_json::Map<String, serde_json::Value>,
        caller: &Caller,
        label: &str,
    ) -> Result<String, String> {
        use super::published::RUN_WORKFLOW;
        use super::starts::NotStarted;
        match self.start_task(RUN_WORKFLOW, args, caller, label, None) {
            Ok(view) => Ok(view.run_id),
            Err(NotStarted::Refused(envelope)) => Err(envelope.body["error"]["message"]
                .as_str()
                .unwrap_or("the run was refused")
                .to_owned()),
            Err(NotStarted::NotRecorded) => Err("the run could not be recorded".to_owned()),
            Err(NotStarted::NotATask | NotStarted::OtherProtocol) => {
                Err("the run could not be started".to_owned())
            }
        }
    }
}

impl App {
    /// A page of the audit log as `caller` may read it: a principal its own calls' rows,
    /// the local user every row.
    pub(crate) fn listed_audit(
        &self,
        query: &crate::store::AuditQuery<'_>,
        caller: &Caller,
    ) -> Result<Vec<crate::store::AuditRow>, RunError> {
        use crate::store::Scope;
        let store = self.registry.store();
        Ok(match caller.listing() {
            Scope::Everyone => store.listed_audit(query, false)?,
            Scope::Principal(principal) => {
                if query.principal.is_some_and(|asked| asked != principal) {
                    return Ok(Vec::new());
                }
                let mine = crate::store::AuditQuery {
                    principal: Some(principal),
                    ..*query
                };
                store.listed_audit(&mine, false)?
            }
            Scope::Session(_) | Scope::Nobody => {
                let unnamed = crate::store::AuditQuery {
                    principal: None,
                    ..*query
                };
                store.listed_audit(&unnamed, true)?
            }
        })
    }

    /// Walks the audit log's hash chain: whether it verifies, and what it found.
    pub(crate) fn verify_audit(&self) -> Result<(bool, String), RunError> {
        Ok(match self.registry.store().verify_audit_chain()? {
            Ok(intact) => (true, intact.to_string()),
            Err((broken, checked)) => (
                false,
                format!("the chain is broken: {broken} ({checked} rows before it verified)"),
            ),
        })
    }
}

impl App {
    /// The audit rows of run `run_id`'s calls, oldest first: each attempt of a `tool`
    /// node, with the arguments it was called with once its templates were resolved.
    pub(crate) fn run_calls(
        &self,
        run_id: &str,
        caller: &Caller,
    ) -> Result<Vec<crate::store::AuditRow>, RunError> {
        self.may_see_run(run_id, caller)?;
        let query = crate::store::AuditQuery {
            run_id: Some(run_id),
            limit: MAX_CALLS_SHOWN,
            ..Default::default()
        };
        let mut rows = self.registry.store().listed_audit(&query, false)?;
        rows.reverse();
        Ok(rows)
    }
}

/// The most calls of one run a page shows.
const MAX_CALLS_SHOWN: usize = 2000;
