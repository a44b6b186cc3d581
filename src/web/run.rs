//! A run's page: its summary and actions, its open questions as forms, its DAG, timeline
//! and nodes, the files it wrote, its inputs, output and definition; each part a live
//! region that follows the store.

use http::{Response, StatusCode};
use maud::{Markup, html};

use super::format::{badge, failed, pretty, progress, time, took};
use super::live::{Live, Region};
use super::page::{frame, header_row, html as page, live_frame};
use super::{Asked, Body, dag, form, gantt};
use crate::app::{App, Caller, RunError};
use crate::engine::definition::RetryPolicy;
use crate::runs::{NodeView, QuestionView, RunView};
use crate::slots::Slot;
use crate::store::AuditRow;

/// `GET /runs/{id}`: a run's page.
pub(super) fn show(app: &App, asked: &Asked<'_>, run_id: &str) -> Response<Body> {
    run_page(app, &asked.caller, run_id, asked.query("done"), None)
}

/// `GET /runs/{id}/live`: a run's page as it changes.
pub(super) fn show_live(
    app: &App,
    asked: &Asked<'_>,
    live: &Live,
    run_id: &str,
    slot: Slot,
) -> Response<Body> {
    if let Err(error) = app.get_run(run_id, &asked.caller) {
        return failed(&error);
    }
    let (app, caller, run_id) = (app.clone(), asked.caller.clone(), run_id.to_owned());
    let view = format!("run {run_id} {caller:?}");
    live.stream(slot, view, move || {
        run_regions(&app, &caller, &run_id, None)
            .ok()
            .map(|(_, regions)| regions)
    })
}

/// A run's page, with a note of what was just done and the problems of an answer posted.
pub(super) fn run_page(
    app: &App,
    caller: &Caller,
    run_id: &str,
    done: Option<&str>,
    problems: Option<(&str, &[String])>,
) -> Response<Body> {
    let (title, regions) = match run_regions(app, caller, run_id, problems) {
        Ok(found) => found,
        Err(error) => return failed(&error),
    };
    let body = html! {
        @if let Some(done) = done { p.note role="status" { (done_note(done)) } }
        @for region in &regions { (region.markup()) }
    };
    let status_code = match problems {
        Some(_) => StatusCode::UNPROCESSABLE_ENTITY,
        None => StatusCode::OK,
    };
    let live = format!("/runs/{run_id}/live");
    page(status_code, live_frame(&title, Some(&live), body))
}

