//! The sub-tasks of a tree of runs: a run's units, then the units of each run below it
//! (the children of its `workflow` nodes, theirs, and so on), parents' before their
//! children's. A child's units are sub-tasks of the node's unit that started it, so a
//! client sees a child's nodes under the node's task; one cursor pages through the whole
//! tree.

use super::ids;
use super::registry::Registry;
use super::view::TaskView;
use crate::store::{RunHead, StoreError};

impl Registry {
    /// The sub-tasks of the tree under `root`, after the sub-task `after` (a unit of any
    /// run of the tree), at most `limit`.
    pub(super) fn tree_sub_tasks(
        &self,
        root: &RunHead,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TaskView>, StoreError> {
        let below = self.store().runs_below(&root.run_id, false)?;
        let runs: Vec<&str> = std::iter::once(root.run_id.as_str())
            .chain(below.iter().map(|run| run.id.as_str()))
            .collect();
        // The run whose unit the cursor names: a sub-task id shares its run's first half.
        let start = match after {
            None => 0,
            Some(id) => {
                let prefix = ids::run_prefix(id);
                let of = |run: &&str| prefix.as_deref() == run.get(..18);
                match runs.iter().position(of) {
                    Some(at) => at,
                    None => return Ok(Vec::new()),
                }
            }
        };
        let mut tasks = Vec::new();
        for (at, run) in runs.iter().enumerate().skip(start) {
            if tasks.len() >= limit {
                break;
            }
            let head = match at {
                0 => root.clone(),
                _ => match self.store().run_head(run)? {
                    Some(head) => head,
                    None => continue,
                },
            };
            let after = if at == start { after } else { None };
            tasks.extend(self.units_under(&head, after, limit - tasks.len())?);
        }
        Ok(tasks)
    }

    /// The run at the top of the tree run `run_id` is in (itself, for a run no node
    /// started).
    pub(crate) fn root_of(&self, run_id: &str) -> Result<String, StoreError> {
        let mut id = run_id.to_owned();
        // Depth is capped when runs start; the bound only guards a corrupt link.
        for _ in 0..1_000 {
            match self.store().run(&id)?.and_then(|run| run.parent) {
                Some(parent) => id = parent.run_id,
                None => break,
            }
        }
        Ok(id)
    }
}
