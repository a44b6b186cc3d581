//! What every request passes before it is served: tokens, `Host` and `Origin`, the limits
//! on bodies, sessions and streams, and a clean shutdown.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::*;

use crate::support;

#[test]
fn health_answers_without_a_token_and_everything_else_needs_one() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let health = server.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1", "");
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));

    for headers in [
        vec![],
        vec![bearer("wrong-0123456789abcdef")],
        vec![format!("Authorization: Basic {ALICE}")],
    ] {
        let refused = server.post(&headers, &initialize(1));
        assert_eq!(refused.status, 401, "{headers:?}");
        assert!(!refused.body.contains("0123456789abcdef"));
    }
    let served = server.post(&[bearer(ALICE)], &initialize(1));
    assert_eq!(served.status, 200, "{}", served.body);
}

#[test]
fn a_request_from_a_foreign_host_or_origin_is_refused() {
    let server = HttpServer::start(&[]);
    let port = server.addr.port();
    let foreign_host = server.send(
        "POST /mcp HTTP/1.1\r\nHost: rebound.example\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream",
        &initialize(1).to_string(),
    );
    assert_eq!(foreign_host.status, 403, "{}", foreign_host.body);
    let foreign_origin = server.post(
        &["Origin: http://rebound.example".to_owned()],
        &initialize(1),
    );
    assert_eq!(foreign_origin.status, 403, "{}", foreign_origin.body);
    let local_page = server.post(
        &[format!("Origin: http://localhost:{port}")],
        &initialize(1),
    );
    assert_eq!(local_page.status, 200, "{}", local_page.body);
}

#[test]
fn a_named_host_is_served_and_other_paths_are_not_found() {
    let server = HttpServer::start(&["--http-host", "tasks.internal"]);
    let named = server.send(
        "POST /mcp HTTP/1.1\r\nHost: tasks.internal:8765\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream",
        &initialize(1).to_string(),
    );
    assert_eq!(named.status, 200, "{}", named.body);
    let elsewhere = server.send("GET /sse HTTP/1.1\r\nHost: 127.0.0.1", "");
    assert_eq!(elsewhere.status, 404);
}

