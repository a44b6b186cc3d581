//! Both protocol eras over raw JSON-RPC lines: the `initialize` handshake of 2025-11-25
//! and the stateless 2026-07-28 requests introduced by `server/discover`.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

use crate::support;

struct Raw {
    raw: support::RawServer,
}

impl Raw {
    fn start() -> Raw {
        Raw {
            raw: support::RawServer::start(),
        }
    }

    fn send(&mut self, message: Value) {
        writeln!(self.raw.stdin, "{message}").unwrap();
        self.raw.stdin.flush().unwrap();
    }

    /// Sends a request and returns its response, skipping any notification before it.
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            let mut line = String::new();
            assert!(
                self.raw.stdout.read_line(&mut line).unwrap() > 0,
                "the server closed stdout"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == json!(id) {
                return message;
            }
        }
    }
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" }
    })
}

#[test]
fn an_initialize_session_of_2025_11_25_lists_and_calls_tools() {
    let mut raw = Raw::start();
    let init = raw.request(
        1,
        "initialize",
        json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "raw", "version": "1" } }),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "mcp-task-server");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    raw.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));

    let listed = raw.request(2, "tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"add_task") && names.contains(&"run_workflow"),
        "{names:?}"
    );

    let added = raw.request(
        3,
        "tools/call",
        json!({ "name": "add_task", "arguments": { "title": "legacy era" } }),
    );
    assert_eq!(added["result"]["structuredContent"]["ok"], true);
    assert_eq!(
        added["result"]["structuredContent"]["data"]["title"],
        "legacy era"
    );
}

#[test]
fn server_discover_then_stateless_2026_07_28_requests_work_without_initialize() {
    let mut raw = Raw::start();
    let discovered = raw.request(1, "server/discover", json!({ "_meta": modern_meta() }));
    let versions = discovered["result"]["supportedVersions"]
        .as_array()
        .unwrap();
    assert!(versions.contains(&json!("2026-07-28")), "{versions:?}");
    assert!(versions.contains(&json!("2025-11-25")), "{versions:?}");
    assert!(discovered["result"]["capabilities"]["tools"].is_object());

    let added = raw.request(
        2,
        "tools/call",
        json!({ "_meta": modern_meta(), "name": "add_task", "arguments": { "title": "modern era" } }),
    );
    assert_eq!(added["result"]["resultType"], "complete");
    assert_eq!(
        added["result"]["structuredContent"]["data"]["title"],
        "modern era"
    );

    let rejected = raw.request(
        3,
        "tools/call",
        json!({ "_meta": modern_meta(), "name": "add_task", "arguments": { "title": "" } }),
    );
    assert_eq!(rejected["result"]["isError"], true);
    assert_eq!(
        rejected["result"]["structuredContent"]["error"]["code"],
        "invalid_input"
    );

    let unknown = raw.request(
        4,
        "tools/call",
        json!({ "_meta": modern_meta(), "name": "no_such_tool", "arguments": {} }),
    );
    assert_eq!(unknown["error"]["code"], -32602);
}

/// Over stdio too, a 2026-07-28 listen that names a task is acknowledged with it and told
/// the task's status as it changes, up to its end; one from a client that did not declare
/// the tasks extension is refused.
#[test]
fn a_stdio_listen_is_told_its_tasks_status_to_its_end() {
    let mut raw = Raw::start();
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] =
        json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } });
    let definition = json!({"nodes": {"pause": {"wait": "300ms"},
                                      "hi": {"render": "hi", "needs": ["pause"]}}});
    let created = raw.request(
        1,
        "tools/call",
        json!({ "_meta": meta, "name": "run_workflow", "arguments": { "definition": definition } }),
    );
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    raw.send(
        json!({ "jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen",
                     "params": { "_meta": meta, "notifications": { "taskIds": [task] } } }),
    );
    let mut told = Vec::new();
    let mut acknowledged = None;
    while told.last().map(String::as_str) != Some("completed") {
        let mut line = String::new();
        assert!(raw.raw.stdout.read_line(&mut line).unwrap() > 0, "{told:?}");
        let message: Value = serde_json::from_str(&line).unwrap();
        match message["method"].as_str() {
            Some("notifications/subscriptions/acknowledged") => acknowledged = Some(message),
            Some("notifications/tasks") => {
                assert_eq!(message["params"]["taskId"], task.as_str(), "{message}");
                told.push(message["params"]["status"].as_str().unwrap().to_owned());
            }
            _ => {}
        }
    }
    let acknowledged = acknowledged.expect("the listen is acknowledged first");
    assert_eq!(
        acknowledged["params"]["notifications"]["taskIds"],
        json!([task]),
        "{acknowledged}"
    );
    assert_eq!(
        told.first().map(String::as_str),
        Some("working"),
        "{told:?}"
    );

    // Without the tasks extension declared, naming tasks is refused.
    let refused = raw.request(
        3,
        "subscriptions/listen",
        json!({ "_meta": modern_meta(), "notifications": { "taskIds": [task] } }),
    );
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}
