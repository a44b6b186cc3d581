//! Harness for end-to-end tests: the built server binary as a child process, driven by an
//! rmcp client over its stdin and stdout.

// Each test binary that includes this module uses its own subset of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use mcp_task_server::store::AuditRow;
use mcp_task_server::store::{Store, TodoFilter};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tempfile::TempDir;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio::task::JoinHandle;

/// The server binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_mcp-task-server");

/// An MCP client connected to the server's stdio; `H` handles what the server sends it.
pub type Client<H = ()> = RunningService<RoleClient, H>;

/// How long any single wait on the child may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(10);

/// A temporary directory holding a database path (the file itself is created by the server).
pub struct TempDb {
    pub dir: TempDir,
    pub path: PathBuf,
}

impl TempDb {
    pub fn new() -> TempDb {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let path = dir.path().join("tasks.db");
        TempDb { dir, path }
    }
}

/// A running server: the client, the database it was started on, and its stderr.
pub struct Server<H: ClientHandler = ()> {
    pub client: Client<H>,
    pub db: PathBuf,
    stderr: Arc<Mutex<String>>,
    stderr_reader: JoinHandle<()>,
    _temp: Option<TempDb>,
}

/// A command for the server binary with a predictable environment: no inherited database
/// path, HTTP address or log filter, and a working directory where a stray default `tasks.db` is harmless.
pub fn server_command(cwd: &Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .env_remove("TASKS_DB_PATH")
        .env_remove("TASKS_HTTP")
        .env_remove("RUST_LOG")
        .current_dir(cwd);
    command
}

impl Server {
    /// Starts the server on a fresh database in its own temporary directory.
    pub async fn start() -> Server {
        let temp = TempDb::new();
        let mut server = Server::start_on(&temp.path).await;
        server._temp = Some(temp);
        server
    }

    /// Starts the server on a fresh database in its own temporary directory, with `args`
    /// after `--db` (e.g. `--workflows <dir>`).
    pub async fn start_with_args(args: &[&OsStr]) -> Server {
        let temp = TempDb::new();
        let mut command = server_command(temp.dir.path());
        command.arg("--db").arg(&temp.path).args(args);
        let mut server = Server::spawn(command, temp.path.clone()).await;
        server._temp = Some(temp);
        server
    }

    /// Starts the server with `--db <db>`.
    pub async fn start_on(db: &Path) -> Server {
        Server::start_with_db_arg(db.as_os_str(), db).await
    }

    /// Starts the server with `--db <db_arg>`, where `db_arg` may be a `file:` URI for `db`.
    pub async fn start_with_db_arg(db_arg: &OsStr, db: &Path) -> Server {
        let cwd = db.parent().expect("the database lives in a directory");
        let mut command = server_command(cwd);
        command.arg("--db").arg(db_arg);
        Server::spawn(command, db.to_path_buf()).await
    }

    /// Spawns `command` (the server binary), connects a client and starts collecting stderr.
    /// `db` is the database file the command is expected to use.
    pub async fn spawn(command: Command, db: PathBuf) -> Server {
        Server::spawn_with(command, db, ()).await
    }
}

impl<H: ClientHandler> Server<H> {
    /// [`Server::spawn`] with a client whose `handler` receives the server's notifications.
    pub async fn spawn_with(command: Command, db: PathBuf, handler: H) -> Server<H> {
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the server binary");
        let mut stderr = stderr.expect("stderr is piped");
        let collected = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&collected);
        let stderr_reader = tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            loop {
                match stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n])),
                }
            }
        });
        let client = tokio::time::timeout(DEADLINE, handler.serve(transport))
            .await
            .expect("the server answers initialize in time")
            .unwrap_or_else(|e| {
                panic!(
                    "MCP initialisation failed: {e}; stderr so far:\n{}",
                    collected.lock().unwrap()
                )
            });
        Server {
            client,
            db,
            stderr: collected,
            stderr_reader,
            _temp: None,
        }
    }

    /// What the server has written to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Closes the connection and waits for the child to exit; the database stays on disk
    /// for as long as the returned value lives.
    pub async fn stop(self) -> Stopped {
        tokio::time::timeout(DEADLINE, self.client.cancel())
            .await
            .expect("the client shuts down in time")
            .expect("the client task ends cleanly");
        tokio::time::timeout(DEADLINE, self.stderr_reader)
            .await
            .expect("the server closes stderr once it exits")
            .expect("the stderr reader ends cleanly");
        let stderr = self.stderr.lock().unwrap().clone();
        Stopped {
            stderr,
            db: self.db,
            _temp: self._temp,
        }
    }
}

/// A server that has exited: its whole stderr, and its database.
pub struct Stopped {
    pub stderr: String,
    pub db: PathBuf,
    _temp: Option<TempDb>,
}

/// Calls tool `name` with `args` (a JSON object); a protocol-level failure is an `Err`.
pub async fn try_call(
    client: &Client,
    name: &str,
    args: Value,
) -> Result<CallToolResult, ServiceError> {
    let Value::Object(args) = args else {
        panic!("tool arguments must be a JSON object, got {args}");
    };
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args);
    tokio::time::timeout(DEADLINE, client.call_tool(params))
        .await
        .expect("the server answers tools/call in time")
}

/// Calls tool `name` with `args`, failing the test on a protocol-level error.
pub async fn call(client: &Client, name: &str, args: Value) -> CallToolResult {
    try_call(client, name, args)
        .await
        .unwrap_or_else(|e| panic!("tools/call {name} failed at the protocol level: {e}"))
}

