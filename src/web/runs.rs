//! The runs list: newest first, filtered by status, workflow and text, a page at a time;
//! its first page follows the store live.

use http::{Response, StatusCode};
use maud::{Markup, html};

use super::format::{badge, failed, progress, time, took};
use super::live::{Live, Region};
use super::page::{filter_select, header_row, html as page, live_frame};
use super::{Asked, Body};
use crate::app::{App, Caller, RunError};
use crate::slots::Slot;
use crate::store::{ListedRun, RunQuery};

/// Rows on a page of the list.
const PAGE: usize = 50;

const STATUSES: [&str; 4] = ["running", "succeeded", "failed", "cancelled"];

/// `GET /`: the runs the caller may see.
pub(super) fn list(app: &App, asked: &Asked<'_>) -> Response<Body> {
    let query = run_query(asked);
    let workflows = app.listed_workflows(&asked.caller).unwrap_or_default();
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
            (filter_select(("status", "Status"), &STATUSES, query.status))
            (filter_select(("workflow", "Workflow"), &workflows, query.workflow))
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
pub(super) fn list_live(app: &App, asked: &Asked<'_>, live: &Live, slot: Slot) -> Response<Body> {
    let (app, caller) = (app.clone(), asked.caller.clone());
    let status = asked.query("status").map(str::to_owned);
    let workflow = asked.query("workflow").map(str::to_owned);
    let text = asked.query("q").map(str::to_owned);
    let view = format!("list {caller:?} {status:?} {workflow:?} {text:?}");
    live.stream(slot, view, move || {
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
    let rows = app.listed_runs(query, caller)?;
    let last = (rows.len() == PAGE).then(|| rows[PAGE - 1].id.clone());
    let table = html! {
        @if rows.is_empty() {
            p.empty { "No run matches." }
        } @else {
            table.runs {
                (header_row(&["Status", "Workflow", "Nodes", "Progress", "Started", "Took"]))
                tbody { @for row in &rows { (list_row(row)) } }
            }
        }
    };
    Ok((Region::of("live-runs", table), last))
}

fn list_row(row: &ListedRun) -> Markup {
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
