//! The MCP protocol adapter: the only code that knows rmcp and JSON-RPC.
//!
//! `tools/list` and `tools/call` are implemented by hand on the `ServerHandler` (no
//! `#[tool]` macros, no typed parameters) so that the raw wire arguments reach our own
//! validator untouched, and rejected calls are audited like any other.

mod handler;
mod results;

use anyhow::Context;
use rmcp::ServiceExt;

use crate::tools::Tools;

/// The MCP server: cheap to clone, one per connection.
#[derive(Clone)]
pub struct Server {
    tools: Tools,
}

impl Server {
    pub fn new(tools: Tools) -> Server {
        Server { tools }
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
