//! The built server binary as a child process, driven by an rmcp client over its stdin
//! and stdout; and the checks every tool result's envelope must pass.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tempfile::TempDir;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio::task::JoinHandle;

use super::BIN;

/// An MCP client connected to the server's stdio; `H` handles what the server sends it.
pub(crate) type Client<H = ()> = RunningService<RoleClient, H>;

/// How long any single wait on the child may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(10);

/// A temporary directory holding a database path (the file itself is created by the server).
pub(crate) struct TempDb {
    pub(crate) dir: TempDir,
    pub(crate) path: PathBuf,
}

impl TempDb {
    pub(crate) fn new() -> TempDb {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let path = dir.path().join("tasks.db");
        TempDb { dir, path }
    }
}

/// A running server: the client, the database it was started on, and its stderr.
pub(crate) struct Server<H: ClientHandler = ()> {
    pub(crate) client: Client<H>,
    pub(crate) db: PathBuf,
    stderr: Arc<Mutex<String>>,
    stderr_reader: JoinHandle<()>,
    _temp: Option<TempDb>,
}

/// A command for the server binary with a predictable environment: no inherited database
/// path, HTTP address, log filter or telemetry, and a working directory where a stray
/// default `tasks.db` is harmless.
pub(crate) fn server_command(cwd: &Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .env_remove("TASKS_DB_PATH")
        .env_remove("TASKS_HTTP")
        .env_remove("RUST_LOG")
        .current_dir(cwd);
    for name in OTEL_VARIABLES {
        command.env_remove(name);
    }
    command
}

/// The variables that would turn the server's telemetry on, which a test sets itself when
/// it means to.
pub(crate) const OTEL_VARIABLES: [&str; 5] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
];

impl Server {
    /// Starts the server on a fresh database in its own temporary directory.
    pub(crate) async fn start() -> Server {
        let temp = TempDb::new();
        let mut server = Server::start_on(&temp.path).await;
        server._temp = Some(temp);
        server
    }

    /// Starts the server on a fresh database in its own temporary directory, with `args`
    /// after `--db` (e.g. `--workflows <dir>`).
    pub(crate) async fn start_with_args(args: &[&OsStr]) -> Server {
        let temp = TempDb::new();
        let mut command = server_command(temp.dir.path());
        command.arg("--db").arg(&temp.path).args(args);
        let mut server = Server::spawn(command, temp.path.clone()).await;
        server._temp = Some(temp);
        server
    }

    /// Starts the server with `--db <db>`.
    pub(crate) async fn start_on(db: &Path) -> Server {
        Server::start_with_db_arg(db.as_os_str(), db).await
    }

    /// Starts the server with `--db <db_arg>`, where `db_arg` may be a `file:` URI for `db`.
    pub(crate) async fn start_with_db_arg(db_arg: &OsStr, db: &Path) -> Server {
        let cwd = db.parent().expect("the database lives in a directory");
        let mut command = server_command(cwd);
        command.arg("--db").arg(db_arg);
        Server::spawn(command, db.to_path_buf()).await
    }

    /// Spawns `command` (the server binary), connects a client and starts collecting stderr.
    /// `db` is the database file the command is expected to use.
    pub(crate) async fn spawn(command: Command, db: PathBuf) -> Server {
        Server::spawn_with(command, db, ()).await
    }
}

impl<H: ClientHandler> Server<H> {
    /// [`Server::spawn`] with a client whose `handler` receives the server's notifications.
    pub(crate) async fn spawn_with(command: Command, db: PathBuf, handler: H) -> Server<H> {
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
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Closes the connection and waits for the child to exit; the database stays on disk
    /// for as long as the returned value lives.
    pub(crate) async fn stop(self) -> Stopped {
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
pub(crate) struct Stopped {
    pub(crate) stderr: String,
    pub(crate) db: PathBuf,
    _temp: Option<TempDb>,
}

/// Calls tool `name` with `args` (a JSON object); a protocol-level failure is an `Err`.
pub(crate) async fn try_call(
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
pub(crate) async fn call(client: &Client, name: &str, args: Value) -> CallToolResult {
    try_call(client, name, args)
        .await
        .unwrap_or_else(|e| panic!("tools/call {name} failed at the protocol level: {e}"))
}

/// The `{ok, ...}` envelope of a result, after checking that it is carried consistently:
/// as `structuredContent`, as the only (text) content block holding the same JSON, and
/// with `isError` set exactly when `ok` is false.
pub(crate) fn envelope(result: &CallToolResult) -> Value {
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
pub(crate) fn expect_ok(result: &CallToolResult) -> Value {
    let envelope = envelope(result);
    assert_eq!(envelope["ok"], true, "expected success, got {envelope:#}");
    envelope["data"].clone()
}

/// The error message of a failed result with error code `code`.
pub(crate) fn expect_error(result: &CallToolResult, code: &str) -> String {
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
