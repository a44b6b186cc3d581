//! The workflow tools end to end over stdio: `list_workflows`, `run_workflow`, workflows
//! published as tools of their own, progress notifications and cancellation.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_task_server::store::AuditRow;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ProgressNotificationParam, Request,
    ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};

use crate::support::{
    Server, TempDb, audit_rows, call, expect_error, expect_ok, server_command, task_titles,
};

/// How long a wait that should end at once may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(10);

/// The release checklist's arguments for `run_workflow`, with two steps.
fn release_args(version: &str) -> Value {
    json!({
        "workflow": "release_checklist",
        "inputs": { "version": version, "steps": ["Freeze", "Tag"] }
    })
}

/// The envelope of a workflow run that did not succeed: `(code, message, report)`, after
/// checking it is carried as structured content and as the same JSON text, with `isError`.
fn run_failure(result: &CallToolResult) -> (String, String, Value) {
    let wire = serde_json::to_value(result).expect("a result serialises");
    assert_eq!(result.is_error, Some(true), "{wire:#}");
    let structured = wire["structuredContent"].clone();
    let text = wire["content"][0]["text"].as_str().expect("a text block");
    assert_eq!(
        serde_json::from_str::<Value>(text).expect("text content is JSON"),
        structured
    );
    let mut keys: Vec<&String> = structured.as_object().expect("an object").keys().collect();
    keys.sort();
    assert_eq!(keys, ["data", "error", "ok"], "{structured:#}");
    assert_eq!(structured["ok"], false);
    let error = &structured["error"];
    (
        error["code"].as_str().expect("a code").to_owned(),
        error["message"].as_str().expect("a message").to_owned(),
        structured["data"].clone(),
    )
}

/// The rows of `tool` in the audit log.
fn rows_of<'r>(rows: &'r [AuditRow], tool: &str) -> Vec<&'r AuditRow> {
    rows.iter().filter(|row| row.tool == tool).collect()
}

#[tokio::test]
async fn list_workflows_describes_release_checklist_and_its_inputs() {
    let server = Server::start().await;
    let data = expect_ok(&call(&server.client, "list_workflows", json!({})).await);
    server.stop().await;

    let release = data
        .as_array()
        .expect("a list of workflows")
        .iter()
        .find(|w| w["name"] == "release_checklist")
        .unwrap_or_else(|| panic!("no release_checklist in {data:#}"));
    assert_eq!(release["nodeCount"], 2);
    assert_eq!(release["exposedAsTool"], false);
    assert!(
        release["description"]
            .as_str()
            .is_some_and(|d| d.contains("release checklist")),
        "{release:#}"
    );
    let inputs = &release["inputs"];
    assert_eq!(inputs["type"], "object");
    assert_eq!(inputs["additionalProperties"], false);
    assert_eq!(inputs["required"], json!(["version"]));
    assert_eq!(inputs["properties"]["version"]["type"], "string");
    let steps = &inputs["properties"]["steps"];
    assert_eq!(steps["type"], "array");
    assert!(
        steps["default"].as_array().is_some_and(|d| !d.is_empty()),
        "steps has a default list: {steps}"
    );
}

