//! Trigger rules: whether a node runs, given the final states of its upstream nodes.
//!
//! Rules are evaluated once every upstream node is terminal. `cancelled` counts as failed.
//!
//! | rule          | runs when                          | otherwise skipped with reason            |
//! |---------------|------------------------------------|------------------------------------------|
//! | `all_success` | every upstream succeeded           | "upstream failed", else "upstream skipped" |
//! | `all_done`    | always                             | —                                        |
//! | `one_success` | at least one upstream succeeded    | "no upstream succeeded"                  |
//! | `none_failed` | no upstream failed (skips are fine)| "upstream failed"                        |
//!
//! A node with no upstream runs under every rule.

use super::definition::Trigger;
use super::report::NodeStatus;

/// `Ok` to run the node, or the reason it is skipped.
pub fn verdict(
    trigger: Trigger,
    upstream: impl IntoIterator<Item = NodeStatus>,
) -> Result<(), &'static str> {
    let (mut total, mut succeeded, mut failed, mut skipped) = (0, 0, 0, 0);
    for status in upstream {
        total += 1;
        match status {
            NodeStatus::Succeeded => succeeded += 1,
            NodeStatus::Failed | NodeStatus::Cancelled => failed += 1,
            NodeStatus::Skipped => skipped += 1,
            NodeStatus::Pending | NodeStatus::Running => {
                debug_assert!(false, "trigger rules see terminal upstream states only")
            }
        }
    }
    match trigger {
        Trigger::AllSuccess if failed > 0 => Err("upstream failed"),
        Trigger::AllSuccess if skipped > 0 => Err("upstream skipped"),
        Trigger::AllSuccess | Trigger::AllDone => Ok(()),
        Trigger::OneSuccess if total == 0 || succeeded > 0 => Ok(()),
        Trigger::OneSuccess => Err("no upstream succeeded"),
        Trigger::NoneFailed if failed > 0 => Err("upstream failed"),
        Trigger::NoneFailed => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use NodeStatus::{Cancelled as C, Failed as F, Skipped as K, Succeeded as S};

    /// The documented truth table, row by row: upstream states → verdict for each rule
    /// (all_success, all_done, one_success, none_failed). `None` means "runs".
    #[test]
    fn every_row_of_the_truth_table_holds() {
        type Row = (&'static [NodeStatus], [Option<&'static str>; 4]);
        let up_failed = Some("upstream failed");
        let up_skipped = Some("upstream skipped");
        let none_ok = Some("no upstream succeeded");
        let rows: &[Row] = &[
            (&[], [None, None, None, None]),
            (&[S], [None, None, None, None]),
            (&[S, S], [None, None, None, None]),
            (&[F], [up_failed, None, none_ok, up_failed]),
            (&[C], [up_failed, None, none_ok, up_failed]),
            (&[K], [up_skipped, None, none_ok, None]),
            (&[S, F], [up_failed, None, None, up_failed]),
            (&[S, K], [up_skipped, None, None, None]),
            (&[F, K], [up_failed, None, none_ok, up_failed]),
            (&[K, K], [up_skipped, None, none_ok, None]),
            (&[S, F, K], [up_failed, None, None, up_failed]),
            (&[S, C], [up_failed, None, None, up_failed]),
        ];
        let rules = [
            Trigger::AllSuccess,
            Trigger::AllDone,
            Trigger::OneSuccess,
            Trigger::NoneFailed,
        ];
        for (upstream, expected) in rows {
            for (rule, want) in rules.iter().zip(expected) {
                let got = verdict(*rule, upstream.iter().copied()).err();
                assert_eq!(got, *want, "rule {rule:?} with upstream {upstream:?}");
            }
        }
    }
}
