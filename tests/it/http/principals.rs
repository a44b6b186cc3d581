//! What principals cannot do to each other: use another's session (its id is as unknown
//! as one that never was), take every session, stream or waiting `tasks/result` of the
//! server, or find another's run under an idempotency key.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::tokens::open_stream;
use super::*;

/// Sends one request on a connection of its own and returns the connection, whose
/// response is read as it comes.
fn send_held(server: &HttpServer, head: &str, body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(server.addr).unwrap();
    let request = format!(
        "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream
}

/// POSTs `message` with these header lines; the response is read as it comes.
fn post_held(server: &HttpServer, headers: &[String], message: &Value) -> TcpStream {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream",
        server.addr.port()
    );
    for header in headers {
        head.push_str("\r\n");
        head.push_str(header);
    }
    send_held(server, &head, &message.to_string())
}

/// Reads `streams` in turn until one has sent `text`; returns which one and what it sent.
pub(super) fn first_to_send(streams: &mut [&mut TcpStream], text: &str) -> (usize, String) {
    let deadline = Instant::now() + DEADLINE;
    let mut seen = vec![Vec::new(); streams.len()];
    let mut buffer = [0u8; 4096];
    loop {
        for (index, stream) in streams.iter_mut().enumerate() {
            stream
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            if let Ok(n) = stream.read(&mut buffer) {
                seen[index].extend_from_slice(&buffer[..n]);
            }
            let sent = String::from_utf8_lossy(&seen[index]);
            if sent.contains(text) {
                return (index, sent.into_owned());
            }
        }
        assert!(
            Instant::now() < deadline,
            "none sent {text}: {:?}",
            seen.iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect::<Vec<_>>()
        );
    }
}

/// A request of `method` to `/mcp` with these header lines and no body.
fn bodiless(server: &HttpServer, method: &str, headers: &[String]) -> Reply {
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream",
        server.addr.port()
    );
    for header in headers {
        head.push_str("\r\n");
        head.push_str(header);
    }
    server.send(&head, "")
}

/// `session`'s headers with `token` in place of its own.
fn as_holder_of(session: &[String], token: &str) -> Vec<String> {
    let mut headers: Vec<String> = session
        .iter()
        .filter(|h| !h.starts_with("Authorization"))
        .cloned()
        .collect();
    headers.push(bearer(token));
    headers
}

/// A 2025-11-25 session opened with `token` by a client that answers elicitations.
fn open_eliciting_session(server: &HttpServer, token: &str) -> Vec<String> {
    let mut init = initialize(1);
    init["params"]["capabilities"] = json!({"elicitation": {}});
    let reply = server.post(&[bearer(token)], &init);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    let headers = vec![
        bearer(token),
        format!("Mcp-Session-Id: {session}"),
        "MCP-Protocol-Version: 2025-11-25".to_owned(),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(server.post(&headers, &initialized).status, 202);
    headers
}

#[test]
fn another_principal_holding_a_session_id_is_refused_everywhere_and_never_gets_its_question() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let alice = open_eliciting_session(&server, ALICE);
    let asking = json!({"nodes": {"ask": {"input": {"message": "Your name?",
        "schema": {"type": "object", "properties": {"name": {"type": "string"}}}}}}});
    let task_id = start_2025_task(&server, &alice, asking);
    let mut waiting = post_held(
        &server,
        &alice,
        &request(4, "tasks/result", json!({"taskId": task_id})),
    );

    let bob = as_holder_of(&alice, BOB);
    let stream = bodiless(&server, "GET", &bob);
    assert_eq!(stream.status, 404, "her GET stream: {}", stream.body);
    let mut resuming = bob.clone();
    resuming.push("Last-Event-ID: 0".to_owned());
    let resumed = bodiless(&server, "GET", &resuming);
    assert_eq!(resumed.status, 404, "her streams resumed: {}", resumed.body);
    let listed = server.post(&bob, &request(5, "tools/list", json!({})));
    assert_eq!(
        listed.status, 404,
        "a POST into her session: {}",
        listed.body
    );
    let answer = json!({"jsonrpc": "2.0", "id": 0, "result": {"action": "accept",
                        "content": {"name": "bob"}}});
    let answered = server.post(&bob, &answer);
    assert_eq!(
        answered.status, 404,
        "an answer in her session: {}",
        answered.body
    );
    let mut modern = bob.clone();
    modern.extend(modern_headers("tasks/get", &task_id));
    let get = json!({"jsonrpc": "2.0", "id": 6, "method": "tasks/get",
                     "params": {"taskId": task_id, "_meta": modern_meta()}});
    let polled = server.post(&modern, &get);
    assert_eq!(
        polled.status, 404,
        "a 2026-07-28 request naming it: {}",
        polled.body
    );
    let closed = bodiless(&server, "DELETE", &bob);
    assert_eq!(closed.status, 404, "her session closed: {}", closed.body);

    // Her session is open, and her question is hers: on her own stream.
    let mut hers = open_stream(&server, &alice);
    first_to_send(&mut [&mut hers, &mut waiting], "elicitation/create");
    let listed = server.post(&alice, &request(7, "tools/list", json!({})));
    assert!(listed.response(7)["result"]["tools"].is_array());
}

