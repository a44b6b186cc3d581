//! What a principal reads, lists and follows of the workspace's files: only the files its
//! own runs wrote last, while they still hold what was written. Never another principal's
//! file, a file no run wrote (`.env`), the server's own files (the database, the tokens
//! file), whatever era, path or spelling it asks by; and what it cannot read answers as a
//! file that is not there.

use std::io::Read;
use std::time::Duration;

use serde_json::{Value, json};

use super::principals::first_to_send;
use super::tokens::open_stream;
use super::*;

use crate::support;
use crate::support::backends::{Place, on_both_backends};

/// The `note` workflow, which writes `notes/NAME.md` over whatever is there.
const NOTES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/resources");

fn start(place: &Place, extra: &[&str]) -> HttpServer {
    let mut args = vec!["--http-tokens", "{tokens}", "--workflows", NOTES];
    args.extend_from_slice(extra);
    HttpServer::start_on(place, &args)
}

/// The folder the server's workflows write in: `./workspace` beside the database file.
fn workspace(server: &HttpServer) -> std::path::PathBuf {
    server.db.dir.path().join("workspace")
}

/// Writes `notes/{name}.md` holding `text` by a run of the session's principal; the URI
/// of the file, as the run's result links it.
fn write_note(server: &HttpServer, session: &[String], name: &str, text: &str) -> String {
    let call = super::call(
        21,
        "run_workflow",
        json!({"workflow": "note", "inputs": {"name": name, "text": text}}),
    );
    let reply = server.post(session, &call).response(21);
    let content = reply["result"]["content"].as_array().cloned();
    let link = content
        .into_iter()
        .flatten()
        .find(|item| item["type"] == "resource_link")
        .unwrap_or_else(|| panic!("a link to the file written in {reply}"));
    link["uri"].as_str().unwrap().to_owned()
}

/// `resources/read` of `uri` in a 2025-11-25 session.
fn read(server: &HttpServer, session: &[String], uri: &str) -> Value {
    let reply = server.post(session, &request(22, "resources/read", json!({"uri": uri})));
    reply.response(22)
}

/// `resources/read` of `uri` as a 2026-07-28 request, in no session, with `token`.
fn read_stateless(server: &HttpServer, token: &str, uri: &str) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 23, "method": "resources/read",
                         "params": {"_meta": modern_meta(), "uri": uri}});
    let headers = [
        bearer(token),
        "MCP-Protocol-Version: 2026-07-28".to_owned(),
        "Mcp-Method: resources/read".to_owned(),
        format!("Mcp-Name: {uri}"),
    ];
    server.post(&headers, &message).response(23)
}

fn text_of(read: &Value) -> &str {
    read["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text in {read}"))
}

/// Asserts that `read` is "resource not found" for `uri`, said as it is said of a file
/// that does not exist: nothing of why, nothing of the file system. (2026-07-28 says it
/// with "invalid params", as rmcp answers that era.)
fn not_found(read: &Value, uri: &str) {
    let code = &read["error"]["code"];
    assert!(*code == -32002 || *code == -32602, "{read}");
    assert_eq!(
        read["error"]["message"],
        format!("no resource {uri}"),
        "{read}"
    );
}

/// The URIs `resources/list` gives the session.
fn listed(server: &HttpServer, session: &[String]) -> Vec<String> {
    let reply = server.post(session, &request(24, "resources/list", json!({})));
    let reply = reply.response(24);
    reply["result"]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("resources in {reply}"))
        .iter()
        .map(|resource| resource["uri"].as_str().unwrap().to_owned())
        .collect()
}

fn file_uri(path: &std::path::Path) -> String {
    format!("file://{}", path.display())
}

