//! MCP over Streamable HTTP, end to end: the server binary with `--http`, spoken to with
//! plain HTTP/1.1 requests, so that each test shows the exact status, headers and events a
//! client gets.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(10);
const ALICE: &str = "alice-0123456789abcdef";
const BOB: &str = "bob-0123456789abcdef";

/// The server serving HTTP on a loopback port of its own choosing.
struct HttpServer {
    child: Child,
    addr: SocketAddr,
    db: common::TempDb,
}

impl HttpServer {
    fn start(extra: &[&str]) -> HttpServer {
        let db = common::TempDb::new();
        let tokens = db.dir.path().join("tokens");
        std::fs::write(
            &tokens,
            format!("# test tokens\nalice {ALICE}\nbob {BOB}\n"),
        )
        .unwrap();
        let mut command = Command::new(common::BIN);
        command
            .env_remove("TASKS_DB_PATH")
            .env_remove("TASKS_HTTP")
            .env_remove("TASKS_HTTP_TOKENS_FILE")
            .env("RUST_LOG", "info")
            .current_dir(db.dir.path())
            .arg("--db")
            .arg(&db.path)
            .arg("--http")
            .arg("127.0.0.1:0")
            .args(
                extra
                    .iter()
                    .map(|a| a.replace("{tokens}", tokens.to_str().unwrap())),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start the server");
        let addr = common::listening_address(child.stderr.take().unwrap());
        HttpServer { child, addr, db }
    }

    /// One request on a connection of its own; returns the status, the headers (names in
    /// lowercase) and the body.
    fn send(&self, head: &str, body: &str) -> Reply {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        let request = format!(
            "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        Reply::parse(&raw)
    }

    /// A JSON-RPC message POSTed to `/mcp` with these extra header lines.
    fn post(&self, headers: &[String], message: &Value) -> Reply {
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream",
            self.addr.port()
        );
        for header in headers {
            head.push_str("\r\n");
            head.push_str(header);
        }
        self.send(&head, &message.to_string())
    }
}

impl HttpServer {
    /// Sends SIGTERM and waits for the server to exit.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: `kill` with a child's pid and SIGTERM only sends a signal.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let started = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < DEADLINE, "the server is still running");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn parse(raw: &[u8]) -> Reply {
        let text = String::from_utf8_lossy(raw);
        let (head, rest) = text.split_once("\r\n\r\n").expect("a complete response");
        let mut lines = head.lines();
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            dechunk(rest)
        } else {
            rest.to_owned()
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages of the reply: the body itself, or each SSE `data:` event.
    fn messages(&self) -> Vec<Value> {
        if let Ok(value) = serde_json::from_str(&self.body) {
            return vec![value];
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    }

    /// The response to request `id`.
    fn response(&self, id: u64) -> Value {
        self.messages()
            .into_iter()
            .find(|m| m["id"] == json!(id))
            .unwrap_or_else(|| panic!("no response {id} in {}: {}", self.status, self.body))
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}")
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "http-test", "version": "1"}}})
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

/// A 2025-11-25 session opened with `token`: its `Mcp-Session-Id` and the headers every
/// later request of it carries.
fn open_session(server: &HttpServer, token: &str) -> Vec<String> {
    open_session_as(server, vec![bearer(token)]).0
}

/// A 2025-11-25 session opened with these headers: the headers of its later requests,
/// and the `initialize` result.
fn open_session_as(server: &HttpServer, mut headers: Vec<String>) -> (Vec<String>, Value) {
    let reply = server.post(&headers, &initialize(1));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let result = reply.response(1)["result"].clone();
    assert!(result["serverInfo"].is_object(), "{result}");
    let session = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    headers.push(format!("Mcp-Session-Id: {session}"));
    headers.push("MCP-Protocol-Version: 2025-11-25".to_owned());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(server.post(&headers, &initialized).status, 202);
    (headers, result)
}

