//! The bootstrap validation loop over HTTP with tokens: a principal's loop, waiting for its
//! person to paste the script's output, is unknown to another principal, who can neither
//! read it (nor its iteration's child run) nor answer its question, over MCP or from the
//! dashboard.

use mcp_task_server::store::{Scope, Store};
use serde_json::json;

use super::{ALICE, BOB, HttpServer, call, listed_run_ids, open_session, request};
use crate::bootstrap::{checks, write_adrs};
use crate::support::{self, wait_until};

/// The child run of the loop's first iteration, once it asks its question.
fn asking_child(store: &Store) -> Option<String> {
    let runs = store.list_runs(None, Scope::Everyone, 20).unwrap();
    let child = runs
        .into_iter()
        .find(|r| r.workflow == "bootstrap_iteration")?;
    let questions = store.questions(&child.id).unwrap();
    (questions.iter())
        .any(|q| q.node_id.as_deref() == Some("ask_output") && q.answer.is_none())
        .then_some(child.id)
}

#[test]
fn another_principal_can_neither_read_nor_answer_a_principals_bootstrap_loop() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    write_adrs(&server.db.dir.path().join("workspace"), false);
    let alice = open_session(&server, ALICE);
    let params = json!({ "name": "bootstrap_validation_loop", "task": { "ttl": 600000 },
        "arguments": { "checks": checks(), "max_iterations": 1 } });
    let created = server.post(&alice, &request(3, "tools/call", params));
    let created = created.response(3);
    let run = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task in {created}"))
        .to_owned();
    let store = support::read_only(&server.db.path);
    wait_until("the iteration asks for the script's output", || {
        asking_child(&store).is_some()
    });
    let child = asking_child(&store).unwrap();

    // Over MCP: bob knows neither run.
    let bob = open_session(&server, BOB);
    let got = server.post(&bob, &request(4, "tasks/get", json!({ "taskId": run })));
    assert_eq!(got.response(4)["error"]["code"], -32602, "{}", got.body);
    let result = server.post(&bob, &request(5, "tasks/result", json!({ "taskId": run })));
    assert_eq!(
        result.response(5)["error"]["code"],
        -32602,
        "{}",
        result.body
    );
    for (id, of) in [(6, &run), (7, &child)] {
        let read = server.post(&bob, &call(id, "get_run", json!({ "run_id": of })));
        let read = &read.response(id)["result"]["structuredContent"];
        assert_eq!(read["error"]["code"], "not_found", "{read}");
    }
    assert_eq!(listed_run_ids(&server, &bob), Vec::<String>::new());

    // From the dashboard: no page of either run, and an answer posted is refused.
    let bobs = server.sign_in(BOB);
    for of in [&run, &child] {
        let page = server.page(&format!("/runs/{of}"), Some(&bobs));
        assert_eq!(page.status, 404, "{}", page.body);
        let body = "node=ask_output&f.output=PASS+all&f.exit_code=0";
        let posted = server.form(
            &format!("/runs/{of}/answer"),
            Some(&bobs),
            Some(&server.origin()),
            body,
        );
        assert_eq!(posted.status, 404, "{}", posted.body);
    }
    assert_eq!(
        asking_child(&store),
        Some(child.clone()),
        "still unanswered"
    );

    // Alice reads her question where she runs it.
    let alices = server.sign_in(ALICE);
    let page = server.page(&format!("/runs/{child}"), Some(&alices));
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("this server may not run the checks"),
        "{}",
        page.body
    );
}