#[tokio::test]
async fn list_workflows_rejects_an_unexpected_argument_and_audits_it() {
    let server = Server::start().await;
    let message = expect_error(
        &call(&server.client, "list_workflows", json!({"verbose": true})).await,
        "invalid_input",
    );
    assert!(message.contains("verbose"), "{message}");
    let stopped = server.stop().await;

    let rows = audit_rows(&stopped.db);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(
        (rows[0].tool.as_str(), rows[0].outcome.as_str()),
        ("list_workflows", "rejected")
    );
    assert_eq!(rows[0].args, r#"{"verbose":true}"#);
}

#[tokio::test]
async fn run_workflow_by_name_returns_the_report_and_audits_the_run_and_its_tool_calls() {
    let server = Server::start().await;
    let args = release_args("3.1");
    let report = expect_ok(&call(&server.client, "run_workflow", args.clone()).await);
    let stopped = server.stop().await;

    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["workflow"], "release_checklist");
    let run_id = report["run_id"].as_str().expect("a run id");
    let todos = report["output"]["todos"].as_array().expect("todos");
    let titles: Vec<&str> = todos.iter().map(|t| t["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["3.1: Freeze", "3.1: Tag"]);
    assert_eq!(report["nodes"]["steps"]["status"], "succeeded");
    assert_eq!(report["nodes"]["steps"]["output"], json!(todos));
    assert_eq!(report["nodes"]["summary"]["status"], "succeeded");
    assert_eq!(
        report["output"]["summary"],
        report["nodes"]["summary"]["output"]
    );
    assert_eq!(task_titles(&stopped.db), titles);

    let rows = audit_rows(&stopped.db);
    assert_eq!(rows.len(), 3, "{rows:#?}");
    let run = rows_of(&rows, "run_workflow");
    assert_eq!(run.len(), 1, "{rows:#?}");
    assert_eq!(run[0].outcome, "ok");
    assert_eq!(run[0].run_id.as_deref(), Some(run_id));
    assert_eq!(run[0].node_id, None);
    assert_eq!(
        serde_json::from_str::<Value>(&run[0].args).unwrap(),
        args,
        "the run's arguments are audited"
    );
    let adds = rows_of(&rows, "add_task");
    assert_eq!(adds.len(), 2, "one add_task row per step: {rows:#?}");
    for row in adds {
        assert_eq!(row.outcome, "ok");
        assert_eq!(row.run_id.as_deref(), Some(run_id));
        assert_eq!(row.node_id.as_deref(), Some("steps"));
        assert!(
            row.id < run[0].id,
            "tool calls are audited before the run ends"
        );
    }
}

/// Records the `notifications/progress` the server sends, in the order they are handled.
#[derive(Clone, Default)]
struct ProgressLog(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl ProgressLog {
    fn snapshot(&self) -> Vec<ProgressNotificationParam> {
        self.0.lock().unwrap().clone()
    }
}

impl ClientHandler for ProgressLog {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }
}

/// A `tools/call` request for `name` with `args`.
fn call_request(name: &str, args: Value) -> ClientRequest {
    let Value::Object(args) = args else {
        panic!("tool arguments must be an object");
    };
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args);
    ClientRequest::CallToolRequest(Request::new(params))
}

#[tokio::test]
async fn progress_notifications_for_a_run_arrive_before_its_response() {
    let temp = TempDb::new();
    let mut command = server_command(temp.dir.path());
    command.arg("--db").arg(&temp.path);
    let log = ProgressLog::default();
    let server = Server::spawn_with(command, temp.path.clone(), log.clone()).await;

    // The first node finishes a good while before the last one, so its notification
    // has been handled by the time the response comes, however the client schedules it.
    let definition = json!({
        "nodes": {
            "first": { "render": "one" },
            "pause": { "wait": "300ms", "needs": ["first"] },
            "last": { "render": "{{ nodes.first.output }} done", "needs": ["pause"] }
        }
    });
    // rmcp puts a progress token in the `_meta` of every request it sends.
    let handle = server
        .client
        .send_cancellable_request(
            call_request("run_workflow", json!({ "definition": definition })),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("the request is sent");
    let token = handle.progress_token.clone();
    let response = tokio::time::timeout(DEADLINE, handle.await_response())
        .await
        .expect("the run ends in time")
        .expect("tools/call succeeds");
    let before_response = log.snapshot();
    let ServerResult::CallToolResult(result) = response else {
        panic!("not a tool result: {response:?}");
    };
    let report = expect_ok(&result);
    assert_eq!(report["status"], "succeeded");
    assert!(
        !before_response.is_empty(),
        "no progress notification before the response"
    );

    // The rest were sent before the response too; give the client a moment to handle them.
    let started = Instant::now();
    let mut seen = log.snapshot();
    while seen.last().is_none_or(|p| p.progress < 3.0) && started.elapsed() < DEADLINE {
        tokio::time::sleep(Duration::from_millis(10)).await;
        seen = log.snapshot();
    }
    server.stop().await;

    for progress in &seen {
        assert_eq!(progress.progress_token, token, "{progress:?}");
        assert_eq!(progress.total, Some(3.0), "total is the node count");
        assert!(
            progress
                .message
                .as_deref()
                .is_some_and(|m| m.contains("node `"))
        );
    }
    let values: Vec<f64> = seen.iter().map(|p| p.progress).collect();
    assert!(
        values.windows(2).all(|pair| pair[0] <= pair[1]),
        "progress goes down: {values:?}"
    );
    assert!(values[0] >= 1.0, "{values:?}");
    assert_eq!(values.last(), Some(&3.0), "{values:?}");
}

#[tokio::test]
async fn an_inline_definition_with_several_problems_is_rejected_naming_each() {
    let server = Server::start().await;
    let definition = json!({
        "inputs": { "version": { "type": "string" } },
        "nodes": {
            "x": { "tool": "add_tsk", "args": { "title": "{{ inputs.versoin }}" } },
            "y": { "render": "y", "needs": ["nowhere"] },
            "p": { "render": "p", "needs": ["q"] },
            "q": { "render": "q", "needs": ["p"] }
        }
    });
    let args = json!({ "definition": definition });
    let message = expect_error(
        &call(&server.client, "run_workflow", args.clone()).await,
        "invalid_input",
    );
    for expected in [
        "nodes.x.tool: unknown tool `add_tsk`",
        "nodes.x.args.title: unknown input `inputs.versoin`",
        "nodes.y.needs[0]: unknown node `nowhere`",
        "nodes.p.needs: needs form a cycle",
    ] {
        assert!(message.contains(expected), "{expected:?} not in {message}");
    }

    let mut with_unknown_key = definition.clone();
    with_unknown_key["nodes"]["y"]["colour"] = json!("red");
    let message = expect_error(
        &call(
            &server.client,
            "run_workflow",
            json!({ "definition": with_unknown_key }),
        )
        .await,
        "invalid_input",
    );
    for expected in [
        "nodes.y.colour: unknown key",
        "nodes.x.tool",
        "nodes.p.needs",
    ] {
        assert!(message.contains(expected), "{expected:?} not in {message}");
    }
    let stopped = server.stop().await;

    let rows = audit_rows(&stopped.db);
    let outcomes: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.tool.as_str(), r.outcome.as_str()))
        .collect();
    assert_eq!(
        outcomes,
        [("run_workflow", "rejected"), ("run_workflow", "rejected")]
    );
    assert_eq!(serde_json::from_str::<Value>(&rows[0].args).unwrap(), args);
}

