//! Bearer tokens: the RFC 6750 challenge, a tokens file that must be private and never has
//! its tokens printed, its reload on SIGHUP, and the token the server makes when it is
//! given no file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use super::gate::refused;
use super::*;

use crate::support;

/// What a server printed on stderr, read as it comes.
#[derive(Clone)]
pub(super) struct Captured(Arc<Mutex<Vec<String>>>);

impl Captured {
    fn new(stderr: std::process::ChildStderr) -> Captured {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Captured(lines)
    }

    /// The first line that `matches`, waiting for it.
    pub(super) fn wait_for(&self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            if let Some(line) = self.0.lock().unwrap().iter().find(|l| matches(l)) {
                return line.clone();
            }
            assert!(
                started.elapsed() < DEADLINE,
                "no {what} on stderr:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(super) fn text(&self) -> String {
        self.0.lock().unwrap().join("\n")
    }
}

/// The server started with `extra` exactly (no `--http-no-auth` added) and `RUST_LOG` at
/// `log`, and its stderr.
fn start_captured(extra: &[&str], log: &str) -> (HttpServer, Captured) {
    let db = support::TempDb::new();
    let mut command = HttpServer::command(&db, extra);
    command.env("RUST_LOG", log);
    launch(db, &mut command)
}

/// Starts `command`, a server's on `db`, and waits for its address on stderr.
pub(super) fn launch(db: support::TempDb, command: &mut Command) -> (HttpServer, Captured) {
    let mut child = command.spawn().unwrap();
    let captured = Captured::new(child.stderr.take().unwrap());
    let line = captured.wait_for("address", |l| l.contains("http://"));
    let at = line.split("http://").nth(1).unwrap();
    let addr = at.split('/').next().unwrap().parse().unwrap();
    (HttpServer { child, addr, db }, captured)
}

fn hang_up(server: &HttpServer) {
    let pid = i32::try_from(server.child.id()).unwrap();
    // SAFETY: `kill` with a child's pid and SIGHUP only sends a signal.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
}

#[test]
fn a_refused_request_is_challenged_as_rfc_6750_says() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let none = server.post(&[], &initialize(1));
    assert_eq!(none.status, 401);
    assert_eq!(none.header("www-authenticate"), Some("Bearer"));
    let basic = server.post(&[format!("Authorization: Basic {ALICE}")], &initialize(1));
    assert_eq!(basic.header("www-authenticate"), Some("Bearer"));
    let wrong = server.post(&[bearer("wrong-0123456789abcdef")], &initialize(1));
    assert_eq!(wrong.status, 401);
    assert_eq!(
        wrong.header("www-authenticate"),
        Some(r#"Bearer error="invalid_token""#)
    );
}

#[test]
fn a_tokens_file_others_may_read_is_refused_saying_how_to_fix_it() {
    let db = support::TempDb::new();
    let tokens = db.dir.path().join("tokens");
    write_private(&tokens, &format!("alice {ALICE}\n"));
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o640)).unwrap();
    let args = [
        "--http".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--http-tokens".as_ref(),
        tokens.as_os_str(),
    ];
    let stderr = refused(&db, &args);
    let hint = format!("chmod 600 {}", tokens.display());
    assert!(stderr.contains(&hint), "{stderr}");
    assert!(stderr.contains("0640"), "{stderr}");
    assert!(!stderr.contains(ALICE), "{stderr}");
}

#[test]
fn a_line_with_name_and_token_swapped_prints_no_token() {
    let db = support::TempDb::new();
    let tokens = db.dir.path().join("tokens");
    let secret = "swapped-0123456789abcdef";
    write_private(&tokens, &format!("alice {ALICE}\n{secret} bob\n"));
    let args = [
        "--http".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--http-tokens".as_ref(),
        tokens.as_os_str(),
    ];
    let stderr = refused(&db, &args);
    assert!(stderr.contains("line 2:"), "{stderr}");
    assert!(
        !stderr.contains("swapped-"),
        "a token is never printed: {stderr}"
    );
    assert!(!stderr.contains(ALICE), "{stderr}");
}

