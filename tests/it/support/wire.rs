//! A raw JSON-RPC client on an in-process server's byte stream, for tests that check
//! exact exchanges: it answers the server's requests with a function of the test's.

use std::sync::Arc;
use std::time::Duration;

use mcp_task_server::app::{App, Config};
use mcp_task_server::engine::Engine;
use mcp_task_server::engine::installed::Installed;
use mcp_task_server::runs::{Registry, RegistryConfig};
use mcp_task_server::server::Server;
use mcp_task_server::transport::stdio::serve_in_memory;
use serde_json::{Value, json};
use tokio::io::DuplexStream;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines, ReadHalf, WriteHalf};
use tokio_util::sync::CancellationToken;

use super::backends::Place;

pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// A raw JSON-RPC client on the server's byte stream.
pub(crate) struct Wire {
    write: WriteHalf<DuplexStream>,
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    /// Server requests and notifications seen while waiting for replies.
    pub(crate) seen: Vec<Value>,
    pub(crate) engine: Engine,
    pub(crate) registry: Arc<Registry>,
    pub(crate) dir: tempfile::TempDir,
    /// The database, kept while the server runs.
    _place: Place,
}

impl Wire {
    /// A server in this process on a fresh database, whose workspace is a temporary
    /// folder with `files` (name, text) in its workflows folder.
    pub(crate) fn start_in(config: RegistryConfig, files: &[(&str, &str)]) -> Wire {
        Wire::start_on(Place::sqlite(), config, files)
    }

    /// [`Wire::start_in`], on the database `place`.
    pub(crate) fn start_on(place: Place, config: RegistryConfig, files: &[(&str, &str)]) -> Wire {
        let dir = tempfile::tempdir().unwrap();
        let flows = dir.path().join("workflows");
        std::fs::create_dir(&flows).unwrap();
        for (name, text) in files {
            std::fs::write(flows.join(name), text).unwrap();
        }
        let (_, problems) = Installed::load(Some(&flows));
        assert!(problems.is_empty(), "{problems:?}");
        let app = App::open(&Config {
            workflows: Some(flows),
            registry: config,
            ..Config::new(place.location(), dir.path())
        })
        .expect("the application opens");
        let (engine, registry) = (app.engine().clone(), app.registry().clone());
        let (client_end, _serving) = serve_in_memory(Server::new(app), CancellationToken::new());
        let (read, write) = tokio::io::split(client_end);
        Wire {
            write,
            lines: BufReader::new(read).lines(),
            seen: Vec::new(),
            engine,
            registry,
            dir,
            _place: place,
        }
    }

    pub(crate) async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        self.write.write_all(line.as_bytes()).await.unwrap();
    }

    pub(crate) async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(DEADLINE, self.lines.next_line())
            .await
            .expect("the server answers in time")
            .unwrap()
            .expect("the server is still there");
        serde_json::from_str(&line).unwrap()
    }

    /// Sends a request and returns its reply; server requests met on the way are answered
    /// with `answer`.
    pub(crate) async fn request_answering(
        &mut self,
        id: i64,
        method: &str,
        params: Value,
        answer: &dyn Fn(&Value) -> Value,
    ) -> Value {
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        loop {
            let message = self.next().await;
            match (message.get("id"), message.get("method")) {
                (Some(got), None) if got == &json!(id) => return message,
                (Some(server_id), Some(_)) => {
                    let reply = answer(&message);
                    let reply = json!({ "jsonrpc": "2.0", "id": server_id, "result": reply });
                    self.seen.push(message);
                    self.send(reply).await;
                }
                _ => self.seen.push(message),
            }
        }
    }

    pub(crate) async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        let refuse = |_: &Value| json!({ "action": "cancel" });
        self.request_answering(id, method, params, &refuse).await
    }

    pub(crate) async fn initialize(&mut self, capabilities: Value) -> Value {
        let params = json!({ "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": { "name": "raw", "version": "1" } });
        let reply = self.request(0, "initialize", params).await;
        self.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        reply
    }

    /// Waits until the server has sent a message that `wanted` accepts (a notification
    /// may follow the reply it goes with).
    pub(crate) async fn await_seen(&mut self, wanted: impl Fn(&Value) -> bool) {
        while !self.seen.iter().any(&wanted) {
            let message = self.next().await;
            self.seen.push(message);
        }
    }

    /// Polls `tasks/get` until the task's status is `status`.
    pub(crate) async fn poll_until(&mut self, id: i64, params: Value, status: &str) -> Value {
        for _ in 0..200 {
            let reply = self.request(id, "tasks/get", params.clone()).await;
            if reply["result"]["status"] == status {
                return reply;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the task never became {status}");
    }
}

/// The names of the files in `dir`, sorted; none if it does not exist.
pub(crate) fn files_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}
