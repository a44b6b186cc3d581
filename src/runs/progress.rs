//! A run's progress as its task reports it: a percentage (that the store never lets go
//! backwards nor leave 0 to 100) and a status message that says where the run is.

use crate::engine::journal::RunProgress;

/// `3/7 · option_exploration`: nodes done, nodes in all, and the node the run is at;
/// `3/7 · checks · iteration 2/5` while that node repeats.
pub fn message(progress: &RunProgress<'_>) -> String {
    let at = match progress.current {
        Some(node) => format!("{}/{} · {node}", progress.done, progress.total),
        None => format!("{}/{}", progress.done, progress.total),
    };
    match progress.iteration {
        Some((iteration, max)) => format!("{at} · iteration {iteration}/{max}"),
        None => at,
    }
}
