//! Latency of one `add_task` round trip through the real binary over stdio pipes, beside
//! the floor of a plain pipe round trip through `cat`. Run: `cargo bench --bench stdio_roundtrip`
//! (`BENCH_N` sets the number of measured calls, default 5000).
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WARMUP: usize = 200;

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
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
        }
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

    /// Reads lines until the JSON-RPC response with this id arrives.
    fn response(&mut self, id: u64) -> Value {
        loop {
            let message: Value = serde_json::from_str(self.read_line()).expect("JSON line");
            if message.get("id").and_then(Value::as_u64) == Some(id) {
                return message;
            }
        }
    }

    fn finish(mut self) {
        drop(self.stdin);
        self.child.wait().unwrap();
    }
}

fn add_task(id: u64) -> String {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "add_task", "arguments": {"title": format!("bench task {id}")}}
    })
    .to_string()
}

/// One measured `add_task` call; panics unless the result is `ok: true`.
fn call(server: &mut Peer, id: u64) -> Duration {
    let request = add_task(id);
    let start = Instant::now();
    server.send(&request);
    let response = server.response(id);
    let elapsed = start.elapsed();
    let result = &response["result"];
    if result["structuredContent"]["ok"] != json!(true) || result["isError"] == json!(true) {
        panic!("add_task {id} failed: {response}");
    }
    elapsed
}

fn bench_server(n: usize) -> Vec<Duration> {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Peer::spawn(
        Command::new(env!("CARGO_BIN_EXE_mcp-task-server"))
            .arg("--db")
            .arg(dir.path().join("bench.db")),
    );
    server.send(
        &json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "stdio_roundtrip", "version": "0"}
            }
        })
        .to_string(),
    );
    let init = server.response(0);
    assert!(init.get("result").is_some(), "initialize failed: {init}");
    server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let mut id = 1;
    for _ in 0..WARMUP {
        call(&mut server, id);
        id += 1;
    }
    let samples = (0..n)
        .map(|_| {
            let latency = call(&mut server, id);
            id += 1;
            latency
        })
        .collect();
    server.finish();
    samples
}

fn bench_cat(n: usize) -> Vec<Duration> {
    let mut cat = Peer::spawn(&mut Command::new("cat"));
    let mut samples = Vec::with_capacity(n);
    for i in 0..(WARMUP + n) as u64 {
        let request = add_task(i + 1);
        let start = Instant::now();
        cat.send(&request);
        let echoed = cat.read_line() == request;
        let elapsed = start.elapsed();
        assert!(echoed, "cat echoed something else");
        if i >= WARMUP as u64 {
            samples.push(elapsed);
        }
    }
    cat.finish();
    samples
}

/// p50, p90, p99 and mean, in microseconds.
fn stats(mut samples: Vec<Duration>) -> [f64; 4] {
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let pct = |p: f64| us(samples[((samples.len() - 1) as f64 * p).round() as usize]);
    let mean = samples.iter().map(|&d| us(d)).sum::<f64>() / samples.len() as f64;
    [pct(0.50), pct(0.90), pct(0.99), mean]
}

fn main() {
    let n: usize = std::env::var("BENCH_N").map_or(5000, |v| v.parse().expect("BENCH_N"));
    assert!(n > 0, "BENCH_N must be positive");
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let floor = stats(bench_cat(n));
    let server = stats(bench_server(n));
    println!("N = {n} sequential calls (after {WARMUP} warm-up), CPU: {cpu}\n");
    println!("| | p50 µs | p90 µs | p99 µs | mean µs | p50 / floor p50 |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, s) in [
        ("cat (pipe floor)", floor),
        ("mcp-task-server add_task", server),
    ] {
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1}x |",
            s[0],
            s[1],
            s[2],
            s[3],
            s[0] / floor[0]
        );
    }
}
