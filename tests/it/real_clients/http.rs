//! The same real clients over Streamable HTTP: the TypeScript SDK's
//! `StreamableHTTPClientTransport` in a 2025-11-25 session (plain calls, a task whose
//! question rides an SSE stream, a cancelled task), and rmcp's HTTP client in 2026-07-28
//! discover mode with a SEP-2663 task.

use rmcp::transport::StreamableHttpClientTransport;

use super::*;

use crate::support;

const TOKEN: &str = "ts-client-5e8b1d4a7c0f3e6b9d2a5c8f1e4b7a0d";

/// The sandbox's server serving HTTP on a loopback port of its own choosing.
pub(super) struct HttpServer {
    child: std::process::Child,
    pub(super) url: String,
}

impl HttpServer {
    fn start(sandbox: &Sandbox, extra: &[&OsStr]) -> HttpServer {
        HttpServer::start_line(sandbox, sandbox.server(), extra)
    }

    /// Runs server command line `line` (the binary, then its arguments) with `--http`;
    /// without `--http-tokens` in `extra`, with `--http-no-auth`.
    pub(super) fn start_line(
        sandbox: &Sandbox,
        line: Vec<OsString>,
        extra: &[&OsStr],
    ) -> HttpServer {
        let mut command = std_command(&line[0], sandbox);
        command
            .args(&line[1..])
            .args(["--http", "127.0.0.1:0"])
            .args(extra);
        if !extra.contains(&OsStr::new("--http-tokens")) {
            command.arg("--http-no-auth");
        }
        command
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start the server");
        let addr = support::listening_address(child.stderr.take().unwrap());
        HttpServer {
            child,
            url: format!("http://{addr}/mcp"),
        }
    }

    /// With a tokens file naming one principal, whose token is [`TOKEN`].
    fn with_token(sandbox: &Sandbox) -> HttpServer {
        let tokens = sandbox.path("tokens");
        std::fs::write(&tokens, format!("ts {TOKEN}\n")).unwrap();
        let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
        std::fs::set_permissions(&tokens, private).unwrap();
        HttpServer::start(sandbox, &["--http-tokens".as_ref(), tokens.as_os_str()])
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs scenario `scenario` of `ts_sdk.mjs` against `server`, with `token` as its bearer.
async fn ts_sdk_over_http(
    node: &Path,
    scenario: &str,
    server: &HttpServer,
    sandbox: &Sandbox,
    token: Option<&str>,
) -> Ran {
    run(ts_sdk_over_http_command(
        node, scenario, server, sandbox, token,
    ))
    .await
}

/// The command [`ts_sdk_over_http`] runs.
fn ts_sdk_over_http_command(
    node: &Path,
    scenario: &str,
    server: &HttpServer,
    sandbox: &Sandbox,
    token: Option<&str>,
) -> Command {
    let mut command = command(node, sandbox);
    command
        .arg(clients_dir().join("ts_sdk.mjs"))
        .arg(scenario)
        .arg("--url")
        .arg(&server.url);
    match token {
        Some(token) => command.env("TASKS_TEST_TOKEN", token),
        None => command.env_remove("TASKS_TEST_TOKEN"),
    };
    command
}

#[tokio::test]
async fn ts_sdk_over_http_adds_and_lists_todos_with_its_bearer_token() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let server = HttpServer::with_token(&sandbox);
    let ran = ts_sdk_over_http(&node, "todos", &server, &sandbox, Some(TOKEN))
        .await
        .succeeded();
    assert_eq!(ran.event("connected")["protocolVersion"], "2025-11-25");
    let added = &ran.event("added")["result"]["structuredContent"];
    assert_eq!(added["data"]["title"], "over HTTP", "{added}");
    let listed = &ran.event("listed")["result"]["structuredContent"]["data"];
    assert_eq!(listed[0]["title"], "over HTTP", "{listed}");
    let audit = support::audit_rows(&sandbox.db);
    let principals: Vec<_> = audit.iter().map(|row| row.principal.as_deref()).collect();
    assert_eq!(principals, [Some("ts"), Some("ts")], "{audit:?}");

    let refused = ts_sdk_over_http(&node, "todos", &server, &sandbox, None).await;
    assert!(!refused.success, "a client without the token is refused");
    let fatal = refused.event("fatal");
    let message = fatal["message"].as_str().unwrap();
    assert!(message.contains("a bearer token is required"), "{fatal}");
}

#[tokio::test]
async fn ts_sdk_over_http_gets_a_prompt_reads_what_a_run_wrote_and_follows_a_run() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let server = HttpServer::start(&sandbox, &[]);
    let ran = ts_sdk_over_http(&node, "surface", &server, &sandbox, None)
        .await
        .succeeded();
    super::assert_used_the_surface(&ran);
}

