//! The runs: the list, newest first, filtered and paged; a run's page (its DAG, its open
//! questions as forms, its nodes, its inputs and output); and the actions on a run
//! (answer, cancel, retry), each through the application's own run operation.

use http::{Response, StatusCode};
use maud::{Markup, html};
use serde_json::Value;

use super::live::{Live, Region};
use super::page::{frame, html as page, live_frame};
use super::{Asked, Body, dag, form, gantt, see_other};
use crate::app::{App, Caller, RunError};
use crate::engine::RunOptions;
use crate::store::{AuditOutcome, BoardRow, RunQuery};

/// Rows on a page of the list.
const PAGE: usize = 50;

const STATUSES: [&str; 4] = ["running", "succeeded", "failed", "cancelled"];

/// `GET /`: the runs the caller may see.
pub(super) fn list(app: &App, asked: &Asked<'_>) -> Response<Body> {
    let query = run_query(asked);
    let workflows = app.board_workflows(&asked.caller).unwrap_or_default();
    let (table, last) = match runs_table(app, &asked.caller, &query) {
        Ok(found) => found,
        Err(error) => return failed(&error),
    };
    let older = last.map(|last| older_link(&query, &last));
    // The first page follows the runs as they change; an older page stays as it is.
    let live = query.before.is_none().then(|| {
        let mut url = form_urlencoded::Serializer::new(String::from("/live?"));
        filters(&query, &mut url);
        url.finish()
    });
    let body = html! {
        h1 { "Runs" }
        form.filters method="get" action="/" {
            label for="status" { "Status" }
            select #status name="status" {
                option value="" { "any" }
                @for status in STATUSES {
                    option value=(status) selected[query.status == Some(status)] { (status) }
                }
            }
            label for="workflow" { "Workflow" }
            select #workflow name="workflow" {
                option value="" { "any" }
                @for name in &workflows {
                    option value=(name) selected[query.workflow == Some(name.as_str())] { (name) }
                }
            }
            label for="q" { "Text" }
            input #q type="search" name="q" value=[query.text] placeholder="id, workflow or message";
            button type="submit" { "Filter" }
        }
        (table.markup())
        @if let Some(older) = older { p { a href=(older) { "Older runs" } } }
    };
    page(StatusCode::OK, live_frame("Runs", live.as_deref(), body))
}

/// `GET /live`: the first page of the list, as it changes.
pub(super) fn list_live(app: &App, asked: &Asked<'_>, live: &Live) -> Response<Body> {
    let (app, caller) = (app.clone(), asked.caller.clone());
    let status = asked.query("status").map(str::to_owned);
    let workflow = asked.query("workflow").map(str::to_owned);
    let text = asked.query("q").map(str::to_owned);
    let view = format!("list {caller:?} {status:?} {workflow:?} {text:?}");
    live.stream(view, move || {
        let query = RunQuery {
            status: status.as_deref().filter(|s| STATUSES.contains(s)),
            workflow: workflow.as_deref(),
            text: text.as_deref(),
            before: None,
            limit: PAGE,
        };
        runs_table(&app, &caller, &query)
            .ok()
            .map(|(table, _)| vec![table])
    })
}

/// The list's query, as the page's address gives it.
fn run_query<'a>(asked: &'a Asked<'_>) -> RunQuery<'a> {
    RunQuery {
        status: asked.query("status").filter(|s| STATUSES.contains(s)),
        workflow: asked.query("workflow"),
        text: asked.query("q"),
        before: asked.query("before"),
        limit: PAGE,
    }
}

/// The table of a page of runs, and the last run's id when there may be more.
fn runs_table(
    app: &App,
    caller: &Caller,
    query: &RunQuery<'_>,
) -> Result<(Region, Option<String>), RunError> {
    let rows = app.board_runs(query, caller)?;
    let last = (rows.len() == PAGE).then(|| rows[PAGE - 1].id.clone());
    let table = html! {
        @if rows.is_empty() {
            p.empty { "No run matches." }
        } @else {
            table.runs {
                thead { tr {
                    th scope="col" { "Status" } th scope="col" { "Workflow" } th scope="col" { "Nodes" }
                    th scope="col" { "Progress" } th scope="col" { "Started" } th scope="col" { "Took" }
                } }
                tbody { @for row in &rows { (list_row(row)) } }
            }
        }
    };
    Ok((Region::of("live-runs", table), last))
}

