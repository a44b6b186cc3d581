//! The `mcp-task-server` binary: command-line parsing and wiring, nothing else.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use mcp_task_server::server::Server;
use mcp_task_server::store::Store;
use mcp_task_server::tools::Tools;
use tracing_subscriber::EnvFilter;

/// A task manager and DAG workflow engine, served over MCP on stdio.
///
/// With no subcommand, serves MCP on stdin/stdout: point an MCP client at this binary.
/// Logs go to stderr; set RUST_LOG (e.g. RUST_LOG=debug) for more detail.
#[derive(Parser)]
#[command(version, about, long_about)]
struct Cli {
    /// SQLite database file (created if missing); may be a SQLite `file:` URI.
    #[arg(long, env = "TASKS_DB_PATH", default_value = "tasks.db", global = true)]
    db: PathBuf,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdio (the default).
    Serve,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,rmcp=warn".into()),
        )
        .init();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let store = Store::open(&cli.db)?;
            if store.is_read_only() {
                tracing::warn!(db = %cli.db.display(), "database is read-only: writes will fail");
            }
            tracing::info!(db = %cli.db.display(), "serving MCP on stdio");
            runtime.block_on(Server::new(Tools::new(store)).serve_stdio())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
