//! The `mcp-task-server` binary: command-line parsing and wiring, nothing else.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use mcp_task_server::app::{App, Config, InlineWorkflows, ServerFile};
use mcp_task_server::cli::{self, DriveArgs, RunArgs};
use mcp_task_server::engine;
use mcp_task_server::runs::RegistryConfig;
use mcp_task_server::runs::housekeeping::Chores;
use mcp_task_server::server::Server;
use mcp_task_server::store::{self, Durability};
use mcp_task_server::telemetry;
use mcp_task_server::transport::{
    self,
    http::{Auth, HttpOptions, Limits},
};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[path = "main/oauth.rs"]
mod oauth;

// mimalloc rather than the system allocator: workflow loading and scheduling allocate many
// small objects, and every figure in BENCHMARKS.md was measured on it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A task manager and DAG workflow engine, served over MCP on stdio or Streamable HTTP.
///
/// With no subcommand, serves MCP on stdin/stdout: point an MCP client at this binary;
/// with --http, serves it over Streamable HTTP instead.
/// Logs go to stderr; set RUST_LOG (e.g. RUST_LOG=debug) for more detail.
#[derive(Parser)]
#[command(version, about, long_about)]
struct Cli {
    #[command(flatten)]
    common: Common,

    #[command(flatten)]
    http: HttpArgs,

    #[command(flatten)]
    oauth: oauth::OAuthArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

/// How `serve` listens over HTTP; without `--http` it serves stdio.
#[derive(Args)]
struct HttpArgs {
    /// Serve MCP over Streamable HTTP at http://ADDR/mcp instead of stdio. ADDR is
    /// HOST:PORT or a port alone (on 127.0.0.1) [default: 127.0.0.1:8765]
    #[arg(long, env = "TASKS_HTTP", value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8765", value_parser = http_addr, global = true)]
    http: Option<SocketAddr>,

    /// File of bearer tokens, one `name token` pair a line, readable by this user only
    /// (`chmod 600`); every HTTP request needs one of them, and SIGHUP reloads the file.
    /// Required to serve beyond loopback. Without it, the server makes a token at start
    /// and prints it on stderr.
    #[arg(
        long,
        env = "TASKS_HTTP_TOKENS_FILE",
        value_name = "FILE",
        global = true
    )]
    http_tokens: Option<PathBuf>,

    /// Serve HTTP on loopback without any token: every local user, and every container
    /// sharing the host's network, may then call every tool as this server's user.
    #[arg(
        long,
        env = "TASKS_HTTP_NO_AUTH",
        conflicts_with = "http_tokens",
        global = true
    )]
    http_no_auth: bool,

    /// At most this many HTTP connections open at once; more wait in the kernel's accept
    /// backlog until one closes. Keep it below the file-descriptor limit (`ulimit -n`).
    #[arg(long, env = "TASKS_HTTP_MAX_CONNECTIONS", value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    http_max_connections: u32,

    /// How long a client has to send a request's head (its line and headers), counted from
    /// its first byte or from the connection's start; then the connection is closed.
    #[arg(long, env = "TASKS_HTTP_HEADER_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = duration, global = true)]
    http_header_timeout: Duration,

    /// How long a keep-alive connection with no request in progress stays open. A response
    /// still streaming (an SSE stream) is a request in progress.
    #[arg(long, env = "TASKS_HTTP_IDLE_TIMEOUT", value_name = "DURATION", default_value = "60s", value_parser = duration, global = true)]
    http_idle_timeout: Duration,

    /// A host name clients reach the HTTP server by, besides localhost and the bound
    /// address (repeatable): requests with another `Host` or `Origin` are refused.
    #[arg(
        long = "http-host",
        env = "TASKS_HTTP_HOSTS",
        value_name = "NAME",
        value_delimiter = ',',
        global = true
    )]
    http_hosts: Vec<String>,

    /// At most this many 2025-11-25 HTTP sessions open at once; a client that would open
    /// one more gets 503 until one closes or idles out (after 5 minutes).
    #[arg(long, env = "TASKS_HTTP_MAX_SESSIONS", value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    http_max_sessions: u32,

    /// At most this many of those sessions opened by one principal of the tokens file, so
    /// that one principal cannot take them all; one more gets 503 likewise.
    #[arg(long, env = "TASKS_HTTP_MAX_SESSIONS_PER_PRINCIPAL", value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    http_max_sessions_per_principal: u32,

    /// At most this many SSE streams open at once (each session's GET stream, and each
    /// request answered as a stream while it lasts); beyond that, 503.
    #[arg(long, env = "TASKS_HTTP_MAX_STREAMS", value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    http_max_streams: u32,

    /// At most this many of those streams held by one principal of the tokens file; one
    /// more gets 503 likewise.
    #[arg(long, env = "TASKS_HTTP_MAX_STREAMS_PER_PRINCIPAL", value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    http_max_streams_per_principal: u32,

    /// At most this many unfinished runs per principal of the tokens file; a call that
    /// would start one more is refused with `too_many_runs`.
    #[arg(long, env = "TASKS_HTTP_MAX_RUNS", value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    http_max_runs: u32,

    /// At most this many 2025-11-25 `tasks/result` requests waiting at once (each holds
    /// its task's questions and a stream); one more is refused with the JSON-RPC error
    /// `too_many_result_waits` (`tasks/get` still polls).
    #[arg(long, env = "TASKS_HTTP_MAX_RESULT_WAITS", value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    http_max_result_waits: u32,

    /// At most this many of those waiting `tasks/result` requests from one principal of
    /// the tokens file.
    #[arg(long, env = "TASKS_HTTP_MAX_RESULT_WAITS_PER_PRINCIPAL", value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    http_max_result_waits_per_principal: u32,

    /// At most this many dashboard logins (signed-in browsers) kept per principal; a new
    /// one ends that principal's least recently used, never another principal's.
    #[arg(long, env = "TASKS_HTTP_MAX_LOGINS_PER_PRINCIPAL", value_name = "N", default_value_t = mcp_task_server::transport::http::DEFAULT_MAX_LOGINS_PER_PRINCIPAL as u32, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    http_max_logins_per_principal: u32,

    /// The failed sign-ins (a bearer token or a sign-in refused) one client address may
    /// make before each further try waits: a second, then twice as long after each failure,
    /// up to a minute, answered 429 meanwhile; the count clears after 15 minutes without a
    /// failure. An IPv6 address counts with its /64.
    #[arg(long, env = "TASKS_HTTP_FREE_SIGN_IN_FAILURES", value_name = "N", default_value_t = mcp_task_server::transport::http::DEFAULT_FREE_SIGN_IN_FAILURES, global = true)]
    http_free_sign_in_failures: u32,

    /// Record the server's metrics in the process and serve them at GET /metrics in the
    /// Prometheus text format, behind the same tokens as /mcp (with OAuth, the `read`
    /// scope). Off by default: recording costs each call a few microseconds. Metrics
    /// exported over OTLP (--otel-endpoint) are recorded whether or not this is given.
    #[arg(long, env = "TASKS_HTTP_METRICS", global = true)]
    http_metrics: bool,
}

