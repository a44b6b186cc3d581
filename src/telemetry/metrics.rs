//! The server's instruments, made once when a meter is set up, and the one call each
//! layer makes to record into them. Every function here is a load and a branch while no
//! meter is (telemetry off over stdio, and in tests and benches run in process).
//!
//! Invariant: no attribute carries a principal, a token, a session, a run id or anything
//! of a call's arguments: only method names, the names of published tools and installed
//! workflows, statuses, error codes and the transport. The set of values each attribute
//! takes is bounded by the server's own configuration, whatever clients send.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter, UpDownCounter};

/// The MCP semantic conventions' buckets for operation and session durations, in seconds.
pub(crate) const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// Buckets of the calls committed together, a power of two each.
const GROUP_BUCKETS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

pub(super) struct Instruments {
    operation: Histogram<f64>,
    session: Histogram<f64>,
    runs_started: Counter<u64>,
    runs_finished: Counter<u64>,
    attempts: Counter<u64>,
    retries: Counter<u64>,
    questions: UpDownCounter<i64>,
    takeovers: Counter<u64>,
    group: Histogram<u64>,
}

static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

#[inline]
fn instruments() -> Option<&'static Instruments> {
    INSTRUMENTS.get()
}

/// Makes the instruments on `meter`; the first meter set up stays.
pub(super) fn install(meter: &Meter) {
    let _ = INSTRUMENTS.set(Instruments {
        operation: meter
            .f64_histogram("mcp.server.operation.duration")
            .with_unit("s")
            .with_description("The duration of an MCP request, from its receipt to its answer.")
            .with_boundaries(DURATION_BUCKETS.to_vec())
            .build(),
        session: meter
            .f64_histogram("mcp.server.session.duration")
            .with_unit("s")
            .with_description("The duration of an MCP session, from its opening to its end.")
            .with_boundaries(DURATION_BUCKETS.to_vec())
            .build(),
        runs_started: meter
            .u64_counter("mcp_task_server.runs.started")
            .with_unit("{run}")
            .with_description("Workflow runs started (a run taken over is not started again).")
            .build(),
        runs_finished: meter
            .u64_counter("mcp_task_server.runs.finished")
            .with_unit("{run}")
            .with_description("Workflow runs finished, by their final status.")
            .build(),
        attempts: meter
            .u64_counter("mcp_task_server.node.attempts")
            .with_unit("{attempt}")
            .with_description("Attempts of workflow nodes: each unit's first, and each retry.")
            .build(),
        retries: meter
            .u64_counter("mcp_task_server.node.retries")
            .with_unit("{attempt}")
            .with_description("Failed node attempts that are tried again.")
            .build(),
        questions: meter
            .i64_up_down_counter("mcp_task_server.questions.waiting")
            .with_unit("{question}")
            .with_description("Questions of runs driven by this process waiting for an answer.")
            .build(),
        takeovers: meter
            .u64_counter("mcp_task_server.lease.takeovers")
            .with_unit("{run}")
            .with_description("Unfinished runs this process took over from a process that stopped.")
            .build(),
        group: meter
            .u64_histogram("mcp_task_server.store.commit_group.size")
            .with_unit("{call}")
            .with_description("Tool calls committed together in one SQLite transaction.")
            .with_boundaries(GROUP_BUCKETS.to_vec())
            .build(),
    });
}

/// How an MCP request ended, as the operation's metric names it.
pub(crate) struct Operation {
    /// `mcp.method.name`: one of the protocol's methods, or `_OTHER`.
    pub(crate) method: &'static str,
    /// `gen_ai.tool.name`: a published tool's name ([`name`]), for `tools/call`.
    pub(crate) tool: Option<&'static str>,
    /// `error.type`: a JSON-RPC error code ([`name`]), or `tool_error`.
    pub(crate) error: Option<&'static str>,
    /// `network.transport`: `pipe` (stdio) or `tcp` (HTTP).
    pub(crate) transport: &'static str,
}

/// Whether [`operation`] records anything: the caller may then skip gathering it.
#[inline]
pub(crate) fn on() -> bool {
    instruments().is_some()
}

/// The most names [`name`] keeps; past them a new name is `_OTHER`.
const MAX_NAMES: usize = 4096;

/// `text` as a name that lives as long as the process, for attributes recorded on every
/// request without an allocation each: each distinct text is kept once. The callers pass
/// only what the server's configuration bounds (published tools, error codes); the cap
/// holds whatever they pass.
pub(crate) fn name(text: &str) -> &'static str {
    static NAMES: OnceLock<parking_lot::RwLock<std::collections::HashSet<&'static str>>> =
        OnceLock::new();
    let names = NAMES.get_or_init(Default::default);
    if let Some(known) = names.read().get(text) {
        return known;
    }
    let mut names = names.write();
    if let Some(known) = names.get(text) {
        return known;
    }
    if names.len() >= MAX_NAMES {
        return "_OTHER";
    }
    let kept: &'static str = Box::leak(text.to_owned().into_boxed_str());
    names.insert(kept);
    kept
}

