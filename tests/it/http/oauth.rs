//! The server as an OAuth 2.1 resource server (`--oauth-issuer`), against an issuer of
//! the test's own (`oauth/issuer.rs`): its protected-resource metadata, the challenges of
//! missing, bad and too narrow tokens, hostile tokens each refused, the JWKS fetched no
//! more often than its rate limit however many unknown key ids come, keys rotated in
//! and dropped while a client is connected, opaque tokens through introspection, the
//! principals of two users apart, and no token in the log; the dashboard's sign-in
//! through the issuer in `oauth/dashboard.rs`.

mod dashboard;
mod issuer;

use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use super::tokens::launch;
use super::*;
use issuer::Issuer;

use crate::support;

const ALL_SCOPES: &str = "tasks:read tasks:todos tasks:run tasks:answer";

/// The server with OAuth of `issuer` and `extra`, and the audience its tokens need.
fn start(issuer: &Issuer, extra: &[&str]) -> (HttpServer, String) {
    let mut args = vec![
        "--oauth-issuer",
        &issuer.url,
        "--http-free-sign-in-failures",
        "1000",
    ];
    args.extend_from_slice(extra);
    let server = HttpServer::start(&args);
    let audience = format!("http://{}/mcp", server.addr);
    (server, audience)
}

/// A GET of `path` on the server, without a token.
fn get(server: &HttpServer, path: &str) -> Reply {
    server.send(
        &format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}",
            server.addr.port()
        ),
        "",
    )
}

fn challenge(reply: &Reply) -> &str {
    reply
        .header("www-authenticate")
        .unwrap_or_else(|| panic!("a challenge with {}: {}", reply.status, reply.body))
}

fn metadata_url(server: &HttpServer) -> String {
    format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        server.addr
    )
}

/// An unsigned (`alg: none`) token of these claims.
fn unsigned(claims: &Value, kid: &str) -> String {
    let b64 =
        |value: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string());
    let header = json!({"alg": "none", "typ": "at+jwt", "kid": kid});
    format!("{}.{}.", b64(&header), b64(claims))
}

/// A token HMAC-signed with `secret`, naming key `kid`.
fn hmac_signed(claims: &Value, kid: &str, secret: &[u8]) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some(kid.to_owned());
    let key = jsonwebtoken::EncodingKey::from_secret(secret).unwrap();
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

#[test]
fn the_protected_resource_metadata_names_the_issuer_the_scopes_and_this_resource() {
    let issuer = Issuer::start();
    let (server, audience) = start(&issuer, &["--oauth-scopes", "answer=tasks:reply"]);
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let reply = get(&server, path);
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        assert_eq!(reply.header("content-type"), Some("application/json"));
        let metadata: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(metadata["resource"], audience.as_str());
        assert_eq!(metadata["authorization_servers"], json!([issuer.url]));
        assert_eq!(
            metadata["scopes_supported"],
            json!(["tasks:read", "tasks:todos", "tasks:run", "tasks:reply"])
        );
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    }
    // Exactly those addresses: nothing under them or beside them.
    for path in [
        "/.well-known/oauth-protected-resource/",
        "/.well-known/oauth-protected-resource/mcp/x",
        "/.well-known/oauth-protected-resource/mcpx",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        assert_eq!(get(&server, path).status, 404, "{path}");
    }
    // The card names no static header: clients discover OAuth.
    let card = get(&server, "/mcp/server-card");
    let card: Value = serde_json::from_str(&card.body).unwrap();
    assert!(card["remotes"][0].get("headers").is_none(), "{card}");
}

#[test]
fn without_oauth_no_protected_resource_metadata_is_served() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let reply = get(&server, path);
        assert_eq!(reply.status, 404, "{path}: {}", reply.body);
    }
    let refused = server.post(&[], &initialize(1));
    assert_eq!(challenge(&refused), "Bearer");
}