#[tokio::test]
async fn py_sdk_over_http_gets_a_prompt_completes_its_argument_and_reads_what_a_run_wrote() {
    let Some(python) = installed(py_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let server = HttpServer::start(&sandbox, &[]);
    let mut command = command(&python, &sandbox);
    command
        .arg(clients_dir().join("py_sdk.py"))
        .arg("auto-surface")
        .arg("--url")
        .arg(&server.url);
    let ran = run(command).await.succeeded();
    super::assert_py_used_the_surface(&ran);
}

#[tokio::test]
async fn fastmcp_client_over_http_reads_the_adr_the_run_wrote() {
    let Some(python) = installed(super::fastmcp()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let server = HttpServer::start(&sandbox, &[]);
    let mut command = command(&python, &sandbox);
    command
        .arg(clients_dir().join("fastmcp_client.py"))
        .arg(super::adr_answers_up_front().to_string())
        .arg("--url")
        .arg(&server.url);
    let ran = run(command).await.succeeded();
    super::assert_fastmcp_read_the_adr(&ran);
}

#[tokio::test]
async fn inspector_cli_over_http_lists_prompts_and_reads_a_workflow_resource() {
    let Some(inspector) = installed(inspector()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let server = HttpServer::start(&sandbox, &[]);
    let listed = run(inspector.cli_url(
        &sandbox,
        "legacy",
        &server.url,
        &["--method", "prompts/list"],
    ))
    .await
    .succeeded()
    .json();
    let prompts = listed["result"]["prompts"].as_array().unwrap();
    assert!(prompts.iter().any(|p| p["name"] == "research"), "{listed}");
    let uri = "tasks://workflows/research/source.toml";
    let args = ["--method", "resources/read", "--uri", uri];
    let read = run(inspector.cli_url(&sandbox, "legacy", &server.url, &args))
        .await
        .succeeded()
        .json();
    let toml = read["result"]["contents"][0]["text"].as_str().unwrap();
    assert!(toml.contains("name = \"research\""), "{read}");
}

#[tokio::test]
async fn ts_sdk_over_http_streams_a_task_whose_question_rides_an_sse_stream() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let server = HttpServer::start(&sandbox, &[]);
    let ran = ts_sdk_over_http(&node, "task-stream", &server, &sandbox, None)
        .await
        .succeeded();
    super::assert_streamed_ask_task(&ran);
}

#[tokio::test]
async fn ts_sdk_over_http_cancels_a_waiting_task_and_a_second_cancel_is_invalid_params() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let server = HttpServer::start(&sandbox, &[]);
    let ran = ts_sdk_over_http(&node, "task-cancel", &server, &sandbox, None)
        .await
        .succeeded();
    super::assert_cancelled_ask_task(&ran);
}

#[tokio::test]
async fn ts_sdk_over_http_plain_call_is_asked_by_elicitation_on_its_own_stream() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let server = HttpServer::start(&sandbox, &[]);
    let ran = ts_sdk_over_http(&node, "direct-elicit", &server, &sandbox, None)
        .await
        .succeeded();
    super::assert_directly_asked_ask(&ran);
}

#[tokio::test]
async fn ts_sdk_over_http_is_asked_by_a_second_server_for_a_run_the_first_one_drives() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    // Two servers on one database; the client creates the task on the first and asks the
    // second for its result.
    let first = HttpServer::start(&sandbox, &[]);
    let second = HttpServer::start(&sandbox, &[]);
    let mut command = ts_sdk_over_http_command(&node, "task-elsewhere", &first, &sandbox, None);
    command.env("TASKS_TEST_URL_B", &second.url);
    let ran = run(command).await.succeeded();

    let task = &ran.event("taskCreated")["task"];
    let task_id = task["taskId"].as_str().unwrap();
    assert_eq!(task["status"], "working");
    let elicitation = ran.event("elicitation");
    assert_eq!(elicitation["via"], "second", "{elicitation}");
    assert_eq!(elicitation["message"], "Approve elsewhere?");
    assert_eq!(elicitation["relatedTask"], json!({ "taskId": task_id }));

    let result = &ran.event("result")["result"];
    assert_eq!(result["isError"], false, "{result}");
    let report = super::report(result);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["nodes"]["approve"]["output"], json!({ "ok": true }));
    assert_eq!(ran.event("getTask")["task"]["status"], "completed");
    let todos = support::task_titles(&sandbox.db);
    assert_eq!(todos, ["approved elsewhere"], "made once");
}

#[tokio::test]
async fn rmcp_http_client_in_2026_07_28_mode_answers_a_sep_2663_task_by_update() {
    let sandbox = Sandbox::for_clients();
    let server = HttpServer::start(&sandbox, &[]);
    let capabilities = ClientCapabilities::builder()
        .enable_elicitation()
        .enable_tasks()
        .build();
    let transport = StreamableHttpClientTransport::from_uri(server.url.as_str());
    let client = discover(transport, capabilities, &|| String::new()).await;

    let task_id = call_ask(&client, "http").await;
    let asking = poll_until(&client, &task_id, TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = &asking.task.payload else {
        panic!("an input_required task inlines its requests: {asking:?}");
    };
    let key = input_requests.keys().next().expect("one question").clone();
    let answers = BTreeMap::from([(key, json!({"action": "accept", "content": {"ok": true}}))]);
    let result = update_until_completed(&client, &task_id, answers).await;
    let report = report(&result);
    assert_eq!(report["nodes"]["todo"]["output"]["title"], "approved http");

    tokio::time::timeout(DEADLINE, client.cancel())
        .await
        .expect("the client shuts down in time")
        .expect("the client task ends cleanly");
}
