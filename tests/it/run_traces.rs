//! Runs as traces, end to end: the server binary over stdio exports to the test collector
//! (`support/otlp.rs`), whose requests are decoded with the official protobuf messages. A
//! run a traced `tools/call` starts as a task is a trace of its own whose root links the
//! call's span; a node retried after a timeout is an attempt span each, the first an
//! error; the wait for an answer is a question span under its attempt; and a run whose
//! process was killed goes on, in the next process, in the trace it started in.

use std::process::Stdio;
use std::time::Duration;

use opentelemetry_proto::tonic::trace::v1::{Span, status};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::support::Sandbox;
use crate::support::backends::on_both_backends;
use crate::support::otlp::{Receiver, attribute, hex};
use crate::telemetry::TRACE;

const DEADLINE: Duration = Duration::from_secs(20);

/// The span of the client's that its calls name as their parent.
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// Asks for approval, then makes a todo.
const ASK: &str = r#"
name = "ask"
description = "Asks, then makes a todo."
expose_as_tool = true

[nodes.approve]
input = { message = "Approve?", schema = { type = "object", properties = { ok = { type = "boolean" } }, required = ["ok"] } }

[nodes.todo]
needs = ["approve"]
tool = "add_task"
args = { title = "approved" }
"#;

/// Asks, and asks again once if nobody answered within the attempt's timeout.
const ASK_TWICE: &str = r#"
name = "ask_twice"
description = "Asks, and once more after a timeout."
expose_as_tool = true

[nodes.approve]
input = { message = "Approve?", schema = { type = "object", properties = { ok = { type = "boolean" } }, required = ["ok"] } }
timeout = "1500ms"
retry = { max_attempts = 2, initial_delay = "100ms", factor = 1.0 }
"#;

/// A todo, a wait long enough to be killed in, and a todo.
const SLOW: &str = r#"
name = "slow"
description = "Makes a todo, waits, makes another."
expose_as_tool = true

[nodes.first]
tool = "add_task"
args = { title = "before" }

[nodes.pause]
needs = ["first"]
wait = "2s"

[nodes.last]
needs = ["pause"]
tool = "add_task"
args = { title = "after" }
"#;

/// A server process exporting to `receiver`, and a raw 2025-11-25 session with it.
struct Process {
    child: Child,
    stdin: ChildStdin,
    lines: UnboundedReceiver<Value>,
}

impl Process {
    async fn start(site: &Sandbox, db: &str, receiver: &Receiver) -> Process {
        let mut command = tokio::process::Command::from(site.binary(db));
        command
            .arg("--lease")
            .arg("900ms")
            .arg("serve")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
            .env("OTEL_BSP_SCHEDULE_DELAY", "50")
            .env("OTEL_METRICS_EXPORTER", "none")
            .env_remove("OTEL_SDK_DISABLED")
            .env_remove("OTEL_TRACES_EXPORTER")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("the server starts");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut stdout = stdout.lines();
            while let Ok(Some(line)) = stdout.next_line().await {
                let message = serde_json::from_str(&line).expect("stdout holds JSON-RPC");
                if send.send(message).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut process = Process {
            child,
            stdin,
            lines,
        };
        let init = json!({ "protocolVersion": "2025-11-25",
            "capabilities": { "elicitation": {} },
            "clientInfo": { "name": "run-traces", "version": "1" } });
        process.request(0, "initialize", init).await;
        (process.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))).await;
        process
    }

    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// A request's reply; an elicitation on the way is accepted with `{ok: true}`.
    async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        self.send(request).await;
        loop {
            let message = tokio::time::timeout(DEADLINE, self.lines.recv())
                .await
                .expect("the server answers in time")
                .expect("the server is running");
            match (message.get("id"), message.get("method")) {
                (Some(got), None) if got == &json!(id) => return message,
                (Some(server_id), Some(_)) => {
                    let reply = json!({ "jsonrpc": "2.0", "id": server_id,
                        "result": { "action": "accept", "content": { "ok": true } } });
                    self.send(reply).await;
                }
                _ => {}
            }
        }
    }

    /// Starts exposed workflow `tool` as a task, from a call whose `_meta` names the
    /// client's span; returns the task's id.
    async fn start_task(&mut self, tool: &str) -> String {
        let params = json!({ "name": tool, "arguments": {}, "task": {},
            "_meta": { "traceparent": format!("00-{TRACE}-{CLIENT_SPAN}-01") } });
        let created = self.request(1, "tools/call", params).await;
        let task_id = created["result"]["task"]["taskId"].as_str();
        task_id.unwrap_or_else(|| panic!("{created}")).to_owned()
    }

    /// The task's result: its run's report, once the run ended.
    async fn result(&mut self, task_id: &str) -> Value {
        let result = self
            .request(2, "tasks/result", json!({ "taskId": task_id }))
            .await;
        result["result"]["structuredContent"]["data"].clone()
    }

    /// SIGKILL: the process ends at once, flushing nothing.
    async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

