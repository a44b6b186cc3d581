//! The MCP protocol adapter: the only code that knows rmcp and JSON-RPC.
//!
//! `tools/list` and `tools/call` are implemented by hand on the `ServerHandler` (no
//! `#[tool]` macros, no typed parameters) so that the raw wire arguments reach our own
//! validator untouched, and rejected calls are audited like any other.

mod caller;
mod calls;
mod envelope;
mod handler;
pub mod http;
mod idempotency;
mod interaction;
mod progress;
mod results;
mod run_tools;
mod slots;
mod tasks;
pub(crate) mod wire;
mod workflow_tools;

pub use wire::DEFAULT_WRITE_QUEUE;
pub use workflow_tools::InlineWorkflows;

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use anyhow::Context;
use rmcp::ServiceExt;

use crate::engine::Engine;
use crate::engine::catalog::Catalog;
use crate::runs::Registry;

/// The MCP server: cheap to clone, one per connection.
#[derive(Clone)]
pub struct Server {
    engine: Engine,
    catalog: Arc<Catalog>,
    /// The cancel tokens of the runs that `tools/call` requests wait on, by request id.
    ///
    /// A run is cancelled by the client's `notifications/cancelled`, not by the request's
    /// own token: rmcp cancels that one too when the client hangs up, and a run whose
    /// caller is gone finishes its work (it is durable; nobody else may want it stopped).
    runs: Arc<std::sync::Mutex<HashMap<String, CancellationToken>>>,
    /// The task registry: with one, calls may become tasks, in both task protocols.
    registry: Option<Arc<Registry>>,
    /// Woken whenever a run that a task call started in this process ends.
    finished: Arc<tokio::sync::Notify>,
    /// Held from the lookup of an idempotency key to the start of the run it names, so
    /// that two calls with one key start one run.
    starting: Arc<std::sync::Mutex<()>>,
    /// At most this many unfinished runs per principal (served over HTTP with tokens).
    max_runs: Option<u64>,
    /// A slot for each `tasks/result` request waiting, capped in all and per principal
    /// (served over HTTP).
    result_waits: Option<Arc<slots::Slots>>,
    /// Whether `run_workflow` accepts a definition from the client.
    inline: InlineWorkflows,
    /// The bound of a stdio session's write queue, in bytes.
    write_queue: u32,
}

/// Whether a request speaks 2026-07-28 or later: stateless, with no requests from the
/// server to the client.
fn is_stateless(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> bool {
    context.protocol_version().is_some_and(|version| {
        version.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str()
    })
}

impl Server {
    pub fn new(engine: Engine, catalog: Catalog) -> Server {
        Server {
            engine,
            catalog: Arc::new(catalog),
            runs: Arc::default(),
            registry: None,
            finished: Arc::default(),
            starting: Arc::default(),
            max_runs: None,
            result_waits: None,
            inline: InlineWorkflows::On,
            write_queue: wire::DEFAULT_WRITE_QUEUE,
        }
    }

    /// Whether `run_workflow` accepts inline definitions (`--inline-workflows`).
    pub fn with_inline_workflows(mut self, inline: InlineWorkflows) -> Server {
        self.inline = inline;
        self
    }

    /// Bounds a stdio session's queue of replies waiting for the client to read them, in
    /// bytes: past it, the server waits for the client before it reads the next request.
    pub fn with_write_queue(mut self, bytes: u32) -> Server {
        self.write_queue = bytes.max(1);
        self
    }

    /// Serves runs as MCP tasks from `registry`, which must be the engine's journal.
    pub fn with_registry(mut self, registry: Arc<Registry>) -> Server {
        self.registry = Some(registry);
        self
    }

    fn lock_starting(&self) -> std::sync::MutexGuard<'_, ()> {
        self.starting.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Serves MCP on this process's stdin and stdout until the client hangs up.
    pub async fn serve_stdio(self) -> anyhow::Result<()> {
        // `stdio_pipes` keeps reads and writes on the IO reactor when the client gave us
        // pipes, saving a blocking-pool hand-off per message.
        let (read, write) = rmcp::transport::stdio_pipes();
        self.serve_on(read, write, CancellationToken::new()).await
    }

    /// Serves MCP on any byte stream pair (stdio, a socket, an in-process `duplex`) until
    /// the client hangs up or `shutdown` is cancelled.
    pub async fn serve_on<R, W>(
        self,
        read: R,
        write: W,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()>
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let transport =
            wire::WireTransport::new(read, write, self.registry.is_some(), self.write_queue)
                .with_lane(self.clone());
        let running = self
            .serve_with_ct(transport, shutdown)
            .await
            .context("MCP session failed to start")?;
        running
            .waiting()
            .await
            .context("MCP session ended abnormally")?;
        Ok(())
    }
}
