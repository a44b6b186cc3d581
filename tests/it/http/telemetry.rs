//! OpenTelemetry over HTTP: a `tools/call` whose `_meta` names a trace is a span under
//! it, which links the span of the HTTP request that carried it (itself under the
//! request's `traceparent` header), in both task protocols; and `/metrics`, the Prometheus
//! text of the same metrics, behind the tokens, holding nothing of any principal's own.

use serde_json::json;

use super::{
    ALICE, BOB, HttpServer, Reply, bearer, call, initialize, modern_headers, modern_meta,
    open_session,
};
use crate::support::otlp::{Receiver, attribute, hex};
use crate::telemetry::{TRACE, traced_call};

/// Another trace: the one the HTTP client's own `traceparent` header names.
const HTTP_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

fn start(receiver: &Receiver) -> HttpServer {
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
        ("OTEL_BSP_SCHEDULE_DELAY", "50".to_owned()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "100".to_owned()),
    ];
    HttpServer::start_with_env(None, &["--http-tokens", "{tokens}"], &env)
}

/// The span whose parent is span `parent` of [`TRACE`].
async fn child_of(
    receiver: &Receiver,
    parent: &str,
) -> opentelemetry_proto::tonic::trace::v1::Span {
    for _ in 0..200 {
        let found = receiver
            .spans()
            .into_iter()
            .find(|span| hex(&span.trace_id) == TRACE && hex(&span.parent_span_id) == parent);
        if let Some(span) = found {
            return span;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no span under {parent}");
}

/// The HTTP span a span links, checked to be `POST /mcp` under `HTTP_TRACE`'s `parent`.
fn linked_http_span(
    receiver: &Receiver,
    span: &opentelemetry_proto::tonic::trace::v1::Span,
    parent: &str,
) {
    assert_eq!(
        span.links.len(),
        1,
        "one link, to the HTTP span: {:?}",
        span.links
    );
    let link = &span.links[0];
    assert_eq!(hex(&link.trace_id), HTTP_TRACE);
    let http = receiver
        .spans()
        .into_iter()
        .find(|s| s.span_id == link.span_id)
        .expect("the linked HTTP span is exported");
    assert_eq!(http.name, "POST /mcp");
    assert_eq!(http.kind, 2, "kind SERVER");
    assert_eq!(hex(&http.parent_span_id), parent);
    let attr = |key| attribute(&http.attributes, key);
    assert_eq!(attr("http.request.method").as_deref(), Some("POST"));
    assert_eq!(attr("http.route").as_deref(), Some("/mcp"));
    assert_eq!(attr("http.response.status_code").as_deref(), Some("200"));
}

fn traceparent(trace: &str, span: &str) -> String {
    format!("traceparent: 00-{trace}-{span}-01")
}

#[tokio::test]
async fn a_tool_call_over_http_is_a_span_under_its_meta_that_links_the_http_span() {
    let receiver = Receiver::start().await;
    let server = start(&receiver);
    // 2025-11-25, in a session.
    let mut session = open_session(&server, ALICE);
    let id = session
        .iter()
        .find_map(|h| h.strip_prefix("Mcp-Session-Id: "))
        .unwrap()
        .to_owned();
    session.push(traceparent(HTTP_TRACE, "b7ad6b7169203331"));
    let message = traced_call(
        5,
        "add_task",
        json!({"title": "traced"}),
        "00f067aa0ba902b7",
    );
    let reply = server.post(&session, &message).response(5);
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    let span = child_of(&receiver, "00f067aa0ba902b7").await;
    assert_eq!(span.name, "tools/call add_task");
    assert_eq!(span.kind, 2, "kind SERVER");
    let attr = |key| attribute(&span.attributes, key);
    assert_eq!(attr("network.transport").as_deref(), Some("tcp"));
    assert_eq!(attr("mcp.session.id").as_deref(), Some(id.as_str()));
    assert_eq!(attr("mcp.protocol.version").as_deref(), Some("2025-11-25"));
    assert_eq!(attr("jsonrpc.request.id").as_deref(), Some("5"));
    linked_http_span(&receiver, &span, "b7ad6b7169203331");

    // A 2025-11-25 task: the call the task layer renames is named as the client sent it.
    let definition = json!({"nodes": {"hi": {"render": "hi"}}});
    let mut task = traced_call(
        6,
        "run_workflow",
        json!({"definition": definition}),
        "00f067aa0ba902c1",
    );
    task["params"]["task"] = json!({"ttl": 60000});
    let created = server.post(&session, &task).response(6);
    assert!(created["result"]["task"]["taskId"].is_string(), "{created}");
    let span = child_of(&receiver, "00f067aa0ba902c1").await;
    assert_eq!(span.name, "tools/call run_workflow");
    assert_eq!(
        attribute(&span.attributes, "mcp.method.name").as_deref(),
        Some("tools/call")
    );

    // 2026-07-28, stateless: a protocol error.
    let mut headers = modern_headers("tools/call", "no_such_tool").to_vec();
    headers.push(bearer(BOB));
    headers.push(traceparent(HTTP_TRACE, "b7ad6b7169203332"));
    let mut message = traced_call(7, "no_such_tool", json!({}), "00f067aa0ba902c2");
    let meta = message["params"]["_meta"].as_object_mut().unwrap();
    meta.extend(modern_meta().as_object().unwrap().clone());
    let refused = server.post(&headers, &message).response(7);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let span = child_of(&receiver, "00f067aa0ba902c2").await;
    let attr = |key| attribute(&span.attributes, key);
    assert_eq!(attr("error.type").as_deref(), Some("-32602"));
    assert_eq!(attr("rpc.response.status_code").as_deref(), Some("-32602"));
    assert_eq!(attr("mcp.protocol.version").as_deref(), Some("2026-07-28"));
    assert_eq!(
        attr("mcp.session.id"),
        None,
        "a stateless request has no session"
    );
    linked_http_span(&receiver, &span, "b7ad6b7169203332");
}

fn get_metrics(server: &HttpServer, token: Option<&str>) -> Reply {
    let mut head = format!(
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{}",
        server.addr.port()
    );
    if let Some(token) = token {
        head.push_str(&format!("\r\n{}", bearer(token)));
    }
    server.send(&head, "")
}

/// The samples of a scrape, parsed by a Prometheus text-format parser.
fn parse(text: &str) -> prometheus_parse::Scrape {
    let lines = text.lines().map(|line| Ok(line.to_owned()));
    prometheus_parse::Scrape::parse(lines).expect("the text format parses")
}

fn label<'a>(sample: &'a prometheus_parse::Sample, name: &str) -> Option<&'a str> {
    sample.labels.get(name)
}

