//! Round trips through the real binary over stdio pipes, each beside the floor of a plain
//! pipe round trip of the same line through `cat`:
//!
//! - `add_task`, in a 2025-11-25 session;
//! - a `tools/call` of `run_workflow` that starts a one-node run as a task, in a
//!   2025-11-25 session (`params.task`) and with the SEP-2663 extension (`_meta`);
//! - `tasks/get` of a finished task, in both forms;
//! - `add_task` throughput with 1, 8 and 64 requests in flight on one connection;
//! - the same `add_task` call through four reference servers (`support/reference.rs`):
//!   an rmcp echo, an rmcp server that commits the call's two rows, and a plain line loop
//!   without and with that commit. They are this host's floor for a call that commits,
//!   measured in the same run as the server.
//!
//! On a virtual machine a wake-up of a process on the other CPU can cost more than a
//! call's whole work (a line loop that works 5 µs a line was measured at 85 µs there). Run
//! under `taskset -c 0`, the bench, the server and `cat` share one CPU and the rows show
//! the work itself; BENCHMARKS.md gives both.
//!
//! Run: `cargo bench --bench stdio_roundtrip`. `BENCH_N` sets the number of measured calls
//! of each latency row and of each throughput round (default 5000), `BENCH_RUNS` the number
//! of runs started as tasks in each form (default 1000), `BENCH_ONLY` the parts to run
//! (see `selected`), and `BENCH_SERVER` the server binary (default: this build's).
//!
//! Each measured call is preceded by a `cat` round trip of the same line, so the floor of a
//! row is taken at the same moments as the row. The clock of a call stops when the line of
//! its reply has been read, before the reply is parsed. A run started as a task goes on in
//! the background after its reply; it is drained, untimed, before the next call (see
//! `drain`), so no earlier run is working while a call is measured; the run a call starts
//! may overlap that call's own reply, as it does for any client.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "support/reference.rs"]
mod reference;

const WARMUP: usize = 200;
const RUN_WARMUP: usize = 100;
/// Requests in flight in the throughput rows.
const DEPTHS: [usize; 3] = [1, 8, 64];

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
    /// Messages read while waiting for another (notifications, in practice).
    backlog: Vec<Value>,
}

impl Peer {
    fn spawn(command: &mut Command) -> Peer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child process");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Peer {
            child,
            stdin,
            stdout,
            line: String::new(),
            backlog: Vec::new(),
        }
    }

    /// This bench binary, started as the reference server `kind` on a database in `dir`.
    fn reference(kind: &str, dir: &Path) -> Peer {
        let me = std::env::current_exe().expect("the bench binary's path");
        Peer::spawn(
            Command::new(me)
                .env(reference::VARIABLE, kind)
                .env(reference::DIR_VARIABLE, dir),
        )
    }

    /// The server, on a database in `dir`, with no workflow folder. `BENCH_SERVER` names
    /// another build of it to measure instead, to set two builds side by side.
    fn server(dir: &Path) -> Peer {
        let workflows = dir.join("workflows");
        std::fs::create_dir_all(&workflows).unwrap();
        let binary = std::env::var_os("BENCH_SERVER")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_mcp-task-server").into());
        Peer::spawn(
            Command::new(binary)
                .arg("--db")
                .arg(dir.join("bench.db"))
                .arg("--workflows")
                .arg(&workflows)
                .arg("--workspace")
                .arg(dir.join("workspace")),
        )
    }

    /// `initialize` with protocol version 2025-11-25, then `notifications/initialized`.
    fn initialize(&mut self) {
        let init = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "stdio_roundtrip", "version": "0"}
            }
        });
        self.send(&init.to_string());
        let (_, reply) = self.response(0);
        assert!(reply.get("result").is_some(), "initialize failed: {reply}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    fn send(&mut self, message: &str) {
        self.stdin.write_all(message.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn read_line(&mut self) -> &str {
        self.line.clear();
        let n = self.stdout.read_line(&mut self.line).unwrap();
        assert!(n > 0, "child closed its stdout");
        self.line.trim_end()
    }

    /// Reads lines until the JSON-RPC response with this id arrives; returns when its line
    /// was read, and the response. Other messages go to the backlog.
    fn response(&mut self, id: u64) -> (Instant, Value) {
        loop {
            self.read_line();
            let read = Instant::now();
            let message: Value = serde_json::from_str(self.line.trim_end()).expect("JSON line");
            if message.get("id").and_then(Value::as_u64) == Some(id) {
                return (read, message);
            }
            self.backlog.push(message);
        }
    }

    /// Takes from the backlog, or reads, the first message `wanted` accepts; other messages
    /// read meanwhile go to the backlog.
    fn wait_for(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.backlog.iter().position(&wanted) {
            return self.backlog.swap_remove(i);
        }
        loop {
            let message: Value = serde_json::from_str(self.read_line()).expect("JSON line");
            if wanted(&message) {
                return message;
            }
            self.backlog.push(message);
        }
    }

    fn finish(mut self) {
        drop(self.stdin);
        self.child.wait().unwrap();
    }
}

/// One round trip of `request` through `cat`, then one through the server; returns the
/// two times and the server's reply.
fn pair(cat: &mut Peer, server: &mut Peer, request: &str, id: u64) -> (Duration, Duration, Value) {
    let start = Instant::now();
    cat.send(request);
    let echoed = cat.read_line() == request;
    let floor = start.elapsed();
    assert!(echoed, "cat echoed something else");
    let start = Instant::now();
    server.send(request);
    let (read, reply) = server.response(id);
    (read - start, floor, reply)
}

/// One latency row: the server's times and the floor's, call by call.
#[derive(Default)]
struct Row {
    server: Vec<Duration>,
    floor: Vec<Duration>,
}

impl Row {
    fn push(&mut self, (server, floor, _): &(Duration, Duration, Value)) {
        self.server.push(*server);
        self.floor.push(*floor);
    }
}

fn request(id: u64, method: &str, params: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string()
}

fn add_task(id: u64) -> String {
    let params = json!({"name": "add_task", "arguments": {"title": format!("bench task {id}")}});
    request(id, "tools/call", params)
}

fn check_added(id: u64, reply: &Value) {
    let result = &reply["result"];
    if result["structuredContent"]["ok"] != json!(true) || result["isError"] == json!(true) {
        panic!("add_task {id} failed: {reply}");
    }
}

/// The two forms a task is asked for and read in.
#[derive(Clone, Copy)]
enum Form {
    /// A 2025-11-25 session: `params.task` on the call.
    V2025_11_25,
    /// SEP-2663: the extension declared in the request's `_meta`, no `params.task`.
    Extension,
}

fn extension_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "b", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        }
    })
}

