//! Malformed input over stdio, as a new user's client may send it: every request that
//! carries an id gets exactly one reply, with the code JSON-RPC gives it, and the server
//! goes on serving after each.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

use crate::support;

struct Server {
    raw: support::RawServer,
}

impl Server {
    fn start() -> Server {
        let mut server = Server {
            raw: support::RawServer::start(),
        };
        server.send_line(
            &json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": { "name": "corpus", "version": "1" } } })
            .to_string(),
        );
        assert!(server.replies_until(0)[0]["result"].is_object());
        server.send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        server
    }

    fn send_line(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    fn send_bytes(&mut self, line: &[u8]) {
        self.raw.stdin.write_all(line).unwrap();
        self.raw.stdin.write_all(b"\n").unwrap();
        self.raw.stdin.flush().unwrap();
    }

    /// The next message the server writes.
    fn next(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.raw.stdout.read_line(&mut line).unwrap() > 0,
            "stdout closed"
        );
        serde_json::from_str(&line).expect("the server writes JSON")
    }

    /// Every message the server writes until the reply to request `id`, that one included.
    fn replies_until(&mut self, id: u64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next();
            let done = message["id"] == json!(id);
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    /// Sends `line`, then a `ping` with id `probe`, and reads until the ping's reply (which
    /// proves the server still serves) and, when `errors` is 1, one error reply: replies
    /// may come in either order. Returns the error replies read.
    fn replies_to(&mut self, line: &str, probe: u64, errors: usize) -> Vec<Value> {
        self.replies_to_bytes(line.as_bytes(), probe, errors)
    }

    /// [`Server::replies_to`], for a line that need not be UTF-8.
    fn replies_to_bytes(&mut self, line: &[u8], probe: u64, errors: usize) -> Vec<Value> {
        self.send_bytes(line);
        self.send_line(&json!({ "jsonrpc": "2.0", "id": probe, "method": "ping" }).to_string());
        let (mut pinged, mut seen) = (false, Vec::new());
        while !pinged || seen.len() < errors {
            let mut line = String::new();
            assert!(
                self.raw.stdout.read_line(&mut line).unwrap() > 0,
                "stdout closed"
            );
            let message: Value = serde_json::from_str(&line).expect("the server writes JSON");
            if message["id"] == json!(probe) {
                assert!(message["result"].is_object(), "the ping: {message}");
                pinged = true;
            } else if message.get("error").is_some() {
                seen.push(message);
            }
        }
        seen
    }
}

fn add_task_call(id: Value, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"add_task","arguments":{arguments}}}}}"#
    )
}

/// The one reply, its id and its error code.
fn one_error(replies: &[Value]) -> (Value, i64) {
    assert_eq!(replies.len(), 1, "exactly one reply: {replies:?}");
    let reply = &replies[0];
    assert_eq!(reply["jsonrpc"], "2.0");
    let code = reply["error"]["code"].as_i64().expect("an error reply");
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    (reply["id"].clone(), code)
}