#[test]
fn a_principal_at_its_session_cap_never_stops_another_from_opening_one() {
    let server = HttpServer::start(&[
        "--http-tokens",
        "{tokens}",
        "--http-max-sessions-per-principal",
        "2",
    ]);
    let bobs = [open_session(&server, BOB), open_session(&server, BOB)];
    let refused = server.post(&[bearer(BOB)], &initialize(1));
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.header("retry-after"), Some("5"));
    assert!(
        refused
            .body
            .contains("too many open sessions for this principal"),
        "{}",
        refused.body
    );
    let alice = open_session(&server, ALICE);
    let listed = server.post(&alice, &request(2, "tools/list", json!({})));
    assert!(listed.response(2)["result"]["tools"].is_array());

    // A session closed gives its slot back, and is unknown after.
    let closed = bodiless(&server, "DELETE", &bobs[0]);
    assert!(closed.status < 300, "{} {}", closed.status, closed.body);
    let gone = server.post(&bobs[0], &request(3, "tools/list", json!({})));
    assert_eq!(gone.status, 404, "{}", gone.body);
    open_session(&server, BOB);
}

#[test]
fn a_principal_at_its_stream_cap_never_stops_another_from_streaming() {
    let server = HttpServer::start(&[
        "--http-tokens",
        "{tokens}",
        "--http-max-streams-per-principal",
        "1",
    ]);
    let bob = open_session(&server, BOB);
    let alice = open_session(&server, ALICE);
    let _bobs_stream = open_stream(&server, &bob);
    let refused = server.post(&bob, &request(2, "tools/list", json!({})));
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(
        refused
            .body
            .contains("too many open streams for this principal"),
        "{}",
        refused.body
    );
    let _alices_stream = open_stream(&server, &alice);
    drop(_alices_stream);
    let started = Instant::now();
    // Her stream's slot comes back once the server sees it closed.
    loop {
        let listed = server.post(&alice, &request(3, "tools/list", json!({})));
        if listed.status == 200 {
            assert!(listed.response(3)["result"]["tools"].is_array());
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "her stream's slot never came back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_principal_at_its_result_wait_cap_is_refused_another_wait_and_others_are_not() {
    let server = HttpServer::start(&[
        "--http-tokens",
        "{tokens}",
        "--http-max-result-waits-per-principal",
        "1",
    ]);
    let bob = open_session(&server, BOB);
    let sleeping = json!({"nodes": {"sleep": {"wait": WAIT}}});
    let task_id = start_2025_task(&server, &bob, sleeping);
    let wait = request(4, "tasks/result", json!({"taskId": task_id}));
    let mut first = post_held(&server, &bob, &wait);
    let mut second = post_held(&server, &bob, &wait);
    // One of the two waits; the other is refused at once.
    let (_, refused) = first_to_send(&mut [&mut first, &mut second], "too_many_result_waits");
    assert!(
        refused.contains("--http-max-result-waits-per-principal"),
        "{refused}"
    );

    let alice = open_session(&server, ALICE);
    let quick = json!({"nodes": {"hi": {"render": "hi"}}});
    let task_id = start_2025_task(&server, &alice, quick);
    let result = server.post(
        &alice,
        &request(5, "tasks/result", json!({"taskId": task_id})),
    );
    let result = result.response(5);
    assert_eq!(
        result["result"]["structuredContent"]["data"]["nodes"]["hi"]["output"], "hi",
        "{result}"
    );
}

#[test]
fn waiting_tasks_result_requests_are_capped_in_all_without_tokens_too() {
    let server = HttpServer::start(&["--http-max-result-waits", "1"]);
    let sessions = [
        open_session_as(&server, vec![]).0,
        open_session_as(&server, vec![]).0,
    ];
    let sleeping = json!({"nodes": {"sleep": {"wait": WAIT}}});
    let mut held = Vec::new();
    for session in &sessions {
        let task_id = start_2025_task(&server, session, sleeping.clone());
        let wait = request(4, "tasks/result", json!({"taskId": task_id}));
        held.push(post_held(&server, session, &wait));
    }
    let [first, second] = &mut held[..] else {
        unreachable!()
    };
    let (_, refused) = first_to_send(&mut [first, second], "too_many_result_waits");
    assert!(refused.contains("(--http-max-result-waits)"), "{refused}");
}

/// A `run_workflow` task started in `session` with `key`; returns the reply.
fn start_keyed(server: &HttpServer, session: &[String], key: &str, definition: Value) -> Value {
    let params = json!({"name": "run_workflow", "task": {"ttl": 60000},
        "arguments": {"definition": definition, "idempotency_key": key}});
    server
        .post(session, &request(3, "tools/call", params))
        .response(3)
}

fn task_id_of(reply: &Value) -> String {
    reply["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task in {reply}"))
        .to_owned()
}

#[test]
fn one_idempotency_key_used_by_two_principals_starts_a_run_for_each() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);
    let hers = json!({"nodes": {"hi": {"render": "alice's"}}});
    let his = json!({"nodes": {"hi": {"render": "bob's"}}});
    let alices = task_id_of(&start_keyed(&server, &alice, "shared-key", hers.clone()));
    // Other arguments under her key: his own run, never "used for other arguments".
    let bobs = task_id_of(&start_keyed(&server, &bob, "shared-key", his.clone()));
    assert_ne!(alices, bobs);
    // The same arguments too start his own run, which hers does not answer.
    let bobs_other = open_session(&server, BOB);
    let again = task_id_of(&start_keyed(&server, &bobs_other, "shared-key", his));
    assert_eq!(again, bobs, "his retry finds his run");
    let hers_again = task_id_of(&start_keyed(&server, &alice, "shared-key", hers));
    assert_eq!(hers_again, alices, "her retry finds hers");
    let result = |session: &[String], task_id: &str| {
        let reply = server.post(
            session,
            &request(6, "tasks/result", json!({"taskId": task_id})),
        );
        reply.response(6)["result"]["structuredContent"]["data"]["nodes"]["hi"]["output"].clone()
    };
    assert_eq!(result(&alice, &alices), "alice's");
    assert_eq!(result(&bob, &bobs), "bob's");
    let listed = listed_task_ids(&server, &bob);
    assert!(
        listed.contains(&bobs) && !listed.contains(&alices),
        "{listed:?}"
    );
}

