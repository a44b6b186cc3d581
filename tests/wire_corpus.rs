//! Malformed input over stdio, as a new user's client may send it: every request that
//! carries an id gets exactly one reply, with the code JSON-RPC gives it, and the server
//! goes on serving after each.

mod common;

use std::io::{BufRead, Write};

use serde_json::{Value, json};

struct Server {
    raw: common::RawServer,
}

impl Server {
    fn start() -> Server {
        let mut server = Server {
            raw: common::RawServer::start(),
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
        self.raw.stdin.write_all(line.as_bytes()).unwrap();
        self.raw.stdin.write_all(b"\n").unwrap();
        self.raw.stdin.flush().unwrap();
    }

    /// Every message the server writes until the reply to request `id`, that one included.
    fn replies_until(&mut self, id: u64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let mut line = String::new();
            assert!(
                self.raw.stdout.read_line(&mut line).unwrap() > 0,
                "stdout closed"
            );
            let message: Value = serde_json::from_str(&line).expect("the server writes JSON");
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
        self.send_line(line);
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
