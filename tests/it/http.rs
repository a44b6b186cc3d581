//! MCP over Streamable HTTP, end to end: the server binary with `--http`, spoken to with
//! plain HTTP/1.1 requests, so that each test shows the exact status, headers and events a
//! client gets: the gate (tokens, hosts, limits, shutdown) in `gate.rs`, tokens and
//! their reload in `tokens.rs`, connections that misbehave before any token in
//! `connections.rs`, tasks and who owns them in `tasks.rs`, what principals cannot do to
//! each other (sessions, caps, idempotency keys) in `principals.rs`, the spans and metrics
//! exported and `/metrics` in `telemetry.rs`, what a `history` node
//! of one principal's run reads of another's and costs in `history.rs`, what the built-in
//! workflows remember of another's runs in `workflow_memory.rs`, what one principal can
//! read or answer of another's bootstrap validation loop in `bootstrap.rs`, the ADR and
//! troubleshooting workflows followed, answered and cancelled from the dashboard in
//! `dashboard_workflows.rs`, and a load test in `load.rs`.

mod adr_validation;
mod bootstrap;
mod cancel;
mod connections;
mod dashboard;
mod dashboard_workflows;
mod gate;
mod history;
mod load;
mod principals;
mod resources;
mod tasks;
mod telemetry;
mod tokens;
mod workflow_memory;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support;

const DEADLINE: Duration = Duration::from_secs(10);

const ALICE: &str = "alice-7f3a9c2e5b8d1f4a6c0e9b3d7a2f5c8e";

const BOB: &str = "bob-e1c4b7a0d3f6c9b2e5a8d1f4c7b0a3e6";

/// The server serving HTTP on a loopback port of its own choosing.
struct HttpServer {
    child: Child,
    addr: SocketAddr,
    db: support::TempDb,
}

/// Writes a tokens file only its owner may read, as the server requires.
fn write_private(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

impl HttpServer {
    /// With `--http-tokens {tokens}` in `extra`, the tokens of alice and bob are needed;
    /// without, the server serves with `--http-no-auth`.
    fn start(extra: &[&str]) -> HttpServer {
        HttpServer::start_at(None, extra)
    }

    /// [`HttpServer::start`] on the database of `place`, SQLite or PostgreSQL.
    fn start_on(place: &support::backends::Place, extra: &[&str]) -> HttpServer {
        HttpServer::start_at(Some(place.location()), extra)
    }

    fn start_at(location: Option<String>, extra: &[&str]) -> HttpServer {
        HttpServer::start_with_env(location, extra, &[])
    }

    /// [`HttpServer::start_at`] with these variables set.
    fn start_with_env(
        location: Option<String>,
        extra: &[&str],
        env: &[(&str, String)],
    ) -> HttpServer {
        let mut extra = extra.to_vec();
        if !extra.contains(&"--http-tokens") {
            extra.push("--http-no-auth");
        }
        let mut db = support::TempDb::new();
        if let Some(location) = location {
            db.path = location.into();
        }
        let mut command = HttpServer::command(&db, &extra);
        command.envs(env.iter().map(|(name, value)| (name, value)));
        let mut child = command.spawn().expect("start the server");
        let addr = support::listening_address(child.stderr.take().unwrap());
        HttpServer { child, addr, db }
    }

    /// The server's command line with `extra`, in which `{tokens}` names a tokens file of
    /// alice and bob; its stdout and stderr piped.
    fn command(db: &support::TempDb, extra: &[&str]) -> Command {
        let tokens = db.dir.path().join("tokens");
        write_private(
            &tokens,
            &format!("# test tokens\nalice {ALICE}\nbob {BOB}\n"),
        );
        let mut command = Command::new(support::BIN);
        command
            .env_remove("TASKS_DB_PATH")
            .env_remove("TASKS_HTTP")
            .env_remove("TASKS_HTTP_TOKENS_FILE")
            .env_remove("TASKS_HTTP_NO_AUTH")
            .env("RUST_LOG", "info")
            .envs(support::stdio::OTEL_VARIABLES.map(|name| (name, "")))
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
        command
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

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Starts an inline workflow as a 2025-11-25 task in `session`; returns the task's id.
fn start_2025_task(server: &HttpServer, session: &[String], definition: Value) -> String {
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
