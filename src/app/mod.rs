//! The application: every operation of the server, whichever face asks for it (MCP over
//! stdio or HTTP, the terminal). It owns each operation from start to end: the published
//! tools, validation, idempotency, quotas, starting a run, the audit row and the envelope.
//!
//! Invariant: the application knows neither the protocol (no rmcp) nor SQL; `server/`
//! translates MCP to these operations and their answers back, and the store is reached
//! through the engine, the todo tools and the run registry.

mod audit;
mod caller;
mod changes;
mod commands;
pub(crate) mod envelope;
mod idempotency;
pub(crate) mod layout;
mod listings;
pub(crate) mod prompts;
pub(crate) mod published;
mod questions;
pub(crate) mod resources;
mod runs;
mod starts;
mod tasks;
mod workflows;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

/// A run as listings show it.
pub use crate::store::RunSummary;
pub use caller::Caller;
pub(crate) use envelope::Envelope;
pub use layout::ServerFile;
pub(crate) use published::{PublishedTools, Route, ToolDef};
pub(crate) use questions::PageError;
pub use runs::{Cancelled, Purged, Restart, RunError, RunFilter};
pub(crate) use starts::{CallerChannels, NotStarted};
pub(crate) use tasks::CancelError;
pub use workflows::InlineWorkflows;

use crate::engine::installed::{Installed, Rejected};
use crate::engine::validate::Limits;
use crate::engine::{self, Engine};
use crate::runs::housekeeping::{self, Chores};
use crate::runs::{Registry, RegistryConfig};
use crate::store::{self, Durability, PgOptions, Store};
use crate::todos::Tools;

/// What the application is built from: where its state lives, and the operator's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// A SQLite file, `:memory:`, or a `postgres://` URL.
    pub db: String,
    pub durability: Durability,
    pub postgres: PgOptions,
    /// The folder the file actions of workflows read and write in.
    pub workspace: PathBuf,
    /// The workflows folder, besides the built-in workflows.
    pub workflows: Option<PathBuf>,
    pub limits: engine::Limits,
    pub registry: RegistryConfig,
    /// Whether `run_workflow` accepts definitions from the client.
    pub inline: InlineWorkflows,
    /// The server's own files besides the database (the tokens file, the PostgreSQL
    /// password file, the commands file), which the workspace must not hold.
    pub server_files: Vec<ServerFile>,
    /// The operator's commands file; without it no `command` node runs.
    pub commands: Option<PathBuf>,
}

impl Config {
    /// The defaults every option has, over the database `db` and the folder `workspace`.
    pub fn new(db: impl Into<String>, workspace: impl Into<PathBuf>) -> Config {
        Config {
            db: db.into(),
            durability: Durability::Normal,
            postgres: PgOptions::default(),
            workspace: workspace.into(),
            workflows: None,
            limits: engine::Limits::default(),
            registry: RegistryConfig::default(),
            inline: InlineWorkflows::On,
            server_files: Vec::new(),
            commands: None,
        }
    }
}

/// The application: cheap to clone, one for the process, shared by every face.
#[derive(Clone)]
pub struct App {
    engine: Engine,
    registry: Arc<Registry>,
    workflows: Arc<Installed>,
    tools: Arc<PublishedTools>,
    inline: InlineWorkflows,
    /// Held from the lookup of an idempotency key to the start of the run it names, so
    /// that two calls with one key start one run.
    starting: Arc<parking_lot::Mutex<()>>,
    /// Woken whenever a run that this process started for a task ends.
    finished: Arc<tokio::sync::Notify>,
    /// The files of the workflows folder left out for their problems.
    rejected: Arc<Vec<Rejected>>,
    /// The count of the store's changes, once something waits on it (`changes.rs`).
    changes: Arc<std::sync::OnceLock<tokio::sync::watch::Receiver<u64>>>,
    /// The digests of the workspace's files by stamp (`resources/files.rs`).
    digests: Arc<resources::Digests>,
}