on_both_backends! {
    fn a_principal_reads_and_lists_only_the_files_its_own_runs_wrote_last(place) {
        let server = start(&place, &[]);
        let alice = open_session(&server, ALICE);
        let bob = open_session(&server, BOB);
        let plan = write_note(&server, &alice, "plan", "alice's plan");
        let root = workspace(&server);
        std::fs::write(root.join(".env"), "API_KEY=alice-only\n").unwrap();
        std::fs::write(root.join("notes/handmade.md"), "by hand\n").unwrap();
        let env = file_uri(&root.join(".env"));
        let handmade = file_uri(&root.join("notes/handmade.md"));
        let missing = file_uri(&root.join("notes/missing.md"));

        assert_eq!(text_of(&read(&server, &alice, &plan)), "alice's plan");
        assert_eq!(text_of(&read_stateless(&server, ALICE, &plan)), "alice's plan");
        // Bob reads nothing of it, in either era, nor what no run wrote; neither does
        // Alice read what her runs did not write. Each answer is that of a missing file.
        for (uri, session, token) in [
            (&plan, &bob, BOB),
            (&env, &bob, BOB),
            (&env, &alice, ALICE),
            (&handmade, &alice, ALICE),
            (&missing, &bob, BOB),
        ] {
            not_found(&read(&server, session, uri), uri);
            not_found(&read_stateless(&server, token, uri), uri);
        }
        // The server's own files are outside the workspace: the tokens file, and where
        // the database is a file, it and its write-ahead log.
        let mut own = vec![server.db.dir.path().join("tokens")];
        if let Place::Sqlite(_) = place {
            let db = std::path::PathBuf::from(place.location());
            own.push(db.clone());
            own.push(format!("{}-wal", db.display()).into());
        }
        for path in own {
            let uri = file_uri(&path);
            not_found(&read(&server, &alice, &uri), &uri);
            not_found(&read(&server, &bob, &uri), &uri);
        }
        assert_eq!(listed(&server, &alice), std::slice::from_ref(&plan));
        assert_eq!(listed(&server, &bob), Vec::<String>::new());

        // Bob's run writes the same file: it is his now, and no longer Alice's.
        assert_eq!(write_note(&server, &bob, "plan", "bob's plan"), plan);
        assert_eq!(text_of(&read(&server, &bob, &plan)), "bob's plan");
        not_found(&read(&server, &alice, &plan), &plan);
        assert_eq!(listed(&server, &alice), Vec::<String>::new());
        assert_eq!(listed(&server, &bob), std::slice::from_ref(&plan));
        // Changed since by someone else's hand, it is nobody's to read over HTTP.
        std::fs::write(root.join("notes/plan.md"), "bob's plan, edited").unwrap();
        not_found(&read(&server, &bob, &plan), &plan);
        assert_eq!(listed(&server, &bob), Vec::<String>::new());
        // Written again by Alice's run, it is hers again.
        write_note(&server, &alice, "plan", "alice's plan, again");
        assert_eq!(text_of(&read(&server, &alice, &plan)), "alice's plan, again");
        not_found(&read(&server, &bob, &plan), &plan);
    }
}

on_both_backends! {
    fn a_read_refused_is_audited_under_no_run_and_a_read_under_the_run_it_read(place) {
        let server = start(&place, &[]);
        let alice = open_session(&server, ALICE);
        let bob = open_session(&server, BOB);
        let run = start_2025_task(&server, &alice, json!({"nodes": {"hi": {"render": "hi"}}}));
        let uri = format!("tasks://runs/{run}/report.json");
        assert!(read(&server, &alice, &uri)["result"].is_object());
        not_found(&read(&server, &bob, &uri), &uri);
        let rows: Vec<_> = place
            .store()
            .audit_rows()
            .unwrap()
            .into_iter()
            .filter(|row| row.tool == "read_resource")
            .collect();
        let of = |principal: &str| {
            rows.iter()
                .find(|row| row.principal.as_deref() == Some(principal))
                .unwrap_or_else(|| panic!("a read of {principal} in {rows:?}"))
        };
        assert_eq!(of("alice").run_id.as_deref(), Some(run.as_str()));
        assert_eq!(of("alice").outcome, "ok");
        assert_eq!(of("bob").run_id, None, "bob's probe is not filed under alice's run");
        assert_eq!(of("bob").outcome, "not_found");
    }
}

