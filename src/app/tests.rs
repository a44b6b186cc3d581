//! The application's own tests, on the application `serve` opens (a database in memory):
//! the workflow and run tools check their arguments against the schemas they publish.

use serde_json::{Map, Value, json};

use super::{App, Caller, CallerChannels};

async fn call(app: &App, tool: &str, args: Value) -> Value {
    let Value::Object(args) = args else {
        panic!("arguments are an object");
    };
    let answer = app
        .call(tool, args, &Caller::default(), CallerChannels::default())
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

/// Replaces what changes from run to run (ids, times, delays) with placeholders, so that
/// a snapshot compares what a run's report says, byte for byte.
fn steady(value: &mut Value) {
    const VOLATILE: [&str; 15] = [
        "run_id",
        "runId",
        "task_id",
        "taskId",
        "createdAt",
        "completedAt",
        "updatedAt",
        "created_at",
        "updated_at",
        "finished_at",
        "started_at",
        "failed_at",
        "retry_at",
        "retry_delay_ms",
        "due",
    ];
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if VOLATILE.contains(&key.as_str()) && !item.is_null() {
                    *item = json!(format!("<{key}>"));
                } else {
                    steady(item);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(steady),
        _ => {}
    }
}

/// `get_run` and `list_runs` answer a run's report as they always have: one run of every
/// kind of node (a value, a render, a fan-out, a todo tool, a tool that fails, a wait that
/// times out and is retried, a node skipped by its condition, one skipped after a
/// failure), compared byte
/// for byte with `tests/snapshots/get_run.json` (`UPDATE_SNAPSHOTS=1` writes it anew).
#[tokio::test]
async fn get_run_and_list_runs_answer_a_runs_report_as_its_snapshot() {
    const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/get_run.json");
    let app = App::in_memory();
    let definition = json!({
        "name": "snapshot",
        "inputs": {"who": {"type": "string", "default": "world"}},
        "nodes": {
            "greet": {"render": "hello {{ inputs.who }}"},
            "count": {"value": {"expr": "[1, 2, 3]"}},
            "each": {"needs": ["count"], "for_each": "nodes.count.output",
                     "render": "item {{ item }}"},
            "todo": {"needs": ["greet"], "tool": "add_task",
                     "args": {"title": "{{ nodes.greet.output }}", "tags": ["snap"]}},
            "flaky": {"tool": "complete_task", "args": {"id": 987654321},
                      "retry": {"max_attempts": 2, "initial_delay": "10ms"},
                      "on_failure": "continue"},
            "after_flaky": {"needs": ["flaky"], "render": "not reached"},
            "slow": {"wait": "10s", "timeout": "30ms",
                     "retry": {"max_attempts": 2, "initial_delay": "20ms"},
                     "on_failure": "continue"},
            "never": {"when": "false", "render": "never"}
        },
        "output": {"greeting": "nodes.greet.output", "items": "nodes.each.output"}
    });
    let ran = call(&app, "run_workflow", json!({"definition": definition})).await;
    let run_id = ran["data"]["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a run in {ran}"))
        .to_owned();
    let mut got = call(&app, "get_run", json!({"run_id": run_id})).await;
    let mut listed = call(&app, "list_runs", json!({})).await;
    steady(&mut got);
    steady(&mut listed);
    let actual =
        serde_json::to_string_pretty(&json!({"get_run": got, "list_runs": listed})).unwrap() + "\n";
    if std::env::var("UPDATE_SNAPSHOTS").as_deref() == Ok("1") {
        std::fs::write(SNAPSHOT, &actual).expect("write the snapshot");
    }
    let expected = std::fs::read_to_string(SNAPSHOT).expect("the snapshot is committed");
    assert_eq!(actual, expected, "get_run's answer changed");
}

/// A run is recorded before its task first runs: a cancel that comes in between (a person
/// clicks Cancel as soon as the run's page shows it running) finds it, and the run ends
/// cancelled when its task runs, not after its work or the next renewal of the leases.
#[tokio::test(start_paused = true)]
async fn a_run_cancelled_before_its_task_first_runs_ends_cancelled() {
    use std::sync::Arc;

    use crate::engine::plan::Plan;
    use crate::engine::report::RunStatus;
    use crate::engine::{RunOptions, loader};

    let app = App::in_memory();
    let definition = loader::parse_toml("slow.toml", "slow", "[nodes.sleep]\nwait = \"60s\"\n")
        .expect("the definition decodes");
    let plan = Arc::new(Plan::new(Arc::new(definition)));
    let options = RunOptions {
        record: true,
        ..RunOptions::default()
    };
    // On this test's one thread, the run's task has not run yet when the cancel comes.
    let handle = app.engine().start(plan, Map::new(), options);
    let cancelled = app.cancel_run(&handle.run_id, &Caller::default()).await;
    assert!(cancelled.is_ok(), "{cancelled:?}");
    let report = handle.join.await.expect("the run's task ends");
    assert_eq!(report.status, RunStatus::Cancelled, "{report:?}");
    assert_eq!(
        app.registry.run_status(&handle.run_id).unwrap().as_deref(),
        Some("cancelled")
    );
}