#[tokio::test]
async fn an_inline_write_file_node_is_refused() {
    let server = Server::start().await;
    let definition = json!({
        "nodes": { "w": { "write_file": { "path": "escape.txt", "content": "x" } } }
    });
    let message = expect_error(
        &call(
            &server.client,
            "run_workflow",
            json!({ "definition": definition }),
        )
        .await,
        "invalid_input",
    );
    assert!(
        message.contains("nodes.w.write_file: write_file is not allowed in inline definitions"),
        "{message}"
    );
    let stopped = server.stop().await;
    let cwd = stopped.db.parent().unwrap();
    assert!(!cwd.join("escape.txt").exists(), "nothing was written");
}

#[tokio::test]
async fn inline_reads_of_secrets_are_refused_and_every_reading_node_is_named() {
    let server = Server::start().await;
    // The workspace defaults to the server's working directory, where secrets may live.
    let cwd = server.db.parent().unwrap().to_path_buf();
    std::fs::write(cwd.join(".env"), "API_KEY=hunter2\n").unwrap();
    std::fs::write(cwd.join("tokens.txt"), "alice s3cr3t-token\n").unwrap();
    let definition = json!({ "nodes": {
        "env": { "read_file": ".env" },
        "tokens": { "read_file": { "path": "tokens.txt", "max_bytes": 100 } },
        "look": { "list_dir": "." },
        "say": { "render": "{{ nodes.env.output.content }}", "needs": ["env"] }
    } });
    let args = json!({ "definition": definition });
    let message = expect_error(
        &call(&server.client, "run_workflow", args.clone()).await,
        "invalid_input",
    );
    for expected in [
        "nodes.env.read_file: read_file is not allowed in inline definitions",
        "nodes.tokens.read_file: read_file is not allowed in inline definitions",
        "nodes.look.list_dir: list_dir is not allowed in inline definitions",
    ] {
        assert!(message.contains(expected), "{expected:?} not in {message}");
    }
    assert!(!message.contains("hunter2") && !message.contains("s3cr3t"));
    let stopped = server.stop().await;
    let rows = audit_rows(&stopped.db);
    let outcomes: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.tool.as_str(), r.outcome.as_str()))
        .collect();
    assert_eq!(outcomes, [("run_workflow", "rejected")]);
    assert!(rows.iter().all(|r| r.run_id.is_none()), "no run started");
}