fn http_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().map_err(|_| {
        "expected HOST:PORT (an IP address and a port, e.g. 127.0.0.1:8765) or a port".to_owned()
    })
}

#[derive(Args)]
struct Common {
    /// The database: a SQLite file (created if missing; may be a SQLite `file:` URI), or a
    /// PostgreSQL URL, postgres://USER@HOST:PORT/DATABASE?sslmode=verify-full, for a store
    /// that several hosts share. Leave the password out (anyone on the machine can read a
    /// command line): it is taken from PGPASSWORD or the password file (PGPASSFILE,
    /// ~/.pgpass), as libpq does.
    #[arg(long, env = "TASKS_DB_PATH", default_value = "tasks.db", global = true)]
    db: String,

    /// PostgreSQL: connections this process keeps open at most.
    #[arg(long, env = "TASKS_PG_POOL_SIZE", value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=10_000), global = true)]
    pg_pool_size: u32,

    /// PostgreSQL: how long a call waits for a free connection while all are in use; then
    /// it fails with an error that says so.
    #[arg(long, env = "TASKS_PG_POOL_TIMEOUT", value_name = "DURATION", default_value = "30s", value_parser = duration, global = true)]
    pg_pool_timeout: Duration,

    /// PostgreSQL: answer a server that asks for the password in clear text or as an MD5
    /// hash over a connection without TLS. Refused by default: anyone on the way could read
    /// the password, or replay the hash. (Over a Unix socket both are always answered.)
    #[arg(long, env = "TASKS_PG_ALLOW_INSECURE_AUTH", global = true)]
    pg_allow_insecure_auth: bool,

    /// Folder of workflow files (*.toml), loaded beside the built-in workflows
    /// [default: ./workflows when it exists]
    #[arg(long, env = "TASKS_WORKFLOWS_DIR", global = true)]
    workflows: Option<PathBuf>,

    /// Root folder for the file actions of installed workflows (`write_file`, `read_file`,
    /// `list_dir`); they cannot reach outside it, nor through a symbolic link within it.
    /// Inline definitions have no file actions. It must not hold the database or the
    /// tokens file: a start with either inside it is refused
    /// [default: ./workspace, made if missing]
    #[arg(long, env = "TASKS_WORKSPACE", global = true)]
    workspace: Option<PathBuf>,