fn start_run(form: Form, id: u64) -> String {
    let mut params = json!({
        "name": "run_workflow",
        "arguments": {"definition": {"name": "quick", "nodes": {"hi": {"render": "hi"}}}}
    });
    match form {
        Form::V2025_11_25 => params["task"] = json!({}),
        Form::Extension => params["_meta"] = extension_meta(),
    }
    request(id, "tools/call", params)
}

fn task_id_of(form: Form, reply: &Value) -> String {
    let id = match form {
        Form::V2025_11_25 => &reply["result"]["task"]["taskId"],
        Form::Extension => {
            assert_eq!(reply["result"]["resultType"], "task", "{reply}");
            &reply["result"]["taskId"]
        }
    };
    id.as_str()
        .unwrap_or_else(|| panic!("no task in {reply}"))
        .to_owned()
}

fn get_task(form: Form, id: u64, task_id: &str) -> String {
    let mut params = json!({ "taskId": task_id });
    if let Form::Extension = form {
        params["_meta"] = extension_meta();
    }
    request(id, "tasks/get", params)
}

/// The status of a `tasks/get` reply, in either form.
fn status_of(reply: &Value) -> &str {
    reply["result"]["status"]
        .as_str()
        .unwrap_or_else(|| panic!("no status in {reply}"))
}

/// Waits, untimed, until the run of `task_id` has finished. In a 2025-11-25 session the
/// server reports each change of a task's status (`notifications/tasks/status`); the wait
/// is for the one that reports it `completed`, the last thing the server does for the
/// task. With the extension nothing is reported: the task is polled with `tasks/get`
/// until it is `completed`. Returns the number of `tasks/get` sent.
fn drain(server: &mut Peer, form: Form, task_id: &str, next_id: &mut u64) -> u32 {
    match form {
        Form::V2025_11_25 => {
            let done = server.wait_for(|m| {
                m["method"] == "notifications/tasks/status"
                    && m["params"]["taskId"] == task_id
                    && m["params"]["status"] != "working"
            });
            assert_eq!(done["params"]["status"], "completed", "{done}");
            server.backlog.clear();
            0
        }
        Form::Extension => {
            let mut polls = 0;
            loop {
                let id = *next_id;
                *next_id += 1;
                polls += 1;
                server.send(&get_task(form, id, task_id));
                let (_, reply) = server.response(id);
                match status_of(&reply) {
                    "completed" => return polls,
                    "working" => {}
                    other => panic!("task {task_id} is {other}: {reply}"),
                }
            }
        }
    }
}

