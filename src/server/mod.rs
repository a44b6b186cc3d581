//! The MCP protocol adapter: the only code that knows rmcp and JSON-RPC.
//!
//! `tools/list` and `tools/call` are implemented by hand on the `ServerHandler` (no
//! `#[tool]` macros, no typed parameters) so that the raw wire arguments reach our own
//! validator untouched, and rejected calls are audited like any other.

mod caller;
mod calls;
mod handler;
pub mod http;
mod interaction;
mod progress;
mod results;
mod slots;
mod tasks;
pub(crate) mod wire;

pub use wire::DEFAULT_WRITE_QUEUE;

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use anyhow::Context;
use rmcp::ServiceExt;

use crate::app::App;

/// The MCP server: cheap to clone, one per connection.
#[derive(Clone)]
pub struct Server {
    app: App,
    /// The cancel tokens of the runs that `tools/call` requests wait on, by request id.
    ///
    /// A run is cancelled by the client's `notifications/cancelled`, not by the request's
    /// own token: rmcp cancels that one too when the client hangs up, and a run whose
    /// caller is gone finishes its work (it is durable; nobody else may want it stopped).
    runs: Arc<parking_lot::Mutex<HashMap<String, CancellationToken>>>,
    /// A slot for each `tasks/result` request waiting, capped in all and per principal
    /// (served over HTTP).
    result_waits: Option<Arc<slots::Slots>>,
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
    /// The MCP face of `app`.
    pub fn new(app: App) -> Server {
        Server {
            app,
            runs: Arc::default(),
            result_waits: None,
            write_queue: wire::DEFAULT_WRITE_QUEUE,
        }
    }

    /// Bounds a stdio session's queue of replies waiting for the client to read them, in
    /// bytes: past it, the server waits for the client before it reads the next request.
    pub fn with_write_queue(mut self, bytes: u32) -> Server {
        self.write_queue = bytes.max(1);
        self
    }

    /// Serves MCP on this process's stdin and stdout until the client hangs up.
    pub async fn serve_stdio(self) -> anyhow::Result<()> {
        // `stdio_pipes` keeps reads and writes on the IO reactor when the client gave us
        // pipes, saving a blocking-pool hand-off per message.
        let (read, write) = rmcp::transport::stdio_pipes();
        self.serve_on(read, write, CancellationToken::new()).await
    }

    /// Serves MCP on one end of an in-memory byte stream, and returns the other end: the
    /// server as `serve` runs it, in this process, until the client hangs up or `shutdown`
    /// is cancelled.
    pub fn serve_in_memory(
        self,
        shutdown: CancellationToken,
    ) -> (
        tokio::io::DuplexStream,
        tokio::task::JoinHandle<anyhow::Result<()>>,
    ) {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (read, write) = tokio::io::split(server);
        (client, tokio::spawn(self.serve_on(read, write, shutdown)))
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
            wire::WireTransport::new(read, write, true, self.write_queue).with_lane(self.clone());
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
