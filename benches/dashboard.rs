//! The dashboard with a big store: the time to render the runs list, a filtered list and
//! a run's page with `BENCH_RUNS` runs in the store (default 10 000), and the cost of live
//! updates while `BENCH_WATCHERS` browsers (default 50) watch one busy run.
//!
//! The runs are made in process through the engine (a 4-node workflow of two phases, each
//! run recorded as any run is), then the server binary serves them over HTTP with a tokens
//! file; every figure is taken from outside it, on loopback, one request at a time on a
//! keep-alive connection: the time from the request's first byte sent to the response's
//! last byte read. Live updates: the server's CPU time (user + system, from
//! `/proc/PID/stat`) over `BENCH_SECONDS` (default 4) while a chain of short waits runs,
//! without a watcher and then with the watchers' event streams open, and the updates each
//! watcher received.
//!
//! Run: `cargo bench --bench dashboard` (`BENCH_SERVER` names another server binary).
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_task_server::app::{App, Config};
use mcp_task_server::engine::RunOptions;
use mcp_task_server::engine::plan::Plan;
use mcp_task_server::store::Owner;
use serde_json::{Map, json};

#[path = "support/http_client.rs"]
mod http_client;
use http_client::Connection;

const TOKEN: &str = "alice-bench-6d1a8f3c0e5b2d9a4f7c1e6b3a8d0f5c";

/// The workflow of the runs in the store.
const STORED: &str = r#"
name = "stored"
[nodes.draft]
phase = "write"
render = "draft {{ inputs.n }}"
[nodes.check]
phase = "write"
needs = ["draft"]
value = { expr = "nodes.draft.output | length" }
[nodes.publish]
phase = "ship"
needs = ["check"]
render = "published"
[nodes.note]
phase = "ship"
needs = ["check"]
render = "noted"
"#;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runs = env("BENCH_RUNS", 10_000) as usize;
    let watchers = env("BENCH_WATCHERS", 50) as usize;
    let seconds = env("BENCH_SECONDS", 4);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tasks.db");
    let started = Instant::now();
    let last = fill(&db, runs);
    println!(
        "store: {runs} runs made in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let server = Server::start(dir.path(), &db);
    let mut connection = Http::open(server.addr);
    let cookie = connection.sign_in();
    let run_page = format!("/runs/{last}");
    for (name, path) in [
        ("runs list, first page", "/"),
        ("runs list, filtered by text", "/?q=zzz-no-such-run"),
        (
            "runs list, filtered by workflow and status",
            "/?workflow=stored&status=succeeded",
        ),
        ("a run's page", run_page.as_str()),
    ] {
        let times = connection.time_gets(path, &cookie, 200);
        println!(
            "{name:<44} p50 {:>7.2} ms  p90 {:>7.2} ms  ({} bytes)",
            times.p50, times.p90, times.bytes
        );
    }

    // A busy run: 400 waits of 10 ms in a chain, each a change of the store.
    let busy = |connection: &mut Http| connection.start_busy(&cookie);
    let idle_run = busy(&mut connection);
    let alone = server.cpu_over(Duration::from_secs(seconds));
    let watched_run = busy(&mut connection);
    let received = Arc::new(AtomicUsize::new(0));
    let streams: Vec<_> = (0..watchers)
        .map(|_| watch(server.addr, &cookie, &watched_run, received.clone()))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let before = received.load(Ordering::Relaxed);
    let watched = server.cpu_over(Duration::from_secs(seconds));
    let updates = received.load(Ordering::Relaxed) - before;
    println!(
        "live updates: server CPU {:.1} % of a core with no watcher, {:.1} % with {watchers} \
         watching one busy run; {:.1} updates a second to each watcher",
        alone * 100.0,
        watched * 100.0,
        updates as f64 / watchers as f64 / seconds as f64
    );
    drop(streams);
    let _ = idle_run;
}