/// What a run of the task rows gives: the calls' row, the `tasks/get` row and the mean
/// number of polls a drain took.
struct TaskRows {
    start: Row,
    get: Row,
    polls: f64,
}

fn bench_tasks(form: Form, runs: usize, n: usize) -> TaskRows {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Peer::server(dir.path());
    if let Form::V2025_11_25 = form {
        server.initialize();
    }
    let mut cat = Peer::spawn(&mut Command::new("cat"));
    let mut id = 1;
    let mut start = Row::default();
    let mut task_ids = Vec::with_capacity(RUN_WARMUP + runs);
    let mut polls = 0;
    for i in 0..RUN_WARMUP + runs {
        let call = pair(&mut cat, &mut server, &start_run(form, id), id);
        id += 1;
        let task_id = task_id_of(form, &call.2);
        if i >= RUN_WARMUP {
            start.push(&call);
            polls += drain(&mut server, form, &task_id, &mut id);
        } else {
            drain(&mut server, form, &task_id, &mut id);
        }
        task_ids.push(task_id);
    }
    let mut get = Row::default();
    for i in 0..WARMUP + n {
        let task_id = &task_ids[i % task_ids.len()];
        let call = pair(&mut cat, &mut server, &get_task(form, id, task_id), id);
        id += 1;
        assert_eq!(status_of(&call.2), "completed", "{}", call.2);
        if i >= WARMUP {
            get.push(&call);
        }
    }
    cat.finish();
    server.finish();
    TaskRows {
        start,
        get,
        polls: f64::from(polls) / runs as f64,
    }
}

fn bench_add_task(n: usize) -> Row {
    let dir = tempfile::tempdir().unwrap();
    add_task_row(Peer::server(dir.path()), n)
}

/// The `add_task` row of each reference server, with its name.
fn bench_references(n: usize) -> Vec<(&'static str, Row)> {
    reference::KINDS
        .iter()
        .map(|&(kind, name)| {
            let dir = tempfile::tempdir().unwrap();
            (name, add_task_row(Peer::reference(kind, dir.path()), n))
        })
        .collect()
}

fn add_task_row(mut server: Peer, n: usize) -> Row {
    server.initialize();
    let mut cat = Peer::spawn(&mut Command::new("cat"));
    let mut row = Row::default();
    for id in 1..=(WARMUP + n) as u64 {
        let call = pair(&mut cat, &mut server, &add_task(id), id);
        check_added(id, &call.2);
        if id > WARMUP as u64 {
            row.push(&call);
        }
    }
    cat.finish();
    server.finish();
    row
}

/// Sends `requests` keeping `depth` of them in flight; returns the time from the first
/// request sent to the last reply read, and the lines read.
fn pipelined(peer: &mut Peer, requests: &[String], depth: usize) -> (Duration, Vec<String>) {
    let mut lines = Vec::with_capacity(requests.len());
    let mut sent = 0;
    let start = Instant::now();
    while sent < depth.min(requests.len()) {
        peer.send(&requests[sent]);
        sent += 1;
    }
    while lines.len() < requests.len() {
        let line = peer.read_line().to_owned();
        lines.push(line);
        if sent < requests.len() {
            peer.send(&requests[sent]);
            sent += 1;
        }
    }
    (start.elapsed(), lines)
}

/// Calls per second of `add_task` and lines per second through `cat`, for each depth of
/// `DEPTHS`: two rounds of `n` calls per depth, the depths alternating.
fn bench_throughput(n: usize) -> Vec<(usize, f64, f64)> {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Peer::server(dir.path());
    server.initialize();
    let mut cat = Peer::spawn(&mut Command::new("cat"));
    let mut id = 1;
    for _ in 0..WARMUP {
        let call = pair(&mut cat, &mut server, &add_task(id), id);
        check_added(id, &call.2);
        id += 1;
    }
    let mut totals = [(Duration::ZERO, Duration::ZERO); DEPTHS.len()];
    for _round in 0..2 {
        for (d, &depth) in DEPTHS.iter().enumerate() {
            let requests: Vec<String> = (id..id + n as u64).map(add_task).collect();
            let (floor, echoed) = pipelined(&mut cat, &requests, depth);
            assert!(echoed == requests, "cat echoed something else");
            let (elapsed, lines) = pipelined(&mut server, &requests, depth);
            let mut replied: Vec<u64> = lines
                .iter()
                .map(|line| {
                    let reply: Value = serde_json::from_str(line).expect("JSON line");
                    let reply_id = reply["id"].as_u64().expect("a response");
                    check_added(reply_id, &reply);
                    reply_id
                })
                .collect();
            replied.sort_unstable();
            assert!(
                replied.iter().copied().eq(id..id + n as u64),
                "one reply per call"
            );
            id += n as u64;
            totals[d].0 += floor;
            totals[d].1 += elapsed;
        }
    }
    cat.finish();
    server.finish();
    let calls = 2.0 * n as f64;
    DEPTHS
        .iter()
        .zip(totals)
        .map(|(&depth, (floor, server))| {
            (
                depth,
                calls / floor.as_secs_f64(),
                calls / server.as_secs_f64(),
            )
        })
        .collect()
}

