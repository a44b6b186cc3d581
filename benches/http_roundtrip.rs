//! MCP over Streamable HTTP through the real binary, beside a plain HTTP echo server
//! measured in the same run with the same client:
//!
//! - the latency of one `add_task` call at a time in a 2025-11-25 session, each call
//!   beside an echo round trip of the same body on a connection of its own;
//! - `add_task` throughput with `BENCH_SESSIONS` sessions (default 32) calling at once,
//!   each on its own keep-alive connection, beside the echo's with as many connections.
//!
//! Run: `cargo bench --bench http_roundtrip`. `BENCH_N` sets the calls of the latency
//! row (default 5000), `BENCH_SECONDS` the length of each throughput round (default 5),
//! and `BENCH_SERVER` the server binary (default: this build's).
//!
//! The client is a small blocking HTTP/1.1 one, so that both servers see the same client
//! costs: it writes a request whole and reads the response to its end (`Content-Length`,
//! or the chunks of an SSE response, which rmcp sends for a session's requests).
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[path = "support/http_client.rs"]
mod http_client;

use http_client::{Connection, add_task, check_added, open_session};

const WARMUP: usize = 200;

/// An HTTP/1.1 server that answers every POST with its body, a thread per connection.
fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let stream = stream.unwrap();
            stream.set_nodelay(true).unwrap();
            std::thread::spawn(move || echo(stream));
        }
    });
    addr
}

fn echo(stream: TcpStream) {
    let mut read = BufReader::new(stream.try_clone().unwrap());
    let mut write = stream;
    loop {
        let mut length = 0;
        loop {
            let mut line = String::new();
            if read.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        read.read_exact(&mut body).unwrap();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
        );
        let mut reply = head.into_bytes();
        reply.extend_from_slice(&body);
        if write.write_all(&reply).is_err() {
            return;
        }
    }
}

/// The server binary serving HTTP on loopback, on a database of its own.
struct Server {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let binary = std::env::var_os("BENCH_SERVER")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_mcp-task-server").into());
        let mut child = Command::new(binary)
            .arg("--db")
            .arg(dir.path().join("bench.db"))
            .args(["--http", "127.0.0.1:0", "--http-max-sessions", "1024"])
            .arg("serve")
            .env("RUST_LOG", "info")
            .env_remove("TASKS_HTTP")
            // Loopback without tokens, as before the server made one of its own; as an
            // environment variable, which a binary older than the option ignores.
            .env("TASKS_HTTP_NO_AUTH", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let addr = http_client::listening_address(&mut child);
        Server {
            child,
            addr,
            _dir: dir,
        }
    }

    /// A 2025-11-25 session on a connection of its own: the connection and its headers.
    fn session(&self) -> (Connection, Vec<String>) {
        let mut connection = Connection::open(self.addr);
        let headers = open_session(&mut connection, &[]);
        (connection, headers)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// p50 and p99, in microseconds.
fn percentiles(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.50).as_secs_f64() * 1e6, at(0.99).as_secs_f64() * 1e6)
}

fn latency(server: &Server, echo: SocketAddr, n: usize) -> ((f64, f64), (f64, f64)) {
    let (mut mcp, headers) = server.session();
    let mut floor = Connection::open(echo);
    let (mut calls, mut echoes) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for id in 1..=(WARMUP + n) as u64 {
        let body = add_task(id);
        let sent = Instant::now();
        floor.post("/echo", &[], &body);
        let echoed = sent.elapsed();
        let sent = Instant::now();
        let (_, reply) = mcp.post("/mcp", &headers, &body);
        let called = sent.elapsed();
        check_added(id, &reply);
        if id > WARMUP as u64 {
            calls.push(called);
            echoes.push(echoed);
        }
    }
    (percentiles(&mut calls), percentiles(&mut echoes))
}

/// Calls per second of `sessions` clients calling at once for `seconds`, against the MCP
/// server (`mcp`) or the echo.
fn throughput(server: &Server, echo: SocketAddr, sessions: usize, seconds: u64, mcp: bool) -> f64 {
    let start = Arc::new(Barrier::new(sessions + 1));
    let clients: Vec<_> = (0..sessions)
        .map(|_| {
            let start = start.clone();
            let (mut connection, headers) = match mcp {
                true => server.session(),
                false => (Connection::open(echo), Vec::new()),
            };
            std::thread::spawn(move || {
                start.wait();
                let began = Instant::now();
                let mut calls = 0u64;
                while began.elapsed() < Duration::from_secs(seconds) {
                    calls += 1;
                    let body = add_task(calls);
                    let path = if mcp { "/mcp" } else { "/echo" };
                    let (_, reply) = connection.post(path, &headers, &body);
                    if mcp {
                        check_added(calls, &reply);
                    }
                }
                (calls, began.elapsed())
            })
        })
        .collect();
    start.wait();
    let done: Vec<(u64, Duration)> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let calls: u64 = done.iter().map(|(c, _)| c).sum();
    let elapsed = done.iter().map(|(_, e)| *e).max().unwrap();
    calls as f64 / elapsed.as_secs_f64()
}

fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| v.parse().expect(name))
}

fn main() {
    let n = env_count("BENCH_N", 5000) as usize;
    let sessions = env_count("BENCH_SESSIONS", 32) as usize;
    let seconds = env_count("BENCH_SECONDS", 5);
    let server = Server::start();
    let echo = echo_server();

    let ((p50, p99), (echo_p50, echo_p99)) = latency(&server, echo, n);
    println!("{n} add_task calls one at a time, each beside an echo of the same body\n");
    println!("| | p50 µs | p99 µs |");
    println!("|---|---:|---:|");
    println!("| add_task over HTTP | {p50:.1} | {p99:.1} |");
    println!("| plain HTTP echo | {echo_p50:.1} | {echo_p99:.1} |");
    println!(
        "| difference (server time) | {:.1} | {:.1} |\n",
        p50 - echo_p50,
        p99 - echo_p99
    );

    let echoed = throughput(&server, echo, sessions, seconds, false);
    let called = throughput(&server, echo, sessions, seconds, true);
    println!("{sessions} clients at once for {seconds} s each, one keep-alive connection each\n");
    println!("| | calls/s |");
    println!("|---|---:|");
    println!("| add_task over HTTP, {sessions} sessions | {called:.0} |");
    println!("| plain HTTP echo, {sessions} connections | {echoed:.0} |");
}