#[test]
fn every_malformed_request_gets_exactly_one_reply_and_the_server_goes_on() {
    let mut server = Server::start();
    let deep = format!(
        r#"{{"title":"deep","tags":{}"a"{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let huge = format!(r#"{{"title":"{}"}}"#, "x".repeat(50 * 1024 * 1024));
    let cases: Vec<(&str, String, Value, i64)> = vec![
        ("not JSON", "this is not json".into(), Value::Null, -32700),
        ("cut short", r#"{"jsonrpc":"2.0","id":5,"method":"#.into(), Value::Null, -32700),
        ("a 50 MB line", add_task_call(json!(11), &huge), json!(11), -32600),
        ("100 000 levels deep", add_task_call(json!(12), &deep), json!(12), -32602),
        (
            "a lone surrogate",
            add_task_call(json!(13), r#"{"title":"\ud800"}"#),
            json!(13),
            -32602,
        ),
        (
            "a lone surrogate, id last as JavaScript clients write it",
            r#"{"method":"tools/call","params":{"name":"add_task","arguments":{"title":"\udfff"}},"jsonrpc":"2.0","id":"js-14"}"#
                .into(),
            json!("js-14"),
            -32602,
        ),
        ("array arguments", add_task_call(json!(15), r#"["a"]"#), json!(15), -32602),
        (
            "no JSON-RPC envelope",
            r#"{"id":16,"hello":"world"}"#.into(),
            json!(16),
            -32600,
        ),
        // MCP has no batches since 2025-06-18: one error, to no request in particular,
        // and the ping inside is not answered.
        (
            "a batch",
            r#"[{"jsonrpc":"2.0","id":17,"method":"ping"}]"#.into(),
            Value::Null,
            -32600,
        ),
    ];
    for (probe, (what, line, id, code)) in (100..).zip(cases) {
        let replies = server.replies_to(&line, probe, 1);
        assert_eq!(one_error(&replies), (id, code), "{what}");
    }

    // A blank line or an unknown notification gets no reply at all, and no case above got
    // a second one; a well-formed call still works.
    assert!(server.replies_to("", 200, 0).is_empty());
    let unknown = r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#;
    assert!(server.replies_to(unknown, 201, 0).is_empty());
    server.send_line(&add_task_call(
        json!(300),
        r#"{"title":"after the corpus"}"#,
    ));
    let replies = server.replies_until(300);
    assert_eq!(
        replies.len(),
        1,
        "nothing but the call's reply: {replies:?}"
    );
    let ok = &replies.last().unwrap()["result"]["structuredContent"];
    assert_eq!(ok["ok"], true, "{replies:?}");
    assert_eq!(ok["data"]["title"], "after the corpus");
}

#[test]
fn a_line_that_is_not_utf_8_is_answered_with_its_id() {
    let mut server = Server::start();
    // A title holding bytes that are no UTF-8: JSON in shape, so its id is the client's.
    let mut line = br#"{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"add_task","arguments":{"title":"caf"#.to_vec();
    line.extend_from_slice(b"\xe9\xff");
    line.extend_from_slice(br#""}}}"#);
    let replies = server.replies_to_bytes(&line, 100, 1);
    assert_eq!(one_error(&replies), (json!(21), -32700));
    // Id last, as JavaScript clients write it.
    let line = b"{\"method\":\"ping\",\"params\":{\"_meta\":{\"x\":\"\xc3\"}},\"jsonrpc\":\"2.0\",\"id\":\"s-22\"}";
    let replies = server.replies_to_bytes(line, 101, 1);
    assert_eq!(one_error(&replies), (json!("s-22"), -32700));
    // Cut short as well as not UTF-8: no id can be trusted.
    let replies = server.replies_to_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":23,\"t\":\"\xff", 102, 1);
    assert_eq!(one_error(&replies), (Value::Null, -32700));
}

#[test]
fn a_last_line_without_its_newline_is_answered_before_the_server_ends() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(support::BIN)
        .arg("--db")
        .arg(dir.path().join("tasks.db"))
        .env_remove("TASKS_DB_PATH")
        .env_remove("RUST_LOG")
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let opening = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": { "name": "corpus", "version": "1" } } });
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let last = add_task_call(json!(1), r#"{"title":"the last line"}"#);
    write!(stdin, "{opening}\n{initialized}\n{last}").unwrap();
    drop(stdin);
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    let replies: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 2, "{out}");
    let data = &replies[1]["result"]["structuredContent"];
    assert_eq!(
        (&replies[1]["id"], &data["ok"]),
        (&json!(1), &json!(true)),
        "{out}"
    );
    assert_eq!(data["data"]["title"], "the last line");
    assert!(
        status.success(),
        "the server ends at the end of its input: {status}"
    );
}

/// An inline workflow that would wait for 30 seconds.
fn sleeper(id: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "run_workflow",
        "arguments": { "definition": { "nodes": { "sleep": { "wait": "30s" } } } } } })
    .to_string()
}

#[test]
fn a_request_under_an_id_in_flight_is_refused_and_a_cancel_reaches_the_call_it_names() {
    let mut server = Server::start();
    server.send_line(&sleeper(json!(7)));
    // A second request under id 7 while the first is in flight: refused, with id 7.
    server.send_line(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
    let refused = server.next();
    assert_eq!(refused["id"], 7, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("in flight"), "{refused}");

    // The cancel reaches the workflow call: its run stops, its reply is dropped, and id 7
    // is free again once the call has ended (well before the 30 seconds of its wait).
    server.send_line(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
    );
    let started = std::time::Instant::now();
    loop {
        server.send_line(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
        let reply = server.next();
        assert_eq!(reply["id"], 7, "{reply}");
        if reply.get("result").is_some() {
            assert_eq!(
                reply["result"],
                json!({}),
                "a ping's reply, not the call's: {reply}"
            );
            break;
        }
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "the cancelled call never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The run the call started was cancelled, not left to wait.
    server.send_line(
        &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "list_runs", "arguments": {}}})
        .to_string(),
    );
    let replies = server.replies_until(8);
    let runs = &replies.last().unwrap()["result"]["structuredContent"]["data"];
    assert_eq!(runs[0]["status"], "cancelled", "{runs}");
}

#[test]
fn the_internal_names_of_2025_11_25_task_methods_are_unknown_to_a_client() {
    let mut server = Server::start();
    let prefix = "x-mcp-task-server/2025-11-25/";
    let lines = [
        json!({"jsonrpc": "2.0", "id": 40, "method": format!("{prefix}tasks/list"),
               "params": {}}),
        json!({"jsonrpc": "2.0", "id": 41, "method": format!("{prefix}tools/call"),
               "params": {"name": "add_task", "arguments": {"title": "smuggled"},
                          "task": {"ttl": 60000}}}),
        json!({"jsonrpc": "2.0", "id": 42, "method": format!("{prefix}tasks/get"),
               "params": {"taskId": "00000000-0000-4000-8000-000000000000"}}),
    ];
    for line in lines {
        server.send_line(&line.to_string());
        let reply = server.replies_until(line["id"].as_u64().unwrap());
        let reply = reply.last().unwrap();
        assert_eq!(reply["error"]["code"], -32601, "{line}: {reply}");
    }
    // Nor is the transport's own cancel notification obeyed when a client sends it.
    server.send_line(&sleeper(json!(43)));
    server.send_line(
        &json!({"jsonrpc": "2.0", "method": format!("{prefix}notifications/cancelled"),
                "params": {"requestId": 43}})
        .to_string(),
    );
    server.send_line(&add_task_call(json!(44), r#"{"title":"probe"}"#));
    let replies = server.replies_until(44);
    assert!(replies.iter().all(|r| r["id"] != 43), "{replies:?}");
    server.send_line(
        &json!({"jsonrpc": "2.0", "id": 45, "method": "tools/call",
        "params": {"name": "list_tasks", "arguments": {}}})
        .to_string(),
    );
    let replies = server.replies_until(45);
    let todos = &replies.last().unwrap()["result"]["structuredContent"]["data"];
    let titles: Vec<&str> = todos
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["probe"], "the smuggled call added nothing");
    server.send_line(
        &json!({"jsonrpc": "2.0", "id": 46, "method": "tools/call",
        "params": {"name": "list_runs", "arguments": {}}})
        .to_string(),
    );
    let replies = server.replies_until(46);
    let runs = &replies.last().unwrap()["result"]["structuredContent"]["data"];
    assert_eq!(runs[0]["status"], "running", "{runs}");
}
