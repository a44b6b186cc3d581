//! PostgreSQL beside SQLite, measured in one run: the floor of one commit on PostgreSQL,
//! the `add_task` round trip over stdio, durable scheduling per node, the takeover latency
//! after a host is lost, and the throughput of short runs on two hosts against one.
//!
//! Run: `TASKS_TEST_POSTGRES=postgres://… cargo bench --bench postgres` (`.ci/run`'s
//! `tests/postgres/ensure` prints such a URL). Each figure gets a fresh SQLite file and a
//! fresh PostgreSQL schema. `BENCH_N` sets the calls of the round trip (default 2000),
//! `BENCH_RUNS` the runs of the throughput rows (default 200), `BENCH_ONLY` the parts to
//! run (comma separated: `floor`, `add_task`, `durable`, `takeover`, `short`; all by
//! default) and `BENCH_SERVER` the server binary the hosts run (default: this build's).
//!
//! Durability is reported as it is set: SQLite at its default (`synchronous=NORMAL`, which
//! may lose the last commits when the machine dies) and at `--durability full` (each
//! commit waits for the disk), PostgreSQL as its server is configured (its
//! `synchronous_commit` is printed; `on`, the default, waits for the disk): the fair pair
//! is `sqlite-full` beside `postgres` with `synchronous_commit = on`.
//!
//! A "host" is a `serve` process; two hosts on one SQLite file share it as two processes
//! on one machine do, two on PostgreSQL as two machines would.

// A bench prints its table on stdout; no MCP stream is there.
#![allow(clippy::print_stdout)]

// The integration tests' places on both backends; this bench uses a part of them, and not
// the macro that makes tests of them.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../tests/it/support/backends.rs"]
mod backends;
#[path = "support/shapes.rs"]
mod shapes;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use backends::Place;
use mcp_task_server::app::{App, Config};
use mcp_task_server::store::{Durability, Scope, Store, TEST_POSTGRES};
use serde_json::{Value, json};

/// The server the hosts run: `BENCH_SERVER`, else this build's.
fn server_binary() -> std::ffi::OsString {
    std::env::var_os("BENCH_SERVER").unwrap_or_else(|| env!("CARGO_BIN_EXE_mcp-task-server").into())
}

/// A database of one kind, as a figure's row names it.
#[derive(Clone, Copy)]
struct Backend {
    name: &'static str,
    postgres: bool,
    durability: Durability,
}

impl Backend {
    /// A fresh database of this kind, kept for one figure.
    fn place(self) -> Place {
        if self.postgres {
            Place::postgres("bench").expect("a PostgreSQL server")
        } else {
            Place::sqlite()
        }
    }

    /// What `--durability` takes.
    fn durability_arg(self) -> &'static str {
        match self.durability {
            Durability::Normal => "normal",
            Durability::Full => "full",
        }
    }
}

const BACKENDS: [Backend; 3] = [
    Backend {
        name: "sqlite",
        postgres: false,
        durability: Durability::Normal,
    },
    Backend {
        name: "sqlite-full",
        postgres: false,
        durability: Durability::Full,
    },
    Backend {
        name: "postgres",
        postgres: true,
        durability: Durability::Normal,
    },
];

/// Whether the part `name` runs: all of them unless `BENCH_ONLY` lists some.
fn selected(name: &str) -> bool {
    std::env::var("BENCH_ONLY").map_or(true, |only| only.split(',').any(|p| p.trim() == name))
}

/// A `serve` process with a 2025-11-25 session open on its stdio.
struct Host {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Host {
    fn start(backend: Backend, db: &str, workflows: &std::path::Path, lease: &str) -> Host {
        let mut child = Command::new(server_binary())
            .env_remove("RUST_LOG")
            .args(["--durability", backend.durability_arg()])
            .args(["--db", db, "--lease", lease, "--workflows"])
            .arg(workflows)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut host = Host {
            child,
            stdin,
            stdout,
        };
        host.call(
            json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": { "name": "bench", "version": "1" } } }),
        );
        host.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        host
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and reads lines until its reply.
    fn call(&mut self, message: Value) -> Value {
        let id = message["id"].clone();
        self.send(message);
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the server hung up"
            );
            let reply: Value = serde_json::from_str(&line).unwrap();
            if reply["id"] == id {
                return reply;
            }
        }
    }

    /// Starts `runs` of workflow `name` as tasks; their replies arrive at once.
    fn start_runs(&mut self, name: &str, runs: std::ops::Range<u64>) {
        for n in runs {
            let reply = self.call(
                json!({ "jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
                "params": { "name": name, "arguments": {}, "task": {} } }),
            );
            assert!(reply["result"]["task"]["taskId"].is_string(), "{reply}");
        }
    }