/// Waits until spans named `name` of trace `trace` (any, if `None`) number `count`.
async fn spans(receiver: &Receiver, name: &str, trace: Option<&str>, count: usize) -> Vec<Span> {
    let of = |span: &Span| span.name == name && trace.is_none_or(|t| hex(&span.trace_id) == t);
    for _ in 0..400 {
        let found: Vec<Span> = receiver.spans().into_iter().filter(of).collect();
        if found.len() >= count {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let names: Vec<String> = receiver.spans().into_iter().map(|s| s.name).collect();
    panic!("not {count} spans named {name:?}; received {names:?}");
}

fn attr(span: &Span, key: &str) -> Option<String> {
    attribute(&span.attributes, key)
}

fn is_child_of(span: &Span, parent: &Span) -> bool {
    span.trace_id == parent.trace_id && span.parent_span_id == parent.span_id
}

fn is_error(span: &Span) -> bool {
    span.status.as_ref().map(|s| s.code) == Some(status::StatusCode::Error as i32)
}

fn site() -> Sandbox {
    let site = Sandbox::new();
    site.workflow("ask.toml", ASK);
    site.workflow("ask_twice.toml", ASK_TWICE);
    site.workflow("slow.toml", SLOW);
    site
}

#[tokio::test]
async fn a_task_a_traced_call_starts_is_a_trace_of_its_own_linked_to_the_calls_span() {
    let receiver = Receiver::start().await;
    let site = site();
    let mut server = Process::start(&site, &site.db.display().to_string(), &receiver).await;
    let task_id = server.start_task("ask").await;
    let report = server.result(&task_id).await;
    assert_eq!(report["status"], "succeeded", "{report}");

    let call = &spans(&receiver, "tools/call ask", Some(TRACE), 1).await[0];
    assert_eq!(hex(&call.parent_span_id), CLIENT_SPAN);
    let root = &spans(&receiver, "run ask", None, 1).await[0];
    assert_ne!(hex(&root.trace_id), TRACE, "the run is a trace of its own");
    assert!(root.parent_span_id.is_empty(), "its root has no parent");
    assert_eq!(root.kind, 1, "kind INTERNAL");
    let links: Vec<_> = (root.links.iter())
        .map(|link| (hex(&link.trace_id), hex(&link.span_id)))
        .collect();
    assert_eq!(links, [(TRACE.to_owned(), hex(&call.span_id))]);
    assert_eq!(attr(root, "mcp_task_server.run.id"), Some(task_id.clone()));
    assert_eq!(attr(root, "mcp.task.id"), Some(task_id.clone()));
    assert_eq!(
        attr(root, "mcp_task_server.workflow.name").as_deref(),
        Some("ask")
    );
    assert_eq!(
        attr(root, "mcp_task_server.run.status").as_deref(),
        Some("succeeded")
    );

    let trace = hex(&root.trace_id);
    let approve = &spans(&receiver, "node approve", Some(&trace), 1).await[0];
    assert!(is_child_of(approve, root));
    assert_eq!(
        attr(approve, "mcp_task_server.node.attempt").as_deref(),
        Some("1")
    );
    assert_eq!(
        attr(approve, "mcp_task_server.node.outcome").as_deref(),
        Some("ok")
    );
    let question = &spans(&receiver, "question attempt-1", Some(&trace), 1).await[0];
    assert!(
        is_child_of(question, approve),
        "the wait is under its attempt"
    );
    assert_eq!(
        attr(question, "mcp_task_server.question.kind").as_deref(),
        Some("input")
    );
    assert_eq!(
        attr(question, "mcp_task_server.question.outcome").as_deref(),
        Some("ok")
    );
    let todo = &spans(&receiver, "node todo", Some(&trace), 1).await[0];
    assert!(is_child_of(todo, root));
    assert!(todo.start_time_unix_nano >= question.end_time_unix_nano);
}

#[tokio::test]
async fn a_node_retried_after_a_timeout_is_an_attempt_span_each_the_first_an_error() {
    let receiver = Receiver::start().await;
    let site = site();
    let mut server = Process::start(&site, &site.db.display().to_string(), &receiver).await;
    let task_id = server.start_task("ask_twice").await;
    // Nobody answers the first asking: its attempt times out, and is retried.
    let first = spans(&receiver, "node approve", None, 1).await.remove(0);
    assert_eq!(
        attr(&first, "mcp_task_server.node.outcome").as_deref(),
        Some("timed_out")
    );
    // The second asking reaches the client waiting for the result, which answers it.
    let report = server.result(&task_id).await;
    assert_eq!(report["status"], "succeeded", "{report}");
    assert_eq!(report["nodes"]["approve"]["attempts"], 2, "{report}");

    let trace = hex(&first.trace_id);
    let root = &spans(&receiver, "run ask_twice", Some(&trace), 1).await[0];
    let mut attempts = spans(&receiver, "node approve", Some(&trace), 2).await;
    attempts.sort_by_key(|span| span.start_time_unix_nano);
    let (first, second) = (&attempts[0], &attempts[1]);
    for (number, attempt) in [(1, first), (2, second)] {
        assert!(is_child_of(attempt, root), "{attempt:?}");
        let said = attr(attempt, "mcp_task_server.node.attempt");
        assert_eq!(said, Some(number.to_string()));
    }
    assert!(is_error(first), "{first:?}");
    assert_eq!(attr(first, "error.type").as_deref(), Some("timeout"));
    let retry = first.events.iter().find(|event| event.name == "retry");
    let delay = retry.and_then(|event| attribute(&event.attributes, "mcp_task_server.delay_ms"));
    assert!(delay.is_some(), "the retry says its delay: {first:?}");
    assert!(second.start_time_unix_nano >= first.end_time_unix_nano);
    assert!(!is_error(second));
    assert_eq!(
        attr(second, "mcp_task_server.node.outcome").as_deref(),
        Some("ok")
    );
    let asked = spans(&receiver, "question attempt-1", Some(&trace), 1).await;
    assert_eq!(
        attr(&asked[0], "mcp_task_server.question.outcome").as_deref(),
        Some("timed_out")
    );
    let answered = spans(&receiver, "question attempt-2", Some(&trace), 1).await;
    assert!(is_child_of(&answered[0], second));
}

on_both_backends! {
    async fn a_run_whose_process_was_killed_goes_on_in_the_trace_it_started_in(place) {
        let receiver = Receiver::start().await;
        let site = site();
        let db = place.location();
        let mut first = Process::start(&site, &db, &receiver).await;
        let task_id = first.start_task("slow").await;
        // The first node's span is exported before the kill; the root's never ends.
        let before = spans(&receiver, "node first", None, 1).await.remove(0);
        first.kill().await;
        let trace = hex(&before.trace_id);
        assert_eq!(attr(&before, "mcp_task_server.run.id"), Some(task_id.clone()));

        let mut second = Process::start(&site, &db, &receiver).await;
        let report = second.result(&task_id).await;
        assert_eq!(report["status"], "succeeded", "{report}");
        let resumed = &spans(&receiver, "run slow (resumed)", Some(&trace), 1).await[0];
        assert_eq!(
            resumed.parent_span_id, before.parent_span_id,
            "the drive after the crash hangs under the run's stored root"
        );
        assert_eq!(attr(resumed, "mcp_task_server.run.id"), Some(task_id.clone()));
        let call = &spans(&receiver, "tools/call slow", Some(TRACE), 1).await[0];
        let links: Vec<_> = (resumed.links.iter())
            .map(|link| (hex(&link.trace_id), hex(&link.span_id)))
            .collect();
        assert_eq!(
            links,
            [(TRACE.to_owned(), hex(&call.span_id))],
            "the drive after the crash links the call, as the root it stands in for did"
        );
        assert_eq!(attr(resumed, "mcp_task_server.run.status").as_deref(), Some("succeeded"));
        let last = &spans(&receiver, "node last", Some(&trace), 1).await[0];
        assert!(is_child_of(last, resumed), "{last:?}");
        let waited = spans(&receiver, "node pause", Some(&trace), 1).await;
        assert!(waited.iter().any(|span| is_child_of(span, resumed)));
        assert!(
            (receiver.spans().iter()).all(|span| span.name != "run slow"),
            "the killed process never ended the root"
        );
        assert_eq!(
            receiver.spans().iter().filter(|s| s.name == "node first").count(),
            1,
            "a node that finished before the crash is not run again"
        );
        drop(second);
    }
}