#[test]
fn health_answers_without_a_token_and_everything_else_needs_one() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let health = server.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1", "");
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));

    for headers in [
        vec![],
        vec![bearer("wrong-0123456789abcdef")],
        vec![format!("Authorization: Basic {ALICE}")],
    ] {
        let refused = server.post(&headers, &initialize(1));
        assert_eq!(refused.status, 401, "{headers:?}");
        assert_eq!(refused.header("www-authenticate"), Some("Bearer"));
        assert!(!refused.body.contains("0123456789abcdef"));
    }
    let served = server.post(&[bearer(ALICE)], &initialize(1));
    assert_eq!(served.status, 200, "{}", served.body);
}

#[test]
fn sessions_of_different_principals_share_one_todo_list() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);

    let added = server.post(
        &alice,
        &call(2, "add_task", json!({"title": "ship the HTTP transport"})),
    );
    let result = &added.response(2)["result"];
    assert_eq!(result["structuredContent"]["ok"], json!(true), "{result}");

    // Bob's session numbers its requests as Alice's does: ids are per session.
    let listed = server.post(&bob, &call(2, "list_tasks", json!({})));
    let data = &listed.response(2)["result"]["structuredContent"]["data"];
    let titles: Vec<&str> = data
        .as_array()
        .unwrap_or_else(|| panic!("a list of todos in {data}"))
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["ship the HTTP transport"]);
    assert_eq!(
        common::task_titles(&server.db.path),
        ["ship the HTTP transport"]
    );
}

#[test]
fn a_request_from_a_foreign_host_or_origin_is_refused() {
    let server = HttpServer::start(&[]);
    let port = server.addr.port();
    let foreign_host = server.send(
        "POST /mcp HTTP/1.1\r\nHost: rebound.example\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream",
        &initialize(1).to_string(),
    );
    assert_eq!(foreign_host.status, 403, "{}", foreign_host.body);
    let foreign_origin = server.post(
        &["Origin: http://rebound.example".to_owned()],
        &initialize(1),
    );
    assert_eq!(foreign_origin.status, 403, "{}", foreign_origin.body);
    let local_page = server.post(
        &[format!("Origin: http://localhost:{port}")],
        &initialize(1),
    );
    assert_eq!(local_page.status, 200, "{}", local_page.body);
}

#[test]
fn a_named_host_is_served_and_other_paths_are_not_found() {
    let server = HttpServer::start(&["--http-host", "tasks.internal"]);
    let named = server.send(
        "POST /mcp HTTP/1.1\r\nHost: tasks.internal:8765\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream",
        &initialize(1).to_string(),
    );
    assert_eq!(named.status, 200, "{}", named.body);
    let elsewhere = server.send("GET /sse HTTP/1.1\r\nHost: 127.0.0.1", "");
    assert_eq!(elsewhere.status, 404);
}

/// Starts the server with `args` on `db`, expects it to refuse them, and returns what it
/// said on stderr.
fn refused(db: &common::TempDb, args: &[&std::ffi::OsStr]) -> String {
    let output = Command::new(common::BIN)
        .env_remove("TASKS_HTTP_TOKENS_FILE")
        .arg("--db")
        .arg(&db.path)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn serving_beyond_loopback_without_tokens_is_refused_naming_the_option() {
    let db = common::TempDb::new();
    let stderr = refused(&db, &["--http".as_ref(), "0.0.0.0:0".as_ref()]);
    assert!(
        stderr.contains("without tokens") && stderr.contains("--http-tokens"),
        "{stderr}"
    );
    assert!(
        !db.path.exists(),
        "nothing is opened before the options are checked"
    );
}

#[test]
fn a_bad_tokens_file_is_refused_with_every_problem_by_line() {
    let db = common::TempDb::new();
    let tokens = db.dir.path().join("tokens");
    std::fs::write(&tokens, "alice tiny-secret\nbob\n").unwrap();
    let args = [
        "--http".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--http-tokens".as_ref(),
        tokens.as_os_str(),
    ];
    let stderr = refused(&db, &args);
    assert!(
        stderr.contains("line 1:") && stderr.contains("line 2:"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("tiny-secret"),
        "a token is never printed: {stderr}"
    );
}

#[test]
fn sigterm_ends_the_server_cleanly() {
    let mut server = HttpServer::start(&[]);
    let _session = server.post(&[], &initialize(1));
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    assert!(
        TcpStream::connect(server.addr).is_err(),
        "nothing listens any more"
    );
}

/// The `_meta` a 2026-07-28 request carries, declaring the SEP-2663 task extension.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "http-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        }
    })
}