#[tokio::test]
async fn with_inline_workflows_off_a_definition_is_refused_and_audited() {
    let server =
        Server::start_with_args(&[OsStr::new("--inline-workflows"), OsStr::new("off")]).await;
    let definition = json!({ "nodes": { "a": { "render": "hello" } } });
    let args = json!({ "definition": definition });
    let message = expect_error(
        &call(&server.client, "run_workflow", args.clone()).await,
        "invalid_input",
    );
    assert!(
        message.contains("inline workflow definitions are turned off")
            && message.contains("--inline-workflows off"),
        "{message}"
    );
    // Installed workflows still run.
    expect_ok(&call(&server.client, "run_workflow", release_args("1.0.0")).await);
    let stopped = server.stop().await;
    let rows = audit_rows(&stopped.db);
    assert_eq!(rows[0].tool, "run_workflow");
    assert_eq!(rows[0].outcome, "rejected");
    assert_eq!(serde_json::from_str::<Value>(&rows[0].args).unwrap(), args);
    assert!(
        rows.iter()
            .any(|r| r.tool == "run_workflow" && r.outcome == "ok"),
        "{rows:?}"
    );
}

#[tokio::test]
async fn run_workflow_refuses_unknown_names_and_ambiguous_requests() {
    let server = Server::start().await;
    let client = &server.client;
    let message = expect_error(
        &call(client, "run_workflow", json!({"workflow": "no_such_flow"})).await,
        "not_found",
    );
    assert!(message.contains("no_such_flow"), "{message}");

    let both = json!({
        "workflow": "release_checklist",
        "definition": { "nodes": { "a": { "render": "a" } } }
    });
    let message = expect_error(&call(client, "run_workflow", both).await, "invalid_input");
    assert!(message.contains("workflow"), "{message}");

    let message = expect_error(
        &call(client, "run_workflow", json!({})).await,
        "invalid_input",
    );
    assert!(message.contains("workflow"), "{message}");

    let message = expect_error(
        &call(
            client,
            "run_workflow",
            json!({"workflow": "release_checklist", "inputs": {"steps": "Tag"}}),
        )
        .await,
        "invalid_input",
    );
    assert!(
        message.contains("the required input `version` is missing"),
        "{message}"
    );
    assert!(
        message.contains("input `steps` must be of type array"),
        "{message}"
    );
    let stopped = server.stop().await;

    let outcomes: Vec<String> = audit_rows(&stopped.db)
        .into_iter()
        .map(|r| format!("{} {}", r.tool, r.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            "run_workflow not_found",
            "run_workflow rejected",
            "run_workflow rejected",
            "run_workflow rejected"
        ]
    );
    assert!(task_titles(&stopped.db).is_empty());
}

