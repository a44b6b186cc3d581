//! The todos everyone shares: listed, filtered and searched, completed, and deleted after
//! a confirmation step; each through the todo tool of the same name, so every action is
//! validated and audited exactly as over MCP.

use http::{Response, StatusCode};
use maud::{Markup, html};
use serde_json::{Map, Value, json};

use super::page::{filter_select, frame, header_row, html as page};
use super::{Asked, Body, see_other};
use crate::app::{App, Caller};

/// `GET /todos`: open, done or all, by tag, or a search of titles.
pub(super) async fn list(app: &App, asked: &Asked<'_>) -> Response<Body> {
    let status = asked
        .query("status")
        .filter(|s| matches!(*s, "open" | "done"));
    let tag = asked.query("tag");
    let search = asked.query("q");
    let (tool, args) = match search {
        Some(query) => ("search_tasks", json!({ "query": query })),
        None => {
            let mut filter = Map::new();
            if let Some(status) = status {
                filter.insert("status".to_owned(), json!(status));
            }
            if let Some(tag) = tag {
                filter.insert("tag".to_owned(), json!(tag));
            }
            ("list_tasks", json!({ "filter": filter }))
        }
    };
    let listed = call(app, &asked.caller, tool, args).await;
    let body = html! {
        h1 { "Todos" }
        form.filters method="get" action="/todos" {
            (filter_select(("status", "Status"), &["open", "done"], status))
            label for="tag" { "Tag" }
            input #tag type="text" name="tag" value=[tag];
            label for="q" { "Search titles" }
            input #q type="search" name="q" value=[search];
            button type="submit" { "Show" }
        }
        @match &listed {
            Ok(todos) => (table(todos)),
            Err(message) => p.problem role="alert" { (message) },
        }
    };
    let status_code = match listed {
        Ok(_) => StatusCode::OK,
        Err(_) => StatusCode::UNPROCESSABLE_ENTITY,
    };
    page(status_code, frame("Todos", body))
}

fn table(todos: &Value) -> Markup {
    let todos = todos.as_array().map(Vec::as_slice).unwrap_or_default();
    html! {
        @if todos.is_empty() {
            p.empty { "No todo matches." }
        } @else {
            table.todos {
                (header_row(&["#", "Title", "Status", "Tags", "Due", "Actions"]))
                tbody {
                    @for todo in todos {
                        @let id = todo["id"].as_u64().unwrap_or_default();
                        tr {
                            td.num { (id) }
                            td { (todo["title"].as_str().unwrap_or_default()) }
                            td { (todo["status"].as_str().unwrap_or_default()) }
                            td { @for tag in todo["tags"].as_array().into_iter().flatten() { span.tag { (tag.as_str().unwrap_or_default()) } " " } }
                            td { (todo["due"].as_str().unwrap_or_default()) }
                            td.actions {
                                @if todo["status"] == "open" {
                                    form method="post" action=(format!("/todos/{id}/complete")) {
                                        button type="submit" aria-label=(format!("Complete todo {id}")) { "Complete" }
                                    }
                                }
                                a href=(format!("/todos/{id}/delete")) aria-label=(format!("Delete todo {id}")) { "Delete…" }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `POST /todos/{id}/complete`.
pub(super) async fn complete(app: &App, caller: &Caller, id: &str) -> Response<Body> {
    let Ok(id) = id.parse::<u64>() else {
        return page(StatusCode::NOT_FOUND, super::page::not_found());
    };
    match call(app, caller, "complete_task", json!({ "id": id })).await {
        Ok(_) => see_other("/todos"),
        Err(message) => problem(StatusCode::UNPROCESSABLE_ENTITY, &message),
    }
}

/// `GET /todos/{id}/delete`: the confirmation step.
pub(super) fn confirm_delete(id: &str) -> Response<Body> {
    let Ok(id) = id.parse::<u64>() else {
        return page(StatusCode::NOT_FOUND, super::page::not_found());
    };
    let body = html! {
        h1 { "Delete todo " (id) "?" }
        p { "A deleted todo cannot be brought back." }
        form method="post" action=(format!("/todos/{id}/delete")) {
            input type="hidden" name="confirm" value="true";
            button type="submit" { "Delete it" }
            " " a href="/todos" { "Keep it" }
        }
    };
    page(StatusCode::OK, frame("Delete a todo", body))
}

/// `POST /todos/{id}/delete`: deletes once confirmed.
pub(super) async fn delete(
    app: &App,
    caller: &Caller,
    id: &str,
    posted: &[(String, String)],
) -> Response<Body> {
    let Ok(id) = id.parse::<u64>() else {
        return page(StatusCode::NOT_FOUND, super::page::not_found());
    };
    // Without the confirmation the tool refuses the call, and audits the refusal.
    let confirmed = posted.iter().any(|(k, v)| k == "confirm" && v == "true");
    let args = match confirmed {
        true => json!({ "id": id, "confirm": true }),
        false => json!({ "id": id }),
    };
    match call(app, caller, "delete_task", args).await {
        Ok(_) => see_other("/todos"),
        Err(message) => problem(StatusCode::UNPROCESSABLE_ENTITY, &message),
    }
}

/// A todo tool's call: its data, or its error's message.
async fn call(app: &App, caller: &Caller, tool: &str, args: Value) -> Result<Value, String> {
    let Value::Object(args) = args else {
        unreachable!("the arguments are an object")
    };
    app.call_todo(tool, args, caller)
        .await
        .map_err(|error| error.message)
}

fn problem(status: StatusCode, message: &str) -> Response<Body> {
    let body = html! {
        h1 { "Not done" }
        p.problem { (message) }
        p { a href="/todos" { "Back to the todos" } }
    };
    page(status, frame("Not done", body))
}