/// Opens `session`'s GET stream and reads its head; the stream stays open.
pub(super) fn open_stream(server: &HttpServer, session: &[String]) -> TcpStream {
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut head = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream",
        server.addr.port()
    );
    for header in session {
        head.push_str("\r\n");
        head.push_str(header);
    }
    stream
        .write_all(format!("{head}\r\n\r\n").as_bytes())
        .unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        seen.push(byte[0]);
    }
    let status = String::from_utf8_lossy(&seen);
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    stream
}

/// Whether the SSE stream `stream` ends (its last chunk, or the connection closing)
/// before the deadline.
fn stream_ends(stream: &mut TcpStream) -> bool {
    let deadline = Instant::now() + DEADLINE;
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(n) => {
                seen.extend_from_slice(&buffer[..n]);
                if seen.ends_with(b"0\r\n\r\n") {
                    return true;
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn sighup_reloads_the_tokens_file_and_the_sessions_of_a_removed_token_end() {
    let (server, stderr) = start_captured(&["--http-tokens", "{tokens}"], "info");
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);
    let mut bobs_stream = open_stream(&server, &bob);
    const CAROL: &str = "carol-4b9e2d7a0c5f8b3e6a1d4c9f2b7e0a5d";
    assert_eq!(server.post(&[bearer(CAROL)], &initialize(1)).status, 401);

    let tokens = server.db.dir.path().join("tokens");
    write_private(&tokens, &format!("alice {ALICE}\ncarol {CAROL}\n"));
    hang_up(&server);
    stderr.wait_for("the reload", |l| l.contains("tokens reloaded"));

    assert_eq!(server.post(&[bearer(CAROL)], &initialize(1)).status, 200);
    assert!(
        stream_ends(&mut bobs_stream),
        "the GET stream of bob's session ends with his token"
    );
    let refused = server.post(&bob, &request(2, "tools/list", json!({})));
    assert_eq!(refused.status, 401, "{}", refused.body);
    let listed = server.post(&alice, &request(2, "tools/list", json!({})));
    assert!(listed.response(2)["result"]["tools"].is_array());

    // A file that fails to load changes nothing, and the log says why.
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    hang_up(&server);
    let failed = stderr.wait_for("the failed reload", |l| l.contains("not reloaded"));
    assert!(failed.contains("chmod 600"), "{failed}");
    assert_eq!(server.post(&[bearer(CAROL)], &initialize(1)).status, 200);
    assert!(!stderr.text().contains(CAROL) && !stderr.text().contains(ALICE));
}

#[test]
fn without_a_tokens_file_a_token_is_made_printed_on_stderr_and_required() {
    let (mut server, stderr) = start_captured(&[], "debug");
    let header = stderr.wait_for("the token", |l| l.contains("Authorization: Bearer "));
    let token = header.split("Bearer ").nth(1).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64, "32 random bytes in hex: {token}");
    let entry = stderr.wait_for("a client entry", |l| l.trim_start().starts_with('{'));
    let entry: serde_json::Value = serde_json::from_str(entry.trim()).unwrap();
    assert_eq!(entry["type"], "http");
    assert_eq!(entry["url"], format!("http://{}/mcp", server.addr));
    assert_eq!(entry["headers"]["Authorization"], format!("Bearer {token}"));

    let refused = server.post(&[], &initialize(1));
    assert_eq!(refused.status, 401);
    let session = open_session(&server, &token);
    let listed = server.post(&session, &request(2, "tools/list", json!({})));
    assert!(listed.response(2)["result"]["tools"].is_array());

    // The token appears in the announcement only, nowhere in the log lines.
    server.terminate();
    let text = stderr.text();
    assert_eq!(text.matches(&token).count(), 2, "{text}");
}

#[test]
fn http_no_auth_serves_without_a_token_and_warns() {
    let (server, stderr) = start_captured(&["--http-no-auth"], "info");
    let warning = stderr.wait_for("a warning", |l| l.contains("--http-no-auth"));
    assert!(warning.contains("WARN"), "{warning}");
    let served = server.post(&[], &initialize(1));
    assert_eq!(served.status, 200, "{}", served.body);
    assert!(!stderr.text().contains("Authorization: Bearer"));
}