/// The headers of a 2026-07-28 request, which names its method, and its tool or task,
/// in headers too.
fn modern_headers(method: &str, name: &str) -> [String; 3] {
    [
        "MCP-Protocol-Version: 2026-07-28".to_owned(),
        format!("Mcp-Method: {method}"),
        format!("Mcp-Name: {name}"),
    ]
}

/// Starts an inline workflow as a SEP-2663 task, statelessly; returns the task's id.
fn start_modern_task(server: &HttpServer, definition: Value) -> String {
    start_modern_task_as(server, &[], definition)
}

/// [`start_modern_task`] with these extra headers (a bearer token, say).
fn start_modern_task_as(server: &HttpServer, extra: &[String], definition: Value) -> String {
    let start = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "run_workflow", "_meta": modern_meta(),
        "arguments": {"definition": definition}}});
    let mut headers = modern_headers("tools/call", "run_workflow").to_vec();
    headers.extend_from_slice(extra);
    let created = server.post(&headers, &start);
    assert_eq!(
        created.header("mcp-session-id"),
        None,
        "no session in 2026-07-28"
    );
    let created = created.response(1);
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"].as_str().unwrap().to_owned()
}

/// A SEP-2663 `tasks/get` of `task_id`: the task with its inlined result.
fn get_modern_task(server: &HttpServer, task_id: &str) -> Value {
    get_modern_task_as(server, &[], task_id)
}

fn get_modern_task_as(server: &HttpServer, extra: &[String], task_id: &str) -> Value {
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get",
                     "params": {"taskId": task_id, "_meta": modern_meta()}});
    let mut headers = modern_headers("tasks/get", task_id).to_vec();
    headers.extend_from_slice(extra);
    server.post(&headers, &get).response(2)
}

#[test]
fn a_stateless_2026_07_28_client_runs_a_workflow_as_a_task_and_polls_it_to_its_result() {
    let server = HttpServer::start(&[]);
    let definition = json!({"name": "hello", "nodes": {"hi": {"render": "hi over HTTP"}}});
    let task_id = start_modern_task(&server, definition);

    let started = std::time::Instant::now();
    let done = loop {
        let reply = get_modern_task(&server, &task_id);
        if reply["result"]["status"] == "completed" {
            break reply;
        }
        assert_eq!(reply["result"]["status"], "working", "{reply}");
        assert!(started.elapsed() < DEADLINE, "the run never finished");
        std::thread::sleep(Duration::from_millis(20));
    };
    let data = &done["result"]["result"]["structuredContent"]["data"];
    assert_eq!(data["status"], "succeeded", "{done}");
    assert_eq!(data["nodes"]["hi"]["output"], "hi over HTTP");
}

#[test]
fn sigterm_gives_up_the_runs_the_server_drives_for_another_process_to_take() {
    let mut server = HttpServer::start(&[]);
    let task_id = start_modern_task(&server, json!({"nodes": {"sleep": {"wait": "30s"}}}));
    assert_eq!(
        get_modern_task(&server, &task_id)["result"]["status"],
        "working"
    );
    let store = common::read_only(&server.db.path);
    let lease = || {
        store
            .lease_owner(&task_id)
            .unwrap()
            .expect("the run is recorded")
    };
    assert!(
        lease().is_some(),
        "the driving server holds the run's lease"
    );

    server.terminate();
    assert_eq!(
        lease(),
        None,
        "the lease is released at shutdown, not left to expire"
    );
}

