//! The same real clients over Streamable HTTP: the TypeScript SDK's
//! `StreamableHTTPClientTransport` in a 2025-11-25 session (plain calls, a task whose
//! question rides an SSE stream, a cancelled task, two servers on one database), the
//! Python SDK and FastMCP's client (the workflows' memory too), the Inspector's CLI, and
//! rmcp's HTTP client in 2026-07-28 discover mode with a SEP-2663 task.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::process::Stdio;

use rmcp::model::{ClientCapabilities, TaskPayload, TaskStatus};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

use super::cases::{Seen, real_client_cases};
use super::checks::{
    assert_cancelled_ask_task, assert_directly_asked_ask, assert_fastmcp_read_the_adr,
    assert_py_used_the_surface, assert_streamed_ask_task, assert_used_the_surface, report,
};
use super::clients::{DEADLINE, installed, run, std_command};
use super::inspector::inspector;
use super::rmcp::{call_ask, discover, poll_until, update_until_completed};
use super::workflows::assert_remembered;
use crate::support::{self, Sandbox};

/// The bearer token of the one principal of [`HttpServer::with_token`].
pub(super) const TOKEN: &str = "ts-client-5e8b1d4a7c0f3e6b9d2a5c8f1e4b7a0d";

/// The sandbox's server serving HTTP on a loopback port of its own choosing.
pub(super) struct HttpServer {
    child: std::process::Child,
    pub(super) url: String,
}

