//! The `mcp-task-server` binary: command-line parsing and wiring, nothing else.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use mcp_task_server::cli::{self, RunArgs};
use mcp_task_server::engine::Engine;
use mcp_task_server::server::Server;
use mcp_task_server::store::Store;
use mcp_task_server::tools::Tools;
use tracing_subscriber::EnvFilter;

// mimalloc rather than the system allocator: workflow loading and scheduling allocate many
// small objects, and it roughly halved the time to load a large workflow (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A task manager and DAG workflow engine, served over MCP on stdio.
///
/// With no subcommand, serves MCP on stdin/stdout: point an MCP client at this binary.
/// Logs go to stderr; set RUST_LOG (e.g. RUST_LOG=debug) for more detail.
#[derive(Parser)]
#[command(version, about, long_about)]
struct Cli {
    #[command(flatten)]
    common: Common,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Args)]
struct Common {
    /// SQLite database file (created if missing); may be a SQLite `file:` URI.
    #[arg(long, env = "TASKS_DB_PATH", default_value = "tasks.db", global = true)]
    db: PathBuf,

    /// Folder of workflow files (*.toml), loaded beside the built-in workflows
    /// [default: ./workflows when it exists]
    #[arg(long, env = "TASKS_WORKFLOWS_DIR", global = true)]
    workflows: Option<PathBuf>,

    /// Root folder for `write_file` nodes; they cannot write outside it.
    #[arg(long, env = "TASKS_WORKSPACE", default_value = ".", global = true)]
    workspace: PathBuf,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdio (the default).
    Serve,
    /// List, check, show and run workflows from the terminal.
    #[command(subcommand)]
    Workflows(WorkflowsCommand),
}

#[derive(Subcommand)]
enum WorkflowsCommand {
    /// List the built-in workflows and those of the workflows folder.
    List,
    /// Check workflow files; every problem is printed on stderr with its file:line:column.
    /// Without paths, checks the built-in workflows and the workflows folder.
    Validate { paths: Vec<PathBuf> },
    /// Run a workflow with a live progress display; prints the run's report as JSON.
    Run {
        /// A workflow name, or the path of a workflow file.
        workflow: String,
        /// An input as KEY=VALUE (repeatable); non-string inputs take JSON values.
        #[arg(long = "input", value_name = "KEY=VALUE")]
        inputs: Vec<String>,
        /// All inputs as one JSON object.
        #[arg(long, value_name = "JSON")]
        inputs_json: Option<String>,
    },
    /// Print a workflow's DAG.
    Show {
        /// A workflow name, or the path of a workflow file.
        workflow: String,
        /// As a Mermaid flowchart (the only format for now).
        #[arg(long, required = true)]
        mermaid: bool,
    },
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

fn workflows_dir(common: &Common) -> Option<PathBuf> {
    common.workflows.clone().or_else(|| {
        let default = Path::new("workflows");
        default.is_dir().then(|| default.to_path_buf())
    })
}

fn engine(common: &Common) -> anyhow::Result<Engine> {
    let store = Store::open(&common.db)?;
    if store.is_read_only() {
        tracing::warn!(db = %common.db.display(), "database is read-only: writes will fail");
    }
    Ok(Engine::new(Tools::new(store), &common.workspace))
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let common = &cli.common;
    let dir = workflows_dir(common);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let engine = engine(common)?;
            let catalog = cli::load_catalog(dir.as_deref());
            tracing::info!(db = %common.db.display(), "serving MCP on stdio");
            runtime.block_on(Server::new(engine, catalog).serve_stdio())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Workflows(WorkflowsCommand::List) => {
            Ok(cli::list(&cli::load_catalog(dir.as_deref())))
        }
        Command::Workflows(WorkflowsCommand::Validate { paths }) => {
            Ok(cli::validate(&paths, dir.as_deref()))
        }
        Command::Workflows(WorkflowsCommand::Show {
            workflow,
            mermaid: _,
        }) => {
            let catalog = cli::load_catalog(dir.as_deref());
            match cli::resolve(&catalog, &workflow) {
                Ok(entry) => Ok(cli::show_mermaid(&entry)),
                Err(message) => anyhow::bail!(message),
            }
        }
        Command::Workflows(WorkflowsCommand::Run {
            workflow,
            inputs,
            inputs_json,
        }) => {
            let catalog = cli::load_catalog(dir.as_deref());
            let entry = cli::resolve(&catalog, &workflow).map_err(anyhow::Error::msg)?;
            let engine = engine(common)?;
            let args = RunArgs {
                inputs,
                inputs_json,
            };
            Ok(runtime.block_on(cli::run_workflow(&engine, &entry, &args)))
        }
    }
}
