//! `add_task` over Streamable HTTP with many sessions at once, through the gate a server
//! with tokens puts before every request (the token, the session's owner, the caps on
//! streams in all and per principal): throughput, and the p50 and p99 of a call.
//!
//! `BENCH_SESSIONS` sessions (default 32), half opened by each of two principals, each on
//! a keep-alive connection of its own, call at once for `BENCH_SECONDS` (default 5);
//! `BENCH_SERVER` names the server binary (default: this build's).
//!
//! Run: `cargo bench --bench http_sessions`.
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[path = "support/http_client.rs"]
mod http_client;

use http_client::{Connection, add_task, check_added, open_session};

const PRINCIPALS: [(&str, &str); 2] = [
    ("alice", "alice-bench-6d1a8f3c0e5b2d9a4f7c1e6b3a8d0f5c"),
    ("bob", "bob-bench-2c7f0a5d8b3e6c1f4a9d2b7e0c5a8f3d"),
];

/// Calls each session makes before the measured ones.
const WARMUP: u64 = 20;

/// The server binary serving HTTP on loopback with a tokens file, on a database of its
/// own.
struct Server {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(sessions: usize) -> Server {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens");
        let lines: String = PRINCIPALS
            .iter()
            .map(|(name, token)| format!("{name} {token}\n"))
            .collect();
        std::fs::write(&tokens, lines).unwrap();
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
        let binary = std::env::var_os("BENCH_SERVER")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_mcp-task-server").into());
        let cap = (sessions * 2).max(64).to_string();
        let mut child = Command::new(binary)
            .arg("--db")
            .arg(dir.path().join("bench.db"))
            .args(["--http", "127.0.0.1:0", "--http-tokens"])
            .arg(&tokens)
            .env("TASKS_HTTP_MAX_SESSIONS", &cap)
            // As environment variables, which a binary older than the options ignores.
            .env("TASKS_HTTP_MAX_SESSIONS_PER_PRINCIPAL", &cap)
            .env("TASKS_HTTP_MAX_STREAMS_PER_PRINCIPAL", &cap)
            .env("RUST_LOG", "info")
            .env_remove("TASKS_HTTP")
            .env_remove("TASKS_HTTP_NO_AUTH")
            .arg("serve")
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

    /// A 2025-11-25 session opened with `token` on a connection of its own: the
    /// connection and the headers of its requests.
    fn session(&self, token: &str) -> (Connection, Vec<String>) {
        let mut connection = Connection::open(self.addr);
        let headers = open_session(&mut connection, &[format!("Authorization: Bearer {token}")]);
        (connection, headers)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The measured calls of every session, and how long the round lasted.
fn round(server: &Server, sessions: usize, seconds: u64) -> (Vec<Duration>, Duration) {
    let start = Arc::new(Barrier::new(sessions + 1));
    let clients: Vec<_> = (0..sessions)
        .map(|index| {
            let start = start.clone();
            let (_, token) = PRINCIPALS[index % PRINCIPALS.len()];
            let (mut connection, headers) = server.session(token);
            std::thread::spawn(move || {
                for id in 1..=WARMUP {
                    let (_, reply) = connection.post("/mcp", &headers, &add_task(id));
                    check_added(id, &reply);
                }
                start.wait();
                let began = Instant::now();
                let mut samples = Vec::new();
                let mut id = WARMUP;
                while began.elapsed() < Duration::from_secs(seconds) {
                    id += 1;
                    let sent = Instant::now();
                    let (_, reply) = connection.post("/mcp", &headers, &add_task(id));
                    samples.push(sent.elapsed());
                    check_added(id, &reply);
                }
                (samples, began.elapsed())
            })
        })
        .collect();
    start.wait();
    let mut samples = Vec::new();
    let mut elapsed = Duration::ZERO;
    for client in clients {
        let (calls, took) = client.join().unwrap();
        samples.extend(calls);
        elapsed = elapsed.max(took);
    }
    (samples, elapsed)
}

/// The `q` quantile of sorted `samples`, in microseconds.
fn quantile(samples: &[Duration], q: f64) -> f64 {
    let at = ((samples.len() - 1) as f64 * q).round() as usize;
    samples[at].as_secs_f64() * 1e6
}

fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| v.parse().expect(name))
}

fn main() {
    let sessions = env_count("BENCH_SESSIONS", 32) as usize;
    let seconds = env_count("BENCH_SECONDS", 5);
    let server = Server::start(sessions);
    let (mut samples, elapsed) = round(&server, sessions, seconds);
    samples.sort();
    let throughput = samples.len() as f64 / elapsed.as_secs_f64();
    println!(
        "{sessions} sessions of {} principals calling add_task at once for {seconds} s, \
         one keep-alive connection each, with tokens\n",
        PRINCIPALS.len()
    );
    println!("| calls | calls/s | p50 µs | p99 µs |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {} | {throughput:.0} | {:.1} | {:.1} |",
        samples.len(),
        quantile(&samples, 0.50),
        quantile(&samples, 0.99)
    );
}
