//! The observer interface: every state change of a run, as it happens.
//!
//! Observers are called on the scheduler's task and must return quickly; anything slow
//! (a terminal redraw, a protocol notification) belongs behind a channel.

use std::time::Duration;

use super::report::{NodeError, NodeStatus, RunStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Steps done, of `total`: the phases of a phased workflow, else the nodes in a
    /// terminal state.
    pub done: usize,
    pub total: usize,
}

#[derive(Debug, Clone)]
pub enum Event<'a> {
    RunStarted {
        run_id: &'a str,
        workflow: &'a str,
        total: usize,
    },
    NodeChanged {
        run_id: &'a str,
        node: &'a str,
        status: NodeStatus,
        reason: Option<&'a str>,
        progress: Progress,
    },
    AttemptFailed {
        run_id: &'a str,
        node: &'a str,
        attempt: u32,
        error: &'a NodeError,
        /// When another attempt follows, after this delay.
        retry_in: Option<Duration>,
    },
    /// A repeating unit finished iteration `iteration` (of at most `max`), and `until` did
    /// not hold: it runs again.
    Iterated {
        run_id: &'a str,
        node: &'a str,
        instance: Option<usize>,
        iteration: u32,
        max: u32,
        progress: Progress,
    },
    /// The child run a `workflow` node waits for moved on: `percent` of it is done.
    ChildProgressed {
        run_id: &'a str,
        node: &'a str,
        instance: Option<usize>,
        child: &'a str,
        percent: u8,
        message: Option<&'a str>,
        progress: Progress,
    },
    RunFinished {
        run_id: &'a str,
        status: RunStatus,
    },
}

pub trait Observer: Send + Sync {
    fn event(&self, event: &Event<'_>);
}

impl<F: Fn(&Event<'_>) + Send + Sync> Observer for F {
    fn event(&self, event: &Event<'_>) {
        self(event)
    }
}
