//! The application's own tests, on the application `serve` opens (a database in memory):
//! the workflow and run tools check their arguments against the schemas they publish.

use serde_json::{Map, Value, json};

use super::{App, Caller, Sync};

async fn call(app: &App, tool: &str, args: Value) -> Value {
    let Value::Object(args) = args else {
        panic!("arguments are an object");
    };
    let answer = app
        .call(tool, args, &Caller::default(), Sync::default())
        .await;
    answer.expect("a published tool").body
}

fn message(body: &Value) -> &str {
    assert_eq!(body["ok"], false, "{body}");
    assert_eq!(body["error"]["code"], "invalid_input", "{body}");
    body["error"]["message"].as_str().unwrap()
}

#[tokio::test]
async fn run_workflow_names_every_problem_of_its_arguments_at_once() {
    let app = App::in_memory();
    let body = call(
        &app,
        "run_workflow",
        json!({"workflow": "", "definition": {}, "inputs": [], "extra": 1}),
    )
    .await;
    assert_eq!(
        message(&body),
        "invalid arguments: extra: unknown property; \
         workflow: must be 1 to 64 UTF-16 code units long (got 0); inputs: must be an object; \
         workflow: give either workflow or definition, not both"
    );
    let body = call(&app, "run_workflow", json!({})).await;
    assert_eq!(
        message(&body),
        "invalid arguments: workflow: is required (or give an inline definition)"
    );
}

#[tokio::test]
async fn the_run_tools_check_their_arguments_against_their_published_schemas() {
    let app = App::in_memory();
    let body = call(&app, "list_runs", json!({"status": "lost", "limit": 101})).await;
    let text = message(&body);
    assert!(
        text.starts_with("invalid arguments: status: must be one of"),
        "{text}"
    );
    assert!(text.contains("limit: must be"), "{text}");
    let body = call(&app, "get_run", json!({})).await;
    assert_eq!(message(&body), "invalid arguments: run_id: is required");
    let body = call(&app, "list_workflows", json!({"verbose": true})).await;
    assert_eq!(
        message(&body),
        "invalid arguments: verbose: unknown property"
    );
    // Within their schemas, they answer.
    let body = call(
        &app,
        "list_runs",
        json!({"status": "running", "limit": 100}),
    )
    .await;
    assert_eq!(body["ok"], true, "{body}");
    let listed = call(&app, "list_workflows", Value::Object(Map::new())).await;
    assert!(
        listed["data"]
            .as_array()
            .is_some_and(|list| !list.is_empty())
    );
}