#[test]
fn metrics_need_a_token_and_hold_the_histogram_and_counters_of_no_principal_in_particular() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}", "--http-metrics"]);
    let refused = get_metrics(&server, None);
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert_eq!(refused.header("www-authenticate"), Some("Bearer"));
    assert_eq!(get_metrics(&server, Some("not-a-token")).status, 401);

    // Alice's work, with what only she should know in it.
    let alice = open_session(&server, ALICE);
    let secret = "sekrit-argument-of-alice";
    let reply = server.post(&alice, &call(2, "add_task", json!({"title": secret})));
    assert_eq!(reply.response(2)["result"]["isError"], false);
    let definition = json!({"name": "alice_private_plan",
                            "inputs": {"x": {"type": "string"}},
                            "nodes": {"echo": {"render": "{{ inputs.x }}"}}});
    let arguments = json!({"definition": definition, "inputs": {"x": secret}});
    let ran = server
        .post(&alice, &call(3, "run_workflow", arguments))
        .response(3);
    assert_eq!(ran["result"]["isError"], false, "{ran}");
    for n in 0..30 {
        let invented = format!("alice_invented_tool_{n}");
        server.post(&alice, &call(10 + n, &invented, json!({})));
    }

    // Bob reads the metrics.
    let scraped = get_metrics(&server, Some(BOB));
    assert_eq!(scraped.status, 200, "{}", scraped.body);
    assert_eq!(
        scraped.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = &scraped.body;
    for private in [
        "alice",
        "bob",
        ALICE,
        BOB,
        secret,
        "alice_private_plan",
        "invented",
    ] {
        assert!(
            !text.contains(private),
            "/metrics holds {private:?}:\n{text}"
        );
    }
    let session = alice
        .iter()
        .find_map(|h| h.strip_prefix("Mcp-Session-Id: "))
        .unwrap();
    assert!(!text.contains(session), "a session id in /metrics");

    let scrape = parse(text);
    let buckets: Vec<&prometheus_parse::Sample> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "mcp_server_operation_duration_seconds")
        .filter(|s| label(s, "gen_ai_tool_name") == Some("add_task"))
        .collect();
    let prometheus_parse::Value::Histogram(counts) = &buckets.first().expect("add_task's").value
    else {
        panic!("not a histogram: {:?}", buckets[0].value);
    };
    let bounds: Vec<f64> = counts.iter().map(|c| c.less_than).collect();
    let mut expected = vec![
        0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    ];
    expected.push(f64::INFINITY);
    assert_eq!(bounds, expected);
    assert_eq!(counts.last().unwrap().count, 1.0);
    assert_eq!(label(buckets[0], "network_transport"), Some("tcp"));
    assert_eq!(label(buckets[0], "mcp_method_name"), Some("tools/call"));
    // The invented tools are one series: unknown tools, no name of theirs.
    let unknown = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "mcp_server_operation_duration_seconds"
                && label(s, "error_type") == Some("-32602")
        })
        .expect("the unknown tools' series");
    assert_eq!(label(unknown, "gen_ai_tool_name"), None);
    let counter = |name: &str| {
        scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == name && label(s, "mcp_task_server_workflow_name") == Some("inline")
            })
            .map(|s| s.value.clone())
    };
    assert!(
        matches!(counter("mcp_task_server_runs_started_total"), Some(prometheus_parse::Value::Counter(n)) if n >= 1.0),
        "{text}"
    );
    let finished = scrape.samples.iter().find(|s| {
        s.metric == "mcp_task_server_runs_finished_total"
            && label(s, "mcp_task_server_workflow_name") == Some("inline")
            && label(s, "mcp_task_server_run_status") == Some("succeeded")
    });
    assert!(finished.is_some(), "{text}");
    assert!(
        text.contains("# TYPE mcp_task_server_node_attempts_total counter"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE mcp_task_server_store_commit_group_size histogram"),
        "{text}"
    );

    // Alice reads the same: nothing in it is anyone's own.
    let hers = get_metrics(&server, Some(ALICE));
    assert_eq!(hers.status, 200);
    assert!(!hers.body.contains(secret));
}

#[test]
fn metrics_are_served_without_a_token_only_where_the_server_has_none_on_loopback() {
    let server = HttpServer::start(&["--http-metrics"]);
    let scraped = get_metrics(&server, None);
    assert_eq!(scraped.status, 200, "{}", scraped.body);
    let posted = server.send(
        &format!(
            "POST /metrics HTTP/1.1\r\nHost: 127.0.0.1:{}",
            server.addr.port()
        ),
        "",
    );
    assert_eq!(posted.status, 405);
}

#[test]
fn without_http_metrics_no_metrics_are_recorded_or_served() {
    let server = HttpServer::start(&[]);
    let call = server.post(&[], &initialize(1));
    assert_eq!(call.status, 200, "{}", call.body);
    let scraped = get_metrics(&server, None);
    assert_eq!(scraped.status, 404, "{}", scraped.body);
    assert!(!scraped.body.contains("mcp_server"), "{}", scraped.body);
}