#[test]
fn a_retry_with_its_key_gets_its_run_even_at_the_run_cap() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}", "--http-max-runs", "1"]);
    let alice = open_session(&server, ALICE);
    // Long enough for the retries below to come while it runs; were it over sooner, the
    // cap would not be reached and the test would show nothing, never fail wrongly.
    let sleeping = json!({"nodes": {"sleep": {"wait": "3s"}}});
    let first = task_id_of(&start_keyed(&server, &alice, "k-1", sleeping.clone()));
    let retried = start_keyed(&server, &alice, "k-1", sleeping.clone());
    assert_eq!(task_id_of(&retried), first, "{retried}");
    // Another key is another run, past the cap.
    let other = start_keyed(&server, &alice, "k-2", sleeping.clone());
    assert_eq!(
        other["error"]["data"]["error"]["code"], "too_many_runs",
        "{other}"
    );
    // A synchronous call with the key waits for the run the key started.
    let sync = call(
        8,
        "run_workflow",
        json!({"definition": sleeping,
                                              "idempotency_key": "k-1"}),
    );
    let sync = server.post(&alice, &sync).response(8);
    assert_eq!(sync["result"]["structuredContent"]["ok"], true, "{sync}");
}

#[test]
fn another_principals_run_is_no_resource_to_read() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);
    let run = start_2025_task(&server, &alice, json!({"nodes": {"hi": {"render": "hi"}}}));
    let uri = format!("tasks://runs/{run}/report.json");
    let read = |session: &[String], id| {
        let reply = server.post(session, &request(id, "resources/read", json!({"uri": uri})));
        reply.response(id)
    };
    let alices = read(&alice, 7);
    assert!(
        alices["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains(&run),
        "{alices}"
    );
    let bobs = read(&bob, 8);
    assert_eq!(bobs["error"]["code"], -32002, "unknown to bob: {bobs}");
    let listed = server.post(
        &bob,
        &request(
            9,
            "completion/complete",
            json!({
        "ref": {"type": "ref/resource", "uri": "tasks://runs/{run_id}/report.json"},
        "argument": {"name": "run_id", "value": ""}}),
        ),
    );
    assert_eq!(
        listed.response(9)["result"]["completion"]["values"],
        json!([]),
        "nor completed"
    );
}