    /// The commands file: the programs `command` nodes of installed workflows may run, by
    /// name, each with its fixed argv, parameters and sandbox. Refused if its group or
    /// others may write it, or another user owns it; SIGHUP reloads it (a refused reload
    /// keeps the commands in force). Without it no command runs. `workflows validate`
    /// checks the workflows' command nodes against it
    #[arg(long, env = "TASKS_COMMANDS", value_name = "FILE", global = true)]
    commands: Option<PathBuf>,

    /// `normal` survives a crash of the process; `full` also survives a power loss, at
    /// several times the cost of a commit (SQLite `synchronous=NORMAL` or `FULL`).
    #[arg(
        long,
        env = "TASKS_DURABILITY",
        default_value = "normal",
        global = true
    )]
    durability: DurabilityArg,

    /// How long a finished run and its tasks are kept, counted from completion.
    #[arg(long, env = "TASKS_TASK_TTL", default_value = "24h", value_parser = duration, global = true)]
    task_ttl: Duration,

    /// How long a process's claim on a run it drives lasts unless renewed (it is renewed
    /// every third of this); a run whose claim ran out is taken over by `serve`.
    #[arg(long, env = "TASKS_LEASE", default_value = "15s", value_parser = duration, global = true)]
    lease: Duration,

    /// How long questions put to a client that answers by retrying its call (a 2026-07-28
    /// client without tasks) wait for that retry; then the run is cancelled.
    #[arg(long, env = "TASKS_ANSWER_TIMEOUT", default_value = "1h", value_parser = duration, global = true)]
    answer_timeout: Duration,

    /// Whether `run_workflow` accepts a workflow definition from the client (`on`), or runs
    /// only the built-in workflows and those of the workflows folder (`off`). Inline
    /// definitions never touch the host's files either way.
    #[arg(
        long,
        env = "TASKS_INLINE_WORKFLOWS",
        value_name = "on|off",
        default_value = "on",
        global = true
    )]
    inline_workflows: Switch,

    /// Threads that run requests and workflow steps. One keeps a request and the run it
    /// starts on the thread that read it, with no wake-up of another thread in between;
    /// more help workflows whose steps compute for long.
    #[arg(long, env = "TASKS_WORKER_THREADS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256), global = true)]
    worker_threads: u16,

    /// Over stdio, at most this many bytes of replies wait for the client to read them.
    /// Past it the server reads no further request until the client has read some: a
    /// client that stops reading slows the server down instead of growing its memory. One
    /// reply longer than this still goes out, alone.
    #[arg(long, env = "TASKS_STDIO_WRITE_QUEUE", value_name = "BYTES", default_value_t = mcp_task_server::transport::stdio::DEFAULT_WRITE_QUEUE, value_parser = clap::value_parser!(u32).range(1024..), global = true)]
    stdio_write_queue: u32,

    /// The most resources one MCP session follows at once, by `resources/subscribe` (one
    /// more is refused with an error naming this option) or in one `subscriptions/listen`
    /// (the first are granted), and the most tasks one listen follows: each change of the
    /// store looks at every one.
    #[arg(long, env = "TASKS_MAX_SUBSCRIPTIONS", value_name = "N", default_value_t = mcp_task_server::server::DEFAULT_MAX_SUBSCRIPTIONS as u32, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    max_subscriptions: u32,

    /// The most resources every session together follows at once: one more subscribe is
    /// refused, and a listen that would pass it is ended with an error naming this option.
    #[arg(long, env = "TASKS_MAX_SUBSCRIPTIONS_TOTAL", value_name = "N", default_value_t = mcp_task_server::server::DEFAULT_MAX_SUBSCRIPTIONS_TOTAL as u32, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    max_subscriptions_total: u32,

    /// The most resources the sessions of one principal of the tokens file follow at once,
    /// so that one principal cannot take them all.
    #[arg(long, env = "TASKS_MAX_SUBSCRIPTIONS_PER_PRINCIPAL", value_name = "N", default_value_t = mcp_task_server::server::DEFAULT_MAX_SUBSCRIPTIONS_PER_PRINCIPAL as u32, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    max_subscriptions_per_principal: u32,

    /// The fuel of one template or expression evaluation: minijinja instructions, plus the
    /// work of filters by the size of what they are given. A node whose evaluation runs
    /// out fails with `budget_exceeded`.
    #[arg(long, env = "TASKS_TEMPLATE_FUEL", value_name = "N", default_value_t = engine::budget::DEFAULT_FUEL, value_parser = clap::value_parser!(u64).range(1..), global = true)]
    template_fuel: u64,

    /// The most bytes one evaluation may produce (rendered text, or a value as JSON), and
    /// the largest value a filter is handed.
    #[arg(long, env = "TASKS_TEMPLATE_MAX_OUTPUT", value_name = "BYTES", default_value_t = engine::budget::DEFAULT_MAX_OUTPUT as u64, value_parser = clap::value_parser!(u64).range(1024..=(1 << 32)), global = true)]
    template_max_output: u64,

    /// The most instances one `for_each` node may expand to.
    #[arg(long, env = "TASKS_MAX_FOR_EACH", value_name = "N", default_value_t = engine::DEFAULT_MAX_FOR_EACH as u64, value_parser = clap::value_parser!(u64).range(1..=100_000_000), global = true)]
    max_for_each: u64,

    /// The most units (nodes and `for_each` instances) one run may have, counted over the
    /// run and every child run below it together.
    #[arg(long, env = "TASKS_MAX_RUN_UNITS", value_name = "N", default_value_t = engine::DEFAULT_MAX_RUN_UNITS as u64, value_parser = clap::value_parser!(u64).range(1..=100_000_000), global = true)]
    max_run_units: u64,

    /// The most iterations one repeating node may run (its `repeat.max` above this fails
    /// the node with `budget_exceeded`): each is kept in the node's record.
    #[arg(long, env = "TASKS_MAX_REPEAT", value_name = "N", default_value_t = engine::DEFAULT_MAX_REPEAT, value_parser = clap::value_parser!(u32).range(1..=1_000_000), global = true)]
    max_repeat: u32,

    /// Takeovers of a run from processes that stopped while driving it, with no node
    /// finished in between, after which the run is failed as `run_poisoned` instead of
    /// taken over again.
    #[arg(long, env = "TASKS_MAX_TAKEOVERS", value_name = "N", default_value_t = engine::DEFAULT_MAX_TAKEOVERS, value_parser = clap::value_parser!(u32).range(1..=1_000_000), global = true)]
    max_takeovers: u32,

    /// How deep `workflow` nodes may nest runs: a node of a run this many levels below the
    /// run at the top fails with `budget_exceeded` instead of starting a child.
    #[arg(long, env = "TASKS_MAX_WORKFLOW_DEPTH", value_name = "N", default_value_t = engine::DEFAULT_MAX_WORKFLOW_DEPTH, value_parser = clap::value_parser!(u32).range(1..=1_000), global = true)]
    max_workflow_depth: u32,

    /// The most earlier runs one `history` node may read: a greater `limit` in a workflow
    /// file is a problem when it loads; one given by a template fails its node with
    /// `budget_exceeded`.
    #[arg(long, env = "TASKS_MAX_HISTORY_ROWS", value_name = "N", default_value_t = engine::DEFAULT_MAX_HISTORY_ROWS as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000), global = true)]
    max_history_rows: u64,

    /// The most bytes of one `history` node's output (as JSON): runs that would not fit
    /// are left out, and the output says it is truncated.
    #[arg(long, env = "TASKS_MAX_HISTORY_BYTES", value_name = "BYTES", default_value_t = engine::DEFAULT_MAX_HISTORY_BYTES as u64, value_parser = clap::value_parser!(u64).range(1024..=(1 << 32)), global = true)]
    max_history_bytes: u64,

    /// The most earlier runs one `history` node's `where` looks at; past them the output
    /// says it is truncated.
    #[arg(long, env = "TASKS_MAX_HISTORY_SCAN", value_name = "N", default_value_t = engine::DEFAULT_MAX_HISTORY_SCAN as u64, value_parser = clap::value_parser!(u64).range(1..=100_000_000), global = true)]
    max_history_scan: u64,

    /// How long the history of a finished run (what `history` nodes read) is kept, counted
    /// from its end; it outlives the run itself (--task-ttl).
    #[arg(long, env = "TASKS_HISTORY_TTL", default_value = "2160h", value_parser = duration, global = true)]
    history_ttl: Duration,

    /// Export traces and metrics over OTLP (HTTP, protobuf bodies) to the collector at
    /// this URL, e.g. http://localhost:4318 (`/v1/traces` and `/v1/metrics` are added).
    /// Off when unset. The other standard variables apply as well:
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (one
    /// signal alone, the URL as given), OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME,
    /// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_SDK_DISABLED=true
    #[arg(
        long,
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL",
        global = true
    )]
    otel_endpoint: Option<String>,
}