#[test]
fn a_session_beyond_the_cap_is_refused_until_one_closes() {
    let server = HttpServer::start(&["--http-max-sessions", "2"]);
    let first = server.post(&[], &initialize(1));
    let second = server.post(&[], &initialize(1));
    assert_eq!((first.status, second.status), (200, 200));
    let third = server.post(&[], &initialize(1));
    assert_eq!(third.status, 503, "{}", third.body);
    assert_eq!(third.header("retry-after"), Some("5"));
    assert!(
        third.body.contains("too many open sessions"),
        "{}",
        third.body
    );

    let session = first.header("mcp-session-id").unwrap();
    let closed = server.send(
        &format!(
            "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: {session}\r\n\
             MCP-Protocol-Version: 2025-11-25"
        ),
        "",
    );
    assert!(closed.status < 300, "{} {}", closed.status, closed.body);
    assert_eq!(server.post(&[], &initialize(1)).status, 200);
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[test]
fn a_2025_11_25_session_gets_workflow_runs_as_tasks_in_that_protocols_shapes() {
    let server = HttpServer::start(&[]);
    let (session, init) = open_session_as(&server, vec![]);
    let capabilities = &init["capabilities"];
    assert_eq!(
        capabilities["tasks"]["requests"],
        json!({"tools": {"call": {}}}),
        "{init}"
    );
    assert!(
        capabilities["extensions"]["io.modelcontextprotocol/tasks"].is_null(),
        "{init}"
    );

    let tools = server.post(&session, &request(2, "tools/list", json!({})));
    let tools = tools.response(2)["result"]["tools"].clone();
    let run_workflow = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "run_workflow")
        .expect("run_workflow is listed");
    assert_eq!(run_workflow["execution"]["taskSupport"], "optional");
    assert!(
        !tools.to_string().contains("x-mcp-task-server"),
        "the handler's mark never reaches a client: {tools}"
    );

    let definition = json!({"nodes": {"hi": {"render": "hi from a legacy task"}}});
    let params = json!({"name": "run_workflow", "arguments": {"definition": definition},
                        "task": {"ttl": 60000}});
    let created = server.post(&session, &request(3, "tools/call", params));
    let task = created.response(3)["result"]["task"].clone();
    let task_id = task["taskId"]
        .as_str()
        .expect("a task is created")
        .to_owned();
    assert!(task["ttl"].is_number(), "{task}");

    let started = std::time::Instant::now();
    loop {
        let got = server.post(
            &session,
            &request(4, "tasks/get", json!({"taskId": task_id})),
        );
        let status = got.response(4)["result"]["status"].clone();
        if status == "completed" {
            break;
        }
        assert_eq!(status, "working", "{}", got.body);
        assert!(started.elapsed() < DEADLINE, "the run never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    let result = server.post(
        &session,
        &request(5, "tasks/result", json!({"taskId": task_id})),
    );
    let result = result.response(5)["result"].clone();
    let data = &result["structuredContent"]["data"];
    assert_eq!(
        data["nodes"]["hi"]["output"], "hi from a legacy task",
        "{result}"
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        json!(task_id)
    );
}

#[test]
fn an_oversized_body_is_refused_and_the_server_goes_on_serving() {
    let server = HttpServer::start(&[]);
    let session = open_session_as(&server, vec![]).0;
    let title = "x".repeat(5 * 1024 * 1024);
    let refused = server.post(&session, &call(2, "add_task", json!({"title": title})));
    assert_eq!(refused.status, 413, "{}", refused.body);
    assert!(refused.body.contains("exceeds"), "{}", refused.body);

    let added = server.post(&session, &call(3, "add_task", json!({"title": "after"})));
    let result = &added.response(3)["result"];
    assert_eq!(result["structuredContent"]["ok"], json!(true), "{result}");
}

/// Starts an inline workflow as a 2025-11-25 task in `session`; returns the task's id.
fn start_legacy_task(server: &HttpServer, session: &[String], definition: Value) -> String {
    let params = json!({"name": "run_workflow", "arguments": {"definition": definition},
                        "task": {"ttl": 60000}});
    let created = server.post(session, &request(3, "tools/call", params));
    let created = created.response(3);
    created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task in {created}"))
        .to_owned()
}

/// The ids `tasks/list` gives `session`.
fn listed_task_ids(server: &HttpServer, session: &[String]) -> Vec<String> {
    let listed = server.post(session, &request(9, "tasks/list", json!({})));
    let listed = listed.response(9);
    listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("a list of tasks in {listed}"))
        .iter()
        .map(|task| task["taskId"].as_str().unwrap().to_owned())
        .collect()
}

