//! rmcp (Rust), this project's own MCP library, as a client in the 2026-07-28 era with
//! the tasks extension: tasks answered by `tasks/update` and cancelled, and the built-in
//! workflows started as tasks whose `inputRequests` it answers.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    ElicitResult, ElicitationAction, GetTaskParams, GetTaskResult, Implementation, InputRequest,
    ProtocolVersion, TaskPayload, TaskStatus, UpdateTaskParams,
};
#[allow(deprecated)] // rmcp deprecates sampling (SEP-2577); the ADR planner still asks for it.
use rmcp::model::{CreateMessageResult, SamplingMessage, SamplingMessageContentBlock};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::checks::report;
use super::clients::{DEADLINE, command};
use super::workflows::{
    ADR_TITLE, answer_for, assert_adr_planned, assert_asked_every_question,
    assert_readiness_checked, assert_research_reported, assert_troubleshooting_planned, draft_for,
    scenario,
};
use crate::support::Sandbox;

pub(super) type RmcpClient = RunningService<RoleClient, ClientConfig>;

/// Polls `tasks/get` until the task is `status`.
pub(super) async fn poll_until(
    client: &RmcpClient,
    task_id: &str,
    status: TaskStatus,
) -> GetTaskResult {
    let mut last = None;
    for _ in 0..200 {
        let got = tokio::time::timeout(DEADLINE, client.get_task(GetTaskParams::new(task_id)))
            .await
            .expect("the server answers tasks/get in time")
            .expect("tasks/get succeeds");
        if got.task.status() == status {
            return got;
        }
        last = Some(got.task.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task_id} never became {status:?}; last {last:?}");
}

/// Answers a task by `tasks/update` and polls it until it completes; returns its result.
pub(super) async fn update_until_completed(
    client: &RmcpClient,
    task_id: &str,
    answers: BTreeMap<String, Value>,
) -> Value {
    client
        .update_task(UpdateTaskParams::new(task_id, answers))
        .await
        .expect("tasks/update is acknowledged");
    let done = poll_until(client, task_id, TaskStatus::Completed).await;
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("a completed task inlines its result: {done:?}");
    };
    Value::Object(result.clone())
}

pub(super) async fn call_ask(client: &RmcpClient, who: &str) -> String {
    start_extension_task(client, "ask", json!({ "who": who })).await
}

/// Calls workflow `tool` with `args` under the extension; returns the task it makes.
pub(super) async fn start_extension_task(
    client: &RmcpClient,
    tool: &'static str,
    args: Value,
) -> String {
    let Value::Object(args) = args else {
        unreachable!("arguments are an object")
    };
    let params = CallToolRequestParams::new(tool).with_arguments(args);
    let response = tokio::time::timeout(DEADLINE, client.call_tool_once(params))
        .await
        .expect("the server answers tools/call in time")
        .expect("tools/call succeeds");
    let CallToolResponse::Task(created) = response else {
        panic!("a workflow call under the extension makes a task, got {response:?}");
    };
    assert_eq!(created.task.status, TaskStatus::Working);
    created.task.task_id
}

/// The server binary, spawned for `sandbox`, with an rmcp client of `capabilities`
/// connected in 2026-07-28 discover mode; and the server's stderr as it comes.
pub(super) async fn rmcp_client(
    sandbox: &Sandbox,
    capabilities: ClientCapabilities,
) -> (RmcpClient, Arc<Mutex<String>>) {
    let server = sandbox.server();
    let mut spawn = command(&server[0], sandbox);
    spawn.args(&server[1..]);
    let (transport, stderr) = TokioChildProcess::builder(spawn)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the server binary");
    let log = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&log);
    let mut stderr = stderr.expect("stderr is piped");
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stderr.read(&mut buf).await {
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });

    let said = Arc::clone(&log);
    let said = move || said.lock().unwrap().clone();
    (discover(transport, capabilities, &said).await, log)
}