impl Common {
    /// How the store reaches PostgreSQL.
    fn postgres(&self) -> store::PgOptions {
        store::PgOptions {
            pool_size: self.pg_pool_size as usize,
            pool_timeout: self.pg_pool_timeout,
            allow_insecure_auth: self.pg_allow_insecure_auth,
        }
    }

    /// The budgets of runs and evaluations the operator set.
    fn limits(&self) -> engine::Limits {
        engine::Limits {
            template: engine::template::TemplateLimits {
                fuel: self.template_fuel,
                max_output: self.template_max_output as usize,
            },
            max_for_each: self.max_for_each as usize,
            max_run_units: self.max_run_units as usize,
            max_repeat: self.max_repeat,
            max_takeovers: self.max_takeovers,
            max_workflow_depth: self.max_workflow_depth,
            max_history_rows: self.max_history_rows as usize,
            max_history_bytes: self.max_history_bytes as usize,
            max_history_scan: self.max_history_scan as usize,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Switch {
    On,
    Off,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum DurabilityArg {
    Normal,
    Full,
}

fn duration(text: &str) -> Result<Duration, String> {
    let parsed = mcp_task_server::engine::duration::parse_duration(text)?;
    if parsed.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(parsed)
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdio (the default), or over HTTP with --http.
    Serve,
    /// List, check, show and run workflows from the terminal.
    #[command(subcommand)]
    Workflows(WorkflowsCommand),
    /// Look after the database.
    #[command(subcommand)]
    Db(DbCommand),
    /// Serve the dashboard alone, to follow and steer runs in a browser, over the database
    /// a stdio server uses too; prints the link that signs a browser in.
    Ui {
        /// Where to listen: HOST:PORT or a port alone (on 127.0.0.1)
        #[arg(value_name = "ADDR", default_value = "127.0.0.1:8766", value_parser = http_addr)]
        addr: SocketAddr,
    },
}

#[derive(Subcommand)]
enum DbCommand {
    /// Bring the database's schema up to this build's version and say which it is, for
    /// operators who migrate ahead of a deploy (every command migrates when it opens it).
    Migrate,
    /// Walk the audit log's hash chain and name the first row changed, removed or
    /// inserted out of order; exit code 1 when the chain is broken.
    Verify,
}

#[derive(Subcommand)]
enum WorkflowsCommand {
    /// List the built-in workflows and those of the workflows folder.
    List,
    /// Check workflow files; every problem is printed on stderr with its file:line:column.
    /// Without paths, checks the built-in workflows and the workflows folder. With
    /// --commands, also the commands their `command` nodes name and the arguments written
    /// out for them.
    Validate { paths: Vec<PathBuf> },
    /// Run a workflow with a live progress display. Its questions are answered from
    /// --answers, else asked at the terminal, else take their defaults. Ends with a summary
    /// at a terminal, else (or with --json) the run's report as JSON.
    Run {
        /// A workflow name, or the path of a workflow file.
        workflow: String,
        /// An input as KEY=VALUE (repeatable); non-string inputs take JSON values.
        #[arg(long = "input", value_name = "KEY=VALUE")]
        inputs: Vec<String>,
        /// All inputs as one JSON object.
        #[arg(long, value_name = "JSON")]
        inputs_json: Option<String>,
        #[command(flatten)]
        drive: Drive,
    },
    /// List stored runs, newest first: id, workflow, status, progress, start time, age.
    Runs {
        /// Only runs of this status (running, succeeded, failed, cancelled).
        #[arg(long, value_parser = ["running", "succeeded", "failed", "cancelled"])]
        status: Option<String>,
        /// At most this many runs.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Print a stored run's report as JSON: its nodes, tasks, questions and answers.
    Status { run_id: String },
    /// Take an unfinished run over and drive it to the end, with the progress bar; asks
    /// only the questions still open.
    Resume {
        run_id: String,
        #[command(flatten)]
        drive: Drive,
    },
    /// Cancel a run, wherever it is driven.
    Cancel { run_id: String },
    /// Run a failed or cancelled run again, as a new run: nodes that succeeded keep their
    /// results; failed, cancelled and skipped ones run again.
    Retry {
        run_id: String,
        #[command(flatten)]
        drive: Drive,
    },
    /// Delete finished runs and their tasks now (the audit log is never touched).
    Purge {
        /// Only runs that finished longer ago than this, e.g. 168h [default: every finished run]
        #[arg(long, value_parser = mcp_task_server::engine::duration::parse_duration)]
        older_than: Option<Duration>,
    },
    /// Answer the question a run's node waits on (with --wait-for-answers). The answer is
    /// JSON, or else taken as text.
    Answer {
        run_id: String,
        node: String,
        answer: String,
        /// The `for_each` instance, for a node that fans out.
        #[arg(long)]
        instance: Option<usize>,
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

/// How `run`, `resume` and `retry` answer a run's questions and show its end.
#[derive(Args)]
struct Drive {
    /// A JSON file of answers keyed by node id (for a `for_each` node, one answer or a
    /// list by instance); questions it answers are not asked.
    #[arg(long, value_name = "FILE")]
    answers: Option<PathBuf>,
    /// Park the questions --answers does not answer until `workflows answer` answers them,
    /// even after a restart, instead of asking at the terminal or taking their defaults.
    #[arg(long)]
    wait_for_answers: bool,
    /// Print the run's report as JSON, even at a terminal.
    #[arg(long)]
    json: bool,
}

impl Drive {
    fn args(self) -> DriveArgs {
        DriveArgs {
            answers: self.answers,
            wait_for_answers: self.wait_for_answers,
            json: self.json,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `/metrics` is served where MCP is served over HTTP and the operator asked for it;
    // its metrics are then recorded even when nothing is exported.
    let scrape = matches!(cli.command, None | Some(Command::Serve))
        && cli.http.http.is_some()
        && cli.http.http_metrics;
    let settings = telemetry::Settings::from_env(cli.common.otel_endpoint.as_deref(), scrape);
    let telemetry = telemetry::init(&settings);
    let spans = telemetry.as_ref().ok().and_then(|guard| guard.layer());
    // Whatever RUST_LOG asks for, no statement's parameters are logged: some are secrets.
    // Whatever RUST_LOG asks for, the steps of the DAG layout behind the dashboard's
    // pictures (info lines from `rust-sugiyama`, a dozen a picture) are not logged.
    let no_parameters = filter_fn(|metadata| {
        !store::logs_statement_parameters(metadata) && !logs_layout_steps(metadata)
    });
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .event_format(telemetry::with_trace_ids(tracing_subscriber::fmt::format()));
    tracing_subscriber::registry()
        .with(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,rmcp=warn".into()))
        .with(no_parameters)
        .with(logs)
        .with(spans)
        .init();
    // Flushed when `main` returns, after the runtime has stopped.
    let _telemetry = match telemetry {
        Ok(guard) => guard,
        Err(error) => {
            tracing::error!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let db = cli.common.db.as_str();
    if store::url_holds_password(db)
        && std::env::args_os().any(|arg| arg.to_string_lossy().contains(db))
    {
        tracing::warn!(
            "the PostgreSQL password is on the command line, where any user of this machine \
             can read it (ps): leave it out of --db and set PGPASSWORD or a password file \
             (PGPASSFILE, ~/.pgpass), or pass the URL in TASKS_DB_PATH"
        );
    }
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether an event is a step of the DAG layout library, below a warning.
fn logs_layout_steps(metadata: &tracing::Metadata<'_>) -> bool {
    *metadata.level() > tracing::Level::WARN
        && (metadata.module_path()).is_some_and(|path| path.starts_with("rust_sugiyama"))
}

fn workflows_dir(common: &Common) -> Option<PathBuf> {
    common.workflows.clone().or_else(|| {
        let default = Path::new("workflows");
        default.is_dir().then(|| default.to_path_buf())
    })
}

/// The folder of the file actions: the one given, or `./workspace`, made if missing. The
/// working folder is no default: it is where the database lies by default.
fn workspace(common: &Common) -> anyhow::Result<PathBuf> {
    if let Some(given) = &common.workspace {
        return Ok(given.clone());
    }
    let default = PathBuf::from(DEFAULT_WORKSPACE);
    if !default.is_dir() {
        std::fs::create_dir_all(&default).with_context(|| {
            format!("cannot make the workspace folder ./{DEFAULT_WORKSPACE} (give --workspace)")
        })?;
        tracing::info!("made ./{DEFAULT_WORKSPACE}, the folder workflows read and write files in");
        if Path::new(&common.db).is_file() {
            tracing::warn!(
                "files are now read and written under ./{DEFAULT_WORKSPACE}: the workspace \
                 no longer defaults to the working folder, which holds the database; files \
                 earlier runs wrote stay where they are (give --workspace a folder that does \
                 not hold the database to keep working beside them)"
            );
        }
    }
    Ok(default)
}

const DEFAULT_WORKSPACE: &str = "workspace";

/// The server's own files besides the database, which the workspace must not hold.
fn server_files(common: &Common, http: &HttpArgs, oauth: &oauth::OAuthArgs) -> Vec<ServerFile> {
    let mut files = Vec::new();
    if let Some(tokens) = &http.http_tokens {
        files.push(ServerFile::new("the tokens file", tokens));
    }
    if let Some(secret) = &oauth.oauth_client_secret_file {
        files.push(ServerFile::new("the OAuth client secret file", secret));
    }
    if store::is_url(&common.db)
        && let Some(password) = store::password_file().filter(|file| file.exists())
    {
        files.push(ServerFile::new("the PostgreSQL password file", password));
    }
    files
}

/// The application over the database and the workflows the options name.
fn open(common: &Common, http: &HttpArgs, oauth: &oauth::OAuthArgs) -> anyhow::Result<App> {
    let config = Config {
        durability: match common.durability {
            DurabilityArg::Normal => Durability::Normal,
            DurabilityArg::Full => Durability::Full,
        },
        postgres: common.postgres(),
        workflows: workflows_dir(common),
        limits: common.limits(),
        registry: RegistryConfig {
            lease: common.lease,
            task_ttl: common.task_ttl,
            answer_timeout: common.answer_timeout,
            history_ttl: common.history_ttl,
            ..RegistryConfig::default()
        },
        inline: match common.inline_workflows {
            Switch::On => InlineWorkflows::On,
            Switch::Off => InlineWorkflows::Off,
        },
        server_files: server_files(common, http, oauth),
        commands: common.commands.clone(),
        ..Config::new(common.db.clone(), workspace(common)?)
    };
    App::open(&config)
}

/// How to serve HTTP on `addr`, as the `--http-*` options say.
fn http_options(
    http: &HttpArgs,
    oauth: &oauth::OAuthArgs,
    addr: SocketAddr,
) -> anyhow::Result<HttpOptions> {
    let auth = match (&http.http_tokens, oauth.options()?) {
        (_, Some(oauth)) => Auth::OAuth(Box::new(oauth)),
        (Some(path), None) => Auth::from_file(path.clone())?,
        (None, None) if http.http_no_auth => Auth::Off,
        (None, None) => Auth::Generated,
    };
    Ok(HttpOptions {
        addr,
        auth,
        hosts: http.http_hosts.clone(),
        max_sessions: http.http_max_sessions as usize,
        max_sessions_per_principal: http.http_max_sessions_per_principal as usize,
        max_streams: http.http_max_streams as usize,
        max_streams_per_principal: http.http_max_streams_per_principal as usize,
        max_runs: u64::from(http.http_max_runs),
        max_result_waits: http.http_max_result_waits as usize,
        max_result_waits_per_principal: http.http_max_result_waits_per_principal as usize,
        connections: Limits {
            max: http.http_max_connections as usize,
            header_timeout: http.http_header_timeout,
            idle_timeout: http.http_idle_timeout,
        },
        max_logins_per_principal: http.http_max_logins_per_principal as usize,
        free_sign_in_failures: http.http_free_sign_in_failures,
    })
}

/// Reloads the commands file at each SIGHUP, for as long as the server runs. Only with a
/// commands file: without one, SIGHUP keeps its default meaning (over stdio, the end).
async fn reload_commands_on_hangup(app: App) {
    let mut hangups = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(error) => {
            tracing::warn!(%error, "cannot watch for SIGHUP: the commands file is not reloaded");
            return;
        }
    };
    while hangups.recv().await.is_some() {
        tracing::info!("SIGHUP: reloading the commands file");
        app.reload_commands();
    }
}

/// Cancels `shutdown` at the first SIGTERM or Ctrl-C.
async fn cancel_on_signal(shutdown: CancellationToken) {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot watch for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = terminate => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C: shutting down"),
    }
    shutdown.cancel();
}

const TERMINAL: Chores = Chores {
    take_over: false,
    purge: false,
};

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // A multi-thread runtime even with one worker: `block_on` then only waits, and blocking
    // work (prompts at a terminal) still has its own pool.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cli.common.worker_threads.into())
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let common = &cli.common;
    let dir = workflows_dir(common);
    // How a workflow file is validated, with the operator's cap on `history` nodes.
    let file = engine::validate::Limits::FILE.with_history_rows(common.max_history_rows as usize);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let http = match cli.http.http {
                Some(addr) => {
                    let options = http_options(&cli.http, &cli.oauth, addr)?;
                    // `transport::http::serve` checks too; here, before the database is opened.
                    options.check()?;
                    Some(options)
                }
                None if cli.oauth.oauth_issuer.is_some() => anyhow::bail!(
                    "--oauth-issuer authorises HTTP requests; serve HTTP with --http (stdio \
                     takes no tokens: its client is the local user who started it)"
                ),
                None => None,
            };
            let app = open(common, &cli.http, &cli.oauth)?;
            let server = Server::new(app.clone()).with_max_subscriptions(
                common.max_subscriptions as usize,
                common.max_subscriptions_total as usize,
                common.max_subscriptions_per_principal as usize,
            );
            let chores = Chores {
                take_over: true,
                purge: true,
            };
            runtime.block_on(async {
                if common.commands.is_some() {
                    tokio::spawn(reload_commands_on_hangup(app.clone()));
                }
                match http {
                    Some(options) => {
                        tracing::info!(db = %store::redacted(&common.db), "serving MCP over HTTP");
                        let shutdown = CancellationToken::new();
                        tokio::spawn(cancel_on_signal(shutdown.clone()));
                        let serving = transport::http::serve(server, options, shutdown);
                        app.with_housekeeping(chores, serving).await
                    }
                    None => {
                        tracing::info!(db = %store::redacted(&common.db), "serving MCP on stdio");
                        let serving =
                            transport::stdio::serve_stdio(server, common.stdio_write_queue);
                        app.with_housekeeping(chores, serving).await
                    }
                }
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Ui { addr } => {
            let options = http_options(&cli.http, &cli.oauth, addr)?;
            options.check()?;
            let app = open(common, &cli.http, &cli.oauth)?;
            runtime.block_on(async {
                tracing::info!(db = %store::redacted(&common.db), "serving the dashboard");
                let shutdown = CancellationToken::new();
                tokio::spawn(cancel_on_signal(shutdown.clone()));
                // Answers and cancels reach the process that drives a run through the
                // database; this one drives only the retries started here.
                let serving = transport::http::serve_pages(app.clone(), options, shutdown);
                app.with_housekeeping(TERMINAL, serving).await
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Workflows(WorkflowsCommand::List) => {
            Ok(cli::list(&cli::load_installed(dir.as_deref(), file)))
        }
        Command::Workflows(WorkflowsCommand::Validate { paths }) => Ok(cli::validate(
            &paths,
            dir.as_deref(),
            common.commands.as_deref(),
            file,
        )),
        Command::Workflows(WorkflowsCommand::Show {
            workflow,
            mermaid: _,
        }) => {
            let installed = cli::load_installed(dir.as_deref(), file);
            match cli::resolve(&installed, &workflow, file) {
                Ok(entry) => Ok(cli::show_mermaid(&entry)),
                Err(message) => anyhow::bail!(message),
            }
        }
        Command::Workflows(WorkflowsCommand::Run {
            workflow,
            inputs,
            inputs_json,
            drive,
        }) => {
            let app = open(common, &cli.http, &cli.oauth)?;
            let entry =
                cli::resolve(app.workflows(), &workflow, file).map_err(anyhow::Error::msg)?;
            let args = RunArgs {
                inputs,
                inputs_json,
                drive: drive.args(),
            };
            let work = cli::run_workflow(&app, &entry, &args);
            Ok(runtime.block_on(app.with_housekeeping(TERMINAL, work)))
        }
        Command::Workflows(command) => {
            stored_runs(&runtime, common, (&cli.http, &cli.oauth), command)
        }
        Command::Db(DbCommand::Migrate) => cli::migrate(&common.db, common.postgres())
            .with_context(|| {
                format!(
                    "cannot migrate the database {}",
                    store::redacted(&common.db)
                )
            }),
        Command::Db(DbCommand::Verify) => {
            cli::verify(&common.db, common.postgres()).with_context(|| {
                format!(
                    "cannot verify the audit log of {}",
                    store::redacted(&common.db)
                )
            })
        }
    }
}

/// The commands on stored runs.
fn stored_runs(
    runtime: &tokio::runtime::Runtime,
    common: &Common,
    (http, oauth): (&HttpArgs, &oauth::OAuthArgs),
    command: WorkflowsCommand,
) -> anyhow::Result<ExitCode> {
    let app = open(common, http, oauth)?;
    Ok(match command {
        WorkflowsCommand::Runs { status, limit } => cli::list_runs(&app, status.as_deref(), limit),
        WorkflowsCommand::Status { run_id } => cli::status(&app, &run_id),
        WorkflowsCommand::Purge { older_than } => cli::purge(&app, older_than.unwrap_or_default()),
        WorkflowsCommand::Answer {
            run_id,
            node,
            answer,
            instance,
        } => cli::answer(&app, &run_id, &node, instance, &answer),
        WorkflowsCommand::Resume { run_id, drive } => {
            let drive = drive.args();
            let work = cli::resume(&app, &run_id, &drive);
            runtime.block_on(app.with_housekeeping(TERMINAL, work))
        }
        WorkflowsCommand::Retry { run_id, drive } => {
            let drive = drive.args();
            let work = cli::retry(&app, &run_id, &drive);
            runtime.block_on(app.with_housekeeping(TERMINAL, work))
        }
        WorkflowsCommand::Cancel { run_id } => runtime.block_on(cli::cancel(&app, &run_id)),
        WorkflowsCommand::List
        | WorkflowsCommand::Validate { .. }
        | WorkflowsCommand::Show { .. }
        | WorkflowsCommand::Run { .. } => unreachable!("handled by `run`"),
    })
}