#[tokio::test]
async fn a_failing_inline_run_is_run_failed_with_the_node_error_in_data() {
    let server = Server::start().await;
    let definition = json!({
        "nodes": {
            "finish": { "tool": "complete_task", "args": { "id": 999999 } },
            "after": { "render": "after", "needs": ["finish"] }
        }
    });
    let result = call(
        &server.client,
        "run_workflow",
        json!({ "definition": definition }),
    )
    .await;
    let (code, message, report) = run_failure(&result);
    let stopped = server.stop().await;

    assert_eq!(code, "run_failed");
    assert!(message.contains("finish"), "{message}");
    assert_eq!(report["status"], "failed");
    let finish = &report["nodes"]["finish"];
    assert_eq!(finish["status"], "failed");
    assert_eq!(finish["error"]["code"], "not_found");
    assert!(
        finish["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("999999")),
        "{finish}"
    );
    let after = &report["nodes"]["after"];
    assert_eq!(after["status"], "skipped", "{after}");
    assert_eq!(after["reason"], "upstream failed");

    let rows = audit_rows(&stopped.db);
    let run_id = report["run_id"].as_str().unwrap();
    let outcomes: Vec<(&str, &str, Option<&str>)> = rows
        .iter()
        .map(|r| (r.tool.as_str(), r.outcome.as_str(), r.run_id.as_deref()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("complete_task", "not_found", Some(run_id)),
            ("run_workflow", "error", Some(run_id))
        ]
    );
}

const GREET: &str = r#"description = "Greet someone"
expose_as_tool = true

[inputs.who]
type = "string"
description = "Who to greet"
required = true

[inputs.times]
type = "integer"
default = 1
enum = [1, 2]

[nodes.hello]
render = "hello {{ inputs.who }} x{{ inputs.times }}"

[output]
text = "nodes.hello.output"
"#;

/// Exposed, but named like a fixed tool: never published in its place.
const SHADOW: &str = r#"name = "add_task"
expose_as_tool = true

[nodes.a]
render = "a"
"#;

#[tokio::test]
async fn an_exposed_workflow_is_a_tool_of_its_own_and_a_broken_file_is_left_out() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("greet.toml"), GREET).unwrap();
    std::fs::write(folder.path().join("shadow.toml"), SHADOW).unwrap();
    let broken = folder.path().join("broken.toml");
    std::fs::write(&broken, "[nodes.a]\nrender = 5\n").unwrap();
    let server =
        Server::start_with_args(&[OsStr::new("--workflows"), folder.path().as_os_str()]).await;
    let client = &server.client;

    let tools = tokio::time::timeout(DEADLINE, client.list_all_tools())
        .await
        .expect("tools/list answers in time")
        .expect("tools/list succeeds");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "add_task",
            "list_tasks",
            "complete_task",
            "delete_task",
            "search_tasks",
            "list_workflows",
            "run_workflow",
            "list_runs",
            "get_run",
            "adr_bootstrap_validation",
            "adr_validation",
            "bootstrap_validation_loop",
            "deployment_readiness",
            "interactive_adr_planning",
            "research",
            "troubleshoot",
            "troubleshoot_outcome",
            "greet"
        ]
    );
    let greet = serde_json::to_value(tools.last().unwrap()).unwrap();
    assert_eq!(
        greet["inputSchema"],
        json!({
            "type": "object",
            "properties": {
                "who": { "type": "string", "description": "Who to greet" },
                "times": { "type": "integer", "default": 1, "enum": [1, 2] },
                "idempotency_key": {
                    "type": "string", "minLength": 1, "maxLength": 200,
                    "description": "Makes the call safe to retry: a call with the same key \
                                    and the same arguments returns the run the first one started."
                }
            },
            "required": ["who"],
            "additionalProperties": false
        })
    );
    assert!(
        greet["description"]
            .as_str()
            .is_some_and(|d| d.contains("Greet someone")),
        "{greet:#}"
    );
    assert_eq!(greet["annotations"]["destructiveHint"], true);

    let report = expect_ok(&call(client, "greet", json!({"who": "Ada", "times": 2})).await);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["output"]["text"], "hello Ada x2");
    let message = expect_error(
        &call(client, "greet", json!({"who": "Ada", "loud": true})).await,
        "invalid_input",
    );
    assert!(message.contains("loud"), "{message}");

    let listed = expect_ok(&call(client, "list_workflows", json!({})).await);
    let listed: Vec<(&str, bool)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["name"].as_str().unwrap(), w["exposedAsTool"] == true))
        .collect();
    assert_eq!(
        listed,
        [
            ("adr_bootstrap_validation", true),
            ("adr_check", false),
            ("adr_validation", true),
            ("bootstrap_iteration", false),
            ("bootstrap_validation_loop", true),
            ("deployment_readiness", true),
            ("interactive_adr_planning", true),
            ("release_checklist", false),
            ("research", true),
            ("troubleshoot", true),
            ("troubleshoot_outcome", true),
            ("greet", true),
            ("add_task", true)
        ]
    );
    let stopped = server.stop().await;

    let problem = format!(
        "{}:2:10: nodes.a.render: expected a string",
        broken.display()
    );
    assert!(
        stopped.stderr.contains(&problem),
        "stderr does not report {problem:?}:\n{}",
        stopped.stderr
    );
    let outcomes: Vec<String> = audit_rows(&stopped.db)
        .into_iter()
        .map(|r| format!("{} {}", r.tool, r.outcome))
        .collect();
    assert_eq!(
        outcomes,
        ["greet ok", "greet rejected", "list_workflows ok"]
    );
}