/// Starts the server with `args` on `db`, expects it to refuse them, and returns what it
/// said on stderr.
pub(super) fn refused(db: &support::TempDb, args: &[&std::ffi::OsStr]) -> String {
    let mut child = Command::new(support::BIN)
        .env_remove("TASKS_HTTP_TOKENS_FILE")
        .env_remove("TASKS_HTTP_NO_AUTH")
        .arg("--db")
        .arg(&db.path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server started instead of refusing {args:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn serving_beyond_loopback_without_tokens_is_refused_naming_the_option() {
    let db = support::TempDb::new();
    let stderr = refused(&db, &["--http".as_ref(), "0.0.0.0:0".as_ref()]);
    assert!(
        stderr.contains("without tokens") && stderr.contains("--http-tokens"),
        "{stderr}"
    );
    assert!(
        !db.path.exists(),
        "nothing is opened before the options are checked"
    );
}

#[test]
fn a_bad_tokens_file_is_refused_with_every_problem_by_line() {
    let db = support::TempDb::new();
    let tokens = db.dir.path().join("tokens");
    write_private(&tokens, "alice tiny-secret\nbob\n");
    let args = [
        "--http".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--http-tokens".as_ref(),
        tokens.as_os_str(),
    ];
    let stderr = refused(&db, &args);
    assert!(
        stderr.contains("line 1:") && stderr.contains("line 2:"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("tiny-secret"),
        "a token is never printed: {stderr}"
    );
}

#[test]
fn sigterm_ends_the_server_cleanly() {
    let mut server = HttpServer::start(&[]);
    let _session = server.post(&[], &initialize(1));
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    assert!(
        TcpStream::connect(server.addr).is_err(),
        "nothing listens any more"
    );
}

#[test]
fn sigterm_gives_up_the_runs_the_server_drives_for_another_process_to_take() {
    let mut server = HttpServer::start(&[]);
    let task_id = start_modern_task(&server, json!({"nodes": {"sleep": {"wait": "30s"}}}));
    assert_eq!(
        get_modern_task(&server, &task_id)["result"]["status"],
        "working"
    );
    let store = support::read_only(&server.db.path);
    let lease = || {
        store
            .lease_owner(&task_id)
            .unwrap()
            .expect("the run is recorded")
    };
    assert!(
        lease().is_some(),
        "the driving server holds the run's lease"
    );

    server.terminate();
    assert_eq!(
        lease(),
        None,
        "the lease is released at shutdown, not left to expire"
    );
}

#[test]
fn a_session_beyond_the_cap_is_refused_until_one_closes() {
    let server = HttpServer::start(&["--http-max-sessions", "2"]);
    let first = server.post(&[], &initialize(1));
    let second = server.post(&[], &initialize(1));
    assert_eq!((first.status, second.status), (200, 200));
    let third = server.post(&[], &initialize(1));
    assert_eq!(third.status, 503, "{}", third.body);
    assert_eq!(third.header("retry-after"), Some("5"));
    assert!(
        third.body.contains("too many open sessions"),
        "{}",
        third.body
    );

    let session = first.header("mcp-session-id").unwrap();
    let closed = server.send(
        &format!(
            "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: {session}\r\n\
             MCP-Protocol-Version: 2025-11-25"
        ),
        "",
    );
    assert!(closed.status < 300, "{} {}", closed.status, closed.body);
    assert_eq!(server.post(&[], &initialize(1)).status, 200);
}

#[test]
fn an_oversized_body_is_refused_and_the_server_goes_on_serving() {
    let server = HttpServer::start(&[]);
    let session = open_session_as(&server, vec![]).0;
    let title = "x".repeat(5 * 1024 * 1024);
    let refused = server.post(&session, &call(2, "add_task", json!({"title": title})));
    assert_eq!(refused.status, 413, "{}", refused.body);
    assert!(refused.body.contains("exceeds"), "{}", refused.body);

    let added = server.post(&session, &call(3, "add_task", json!({"title": "after"})));
    let result = &added.response(3)["result"];
    assert_eq!(result["structuredContent"]["ok"], json!(true), "{result}");
}

#[test]
fn a_stream_beyond_the_cap_is_refused_until_one_closes() {
    let server = HttpServer::start(&["--http-max-streams", "1"]);
    let session = open_session_as(&server, vec![]).0;
    let other = open_session_as(&server, vec![]).0;
    // The session's standalone stream, held open.
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut head = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream",
        server.addr.port()
    );
    for header in &session {
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

    let refused = server.post(&session, &request(2, "tools/list", json!({})));
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(
        refused.body.contains("too many open streams"),
        "{}",
        refused.body
    );
    assert_eq!(refused.header("retry-after"), Some("5"));

    // Closing another session is served at the cap: it opens no stream.
    let closed = server.send(
        &format!(
            "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{}\r\nMCP-Protocol-Version: 2025-11-25",
            other[0]
        ),
        "",
    );
    assert!(closed.status < 300, "{} {}", closed.status, closed.body);

    drop(stream);
    let started = std::time::Instant::now();
    loop {
        let listed = server.post(&session, &request(3, "tools/list", json!({})));
        if listed.status == 200 {
            assert!(listed.response(3)["result"]["tools"].is_array());
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the closed stream's permit never came back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_server_card_tells_a_client_before_it_connects_where_and_how_to_connect() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let host = format!("127.0.0.1:{}", server.addr.port());
    let reply = server.send(
        &format!("GET /mcp/server-card HTTP/1.1\r\nHost: {host}\r\nAccept: application/mcp-server-card+json"),
        "",
    );
    assert_eq!(reply.status, 200, "no token needed: {}", reply.body);
    assert_eq!(
        reply.header("content-type"),
        Some("application/mcp-server-card+json")
    );
    let card: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    for field in ["$schema", "name", "version", "description"] {
        assert!(card[field].is_string(), "{field}: {card}");
    }
    let name = card["name"].as_str().unwrap();
    assert_eq!(name.matches('/').count(), 1, "namespace/name: {name}");
    let remote = &card["remotes"][0];
    assert_eq!(remote["type"], "streamable-http");
    assert_eq!(remote["url"], format!("http://{host}/mcp"));
    assert_eq!(remote["headers"][0]["name"], "Authorization");
    assert_eq!(remote["headers"][0]["isSecret"], true);
    assert_eq!(
        remote["supportedProtocolVersions"],
        serde_json::json!(["2025-11-25", "2026-07-28"])
    );
    let foreign = server.send(
        "GET /mcp/server-card HTTP/1.1\r\nHost: attacker.example",
        "",
    );
    assert_eq!(foreign.status, 403);
}

#[test]
fn a_2026_07_28_client_is_told_how_long_it_may_keep_each_list_and_who_may_share_it() {
    let server = HttpServer::start(&[]);
    let list = |method: &str| {
        let message = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method,
                                         "params": {"_meta": super::modern_meta()}});
        let headers = [
            "MCP-Protocol-Version: 2026-07-28".to_owned(),
            format!("Mcp-Method: {method}"),
        ];
        server.post(&headers, &message).response(1)["result"].clone()
    };
    for method in ["tools/list", "prompts/list", "resources/templates/list"] {
        let result = list(method);
        assert_eq!(
            (result["ttlMs"].clone(), result["cacheScope"].clone()),
            (serde_json::json!(60_000), serde_json::json!("public")),
            "{method}: {result}"
        );
    }
    let files = list("resources/list");
    assert_eq!(
        (files["ttlMs"].clone(), files["cacheScope"].clone()),
        (serde_json::json!(0), serde_json::json!("private")),
        "{files}"
    );
    // A 2025-11-25 session hears of no hint its protocol does not know.
    let session = super::open_session_as(&server, vec![]).0;
    let listed = server.post(
        &session,
        &super::request(2, "tools/list", serde_json::json!({})),
    );
    assert!(listed.response(2)["result"].get("ttlMs").is_none());
}

/// The workspace is where clients' workflows read and write: a start with the database or
/// the tokens file in it is refused, each named with how to fix it, and nothing is opened.
#[test]
fn a_start_with_the_database_or_the_tokens_file_in_the_workspace_is_refused_saying_how() {
    let db = support::TempDb::new();
    let tokens = db.dir.path().join("tokens");
    write_private(&tokens, &format!("alice {ALICE}\n"));
    let output = Command::new(support::BIN)
        .env_remove("TASKS_WORKSPACE")
        .current_dir(db.dir.path())
        .arg("--db")
        .arg(&db.path)
        .args(["--workspace", ".", "--http", "127.0.0.1:0", "--http-tokens"])
        .arg(&tokens)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("holds the database"), "{stderr}");
    assert!(stderr.contains("holds the tokens file"), "{stderr}");
    assert!(stderr.contains("--workspace"), "{stderr}");
    assert!(
        !db.path.exists(),
        "nothing is opened before the layout is checked"
    );
}

/// Without `--workspace`, runs write in `./workspace`, a folder of its own made at start,
/// never in the working folder that holds the database.
#[test]
fn by_default_runs_write_in_a_workspace_folder_beside_the_database_not_around_it() {
    let db = support::TempDb::new();
    let notes = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/resources");
    let output = Command::new(support::BIN)
        .env_remove("TASKS_WORKSPACE")
        .env_remove("TASKS_DB_PATH")
        .current_dir(db.dir.path())
        .args([
            "--db",
            "tasks.db",
            "--workflows",
            notes,
            "workflows",
            "run",
            "note",
        ])
        .args(["--input", "name=first", "--input", "text=hello"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written = db.dir.path().join("workspace/notes/first.md");
    assert_eq!(std::fs::read_to_string(written).unwrap(), "hello");
    assert!(!db.dir.path().join("notes").exists());
}