/// A listen (2026-07-28) and a subscription (2025-11-25) are told of a file only while
/// their principal may read it: Bob, following Alice's note and the workspace's `.env`,
/// hears nothing when she writes it again; Alice does.
#[test]
fn a_listen_or_a_subscription_hears_of_a_file_only_while_its_principal_may_read_it() {
    let place = Place::sqlite();
    let server = start(&place, &[]);
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);
    let plan = write_note(&server, &alice, "plan", "first");
    let env = file_uri(&workspace(&server).join(".env"));
    std::fs::write(workspace(&server).join(".env"), "API_KEY=x\n").unwrap();
    let follow = json!({"resourceSubscriptions": [plan.clone(), env.clone()]});
    let mut hers = super::principals::open_listen(&server, Some(ALICE), follow.clone());
    let mut his = super::principals::open_listen(&server, Some(BOB), follow);
    for stream in [&mut hers, &mut his] {
        first_to_send(&mut [stream], "notifications/subscriptions/acknowledged");
    }
    for uri in [&plan, &env] {
        let reply = server.post(
            &bob,
            &request(30, "resources/subscribe", json!({"uri": uri})),
        );
        assert_eq!(reply.response(30)["result"], json!({}), "{}", reply.body);
    }
    let mut his_session = open_stream(&server, &bob);
    write_note(&server, &alice, "plan", "second");
    std::fs::write(workspace(&server).join(".env"), "API_KEY=y\n").unwrap();
    let (_, heard) = first_to_send(&mut [&mut hers], "notifications/resources/updated");
    assert!(heard.contains(&plan), "{heard}");
    // Two changes of the store later, Bob has heard of neither file.
    write_note(&server, &alice, "other", "x");
    std::thread::sleep(Duration::from_millis(800));
    for stream in [&mut his, &mut his_session] {
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut buffer = [0u8; 8192];
        let n = stream.read(&mut buffer).unwrap_or(0);
        let heard = String::from_utf8_lossy(&buffer[..n]);
        assert!(!heard.contains("resources/updated"), "{heard}");
    }
}

/// Every spelling of one file is one resource followed, and across its sessions a
/// principal follows at most `--max-subscriptions-per-principal`: one more is refused,
/// naming the option, while another principal still follows its own.
#[test]
fn spellings_of_one_file_are_one_subscription_and_a_principal_has_a_cap_across_sessions() {
    let place = Place::sqlite();
    let server = start(&place, &["--max-subscriptions-per-principal", "3"]);
    let alice = open_session(&server, ALICE);
    let plan = write_note(&server, &alice, "plan", "x");
    let path = plan.strip_prefix("file://").unwrap();
    let spellings: Vec<String> = (0..64)
        .map(|n| {
            let mut spelled = path.replace("/notes/", &format!("/notes/{}", "./".repeat(n)));
            if n % 2 == 1 {
                spelled = spelled.replace("plan", "%70lan");
            }
            format!("file://{spelled}")
        })
        .collect();
    let subscribe = |session: &[String], id: u64, uri: &str| {
        let reply = server.post(
            session,
            &request(id, "resources/subscribe", json!({"uri": uri})),
        );
        reply.response(id)
    };
    for (n, spelling) in spellings.iter().enumerate() {
        assert_eq!(
            subscribe(&alice, 40 + n as u64, spelling)["result"],
            json!({})
        );
    }
    let second = open_session(&server, ALICE);
    let run = |n: u32| format!("tasks://runs/run-{n}/summary.md");
    assert_eq!(subscribe(&second, 200, &run(1))["result"], json!({}));
    assert_eq!(subscribe(&second, 201, &run(2))["result"], json!({}));
    let refused = subscribe(&second, 202, &run(3));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("--max-subscriptions-per-principal"),
        "{refused}"
    );
    let bob = open_session(&server, BOB);
    assert_eq!(subscribe(&bob, 203, &run(3))["result"], json!({}));
    // A URI longer than any path may be is refused before anything is kept of it.
    let long = format!("file:///{}", "a".repeat(20_000));
    let refused = subscribe(&bob, 204, &long);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let listen = json!({"jsonrpc": "2.0", "id": 205, "method": "subscriptions/listen",
        "params": {"_meta": modern_meta(), "notifications": {"resourceSubscriptions": [long]}}});
    let headers = [
        bearer(BOB),
        "MCP-Protocol-Version: 2026-07-28".to_owned(),
        "Mcp-Method: subscriptions/listen".to_owned(),
    ];
    let refused = server.post(&headers, &listen).response(205);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

/// `prompts/get` with parameters that do not fit is the caller's mistake (`-32602`), not
/// an unknown method, over HTTP as over stdio.
#[test]
fn a_prompt_asked_for_with_malformed_parameters_is_invalid_params() {
    let place = Place::sqlite();
    let server = start(&place, &[]);
    let alice = open_session(&server, ALICE);
    let reply = server.post(&alice, &request(50, "prompts/get", json!({"name": 7})));
    let reply = reply.response(50);
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
}

