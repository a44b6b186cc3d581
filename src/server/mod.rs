//! The MCP protocol adapter: the only code that knows rmcp and JSON-RPC.
//!
//! `tools/list` and `tools/call` are implemented by hand on the `ServerHandler` (no
//! `#[tool]` macros, no typed parameters) so that the raw wire arguments reach our own
//! validator untouched, and rejected calls are audited like any other.

mod handler;
mod progress;
mod results;
mod workflow_tools;

use std::sync::Arc;

use anyhow::Context;
use rmcp::ServiceExt;

use crate::engine::Engine;
use crate::engine::catalog::Catalog;

/// The MCP server: cheap to clone, one per connection.
#[derive(Clone)]
pub struct Server {
    engine: Engine,
    catalog: Arc<Catalog>,
}

impl Server {
    pub fn new(engine: Engine, catalog: Catalog) -> Server {
        Server {
            engine,
            catalog: Arc::new(catalog),
        }
    }

    /// Serves MCP on this process's stdin and stdout until the client hangs up.
    pub async fn serve_stdio(self) -> anyhow::Result<()> {
        // `stdio_pipes` keeps reads and writes on the IO reactor when the client gave us
        // pipes, saving a blocking-pool hand-off per message.
        let running = self
            .serve(rmcp::transport::stdio_pipes())
            .await
            .context("MCP session failed to start")?;
        running
            .waiting()
            .await
            .context("MCP session ended abnormally")?;
        Ok(())
    }
}