/// The parts of a run's page, each a live region, and the page's title.
fn run_regions(
    app: &App,
    caller: &Caller,
    run_id: &str,
    problems: Option<(&str, &[String])>,
) -> Result<(String, Vec<Region>), RunError> {
    let run = app.get_run(run_id, caller)?;
    let plan = app.run_plan(run_id, caller)?;
    let calls = app.run_calls(run_id, caller)?;
    let title = run.workflow.clone();
    let status = run.status.as_str();
    let node_status = |id: &str| run.nodes.get(id).map(|node| node.status.clone());
    let open: Vec<&QuestionView> = run.open_questions().collect();
    let summary = html! {
        h1 { (title) " " (badge(status)) }
        dl.facts {
            dt { "Run" } dd.id { (run_id) }
            dt { "Started" } dd { (time(&run.created_at)) }
            dt { "Took" } dd { (took(&run.created_at, run.finished_at.as_deref())) }
            dt { "Progress" } dd { (progress(run.progress)) }
            @if let Some(message) = &run.message { dt { "Message" } dd { (message) } }
            @if let Some(of) = &run.retry_of { dt { "Retry of" } dd { a href=(format!("/runs/{of}")) { (of) } } }
            @if let Some(error) = &run.error { dt { "Error" } dd.error { (error) } }
        }
        div.actions {
            @if status == "running" {
                form method="post" action=(format!("/runs/{run_id}/cancel")) { button type="submit" { "Cancel the run" } }
            }
            @if matches!(status, "failed" | "cancelled") {
                form method="post" action=(format!("/runs/{run_id}/retry")) { button type="submit" { "Retry, keeping what succeeded" } }
            }
        }
    };
    let questions = html! {
        @if !open.is_empty() {
            section.questions aria-labelledby="questions" {
                h2 #questions { "Waiting for an answer" }
                @for question in &open {
                    @let node = question.node.as_deref().unwrap_or_default();
                    h3 { (node) }
                    @let shown: &[String] = match problems { Some((at, found)) if at == node => found, _ => &[] };
                    (form::question_form(run_id, question, shown))
                }
            }
        }
    };
    let asked: Vec<&str> = open.iter().map(|q| q.key.as_str()).collect();
    // The picture is a region of its own: it changes only with the nodes' states, while
    // the timeline and the running nodes' times change with the clock.
    let picture = html! {
        section aria-labelledby="dag" {
            h2 #dag { "Nodes" }
            div.dag-frame { (dag::picture(&plan, &node_status)) }
        }
    };
    let nodes = html! {
        section aria-label="The nodes' timeline and details" {
            @if let Some(timeline) = gantt::timeline(&plan, &run, time::OffsetDateTime::now_utc()) {
                h3 { "Timeline" }
                div.dag-frame { (timeline) }
            }
            (nodes_table(&plan, &run, &calls))
        }
    };
    let files = app.run_files(run_id, caller)?;
    let io = html! {
        @if !files.is_empty() {
            section aria-labelledby="files" {
                h2 #files { "Files written" }
                ul.files {
                    @for file in &files {
                        li {
                            a href=(format!("/runs/{run_id}/files/{}", file.node)) { (file.path) }
                            " " small { (file.bytes) " bytes, by " (file.node) }
                        }
                    }
                }
            }
        }
        section aria-labelledby="io" {
            h2 #io { "Inputs and output" }
            h3 { "Inputs" } pre { (pretty(&run.inputs)) }
            @if !run.output.is_null() { h3 { "Output" } pre { (pretty(&run.output)) } }
            details {
                summary { "The definition this run started with" }
                pre { (serde_json::to_string_pretty(&plan).unwrap_or_default()) }
            }
        }
    };
    let regions = vec![
        Region::of("live-summary", summary),
        Region::keyed(
            "live-questions",
            format!("q:{}", asked.join(",")),
            questions,
        ),
        Region::of("live-dag", picture),
        Region::of("live-nodes", nodes),
        Region::of("live-io", io),
    ];
    Ok((title, regions))
}

/// Every node of the run with its state, attempts, times, sub-task, error and output; for
/// a plan too large to draw, only the nodes that run, failed or were cancelled.
fn nodes_table(plan: &crate::engine::plan::Plan, run: &RunView, calls: &[AuditRow]) -> Markup {
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
                        @if let Some(entry) = entry { (attempts(entry)) }
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

/// `GET /runs/{id}/files/{node}`: the file a node wrote, as text.
pub(super) fn file(app: &App, caller: &Caller, run_id: &str, node: &str) -> Response<Body> {
    match app.run_file(run_id, node, caller) {
        Ok(Some((file, content))) => {
            let body = html! {
                h1 { (file.path) }
                p { "Written by " a href=(format!("/runs/{run_id}#node-{node}")) { (node) } " of run " a href=(format!("/runs/{run_id}")) { (run_id) } "." }
                pre.file { (content) }
            };
            page(StatusCode::OK, frame(&file.path, body))
        }
        Ok(None) => page(StatusCode::NOT_FOUND, super::page::not_found()),
        Err(error) => failed(&error),
    }
}

fn done_note(done: &str) -> &'static str {
    match done {
        "answered" => "Answer sent: the run goes on.",
        "cancelled" => {
            "The run is cancelled, or will be within seconds where another process drives it."
        }
        "retried" => "This is the retry: nodes that succeeded before keep their results.",
        _ => "Done.",
    }
}
