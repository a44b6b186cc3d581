//! The built-in workflows' memory between two principals over HTTP with tokens: the trend
//! of `deployment_readiness` and the sessions alike of `troubleshoot` are made of the
//! caller's own runs only, and `troubleshoot_outcome` neither rates nor reveals another
//! principal's session.

use serde_json::{Value, json};

use super::*;
use crate::support::backends::on_both_backends;

/// Calls a built-in workflow's tool and returns its envelope (`{ok, data | error}`).
fn run_tool(
    server: &HttpServer,
    headers: &[String],
    id: u64,
    tool: &str,
    arguments: Value,
) -> Value {
    let reply = server.post(headers, &call(id, tool, arguments));
    let envelope = reply.response(id)["result"]["structuredContent"].clone();
    // Runs that end in the same millisecond are ordered by id: these are kept apart.
    std::thread::sleep(std::time::Duration::from_millis(3));
    envelope
}

/// The output of a run that succeeded.
fn succeeded(envelope: &Value) -> &Value {
    assert_eq!(envelope["ok"], true, "{envelope}");
    &envelope["data"]["output"]
}

/// A readiness check of `version` to production where the migrations were not reviewed.
fn readiness(version: &str) -> Value {
    json!({ "version": version, "checks": ["Tests pass", "Migrations reviewed"],
        "results": [{ "check": "Tests pass", "passed": true },
                    { "check": "Migrations reviewed", "passed": false }] })
}

/// A troubleshooting session of `failure`, every answer up front.
fn session(failure: &str) -> Value {
    json!({ "failure": failure, "component": "billing",
        "hypotheses": [{ "cause": "Out of memory", "likelihood": "high", "evidence": "137" }],
        "plan": [{ "step": "Read the pod's events", "expected": "OOMKilled" }] })
}

on_both_backends! {
    fn over_http_readiness_and_troubleshooting_remember_only_the_callers_own_runs(place) {
        let server = HttpServer::start_on(&place, &["--http-tokens", "{tokens}"]);
        let alice = open_session(&server, ALICE);
        let bob = open_session(&server, BOB);

        // Alice's failing migrations recur; bob's first check has no trend of hers.
        run_tool(&server, &alice, 10, "deployment_readiness", readiness("1.0"));
        let hers = run_tool(&server, &alice, 11, "deployment_readiness", readiness("1.1"));
        assert_eq!(succeeded(&hers)["recurring"], json!(["Migrations reviewed"]));
        assert_eq!(succeeded(&hers)["trend"]["runs"], 2);
        let his = run_tool(&server, &bob, 12, "deployment_readiness", readiness("2.0"));
        let trend = &succeeded(&his)["trend"];
        assert_eq!((trend["runs"].clone(), trend["earlier"].clone()), (json!(1), json!([])));
        assert_eq!(succeeded(&his)["recurring"], json!([]));
        // And alice's next check takes in her two, not his.
        let again = run_tool(&server, &alice, 13, "deployment_readiness", readiness("1.2"));
        assert_eq!(succeeded(&again)["trend"]["runs"], 3, "{again}");
        let earlier = succeeded(&again)["trend"]["earlier"].clone();
        let versions: Vec<&str> = (earlier.as_array().unwrap().iter())
            .map(|run| run["version"].as_str().unwrap())
            .collect();
        assert_eq!(versions, ["1.1", "1.0"], "{earlier}");

        // Alice's session, rated fixed, is no session alike for bob.
        let mut first = session("The billing service crashes on start");
        first["rating"] = json!("fixed");
        let first = run_tool(&server, &alice, 20, "troubleshoot", first);
        succeeded(&first);
        let alices_session = first["data"]["run_id"].clone();
        let his = run_tool(&server, &bob, 21, "troubleshoot", session("The billing service crashes on start again"));
        assert_eq!(succeeded(&his)["similar"], json!([]));

        // Bob can neither rate her session nor read it.
        let refused = run_tool(&server, &bob, 22, "troubleshoot_outcome",
            json!({ "run_id": alices_session, "rating": "not_fixed", "note": "bob was here" }));
        assert_eq!(refused["ok"], false, "{refused}");
        assert_eq!(refused["error"]["message"], "run failed at node `session_check`");
        assert_eq!(refused["data"]["nodes"]["write_report"]["status"], "skipped", "{refused}");
        let sessions = &refused["data"]["nodes"]["sessions"]["output"];
        assert_eq!(sessions, &json!({ "runs": [], "truncated": false }));
        let read = server.post(&bob, &call(23, "get_run", json!({ "run_id": alices_session })));
        let read = &read.response(23)["result"]["structuredContent"];
        assert_eq!(read["error"]["code"], "not_found", "{read}");

        // Alice's next session finds her own, still rated as she rated it, and not bob's.
        let next = run_tool(&server, &alice, 30, "troubleshoot", session("The billing service crashes on start today"));
        let similar = succeeded(&next)["similar"].as_array().unwrap().clone();
        assert_eq!(similar.len(), 1, "{similar:?}");
        assert_eq!(similar[0]["run_id"], alices_session);
        assert_eq!(similar[0]["rating"], "fixed");
        // And she may rate her own.
        let rated = run_tool(&server, &alice, 31, "troubleshoot_outcome",
            json!({ "run_id": alices_session, "rating": "partly" }));
        assert_eq!(succeeded(&rated)["rating"], "partly");
    }
}
