//! The dashboard's sign-in through the issuer, with OAuth: the browser sent to the
//! issuer's authorization endpoint with PKCE (S256), a `state` and this resource; the
//! callback with a good code gives the same login cookie as a token would, for the
//! token's principal; an attempt with another `state`, from another browser, or answered
//! by another issuer signs nobody in; without the server's own client the page says how
//! to enable sign-in.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::super::tokens::launch;
use super::super::{HttpServer, Reply, write_private};
use super::issuer::{self, Code, Issuer};
use super::{ALL_SCOPES, start};

use crate::support;

/// The server with OAuth and its own client at the issuer, and its audience.
fn with_client(issuer: &Issuer) -> (HttpServer, String) {
    let db = support::TempDb::new();
    let secret = db.dir.path().join("client-secret");
    write_private(&secret, issuer::CLIENT_SECRET);
    let mut command = HttpServer::command(
        &db,
        &[
            "--oauth-issuer",
            &issuer.url,
            "--oauth-client-id",
            issuer::CLIENT_ID,
            "--oauth-client-secret-file",
            secret.to_str().unwrap(),
            "--http-free-sign-in-failures",
            "1000",
        ],
    );
    let (server, _log) = launch(db, &mut command);
    let audience = format!("http://{}/mcp", server.addr);
    (server, audience)
}

/// `ui` (the dashboard alone) with OAuth and the server's own client at the issuer, and
/// the audience its tokens name.
fn ui_with_client(issuer: &Issuer) -> (HttpServer, String) {
    let db = support::TempDb::new();
    let secret = db.dir.path().join("client-secret");
    write_private(&secret, issuer::CLIENT_SECRET);
    let mut command = std::process::Command::new(support::BIN);
    command
        .env_remove("TASKS_DB_PATH")
        .env_remove("TASKS_HTTP_TOKENS_FILE")
        .env("RUST_LOG", "info")
        .current_dir(db.dir.path())
        .arg("--db")
        .arg(&db.path)
        .args(["ui", "127.0.0.1:0", "--oauth-issuer", &issuer.url])
        .args(["--oauth-client-id", issuer::CLIENT_ID])
        .arg("--oauth-client-secret-file")
        .arg(&secret)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let (server, _log) = launch(db, &mut command);
    let audience = format!("http://{}/mcp", server.addr);
    (server, audience)
}

/// The `Set-Cookie` of `name`, up to its first `;`, and the whole header.
fn set_cookie<'a>(reply: &'a Reply, name: &str) -> Option<(&'a str, &'a str)> {
    reply
        .headers
        .iter()
        .filter(|(key, _)| key == "set-cookie")
        .map(|(_, value)| value.as_str())
        .find(|value| value.starts_with(&format!("{name}=")))
        .map(|value| (value.split(';').next().unwrap(), value))
}

/// A sign-in started: the query of the address at the issuer, and the binding cookie.
fn started(server: &HttpServer, issuer: &Issuer) -> (HashMap<String, String>, String) {
    let reply = server.page("/login/start", None);
    assert_eq!(reply.status, 303, "{}", reply.body);
    let location = reply.header("location").unwrap();
    let (endpoint, query) = location.split_once('?').unwrap();
    assert_eq!(endpoint, format!("{}/authorize", issuer.url));
    let query: HashMap<String, String> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let (binding, whole) = set_cookie(&reply, "mts_signin").expect("a binding cookie");
    assert!(
        whole.contains("HttpOnly") && whole.contains("SameSite=Lax"),
        "{whole}"
    );
    (query, binding.to_owned())
}

fn callback(server: &HttpServer, query: &[(&str, &str)], cookie: Option<&str>) -> Reply {
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(query)
        .finish();
    server.page(&format!("/login/callback?{query}"), cookie)
}