#[test]
fn a_request_without_a_token_is_told_where_the_metadata_is_and_which_scopes_to_ask() {
    let issuer = Issuer::start();
    let (server, _) = start(&issuer, &[]);
    let refused = server.post(&[], &initialize(1));
    assert_eq!(refused.status, 401);
    assert_eq!(
        challenge(&refused),
        format!(
            "Bearer resource_metadata=\"{}\", scope=\"{ALL_SCOPES}\"",
            metadata_url(&server)
        )
    );
    // A static token of no issuer is just a bad token.
    let refused = server.post(&[bearer(ALICE)], &initialize(1));
    assert_eq!(refused.status, 401);
    assert!(challenge(&refused).ends_with(r#"error="invalid_token""#));
}

#[test]
fn a_scope_with_a_quote_cannot_be_configured_and_the_values_are_quoted() {
    let issuer = Issuer::start();
    let db = support::TempDb::new();
    let output = HttpServer::command(
        &db,
        &["--oauth-issuer", &issuer.url, "--oauth-scopes", "read=a\"b"],
    )
    .output()
    .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a scope"));
}

#[test]
fn hostile_tokens_are_each_refused_as_invalid() {
    let issuer = Issuer::start();
    let (server, audience) = start(&issuer, &[]);
    let good = issuer.claims("alice", &audience, ALL_SCOPES);
    let with = |change: Value| {
        let mut claims = good.clone();
        for (key, value) in change.as_object().unwrap() {
            claims[key] = value.clone();
        }
        claims
    };
    let now = issuer::now();
    let rsa_public = issuer.jwk("rsa-1")["n"].as_str().unwrap().to_owned();
    let huge = issuer.sign("rsa-1", &with(json!({"pad": "x".repeat(20_000)})));
    let hostile = [
        (
            "expired",
            issuer.sign("rsa-1", &with(json!({"exp": now - 3600}))),
        ),
        (
            "not yet valid",
            issuer.sign("rsa-1", &with(json!({"nbf": now + 3600}))),
        ),
        (
            "another audience",
            issuer.sign("rsa-1", &with(json!({"aud": "https://other.example/mcp"}))),
        ),
        (
            "another issuer",
            issuer.sign("rsa-1", &with(json!({"iss": "https://evil.example"}))),
        ),
        (
            "no audience",
            issuer.sign("rsa-1", &with(json!({"aud": null}))),
        ),
        (
            "no principal",
            issuer.sign("rsa-1", &with(json!({"sub": null}))),
        ),
        ("alg none", unsigned(&good, "rsa-1")),
        (
            "HMAC with the public key",
            hmac_signed(&good, "rsa-1", rsa_public.as_bytes()),
        ),
        ("RSA header on the EC key", {
            let token = issuer.sign("rsa-1", &good);
            let (_, rest) = token.split_once('.').unwrap();
            let header = json!({"alg": "RS256", "kid": "ec-1", "typ": "at+jwt"});
            let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(header.to_string());
            format!("{b64}.{rest}")
        }),
        ("an unpublished key", issuer.sign("rsa-2", &good)),
        ("a signature changed", {
            let token = issuer.sign("rsa-1", &good);
            let mut bytes = token.into_bytes();
            let last = bytes.len() - 2;
            bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
            String::from_utf8(bytes).unwrap()
        }),
        ("huge", huge),
        ("not a token", "not a token at all".to_owned()),
    ];
    for (what, token) in &hostile {
        let refused = server.post(&[bearer(token)], &initialize(1));
        assert_eq!(refused.status, 401, "{what}: {}", refused.body);
        assert_eq!(
            challenge(&refused),
            format!(
                "Bearer resource_metadata=\"{}\", scope=\"{ALL_SCOPES}\", error=\"invalid_token\"",
                metadata_url(&server)
            ),
            "{what}"
        );
        assert!(
            !refused.body.contains(&token[..20.min(token.len())]),
            "{what}"
        );
    }
    // The same claims, properly signed by either published key, are taken.
    for kid in ["rsa-1", "ec-1"] {
        let served = server.post(&[bearer(&issuer.sign(kid, &good))], &initialize(1));
        assert_eq!(served.status, 200, "{kid}: {}", served.body);
    }
}

#[test]
fn a_token_in_the_query_string_is_refused_unread() {
    let issuer = Issuer::start();
    let (server, audience) = start(&issuer, &[]);
    let token = issuer.sign("rsa-1", &issuer.claims("alice", &audience, ALL_SCOPES));
    let head = format!(
        "POST /mcp?access_token={token} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream",
        server.addr.port()
    );
    let refused = server.send(&head, &initialize(1).to_string());
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(challenge(&refused).ends_with(r#"error="invalid_request""#));
    // Not even with the same token in the header as well.
    let refused = server.send(
        &format!("{head}\r\n{}", bearer(&token)),
        &initialize(1).to_string(),
    );
    assert_eq!(refused.status, 400);
}

#[test]
fn refused_tokens_count_against_their_address() {
    let issuer = Issuer::start();
    let server = HttpServer::start(&[
        "--oauth-issuer",
        &issuer.url,
        "--http-free-sign-in-failures",
        "2",
    ]);
    for _ in 0..2 {
        let refused = server.post(&[bearer("an-opaque-guess")], &initialize(1));
        assert_eq!(refused.status, 401);
    }
    let held = server.post(&[bearer("an-opaque-guess")], &initialize(1));
    assert_eq!(held.status, 429, "{}", held.body);
    assert!(held.header("retry-after").is_some());
}

#[test]
fn a_call_beyond_the_tokens_scopes_gets_403_naming_the_scope_it_needs() {
    let issuer = Issuer::start();
    let (server, audience) = start(&issuer, &[]);
    let reader = issuer.sign("rsa-1", &issuer.claims("alice", &audience, "tasks:read"));
    let session = open_session(&server, &reader);
    let listed = server.post(&session, &call(2, "list_tasks", json!({})));
    assert_eq!(listed.status, 200, "{}", listed.body);
    for (id, tool, scope) in [
        (3, "add_task", "tasks:todos"),
        (4, "delete_task", "tasks:todos"),
        (5, "run_workflow", "tasks:run"),
        (6, "no_such_tool", ALL_SCOPES),
    ] {
        let refused = server.post(&session, &call(id, tool, json!({"title": "x"})));
        assert_eq!(refused.status, 403, "{tool}: {}", refused.body);
        assert_eq!(
            challenge(&refused),
            format!(
                "Bearer resource_metadata=\"{}\", scope=\"{scope}\", error=\"insufficient_scope\"",
                metadata_url(&server)
            ),
            "{tool}"
        );
    }
    // A batch needs every member's scope.
    let batch = json!([
        call(7, "list_tasks", json!({})),
        call(8, "add_task", json!({"title": "x"}))
    ]);
    assert_eq!(server.post(&session, &batch).status, 403);
    // An answer to the server's question needs the answering scope.
    let answer = json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept", "content": {}}});
    let refused = server.post(&session, &answer);
    assert_eq!(refused.status, 403);
    assert!(challenge(&refused).contains(r#"scope="tasks:answer""#));
    assert!(
        support::task_titles(&server.db.path).is_empty(),
        "nothing was added"
    );
    // A token with the scopes of everything but reading may not even open a session.
    let writer = issuer.sign(
        "rsa-1",
        &issuer.claims("alice", &audience, "tasks:todos tasks:run"),
    );
    let refused = server.post(&[bearer(&writer)], &initialize(1));
    assert_eq!(refused.status, 403);
    assert!(challenge(&refused).contains(r#"scope="tasks:read""#));
}

#[test]
fn two_principals_each_see_only_their_own_todo_calls_runs_and_sessions() {
    let issuer = Issuer::start();
    let (server, audience) = start(&issuer, &[]);
    let token = |sub: &str| issuer.sign("ec-1", &issuer.claims(sub, &audience, ALL_SCOPES));
    let (alice_token, bob_token) = (token("alice@example.com"), token("bob@example.com"));
    let alice = open_session(&server, &alice_token);
    let bob = open_session(&server, &bob_token);
    let added = server.post(
        &alice,
        &call(2, "add_task", json!({"title": "alice's todo"})),
    );
    assert_eq!(
        added.response(2)["result"]["structuredContent"]["ok"],
        true,
        "{}",
        added.body
    );
    let run = start_2025_task(&server, &alice, json!({"nodes": {"hi": {"render": "hi"}}}));
    assert!(listed_task_ids(&server, &alice).contains(&run));
    assert!(listed_task_ids(&server, &bob).is_empty());
    assert!(listed_run_ids(&server, &alice).contains(&run));
    assert!(!listed_run_ids(&server, &bob).contains(&run));
    // Bob's token in alice's session: the session is unknown to him.
    let mut intruding: Vec<String> = alice
        .iter()
        .filter(|h| !h.starts_with("Authorization"))
        .cloned()
        .collect();
    intruding.push(bearer(&bob_token));
    let refused = server.post(&intruding, &call(9, "list_runs", json!({})));
    assert_eq!(refused.status, 404, "{}", refused.body);
    // The audit log names each call's principal.
    let rows = support::audit_rows(&server.db.path);
    let add = rows.iter().find(|row| row.tool == "add_task").unwrap();
    assert_eq!(add.principal.as_deref(), Some("alice@example.com"));
}

#[test]
fn a_flood_of_unknown_key_ids_fetches_the_jwks_once_per_interval() {
    let issuer = Issuer::start();
    let (server, audience) = start(&issuer, &["--oauth-jwks-min-refresh", "1h"]);
    let good = issuer.claims("alice", &audience, ALL_SCOPES);
    let served = server.post(&[bearer(&issuer.sign("rsa-1", &good))], &initialize(1));
    assert_eq!(served.status, 200, "{}", served.body);
    assert_eq!(issuer.jwks_fetches(), 1);
    let template = issuer.sign("rsa-1", &good);
    let (_, rest) = template.split_once('.').unwrap();
    for n in 0..40 {
        let header = json!({"alg": "RS256", "typ": "at+jwt", "kid": format!("made-up-{n}")});
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(header.to_string());
        let refused = server.post(&[bearer(&format!("{header}.{rest}"))], &initialize(1));
        assert_eq!(refused.status, 401);
    }
    assert_eq!(issuer.jwks_fetches(), 1, "no fetch within the interval");
}

#[test]
fn a_key_rotated_in_is_taken_and_a_key_dropped_is_refused_while_a_client_stays_connected() {
    let issuer = Issuer::start();
    let (server, audience) = start(
        &issuer,
        &[
            "--oauth-jwks-min-refresh",
            "200ms",
            "--oauth-jwks-max-age",
            "1s",
        ],
    );
    let claims = issuer.claims("alice", &audience, ALL_SCOPES);
    let (old, new) = (issuer.sign("rsa-1", &claims), issuer.sign("rsa-2", &claims));
    let session = open_session(&server, &old);
    let with = |token: &str| -> Vec<String> {
        let mut headers: Vec<String> = session
            .iter()
            .filter(|h| !h.starts_with("Authorization"))
            .cloned()
            .collect();
        headers.push(bearer(token));
        headers
    };
    // The issuer rotates rsa-2 in: a token signed with it is taken in the same session.
    issuer.publish(&["rsa-1", "rsa-2", "ec-1"]);
    std::thread::sleep(Duration::from_millis(300));
    let listed = server.post(&with(&new), &call(2, "list_tasks", json!({})));
    assert_eq!(listed.status, 200, "{}", listed.body);
    // It drops rsa-1: once the keys are a second old, rsa-1's tokens are refused.
    issuer.publish(&["rsa-2", "ec-1"]);
    std::thread::sleep(Duration::from_millis(1200));
    let refused = server.post(&with(&old), &call(3, "list_tasks", json!({})));
    assert_eq!(refused.status, 401, "{}", refused.body);
    let listed = server.post(&with(&new), &call(4, "list_tasks", json!({})));
    assert_eq!(listed.status, 200, "{}", listed.body);
}

#[test]
fn an_opaque_token_is_taken_when_introspection_says_it_is_active() {
    let issuer = Issuer::start();
    let db = support::TempDb::new();
    let secret = db.dir.path().join("client-secret");
    write_private(&secret, &format!("{}\n", issuer::CLIENT_SECRET));
    let introspect = format!("{}/introspect", issuer.url);
    let mut command = HttpServer::command(
        &db,
        &[
            "--oauth-issuer",
            &issuer.url,
            "--oauth-introspection-url",
            &introspect,
            "--oauth-client-id",
            issuer::CLIENT_ID,
            "--oauth-client-secret-file",
            secret.to_str().unwrap(),
        ],
    );
    let (server, _log) = launch(db, &mut command);
    let audience = format!("http://{}/mcp", server.addr);
    issuer.register_opaque(
        "opaque-active-token-1",
        json!({"active": true, "sub": "carol", "aud": audience, "iss": issuer.url,
               "scope": ALL_SCOPES, "exp": issuer::now() + 600}),
    );
    issuer.register_opaque(
        "opaque-elsewhere-token",
        json!({"active": true, "sub": "carol", "aud": "https://other.example/mcp",
               "scope": ALL_SCOPES}),
    );
    let session = open_session(&server, "opaque-active-token-1");
    let added = server.post(&session, &call(2, "add_task", json!({"title": "carol's"})));
    assert_eq!(added.status, 200, "{}", added.body);
    let rows = support::audit_rows(&server.db.path);
    assert_eq!(rows.last().unwrap().principal.as_deref(), Some("carol"));
    for token in ["opaque-inactive-token", "opaque-elsewhere-token"] {
        let refused = server.post(&[bearer(token)], &initialize(1));
        assert_eq!(refused.status, 401, "{token}");
        assert!(challenge(&refused).ends_with(r#"error="invalid_token""#));
    }
}

#[test]
fn an_opaque_token_without_introspection_is_refused() {
    let issuer = Issuer::start();
    let (server, _) = start(&issuer, &[]);
    let refused = server.post(&[bearer("opaque-active-token-1")], &initialize(1));
    assert_eq!(refused.status, 401);
}

#[test]
fn no_token_reaches_the_log_even_at_debug() {
    let issuer = Issuer::start();
    let db = support::TempDb::new();
    let secret = db.dir.path().join("client-secret");
    write_private(&secret, issuer::CLIENT_SECRET);
    let introspect = format!("{}/introspect", issuer.url);
    let mut command = HttpServer::command(
        &db,
        &[
            "--oauth-issuer",
            &issuer.url,
            "--http-free-sign-in-failures",
            "1000",
            "--oauth-introspection-url",
            &introspect,
            "--oauth-client-id",
            issuer::CLIENT_ID,
            "--oauth-client-secret-file",
            secret.to_str().unwrap(),
        ],
    );
    command.env("RUST_LOG", "trace");
    let (server, log) = launch(db, &mut command);
    let audience = format!("http://{}/mcp", server.addr);
    let good = issuer.sign("rsa-1", &issuer.claims("alice", &audience, ALL_SCOPES));
    let expired = issuer.sign(
        "rsa-1",
        &json!({"iss": issuer.url, "sub": "alice", "aud": audience, "exp": issuer::now() - 999}),
    );
    let session = open_session(&server, &good);
    server.post(&session, &call(2, "add_task", json!({"title": "logged?"})));
    server.post(&[bearer(&expired)], &initialize(1));
    server.post(&[bearer("opaque-guess-token-value")], &initialize(1));
    issuer.register_opaque(
        "opaque-good-token-value",
        json!({"active": true, "sub": "carol", "aud": audience, "scope": ALL_SCOPES}),
    );
    let opaque = server.post(&[bearer("opaque-good-token-value")], &initialize(1));
    assert_eq!(opaque.status, 200, "{}", opaque.body);
    let head = format!(
        "GET /mcp?access_token={good} HTTP/1.1\r\nHost: 127.0.0.1:{}",
        server.addr.port()
    );
    server.send(&head, "");
    log.wait_for("a refused token's line", |l| {
        l.contains("bearer token was refused")
    });
    let text = log.text();
    let opaque = ["opaque-guess-token-value", "opaque-good-token-value"].map(String::from);
    for token in [&good, &expired, &opaque[0], &opaque[1]] {
        let signature = token.rsplit('.').next().unwrap();
        assert!(!text.contains(signature), "a token in the log:\n{text}");
    }
    assert!(
        !text.contains(issuer::CLIENT_SECRET),
        "the client's secret in the log"
    );
}

#[test]
fn oauth_beyond_loopback_needs_an_audience_and_one_mode_only() {
    let issuer = Issuer::start();
    let db = support::TempDb::new();
    let refused = |args: &[&str], why: &str| {
        let mut command = std::process::Command::new(support::BIN);
        command
            .env_remove("TASKS_HTTP_TOKENS_FILE")
            .env_remove("TASKS_HTTP_NO_AUTH")
            .current_dir(db.dir.path())
            .arg("--db")
            .arg(&db.path)
            .args(args)
            .stdin(Stdio::null());
        let output = command.output().unwrap();
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    };
    refused(
        &["--http", "0.0.0.0:0", "--oauth-issuer", &issuer.url],
        "--oauth-audience",
    );
    refused(
        &[
            "--http",
            "127.0.0.1:0",
            "--oauth-issuer",
            &issuer.url,
            "--http-no-auth",
        ],
        "cannot be used with",
    );
    refused(
        &[
            "--http",
            "127.0.0.1:0",
            "--oauth-issuer",
            "http://id.example/",
        ],
        "https",
    );
    let secret = db.dir.path().join("open-secret");
    std::fs::write(&secret, "a-secret\n").unwrap();
    refused(
        &[
            "--http",
            "127.0.0.1:0",
            "--oauth-issuer",
            &issuer.url,
            "--oauth-client-id",
            "x",
            "--oauth-client-secret-file",
            secret.to_str().unwrap(),
        ],
        "chmod 600",
    );
    refused(&["--oauth-issuer", &issuer.url], "--http");
}

#[test]
fn the_metrics_need_a_token_that_grants_reading() {
    let issuer = Issuer::start();
    let (server, audience) = start(&issuer, &["--http-metrics"]);
    let scrape = |token: Option<&str>| {
        let authorization =
            token.map_or(String::new(), |t| format!("\r\nAuthorization: Bearer {t}"));
        server.send(
            &format!(
                "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{}{authorization}",
                server.addr.port()
            ),
            "",
        )
    };
    let missing = scrape(None);
    assert_eq!(missing.status, 401, "{}", missing.body);
    assert!(challenge(&missing).contains("resource_metadata="));
    let writer = issuer.sign("rsa-1", &issuer.claims("bob", &audience, "tasks:todos"));
    let narrow = scrape(Some(&writer));
    assert_eq!(narrow.status, 403, "{}", narrow.body);
    assert!(challenge(&narrow).contains(r#"scope="tasks:read""#));
    let reader = issuer.sign("rsa-1", &issuer.claims("alice", &audience, "tasks:read"));
    // A call first, so that the operations' histogram has something to show.
    let session = open_session(&server, &reader);
    let listed = server.post(&session, &call(2, "list_tasks", json!({})));
    assert_eq!(listed.status, 200, "{}", listed.body);
    let scraped = scrape(Some(&reader));
    assert_eq!(scraped.status, 200, "{}", scraped.body);
    assert!(
        scraped
            .body
            .contains("mcp_server_operation_duration_seconds"),
        "{}",
        scraped.body
    );
}