/// The run ids `list_runs` gives a caller with these headers.
fn listed_run_ids(server: &HttpServer, headers: &[String]) -> Vec<String> {
    let listed = server.post(headers, &call(8, "list_runs", json!({})));
    let listed = listed.response(8);
    let data = &listed["result"]["structuredContent"]["data"];
    data.as_array()
        .unwrap_or_else(|| panic!("a list of runs in {listed}"))
        .iter()
        .map(|run| run["runId"].as_str().unwrap().to_owned())
        .collect()
}

const WAIT: &str = "30s";

#[test]
fn with_tokens_each_principals_tasks_are_unknown_to_the_other_and_listings_do_not_leak() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);
    let waiting = json!({"nodes": {"sleep": {"wait": WAIT}}});
    let legacy = start_legacy_task(&server, &alice, waiting.clone());
    let modern = start_modern_task_as(&server, &[bearer(ALICE)], waiting);

    // Bob asks for Alice's tasks by id, in both protocols: unknown, as for no such task.
    let got = server.post(&bob, &request(4, "tasks/get", json!({"taskId": legacy})));
    assert_eq!(got.response(4)["error"]["code"], -32602, "{}", got.body);
    let cancel = server.post(&bob, &request(5, "tasks/cancel", json!({"taskId": legacy})));
    assert_eq!(
        cancel.response(5)["error"]["code"],
        -32602,
        "{}",
        cancel.body
    );
    let got = get_modern_task_as(&server, &[bearer(BOB)], &modern);
    assert_eq!(got["error"]["code"], -32602, "{got}");
    let run = server.post(&bob, &call(6, "get_run", json!({"run_id": legacy})));
    let run = &run.response(6)["result"]["structuredContent"];
    assert_eq!(run["error"]["code"], "not_found", "{run}");

    // Listings show each principal its own.
    assert_eq!(listed_task_ids(&server, &bob), Vec::<String>::new());
    // A run's task comes first, its sub-tasks after it.
    assert_eq!(listed_task_ids(&server, &alice)[0], legacy);
    assert_eq!(listed_run_ids(&server, &bob), Vec::<String>::new());
    let mut alices = listed_run_ids(&server, &alice);
    alices.sort();
    let mut expected = vec![legacy.clone(), modern.clone()];
    expected.sort();
    assert_eq!(alices, expected);

    // Alice still reaches her own, and the audit log names who did what.
    let got = get_modern_task_as(&server, &[bearer(ALICE)], &modern);
    assert_eq!(got["result"]["status"], "working", "{got}");
    let rows = common::audit_rows(&server.db.path);
    let started: Vec<_> = rows
        .iter()
        .filter(|row| row.tool == "run_workflow")
        .map(|row| (row.run_id.clone().unwrap(), row.principal.as_deref()))
        .collect();
    assert!(
        started.contains(&(legacy.clone(), Some("alice"))),
        "{started:?}"
    );
    assert!(
        started.contains(&(modern.clone(), Some("alice"))),
        "{started:?}"
    );
    let bobs: Vec<&str> = rows
        .iter()
        .filter(|row| row.principal.as_deref() == Some("bob"))
        .map(|row| row.tool.as_str())
        .collect();
    assert_eq!(bobs, ["get_run", "list_runs"], "{rows:?}");
}