/// A whole sign-in through the issuer, whose code is exchanged for a token of `claims`
/// for this server (`audience`): the login cookie it gives.
fn signed_in_with(server: &HttpServer, issuer: &Issuer, audience: &str, claims: &Value) -> String {
    let (query, binding) = started(server, issuer);
    assert_eq!(query["resource"], audience);
    issuer.register_code(
        "the-code",
        Code {
            verifier_challenge: query["code_challenge"].clone(),
            redirect_uri: format!("http://{}/login/callback", server.addr),
            resource: audience.to_owned(),
            access_token: issuer.sign("rsa-1", claims),
        },
    );
    let back = callback(
        server,
        &[
            ("code", "the-code"),
            ("state", &query["state"]),
            ("iss", &issuer.url),
        ],
        Some(&binding),
    );
    assert_eq!(back.status, 200, "{}", back.body);
    let (login, _) = set_cookie(&back, "mts_login").expect("a login cookie");
    login.to_owned()
}

#[test]
fn a_person_signs_in_through_the_issuer_with_pkce_state_and_this_resource() {
    let issuer = Issuer::start();
    let (server, audience) = with_client(&issuer);
    let page = server.page("/login", None);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/login/start"), "{}", page.body);
    assert!(!page.body.contains("name=\"token\""), "no token form");

    let (query, binding) = started(&server, &issuer);
    let redirect_uri = format!("http://{}/login/callback", server.addr);
    assert_eq!(query["response_type"], "code");
    assert_eq!(query["client_id"], issuer::CLIENT_ID);
    assert_eq!(query["redirect_uri"], redirect_uri);
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["code_challenge"].len(), 43, "a SHA-256 in base64url");
    assert_eq!(query["resource"], audience);
    assert_eq!(query["scope"], ALL_SCOPES);
    assert!(query["state"].len() >= 32);

    // The issuer signs dana in and sends her browser back with a code.
    let token = issuer.sign("rsa-1", &issuer.claims("dana", &audience, ALL_SCOPES));
    issuer.register_code(
        "code-for-dana",
        Code {
            verifier_challenge: query["code_challenge"].clone(),
            redirect_uri: redirect_uri.clone(),
            resource: audience.clone(),
            access_token: token.clone(),
        },
    );
    let back = callback(
        &server,
        &[
            ("code", "code-for-dana"),
            ("state", &query["state"]),
            ("iss", &issuer.url),
        ],
        Some(&binding),
    );
    assert_eq!(back.status, 200, "{}", back.body);
    assert!(
        back.body.contains("http-equiv=\"refresh\""),
        "{}",
        back.body
    );
    assert!(!back.body.contains(&token[..20]), "no token in the page");
    let (login, whole) = set_cookie(&back, "mts_login").expect("a login cookie");
    assert!(
        whole.contains("HttpOnly") && whole.contains("SameSite=Strict"),
        "{whole}"
    );
    // The exchange carried the verifier of the challenge and this resource (the issuer
    // refuses it otherwise), and the server's client.
    let exchanged = issuer.token_requests();
    assert_eq!(exchanged.len(), 1);
    assert_eq!(
        issuer::s256(&exchanged[0]["code_verifier"]),
        query["code_challenge"]
    );

    // Dana's login shows her runs, and none of another principal's.
    let runs = server.page("/", Some(login));
    assert_eq!(runs.status, 200, "{}", runs.body);
    let erin = issuer.sign("rsa-1", &issuer.claims("erin", &audience, ALL_SCOPES));
    let session = super::super::open_session(&server, &erin);
    let run = super::super::start_2025_task(
        &server,
        &session,
        json!({"nodes": {"hi": {"render": "hi"}}}),
    );
    let erins = server.page(&format!("/runs/{run}"), Some(login));
    assert_eq!(
        erins.status, 404,
        "erin's run is not dana's: {}",
        erins.body
    );

    // A code is spent once.
    let again = callback(
        &server,
        &[
            ("code", "code-for-dana"),
            ("state", &query["state"]),
            ("iss", &issuer.url),
        ],
        Some(&binding),
    );
    assert_eq!(again.status, 401);
    assert!(set_cookie(&again, "mts_login").is_none());
}

