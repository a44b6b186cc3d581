//! The workflows: each one's description, inputs and DAG grouped by phase; a form made
//! from its inputs that starts a run, by the same call path as MCP's `run_workflow`
//! (validated, audited, under the run quota); and the files of the workflows folder left
//! out for their problems, each with its file, line and column.

use http::{Response, StatusCode};
use maud::{Markup, html};
use serde_json::{Map, Value};

use super::page::{frame, header_row, html as page};
use super::{Body, dag, form, see_other};
use crate::app::{App, Caller};
use crate::engine::question::Question;
use crate::engine::validate::inputs_schema;

/// The label the runs started here carry in place of an MCP task protocol.
const STARTED_HERE: &str = "dashboard";

/// `GET /workflows`.
pub(super) fn list(app: &App) -> Response<Body> {
    let rejected = app.rejected_workflows();
    let body = html! {
        h1 { "Workflows" }
        @if !rejected.is_empty() {
            section.problems aria-labelledby="left-out" {
                h2 #left-out { "Left out for their problems" }
                @for file in rejected {
                    h3 { (file.origin) }
                    ul.problem { @for problem in &file.problems.0 { li { (problem.to_string()) } } }
                }
            }
        }
        table.workflows {
            (header_row(&["Workflow", "Nodes", "Description"]))
            tbody {
                @for entry in app.workflows().entries() {
                    tr {
                        th scope="row" { a href=(format!("/workflows/{}", entry.def.name)) { (entry.def.name) } }
                        td.num { (entry.plan.nodes.len()) }
                        td { (entry.def.description) br; small { (entry.origin) } }
                    }
                }
            }
        }
    };
    page(StatusCode::OK, frame("Workflows", body))
}

/// `GET /workflows/{name}`: a workflow, and the form that starts a run of it.
pub(super) fn show(app: &App, name: &str) -> Response<Body> {
    workflow_page(app, name, &[], StatusCode::OK)
}

fn workflow_page(app: &App, name: &str, problems: &[String], status: StatusCode) -> Response<Body> {
    let Some(entry) = app.workflows().get(name) else {
        return page(StatusCode::NOT_FOUND, super::page::not_found());
    };
    let schema = inputs_schema(&entry.def);
    let pending = |_: &str| None;
    let body = html! {
        h1 { (entry.def.name) }
        p { (entry.def.description) }
        p { small { (entry.origin) } }
        section aria-labelledby="start" {
            h2 #start { "Start a run" }
            (start_form(name, &schema, problems))
        }
        section aria-labelledby="dag" {
            h2 #dag { "Nodes" }
            div.dag-frame { (dag::picture(&entry.plan, &pending)) }
        }
    };
    page(status, frame(name, body))
}

fn start_form(name: &str, schema: &Value, problems: &[String]) -> Markup {
    html! {
        form.question method="post" action=(format!("/workflows/{name}/start")) {
            (form::fields_of("input", schema))
            div.field {
                label for="inputs-json" { "Or every input as one JSON object (instead of the fields above)" }
                textarea #inputs-json name="inputs_json" rows="4" {}
            }
            @if !problems.is_empty() {
                ul.problem role="alert" { @for problem in problems { li { (problem) } } }
            }
            button type="submit" { "Start" }
        }
    }
}

/// `POST /workflows/{name}/start`: starts a run and shows it.
pub(super) fn start(
    app: &App,
    caller: &Caller,
    name: &str,
    posted: &[(String, String)],
) -> Response<Body> {
    let Some(entry) = app.workflows().get(name) else {
        return page(StatusCode::NOT_FOUND, super::page::not_found());
    };
    let json_given = posted
        .iter()
        .find(|(key, value)| key == "inputs_json" && !value.trim().is_empty());
    let inputs = match json_given {
        Some((_, text)) => match serde_json::from_str::<Map<String, Value>>(text) {
            Ok(inputs) => inputs,
            Err(error) => {
                let problem = format!("the inputs are not a JSON object: {error}");
                return workflow_page(app, name, &[problem], StatusCode::UNPROCESSABLE_ENTITY);
            }
        },
        None => {
            let inputs_form = Question::Input {
                message: String::new(),
                schema: inputs_schema(&entry.def),
            };
            match form::posted_answer(&inputs_form, posted) {
                Ok(Value::Object(inputs)) => inputs,
                Ok(_) => Map::new(),
                Err(problems) => {
                    return workflow_page(app, name, &problems, StatusCode::UNPROCESSABLE_ENTITY);
                }
            }
        }
    };
    let mut args = Map::new();
    args.insert("workflow".to_owned(), Value::String(name.to_owned()));
    args.insert("inputs".to_owned(), Value::Object(inputs));
    match app.start_run(args, caller, STARTED_HERE) {
        Ok(run_id) => see_other(&format!("/runs/{run_id}")),
        Err(message) => workflow_page(app, name, &[message], StatusCode::UNPROCESSABLE_ENTITY),
    }
}
