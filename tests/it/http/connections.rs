//! Connections that misbehave before any token is checked: thousands sending half a
//! request line to a server held to 1024 file descriptors, and keep-alive connections
//! left idle. Bounded in count and time, on loopback only; the timings asserted are
//! generous liveness bounds, not speeds.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

use super::tokens::{Captured, launch, open_stream};
use super::*;

use crate::support;

/// The descriptors the server may hold, as under `ulimit -n 1024`.
const FD_LIMIT: u64 = 1024;

/// Half a request line: the head never completes.
const HALF_LINE: &[u8] = b"GET /healthz HT";

/// The server held to [`FD_LIMIT`] descriptors, with `extra` and `--http-no-auth`.
fn start_limited(extra: &[&str]) -> (HttpServer, Captured) {
    let mut extra = extra.to_vec();
    extra.push("--http-no-auth");
    let db = support::TempDb::new();
    let mut command = HttpServer::command(&db, &extra);
    // SAFETY: only `setrlimit`, which is async-signal-safe, runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: FD_LIMIT,
                rlim_max: FD_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    launch(db, &mut command)
}

/// Lets this test process hold a few thousand sockets.
///
/// The limit is the process's, which every test in this binary shares, and every child
/// it starts inherits: it is only ever raised, to a soft limit no lower than before, once.
/// Tests that need a low limit set it in their child alone (as [`start_limited`] does).
fn raise_own_fd_limit() {
    static RAISED: std::sync::Once = std::sync::Once::new();
    RAISED.call_once(|| {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `getrlimit` and `setrlimit` read and write the struct given, nothing else.
        unsafe {
            assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
            if limit.rlim_cur < 8192 {
                limit.rlim_cur = limit.rlim_max.min(8192);
                assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
            }
        }
    });
}

/// `count` connections that each send `bytes`; those the kernel took.
fn connections_sending(addr: SocketAddr, count: usize, bytes: &[u8]) -> Vec<TcpStream> {
    (0..count)
        .filter_map(|_| {
            let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
            stream.write_all(bytes).ok()?;
            Some(stream)
        })
        .collect()
}

