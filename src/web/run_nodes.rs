//! A run page's table of nodes: each node's state, attempts and times, then its detail:
//! its action and policies, its attempts and iterations, what the audit log holds of it,
//! the questions it had answered, its error and its output.

use maud::{Markup, html};

use super::dag;
use super::format::{badge, pretty, time, took};
use super::page::header_row;
use crate::engine::definition::{Repeat, RetryPolicy};
use crate::runs::{NodeView, QuestionView, RunView};
use crate::store::AuditRow;

/// Every node of the run with its state, attempts, times, sub-task, error and output; for
/// a plan too large to draw, only the nodes that run, failed or were cancelled.
pub(super) fn nodes_table(
    plan: &crate::engine::plan::Plan,
    run: &RunView,
    calls: &[AuditRow],
) -> Markup {
    let large = plan.nodes.len() > dag::MAX_DRAWN;
    let shown = plan.nodes.iter().filter(|node| {
        !large
            || matches!(
                run.nodes.get(node.id.as_ref()).map(|n| n.status.as_str()),
                Some("running" | "failed" | "cancelled")
            )
    });
    html! {
        @if large { p { "Below: the nodes that run, failed or were cancelled." } }
        table.nodes {
            (header_row(&["Node", "Phase", "State", "Attempts", "Started", "Took"]))
            tbody {
                @for node in shown {
                    @let id: &str = node.id.as_ref();
                    @let entry = run.nodes.get(id);
                    tr id=(format!("node-{id}")) {
                        th scope="row" {
                            (id)
                            @if let Some(task) = entry.and_then(|e| e.task_id.as_ref()) { br; small.id { "task " (task) } }
                        }
                        td { (node.phase.and_then(|i| plan.phases.get(i)).map_or("", String::as_str)) }
                        td {
                            (badge(entry.map_or("pending", |e| e.status.as_str())))
                            @if let Some(reason) = entry.and_then(|e| e.reason.as_deref()) { br; small { (reason) } }
                        }
                        td.num { (entry.map_or(0, |e| e.attempts)) }
                        td { (entry.and_then(NodeView::started_at).map(time).unwrap_or_default()) }
                        td { @if let Some(start) = entry.and_then(NodeView::started_at) { (took(start, entry.and_then(NodeView::finished_at))) } }
                    }
                    tr.detail { td colspan="6" {
                        details {
                            summary { "Action" }
                            pre { (serde_json::to_string_pretty(&node.action).unwrap_or_default()) }
                            @if node.retry.max_attempts > 1 { p { (retry_policy(&node.retry)) } }
                        }
                        @if let Some(repeat) = &node.repeat { p { (repeat_policy(repeat)) } }
                        @if let Some(entry) = entry { (attempts(entry)) (iterations(entry)) (child_runs(entry)) }
                        (audited(calls, id))
                        (asked(run, id))
                            @if let Some(error) = entry.and_then(|e| e.error.as_ref()) {
                                p.error { (error.code) ": " (error.message) }
                            }
                            @if let Some(output) = entry.and_then(|e| e.output.as_ref()) {
                                details { summary { "Output" } pre { (pretty(output)) } }
                            }
                    } }
                }
            }
        }
    }
}

/// A node's attempts, once one failed and was retried: each with its times, its error
/// and the delay before the next, then the last, which is the node's own record.
fn attempts(entry: &NodeView) -> Markup {
    let Some(retried) = entry.retried.as_ref().filter(|list| !list.is_empty()) else {
        return html! {};
    };
    let last_start = retried.last().map(|r| r.retry_at.as_str());
    let status = entry.status.as_str();
    html! {
        table.attempts {
            caption { "Attempts" }
            (header_row(&["Attempt", "Started", "Ended", "Outcome", "Retried"]))
            tbody {
                @for attempt in retried {
                    @let failed_at = attempt.failed_at.as_str();
                    tr {
                        td.num { (attempt.attempt) }
                        td { (attempt.started_at.as_deref().map(time).unwrap_or_default()) }
                        td { (time(failed_at)) }
                        td {
                            (badge("failed")) " "
                            (attempt.error.code) ": "
                            (attempt.error.message)
                        }
                        td { "after " (took(failed_at, Some(&attempt.retry_at))) }
                    }
                }
                @if entry.attempts as usize > retried.len() || status == "running" {
                    tr {
                        td.num { (retried.len() + 1) }
                        td { (last_start.map(time).unwrap_or_default()) }
                        td { (entry.finished_at().map(time).unwrap_or_default()) }
                        td { (badge(status)) }
                        td {}
                    }
                }
            }
        }
    }
}

/// The questions a node put and had answered, as resolved when they were asked, with
/// their answers (an open question is a form at the top of the page).
fn asked(run: &RunView, node: &str) -> Markup {
    let mine: Vec<&QuestionView> = run
        .questions
        .iter()
        .filter(|q| q.node.as_deref() == Some(node) && q.answered)
        .collect();
    html! {
        @if !mine.is_empty() {
            details.asked {
                summary { "Questions answered (" (mine.len()) ")" }
                @for question in mine {
                    h4 { "Asked" }
                    pre { (pretty(&question.request)) }
                    h4 { "Answered" }
                    pre { (pretty(&question.answer)) }
                }
            }
        }
    }
}

/// What the audit log holds of a node: its tool calls and file actions, each an attempt,
/// with the arguments resolved, and the answers to its questions.
fn audited(calls: &[AuditRow], node: &str) -> Markup {
    let mine: Vec<&AuditRow> = calls
        .iter()
        .filter(|call| call.node_id.as_deref() == Some(node))
        .collect();
    html! {
        @if !mine.is_empty() {
            table.calls {
                caption { "Audited" }
                (header_row(&["#", "At", "Outcome", "Arguments, resolved"]))
                tbody {
                    @for (n, call) in mine.iter().enumerate() {
                        tr {
                            td.num { (n + 1) }
                            td { (time(&call.at)) }
                            td { span class=(format!("badge outcome-{}", call.outcome)) { (call.outcome) } }
                            td { code { (call.args) } }
                        }
                    }
                }
            }
        }
    }
}

