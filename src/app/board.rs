//! What the dashboard reads beside the run operations every face shares: a page of the
//! runs list with what its rows show, the workflows runs ran, and the plan a run was
//! started with (its DAG, as it stood when the run began).

use super::runs::RunError;
use super::{App, Caller};
use crate::engine::plan::Plan;
use crate::store::{BoardRow, RunQuery};

impl App {
    /// A page of the runs `caller` may see that `query` names, newest first.
    pub(crate) fn board_runs(
        &self,
        query: &RunQuery<'_>,
        caller: &Caller,
    ) -> Result<Vec<BoardRow>, RunError> {
        Ok(self.registry.store().board_runs(query, caller.listing())?)
    }

    /// The workflows of the runs `caller` may see.
    pub(crate) fn board_workflows(&self, caller: &Caller) -> Result<Vec<String>, RunError> {
        Ok(self.registry.store().board_workflows(caller.listing())?)
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