#[test]
fn a_subscriber_hears_of_its_run_as_it_changes_and_another_principal_hears_nothing() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);
    let definition = json!({"nodes": {"pause": {"wait": "700ms"},
                                      "hi": {"render": "hi", "needs": ["pause"]}}});
    let run = start_2025_task(&server, &alice, definition);
    let uri = format!("tasks://runs/{run}/summary.md");
    for (session, id) in [(&alice, 7), (&bob, 8)] {
        let reply = server.post(
            session,
            &request(id, "resources/subscribe", json!({"uri": uri})),
        );
        assert_eq!(reply.response(id)["result"], json!({}), "{}", reply.body);
    }
    let mut hers = open_stream(&server, &alice);
    let mut his = open_stream(&server, &bob);
    let (_, sent) = first_to_send(&mut [&mut hers], "notifications/resources/updated");
    assert!(sent.contains(&uri), "{sent}");
    // The run is over by now or soon; Bob's stream carries nothing of it.
    std::thread::sleep(Duration::from_millis(900));
    his.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buffer = [0u8; 4096];
    let heard = his.read(&mut buffer).map_or(0, |n| n);
    let heard = String::from_utf8_lossy(&buffer[..heard]).into_owned();
    assert!(!heard.contains("resources/updated"), "{heard}");
}

#[test]
fn a_2026_07_28_listener_hears_of_a_run_until_its_end() {
    let server = HttpServer::start(&[]);
    let definition = json!({"nodes": {"pause": {"wait": "600ms"},
                                      "hi": {"render": "hi", "needs": ["pause"]}}});
    let task = start_modern_task(&server, definition);
    let uri = format!("tasks://runs/{task}/summary.md");
    let mut stream = open_listen(&server, None, json!({"resourceSubscriptions": [uri]}));
    let (_, heard) = first_to_send(&mut [&mut stream], "notifications/resources/updated");
    let acknowledged = heard.find("notifications/subscriptions/acknowledged");
    let updated = heard.find("notifications/resources/updated");
    assert!(acknowledged < updated && acknowledged.is_some(), "{heard}");
    assert!(heard.contains(&uri), "{heard}");
    // Each update says the summary changed; read after the last, it tells the run's end.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let read = json!({"jsonrpc": "2.0", "id": 6, "method": "resources/read",
                          "params": {"_meta": modern_meta(), "uri": uri}});
        let headers = [
            "MCP-Protocol-Version: 2026-07-28".to_owned(),
            "Mcp-Method: resources/read".to_owned(),
            format!("Mcp-Name: {uri}"),
        ];
        let summary = server.post(&headers, &read).response(6);
        let text = summary["result"]["contents"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if text.contains(": succeeded") {
            break;
        }
        assert!(Instant::now() < deadline, "{summary}");
        let (_, more) = first_to_send(&mut [&mut stream], "notifications/resources/updated");
        assert!(more.contains(&uri), "{more}");
    }
}

/// Each change of the store looks at every resource followed, so a session follows at most
/// `--max-subscriptions` at once: one more `resources/subscribe` is refused, naming the
/// option, and so is a `subscriptions/listen` that names more.
#[test]
fn a_session_follows_at_most_max_subscriptions_resources() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}", "--max-subscriptions", "2"]);
    let alice = open_session(&server, ALICE);
    let uri = |n: u32| format!("tasks://runs/run-{n}/summary.md");
    let subscribe = |session: &[String], id: u64, uri: &str| {
        let reply = server.post(
            session,
            &request(id, "resources/subscribe", json!({"uri": uri})),
        );
        reply.response(id)
    };
    assert_eq!(subscribe(&alice, 7, &uri(1))["result"], json!({}));
    assert_eq!(subscribe(&alice, 8, &uri(2))["result"], json!({}));
    assert_eq!(
        subscribe(&alice, 9, &uri(1))["result"],
        json!({}),
        "a resource followed already is no new one"
    );
    let refused = subscribe(&alice, 10, &uri(3));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--max-subscriptions"), "{refused}");
    let unsubscribe = server.post(
        &alice,
        &request(11, "resources/unsubscribe", json!({"uri": uri(1)})),
    );
    assert_eq!(unsubscribe.response(11)["result"], json!({}));
    assert_eq!(subscribe(&alice, 12, &uri(3))["result"], json!({}));
    let bob = open_session(&server, BOB);
    assert_eq!(
        subscribe(&bob, 13, &uri(4))["result"],
        json!({}),
        "another session has its own"
    );

    let uris = [uri(1), uri(2), uri(3)];
    let mut stream = open_listen(&server, Some(ALICE), json!({"resourceSubscriptions": uris}));
    let (_, heard) = first_to_send(&mut [&mut stream], "--max-subscriptions");
    assert!(heard.contains("-32602"), "{heard}");
    let mut stream = open_listen(
        &server,
        Some(ALICE),
        json!({"resourceSubscriptions": [uri(1), uri(2)]}),
    );
    let (_, heard) = first_to_send(
        &mut [&mut stream],
        "notifications/subscriptions/acknowledged",
    );
    assert!(
        heard.contains(&uri(1)) && heard.contains(&uri(2)),
        "{heard}"
    );
}