/// How a node is retried, as a person reads it.
fn retry_policy(retry: &RetryPolicy) -> String {
    format!(
        "Retried up to {} attempts in all, after {:?} at first, {}× longer each time, at most {:?}{}.",
        retry.max_attempts,
        retry.initial_delay,
        retry.factor,
        retry.max_delay,
        if retry.jitter { ", with jitter" } else { "" }
    )
}

/// How a node repeats, as a person reads it.
fn repeat_policy(repeat: &Repeat) -> String {
    let delay = match repeat.delay.is_zero() {
        true => String::new(),
        false => format!(
            ", {} apart",
            crate::engine::duration::format_duration(repeat.delay)
        ),
    };
    format!(
        "Repeated until `{}` holds, at most {} times{delay}.",
        repeat.until, repeat.max
    )
}

/// The child runs a `workflow` node started (its instances' included), each a link to
/// its own page.
fn child_runs(entry: &NodeView) -> Markup {
    let instances = entry.instances.iter().flat_map(|list| list.iter());
    let mut runs: Vec<(Option<&str>, &crate::runs::ChildRunView)> = (entry.runs.iter().flatten())
        .map(|run| (None, run))
        .collect();
    for (k, instance) in instances {
        runs.extend(
            instance
                .runs
                .iter()
                .flatten()
                .map(|run| (Some(k.as_str()), run)),
        );
    }
    if runs.is_empty() {
        return html! {};
    }
    html! {
        table.children {
            caption { "Child runs" }
            (header_row(&["Item", "Run", "Workflow", "Status"]))
            tbody {
                @for (item, run) in runs {
                    tr {
                        td { (item.unwrap_or("")) }
                        td { a href=(format!("/runs/{}", run.run_id)) { (run.run_id) } }
                        td { (run.workflow) }
                        td { (badge(&run.status)) }
                    }
                }
            }
        }
    }
}

/// A repeating node's finished iterations: each with its attempts, times and output.
fn iterations(entry: &NodeView) -> Markup {
    let Some(done) = entry.iterations.as_ref().filter(|list| !list.is_empty()) else {
        return html! {};
    };
    html! {
        table.iterations {
            caption { "Iterations" }
            (header_row(&["Iteration", "Attempts", "Started", "Ended", "Output"]))
            tbody {
                @for iteration in done {
                    tr {
                        td.num { (iteration.iteration) }
                        td.num { (iteration.attempts) }
                        td { (iteration.started_at.as_deref().map(time).unwrap_or_default()) }
                        td { (iteration.finished_at.as_deref().map(time).unwrap_or_default()) }
                        td { details { summary { "Output" } pre { (pretty(&iteration.output)) } } }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::{IterationView, Skipped};

    #[test]
    fn a_repeating_node_shows_its_policy_and_each_iteration_with_its_output() {
        let repeat = Repeat {
            until: "output.ok".into(),
            max: 5,
            delay: std::time::Duration::from_secs(30),
        };
        assert_eq!(
            repeat_policy(&repeat),
            "Repeated until `output.ok` holds, at most 5 times, 30s apart."
        );
        let iteration = |n: usize, ok: bool| IterationView {
            iteration: n,
            attempts: 1,
            started_at: Some(format!("2026-12-07T10:0{n}:00.000Z")),
            finished_at: Some(format!("2026-12-07T10:0{n}:01.000Z")),
            output: serde_json::json!({ "ok": ok, "n": n }),
        };
        let entry = NodeView {
            status: "running".into(),
            attempts: 2,
            times: None,
            reason: None,
            output: None,
            error: None,
            retried: None,
            iterations: Some(vec![iteration(1, false), iteration(2, false)]),
            runs: None,
            task_id: Skipped::Skip,
            instances: None,
        };
        let page = iterations(&entry).into_string();
        assert!(page.contains("<caption>Iterations</caption>"), "{page}");
        assert_eq!(page.matches("<tr><td class=\"num\">").count(), 2, "{page}");
        assert!(page.contains("&quot;n&quot;: 2"), "{page}");
        let none = NodeView {
            iterations: None,
            runs: None,
            ..entry
        };
        assert_eq!(iterations(&none).into_string(), "");
    }

    #[test]
    fn a_workflow_node_links_each_child_run_and_escapes_what_it_shows() {
        let child = |id: &str, status: &str| crate::runs::ChildRunView {
            run_id: id.into(),
            workflow: "<script>x</script>".into(),
            status: status.into(),
        };
        let unit = |runs| NodeView {
            status: "succeeded".into(),
            attempts: 1,
            times: None,
            reason: None,
            output: None,
            error: None,
            retried: None,
            iterations: None,
            runs,
            task_id: Skipped::Skip,
            instances: None,
        };
        let mut entry = unit(Some(vec![
            child("r-1", "failed"),
            child("r-2", "succeeded"),
        ]));
        let instance = unit(Some(vec![child("r-3", "succeeded")]));
        entry.instances = Some([("0".to_owned(), instance)].into_iter().collect());
        let page = child_runs(&entry).into_string();
        assert!(page.contains("<caption>Child runs</caption>"), "{page}");
        for id in ["r-1", "r-2", "r-3"] {
            assert!(page.contains(&format!("href=\"/runs/{id}\"")), "{page}");
        }
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;"), "{page}");
    }
}
