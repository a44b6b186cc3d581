//! The end of a run: labelling the nodes it never reached, evaluating its `output`,
//! committing its end, and the report.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::complete::close;
use super::{Driven, Run, Stop};
use crate::engine::journal::{JournalError, RunEnd};
use crate::engine::observer::Event;
use crate::engine::report::{NodeReport, NodeReports, NodeStatus, RunReport, RunStatus};

impl Run {
    pub(super) fn finalize(mut self) -> Driven {
        self.label_unreached();
        let mut status = match self.stop {
            None => RunStatus::Succeeded,
            Some(Stop::Cancelled) => RunStatus::Cancelled,
            Some(_) => RunStatus::Failed,
        };
        let mut error = self.stop.as_ref().map(|_| self.stop_reason());
        let (output, output_error) = self.evaluate_output();
        if status == RunStatus::Succeeded && output_error.is_some() {
            status = RunStatus::Failed;
            error = output_error;
        }
        if let Some(journal) = self.journal.clone() {
            let end = RunEnd {
                status,
                error: error.as_deref(),
                output: &output,
            };
            if let Err(e) = journal.commit(&self.batch(Some(end))) {
                tracing::error!(run_id = %self.run_id, error = %e, "the run's end could not be saved");
                // Unless the lease went elsewhere, the run is picked up again, and ended
                // again, rather than left unfinished under this process's lease.
                self.unsaved |= !matches!(e, JournalError::LeaseLost(_));
            }
        }
        self.trace_finished(status, error.as_deref());
        self.emit(Event::RunFinished {
            run_id: &self.run_id,
            status,
        });
        Driven {
            unsaved: self.unsaved,
            report: self.report(status, output, error),
        }
    }

    /// Nodes the run never reached. After a `fail_run` failure, those downstream of the
    /// failed node are skipped (`upstream failed`) and the others cancelled (`run failed at
    /// node X`); after a cancel or a timeout, all are cancelled. A run lost to another
    /// process is left as it is: it goes on there.
    fn label_unreached(&mut self) {
        if matches!(self.stop, Some(Stop::Lost(_))) {
            return;
        }
        let reason = self.stop_reason();
        let stamp = self.journal.is_some();
        let downstream = match self.stop {
            Some(Stop::NodeFailed(failed)) => self.downstream_of(failed),
            _ => vec![false; self.plan.nodes.len()],
        };
        for (i, below) in downstream.into_iter().enumerate() {
            if let Some(fan) = self.state.fans[i].as_ref() {
                let open: Vec<usize> = (0..fan.units.len())
                    .filter(|&k| !fan.units[k].status.is_terminal())
                    .collect();
                for k in open {
                    let unit = self.state.unit_mut(i, Some(k));
                    close(unit, NodeStatus::Cancelled, Some(reason.clone()), stamp);
                }
            }
            if self.state.status(i).is_terminal() {
                continue;
            }
            let (status, why) = match below {
                true => (NodeStatus::Skipped, "upstream failed".to_owned()),
                false => (NodeStatus::Cancelled, reason.clone()),
            };
            close(self.state.unit_mut(i, None), status, Some(why), stamp);
            self.state.done += 1;
            self.node_changed(i);
        }
    }

    /// Which nodes are downstream of `from`, directly or not.
    fn downstream_of(&self, from: usize) -> Vec<bool> {
        let mut seen = vec![false; self.plan.nodes.len()];
        let mut stack = vec![from];
        while let Some(i) = stack.pop() {
            for &d in &self.plan.nodes[i].downstream {
                if !seen[d] {
                    seen[d] = true;
                    stack.push(d);
                }
            }
        }
        seen
    }

    /// The run's `output` map; an expression that fails is left out and its error returned.
    fn evaluate_output(&self) -> (Value, Option<String>) {
        let mut output = Map::new();
        if self.plan.output.is_empty() {
            return (Value::Object(output), None);
        }
        // The nodes' context of the inputs, when one was built, is the same value.
        let inputs = (self.inputs_ctx.clone())
            .unwrap_or_else(|| minijinja::Value::from_serialize(&self.inputs));
        let nodes = self.nodes_context(&self.plan.output_reads);
        let run = minijinja::context! { id => &*self.run_id };
        let ctx = minijinja::context! { inputs, nodes, run };
        let mut first_error = None;
        for (name, expr) in &self.plan.output {
            match self.env.templates.eval(expr, &ctx) {
                Ok(value) => {
                    output.insert(name.clone(), value);
                }
                Err(e) => {
                    first_error.get_or_insert_with(|| format!("output `{name}`: {e}"));
                }
            }
        }
        (Value::Object(output), first_error)
    }

    fn report(self, status: RunStatus, output: Value, error: Option<String>) -> RunReport {
        let mut nodes =
            NodeReports::with_capacity_and_hasher(self.plan.nodes.len(), Default::default());
        for (i, unit) in self.state.nodes.into_iter().enumerate() {
            let report = NodeReport {
                status: unit.status,
                attempts: unit.attempts,
                output: unit.output,
                error: unit.error,
                reason: unit.reason,
            };
            nodes.insert(Arc::clone(&self.plan.nodes[i].id), report);
        }
        RunReport {
            run_id: self.run_id.to_string(),
            workflow: self.plan.name.clone(),
            status,
            output,
            error,
            nodes,
        }
    }
}