/// One MCP request answered after `elapsed`.
pub(crate) fn operation(elapsed: Duration, operation: &Operation) {
    let Some(instruments) = instruments() else {
        return;
    };
    let seconds = elapsed.as_secs_f64();
    let method = KeyValue::new("mcp.method.name", operation.method);
    let transport = KeyValue::new("network.transport", operation.transport);
    let tool = operation.tool.map(|t| KeyValue::new("gen_ai.tool.name", t));
    let error = operation.error.map(|e| KeyValue::new("error.type", e));
    // Arrays rather than a vector: nothing is allocated for a request.
    let histogram = &instruments.operation;
    match (tool, error) {
        (None, None) => histogram.record(seconds, &[method, transport]),
        (Some(tool), None) => histogram.record(seconds, &[method, transport, tool]),
        (None, Some(error)) => histogram.record(seconds, &[method, transport, error]),
        (Some(tool), Some(error)) => {
            histogram.record(seconds, &[method, transport, tool, error]);
        }
    }
}

/// One MCP session ended after `elapsed`, on `transport` (`pipe` or `tcp`).
pub(crate) fn session(elapsed: Duration, transport: &'static str) {
    if let Some(instruments) = instruments() {
        let attributes = [KeyValue::new("network.transport", transport)];
        instruments
            .session
            .record(elapsed.as_secs_f64(), &attributes);
    }
}

/// A run of `workflow` (an installed workflow's name, or `inline`) started.
pub(crate) fn run_started(workflow: &str) {
    if let Some(instruments) = instruments() {
        let attributes = [KeyValue::new(
            "mcp_task_server.workflow.name",
            name(workflow),
        )];
        instruments.runs_started.add(1, &attributes);
    }
}

/// A run of `workflow` finished with `status` (`succeeded`, `failed`, `cancelled`).
pub(crate) fn run_finished(workflow: &str, status: &'static str) {
    if let Some(instruments) = instruments() {
        let attributes = [
            KeyValue::new("mcp_task_server.workflow.name", name(workflow)),
            KeyValue::new("mcp_task_server.run.status", status),
        ];
        instruments.runs_finished.add(1, &attributes);
    }
}

/// A node attempt of a run of `workflow` (as [`run_started`] names it) started: a
/// unit's first, or a retry, which `tasks.node.retries` also counts.
pub(crate) fn attempt(workflow: &str, retry: bool) {
    if let Some(instruments) = instruments() {
        let attributes = [KeyValue::new(
            "mcp_task_server.workflow.name",
            name(workflow),
        )];
        instruments.attempts.add(1, &attributes);
        if retry {
            instruments.retries.add(1, &attributes);
        }
    }
}

/// A question of a run counted in `tasks.questions.waiting` while this lives.
pub(crate) struct QuestionWaiting(());

impl QuestionWaiting {
    pub(crate) fn start() -> QuestionWaiting {
        if let Some(instruments) = instruments() {
            instruments.questions.add(1, &[]);
        }
        QuestionWaiting(())
    }
}

impl Drop for QuestionWaiting {
    fn drop(&mut self) {
        if let Some(instruments) = instruments() {
            instruments.questions.add(-1, &[]);
        }
    }
}

/// This process took over a run from one that stopped.
pub(crate) fn takeover() {
    if let Some(instruments) = instruments() {
        instruments.takeovers.add(1, &[]);
    }
}

/// `calls` tool calls committed in one transaction.
pub(crate) fn commit_group(calls: usize) {
    if let Some(instruments) = instruments() {
        instruments
            .group
            .record(u64::try_from(calls).unwrap_or(u64::MAX), &[]);
    }
}

/// Reports a connection pool's use whenever the metrics are read: `status` gives the
/// connections open, idle, the most allowed, and the callers waiting for one. The
/// conventions' `db.client.connection.*` instruments, for a pool named `name`.
pub(crate) fn connection_pool(
    name: &'static str,
    status: impl Fn() -> Option<PoolStatus> + Send + Sync + Clone + 'static,
) {
    if instruments().is_none() {
        return;
    }
    let meter = super::meter();
    let pool = KeyValue::new("db.client.connection.pool.name", name);
    let (count_status, count_pool) = (status.clone(), pool.clone());
    meter
        .i64_observable_up_down_counter("db.client.connection.count")
        .with_unit("{connection}")
        .with_description("Connections of the pool, by state.")
        .with_callback(move |observer| {
            if let Some(s) = count_status() {
                let state = |v: &'static str| KeyValue::new("db.client.connection.state", v);
                observer.observe(s.idle, &[count_pool.clone(), state("idle")]);
                observer.observe(s.open - s.idle, &[count_pool.clone(), state("used")]);
            }
        })
        .build();
    let (max_status, max_pool) = (status.clone(), pool.clone());
    meter
        .i64_observable_up_down_counter("db.client.connection.max")
        .with_unit("{connection}")
        .with_description("The most connections the pool opens.")
        .with_callback(move |observer| {
            if let Some(s) = max_status() {
                observer.observe(s.max, std::slice::from_ref(&max_pool));
            }
        })
        .build();
    meter
        .i64_observable_up_down_counter("db.client.connection.pending_requests")
        .with_unit("{request}")
        .with_description("Callers waiting for a connection of the pool.")
        .with_callback(move |observer| {
            if let Some(s) = status() {
                observer.observe(s.waiting, std::slice::from_ref(&pool));
            }
        })
        .build();
}

/// A connection pool's use at one moment.
pub(crate) struct PoolStatus {
    pub(crate) open: i64,
    pub(crate) idle: i64,
    pub(crate) max: i64,
    pub(crate) waiting: i64,
}