/// An rmcp client of `capabilities` connected over `transport` in 2026-07-28 discover
/// mode, which must find the task extension; `said` is the server's stderr so far, for a
/// failure.
pub(super) async fn discover<T, E, A>(
    transport: T,
    capabilities: ClientCapabilities,
    said: &dyn Fn() -> String,
) -> RmcpClient
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let info = ClientConfig::new(
        capabilities,
        Implementation::new("rmcp-real-client", env!("CARGO_PKG_VERSION")),
    );
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = tokio::time::timeout(DEADLINE, info.serve_with_lifecycle(transport, lifecycle))
        .await
        .expect("the server answers server/discover in time")
        .unwrap_or_else(|e| panic!("discover failed: {e}\n{}", said()));
    let peer = client.peer_info().expect("discovered");
    assert_eq!(peer.protocol_version, ProtocolVersion::V_2026_07_28);
    assert!(
        peer.capabilities.supports_tasks(),
        "{:?}",
        peer.capabilities
    );
    client
}

#[tokio::test]
async fn rmcp_client_in_2026_07_28_discover_mode_answers_a_task_by_update_and_cancels_another() {
    let sandbox = Sandbox::for_clients();
    let caps = ClientCapabilities::builder()
        .enable_elicitation()
        .enable_tasks()
        .build();
    let (client, _log) = rmcp_client(&sandbox, caps).await;

    // A task whose question is answered by tasks/update.
    let task_id = call_ask(&client, "rmcp").await;
    let asking = poll_until(&client, &task_id, TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = &asking.task.payload else {
        panic!("an input_required task inlines its requests: {asking:?}");
    };
    let requests = serde_json::to_value(input_requests).unwrap();
    assert_eq!(
        requests,
        json!({ "approve:attempt-1": { "method": "elicitation/create", "params": {
            "mode": "form", "message": "Approve rmcp?",
            "requestedSchema": { "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] }
        } } })
    );
    let answers = BTreeMap::from([(
        "approve:attempt-1".to_owned(),
        json!({ "action": "accept", "content": { "ok": true } }),
    )]);
    let result = update_until_completed(&client, &task_id, answers).await;
    assert_eq!(result["isError"], false);
    let report = report(&result);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["nodes"]["todo"]["output"]["title"], "approved rmcp");

    // A task cancelled while it waits.
    let second = call_ask(&client, "never").await;
    client
        .cancel_task(CancelTaskParams::new(&second))
        .await
        .expect("tasks/cancel is acknowledged");
    let cancelled = poll_until(&client, &second, TaskStatus::Cancelled).await;
    assert!(
        matches!(cancelled.task.payload, TaskPayload::Cancelled),
        "{cancelled:?}"
    );

    tokio::time::timeout(DEADLINE, client.cancel())
        .await
        .expect("the client shuts down in time")
        .expect("the client task ends cleanly");
}

/// Answers one of a task's `inputRequests` as rmcp types the answer: a
/// `CreateMessageResult` for sampling, an `ElicitResult` for elicitation, each sent as
/// the JSON `tasks/update` carries. Returns the method, what it asks for, the prompt (of
/// a sampling request) and the answer.
#[allow(deprecated)] // rmcp deprecates sampling (SEP-2577); the planner still asks for it.
pub(super) fn answer_input_request(
    flow: &str,
    request: &InputRequest,
) -> (String, String, Option<String>, Value) {
    match request {
        InputRequest::CreateMessage(request) => {
            let prompt = request.params.messages[0]
                .content
                .first()
                .and_then(|block| match block {
                    SamplingMessageContentBlock::Text(text) => Some(text.text.clone()),
                    _ => None,
                })
                .expect("a text prompt");
            let (asks, text) = draft_for(flow, &prompt);
            let reply = CreateMessageResult::new(
                SamplingMessage::assistant_text(text),
                "rmcp-test-model".to_owned(),
            )
            .with_stop_reason(CreateMessageResult::STOP_REASON_END_TURN);
            (
                "sampling/createMessage".to_owned(),
                asks,
                Some(prompt),
                serde_json::to_value(reply).unwrap(),
            )
        }
        InputRequest::Elicitation(request) => {
            let params = serde_json::to_value(&request.params).unwrap();
            assert_eq!(params["mode"], "form", "{params}");
            let message = params["message"].as_str().unwrap_or_default();
            let (asks, content) = answer_for(flow, message, &params["requestedSchema"]);
            let reply = ElicitResult::new(ElicitationAction::Accept).with_content(content);
            (
                "elicitation/create".to_owned(),
                asks,
                None,
                serde_json::to_value(reply).unwrap(),
            )
        }
        other => panic!("a request {flow} does not make: {other:?}"),
    }
}

/// What a task's questions were, as [`answer_by_update`] answered them, and its result.
pub(super) struct Answered {
    result: Value,
    /// The keys of the `inputRequests` answered, in order.
    keys: Vec<String>,
    /// (method, what it asks) of each, as the client scripts name them.
    asked: Vec<(String, String)>,
    /// The prompts of the sampling requests.
    prompts: Vec<String>,
}

/// Polls task `task_id` of built-in workflow `flow` and answers each of its `inputRequests`
/// once, by its key, with `tasks/update` (several at once when a fan-out asks them): a
/// question already answered may still be listed until the run has moved past it.
pub(super) async fn answer_by_update(
    client: &RmcpClient,
    log: &Mutex<String>,
    task_id: &str,
    flow: &str,
) -> Answered {
    let mut keys: Vec<String> = Vec::new();
    let mut asked: Vec<(String, String)> = Vec::new();
    let mut prompts: Vec<String> = Vec::new();
    let polling = async {
        loop {
            let got = client
                .get_task(GetTaskParams::new(task_id))
                .await
                .expect("tasks/get succeeds");
            match got.task.payload {
                TaskPayload::Completed { result } => return Value::Object(result),
                TaskPayload::InputRequired { input_requests } => {
                    let mut responses = BTreeMap::new();
                    for (key, request) in &input_requests {
                        if keys.contains(key) {
                            continue;
                        }
                        let (method, asks, prompt, reply) = answer_input_request(flow, request);
                        keys.push(key.clone());
                        asked.push((method, asks));
                        prompts.extend(prompt);
                        responses.insert(key.clone(), reply);
                    }
                    if !responses.is_empty() {
                        client
                            .update_task(UpdateTaskParams::new(task_id, responses))
                            .await
                            .expect("tasks/update is acknowledged");
                    }
                }
                TaskPayload::Working => {}
                other => panic!("the task ended {other:?}\n{}", log.lock().unwrap()),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let result = tokio::time::timeout(DEADLINE, polling)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the task did not complete in time; asked {asked:?}\n{}",
                log.lock().unwrap()
            )
        });
    Answered {
        result,
        keys,
        asked,
        prompts,
    }
}

#[tokio::test]
async fn rmcp_client_plans_an_adr_as_a_task_answering_sampling_and_elicitation_by_update() {
    let sandbox = Sandbox::for_clients();
    // An earlier ADR: the new one is numbered after it, and the research prompt names it.
    let adrs = sandbox.workspace.join("docs/adrs");
    std::fs::create_dir_all(&adrs).unwrap();
    std::fs::write(adrs.join("0003-use-sqlite.md"), "# 0003. Use SQLite\n").unwrap();
    #[allow(deprecated)] // rmcp deprecates sampling (SEP-2577); the planner still asks for it.
    let caps = ClientCapabilities::builder()
        .enable_elicitation()
        .enable_sampling()
        .enable_tasks()
        .build();
    let (client, log) = rmcp_client(&sandbox, caps).await;

    let args = json!({ "title": ADR_TITLE });
    let task_id = start_extension_task(&client, "interactive_adr_planning", args).await;

    let Answered {
        result,
        keys,
        asked,
        prompts,
    } = answer_by_update(&client, &log, &task_id, "interactive_adr_planning").await;

    assert_asked_every_question(&asked);
    // Every answer was taken the first time: no question was asked again.
    assert_eq!(
        keys,
        [
            "problem_ask:attempt-1",
            "research_draft:attempt-1",
            "research_review:attempt-1",
            "options_draft:attempt-1",
            "options_review:attempt-1",
            "decision_ask:attempt-1",
            "impacts_draft:attempt-1",
            "impacts_review:attempt-1",
            "plan_draft:attempt-1",
            "plan_review:attempt-1",
        ]
    );
    assert!(
        prompts[0]
            .contains("Earlier ADRs in docs/adrs, for context:\n--- docs/adrs/0003-use-sqlite.md"),
        "{}",
        prompts[0]
    );
    assert_adr_planned(&sandbox, &result, 4);

    tokio::time::timeout(DEADLINE, client.cancel())
        .await
        .expect("the client shuts down in time")
        .expect("the client task ends cleanly");
}

/// rmcp's client in the 2026-07-28 era starting built-in workflow `flow` as a task of the
/// extension, answering its `inputRequests` by `tasks/update`.
pub(super) async fn rmcp_by_update(flow: &'static str) -> (Sandbox, Answered) {
    let sandbox = Sandbox::for_clients();
    #[allow(deprecated)] // rmcp deprecates sampling (SEP-2577); the workflows still ask for it.
    let caps = ClientCapabilities::builder()
        .enable_elicitation()
        .enable_sampling()
        .enable_tasks()
        .build();
    let (client, log) = rmcp_client(&sandbox, caps).await;
    let task_id = start_extension_task(&client, flow, scenario(flow)["arguments"].clone()).await;
    let answered = answer_by_update(&client, &log, &task_id, flow).await;
    tokio::time::timeout(DEADLINE, client.cancel())
        .await
        .expect("the client shuts down in time")
        .expect("the client task ends cleanly");
    (sandbox, answered)
}

#[tokio::test]
async fn rmcp_client_checks_deployment_readiness_as_a_task_answering_each_check_by_update() {
    let (sandbox, answered) = rmcp_by_update("deployment_readiness").await;
    assert_eq!(
        answered.keys,
        ["ask_checks#0:attempt-1", "ask_checks#1:attempt-1"]
    );
    assert_readiness_checked(&sandbox, &answered.result, &answered.asked);
}

#[tokio::test]
async fn rmcp_client_troubleshoots_as_a_task_answering_sampling_and_elicitation_by_update() {
    let (sandbox, answered) = rmcp_by_update("troubleshoot").await;
    assert_eq!(
        answered.keys,
        [
            "failure_ask:attempt-1",
            "hypotheses_draft:attempt-1",
            "hypotheses_review:attempt-1",
            "plan_draft:attempt-1",
            "plan_review:attempt-1",
            "outcome_ask:attempt-1",
        ]
    );
    assert_troubleshooting_planned(&sandbox, &answered.result, &answered.asked);
}

#[tokio::test]
async fn rmcp_client_researches_as_a_task_answering_every_fanned_out_sub_question_by_update() {
    let (sandbox, answered) = rmcp_by_update("research").await;
    assert_research_reported(&sandbox, &answered.result, &answered.asked);
    // Every sub-question's request was listed, and answered, once.
    let mut fanned = answered.keys[2..5].to_vec();
    fanned.sort();
    assert_eq!(
        fanned,
        [
            "investigate#0:attempt-1",
            "investigate#1:attempt-1",
            "investigate#2:attempt-1"
        ]
    );
    for (i, prompt) in answered.prompts[1..4].iter().enumerate() {
        assert!(prompt.contains("Context: EU only"), "{i}: {prompt}");
    }
}