impl App {
    /// Opens the database (migrating it), loads the workflows (a file with problems is
    /// logged and left out), and builds the engine on the run registry.
    /// Refused, before the database is opened, when the workspace holds the database or
    /// another of the server's files (`layout.rs`), or when the commands file is refused
    /// (every problem of it named).
    pub fn open(config: &Config) -> anyhow::Result<App> {
        let database = ServerFile::database(&config.db);
        let commands_file =
            (config.commands.as_ref()).map(|path| ServerFile::new("the commands file", path));
        let server_files: Vec<ServerFile> = database
            .into_iter()
            .chain(config.server_files.iter().cloned())
            .chain(commands_file)
            .collect();
        layout::check(&config.workspace, &server_files)?;
        let commands = commands::open(config.commands.as_deref())?;
        let store = match config.db.as_str() {
            ":memory:" => Store::open_in_memory(),
            db => Store::open_at_with(db, config.durability, config.postgres),
        }
        .with_context(|| format!("cannot open the database {}", store::redacted(&config.db)))?;
        if store.is_read_only() {
            tracing::warn!(db = %store::redacted(&config.db), "database is read-only: writes will fail");
        }
        let tools = Tools::new(store.clone());
        let registry = Arc::new(Registry::new(store, tools.clone(), config.registry));
        let file = Limits::FILE.with_history_rows(config.limits.max_history_rows);
        let (workflows, rejected) = Installed::load_within(config.workflows.as_deref(), file);
        crate::engine::installed::log_rejected(&rejected);
        let engine = Engine::new(tools, &config.workspace)
            .with_durability(config.durability)
            .with_limits(config.limits)
            .with_commands(commands)
            .with_journal(registry.clone())
            .with_history(registry.clone());
        if config.commands.is_some() {
            commands::log_unknown(&workflows, engine.commands());
        }
        let mut app = App::from_parts(engine, registry, workflows, config.inline);
        app.rejected = Arc::new(rejected);
        if crate::telemetry::tracing_on() {
            app = app.with_run_tracer(crate::telemetry::runs::RunTracer::global());
        }
        Ok(app)
    }

    fn from_parts(
        engine: Engine,
        registry: Arc<Registry>,
        workflows: Installed,
        inline: InlineWorkflows,
    ) -> App {
        let workflows = Arc::new(workflows);
        App {
            engine: engine.with_workflows(Arc::clone(&workflows)),
            registry,
            tools: Arc::new(PublishedTools::new(&workflows)),
            workflows,
            inline,
            starting: Arc::default(),
            finished: Arc::default(),
            rejected: Arc::default(),
            changes: Arc::default(),
            digests: Arc::default(),
        }
    }

    /// The application on a database in memory, with the built-in workflows, for tests.
    #[cfg(test)]
    pub(crate) fn in_memory() -> App {
        App::open(&Config::new(":memory:", std::env::temp_dir())).expect("a store in memory")
    }

    /// Makes each run a trace of its own on `tracer` (telemetry on): its root span, a
    /// span per node attempt and per question's wait (`telemetry/runs.rs`).
    pub(crate) fn with_run_tracer(mut self, tracer: crate::telemetry::runs::RunTracer) -> App {
        self.engine = self.engine.with_run_tracer(tracer);
        self
    }

    /// Refuses a principal a new run while it has `cap` unfinished ones.
    pub fn with_max_runs(mut self, cap: u64) -> App {
        self.engine = self.engine.with_max_runs(cap);
        self
    }

    /// The engine that runs this application's workflows, for tests and benchmarks that
    /// drive it directly. No face reaches it: every operation goes through the
    /// application (a build without the `testing` feature has no such method).
    #[cfg(any(test, feature = "testing"))]
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The registry of this application's runs and tasks, for tests and benchmarks; as
    /// [`App::engine`], no face reaches it.
    #[cfg(any(test, feature = "testing"))]
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The workflows this application runs by name.
    pub fn workflows(&self) -> &Installed {
        &self.workflows
    }

    /// The files of the workflows folder left out for their problems, when it was loaded.
    pub(crate) fn rejected_workflows(&self) -> &[Rejected] {
        &self.rejected
    }

    /// The tools this application publishes.
    pub(crate) fn published_tools(&self) -> &PublishedTools {
        &self.tools
    }

    /// Runs `work` while this process renews its leases (and, with `chores`, takes
    /// orphaned runs over and purges expired ones); gives its leases up when it is done.
    pub async fn with_housekeeping<T>(
        &self,
        chores: Chores,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let chores_task = housekeeping::spawn(self.engine.clone(), self.registry.clone(), chores);
        let out = work.await;
        chores_task.abort();
        self.registry.release_all();
        out
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod traces_tests;
