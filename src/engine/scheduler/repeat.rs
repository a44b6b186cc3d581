//! Repeating nodes: each iteration that succeeds is kept and judged by `until`; the unit
//! then succeeds with that iteration's output, runs again after the delay with its
//! templates resolved anew, or fails as `repeat_exhausted` once it has run `max` times.
//!
//! An iteration is settled like any attempt's end ([`super::units::settle_into`]), in the
//! same record and the same commit, so a run resumed after a crash goes on at the
//! iteration that had not finished, after what was left of its delay.

use std::sync::Arc;

use serde_json::Value;

use super::Run;
use super::units::millis;
use crate::clock;
use crate::engine::actions;
use crate::engine::definition::Repeat;
use crate::engine::journal::{Iteration, UnitState};
use crate::engine::observer::Event;
use crate::engine::plan::NodeAction;
use crate::engine::report::{NodeError, NodeErrorKind};
use crate::engine::template::Templates;

/// What judges a repeating unit's iteration: the node's `repeat`, and the unit's template
/// context (`repeat.iteration` the iteration that ended), to which `output` is added.
pub(super) struct Judge {
    templates: Arc<Templates>,
    ctx: minijinja::Value,
    repeat: Repeat,
}

impl Judge {
    /// Records the iteration that ended with `output` after `attempts` attempts, and says
    /// what follows: `None` when the unit runs again (the time of its next attempt set),
    /// else the unit's result.
    pub(super) fn iterate(
        &self,
        unit: &mut UnitState,
        attempts: u32,
        output: Value,
        stamp: bool,
    ) -> Option<Result<Value, NodeError>> {
        let number = unit.iterations.len() as u32 + 1;
        let holds = self.holds(&output);
        let delay = millis(self.repeat.delay);
        let started_ms = match unit.iterations.last() {
            Some(last) => last.finished_ms.map(|at| at.saturating_add(delay)),
            None => unit.started_ms,
        };
        let now = clock::now_ms();
        unit.iterations.push(Iteration {
            attempts,
            started_ms: started_ms.filter(|_| stamp),
            finished_ms: stamp.then_some(now),
            output: output.clone(),
        });
        match holds {
            Ok(true) => Some(Ok(output)),
            Ok(false) if number < self.repeat.max => {
                unit.next_attempt_ms = Some(now.saturating_add(delay));
                None
            }
            Ok(false) => {
                // The last iteration's output stays readable downstream of a node that
                // continues on failure.
                unit.output = Some(output);
                let message = format!(
                    "`until` did not hold after {number} iteration{} (`{}`)",
                    if number == 1 { "" } else { "s" },
                    self.repeat.until
                );
                Some(Err(NodeError::new(NodeErrorKind::RepeatExhausted, message)))
            }
            Err(error) => Some(Err(error)),
        }
    }

    fn holds(&self, output: &Value) -> Result<bool, NodeError> {
        let output = minijinja::Value::from_serialize(output);
        let ctx = minijinja::context! { output, ..self.ctx.clone() };
        (self.templates)
            .eval_bool(&self.repeat.until, &ctx)
            .map_err(|e| actions::template_error("repeat.until", e))
    }
}

impl Run {
    /// The judge of unit (`node`, `instance`)'s iterations; `None` if its node does not
    /// repeat.
    #[inline]
    pub(super) fn judge(&mut self, node: usize, instance: Option<usize>) -> Option<Judge> {
        // Asked at the end of every attempt: the common answer, no, is the quick one.
        match self.plan.nodes[node].repeat {
            None => None,
            Some(_) => self.judge_repeating(node, instance),
        }
    }

    #[inline(never)]
    fn judge_repeating(&mut self, node: usize, instance: Option<usize>) -> Option<Judge> {
        let repeat = self.plan.nodes[node].repeat.clone()?;
        let item = self.item_of(node, instance);
        let ctx = self.context(node, item.as_ref().zip(instance));
        Some(Judge {
            templates: Arc::clone(&self.env.templates),
            ctx,
            repeat,
        })
    }

    /// The `for_each` item of an instance, kept while its node may still repeat.
    fn item_of(&self, node: usize, instance: Option<usize>) -> Option<Value> {
        let items = self.fan_items.get(&node)?;
        items.get(instance?).cloned()
    }

    /// `repeat` in a repeating unit's templates: the iteration about to run (1 for the
    /// first) and the output of the one before it (`none` before the second).
    pub(super) fn repeat_context(&self, node: usize, instance: Option<usize>) -> minijinja::Value {
        let unit = self.state.unit(node, instance);
        let previous = unit.iterations.last().map(|it| &it.output);
        minijinja::context! {
            iteration => unit.iterations.len() + 1,
            previous => minijinja::Value::from_serialize(previous),
        }
    }

    /// A unit finished an iteration and runs again: the observer is told, and the unit is
    /// queued with its action resolved anew (its templates may read `repeat`). Its
    /// record holds the time of the next attempt, which the launch waits for.
    pub(super) fn next_iteration(&mut self, node: usize, instance: Option<usize>) {
        if let Some(observer) = &self.observer {
            let unit = self.state.unit(node, instance);
            let max = self.plan.nodes[node].repeat.as_ref().map_or(0, |r| r.max);
            let progress = self.state.progress(&self.plan);
            observer.event(&Event::Iterated {
                run_id: &self.run_id,
                node: &self.plan.nodes[node].id,
                instance,
                iteration: unit.iterations.len() as u32,
                max,
                progress: crate::engine::observer::Progress {
                    done: progress.done,
                    total: progress.total,
                },
            });
        }
        // Committed as the run waits for the delay: the run's task then says which
        // iteration comes (a tool call's transaction committed the record before it).
        self.state.mark(node, instance);
        let plan = Arc::clone(&self.plan);
        let NodeAction::Defined(action) = &plan.nodes[node].action else {
            unreachable!("the one-node plan of a tool call does not repeat")
        };
        let item = self.item_of(node, instance);
        let ctx = self.context(node, item.as_ref().zip(instance));
        let resolved = actions::resolve(&self.env.templates, action, &ctx);
        self.queue_unit(node, instance, resolved);
    }
}
