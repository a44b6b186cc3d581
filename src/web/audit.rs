//! The audit log: every call, newest first, filtered by tool, outcome, principal and run,
//! a page at a time; and, on request, whether its hash chain verifies. A principal reads
//! the rows of its own calls, the local user every row.

use http::{Response, StatusCode};
use maud::{Markup, html};

use super::page::{filter_select, frame, header_row, html as page};
use super::{Asked, Body};
use crate::app::App;
use crate::store::{AuditQuery, AuditRow};

/// Rows on a page.
const PAGE: usize = 100;

const OUTCOMES: [&str; 4] = ["ok", "rejected", "not_found", "error"];

/// The most of a row's arguments the table shows.
const ARGS_SHOWN: usize = 160;

/// `GET /audit`, and with `verify=1`, the chain's verification above the rows.
pub(super) fn list(app: &App, asked: &Asked<'_>) -> Response<Body> {
    let query = AuditQuery {
        tool: asked.query("tool"),
        outcome: asked.query("outcome").filter(|o| OUTCOMES.contains(o)),
        principal: asked.query("principal"),
        run_id: asked.query("run"),
        before: asked.query("before").and_then(|b| b.parse().ok()),
        limit: PAGE,
    };
    let rows = match app.listed_audit(&query, &asked.caller) {
        Ok(rows) => rows,
        Err(error) => {
            let body = html! { h1 { "Audit log" } p.problem { (error.to_string()) } };
            return page(StatusCode::INTERNAL_SERVER_ERROR, frame("Audit log", body));
        }
    };
    let verified = asked.query("verify").map(|_| app.verify_audit());
    let older = (rows.len() == PAGE).then(|| older_link(asked, rows[PAGE - 1].id));
    let body = html! {
        h1 { "Audit log" }
        form.filters method="get" action="/audit" {
            label for="tool" { "Tool" }
            input #tool type="text" name="tool" value=[query.tool];
            (filter_select(("outcome", "Outcome"), &OUTCOMES, query.outcome))
            label for="principal" { "Principal" }
            input #principal type="text" name="principal" value=[query.principal];
            label for="run" { "Run" }
            input #run type="text" name="run" value=[query.run_id];
            button type="submit" { "Filter" }
        }
        p {
            @match &verified {
                None => a href="/audit?verify=1" { "Verify the hash chain" },
                Some(Ok((true, summary))) => span.note role="status" { "The chain verifies: " (summary) },
                Some(Ok((false, summary))) => span.problem role="alert" { (summary) },
                Some(Err(error)) => span.problem role="alert" { (error.to_string()) },
            }
        }
        (table(&rows))
        @if let Some(older) = older { p { a href=(older) { "Older rows" } } }
    };
    page(StatusCode::OK, frame("Audit log", body))
}

fn table(rows: &[AuditRow]) -> Markup {
    html! {
        @if rows.is_empty() {
            p.empty { "No row matches." }
        } @else {
            table.audit {
                (header_row(&["#", "At", "Tool", "Outcome", "Principal", "Run", "Arguments"]))
                tbody {
                    @for row in rows {
                        tr {
                            td.num { (row.id) }
                            td { (row.at) }
                            td { (row.tool) @if let Some(node) = &row.node_id { br; small { "node " (node) } } }
                            td { span class=(format!("badge outcome-{}", row.outcome)) { (row.outcome) } }
                            td { (row.principal.as_deref().unwrap_or("")) }
                            td {
                                @if let Some(run) = &row.run_id {
                                    // A direct todo call's one-node run keeps no record to link to.
                                    @if row.node_id.as_deref() == Some(row.tool.as_str()) { small.id { (run) } }
                                    @else { a.id href=(format!("/runs/{run}")) { (run) } }
                                }
                            }
                            td { code { (cut(&row.args)) } }
                        }
                    }
                }
            }
        }
    }
}

/// The link to the rows older than `last`, under the same filters.
fn older_link(asked: &Asked<'_>, last: i64) -> String {
    let mut url = form_urlencoded::Serializer::new(String::from("/audit?"));
    for key in ["tool", "outcome", "principal", "run"] {
        if let Some(value) = asked.query(key) {
            url.append_pair(key, value);
        }
    }
    url.append_pair("before", &last.to_string());
    url.finish()
}

fn cut(args: &str) -> String {
    match args.char_indices().nth(ARGS_SHOWN) {
        Some((at, _)) => format!("{}…", &args[..at]),
        None => args.to_owned(),
    }
}