/// A 2026-07-28 `subscriptions/listen` for `notifications`, as the holder of `token` (if
/// any), left open: its stream to read.
pub(super) fn open_listen(
    server: &HttpServer,
    token: Option<&str>,
    notifications: Value,
) -> TcpStream {
    let listen = json!({"jsonrpc": "2.0", "id": 5, "method": "subscriptions/listen", "params": {
        "_meta": modern_meta(), "notifications": notifications}});
    let body = listen.to_string();
    let authorization = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let mut stream = TcpStream::connect(server.addr).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{authorization}\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n\
         Content-Length: {}\r\n\r\n{body}",
        server.addr.port(),
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream
}

/// The messages of an SSE stream's text, parsed.
fn messages(heard: &str) -> impl Iterator<Item = Value> + '_ {
    heard
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
}

/// The statuses of `task` that `notifications/tasks` told in `heard`, in order.
fn told_statuses(heard: &str, task: &str) -> Vec<String> {
    messages(heard)
        .filter(|message| message["method"] == "notifications/tasks")
        .filter(|message| message["params"]["taskId"] == task)
        .map(|message| {
            message["params"]["status"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// A 2026-07-28 client that declares the tasks extension follows its task on one listen:
/// the acknowledgement names it, and `notifications/tasks` tell its status as the listen
/// begins and as it changes, up to its end with its result; another principal following
/// the same task id hears nothing of it.
#[test]
fn a_2026_07_28_listener_is_told_a_tasks_status_to_its_end_and_another_principal_nothing() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let definition = json!({"nodes": {"pause": {"wait": "600ms"},
                                      "hi": {"render": "hi", "needs": ["pause"]}}});
    let bearer = |token: &str| format!("Authorization: Bearer {token}");
    let task = start_modern_task_as(&server, &[bearer(ALICE)], definition);
    let mut hers = open_listen(&server, Some(ALICE), json!({"taskIds": [task]}));
    let mut his = open_listen(&server, Some(BOB), json!({"taskIds": [task]}));
    let (_, heard) = first_to_send(&mut [&mut hers], "\"status\":\"completed\"");
    let ack = messages(&heard)
        .find(|message| message["method"] == "notifications/subscriptions/acknowledged")
        .expect("the listen is acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([task]),
        "{ack}"
    );
    let told = told_statuses(&heard, &task);
    assert_eq!(told.first().map(String::as_str), Some("working"), "{heard}");
    assert_eq!(
        told.last().map(String::as_str),
        Some("completed"),
        "{heard}"
    );
    let completed = messages(&heard)
        .find(|message| message["params"]["status"] == "completed")
        .unwrap();
    let subscription = &completed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"];
    assert_eq!(subscription, 5, "{completed}");
    assert!(completed["params"]["result"].is_object(), "{completed}");

    his.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buffer = [0u8; 8192];
    let n = his.read(&mut buffer).unwrap_or(0);
    let his_heard = String::from_utf8_lossy(&buffer[..n]).into_owned();
    assert!(told_statuses(&his_heard, &task).is_empty(), "{his_heard}");
}

/// A listen that names tasks from a client that did not declare the tasks extension is
/// refused with `-32021`, naming the capability it needs.
#[test]
fn a_listen_that_names_tasks_without_the_tasks_extension_is_refused() {
    let server = HttpServer::start(&[]);
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let listen = json!({"jsonrpc": "2.0", "id": 6, "method": "subscriptions/listen", "params": {
        "_meta": meta, "notifications": {"taskIds": ["some-task"]}}});
    let headers = [
        "MCP-Protocol-Version: 2026-07-28".to_owned(),
        "Mcp-Method: subscriptions/listen".to_owned(),
    ];
    let refused = server.post(&headers, &listen).response(6);
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}}),
        "{refused}"
    );
}