fn list_row(row: &BoardRow) -> Markup {
    let waiting = row.task_status.as_deref() == Some("input_required");
    html! {
        tr class=(if waiting { "waiting" } else { "" }) {
            td { (badge(&row.status)) @if waiting { " " span.badge.waiting { "waiting for an answer" } } }
            td {
                a href=(format!("/runs/{}", row.id)) { (row.workflow) }
                br; small.id { (row.id) }
                @if let Some(message) = &row.status_message { br; small { (message) } }
            }
            td.num { (row.nodes) }
            td { (progress(row.progress)) }
            td { (time(&row.created_at)) }
            td { (took(&row.created_at, row.finished_at.as_deref())) }
        }
    }
}

/// The link to the page after `query`'s, which ends at run `last`.
fn older_link(query: &RunQuery<'_>, last: &str) -> String {
    let mut url = form_urlencoded::Serializer::new(String::from("/?"));
    filters(query, &mut url);
    url.append_pair("before", last);
    url.finish()
}

/// The filters of `query` as the parameters of an address.
fn filters(query: &RunQuery<'_>, url: &mut form_urlencoded::Serializer<'_, String>) {
    let given = [
        ("status", query.status),
        ("workflow", query.workflow),
        ("q", query.text),
    ];
    for (key, value) in given {
        if let Some(value) = value {
            url.append_pair(key, value);
        }
    }
}

/// `GET /runs/{id}`: a run's page.
pub(super) fn show(app: &App, asked: &Asked<'_>, run_id: &str) -> Response<Body> {
    run_page(app, &asked.caller, run_id, asked.query("done"), None)
}

/// `GET /runs/{id}/live`: a run's page as it changes.
pub(super) fn show_live(app: &App, asked: &Asked<'_>, live: &Live, run_id: &str) -> Response<Body> {
    if let Err(error) = app.get_run(run_id, &asked.caller) {
        return failed(&error);
    }
    let (app, caller, run_id) = (app.clone(), asked.caller.clone(), run_id.to_owned());
    let view = format!("run {run_id} {caller:?}");
    live.stream(view, move || {
        run_regions(&app, &caller, &run_id, None)
            .ok()
            .map(|(_, regions)| regions)
    })
}

/// A run's page, with a note of what was just done and the problems of an answer posted.
fn run_page(
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
    let title = run["workflow"].as_str().unwrap_or("Run").to_owned();
    let status = run["status"].as_str().unwrap_or_default();
    let node_status = |id: &str| run["nodes"][id]["status"].as_str().map(str::to_owned);
    let open: Vec<&Value> = run["questions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|q| q["answered"] == false)
        .collect();
    let summary = html! {
        h1 { (title) " " (badge(status)) }
        dl.facts {
            dt { "Run" } dd.id { (run_id) }
            dt { "Started" } dd { (time(run["created_at"].as_str().unwrap_or_default())) }
            dt { "Took" } dd { (took(run["created_at"].as_str().unwrap_or_default(), run["finished_at"].as_str())) }
            dt { "Progress" } dd { (progress(run["progress"].as_i64().unwrap_or(0))) }
            @if let Some(message) = run["message"].as_str() { dt { "Message" } dd { (message) } }
            @if let Some(of) = run["retry_of"].as_str() { dt { "Retry of" } dd { a href=(format!("/runs/{of}")) { (of) } } }
            @if let Some(error) = run["error"].as_str() { dt { "Error" } dd.error { (error) } }
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
                    @let node = question["node"].as_str().unwrap_or_default();
                    h3 { (node) }
                    @let shown: &[String] = match problems { Some((at, found)) if at == node => found, _ => &[] };
                    (form::question_form(run_id, question, shown))
                }
            }
        }
    };
    let asked: Vec<&str> = open.iter().filter_map(|q| q["key"].as_str()).collect();
    let nodes = html! {
        section aria-labelledby="dag" {
            h2 #dag { "Nodes" }
            div.dag-frame { (dag::picture(&plan, &node_status)) }
            @if let Some(timeline) = gantt::timeline(&plan, &run, time::OffsetDateTime::now_utc()) {
                h3 { "Timeline" }
                div.dag-frame { (timeline) }
            }
            (nodes_table(&plan, &run))
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
            h3 { "Inputs" } pre { (pretty(&run["inputs"])) }
            @if !run["output"].is_null() { h3 { "Output" } pre { (pretty(&run["output"])) } }
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
        Region::of("live-nodes", nodes),
        Region::of("live-io", io),
    ];
    Ok((title, regions))
}