impl HttpServer {
    pub(super) fn start(sandbox: &Sandbox, extra: &[&OsStr]) -> HttpServer {
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
    pub(super) fn with_token(sandbox: &Sandbox) -> HttpServer {
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

real_client_cases! {
    fn ts_sdk_over_http_adds_and_lists_todos_with_its_bearer_token {
        client: TsSdk,
        over: HttpWithToken,
        scenario: Named("todos"),
        expect: assert_added_and_listed_with_its_token_and_refused_without,
    }
    fn ts_sdk_over_http_gets_a_prompt_reads_what_a_run_wrote_and_follows_a_run {
        client: TsSdk,
        over: Http,
        scenario: Named("surface"),
        expect: |seen| assert_used_the_surface(&seen.ran),
    }
    fn ts_sdk_over_http_streams_a_task_whose_question_rides_an_sse_stream {
        client: TsSdk,
        over: Http,
        scenario: Named("task-stream"),
        expect: |seen| assert_streamed_ask_task(&seen.ran),
    }
    fn ts_sdk_over_http_cancels_a_waiting_task_and_a_second_cancel_is_invalid_params {
        client: TsSdk,
        over: Http,
        scenario: Named("task-cancel"),
        expect: |seen| assert_cancelled_ask_task(&seen.ran),
    }
    fn ts_sdk_over_http_plain_call_is_asked_by_elicitation_on_its_own_stream {
        client: TsSdk,
        over: Http,
        scenario: Named("direct-elicit"),
        expect: |seen| assert_directly_asked_ask(&seen.ran),
    }
    /// Two servers on one database; the client creates the task on the first and asks
    /// the second for its result.
    fn ts_sdk_over_http_is_asked_by_a_second_server_for_a_run_the_first_one_drives {
        client: TsSdk,
        over: TwoHttpServers,
        scenario: Named("task-elsewhere"),
        expect: assert_asked_by_the_second_server,
    }
    fn py_sdk_over_http_gets_a_prompt_completes_its_argument_and_reads_what_a_run_wrote {
        client: PySdk,
        over: Http,
        scenario: Named("auto-surface"),
        expect: |seen| assert_py_used_the_surface(&seen.ran),
    }
    fn ts_sdk_over_http_validates_adrs_in_a_plain_call_its_model_reviewing_each {
        client: TsSdk,
        over: Http,
        scenario: Named("direct:adr_validation"),
        setup: super::workflows::with_clean_adrs,
        expect: |seen| {
            let asked = super::workflows::questions(&seen.ran);
            let result = super::checks::result(&seen.ran);
            super::workflows::assert_adrs_validated_and_reviewed(&seen.sandbox, &result, &asked);
        },
    }
    fn fastmcp_client_over_http_validates_faulty_adrs_and_reads_the_report {
        client: FastMcp,
        over: Http,
        scenario: AdrValidation,
        setup: super::workflows::with_faulty_adrs,
        expect: super::workflows::assert_fastmcp_validated_the_adrs,
    }
    fn fastmcp_client_over_http_reads_the_adr_the_run_wrote {
        client: FastMcp,
        over: Http,
        scenario: AdrAnswersUpFront,
        expect: |seen| assert_fastmcp_read_the_adr(&seen.ran),
    }
    fn ts_sdk_over_http_remembers_the_readiness_trend_and_rates_a_troubleshooting_session {
        client: TsSdk,
        over: Http,
        scenario: Named("memory"),
        expect: |seen| assert_remembered(&seen.sandbox, &seen.ran),
    }
    fn fastmcp_client_over_http_remembers_the_readiness_trend_and_rates_a_troubleshooting_session {
        client: FastMcp,
        over: Http,
        scenario: Named("memory"),
        expect: |seen| assert_remembered(&seen.sandbox, &seen.ran),
    }
    fn ts_sdk_over_http_drafts_a_check_per_requirement_in_a_plain_call_and_writes_the_scripts {
        client: TsSdk,
        over: Http,
        scenario: Named("direct:adr_bootstrap_validation"),
        setup: super::workflows::with_accepted_adrs,
        expect: |seen| {
            let asked = super::workflows::questions(&seen.ran);
            let drafted = asked.iter().filter(|(_, a)| a == "draft check").count();
            assert_eq!(drafted, 3, "{asked:?}");
            let result = super::checks::result(&seen.ran);
            let output = super::workflows::succeeded_output(&result);
            super::workflows::assert_bootstrap_scripts_written(&seen.sandbox, output);
        },
    }
    fn fastmcp_client_over_http_writes_the_bootstrap_scripts_with_every_check_up_front {
        client: FastMcp,
        over: Http,
        scenario: Named(super::BOOTSTRAP_CHECKS_UP_FRONT),
        setup: super::workflows::with_accepted_adrs,
        expect: |seen| {
            let output = &seen.ran.event("output")["output"];
            super::workflows::assert_bootstrap_scripts_written(&seen.sandbox, output);
        },
    }
    fn fastmcp_client_over_http_runs_the_bootstrap_loop_with_every_answer_up_front {
        client: FastMcp,
        over: Http,
        scenario: BootstrapAnswersUpFront,
        expect: super::workflows::assert_fastmcp_ran_the_bootstrap_loop,
    }
    fn ts_sdk_over_http_streams_the_bootstrap_loop_as_a_task_pasting_each_run_of_the_script {
        client: TsSdk,
        over: Http,
        scenario: Named("stream:bootstrap_validation_loop"),
        expect: |seen| {
            let asked = super::workflows::questions(&seen.ran);
            let result = super::checks::result(&seen.ran);
            super::workflows::assert_bootstrap_looped_asking(&seen.sandbox, &result, &asked);
        },
    }
}

/// What the TypeScript SDK's `todos` scenario must have seen with its bearer token (a
/// todo added and listed, each call audited as its principal's), and without it.
fn assert_added_and_listed_with_its_token_and_refused_without(seen: &Seen) {
    let Seen {
        sandbox,
        ran,
        without_token,
    } = seen;
    assert_eq!(ran.event("connected")["protocolVersion"], "2025-11-25");
    let added = &ran.event("added")["result"]["structuredContent"];
    assert_eq!(added["data"]["title"], "over HTTP", "{added}");
    let listed = &ran.event("listed")["result"]["structuredContent"]["data"];
    assert_eq!(listed[0]["title"], "over HTTP", "{listed}");
    let audit = support::audit_rows(&sandbox.db);
    let principals: Vec<_> = audit.iter().map(|row| row.principal.as_deref()).collect();
    assert_eq!(principals, [Some("ts"), Some("ts")], "{audit:?}");

    let refused = without_token
        .as_ref()
        .expect("the client ran again without its token");
    assert!(!refused.success, "a client without the token is refused");
    let fatal = refused.event("fatal");
    let message = fatal["message"].as_str().unwrap();
    assert!(message.contains("a bearer token is required"), "{fatal}");
}

/// What the TypeScript SDK's `task-elsewhere` scenario must have seen: the question of the
/// task the first server drives, asked through the second, and its todo made once.
fn assert_asked_by_the_second_server(seen: &Seen) {
    let (sandbox, ran) = (&seen.sandbox, &seen.ran);
    let task = &ran.event("taskCreated")["task"];
    let task_id = task["taskId"].as_str().unwrap();
    assert_eq!(task["status"], "working");
    let elicitation = ran.event("elicitation");
    assert_eq!(elicitation["via"], "second", "{elicitation}");
    assert_eq!(elicitation["message"], "Approve elsewhere?");
    assert_eq!(elicitation["relatedTask"], json!({ "taskId": task_id }));

    let result = &ran.event("result")["result"];
    assert_eq!(result["isError"], false, "{result}");
    let report = report(result);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["nodes"]["approve"]["output"], json!({ "ok": true }));
    assert_eq!(ran.event("getTask")["task"]["status"], "completed");
    let todos = support::task_titles(&sandbox.db);
    assert_eq!(todos, ["approved elsewhere"], "made once");
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
async fn rmcp_http_client_in_2026_07_28_mode_answers_a_sep_2663_task_by_update() {
    let sandbox = Sandbox::for_clients();
    let server = HttpServer::start(&sandbox, &[]);
    let capabilities = ClientCapabilities::builder()
        .enable_elicitation()
        .enable_tasks()
        .build();
    crate::support::install_tls_provider();
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
