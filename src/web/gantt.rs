//! A run's timeline: one bar per node that has started, from its start to its end (or to
//! now while it runs), on one time axis from the run's start, coloured by its state.

use maud::{Markup, html};
use time::OffsetDateTime;

use super::format::parse;
use crate::engine::plan::Plan;
use crate::runs::RunView;

const LABEL_W: f64 = 180.0;
const BAR_AREA: f64 = 720.0;
const ROW_H: f64 = 22.0;
const AXIS_H: f64 = 22.0;

/// The timeline of `run` (as `get_run` gives it) over `plan`'s nodes, in plan order; none
/// before any node started, or for a plan too large to draw.
pub(super) fn timeline(plan: &Plan, run: &RunView, now: OffsetDateTime) -> Option<Markup> {
    if plan.nodes.len() > super::dag::MAX_DRAWN {
        return None;
    }
    let start = parse(&run.created_at)?;
    let bars: Vec<(&str, f64, f64, &str)> = plan
        .nodes
        .iter()
        .filter_map(|node| {
            let entry = run.nodes.get(node.id.as_ref())?;
            let from = parse(entry.started_at()?)?;
            let to = entry.finished_at().and_then(parse).unwrap_or(now);
            let seconds = |at: OffsetDateTime| (at - start).as_seconds_f64().max(0.0);
            Some((
                node.id.as_ref(),
                seconds(from),
                seconds(to),
                entry.status.as_str(),
            ))
        })
        .collect();
    if bars.is_empty() {
        return None;
    }
    let span = bars.iter().map(|b| b.2).fold(0.001, f64::max);
    let x = |seconds: f64| LABEL_W + seconds / span * BAR_AREA;
    let height = AXIS_H + bars.len() as f64 * ROW_H + 4.0;
    let width = LABEL_W + BAR_AREA + 20.0;
    Some(html! {
        svg.gantt role="img" aria-label="When each node ran" viewBox=(format!("0 0 {width:.0} {height:.0}"))
            width=(format!("{width:.0}")) height=(format!("{height:.0}")) xmlns="http://www.w3.org/2000/svg" {
            @for tick in 0..=4 {
                @let at = span * f64::from(tick) / 4.0;
                line.tick x1=(x(at)) x2=(x(at)) y1="16" y2=(height) {}
                text.tick x=(x(at)) y="12" { (seconds_label(at)) }
            }
            @for (row, (id, from, to, status)) in bars.iter().enumerate() {
                @let y = AXIS_H + row as f64 * ROW_H;
                g class=(format!("bar {status}")) {
                    title { (id) ": " (status) ", " (seconds_label(to - from)) }
                    text x="4" y=(y + 15.0) { (id) }
                    rect x=(x(*from)) y=(y + 4.0) width=((x(*to) - x(*from)).max(2.0)) height=(ROW_H - 8.0) rx="3" {}
                }
            }
        }
    })
}

fn seconds_label(seconds: f64) -> String {
    match seconds {
        s if s < 1.0 => format!("{:.0} ms", s * 1000.0),
        s if s < 120.0 => format!("{s:.1} s"),
        s => format!("{:.1} min", s / 60.0),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::Value;

    use super::*;
    use crate::runs::{NodeView, Skipped, Times};

    /// A run started at `created_at`, its nodes each (id, status, started, finished).
    fn run(created_at: &str, nodes: &[(&str, &str, Option<&str>, Option<&str>)]) -> RunView {
        let node = |(status, started, finished): (&str, Option<&str>, Option<&str>)| NodeView {
            status: status.to_owned(),
            attempts: 1,
            times: started.map(|started| Times {
                started_at: Some(started.to_owned()),
                finished_at: finished.map(str::to_owned),
            }),
            reason: None,
            output: None,
            error: None,
            retried: None,
            iterations: None,
            runs: None,
            task_id: Skipped::Is(None),
            instances: None,
        };
        RunView {
            run_id: "r".to_owned(),
            workflow: "t".to_owned(),
            status: "running".to_owned(),
            progress: 0,
            message: None,
            task_status: None,
            origin: "mcp".to_owned(),
            retry_of: None,
            created_at: created_at.to_owned(),
            updated_at: created_at.to_owned(),
            finished_at: None,
            error: None,
            output: Value::Null,
            inputs: Value::Null,
            parent: None,
            nodes: (nodes.iter())
                .map(|(id, status, started, finished)| {
                    ((*id).to_owned(), node((status, *started, *finished)))
                })
                .collect(),
            questions: Vec::new(),
        }
    }

    #[test]
    fn a_bar_spans_each_started_node_on_one_axis_from_the_runs_start() {
        let toml = "name = \"t\"\n[nodes.a]\nrender = \"a\"\n[nodes.b]\nneeds = [\"a\"]\nrender = \"b\"\n[nodes.c]\nneeds = [\"b\"]\nrender = \"c\"\n";
        let def = crate::engine::loader::parse_toml("t.toml", "t", toml).unwrap();
        let plan = Plan::new(Arc::new(def));
        let run = run(
            "2026-01-01T00:00:00.000Z",
            &[
                (
                    "a",
                    "succeeded",
                    Some("2026-01-01T00:00:00.000Z"),
                    Some("2026-01-01T00:00:01.000Z"),
                ),
                ("b", "running", Some("2026-01-01T00:00:01.000Z"), None),
                ("c", "pending", None, None),
            ],
        );
        let now = parse("2026-01-01T00:00:04.000Z").unwrap();
        let svg = timeline(&plan, &run, now).unwrap().into_string();
        assert_eq!(
            svg.matches("<rect ").count(),
            2,
            "no bar for a node not started: {svg}"
        );
        // a: 0 to 1 s of 4 s; b: 1 s to now.
        assert!(svg.contains(r#"<rect x="180" y="26" width="180""#), "{svg}");
        assert!(svg.contains(r#"<rect x="360" y="48" width="540""#), "{svg}");
        assert!(svg.contains(r#"class="bar running""#), "{svg}");
    }

    #[test]
    fn a_run_with_no_node_started_has_no_timeline() {
        let def = crate::engine::loader::parse_toml(
            "t.toml",
            "t",
            "name = \"t\"\n[nodes.a]\nrender = \"a\"\n",
        )
        .unwrap();
        let plan = Plan::new(Arc::new(def));
        let run = run("2026-01-01T00:00:00.000Z", &[]);
        assert!(timeline(&plan, &run, OffsetDateTime::now_utc()).is_none());
    }
}
