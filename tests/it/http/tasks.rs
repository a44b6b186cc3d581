//! Runs as tasks over HTTP in both task protocols, and who owns them: one shared todo
//! list, runs and tasks by principal (with tokens) or by session (without).

use std::time::Duration;

use serde_json::json;

use super::*;

use crate::support;

#[test]
fn sessions_of_different_principals_share_one_todo_list() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);

    let added = server.post(
        &alice,
        &call(2, "add_task", json!({"title": "ship the HTTP transport"})),
    );
    let result = &added.response(2)["result"];
    assert_eq!(result["structuredContent"]["ok"], json!(true), "{result}");

    // Bob's session numbers its requests as Alice's does: ids are per session.
    let listed = server.post(&bob, &call(2, "list_tasks", json!({})));
    let data = &listed.response(2)["result"]["structuredContent"]["data"];
    let titles: Vec<&str> = data
        .as_array()
        .unwrap_or_else(|| panic!("a list of todos in {data}"))
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["ship the HTTP transport"]);
    assert_eq!(
        support::task_titles(&server.db.path),
        ["ship the HTTP transport"]
    );
}

#[test]
fn a_stateless_2026_07_28_client_runs_a_workflow_as_a_task_and_polls_it_to_its_result() {
    let server = HttpServer::start(&[]);
    let definition = json!({"name": "hello", "nodes": {"hi": {"render": "hi over HTTP"}}});
    let task_id = start_modern_task(&server, definition);

    let started = std::time::Instant::now();
    let done = loop {
        let reply = get_modern_task(&server, &task_id);
        if reply["result"]["status"] == "completed" {
            break reply;
        }
        assert_eq!(reply["result"]["status"], "working", "{reply}");
        assert!(started.elapsed() < DEADLINE, "the run never finished");
        std::thread::sleep(Duration::from_millis(20));
    };
    let data = &done["result"]["result"]["structuredContent"]["data"];
    assert_eq!(data["status"], "succeeded", "{done}");
    assert_eq!(data["nodes"]["hi"]["output"], "hi over HTTP");
}

#[test]
fn a_2025_11_25_session_gets_workflow_runs_as_tasks_in_that_protocols_shapes() {
    let server = HttpServer::start(&[]);
    let (session, init) = open_session_as(&server, vec![]);
    let capabilities = &init["capabilities"];
    assert_eq!(
        capabilities["tasks"]["requests"],
        json!({"tools": {"call": {}}}),
        "{init}"
    );
    assert!(
        capabilities["extensions"]["io.modelcontextprotocol/tasks"].is_null(),
        "{init}"
    );

    let tools = server.post(&session, &request(2, "tools/list", json!({})));
    let tools = tools.response(2)["result"]["tools"].clone();
    let run_workflow = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "run_workflow")
        .expect("run_workflow is listed");
    assert_eq!(run_workflow["execution"]["taskSupport"], "optional");
    assert!(
        !tools.to_string().contains("x-mcp-task-server"),
        "the handler's mark never reaches a client: {tools}"
    );

    let definition = json!({"nodes": {"hi": {"render": "hi from a legacy task"}}});
    let params = json!({"name": "run_workflow", "arguments": {"definition": definition},
                        "task": {"ttl": 60000}});
    let created = server.post(&session, &request(3, "tools/call", params));
    let task = created.response(3)["result"]["task"].clone();
    let task_id = task["taskId"]
        .as_str()
        .expect("a task is created")
        .to_owned();
    assert!(task["ttl"].is_number(), "{task}");

    let started = std::time::Instant::now();
    loop {
        let got = server.post(
            &session,
            &request(4, "tasks/get", json!({"taskId": task_id})),
        );
        let status = got.response(4)["result"]["status"].clone();
        if status == "completed" {
            break;
        }
        assert_eq!(status, "working", "{}", got.body);
        assert!(started.elapsed() < DEADLINE, "the run never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    let result = server.post(
        &session,
        &request(5, "tasks/result", json!({"taskId": task_id})),
    );
    let result = result.response(5)["result"].clone();
    let data = &result["structuredContent"]["data"];
    assert_eq!(
        data["nodes"]["hi"]["output"], "hi from a legacy task",
        "{result}"
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        json!(task_id)
    );
}