/// An inline workflow that would wait for 30 seconds.
fn sleeper() -> Value {
    json!({ "definition": { "nodes": { "sleep": { "wait": "30s" } } } })
}

/// Waits for the audit row of the `run_workflow` call, which is written when its run ends.
async fn run_workflow_row(db: &Path) -> AuditRow {
    let started = Instant::now();
    loop {
        if let Some(row) = audit_rows(db)
            .into_iter()
            .find(|r| r.tool == "run_workflow")
        {
            return row;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the run did not stop after the cancel"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// After a cancel, the run ends at once as an error, and the server keeps serving.
async fn assert_cancelled(server: Server, cancelled_at: Instant) {
    let row = run_workflow_row(&server.db).await;
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(5),
        "the run ended {:?} after the cancel",
        cancelled_at.elapsed()
    );
    assert_eq!(row.outcome, "error", "{row:?}");
    assert_eq!(serde_json::from_str::<Value>(&row.args).unwrap(), sleeper());

    let served = Instant::now();
    let todo = expect_ok(&call(&server.client, "add_task", json!({"title": "After"})).await);
    assert_eq!(todo["title"], "After");
    assert!(
        served.elapsed() < Duration::from_secs(2),
        "{:?}",
        served.elapsed()
    );
    server.stop().await;
}

#[tokio::test]
async fn dropping_a_pending_call_cancels_its_run() {
    let server = Server::start().await;
    let params = CallToolRequestParams::new("run_workflow")
        .with_arguments(sleeper().as_object().unwrap().clone());
    // rmcp sends notifications/cancelled when the call's future is dropped.
    let outcome =
        tokio::time::timeout(Duration::from_millis(300), server.client.call_tool(params)).await;
    assert!(outcome.is_err(), "the call ended on its own: {outcome:?}");
    assert_cancelled(server, Instant::now()).await;
}

#[tokio::test]
async fn cancelling_a_request_stops_its_run() {
    let server = Server::start().await;
    let handle = server
        .client
        .send_cancellable_request(
            call_request("run_workflow", sleeper()),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("the request is sent");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        audit_rows(&server.db).is_empty(),
        "the run is still going before the cancel"
    );
    handle
        .cancel(Some("the user changed their mind".into()))
        .await
        .expect("notifications/cancelled is sent");
    assert_cancelled(server, Instant::now()).await;
}