/// Every node of the run with its state, attempts, times, sub-task, error and output; for
/// a plan too large to draw, only the nodes that run, failed or were cancelled.
fn nodes_table(plan: &crate::engine::plan::Plan, run: &Value) -> Markup {
    let large = plan.nodes.len() > dag::MAX_DRAWN;
    let shown = plan.nodes.iter().filter(|node| {
        !large
            || matches!(
                run["nodes"][node.id.as_ref()]["status"].as_str(),
                Some("running" | "failed" | "cancelled")
            )
    });
    html! {
        @if large { p { "Below: the nodes that run, failed or were cancelled." } }
        table.nodes {
            thead { tr {
                th scope="col" { "Node" } th scope="col" { "Phase" } th scope="col" { "State" }
                th scope="col" { "Attempts" } th scope="col" { "Started" } th scope="col" { "Took" }
            } }
            tbody {
                @for node in shown {
                    @let id: &str = node.id.as_ref();
                    @let entry = &run["nodes"][id];
                    tr id=(format!("node-{id}")) {
                        th scope="row" {
                            (id)
                            @if let Some(task) = entry["task_id"].as_str() { br; small.id { "task " (task) } }
                        }
                        td { (node.phase.and_then(|i| plan.phases.get(i)).map_or("", String::as_str)) }
                        td {
                            (badge(entry["status"].as_str().unwrap_or("pending")))
                            @if let Some(reason) = entry["reason"].as_str() { br; small { (reason) } }
                        }
                        td.num { (entry["attempts"].as_u64().unwrap_or(0)) }
                        td { (entry["started_at"].as_str().map(time).unwrap_or_default()) }
                        td { @if let Some(start) = entry["started_at"].as_str() { (took(start, entry["finished_at"].as_str())) } }
                    }
                    tr.detail { td colspan="6" {
                        details {
                            summary { "Action" }
                            pre { (serde_json::to_string_pretty(&node.action).unwrap_or_default()) }
                        }
                            @if let Some(message) = entry["error"]["message"].as_str() {
                                p.error { (entry["error"]["code"].as_str().unwrap_or("error")) ": " (message) }
                            }
                            @if let Some(output) = entry.get("output") {
                                details { summary { "Output" } pre { (pretty(output)) } }
                            }
                    } }
                }
            }
        }
    }
}

