//! `history` nodes through the real server: over HTTP with tokens, a principal's run reads
//! only that principal's earlier runs, whatever its inline definition asks for; without
//! tokens every caller is the local user, who reads everyone's, as `get_run` lets it. What
//! one principal can make such a node cost is bounded by the operator's caps on rows,
//! bytes and runs scanned, and another principal's runs cost it nothing.

use serde_json::{Value, json};

use super::*;
use crate::support::backends::on_both_backends;

/// The workflow whose runs are read, inline: it says who ran it.
fn deploy() -> Value {
    json!({
        "name": "deploy",
        "inputs": { "who": { "type": "string" } },
        "nodes": { "say": { "render": "{{ inputs.who }}" } },
        "output": { "who": "nodes.say.output" }
    })
}

/// A workflow that reads the history of `deploy`.
fn reader() -> Value {
    reader_with(json!({ "workflow": "deploy", "limit": 10 }))
}

/// A workflow that reads the history of `deploy` with this `history` table.
fn reader_with(history: Value) -> Value {
    json!({
        "name": "reader",
        "nodes": { "past": { "history": history } },
        "output": { "past": "nodes.past.output" }
    })
}

/// Calls `run_workflow` with an inline definition and returns the envelope of its answer.
fn call_inline(
    server: &HttpServer,
    headers: &[String],
    id: u64,
    definition: Value,
    inputs: Value,
) -> Value {
    let arguments = json!({ "definition": definition, "inputs": inputs });
    let reply = server.post(headers, &call(id, "run_workflow", arguments));
    let answer = reply.response(id);
    answer["result"]["structuredContent"].clone()
}

/// Runs an inline workflow to its end with `run_workflow` and returns its report.
fn run_inline(
    server: &HttpServer,
    headers: &[String],
    id: u64,
    definition: Value,
    inputs: Value,
) -> Value {
    let envelope = call_inline(server, headers, id, definition, inputs);
    assert_eq!(envelope["ok"], true, "{envelope}");
    envelope["data"].clone()
}

/// Who ran the runs a reader's output lists, newest first.
fn whose(report: &Value) -> Vec<String> {
    let runs = report["output"]["past"]["runs"].as_array().expect("runs");
    runs.iter()
        .map(|run| run["output"]["who"].as_str().unwrap().to_owned())
        .collect()
}

on_both_backends! {
    fn over_http_a_principals_history_node_reads_only_that_principals_runs(place) {
        let server = HttpServer::start_on(&place, &["--http-tokens", "{tokens}"]);
        let alice = open_session(&server, ALICE);
        let bob = open_session(&server, BOB);
        run_inline(&server, &alice, 10, deploy(), json!({ "who": "alice" }));
        std::thread::sleep(std::time::Duration::from_millis(5));
        run_inline(&server, &bob, 11, deploy(), json!({ "who": "bob" }));
        std::thread::sleep(std::time::Duration::from_millis(5));
        run_inline(&server, &alice, 12, deploy(), json!({ "who": "alice again" }));

        let read = run_inline(&server, &alice, 13, reader(), json!({}));
        assert_eq!(whose(&read), ["alice again", "alice"]);
        let read = run_inline(&server, &bob, 14, reader(), json!({}));
        assert_eq!(whose(&read), ["bob"]);
        assert_eq!(read["output"]["past"]["truncated"], false);
        drop(server);

        // Without tokens, the caller is the local user, who reads every principal's runs.
        let open = HttpServer::start_on(&place, &[]);
        let session = open_session_as(&open, Vec::new()).0;
        let read = run_inline(&open, &session, 15, reader(), json!({}));
        assert_eq!(whose(&read), ["alice again", "bob", "alice"]);
    }
}