/// Makes `runs` recorded runs of [`STORED`] in the database at `db`; the last one's id.
fn fill(db: &std::path::Path, runs: usize) -> String {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // The workspace beside the database, never holding it.
    let workspace = db.with_file_name("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let app = App::open(&Config::new(db.display().to_string(), workspace)).unwrap();
    let def = mcp_task_server::engine::loader::parse_toml("stored.toml", "stored", STORED).unwrap();
    let plan = Arc::new(Plan::new(Arc::new(def)));
    runtime.block_on(async {
        let mut last = String::new();
        for n in 0..runs {
            let mut inputs = Map::new();
            inputs.insert("n".to_owned(), json!(n));
            // Alice's, as if she had started them: the runs her pages list.
            let options = RunOptions {
                record: true,
                owner: Owner {
                    principal: Some("alice".to_owned()),
                    session: None,
                },
                ..RunOptions::default()
            };
            let report = app.engine().run(plan.clone(), inputs, options).await;
            last = report.run_id;
        }
        last
    })
}

/// The server binary serving HTTP with a tokens file, on the filled database.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(dir: &std::path::Path, db: &std::path::Path) -> Server {
        use std::os::unix::fs::PermissionsExt as _;
        let tokens = dir.join("tokens");
        std::fs::write(&tokens, format!("alice {TOKEN}\n")).unwrap();
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
        let workflows = dir.join("workflows");
        std::fs::create_dir_all(&workflows).unwrap();
        let chain: String = (0..400)
            .map(|i| match i {
                0 => "[nodes.n0]\nwait = \"10ms\"\n".to_owned(),
                i => format!("[nodes.n{i}]\nneeds = [\"n{}\"]\nwait = \"10ms\"\n", i - 1),
            })
            .collect();
        std::fs::write(
            workflows.join("busy.toml"),
            format!("name = \"busy\"\n{chain}"),
        )
        .unwrap();
        let server = std::env::var("BENCH_SERVER")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_mcp-task-server").to_owned());
        let mut child = Command::new(server)
            .args(["--db", &db.display().to_string(), "--http", "127.0.0.1:0"])
            .arg("--http-tokens")
            .arg(&tokens)
            .arg("--workflows")
            .arg(&workflows)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let addr = http_client::listening_address(&mut child);
        Server { child, addr }
    }

    /// The share of a core the server used over `period`.
    fn cpu_over(&self, period: Duration) -> f64 {
        let ticks = || {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
            let after = stat.rsplit_once(')').unwrap().1;
            let fields: Vec<&str> = after.split_whitespace().collect();
            // utime and stime: fields 14 and 15 of the line, 12 and 13 after the name.
            fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
        };
        // SAFETY: sysconf only reads a configuration value.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let (start, at) = (ticks(), Instant::now());
        std::thread::sleep(period);
        (ticks() - start) as f64 / per_second / at.elapsed().as_secs_f64()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Times {
    p50: f64,
    p90: f64,
    bytes: usize,
}

/// One keep-alive connection to the dashboard, on the HTTP benches' client.
struct Http(Connection);

impl Http {
    fn open(addr: SocketAddr) -> Http {
        Http(Connection::open(addr))
    }

    /// A request from the dashboard's own pages: its `Origin`, the login `cookie`, and a
    /// form `body`.
    fn send(
        &mut self,
        method: &str,
        path: &str,
        cookie: &str,
        body: &str,
    ) -> (Vec<String>, String) {
        let headers = [
            format!("Origin: http://{}", self.0.host()),
            format!("Cookie: {cookie}"),
        ];
        const FORM: &str = "Content-Type: application/x-www-form-urlencoded\r\n";
        self.0.request(method, path, FORM, &headers, body)
    }

    fn sign_in(&mut self) -> String {
        let (head, _) = self.send("POST", "/login", "", &format!("token={TOKEN}"));
        let cookie = head
            .iter()
            .find_map(|h| h.strip_prefix("set-cookie: "))
            .expect("a login");
        cookie.split(';').next().unwrap().to_owned()
    }

    fn time_gets(&mut self, path: &str, cookie: &str, count: usize) -> Times {
        for _ in 0..10 {
            self.send("GET", path, cookie, "");
        }
        let mut times = Vec::with_capacity(count);
        let mut bytes = 0;
        for _ in 0..count {
            let at = Instant::now();
            let (head, body) = self.send("GET", path, cookie, "");
            times.push(at.elapsed().as_secs_f64() * 1000.0);
            assert!(head[0].contains(" 200 "), "{head:?}");
            bytes = body.len();
        }
        times.sort_by(f64::total_cmp);
        Times {
            p50: times[count / 2],
            p90: times[count * 9 / 10],
            bytes,
        }
    }

    /// Starts a run of the busy chain from its workflow's page; its id.
    fn start_busy(&mut self, cookie: &str) -> String {
        let (head, _) = self.send("POST", "/workflows/busy/start", cookie, "");
        let location = head
            .iter()
            .find_map(|h| h.strip_prefix("location: /runs/"))
            .expect("a run");
        location.to_owned()
    }
}

/// Opens a run page's event stream, as a browser on the page does, and counts the updates
/// it receives until the process ends.
fn watch(
    addr: SocketAddr,
    cookie: &str,
    run: &str,
    received: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<()> {
    let mut stream = TcpStream::connect(addr).unwrap();
    let request = format!(
        "GET /runs/{run}/live HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    std::thread::spawn(move || {
        let reader = BufReader::new(stream);
        for line in reader.lines().map_while(Result::ok) {
            if line.starts_with("event: update") {
                received.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
}