    fn signal(&self, signal: i32) {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: a signal to a child of this process that has not been reaped.
        unsafe { libc::kill(pid, signal) };
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    percentile(&values, 0.5)
}

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Lock-step `add_task` calls: one in flight at a time. On PostgreSQL, beside the floor
/// (`floor`) the p50 is also given as a multiple of it.
fn add_task_round_trip(n: usize, floor: Option<f64>) {
    println!("\nadd_task round trip over stdio, lock-step, {n} calls (µs)");
    println!(
        "{:<12} {:>8} {:>8} {:>8} {:>12}",
        "backend", "p50", "p99", "mean", "p50 / floor"
    );
    let empty = tempfile::tempdir().unwrap();
    for backend in BACKENDS {
        let place = backend.place();
        let mut host = Host::start(backend, &place.location(), empty.path(), "15s");
        let mut times = Vec::with_capacity(n);
        for i in 0..n + 100 {
            let started = Instant::now();
            let reply = host.call(
                json!({ "jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                "params": { "name": "add_task", "arguments": { "title": format!("todo {i}") } } }),
            );
            let elapsed = started.elapsed().as_secs_f64() * 1e6;
            assert_eq!(reply["result"]["structuredContent"]["ok"], true, "{reply}");
            if i >= 100 {
                times.push(elapsed);
            }
        }
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        times.sort_by(f64::total_cmp);
        let p50 = percentile(&times, 0.5);
        let ratio = match floor {
            Some(floor) if backend.postgres => format!("{:.2}", p50 / floor),
            _ => "-".to_owned(),
        };
        println!(
            "{:<12} {p50:>8.1} {:>8.1} {mean:>8.1} {ratio:>12}",
            backend.name,
            percentile(&times, 0.99),
        );
    }
}

/// The floor of a PostgreSQL commit: one `INSERT` of a todo's row, committed on its own
/// (`INSERT …; COMMIT` as one round trip), lock-step on one connection to the same server,
/// from this process. No call can commit a todo in less; the lock-step `add_task` p50 is
/// given as a multiple of this one's. Returns its p50 (µs).
fn commit_floor(n: usize) -> f64 {
    let place = Backend::place(BACKENDS[2]);
    // The schema and its tables, made by opening the store there.
    drop(place.store());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (times, synchronous_commit) = rt.block_on(async {
        let (client, connection) =
            tokio_postgres::connect(&place.location(), tokio_postgres::NoTls)
                .await
                .expect("PostgreSQL answers");
        tokio::spawn(connection);
        let synchronous_commit: String = client
            .query_one("SHOW synchronous_commit", &[])
            .await
            .unwrap()
            .get(0);
        let insert = client
            .prepare("INSERT INTO todos (title, created_at) VALUES ($1, $2)")
            .await
            .unwrap();
        let mut times = Vec::with_capacity(n);
        for i in 0..n + 100 {
            let title = format!("todo {i}");
            let started = Instant::now();
            client
                .execute(&insert, &[&title, &"2026-12-07T00:00:00Z"])
                .await
                .unwrap();
            if i >= 100 {
                times.push(started.elapsed().as_secs_f64() * 1e6);
            }
        }
        (times, synchronous_commit)
    });
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let mut times = times;
    times.sort_by(f64::total_cmp);
    let p50 = percentile(&times, 0.5);
    println!(
        "\nPostgreSQL commit floor: one INSERT committed on its own, lock-step, {n} round trips \
         (µs; synchronous_commit = {synchronous_commit})"
    );
    println!("{:<12} {:>8} {:>8} {:>8}", "", "p50", "p99", "mean");
    println!(
        "{:<12} {p50:>8.1} {:>8.1} {mean:>8.1}",
        "floor",
        percentile(&times, 0.99)
    );
    p50
}

/// No-op runs of 1 000 nodes through the task registry, in this process: the time of a
/// run over its nodes.
fn durable_per_node() {
    println!("\ndurable scheduling, no-op nodes, median of 10 runs (µs per node)");
    println!(
        "{:<12} {:>12} {:>12}",
        "backend", "chain/1000", "fanout/1000"
    );
    let rt = shapes::runtime();
    let shapes = [shapes::chain(1000), shapes::fanout(1000)].map(|shape| {
        let nodes = shape.len() as f64;
        (shapes::plan("shape", &shape), nodes)
    });
    for backend in BACKENDS {
        let place = backend.place();
        let workspace = tempfile::tempdir().unwrap();
        let mut config = Config::new(place.location(), workspace.path());
        config.durability = backend.durability;
        let app = App::open(&config).expect("the application opens");
        let engine = app.engine().clone();
        let mut row = Vec::new();
        for (plan, nodes) in &shapes {
            let times: Vec<f64> = (0..11)
                .map(|_| {
                    let started = Instant::now();
                    let report = rt.block_on(shapes::spawned_run(engine.clone(), Arc::clone(plan)));
                    assert_eq!(report.status.as_str(), "succeeded");
                    started.elapsed().as_secs_f64() * 1e6 / nodes
                })
                .skip(1)
                .collect();
            row.push(median(times));
        }
        println!("{:<12} {:>12.1} {:>12.1}", backend.name, row[0], row[1]);
    }
}

const LONG: &str = r#"
name = "long"
description = "Waits long."
expose_as_tool = true

[nodes.pause]
wait = "10m"
"#;

const SHORT: &str = r#"
name = "short"
description = "Makes a todo and says so."
expose_as_tool = true

[nodes.todo]
tool = "add_task"
args = { title = "short" }

[nodes.said]
render = "made {{ nodes.todo.output.id }}"
needs = ["todo"]
"#;

fn workflows() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("long.toml"), LONG).unwrap();
    std::fs::write(dir.path().join("short.toml"), SHORT).unwrap();
    dir
}

fn lease_owner(store: &Store) -> Option<String> {
    let runs = store.list_runs(None, Scope::Everyone, 1).unwrap();
    let run = store.run(&runs.first()?.id).unwrap()?;
    run.lease_owner
}

fn until(limit: Duration, mut done: impl FnMut() -> bool) {
    let limit = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < limit, "timed out");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// From host A's loss to host B's claim on A's run, with a 3 s lease (renewed, and orphans
/// looked for, every 1 s): a killed host is seen gone at B's next round on this machine; a
/// stopped one (alive, as a host cut off by the network) only once its lease runs out. A
/// is lost half a second after B starts, so that B's rounds fall anywhere.
fn takeover_latency() {
    println!("\ntakeover of a lost host's run, lease 3 s (ms): median and worst of 7");
    println!("{:<12} {:>16} {:>16}", "backend", "killed", "stopped");
    let flows = workflows();
    for backend in BACKENDS {
        let mut row = Vec::new();
        for stop in [false, true] {
            let times: Vec<f64> = (0..7)
                .map(|_| {
                    let place = backend.place();
                    let store = place.store();
                    let mut a = Host::start(backend, &place.location(), flows.path(), "3s");
                    a.start_runs("long", 0..1);
                    until(Duration::from_secs(10), || lease_owner(&store).is_some());
                    let b = Host::start(backend, &place.location(), flows.path(), "3s");
                    let b_prefix = format!("{}@", b.child.id());
                    std::thread::sleep(Duration::from_millis(500));
                    let lost = Instant::now();
                    if stop {
                        a.signal(libc::SIGSTOP);
                    } else {
                        let _ = a.child.kill();
                        let _ = a.child.wait();
                    }
                    until(Duration::from_secs(20), || {
                        lease_owner(&store).is_some_and(|o| o.starts_with(&b_prefix))
                    });
                    lost.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            let worst = times.iter().copied().fold(0.0, f64::max);
            row.push(format!("{:.0} / {worst:.0}", median(times)));
        }
        println!("{:<12} {:>16} {:>16}", backend.name, row[0], row[1]);
    }
}

/// `runs` short runs started as tasks, on one host or split between two; from the first
/// request to the last run's end.
fn short_run_throughput(runs: u64) {
    println!("\nshort runs (a todo, then a render), {runs} started as tasks (runs/s)");
    println!("{:<12} {:>10} {:>10}", "backend", "one host", "two hosts");
    let flows = workflows();
    for backend in BACKENDS {
        let mut row = Vec::new();
        for hosts in [1, 2] {
            let place = backend.place();
            let store = place.store();
            let mut started: Vec<Host> = (0..hosts)
                .map(|_| Host::start(backend, &place.location(), flows.path(), "15s"))
                .collect();
            let share = runs / hosts;
            let begun = Instant::now();
            std::thread::scope(|scope| {
                for (i, host) in started.iter_mut().enumerate() {
                    let first = i as u64 * share;
                    scope.spawn(move || host.start_runs("short", first..first + share));
                }
            });
            until(Duration::from_secs(120), || {
                let done = store
                    .list_runs(Some("succeeded"), Scope::Everyone, runs as usize + 1)
                    .unwrap();
                done.len() as u64 == runs
            });
            row.push(runs as f64 / begun.elapsed().as_secs_f64());
            assert_eq!(
                store.list_todos(&Default::default()).unwrap().len() as u64,
                runs
            );
        }
        println!("{:<12} {:>10.0} {:>10.0}", backend.name, row[0], row[1]);
    }
}

fn main() {
    if std::env::var_os(TEST_POSTGRES).is_none() {
        eprintln!("{TEST_POSTGRES} names no PostgreSQL server: nothing to compare");
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n = env_count("BENCH_N", 2000);
    let floor = selected("floor").then(|| commit_floor(n));
    if selected("add_task") {
        add_task_round_trip(n, floor);
    }
    if selected("durable") {
        durable_per_node();
    }
    if selected("takeover") {
        takeover_latency();
    }
    if selected("short") {
        short_run_throughput(env_count("BENCH_RUNS", 200) as u64);
    }
}