on_both_backends! {
    fn over_http_another_principals_runs_are_out_of_reach_of_any_history_node(place) {
        let server = HttpServer::start_on(&place, &["--http-tokens", "{tokens}"]);
        let alice = open_session(&server, ALICE);
        let bob = open_session(&server, BOB);
        for (i, who) in ["alice", "alice's secret"].into_iter().enumerate() {
            run_inline(&server, &alice, 10 + i as u64, deploy(), json!({ "who": who }));
        }
        // Bob's own definitions, each aimed at alice's runs: by the workflow's name given
        // by a template, by a `where` that picks them, by every status, by a limit as
        // large as the cap allows.
        let attempts = [
            json!({ "workflow": "{{ 'dep' ~ 'loy' }}" }),
            json!({ "workflow": "deploy", "where": "'alice' in past.output.who" }),
            json!({ "workflow": "deploy", "status": ["succeeded", "failed", "cancelled"] }),
            json!({ "workflow": "deploy", "limit": 100, "where": "true" }),
        ];
        for (i, history) in attempts.into_iter().enumerate() {
            let read = run_inline(&server, &bob, 20 + i as u64, reader_with(history.clone()), json!({}));
            assert_eq!(read["status"], "succeeded", "{history}: {read}");
            assert_eq!(read["output"]["past"], json!({ "runs": [], "truncated": false }), "{history}");
        }
        // Nor does alice's history say anything of bob's reading it, or hold his runs.
        let read = run_inline(&server, &alice, 30, reader(), json!({}));
        assert_eq!(whose(&read), ["alice's secret", "alice"]);
    }
}

on_both_backends! {
    fn over_http_what_one_principal_can_make_a_history_node_cost_is_capped(place) {
        let caps = ["--max-history-rows", "3", "--max-history-bytes", "2048", "--max-history-scan", "4"];
        let mut args = vec!["--http-tokens", "{tokens}"];
        args.extend(caps);
        let server = HttpServer::start_on(&place, &args);
        let alice = open_session(&server, ALICE);
        let bob = open_session(&server, BOB);
        // Alice's many runs are no part of bob's scan: his `where` looks at none of them.
        for i in 0..6 {
            run_inline(&server, &alice, 10 + i, deploy(), json!({ "who": "alice" }));
        }
        let everything = json!({ "workflow": "deploy", "where": "true" });
        let read = run_inline(&server, &bob, 20, reader_with(everything.clone()), json!({}));
        assert_eq!(read["output"]["past"], json!({ "runs": [], "truncated": false }));

        // A written limit over the row cap is refused before anything runs.
        let refused = call_inline(&server, &bob, 21, reader_with(json!({ "workflow": "deploy", "limit": 4 })), json!({}));
        assert_eq!(refused["ok"], false, "{refused}");
        assert_eq!(refused["error"]["code"], "invalid_input", "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("limit 4 is over the most runs a history node may read (3, --max-history-rows)"), "{message}");
        // One a template gives fails its node, over the same budget.
        let templated = reader_with(json!({ "workflow": "deploy", "limit": "{{ 3 + 1 }}" }));
        let failed = call_inline(&server, &bob, 22, templated, json!({}));
        assert_eq!(failed["error"]["code"], "run_failed", "{failed}");
        let error = &failed["data"]["nodes"]["past"]["error"];
        assert_eq!(error["code"], "budget_exceeded", "{failed}");
        assert!(error["message"].as_str().unwrap().contains("max-history-rows"), "{failed}");

        // Bob's own runs, long ones: the bytes cap leaves out what would not fit.
        let long = "b".repeat(700);
        for i in 0..5 {
            run_inline(&server, &bob, 30 + i, deploy(), json!({ "who": long }));
        }
        let read = run_inline(&server, &bob, 40, reader_with(json!({ "workflow": "deploy", "limit": 3 })), json!({}));
        let past = &read["output"]["past"];
        let kept = past["runs"].as_array().unwrap().len();
        assert!((1..3).contains(&kept), "{kept} runs kept");
        assert_eq!(past["truncated"], true);
        assert!(serde_json::to_string(past).unwrap().len() <= 2048);
        // The scan cap bounds what a `where` that matches nothing looks at.
        let nothing = json!({ "workflow": "deploy", "where": "past.output.who == 'nobody'" });
        let read = run_inline(&server, &bob, 41, reader_with(nothing), json!({}));
        assert_eq!(read["output"]["past"], json!({ "runs": [], "truncated": true }));
        // Alice, under the same caps, reads hers and none of bob's.
        let read = run_inline(&server, &alice, 50, reader_with(json!({ "workflow": "deploy", "limit": 3 })), json!({}));
        let runs = read["output"]["past"]["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 3);
        assert!(runs.iter().all(|run| run["output"]["who"] == "alice"), "{read}");
    }
}