/// What following a file costs: many sessions following one file, in many spellings, read
/// it whole once (for its digest, shared by them all), and never again on a change of the
/// store that leaves it as it was (a todo made, a lease renewed); written anew, it is read
/// once more, for them all. Counted by the server's own log of each such read.
#[test]
fn followers_of_a_file_read_it_once_however_many_and_never_on_a_change_elsewhere() {
    let db = support::TempDb::new();
    let log = db.dir.path().join("server.log");
    let mut command = HttpServer::command(
        &db,
        &[
            "--http-tokens",
            "{tokens}",
            "--workflows",
            NOTES,
            "--lease",
            "600ms",
        ],
    );
    command
        .env("RUST_LOG", "info,mcp_task_server::app::resources=debug")
        .stderr(std::fs::File::create(&log).unwrap());
    let child = command.spawn().unwrap();
    let addr = wait_for_line(&log, "http://")
        .split("http://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let server = HttpServer { child, addr, db };
    let reads = || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.matches("read whole for its digest").count()
    };
    let alice = open_session(&server, ALICE);
    let big = "x".repeat(512 * 1024);
    let plan = write_note(&server, &alice, "plan", &big);
    let path = plan.strip_prefix("file://").unwrap().to_owned();
    let spelled = |n: usize| {
        format!(
            "file://{}",
            path.replace("/notes/", &"/notes/./".repeat(n % 8 + 1))
        )
    };
    let mut sessions = Vec::new();
    for token in [ALICE; 8].into_iter().chain([BOB; 4]) {
        let session = open_session(&server, token);
        for n in 0..64 {
            let subscribe = request(60, "resources/subscribe", json!({"uri": spelled(n)}));
            let reply = server.post(&session, &subscribe).response(60);
            assert_eq!(reply["result"], json!({}), "{reply}");
        }
        sessions.push(session);
    }
    assert_eq!(reads(), 1, "one read for every follower of one file");
    for n in 0..8 {
        let todo = super::call(61, "add_task", json!({"title": format!("todo {n}")}));
        server.post(&alice, &todo).response(61);
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(
        reads(),
        1,
        "changes elsewhere, and lease renewals, read nothing"
    );
    write_note(&server, &alice, "plan", &"y".repeat(512 * 1024));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(reads(), 2, "a new content is read once, for every follower");
}

/// The first line of the file at `path` holding `text`, once the server wrote it.
fn wait_for_line(path: &std::path::Path, text: &str) -> String {
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let log = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(line) = log.lines().find(|line| line.contains(text)) {
            return line.to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "no {text:?} in {log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A prompt quotes the arguments it is given: a template in one is text, never evaluated,
/// whatever it would cost, and another principal is given the same prompts and no run of
/// Alice's to complete.
#[test]
fn a_prompt_quotes_its_arguments_and_never_evaluates_them() {
    let place = Place::sqlite();
    let server = start(&place, &[]);
    let bob = open_session(&server, BOB);
    let bomb = "{{ range(100000) | map('string') | join(',') * 100000 }}{% for i in range(99999) %}x{% endfor %}";
    let get = request(
        70,
        "prompts/get",
        json!({"name": "interactive_adr_planning", "arguments": {"title": bomb}}),
    );
    let reply = server.post(&bob, &get).response(70);
    let text = reply["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a prompt in {reply}"));
    assert!(text.contains(bomb), "{text}");
    let alice = open_session(&server, ALICE);
    start_2025_task(&server, &alice, json!({"nodes": {"hi": {"render": "hi"}}}));
    let complete = request(
        71,
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "tasks://runs/{run_id}/summary.md"},
               "argument": {"name": "run_id", "value": ""}}),
    );
    let completed = server.post(&bob, &complete).response(71);
    assert_eq!(
        completed["result"]["completion"]["values"],
        json!([]),
        "{completed}"
    );
    let list = |session: &[String]| {
        let listed = server.post(session, &request(72, "prompts/list", json!({})));
        listed.response(72)["result"]["prompts"].clone()
    };
    assert_eq!(
        list(&alice),
        list(&bob),
        "prompts are the same for every principal"
    );
}
