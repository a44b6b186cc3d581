//! What a finished task produced, read back from the store: a run's report, as the run
//! returned it, and a sub-task's output or error. This is what answers a client's request
//! for a task's result, in this process or in one started after a restart.

use indexmap::IndexMap;

use super::Registry;
use super::ids;
use super::records::{self, instance_number};
use super::view::TaskView;
use crate::engine::journal::UnitState;
use crate::engine::report::{NodeReport, RunReport, RunStatus};
use crate::store::StoreError;

impl Registry {
    /// The report of a finished run; `None` if there is no such run or it has not finished.
    pub fn report(&self, run_id: &str) -> Result<Option<RunReport>, StoreError> {
        let Some(run) = self.store().run_end(run_id)? else {
            return Ok(None);
        };
        let Some(status) = RunStatus::parse(&run.status) else {
            return Ok(None);
        };
        let mut nodes: crate::engine::report::NodeReports = IndexMap::default();
        let order: Vec<String> = serde_json::from_str(&run.node_ids).unwrap_or_default();
        for id in order {
            nodes.insert(id.into(), NodeReport::default());
        }
        for row in self.store().nodes(run_id)? {
            let Ok((None, unit)) = records::unit_state(&row) else {
                continue;
            };
            nodes.insert(row.node_id.as_str().into(), node_report(unit));
        }
        let output = run
            .output
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        Ok(Some(RunReport {
            run_id: run_id.to_owned(),
            workflow: run.workflow,
            status,
            output,
            error: run.error,
            nodes,
        }))
    }

    /// The state of a sub-task's unit; `None` while it has not started, or if `task` is
    /// a run's own task.
    pub(crate) fn unit_of(&self, task: &TaskView) -> Result<Option<UnitState>, StoreError> {
        // The view's id is one this server made, with its key.
        let key = self.sub_task_key()?;
        let Some((index, instance)) = ids::unit_of(key, &task.run_id, &task.task_id) else {
            return Ok(None);
        };
        let Some(head) = self.store().run_head(&task.run_id)? else {
            return Ok(None);
        };
        let row = self
            .store()
            .unit(head.key, index as i64, instance_number(instance))?;
        Ok(row
            .and_then(|row| records::unit_state(&row).ok())
            .map(|(_, unit)| unit))
    }

    /// Cancels a run's task at once, for good, and asks whoever drives the run to stop
    /// it. False if the task had already finished.
    pub(crate) fn cancel_task_now(&self, run_id: &str) -> Result<bool, StoreError> {
        if !self
            .store()
            .cancel_run_task(run_id, "cancelled by the client")?
        {
            return Ok(false);
        }
        self.request_cancel(run_id)?;
        Ok(true)
    }
}

fn node_report(unit: UnitState) -> NodeReport {
    NodeReport {
        status: unit.status,
        attempts: unit.attempts,
        output: unit.output,
        error: unit.error,
        reason: unit.reason,
    }
}
