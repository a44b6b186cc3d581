//! A run's progress as its task reports it: a percentage that never goes backwards and
//! never leaves 0 to 100, and a status message that says where the run is.

use crate::engine::journal::RunProgress;

/// The progress after a report of `next`, given the `previous` one: never lower, never
/// above 100.
pub fn advance(previous: u8, next: u8) -> u8 {
    previous.max(next.min(100))
}

/// `3/7 · option_exploration`: nodes done, nodes in all, and the node the run is at.
pub fn message(progress: &RunProgress<'_>) -> String {
    match progress.current {
        Some(node) => format!("{}/{} · {node}", progress.done, progress.total),
        None => format!("{}/{}", progress.done, progress.total),
    }
}
