//! The dashboard beside `/mcp`: who may open which page, what a request from another site
//! or without a login gets, that each principal sees its own runs as over MCP, and that
//! text from the store reaches the page escaped.

use mcp_task_server::store::Scope;
use serde_json::json;

use super::{ALICE, BOB, HttpServer, Reply, WAIT, open_session, start_2025_task};

use crate::support;

impl HttpServer {
    pub(super) fn host(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    /// A page, with the login `cookie` if any.
    pub(super) fn page(&self, path: &str, cookie: Option<&str>) -> Reply {
        let mut head = format!("GET {path} HTTP/1.1\r\nHost: {}", self.host());
        if let Some(cookie) = cookie {
            head.push_str(&format!("\r\nCookie: {cookie}"));
        }
        self.send(&head, "")
    }

    /// A form POSTed to `path` from `origin` (none: no `Origin` header).
    pub(super) fn form(
        &self,
        path: &str,
        cookie: Option<&str>,
        origin: Option<&str>,
        body: &str,
    ) -> Reply {
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-www-form-urlencoded",
            self.host()
        );
        if let Some(origin) = origin {
            head.push_str(&format!("\r\nOrigin: {origin}"));
        }
        if let Some(cookie) = cookie {
            head.push_str(&format!("\r\nCookie: {cookie}"));
        }
        self.send(&head, body)
    }

    pub(super) fn origin(&self) -> String {
        format!("http://{}", self.host())
    }

    /// Signs in with `token`; returns the `Cookie` header value of the login.
    pub(super) fn sign_in(&self, token: &str) -> String {
        let reply = self.form(
            "/login",
            None,
            Some(&self.origin()),
            &format!("token={token}"),
        );
        assert_eq!(reply.status, 303, "{}", reply.body);
        assert_eq!(reply.header("location"), Some("/"));
        let cookie = reply.header("set-cookie").expect("a login cookie");
        assert!(cookie.contains("HttpOnly"), "{cookie}");
        assert!(cookie.contains("SameSite=Strict"), "{cookie}");
        cookie.split(';').next().unwrap().to_owned()
    }
}

fn with_tokens() -> HttpServer {
    HttpServer::start(&["--http-tokens", "{tokens}"])
}