#[test]
fn with_tokens_each_principals_tasks_are_unknown_to_the_other_and_listings_do_not_leak() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);
    let waiting = json!({"nodes": {"sleep": {"wait": WAIT}}});
    let legacy = start_2025_task(&server, &alice, waiting.clone());
    let modern = start_modern_task_as(&server, &[bearer(ALICE)], waiting);

    // Bob asks for Alice's tasks by id, in both protocols: unknown, as for no such task.
    let got = server.post(&bob, &request(4, "tasks/get", json!({"taskId": legacy})));
    assert_eq!(got.response(4)["error"]["code"], -32602, "{}", got.body);
    let cancel = server.post(&bob, &request(5, "tasks/cancel", json!({"taskId": legacy})));
    assert_eq!(
        cancel.response(5)["error"]["code"],
        -32602,
        "{}",
        cancel.body
    );
    let got = get_modern_task_as(&server, &[bearer(BOB)], &modern);
    assert_eq!(got["error"]["code"], -32602, "{got}");
    let run = server.post(&bob, &call(6, "get_run", json!({"run_id": legacy})));
    let run = &run.response(6)["result"]["structuredContent"];
    assert_eq!(run["error"]["code"], "not_found", "{run}");

    // Listings show each principal its own.
    assert_eq!(listed_task_ids(&server, &bob), Vec::<String>::new());
    // A run's task comes first, its sub-tasks after it.
    assert_eq!(listed_task_ids(&server, &alice)[0], legacy);
    assert_eq!(listed_run_ids(&server, &bob), Vec::<String>::new());
    let mut alices = listed_run_ids(&server, &alice);
    alices.sort();
    let mut expected = vec![legacy.clone(), modern.clone()];
    expected.sort();
    assert_eq!(alices, expected);

    // Alice still reaches her own, and the audit log names who did what.
    let got = get_modern_task_as(&server, &[bearer(ALICE)], &modern);
    assert_eq!(got["result"]["status"], "working", "{got}");
    let rows = support::audit_rows(&server.db.path);
    let started: Vec<_> = rows
        .iter()
        .filter(|row| row.tool == "run_workflow")
        .map(|row| (row.run_id.clone().unwrap(), row.principal.as_deref()))
        .collect();
    assert!(
        started.contains(&(legacy.clone(), Some("alice"))),
        "{started:?}"
    );
    assert!(
        started.contains(&(modern.clone(), Some("alice"))),
        "{started:?}"
    );
    let bobs: Vec<&str> = rows
        .iter()
        .filter(|row| row.principal.as_deref() == Some("bob"))
        .map(|row| row.tool.as_str())
        .collect();
    assert_eq!(bobs, ["get_run", "list_runs"], "{rows:?}");
}

#[test]
fn without_tokens_another_session_polls_a_task_by_its_id_but_does_not_see_it_listed() {
    let server = HttpServer::start(&[]);
    let first = open_session_as(&server, vec![]).0;
    let second = open_session_as(&server, vec![]).0;
    let task_id = start_2025_task(&server, &first, json!({"nodes": {"sleep": {"wait": WAIT}}}));

    let got = server.post(
        &second,
        &request(4, "tasks/get", json!({"taskId": task_id})),
    );
    assert_eq!(
        got.response(4)["result"]["taskId"],
        json!(task_id),
        "{}",
        got.body
    );
    assert_eq!(listed_task_ids(&server, &second), Vec::<String>::new());
    assert_eq!(listed_task_ids(&server, &first)[0], task_id);
    assert_eq!(listed_run_ids(&server, &second), Vec::<String>::new());
    // A stateless request belongs to no session, and lists what was started in none.
    let stateless = start_modern_task(&server, json!({"nodes": {"sleep": {"wait": WAIT}}}));
    assert_eq!(listed_run_ids(&server, &first), [task_id]);
    let listed = server.post(
        &modern_headers("tools/call", "list_runs"),
        &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
            "name": "list_runs", "arguments": {}, "_meta": modern_meta()}}),
    );
    let data = &listed.response(8)["result"]["structuredContent"]["data"];
    let ids: Vec<&str> = data
        .as_array()
        .unwrap_or_else(|| panic!("{}", listed.body))
        .iter()
        .map(|run| run["runId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [stateless.as_str()]);
}

#[test]
fn a_principal_with_as_many_runs_as_allowed_is_refused_another_and_others_are_not() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}", "--http-max-runs", "1"]);
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);
    let waiting = json!({"nodes": {"sleep": {"wait": WAIT}}});
    start_2025_task(&server, &alice, waiting.clone());

    let params = json!({"name": "run_workflow", "arguments": {"definition": waiting.clone()},
                        "task": {"ttl": 60000}});
    let refused = server.post(&alice, &request(4, "tools/call", params));
    let refused = refused.response(4);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(
        refused["error"]["data"]["error"]["code"], "too_many_runs",
        "{refused}"
    );
    let sync = call(5, "run_workflow", json!({"definition": waiting.clone()}));
    let sync = server.post(&alice, &sync).response(5);
    assert_eq!(sync["result"]["isError"], true, "{sync}");
    assert_eq!(
        sync["result"]["structuredContent"]["error"]["code"],
        "too_many_runs"
    );
    // Todo calls are not runs, and another principal has a quota of its own.
    let added = server.post(&alice, &call(6, "add_task", json!({"title": "still fine"})));
    assert_eq!(added.response(6)["result"]["isError"], false);
    start_2025_task(&server, &bob, waiting);
    let rejected = support::audit_rows(&server.db.path)
        .into_iter()
        .filter(|row| row.outcome == "rejected")
        .map(|row| (row.tool, row.principal))
        .collect::<Vec<_>>();
    let alice = Some("alice".to_owned());
    assert_eq!(
        rejected,
        [
            ("run_workflow".to_owned(), alice.clone()),
            ("run_workflow".to_owned(), alice)
        ]
    );
}