#[test]
fn without_tokens_another_session_polls_a_task_by_its_id_but_does_not_see_it_listed() {
    let server = HttpServer::start(&[]);
    let first = open_session_as(&server, vec![]).0;
    let second = open_session_as(&server, vec![]).0;
    let task_id = start_legacy_task(&server, &first, json!({"nodes": {"sleep": {"wait": WAIT}}}));

    let got = server.post(
        &second,
        &request(4, "tasks/get", json!({"taskId": task_id})),
    );
    assert_eq!(
        got.response(4)["result"]["taskId"],
        json!(task_id),
        "{}",
        got.body
    );
    assert_eq!(listed_task_ids(&server, &second), Vec::<String>::new());
    assert_eq!(listed_task_ids(&server, &first)[0], task_id);
    assert_eq!(listed_run_ids(&server, &second), Vec::<String>::new());
    // A stateless request belongs to no session, and lists what was started in none.
    let stateless = start_modern_task(&server, json!({"nodes": {"sleep": {"wait": WAIT}}}));
    assert_eq!(listed_run_ids(&server, &first), [task_id]);
    let listed = server.post(
        &modern_headers("tools/call", "list_runs"),
        &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
            "name": "list_runs", "arguments": {}, "_meta": modern_meta()}}),
    );
    let data = &listed.response(8)["result"]["structuredContent"]["data"];
    let ids: Vec<&str> = data
        .as_array()
        .unwrap_or_else(|| panic!("{}", listed.body))
        .iter()
        .map(|run| run["runId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [stateless.as_str()]);
}

#[test]
fn a_stream_beyond_the_cap_is_refused_until_one_closes() {
    let server = HttpServer::start(&["--http-max-streams", "1"]);
    let session = open_session_as(&server, vec![]).0;
    // The session's standalone stream, held open.
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut head = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream",
        server.addr.port()
    );
    for header in &session {
        head.push_str("\r\n");
        head.push_str(header);
    }
    stream
        .write_all(format!("{head}\r\n\r\n").as_bytes())
        .unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        seen.push(byte[0]);
    }
    let status = String::from_utf8_lossy(&seen);
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");

    let refused = server.post(&session, &request(2, "tools/list", json!({})));
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(
        refused.body.contains("too many open streams"),
        "{}",
        refused.body
    );
    assert_eq!(refused.header("retry-after"), Some("5"));

    drop(stream);
    let started = std::time::Instant::now();
    loop {
        let listed = server.post(&session, &request(3, "tools/list", json!({})));
        if listed.status == 200 {
            assert!(listed.response(3)["result"]["tools"].is_array());
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the closed stream's permit never came back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_principal_with_as_many_runs_as_allowed_is_refused_another_and_others_are_not() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}", "--http-max-runs", "1"]);
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);
    let waiting = json!({"nodes": {"sleep": {"wait": WAIT}}});
    start_legacy_task(&server, &alice, waiting.clone());

    let params = json!({"name": "run_workflow", "arguments": {"definition": waiting.clone()},
                        "task": {"ttl": 60000}});
    let refused = server.post(&alice, &request(4, "tools/call", params));
    let refused = refused.response(4);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(
        refused["error"]["data"]["error"]["code"], "too_many_runs",
        "{refused}"
    );
    let sync = call(5, "run_workflow", json!({"definition": waiting.clone()}));
    let sync = server.post(&alice, &sync).response(5);
    assert_eq!(sync["result"]["isError"], true, "{sync}");
    assert_eq!(
        sync["result"]["structuredContent"]["error"]["code"],
        "too_many_runs"
    );
    // Todo calls are not runs, and another principal has a quota of its own.
    let added = server.post(&alice, &call(6, "add_task", json!({"title": "still fine"})));
    assert_eq!(added.response(6)["result"]["isError"], false);
    start_legacy_task(&server, &bob, waiting);
    let rejected = common::audit_rows(&server.db.path)
        .into_iter()
        .filter(|row| row.outcome == "rejected")
        .map(|row| (row.tool, row.principal))
        .collect::<Vec<_>>();
    let alice = Some("alice".to_owned());
    assert_eq!(
        rejected,
        [
            ("run_workflow".to_owned(), alice.clone()),
            ("run_workflow".to_owned(), alice)
        ]
    );
}