/// The `{ok, ...}` envelope of a result, after checking that it is carried consistently:
/// as `structuredContent`, as the only (text) content block holding the same JSON, and
/// with `isError` set exactly when `ok` is false.
pub fn envelope(result: &CallToolResult) -> Value {
    let wire = serde_json::to_value(result).expect("a result serialises");
    let structured = wire
        .get("structuredContent")
        .cloned()
        .unwrap_or_else(|| panic!("no structuredContent in {wire:#}"));
    let content = wire["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content array in {wire:#}"));
    assert_eq!(content.len(), 1, "exactly one content block in {wire:#}");
    assert_eq!(
        content[0]["type"], "text",
        "a text content block in {wire:#}"
    );
    let text = content[0]["text"]
        .as_str()
        .expect("text content is a string");
    let parsed: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("text content is not JSON ({e}): {text}"));
    assert_eq!(
        structured, parsed,
        "structuredContent and text content differ"
    );
    let ok = structured["ok"]
        .as_bool()
        .unwrap_or_else(|| panic!("envelope without a boolean ok: {structured:#}"));
    assert_eq!(
        result.is_error,
        Some(!ok),
        "isError must be {} for {structured:#}",
        !ok
    );
    let keys: Vec<&str> = structured
        .as_object()
        .expect("the envelope is an object")
        .keys()
        .map(String::as_str)
        .collect();
    if ok {
        assert_eq!(sorted(keys), ["data", "ok"], "success envelope keys");
    } else {
        assert_eq!(sorted(keys), ["error", "ok"], "failure envelope keys");
        let error = structured["error"].as_object().expect("error is an object");
        assert_eq!(
            sorted(error.keys().map(String::as_str).collect()),
            ["code", "message"],
            "error keys"
        );
        assert!(error["code"].is_string() && error["message"].is_string());
    }
    structured
}

fn sorted(mut keys: Vec<&str>) -> Vec<&str> {
    keys.sort_unstable();
    keys
}

/// The `data` of a successful result; fails the test on a failed one.
pub fn expect_ok(result: &CallToolResult) -> Value {
    let envelope = envelope(result);
    assert_eq!(envelope["ok"], true, "expected success, got {envelope:#}");
    envelope["data"].clone()
}

/// The error message of a failed result with error code `code`.
pub fn expect_error(result: &CallToolResult, code: &str) -> String {
    let envelope = envelope(result);
    assert_eq!(
        envelope["ok"], false,
        "expected a failure, got {envelope:#}"
    );
    assert_eq!(
        envelope["error"]["code"], code,
        "unexpected error code in {envelope:#}"
    );
    envelope["error"]["message"]
        .as_str()
        .expect("message is a string")
        .to_owned()
}

/// Every audit row of the database at `db`, in order of writing, read through the store
/// opened read-only (the server may still have it open).
pub fn audit_rows(db: &Path) -> Vec<AuditRow> {
    read_only(db).audit_rows().expect("read the audit log")
}

/// The store at `db`, opened read-only (the server may still have it open).
pub fn read_only(db: &Path) -> Store {
    let uri = format!("file:{}?mode=ro", db.display());
    Store::open(&uri).unwrap_or_else(|e| panic!("open {} read-only: {e}", db.display()))
}

/// The titles in the `tasks` table of the database at `db`, in id order.
pub fn task_titles(db: &Path) -> Vec<String> {
    read_only(db)
        .list_todos(&TodoFilter::default())
        .expect("read the todos")
        .into_iter()
        .map(|todo| todo.title)
        .collect()
}

/// Every todo of the database at `db` as (title, tags), sorted.
pub fn sorted_todos(db: &Path) -> Vec<(String, Vec<String>)> {
    let mut todos: Vec<(String, Vec<String>)> = read_only(db)
        .list_todos(&TodoFilter::default())
        .expect("read the todos")
        .into_iter()
        .map(|todo| (todo.title, todo.tags))
        .collect();
    todos.sort();
    todos
}

/// The server binary on a fresh database, spoken to in raw JSON-RPC lines over its stdin
/// and stdout (no client library in between). Killed when dropped, and after two minutes
/// in any case, so that a server that never replies fails the test's read instead of
/// hanging it.
pub struct RawServer {
    child: std::process::Child,
    pub stdin: std::process::ChildStdin,
    pub stdout: std::io::BufReader<std::process::ChildStdout>,
    /// Set once the server is gone, so that the watchdog kills no process reusing its pid.
    gone: Arc<std::sync::atomic::AtomicBool>,
    _dir: TempDir,
}

impl RawServer {
    pub fn start() -> RawServer {
        use std::process::Stdio;
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let mut child = std::process::Command::new(BIN)
            .arg("--db")
            .arg(dir.path().join("tasks.db"))
            .env_remove("TASKS_DB_PATH")
            .env_remove("RUST_LOG")
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
        let pid = child.id().to_string();
        let gone: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let watched = Arc::clone(&gone);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(120));
            if !watched.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid])
                    .status();
            }
        });
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        RawServer {
            child,
            stdin,
            stdout,
            gone,
            _dir: dir,
        }
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.gone.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The address a server started with `--http` listens on, from what it logs on stderr.
pub fn listening_address(stderr: std::process::ChildStderr) -> std::net::SocketAddr {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            if !sent && let Some(at) = line.split("http://").nth(1) {
                let addr = at.split('/').next().unwrap().to_owned();
                sent = sender.send(addr).is_ok();
            }
        }
    });
    let addr = receiver
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the server logs the address it listens on");
    addr.parse().unwrap()
}
