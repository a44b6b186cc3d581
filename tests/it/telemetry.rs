//! OpenTelemetry over stdio, end to end: the server binary exports to a test collector
//! (`support/otlp.rs`), whose requests are decoded with the official protobuf messages. A
//! `tools/call` whose `_meta` carries a `traceparent` is a span under it, named and
//! attributed as the MCP semantic conventions say, with the error of an `isError` result
//! or of a protocol error; `mcp.server.operation.duration` comes with the conventions'
//! buckets; a log line written while a request is handled carries its trace id; with
//! telemetry off nothing is exported, and stdout holds the protocol alone either way.
//! Over HTTP: `http/telemetry.rs`.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::support::otlp::{Receiver, attribute, hex, histogram_points};
use crate::support::{self, TempDb};

const DEADLINE: Duration = Duration::from_secs(10);

/// A trace of the client's, as its `traceparent` names it: trace id and span id.
pub(crate) const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The server binary over stdio, spoken to in JSON-RPC lines, with `env` set.
struct Lines {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Every line the server wrote on stdout.
    written: Vec<String>,
    _db: TempDb,
}

impl Lines {
    async fn start(env: &[(&str, &str)], args: &[&str]) -> Lines {
        let db = TempDb::new();
        let mut command = support::server_command(db.dir.path());
        command
            .arg("--db")
            .arg(&db.path)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("the server starts");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut lines = Lines {
            child,
            stdin,
            stdout,
            written: Vec::new(),
            _db: db,
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "telemetry-test", "version": "1"}}});
        lines.request(&init).await;
        lines
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        lines
    }

    async fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// Sends a request and returns the reply with its id.
    async fn request(&mut self, message: &Value) -> Value {
        self.send(message).await;
        loop {
            let mut line = String::new();
            let read = tokio::time::timeout(DEADLINE, self.stdout.read_line(&mut line)).await;
            assert!(read.expect("the server answers in time").unwrap() > 0);
            self.written.push(line.clone());
            let reply: Value = serde_json::from_str(&line).expect("stdout holds JSON-RPC");
            if reply["id"] == message["id"] {
                return reply;
            }
        }
    }

    /// Closes stdin, waits for the server to exit, and returns everything it wrote on
    /// stdout and stderr.
    async fn finish(mut self) -> (Vec<String>, String) {
        drop(self.stdin.take());
        let mut rest = String::new();
        let read = tokio::time::timeout(DEADLINE, self.stdout.read_to_string(&mut rest));
        read.await.expect("stdout closes").unwrap();
        self.written.extend(rest.lines().map(str::to_owned));
        let mut stderr = String::new();
        let mut pipe = self.child.stderr.take().unwrap();
        let read = tokio::time::timeout(DEADLINE, pipe.read_to_string(&mut stderr));
        read.await.expect("stderr closes").unwrap();
        let status = tokio::time::timeout(DEADLINE, self.child.wait()).await;
        assert!(
            status.expect("the server exits").unwrap().success(),
            "{stderr}"
        );
        (self.written, stderr)
    }
}

/// The variables that point the server at `receiver`, exporting at once.
fn exporting(receiver: &Receiver) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
        ("OTEL_BSP_SCHEDULE_DELAY", "50".to_owned()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "100".to_owned()),
    ]
}

fn as_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// A `tools/call` whose `_meta` names span `parent` of [`TRACE`] as its parent.
pub(crate) fn traced_call(id: u64, tool: &str, arguments: Value, parent: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": {"traceparent": format!("00-{TRACE}-{parent}-01"), "tracestate": "vendor=1"}}})
}