/// `POST /runs/{id}/answer`: answers a node's open question from its form.
pub(super) fn answer(
    app: &App,
    caller: &Caller,
    run_id: &str,
    posted: &[(String, String)],
) -> Response<Body> {
    let field = |name: &str| {
        posted
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let node = field("node").unwrap_or_default();
    let instance = field("instance").and_then(|i| i.parse::<usize>().ok());
    let run = match app.get_run(run_id, caller) {
        Ok(run) => run,
        Err(error) => return failed(&error),
    };
    let question = run["questions"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|q| {
            q["node"] == node
                && q["answered"] == false
                && q["instance"].as_u64().map(|i| i as usize) == instance
        });
    let Some(question) = question else {
        return run_page(
            app,
            caller,
            run_id,
            None,
            Some((
                node,
                &["this question is answered already, or was never asked".to_owned()],
            )),
        );
    };
    let answer = match form::posted_answer(&question["request"], posted) {
        Ok(answer) => answer,
        Err(problems) => return run_page(app, caller, run_id, None, Some((node, &problems))),
    };
    match app.answer_question(run_id, (node, instance), &answer, caller) {
        Ok(_) => see_other(&format!("/runs/{run_id}?done=answered")),
        Err(RunError::Answer(error)) => run_page(
            app,
            caller,
            run_id,
            None,
            Some((node, &[error.to_string()])),
        ),
        Err(error) => failed(&error),
    }
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

/// `POST /runs/{id}/cancel`.
pub(super) async fn cancel(app: &App, caller: &Caller, run_id: &str) -> Response<Body> {
    let args = run_args(run_id);
    match app.cancel_run(run_id, caller).await {
        Ok(_) => {
            app.audit(
                ("cancel_run", &args),
                AuditOutcome::Ok,
                Some(run_id),
                caller,
            );
            see_other(&format!("/runs/{run_id}?done=cancelled"))
        }
        Err(error) => {
            app.audit(
                ("cancel_run", &args),
                outcome_of(&error),
                Some(run_id),
                caller,
            );
            failed(&error)
        }
    }
}

/// `POST /runs/{id}/retry`: a new run that keeps what succeeded, driven by this process.
pub(super) fn retry(app: &App, caller: &Caller, run_id: &str) -> Response<Body> {
    let args = run_args(run_id);
    match app.retry_run(run_id, RunOptions::default(), caller) {
        Ok(handle) => {
            let new_run = handle.run_id.clone();
            app.audit(
                ("retry_run", &args),
                AuditOutcome::Ok,
                Some(&new_run),
                caller,
            );
            see_other(&format!("/runs/{new_run}?done=retried"))
        }
        Err(error) => {
            app.audit(
                ("retry_run", &args),
                outcome_of(&error),
                Some(run_id),
                caller,
            );
            failed(&error)
        }
    }
}

fn run_args(run_id: &str) -> serde_json::Map<String, Value> {
    let mut args = serde_json::Map::new();
    args.insert("run_id".to_owned(), Value::String(run_id.to_owned()));
    args
}

fn outcome_of(error: &RunError) -> AuditOutcome {
    match error {
        RunError::NotFound(_) => AuditOutcome::NotFound,
        RunError::Store(_) => AuditOutcome::Error,
        _ => AuditOutcome::Rejected,
    }
}

/// The page of an operation that failed.
fn failed(error: &RunError) -> Response<Body> {
    let (status, title) = match error {
        RunError::NotFound(_) => (StatusCode::NOT_FOUND, "Not found"),
        RunError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "The store failed"),
        _ => (StatusCode::CONFLICT, "Not done"),
    };
    let message = match error {
        RunError::Store(_) => {
            "The database could not be read or written; the server's log says why.".to_owned()
        }
        error => error.to_string(),
    };
    page(
        status,
        frame(
            title,
            html! {
                h1 { (title) }
                p.problem { (message) }
                p { a href="/" { "Back to the runs" } }
            },
        ),
    )
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

fn badge(status: &str) -> Markup {
    html! { span class=(format!("badge {status}")) { (status) } }
}

fn progress(percent: i64) -> Markup {
    html! { progress max="100" value=(percent) { (percent) "%" } " " (percent) "%" }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// A stored timestamp as a person reads it: date and time to the second, in UTC.
fn time(stamp: &str) -> String {
    match parse(stamp) {
        Some(at) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
            at.year(),
            u8::from(at.month()),
            at.day(),
            at.hour(),
            at.minute(),
            at.second()
        ),
        None => stamp.to_owned(),
    }
}

/// How long from `start` to `end`, or to now while it runs.
fn took(start: &str, end: Option<&str>) -> String {
    let Some(start) = parse(start) else {
        return String::new();
    };
    let end = end
        .and_then(parse)
        .unwrap_or_else(time::OffsetDateTime::now_utc);
    let seconds = (end - start).as_seconds_f64().max(0.0);
    match seconds {
        s if s < 1.0 => format!("{:.0} ms", s * 1000.0),
        s if s < 60.0 => format!("{s:.1} s"),
        s if s < 3600.0 => format!("{}m {:02}s", (s / 60.0) as u64, (s % 60.0) as u64),
        s => format!(
            "{}h {:02}m",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        ),
    }
}

fn parse(stamp: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(stamp, &time::format_description::well_known::Rfc3339).ok()
}