#[test]
fn a_callback_with_another_state_another_browser_or_another_issuer_signs_nobody_in() {
    let issuer = Issuer::start();
    let (server, audience) = with_client(&issuer);
    let token = issuer.sign("rsa-1", &issuer.claims("dana", &audience, ALL_SCOPES));
    let register = |code: &str, challenge: &str| {
        issuer.register_code(
            code,
            Code {
                verifier_challenge: challenge.to_owned(),
                redirect_uri: format!("http://{}/login/callback", server.addr),
                resource: audience.clone(),
                access_token: token.clone(),
            },
        );
    };
    let (query, binding) = started(&server, &issuer);
    register("code-1", &query["code_challenge"]);
    let refused = [
        (
            "a state never given",
            vec![("code", "code-1"), ("state", "forged-state")],
            Some(binding.as_str()),
        ),
        (
            "no binding cookie",
            vec![("code", "code-1"), ("state", query["state"].as_str())],
            None,
        ),
    ];
    for (what, pairs, cookie) in refused {
        let mut pairs = pairs;
        pairs.push(("iss", &issuer.url));
        let reply = callback(&server, &pairs, cookie);
        assert_eq!(reply.status, 401, "{what}: {}", reply.body);
        assert!(set_cookie(&reply, "mts_login").is_none(), "{what}");
    }
    // The attempt whose cookie was missing is spent: its browser cannot finish it now.
    let late = callback(
        &server,
        &[
            ("code", "code-1"),
            ("state", &query["state"]),
            ("iss", &issuer.url),
        ],
        Some(&binding),
    );
    assert_eq!(late.status, 401);

    let (query, binding) = started(&server, &issuer);
    register("code-2", &query["code_challenge"]);
    for iss in [Some("https://evil.example"), None] {
        let mut pairs = vec![("code", "code-2"), ("state", query["state"].as_str())];
        pairs.extend(iss.map(|iss| ("iss", iss)));
        let reply = callback(&server, &pairs, Some(&binding));
        assert_eq!(reply.status, 401, "iss {iss:?}: {}", reply.body);
        assert!(set_cookie(&reply, "mts_login").is_none());
    }
    assert!(
        issuer.token_requests().is_empty(),
        "no code was exchanged for any of these"
    );
}

#[test]
fn without_the_servers_own_client_the_sign_in_page_says_how_to_enable_it() {
    let issuer = Issuer::start();
    let (server, _) = start(&issuer, &[]);
    let page = server.page("/login", None);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("--oauth-client-id"), "{}", page.body);
    assert!(
        page.body
            .contains(&format!("http://{}/login/callback", server.addr)),
        "{}",
        page.body
    );
    assert_eq!(server.page("/login/start", None).status, 404);
    let runs = server.page("/", None);
    assert_eq!(runs.status, 303);
    assert_eq!(runs.header("location"), Some("/login"));
    // Nor does a token sign anyone in.
    let refused = server.form("/login", None, Some(&server.origin()), "token=whatever");
    assert_eq!(refused.status, 403);
}

/// A login made through the issuer lasts while its access token does: once the token's
/// `exp` has passed, the login's cookie opens nothing, however recently it was used, and
/// the person is sent to sign in again.
#[test]
fn a_login_through_the_issuer_ends_when_its_access_token_does() {
    let issuer = Issuer::start();
    let (server, audience) = with_client(&issuer);
    let mut claims = issuer.claims("dana", &audience, ALL_SCOPES);
    let exp = claims["iat"].as_u64().unwrap() + 3;
    claims["exp"] = json!(exp);
    let login = signed_in_with(&server, &issuer, &audience, &claims);
    assert_eq!(server.page("/", Some(&login)).status, 200);

    // Past the token's end, by the clock the issuer stamped it with.
    while issuer::now() <= exp {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let after = server.page("/", Some(&login));
    assert_eq!(after.status, 303, "the login outlived its token");
    assert_eq!(after.header("location"), Some("/login"));
}

/// `ui`, the dashboard without MCP, signs a person in through the issuer as `serve` does,
/// and sends anyone without a login to its sign-in page.
#[test]
fn ui_signs_a_person_in_through_the_issuer() {
    let issuer = Issuer::start();
    let (server, audience) = ui_with_client(&issuer);
    let runs = server.page("/", None);
    assert_eq!(runs.status, 303);
    assert_eq!(runs.header("location"), Some("/login"));
    let page = server.page("/login", None);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/login/start"), "{}", page.body);

    let claims = issuer.claims("dana", &audience, ALL_SCOPES);
    let login = signed_in_with(&server, &issuer, &audience, &claims);
    let signed_in = server.page("/", Some(&login));
    assert_eq!(signed_in.status, 200, "{}", signed_in.body);
}