#[test]
fn a_page_without_a_login_sends_the_browser_to_sign_in_and_an_action_is_refused() {
    let server = with_tokens();
    for path in ["/", "/runs/some-run"] {
        let reply = server.page(path, None);
        assert_eq!(reply.status, 303, "{path}: {}", reply.body);
        assert_eq!(reply.header("location"), Some("/login"), "{path}");
    }
    let forged = server.page("/", Some("mts_login=0123456789abcdef"));
    assert_eq!(
        forged.status, 303,
        "a cookie the server did not give is no login"
    );
    let action = server.form("/runs/some-run/cancel", None, Some(&server.origin()), "");
    assert_eq!(action.status, 403, "{}", action.body);
    let sign_in = server.page("/login", None);
    assert_eq!(sign_in.status, 200);
    assert!(
        sign_in.body.contains(r#"<label for="token">"#),
        "{}",
        sign_in.body
    );
}

#[test]
fn only_a_token_of_the_server_signs_in_and_signing_out_ends_the_login() {
    let server = with_tokens();
    let wrong = server.form(
        "/login",
        None,
        Some(&server.origin()),
        "token=not-a-token-at-all",
    );
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    assert_eq!(wrong.header("set-cookie"), None);
    let cookie = server.sign_in(ALICE);
    assert_eq!(server.page("/", Some(&cookie)).status, 200);
    let out = server.form("/logout", Some(&cookie), Some(&server.origin()), "");
    assert_eq!(out.status, 303);
    assert_eq!(
        server.page("/", Some(&cookie)).status,
        303,
        "the login is over"
    );
}

#[test]
fn a_cross_site_post_is_refused_and_changes_nothing() {
    let server = with_tokens();
    let alice = open_session(&server, ALICE);
    let run = start_2025_task(&server, &alice, json!({"nodes": {"sleep": {"wait": WAIT}}}));
    let cookie = server.sign_in(ALICE);
    let cancel = format!("/runs/{run}/cancel");
    let host = server.host();
    let other_schemes = [
        format!("ftp://{host}"),
        format!("chrome-extension://{host}"),
    ];
    let origins = [Some("http://evil.example"), Some("null"), None]
        .into_iter()
        .chain(other_schemes.iter().map(|origin| Some(origin.as_str())));
    for origin in origins {
        let reply = server.form(&cancel, Some(&cookie), origin, "");
        assert_eq!(reply.status, 403, "{origin:?}: {}", reply.body);
    }
    let page = server.page(&format!("/runs/{run}"), Some(&cookie));
    assert!(
        page.body
            .contains(r#"<span class="badge running">running</span>"#),
        "{}",
        page.body
    );
    // From the page itself, the same request cancels the run, and is audited.
    let reply = server.form(&cancel, Some(&cookie), Some(&server.origin()), "");
    assert_eq!(reply.status, 303, "{}", reply.body);
    let page = server.page(&format!("/runs/{run}"), Some(&cookie));
    assert!(
        page.body
            .contains(r#"<span class="badge cancelled">cancelled</span>"#),
        "{}",
        page.body
    );
    let audited: Vec<_> = support::audit_rows(&server.db.path)
        .into_iter()
        .filter(|row| row.tool == "cancel_run")
        .map(|row| (row.outcome, row.principal, row.run_id))
        .collect();
    assert_eq!(
        audited,
        [("ok".to_owned(), Some("alice".to_owned()), Some(run))]
    );
}

/// A run started or retried from a page counts against the caller's cap of runs in
/// progress (`--http-max-runs`) as over MCP, and a refused one is audited and starts
/// nothing.
#[test]
fn a_start_or_a_retry_from_a_page_counts_against_the_callers_cap_of_runs() {
    let workflows = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dashboard");
    let server = HttpServer::start(&[
        "--http-tokens",
        "{tokens}",
        "--http-max-runs",
        "1",
        "--workflows",
        workflows,
    ]);
    let alice = open_session(&server, ALICE);
    let missing = json!({"nodes": {"done": {"tool": "complete_task", "args": {"id": 987654321}}}});
    let failed = start_2025_task(&server, &alice, missing);
    let cookie = server.sign_in(ALICE);
    let page = format!("/runs/{failed}");
    let failed_badge = r#"<span class="badge failed">failed</span>"#;
    let ended = (0..500).any(|_| {
        let body = server.page(&page, Some(&cookie)).body;
        body.contains(failed_badge) || {
            std::thread::sleep(std::time::Duration::from_millis(10));
            false
        }
    });
    assert!(ended, "the run fails at once");
    let held = start_2025_task(&server, &alice, json!({"nodes": {"sleep": {"wait": WAIT}}}));

    let retry = format!("/runs/{failed}/retry");
    let refused = server.form(&retry, Some(&cookie), Some(&server.origin()), "");
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.body.contains("--http-max-runs"), "{}", refused.body);
    let store = support::read_only(&server.db.path);
    let runs = || store.list_runs(None, Scope::Everyone, 100).unwrap().len();
    assert_eq!(runs(), 2, "a refused retry starts nothing");
    let start = server.form(
        "/workflows/slow/start",
        Some(&cookie),
        Some(&server.origin()),
        "",
    );
    assert_eq!(start.status, 422, "{}", start.body);
    assert!(start.body.contains("--http-max-runs"), "{}", start.body);
    assert_eq!(runs(), 2, "a refused start starts nothing");

    let cancel = server.form(
        &format!("/runs/{held}/cancel"),
        Some(&cookie),
        Some(&server.origin()),
        "",
    );
    assert_eq!(cancel.status, 303, "{}", cancel.body);
    let allowed = server.form(&retry, Some(&cookie), Some(&server.origin()), "");
    assert_eq!(allowed.status, 303, "{}", allowed.body);
    assert_eq!(runs(), 3);
    let audited: Vec<_> = support::audit_rows(&server.db.path)
        .into_iter()
        .filter(|row| row.tool == "retry_run")
        .map(|row| row.outcome)
        .collect();
    assert_eq!(audited, ["rejected", "ok"]);
}

#[test]
fn a_page_asked_for_under_another_host_name_is_refused() {
    let server = with_tokens();
    let cookie = server.sign_in(ALICE);
    let head = format!("GET / HTTP/1.1\r\nHost: attacker.example\r\nCookie: {cookie}");
    assert_eq!(server.send(&head, "").status, 403);
    // A host name is one name whatever its case, for the pages as for MCP.
    let port = server.addr.port();
    let head = format!("GET / HTTP/1.1\r\nHost: LOCALHOST:{port}\r\nCookie: {cookie}");
    assert_eq!(server.send(&head, "").status, 200);
    let initialize = super::initialize(1).to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: LocalHost:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{}",
        super::bearer(ALICE)
    );
    assert_eq!(server.send(&head, &initialize).status, 200);
}

/// One principal that signs in again and again ends only its own logins: Alice's login
/// outlives Bob's storm of sign-ins, of which only his latest are kept.
#[test]
fn a_principal_signing_in_over_and_over_pushes_out_only_its_own_logins() {
    let server = HttpServer::start(&[
        "--http-tokens",
        "{tokens}",
        "--http-max-logins-per-principal",
        "4",
    ]);
    let alice = server.sign_in(ALICE);
    let bobs: Vec<String> = (0..40).map(|_| server.sign_in(BOB)).collect();
    assert_eq!(
        server.page("/", Some(&alice)).status,
        200,
        "alice is still in"
    );
    for (n, cookie) in bobs.iter().enumerate() {
        let expected = if n < 36 { 303 } else { 200 };
        assert_eq!(
            server.page("/", Some(cookie)).status,
            expected,
            "bob's login {n}"
        );
    }
}

/// An address that gives wrong tokens may try a few times, then waits longer after each
/// failure: meanwhile it is answered 429 with `Retry-After` on the sign-in page and at
/// `/mcp` alike, a right token included, and no token it sends is looked at.
#[test]
fn an_address_that_keeps_failing_to_sign_in_is_made_to_wait() {
    let server = HttpServer::start(&[
        "--http-tokens",
        "{tokens}",
        "--http-free-sign-in-failures",
        "3",
    ]);
    let wrong = |n: u32| format!("token=wrong-{n}-7f3a9c2e5b8d1f4a6c0e9b3d7a2f5c8e");
    for n in 0..3 {
        let reply = server.form("/login", None, Some(&server.origin()), &wrong(n));
        assert_eq!(reply.status, 401, "{}", reply.body);
    }
    let held = server.form("/login", None, Some(&server.origin()), &wrong(3));
    assert_eq!(held.status, 429, "{}", held.body);
    let wait: u64 = held.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let right = server.form(
        "/login",
        None,
        Some(&server.origin()),
        &format!("token={ALICE}"),
    );
    assert_eq!(right.status, 429, "not even a right token is looked at");
    assert_eq!(right.header("set-cookie"), None);
    let mcp = server.post(&[super::bearer(ALICE)], &super::initialize(1));
    assert_eq!(mcp.status, 429, "{}", mcp.body);
    assert!(mcp.header("retry-after").is_some());
    // Once the wait is over, a right token signs in.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    server.sign_in(ALICE);
}

/// The dashboard's live streams are streams of the server: a principal's count against
/// its cap of streams (256 by default; `503` with `Retry-After` past it), and leave the
/// others theirs, however many connections the one opens.
#[test]
fn a_principals_live_pages_count_against_its_streams_and_leave_others_theirs() {
    use std::io::{Read as _, Write as _};
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let bob = server.sign_in(BOB);
    let open_live = |cookie: &str| {
        let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
        let head = format!(
            "GET /live HTTP/1.1\r\nHost: {}\r\nCookie: {cookie}\r\n\r\n",
            server.host()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        (stream, String::from_utf8_lossy(&head).into_owned())
    };
    let held: Vec<_> = (0..256).map(|_| open_live(&bob)).collect();
    for (_, head) in &held {
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    let (_, refused) = open_live(&bob);
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after"),
        "{refused}"
    );
    let alice = server.sign_in(ALICE);
    let (_, hers) = open_live(&alice);
    assert!(hers.starts_with("HTTP/1.1 200"), "{hers}");
    drop(held);
}

#[test]
fn each_principal_sees_its_own_runs_and_another_ones_run_is_not_found() {
    let server = with_tokens();
    let alice = open_session(&server, ALICE);
    let run = start_2025_task(&server, &alice, json!({"nodes": {"sleep": {"wait": WAIT}}}));
    let alices = server.sign_in(ALICE);
    let bobs = server.sign_in(BOB);
    assert!(server.page("/", Some(&alices)).body.contains(&run));
    let list = server.page("/", Some(&bobs));
    assert!(!list.body.contains(&run), "{}", list.body);
    assert!(list.body.contains("No run matches."), "{}", list.body);
    let page = server.page(&format!("/runs/{run}"), Some(&bobs));
    assert_eq!(page.status, 404, "{}", page.body);
    let cancel = server.form(
        &format!("/runs/{run}/cancel"),
        Some(&bobs),
        Some(&server.origin()),
        "",
    );
    assert_eq!(cancel.status, 404, "{}", cancel.body);
    let page = server.page(&format!("/runs/{run}"), Some(&alices));
    assert!(
        page.body
            .contains(r#"<span class="badge running">running</span>"#),
        "{}",
        page.body
    );
}

#[test]
fn text_from_the_store_reaches_the_page_escaped() {
    let server = with_tokens();
    let alice = open_session(&server, ALICE);
    let definition = json!({
        "inputs": {"title": {"type": "string"}},
        "nodes": {
            "echo": {"value": {"expr": "inputs.title"}},
            "sleep": {"wait": WAIT, "needs": ["echo"]},
        }
    });
    let params = json!({"name": "run_workflow", "task": {"ttl": 60000}, "arguments": {
        "definition": definition, "inputs": {"title": "<script>alert(1)</script>"}}});
    let created = server.post(&alice, &super::request(3, "tools/call", params));
    let run = created.response(3)["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let cookie = server.sign_in(ALICE);
    let page = server.page(&format!("/runs/{run}"), Some(&cookie));
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(!page.body.contains("<script>"), "{}", page.body);
    assert!(
        page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        page.body
    );
    let policy = page.header("content-security-policy").unwrap_or_default();
    assert!(policy.contains("script-src 'self'"), "{policy}");
}

#[test]
fn without_tokens_the_dashboard_is_not_served() {
    let server = HttpServer::start(&[]);
    assert_eq!(server.page("/", None).status, 404);
    assert_eq!(server.page("/login", None).status, 404);
}

#[test]
fn the_audit_log_shows_a_principal_the_rows_of_its_own_calls_and_verifies_the_chain() {
    let server = with_tokens();
    for (token, title) in [(ALICE, "from-alice"), (BOB, "from-bob")] {
        let session = open_session(&server, token);
        let added = server.post(
            &session,
            &super::call(2, "add_task", json!({"title": title})),
        );
        assert_eq!(added.response(2)["result"]["isError"], false);
    }
    let cookie = server.sign_in(ALICE);
    let page = server.page("/audit?tool=add_task", Some(&cookie));
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("from-alice"), "{}", page.body);
    assert!(!page.body.contains("from-bob"), "{}", page.body);
    // A principal cannot ask for another one's rows.
    let asked = server.page("/audit?principal=bob", Some(&cookie));
    assert!(!asked.body.contains("from-bob"), "{}", asked.body);
    assert!(asked.body.contains("No row matches."), "{}", asked.body);
    let verified = server.page("/audit?verify=1", Some(&cookie));
    assert!(
        verified.body.contains("The chain verifies"),
        "{}",
        verified.body
    );
}

/// Every route of the dashboard, with the method it is served for.
const ROUTES: [(&str, &str); 17] = [
    ("GET", "/"),
    ("GET", "/live"),
    ("GET", "/runs/some-run"),
    ("GET", "/runs/some-run/live"),
    ("GET", "/runs/some-run/files/report"),
    ("POST", "/runs/some-run/cancel"),
    ("POST", "/runs/some-run/retry"),
    ("POST", "/runs/some-run/answer"),
    ("GET", "/workflows"),
    ("GET", "/workflows/release_checklist"),
    ("POST", "/workflows/release_checklist/start"),
    ("GET", "/todos"),
    ("POST", "/todos/1/complete"),
    ("GET", "/todos/1/delete"),
    ("POST", "/todos/1/delete"),
    ("GET", "/audit"),
    ("GET", "/audit?verify=1"),
];

#[test]
fn every_route_needs_a_login_and_every_action_a_page_of_this_server() {
    let server = with_tokens();
    let cookie = server.sign_in(ALICE);
    for (method, path) in ROUTES {
        let reply = match method {
            "GET" => server.page(path, None),
            _ => server.form(path, None, Some(&server.origin()), ""),
        };
        let expected = if method == "GET" { 303 } else { 403 };
        assert_eq!(
            reply.status, expected,
            "{method} {path} without a login: {}",
            reply.body
        );
        if method == "POST" {
            let forged = server.form(path, Some(&cookie), Some("http://evil.example"), "");
            assert_eq!(
                forged.status, 403,
                "{path} from another site: {}",
                forged.body
            );
        }
    }
    // Nothing was done: no run started, no todo touched.
    let tools: Vec<String> = support::audit_rows(&server.db.path)
        .into_iter()
        .map(|row| row.tool)
        .collect();
    assert_eq!(tools, Vec::<String>::new());
}

/// `ui` over the database of another process that drives a run: its link signs a browser
/// in as the local user, who sees the run waiting, answers it in the page, and the other
/// process finishes the run.
#[test]
fn ui_beside_another_process_answers_the_run_that_process_drives() {
    use std::io::BufRead as _;
    let db = support::TempDb::new();
    let workflows = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dashboard");
    let db_path = db.path.display().to_string();
    let workspace = db.dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let mut driver = std::process::Command::new(support::BIN)
        .args(["--db", &db_path, "--workflows", workflows, "--workspace"])
        .arg(workspace)
        .args(["workflows", "run", "review", "--wait-for-answers", "--json"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the run");
    let mut ui = std::process::Command::new(support::BIN)
        .args([
            "--db",
            &db_path,
            "--workflows",
            workflows,
            "ui",
            "127.0.0.1:0",
        ])
        .env_remove("TASKS_HTTP_TOKENS_FILE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start ui");
    let mut said = std::io::BufReader::new(ui.stdout.take().unwrap()).lines();
    let first = said.next().unwrap().unwrap();
    let link = first
        .split("open ")
        .nth(1)
        .expect("a link")
        .trim()
        .to_owned();
    let after = link.strip_prefix("http://").unwrap();
    let (addr, path) = after.split_once('/').unwrap();
    let server = Pages {
        addr: addr.parse().unwrap(),
    };
    let signed = server.get(&format!("/{path}"), None);
    assert_eq!(signed.status, 303, "{}", signed.body);
    let cookie = signed
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(
        server.get(&format!("/{path}"), None).status,
        401,
        "the link works once"
    );

    let run = wait_for(|| {
        let list = server.get("/", Some(&cookie));
        let waiting = list.body.contains(r#"<tr class="waiting">"#);
        let run = list
            .body
            .split("href=\"/runs/")
            .nth(1)?
            .split('"')
            .next()?
            .to_owned();
        waiting.then_some(run)
    });
    let answered = server.post(
        &format!("/runs/{run}/answer"),
        &cookie,
        "node=review&f.verdict=hold&f.notes=not+yet",
    );
    assert_eq!(answered.status, 303, "{}", answered.body);
    wait_for(|| {
        let page = server.get(&format!("/runs/{run}"), Some(&cookie));
        page.body
            .contains(r#"<span class="badge succeeded">succeeded</span>"#)
            .then_some(())
    });
    let status = driver.wait().unwrap();
    assert!(status.success(), "the driving process ends well");
    let _ = ui.kill();
    let _ = ui.wait();
}

/// The dashboard of a `ui` process.
struct Pages {
    addr: std::net::SocketAddr,
}

impl Pages {
    fn send(&self, head: &str, body: &str) -> Reply {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(self.addr).unwrap();
        let request = format!(
            "{head}\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        Reply::parse(&raw)
    }

    fn get(&self, path: &str, cookie: Option<&str>) -> Reply {
        let cookie = cookie
            .map(|c| format!("\r\nCookie: {c}"))
            .unwrap_or_default();
        self.send(&format!("GET {path} HTTP/1.1{cookie}"), "")
    }

    fn post(&self, path: &str, cookie: &str, body: &str) -> Reply {
        let head = format!(
            "POST {path} HTTP/1.1\r\nCookie: {cookie}\r\nOrigin: http://{}\r\n\
             Content-Type: application/x-www-form-urlencoded",
            self.addr
        );
        self.send(&head, body)
    }
}

/// What `found` finds, within ten seconds.
fn wait_for<T>(mut found: impl FnMut() -> Option<T>) -> T {
    let started = std::time::Instant::now();
    loop {
        if let Some(found) = found() {
            return found;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "not seen in time"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn the_workflows_page_names_each_problem_of_a_file_left_out_with_its_line_and_column() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(
        folder.path().join("bad.toml"),
        "name = \"bad\"\n[nodes.a]\nrender = \"x\"\nneeds = [\"nowhere\"]\n",
    )
    .unwrap();
    let folder = folder.path().to_str().unwrap().to_owned();
    let server = HttpServer::start(&["--http-tokens", "{tokens}", "--workflows", &folder]);
    let cookie = server.sign_in(ALICE);
    let page = server.page("/workflows", Some(&cookie));
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("Left out for their problems"),
        "{}",
        page.body
    );
    assert!(page.body.contains("bad.toml:4:"), "{}", page.body);
    assert!(page.body.contains("nowhere"), "{}", page.body);
    // The built-in workflows are there, each linked to its page and its form.
    assert!(
        page.body.contains(r#"href="/workflows/release_checklist""#),
        "{}",
        page.body
    );
}