/// Every line on stdout is a JSON-RPC message.
fn only_protocol(written: &[String]) {
    for line in written {
        let message: Value = serde_json::from_str(line)
            .unwrap_or_else(|_| panic!("stdout holds something else than JSON-RPC: {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
}

#[tokio::test]
async fn a_tool_call_over_stdio_is_a_server_span_under_the_traceparent_of_its_meta() {
    let receiver = Receiver::start().await;
    let env = exporting(&receiver);
    let mut server = Lines::start(&as_refs(&env), &[]).await;
    let added = server
        .request(&traced_call(
            1,
            "add_task",
            json!({"title": "traced"}),
            "00f067aa0ba902b7",
        ))
        .await;
    assert_eq!(added["result"]["isError"], false, "{added}");
    let refused = server
        .request(&traced_call(
            2,
            "complete_task",
            json!({"id": 424242}),
            "00f067aa0ba902b8",
        ))
        .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let unknown = server
        .request(&traced_call(
            3,
            "no_such_tool",
            json!({}),
            "00f067aa0ba902b9",
        ))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    let span = receiver.span("tools/call add_task").await;
    assert_eq!(hex(&span.trace_id), TRACE);
    assert_eq!(hex(&span.parent_span_id), "00f067aa0ba902b7");
    assert_eq!(span.kind, 2, "kind SERVER");
    let attr =
        |span: &opentelemetry_proto::tonic::trace::v1::Span, key| attribute(&span.attributes, key);
    assert_eq!(
        attr(&span, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(attr(&span, "gen_ai.tool.name").as_deref(), Some("add_task"));
    assert_eq!(
        attr(&span, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(attr(&span, "jsonrpc.request.id").as_deref(), Some("1"));
    assert_eq!(attr(&span, "network.transport").as_deref(), Some("pipe"));
    assert_eq!(
        attr(&span, "mcp.protocol.version").as_deref(),
        Some("2025-11-25")
    );
    assert_eq!(attr(&span, "error.type"), None);
    assert_eq!(
        attr(&span, "mcp.session.id"),
        None,
        "stdio has no session id"
    );
    assert!(span.links.is_empty(), "no HTTP span to link over stdio");

    let failed = receiver.span("tools/call complete_task").await;
    assert_eq!(hex(&failed.parent_span_id), "00f067aa0ba902b8");
    assert_eq!(attr(&failed, "error.type").as_deref(), Some("tool_error"));
    assert_eq!(attr(&failed, "rpc.response.status_code"), None);

    let errored = receiver.span("tools/call no_such_tool").await;
    assert_eq!(hex(&errored.parent_span_id), "00f067aa0ba902b9");
    assert_eq!(attr(&errored, "error.type").as_deref(), Some("-32602"));
    assert_eq!(
        attr(&errored, "rpc.response.status_code").as_deref(),
        Some("-32602")
    );

    let uri = "tasks://workflows/adr_check/source.toml";
    let read = json!({"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {
        "uri": uri, "_meta": {"traceparent": format!("00-{TRACE}-00f067aa0ba902ba-01")}}});
    let contents = server.request(&read).await;
    assert!(contents["result"]["contents"].is_array(), "{contents}");
    let read = receiver.span("resources/read").await;
    assert_eq!(hex(&read.parent_span_id), "00f067aa0ba902ba");
    assert_eq!(attr(&read, "mcp.resource.uri").as_deref(), Some(uri));

    let initialize = receiver.span("initialize").await;
    assert!(
        initialize.parent_span_id.is_empty(),
        "no traceparent: a root span"
    );

    let (written, _) = server.finish().await;
    only_protocol(&written);
}

#[tokio::test]
async fn the_operation_duration_is_exported_with_the_conventions_buckets_and_bounded_attributes() {
    let receiver = Receiver::start().await;
    let env = exporting(&receiver);
    let mut server = Lines::start(&as_refs(&env), &[]).await;
    server
        .request(&traced_call(
            1,
            "add_task",
            json!({"title": "x"}),
            "00f067aa0ba902b7",
        ))
        .await;
    server
        .request(&traced_call(
            2,
            "complete_task",
            json!({"id": 424242}),
            "00f067aa0ba902b7",
        ))
        .await;
    // A client's invented tool names are not metric attributes: only published tools are.
    for n in 0..20 {
        let name = format!("invented_{n}");
        server
            .request(&traced_call(10 + n, &name, json!({}), "00f067aa0ba902b7"))
            .await;
    }
    let (written, _) = server.finish().await;
    only_protocol(&written);

    let operation = receiver.metric("mcp.server.operation.duration").await;
    assert_eq!(operation.unit, "s");
    let points = histogram_points(&operation);
    let buckets = [
        0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    ];
    let find = |tool: Option<&str>, error: Option<&str>| {
        points.iter().find(|(attributes, _, _)| {
            attribute(attributes, "mcp.method.name").as_deref() == Some("tools/call")
                && attribute(attributes, "gen_ai.tool.name").as_deref() == tool
                && attribute(attributes, "error.type").as_deref() == error
        })
    };
    let (attributes, bounds, count) = find(Some("add_task"), None).expect("add_task's point");
    assert_eq!(bounds, &buckets);
    assert_eq!(*count, 1);
    assert_eq!(
        attribute(attributes, "network.transport").as_deref(),
        Some("pipe")
    );
    let (_, _, count) = find(Some("complete_task"), Some("tool_error")).expect("a tool error");
    assert_eq!(*count, 1);
    let (_, _, count) = find(None, Some("-32602")).expect("unknown tools, as one point");
    assert_eq!(*count, 20);
    for (attributes, _, _) in &points {
        let tool = attribute(attributes, "gen_ai.tool.name").unwrap_or_default();
        assert!(!tool.starts_with("invented"), "{tool} became an attribute");
    }
    let session = receiver.metric("mcp.server.session.duration").await;
    let points = histogram_points(&session);
    assert_eq!(points.len(), 1);
    assert_eq!(points[0].1, buckets);
    assert_eq!(
        attribute(&points[0].0, "network.transport").as_deref(),
        Some("pipe")
    );
    assert!(receiver.strays().is_empty(), "{:?}", receiver.strays());
}

#[tokio::test]
async fn a_log_line_written_while_a_request_is_handled_carries_its_trace_id() {
    let receiver = Receiver::start().await;
    let mut env = exporting(&receiver);
    env.push(("RUST_LOG", "mcp_task_server=debug".to_owned()));
    let mut server = Lines::start(&as_refs(&env), &[]).await;
    let reply = server
        .request(&traced_call(1, "list_tasks", json!({}), "00f067aa0ba902b7"))
        .await;
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    let span = receiver.span("tools/call list_tasks").await;
    let (written, stderr) = server.finish().await;
    only_protocol(&written);
    let line = stderr
        .lines()
        .find(|line| line.contains("MCP request answered") && line.contains("tools/call"))
        .unwrap_or_else(|| panic!("the request's log line in:\n{stderr}"));
    assert!(
        line.ends_with(&format!("trace_id={TRACE} span_id={}", hex(&span.span_id))),
        "{line}"
    );
    // Outside any request, a line is as it always was.
    let start = stderr
        .lines()
        .find(|l| l.contains("serving MCP on stdio"))
        .unwrap();
    assert!(!start.contains("trace_id="), "{start}");
}

#[tokio::test]
async fn with_telemetry_off_nothing_is_exported_and_stdout_holds_the_protocol_alone() {
    let receiver = Receiver::start().await;
    // Named, and switched off by the standard switch.
    let mut env = exporting(&receiver);
    env.push(("OTEL_SDK_DISABLED", "true".to_owned()));
    let mut server = Lines::start(&as_refs(&env), &[]).await;
    server
        .request(&traced_call(
            1,
            "add_task",
            json!({"title": "x"}),
            "00f067aa0ba902b7",
        ))
        .await;
    let (written, stderr) = server.finish().await;
    only_protocol(&written);
    assert!(!stderr.contains("trace_id="), "{stderr}");
    // Whatever would have been exported was sent at exit at the latest.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        receiver.is_empty(),
        "exported while off: {:?}",
        receiver.spans()
    );

    // Not named at all: the default.
    let mut server = Lines::start(&[], &[]).await;
    server
        .request(&traced_call(
            1,
            "add_task",
            json!({"title": "x"}),
            "00f067aa0ba902b7",
        ))
        .await;
    let (written, stderr) = server.finish().await;
    only_protocol(&written);
    assert!(!stderr.contains("trace_id="), "{stderr}");
}