#[test]
fn a_stateless_2026_07_28_call_without_tasks_is_answered_in_input_required_rounds() {
    let server = HttpServer::start(&[]);
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let definition = json!({"nodes": {
        "ask": {"input": {"message": "Your name?", "schema": {"type": "object",
            "properties": {"name": {"type": "string"}}, "required": ["name"]}}},
        "hello": {"needs": ["ask"], "render": "hello {{ nodes.ask.output.name }}"}}});
    let first = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "run_workflow", "_meta": meta, "arguments": {"definition": definition}}});
    let headers = modern_headers("tools/call", "run_workflow");
    let round = server.post(&headers, &first).response(1);
    let result = &round["result"];
    assert_eq!(result["resultType"], "input_required", "{round}");
    let key = result["inputRequests"]
        .as_object()
        .and_then(|requests| requests.keys().next().cloned())
        .expect("one question");
    assert_eq!(
        result["inputRequests"][&key]["params"]["message"],
        "Your name?"
    );

    let mut retry = first.clone();
    retry["id"] = json!(2);
    retry["params"]["requestState"] = result["requestState"].clone();
    retry["params"]["inputResponses"] =
        json!({ key: {"action": "accept", "content": {"name": "Ada"}} });
    let done = server.post(&headers, &retry).response(2);
    let data = &done["result"]["structuredContent"]["data"];
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(data["nodes"]["hello"]["output"], "hello Ada", "{done}");
}

#[test]
fn the_internal_names_of_2025_11_25_task_methods_cannot_be_called_from_outside() {
    // The legacy layer renames a 2025-11-25 task request to an internal name for the
    // handler; a client that sends that name itself gets "method not found", in a session
    // and without one, and its call has no effect.
    let server = HttpServer::start(&[]);
    let session = open_session_as(&server, Vec::new()).0;
    let prefix = "x-mcp-task-server/2025-11-25/";
    let add = json!({"name": "add_task", "arguments": {"title": "smuggled"},
                     "task": {"ttl": 60000}});
    let internal = |method: &str| format!("{prefix}{method}");
    let stateless = modern_headers(&internal("tasks/list"), "").to_vec();
    let cases = [
        (session.clone(), "tasks/list", json!({})),
        (session.clone(), "tools/call", add),
        (stateless, "tasks/list", json!({"_meta": modern_meta()})),
    ];
    for (id, (headers, method, params)) in (20..).zip(cases) {
        let reply = server.post(&headers, &request(id, &internal(method), params));
        let reply = reply.response(id);
        assert_eq!(reply["error"]["code"], -32601, "{method}: {reply}");
    }
    let listed = server.post(&session, &call(30, "list_tasks", json!({})));
    let data = &listed.response(30)["result"]["structuredContent"]["data"];
    assert_eq!(data, &json!([]), "the smuggled call added nothing");
    // The same requests by their own names are served.
    let listed = server.post(&session, &request(31, "tasks/list", json!({})));
    assert!(listed.response(31)["result"]["tasks"].is_array());
}

#[test]
fn runs_whose_filter_used_to_panic_are_answered_and_give_their_run_slot_back() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}", "--http-max-runs", "2"]);
    let alice = open_session(&server, ALICE);
    // Rust panics on a format width above 65 535: this filter took the call, its answer
    // and its run slot with it.
    let pad = json!({"nodes": {"pad": {"render": "{{ 1 | zero_pad(70000) }}"}}});
    let over = json!({"nodes": {"pad": {"render": "{{ 1 | zero_pad(100000000) }}"}}});
    for id in 10..44 {
        let definition = if id % 2 == 0 { &pad } else { &over };
        let reply = call(id, "run_workflow", json!({"definition": definition}));
        let reply = server.post(&alice, &reply).response(id);
        let structured = &reply["result"]["structuredContent"];
        if id % 2 == 0 {
            assert_eq!(structured["ok"], true, "{reply}");
            let text = structured["data"]["nodes"]["pad"]["output"]
                .as_str()
                .unwrap();
            assert_eq!(text.len(), 70000);
        } else {
            assert_eq!(structured["error"]["code"], "run_failed", "{reply}");
            let error = &structured["data"]["nodes"]["pad"]["error"];
            assert_eq!(error["code"], "budget_exceeded", "{reply}");
        }
    }
}