/// Whether the server closed `stream` before `deadline`.
fn closed_by(mut stream: &TcpStream, deadline: Instant) -> bool {
    let mut buffer = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(error) if error.kind() == ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// A field of `/proc/<pid>/status`, in kB.
fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in {status}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The CPU time the process has used, user and system.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses: utime and stime are the
    // 12th and 13th of them.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: `sysconf` reads a constant of the system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

/// A keep-alive connection on which `/healthz` is asked again and again.
struct Probe(TcpStream);

impl Probe {
    fn new(addr: SocketAddr) -> Probe {
        Probe::within(addr, DEADLINE).expect("a connection")
    }

    /// A connection made within `limit`, whose answers must come within a second.
    fn within(addr: SocketAddr, limit: Duration) -> Option<Probe> {
        let probe = Probe(TcpStream::connect_timeout(&addr, limit).ok()?);
        probe
            .0
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        Some(probe)
    }

    /// Asks `/healthz`; whether `ok` came back within the read timeout.
    fn healthy(&mut self) -> bool {
        let request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
        if self.0.write_all(request).is_err() {
            return false;
        }
        let mut seen = Vec::new();
        let mut buffer = [0u8; 512];
        while !seen.ends_with(b"\r\n\r\nok\n") {
            match self.0.read(&mut buffer) {
                Ok(0) | Err(_) => return false,
                Ok(n) => seen.extend_from_slice(&buffer[..n]),
            }
        }
        seen.starts_with(b"HTTP/1.1 200")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_half_open_connections_starve_nobody_and_are_closed_after_the_header_timeout()
{
    raise_own_fd_limit();
    let header_timeout = Duration::from_secs(2);
    let (server, _stderr) = start_limited(&["--http-header-timeout", "2s"]);
    let pid = server.child.id();
    let url = format!("http://{}/mcp", server.addr);
    crate::support::install_tls_provider();
    let client =
        ().serve(StreamableHttpClientTransport::from_uri(url.as_str()))
            .await
            .expect("the client connects");
    let mut probe = Probe::new(server.addr);
    assert!(probe.healthy());
    let rss_before = status_kb(pid, "VmRSS:");

    let addr = server.addr;
    let mut flood = Some(std::thread::spawn(move || {
        connections_sending(addr, 2000, HALF_LINE)
    }));
    let mut sockets = None;
    let mut added = 0;
    let mut rss_peak = rss_before;
    let started = Instant::now();
    // Throughout the flood and until the server has closed it all, both probes answer.
    while started.elapsed() < header_timeout * 4 {
        assert!(probe.healthy(), "/healthz after {:?}", started.elapsed());
        // A new connection gets in too: one that waited for a request head makes room.
        // Reaching it means going through the backlog the flood fills, so it is given
        // a little longer than the open connection.
        let fresh = Probe::within(server.addr, Duration::from_secs(3));
        assert!(
            fresh.is_some_and(|mut fresh| fresh.healthy()),
            "/healthz on a new connection after {:?}",
            started.elapsed()
        );
        let title = format!("during the flood {added}");
        let call = CallToolRequestParams::new("add_task")
            .with_arguments(json!({"title": title}).as_object().unwrap().clone());
        // Under the header timeout (2 s), which a starved call would wait out; above what a
        // call takes on a loaded two-core machine running the other tests beside it.
        let result = tokio::time::timeout(Duration::from_millis(1500), client.call_tool(call))
            .await
            .unwrap_or_else(|_| panic!("add_task unanswered after {:?}", started.elapsed()))
            .expect("add_task succeeds");
        assert_eq!(result.is_error, Some(false), "{result:?}");
        added += 1;
        rss_peak = rss_peak.max(status_kb(pid, "VmRSS:"));
        if flood.as_ref().is_some_and(|f| f.is_finished()) {
            sockets = flood.take().map(|f| f.join().unwrap());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sockets = sockets.unwrap_or_else(|| flood.unwrap().join().unwrap());
    eprintln!(
        "{} half-open connections; {added} add_task calls during the flood; \
         RSS {rss_before} kB before, {rss_peak} kB at most",
        sockets.len()
    );
    assert!(sockets.len() >= 1500, "only {} connected", sockets.len());
    let deadline = Instant::now() + header_timeout * 4 + DEADLINE;
    let open = sockets.iter().filter(|s| !closed_by(s, deadline)).count();
    assert_eq!(open, 0, "half-open connections the server never closed");
    assert!(
        rss_peak < rss_before + 256 * 1024,
        "RSS grew from {rss_before} kB to {rss_peak} kB"
    );
    assert!(probe.healthy() || Probe::new(server.addr).healthy());
    let _ = client.cancel().await;
}

#[test]
fn at_the_descriptor_limit_accept_backs_off_and_serves_again_once_descriptors_free_up() {
    raise_own_fd_limit();
    // Connections left idle after a request are not closed to make room (those that
    // never sent one would be): they hold the descriptors until the idle timeout.
    let idle_timeout = Duration::from_secs(6);
    let (server, stderr) = start_limited(&["--http-idle-timeout", "6s"]);
    let pid = server.child.id();
    let request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let sockets = connections_sending(server.addr, 1200, request);
    stderr.wait_for("the accept failure", |l| l.contains("cannot accept"));
    let flooded = Instant::now();

    // At the limit for a while: the server pauses between attempts instead of spinning.
    let before = cpu_time(pid);
    std::thread::sleep(Duration::from_secs(3));
    let used = cpu_time(pid) - before;
    assert!(
        flooded.elapsed() < idle_timeout,
        "still at the limit while measured"
    );
    assert!(
        used < Duration::from_millis(900),
        "{used:?} of CPU in 3 s at the descriptor limit"
    );

    // Once the idle connections time out, new ones are served.
    let deadline = Instant::now() + idle_timeout * 3 + DEADLINE;
    assert!(sockets.iter().all(|s| closed_by(s, deadline)));
    let health = server.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1", "");
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    let warnings = stderr
        .text()
        .lines()
        .filter(|l| l.contains("cannot accept"))
        .count();
    assert!(
        warnings <= 3,
        "{warnings} warnings: one a burst of failures"
    );
}

#[test]
fn an_idle_keep_alive_connection_is_closed_and_an_open_sse_stream_is_not() {
    let idle_timeout = Duration::from_secs(1);
    let server = HttpServer::start(&["--http-idle-timeout", "1s"]);
    let session = open_session_as(&server, vec![]).0;
    let mut stream = open_stream(&server, &session);

    let mut idle = Probe::new(server.addr);
    assert!(idle.healthy());
    let answered = Instant::now();
    assert!(
        closed_by(&idle.0, answered + DEADLINE),
        "the idle connection is closed"
    );
    assert!(answered.elapsed() >= idle_timeout - Duration::from_millis(100));

    // The stream has waited for events longer than the idle timeout, and is still open.
    std::thread::sleep(idle_timeout);
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buffer = [0u8; 1024];
    match stream.read(&mut buffer) {
        Ok(0) => panic!("the SSE stream was closed"),
        Ok(_) => {}
        Err(error) => assert!(
            matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{error}"
        ),
    }
    // And the session it belongs to is still served.
    let listed = server.post(&session, &request(2, "tools/list", json!({})));
    assert!(listed.response(2)["result"]["tools"].is_array());
}
