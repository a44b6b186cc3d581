//! A run's page: its summary and actions, its open questions as forms, its DAG, timeline
//! and nodes, the files it wrote, its inputs, output and definition; each part a live
//! region that follows the store.

use http::{Response, StatusCode};
use maud::html;

use super::format::{badge, failed, pretty, progress, time, took};
use super::live::{Live, Region};
use super::page::{frame, html as page, live_frame};
use super::{Asked, Body, dag, form, gantt};
use crate::app::{App, Caller, RunError};
use crate::runs::{AnswerError, QuestionView};
use crate::slots::Slot;

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
    // A run that ended waits for nothing, whatever it left unanswered.
    let (open, below): (Vec<&QuestionView>, _) = match status {
        "running" => (
            run.open_questions().collect(),
            questions_below(app, caller, run_id)?,
        ),
        _ => (Vec::new(), Vec::new()),
    };
    let summary = html! {
        h1 { (title) " " (badge(status)) }
        dl.facts {
            dt { "Run" } dd.id { (run_id) }
            dt { "Started" } dd { (time(&run.created_at)) }
            dt { "Took" } dd { (took(&run.created_at, run.finished_at.as_deref())) }
            dt { "Progress" } dd { (progress(run.progress)) }
            @if let Some(message) = &run.message { dt { "Message" } dd { (message) } }
            @if let Some(of) = &run.retry_of { dt { "Retry of" } dd { a href=(format!("/runs/{of}")) { (of) } } }
            @if let Some(parent) = &run.parent {
                dt { "Started by" }
                dd {
                    "node " code { (parent.node) }
                    @if let Some(k) = parent.instance { " item " (k) }
                    " of run " a href=(format!("/runs/{}", parent.run_id)) { (parent.run_id) }
                }
            }
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
    // The problems of an answer to a question no form shows any more (answered meanwhile,
    // or the run ended) are shown on their own.
    let unshown = problems.filter(|(at, _)| !open.iter().any(|q| q.node.as_deref() == Some(*at)));
    let questions = html! {
        @if let Some((node, found)) = unshown {
            ul.problem role="alert" {
                @for problem in found { li { "The answer to " code { (node) } " was not taken: " (problem) } }
            }
        }
        @if !open.is_empty() || !below.is_empty() {
            section.questions aria-labelledby="questions" {
                h2 #questions { "Waiting for an answer" }
                @for question in &open {
                    @let node = question.node.as_deref().unwrap_or_default();
                    h3 { (node) }
                    @let shown: &[String] = match problems { Some((at, found)) if at == node => found, _ => &[] };
                    (form::question_form(run_id, question, shown))
                }
                @for asked in &below {
                    h3 { (asked.path) (asked.question.node.as_deref().unwrap_or_default()) }
                    p { "Asked by child run " a href=(format!("/runs/{}", asked.run_id)) { (asked.run_id) } "." }
                    (form::question_form(&asked.run_id, &asked.question, &[]))
                }
            }
        }
    };
    let asked: Vec<String> = (open.iter().map(|q| q.key.clone()))
        .chain(
            below
                .iter()
                .map(|b| format!("{}{}", b.path, b.question.key)),
        )
        .collect();
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
            (super::run_nodes::nodes_table(&plan, &run, &calls))
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

/// An open question of a run below the one shown: the run that asks it, the path of
/// `workflow` nodes that leads there (`iterate>`), and the question.
struct AskedBelow {
    run_id: String,
    path: String,
    question: QuestionView,
}

/// The open questions of the unfinished runs below `run_id` (its `workflow` nodes'
/// children, theirs, and so on): a run waits on them as on its own (its task is
/// `input_required`, the list marks it), so its page shows them, each answered where it
/// is asked.
fn questions_below(app: &App, caller: &Caller, run_id: &str) -> Result<Vec<AskedBelow>, RunError> {
    let open = match app.open_questions(run_id) {
        Ok(open) => open,
        // The run was removed since it was read: nothing below it waits.
        Err(AnswerError::NoRun(_)) => return Ok(Vec::new()),
        Err(error) => return Err(error.into()),
    };
    let mut runs: Vec<(String, String)> = Vec::new();
    for question in open.into_iter().filter(|q| q.run_id != run_id) {
        if !runs.iter().any(|(id, _)| *id == question.run_id) {
            runs.push((question.run_id, question.path));
        }
    }
    let mut below = Vec::new();
    for (child, path) in runs {
        let view = match app.get_run(&child, caller) {
            // Ended since: whatever it left unanswered takes no answer.
            Ok(view) if view.status != "running" => continue,
            Ok(view) => view,
            Err(RunError::NotFound(_)) => continue,
            Err(error) => return Err(error),
        };
        below.extend(view.open_questions().map(|question| AskedBelow {
            run_id: child.clone(),
            path: path.clone(),
            question: question.clone(),
        }));
    }
    Ok(below)
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