/// p50, p90, p99 and mean, in microseconds.
fn stats(samples: &[Duration]) -> [f64; 4] {
    let mut samples = samples.to_vec();
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let pct = |p: f64| us(samples[((samples.len() - 1) as f64 * p).round() as usize]);
    let mean = samples.iter().map(|&d| us(d)).sum::<f64>() / samples.len() as f64;
    [pct(0.50), pct(0.90), pct(0.99), mean]
}

fn env_count(name: &str, default: usize) -> usize {
    let n = std::env::var(name).map_or(default, |v| v.parse().expect(name));
    assert!(n > 0, "{name} must be positive");
    n
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

/// Whether the part `name` runs: all of them unless `BENCH_ONLY` lists some (comma
/// separated: `add_task`, `legacy`, `extension`, `throughput`, `references`), to profile
/// one alone.
fn selected(name: &str) -> bool {
    std::env::var("BENCH_ONLY").map_or(true, |only| only.split(',').any(|p| p.trim() == name))
}

fn main() {
    if let Some(kind) = std::env::var_os(reference::VARIABLE) {
        let dir = std::env::var_os(reference::DIR_VARIABLE).expect("a database folder");
        reference::serve(&kind.to_string_lossy(), Path::new(&dir));
        return;
    }
    let n = env_count("BENCH_N", 5000);
    let runs = env_count("BENCH_RUNS", 1000);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let load_before = load();
    let add = selected("add_task").then(|| bench_add_task(n));
    let legacy = selected("legacy").then(|| bench_tasks(Form::V2025_11_25, runs, n));
    let extension = selected("extension").then(|| bench_tasks(Form::Extension, runs, n));
    let throughput = selected("throughput").then(|| bench_throughput(n));
    let references = selected("references").then(|| bench_references(n));
    let load_after = load();

    println!(
        "CPU: {cpu}; 1-minute load {load_before} -> {load_after}\n\
         {n} calls per row after {WARMUP} warm-up ({runs} runs started per form after \
         {RUN_WARMUP}); each call beside a cat round trip of the same line\n"
    );
    println!(
        "| | p50 µs | p90 µs | p99 µs | mean µs | floor p50 µs | server time µs (p50 - floor p50) | p50 / floor p50 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut rows = vec![
        ("add_task", add.as_ref()),
        (
            "run_workflow as a task, 2025-11-25",
            legacy.as_ref().map(|t| &t.start),
        ),
        (
            "run_workflow as a task, SEP-2663",
            extension.as_ref().map(|t| &t.start),
        ),
        (
            "tasks/get of a finished task, 2025-11-25",
            legacy.as_ref().map(|t| &t.get),
        ),
        (
            "tasks/get of a finished task, SEP-2663",
            extension.as_ref().map(|t| &t.get),
        ),
    ];
    for (name, row) in references.iter().flatten() {
        rows.push((name, Some(row)));
    }
    for (name, row) in rows {
        let Some(row) = row else { continue };
        let s = stats(&row.server);
        let floor = stats(&row.floor)[0];
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {floor:.1} | {:.1} | {:.1}x |",
            s[0],
            s[1],
            s[2],
            s[3],
            s[0] - floor,
            s[0] / floor
        );
    }
    if let Some(extension) = &extension {
        println!(
            "\nDrain of a SEP-2663 run: {:.2} tasks/get per run on average until completed",
            extension.polls
        );
    }
    if let Some(throughput) = throughput {
        println!(
            "\n| add_task in flight | cat lines/s | mcp-task-server calls/s | calls/s / 1 in flight |"
        );
        println!("|---:|---:|---:|---:|");
        let single = throughput[0].2;
        for (depth, floor, server) in throughput {
            println!(
                "| {depth} | {floor:.0} | {server:.0} | {:.2}x |",
                server / single
            );
        }
    }
}
