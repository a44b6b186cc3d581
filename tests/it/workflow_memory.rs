//! The built-in workflows' memory across runs, in process over a raw JSON-RPC wire:
//! `deployment_readiness` shows the trend over the latest runs to the same environment and
//! marks (and tags) a check that keeps failing as recurring, never filing a second blocker;
//! `troubleshoot` shows the earlier sessions whose failure looks alike, most alike first,
//! with their confirmed causes and ratings, and `troubleshoot_outcome` rates a session
//! later, which reorders the next session's suggestions, and refuses a run that is not a
//! finished troubleshoot session. Two principals over HTTP are in `http/workflow_memory.rs`.

use std::time::Duration;

use mcp_task_server::runs::RegistryConfig;
use serde_json::{Value, json};

use crate::support::assert_contains_all;
use crate::support::wire::Wire;

fn start() -> Wire {
    Wire::start_in(RegistryConfig::default(), &[])
}

/// Calls `workflow` with `arguments` on a client that can answer nothing; its reply.
async fn call(wire: &mut Wire, id: i64, workflow: &str, arguments: Value) -> Value {
    let params = json!({ "name": workflow, "arguments": arguments });
    let reply = wire.request(id, "tools/call", params).await;
    // Runs that end in the same millisecond are ordered by id: these are kept apart.
    tokio::time::sleep(Duration::from_millis(3)).await;
    reply
}

/// The run's report, after checking that the call succeeded.
fn report(reply: &Value) -> &Value {
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    &reply["result"]["structuredContent"]["data"]
}

fn output(reply: &Value) -> &Value {
    &report(reply)["output"]
}

/// The text of the report file the run's output names.
fn report_text(wire: &Wire, reply: &Value) -> String {
    let path = output(reply)["report"].as_str().expect("a report path");
    std::fs::read_to_string(wire.dir.path().join(path)).unwrap()
}

fn todos(wire: &Wire) -> Vec<(i64, String, Vec<String>)> {
    let store = wire.registry.store();
    let all = store.list_todos(&Default::default()).unwrap();
    all.into_iter().map(|t| (t.id, t.title, t.tags)).collect()
}

// ── deployment_readiness ───────────────────────────────────────────────────────────────

const CHECKS: [&str; 3] = ["Tests pass", "Migrations reviewed", "Changelog updated"];

/// A readiness call of `version` to `environment` where the checks named in `failed`
/// failed and the others passed, every result up front.
fn readiness(version: &str, environment: &str, failed: &[&str]) -> Value {
    let results: Vec<Value> = CHECKS
        .iter()
        .map(|check| json!({ "check": check, "passed": !failed.contains(check), "note": "" }))
        .collect();
    json!({ "version": version, "environment": environment, "checks": CHECKS,
        "results": results, "threshold": 60 })
}

#[tokio::test]
async fn readiness_shows_the_trend_of_the_same_environment_and_tags_a_check_that_keeps_failing() {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let first = call(
        &mut wire,
        1,
        "deployment_readiness",
        readiness("1.3.0", "production", &["Migrations reviewed"]),
    )
    .await;
    assert_eq!(
        output(&first)["recurring"],
        json!([]),
        "nothing recurs on a first run"
    );
    assert_eq!(output(&first)["trend"]["runs"], 1);
    // Another environment's runs are no part of production's trend.
    let staging = readiness("1.3.1", "staging", &["Migrations reviewed", "Tests pass"]);
    call(&mut wire, 2, "deployment_readiness", staging).await;
    let failed = ["Migrations reviewed", "Changelog updated"];
    let reply = call(
        &mut wire,
        3,
        "deployment_readiness",
        readiness("1.4.0", "production", &failed),
    )
    .await;

    let out = output(&reply);
    let trend = &out["trend"];
    assert_eq!(trend["environment"], "production");
    assert_eq!(
        (trend["runs"].clone(), trend["window"].clone()),
        (json!(2), json!(5))
    );
    assert_eq!(
        (trend["ready_runs"].clone(), trend["ready_rate"].clone()),
        (json!(1), json!(50))
    );
    assert_eq!(
        trend["checks"],
        json!([
            { "check": "Tests pass", "runs": 2, "failed": 0, "pass_rate": 100, "recurring": false },
            { "check": "Migrations reviewed", "runs": 2, "failed": 2, "pass_rate": 0, "recurring": true },
            { "check": "Changelog updated", "runs": 2, "failed": 1, "pass_rate": 50, "recurring": false }
        ])
    );
    let earlier = trend["earlier"].as_array().unwrap();
    assert_eq!(earlier.len(), 1, "{trend}");
    assert_eq!(earlier[0]["run_id"], report(&first)["run_id"]);
    assert_eq!(earlier[0]["version"], "1.3.0");
    assert_eq!(earlier[0]["failed"], json!(["Migrations reviewed"]));
    assert_eq!(out["recurring"], json!(["Migrations reviewed"]));

    let text = report_text(&wire, &reply);
    let date = &earlier[0]["finished_at"].as_str().unwrap()[..10];
    assert_contains_all(
        &text,
        &[
            "- Migrations reviewed (todo #4)\n  - Recurring: failed in 2 of the last 2 runs to production\n",
            "- Changelog updated (todo #5)\n\n## Trend\n",
            "Over the last 2 runs to production, this one included (a window of 5): ready in 1 (50%).",
            "| Tests pass | 0 of 2 | 100% |  |\n",
            "| Migrations reviewed | 2 of 2 | 0% | recurring |\n",
            "| Changelog updated | 1 of 2 | 50% |  |\n",
            &format!(
                "Earlier runs, newest first:\n\n- 1.3.0, {date}: 66%, ready; failed: Migrations reviewed\n"
            ),
        ],
    );
    // The recurring check's blocker is tagged so; the first failure's is not.
    let made: Vec<(String, Vec<String>)> = todos(&wire)
        .into_iter()
        .skip(3)
        .map(|(_, t, tags)| (t, tags))
        .collect();
    assert_eq!(
        made,
        [
            (
                "1.4.0 blocker: Migrations reviewed".to_owned(),
                vec![
                    "release-1.4.0".to_owned(),
                    "blocker".to_owned(),
                    "recurring".to_owned()
                ]
            ),
            (
                "1.4.0 blocker: Changelog updated".to_owned(),
                vec!["release-1.4.0".to_owned(), "blocker".to_owned()]
            ),
        ]
    );
}

#[tokio::test]
async fn readiness_rechecked_marks_an_open_blocker_recurring_without_filing_a_second_and_keeps_to_its_window()
 {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let failing = ["Migrations reviewed"];
    call(
        &mut wire,
        1,
        "deployment_readiness",
        readiness("2.0", "production", &failing),
    )
    .await;
    let again = call(
        &mut wire,
        2,
        "deployment_readiness",
        readiness("2.0", "production", &failing),
    )
    .await;
    assert_eq!(output(&again)["recurring"], json!(["Migrations reviewed"]));
    assert_eq!(
        output(&again)["todos"],
        json!([]),
        "the open blocker is kept: no second todo"
    );
    assert_contains_all(
        &report_text(&wire, &again),
        &[
            "- Migrations reviewed (todo #1)\n  - Recurring: failed in 2 of the last 2 runs to production\n",
        ],
    );
    assert_eq!(todos(&wire).len(), 1, "{:?}", todos(&wire));

    // It passes once, then fails: within a window of two runs it failed once, and is no
    // longer recurring; within the default window it failed three times in four.
    call(
        &mut wire,
        3,
        "deployment_readiness",
        readiness("2.0", "production", &[]),
    )
    .await;
    let mut narrow = readiness("2.1", "production", &failing);
    narrow["trend_runs"] = json!(2);
    let reply = call(&mut wire, 4, "deployment_readiness", narrow).await;
    let migrations = &output(&reply)["trend"]["checks"][1];
    assert_eq!(
        migrations,
        &json!({ "check": "Migrations reviewed", "runs": 2, "failed": 1, "pass_rate": 50, "recurring": false })
    );
    assert_eq!(todos(&wire).last().unwrap().2, ["release-2.1", "blocker"]);
    let reply = call(
        &mut wire,
        5,
        "deployment_readiness",
        readiness("2.2", "production", &failing),
    )
    .await;
    let migrations = &output(&reply)["trend"]["checks"][1];
    assert_eq!(
        migrations,
        &json!({ "check": "Migrations reviewed", "runs": 5, "failed": 4, "pass_rate": 20, "recurring": true })
    );
    // A stricter rule: three failures in the window.
    let mut strict = readiness("2.3", "production", &failing);
    strict["recurring_after"] = json!(3);
    strict["trend_runs"] = json!(3);
    let reply = call(&mut wire, 6, "deployment_readiness", strict).await;
    assert_eq!(output(&reply)["trend"]["checks"][1]["failed"], 3);
    assert_eq!(output(&reply)["recurring"], json!(["Migrations reviewed"]));
    // A window out of range fails before anything is filed.
    let before = todos(&wire).len();
    let mut wide = readiness("2.4", "production", &failing);
    wide["trend_runs"] = json!(21);
    let refused = call(&mut wire, 7, "deployment_readiness", wide).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(todos(&wire).len(), before);
}

// ── troubleshoot and troubleshoot_outcome ──────────────────────────────────────────────

/// A troubleshooting call with every answer up front: `causes` confirmed, high likelihood
/// first, and one step.
fn session(failure: &str, component: &str, causes: &[&str]) -> Value {
    let hypotheses: Vec<Value> = causes
        .iter()
        .zip(["high", "medium", "low"])
        .map(|(cause, likelihood)| json!({ "cause": cause, "likelihood": likelihood, "evidence": "" }))
        .collect();
    json!({ "failure": failure, "component": component, "hypotheses": hypotheses,
        "plan": [{ "step": "Read the logs", "expected": "" }] })
}

const NOW: &str =
    "The billing service crashes on start after the 2.3 upgrade\nIt exits with code 137.";

/// The titles of the sessions a session's output suggests, in order.
fn suggested(reply: &Value) -> Vec<String> {
    output(reply)["similar"]
        .as_array()
        .expect("a list of similar sessions")
        .iter()
        .map(|s| s["title"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn troubleshooting_shows_earlier_sessions_alike_most_alike_first_with_their_causes_and_ratings()
 {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let mut crash = session(
        "Billing service crashes on start after an upgrade",
        "billing",
        &["Out of memory", "A stale config cache"],
    );
    crash["rating"] = json!("fixed");
    crash["rating_note"] = json!("raised the memory limit");
    let crash = call(&mut wire, 1, "troubleshoot", crash).await;
    assert_eq!(
        output(&crash)["outcome"],
        json!({ "rating": "fixed", "note": "raised the memory limit" })
    );
    assert_eq!(output(&crash)["similar"], json!([]), "nothing earlier");
    let slow = session("The billing service is slow at night", "", &["Batch jobs"]);
    let slow = call(&mut wire, 2, "troubleshoot", slow).await;
    assert_eq!(
        output(&slow)["outcome"],
        json!({ "rating": "later", "note": "" }),
        "nobody to ask"
    );
    call(
        &mut wire,
        3,
        "troubleshoot",
        session("Login fails with a 502", "proxy", &["Proxy timeout"]),
    )
    .await;

    let reply = call(
        &mut wire,
        4,
        "troubleshoot",
        session(NOW, "billing", &["Out of memory"]),
    )
    .await;
    let similar = &output(&reply)["similar"];
    assert_eq!(
        suggested(&reply),
        [
            "Billing service crashes on start after an upgrade",
            "The billing service is slow at night"
        ]
    );
    let first = &similar[0];
    assert_eq!(first["run_id"], report(&crash)["run_id"]);
    assert_eq!(
        first["shared"],
        json!(["billing", "service", "crashes", "start", "upgrade"])
    );
    assert_eq!(first["score"], 5);
    assert_eq!(
        first["causes"],
        json!(["Out of memory", "A stale config cache"])
    );
    assert_eq!(
        (first["rating"].clone(), first["rating_note"].clone()),
        (json!("fixed"), json!("raised the memory limit"))
    );
    assert_eq!(similar[1]["score"], 2);
    assert_eq!(similar[1]["rating"], Value::Null);

    assert_contains_all(
        &report_text(&wire, &reply),
        &[
            "- Component: billing\n",
            "## Earlier sessions alike\n\n- **Billing service crashes on start after an upgrade** (",
            "5 words in common (billing, service, crashes, start, upgrade)\n  - Causes confirmed then: Out of memory; A stale config cache\n  - Fix: fixed: raised the memory limit\n",
            "- **The billing service is slow at night** (",
            "  - Fix: not rated\n",
            "## Outcome\n\nNot rated yet: rate whether the fix worked with `troubleshoot_outcome` and run id",
        ],
    );
    // Fewer shown when asked, and none at all for 0.
    let mut one = session(NOW, "billing", &["Out of memory"]);
    one["similar_sessions"] = json!(1);
    assert_eq!(
        suggested(&call(&mut wire, 5, "troubleshoot", one).await).len(),
        1
    );
    let mut none = session(NOW, "billing", &["Out of memory"]);
    none["similar_sessions"] = json!(0);
    let reply = call(&mut wire, 6, "troubleshoot", none).await;
    assert_eq!(output(&reply)["similar"], json!([]));
    assert_contains_all(
        &report_text(&wire, &reply),
        &["## Earlier sessions alike\n\nNone found.\n"],
    );
}

#[tokio::test]
async fn a_rating_through_troubleshoot_outcome_reorders_the_next_sessions_suggestions() {
    let mut wire = start();
    wire.initialize(json!({})).await;
    // Two sessions as alike to the next failure: the newer first while neither is rated.
    let older = call(
        &mut wire,
        1,
        "troubleshoot",
        session("Billing crashes on start", "", &["Out of memory"]),
    )
    .await;
    let newer = call(
        &mut wire,
        2,
        "troubleshoot",
        session("Billing crashes on start, again", "", &["A bad config"]),
    )
    .await;
    // Each look is a session too, and more alike to the next: all are shown, and the two
    // compared among themselves.
    let next = || {
        let mut next = session("Billing crashes on start today", "", &["Out of memory"]);
        next["similar_sessions"] = json!(10);
        next
    };
    let (older_id, newer_id) = (
        report(&older)["run_id"].clone(),
        report(&newer)["run_id"].clone(),
    );
    let ids = |reply: &Value| -> Vec<Value> {
        let similar = output(reply)["similar"].as_array().unwrap();
        let two = [&older_id, &newer_id];
        similar
            .iter()
            .map(|s| s["run_id"].clone())
            .filter(|id| two.contains(&id))
            .collect()
    };
    let before = call(&mut wire, 3, "troubleshoot", next()).await;
    assert_eq!(ids(&before), [newer_id.clone(), older_id.clone()]);

    let rated = call(&mut wire, 4, "troubleshoot_outcome",
        json!({ "run_id": older_id, "rating": "fixed", "cause": "Out of memory", "note": "1 GiB limit" })).await;
    assert_eq!(output(&rated)["rating"], "fixed", "{rated}");
    // The rating is appended to the session's report, which the result links.
    let text = std::fs::read_to_string(
        wire.dir
            .path()
            .join(output(&older)["report"].as_str().unwrap()),
    )
    .unwrap();
    assert_contains_all(
        &text,
        &[
            "## Outcome, rated ",
            "- Fix: fixed\n- Cause that proved true: Out of memory\n- Note: 1 GiB limit\n",
        ],
    );
    assert_eq!(output(&rated)["report"], output(&older)["report"]);
    let links = rated["result"]["content"].as_array().unwrap();
    assert!(
        links.iter().any(|c| c["type"] == "resource_link"),
        "{rated}"
    );

    let after = call(&mut wire, 5, "troubleshoot", next()).await;
    assert_eq!(
        ids(&after),
        [older_id.clone(), newer_id.clone()],
        "the fixed one first"
    );
    let similar = output(&after)["similar"].as_array().unwrap();
    let rated = similar.iter().find(|s| s["run_id"] == older_id).unwrap();
    assert_eq!(
        (rated["rating"].clone(), rated["cause"].clone()),
        (json!("fixed"), json!("Out of memory"))
    );

    // The latest rating wins: the fix did not hold after all.
    call(
        &mut wire,
        6,
        "troubleshoot_outcome",
        json!({ "run_id": older_id, "rating": "not_fixed" }),
    )
    .await;
    let latest = call(&mut wire, 7, "troubleshoot", next()).await;
    assert_eq!(ids(&latest), [newer_id.clone(), older_id.clone()]);
    let similar = output(&latest)["similar"].as_array().unwrap();
    let rated = similar.iter().find(|s| s["run_id"] == older_id).unwrap();
    assert_eq!(rated["rating"], "not_fixed");
}

#[tokio::test]
async fn troubleshoot_outcome_refuses_a_run_that_is_no_finished_troubleshoot_session() {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let readiness = call(
        &mut wire,
        1,
        "deployment_readiness",
        readiness("1.0", "production", &[]),
    )
    .await;
    let not_a_session = report(&readiness)["run_id"].clone();
    for (id, run_id) in [(2, json!("no-such-run")), (3, not_a_session)] {
        let reply = call(
            &mut wire,
            id,
            "troubleshoot_outcome",
            json!({ "run_id": run_id, "rating": "fixed" }),
        )
        .await;
        let envelope = &reply["result"]["structuredContent"];
        assert_eq!(envelope["ok"], false, "{reply}");
        assert_eq!(
            envelope["error"]["message"],
            "run failed at node `session_check`"
        );
        let error = &envelope["data"]["nodes"]["session_check"]["error"];
        assert_eq!(error["code"], "invalid_value");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("run_id names a finished troubleshoot session of yours"),
            "{error}"
        );
    }
    // Nothing was rated: a later session alike finds no rating.
    assert!(!wire.dir.path().join("docs/troubleshooting").exists());
}

#[tokio::test]
async fn a_rating_leaves_a_file_that_is_not_the_sessions_report_as_it_is_and_still_counts() {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let earlier = call(
        &mut wire,
        1,
        "troubleshoot",
        session("Billing crashes on start", "", &["Out of memory"]),
    )
    .await;
    let path = wire
        .dir
        .path()
        .join(output(&earlier)["report"].as_str().unwrap());
    // The report was deleted, and another file now stands at its path.
    std::fs::write(&path, "# Someone else's notes\n").unwrap();
    let run_id = report(&earlier)["run_id"].clone();
    let rated = call(
        &mut wire,
        2,
        "troubleshoot_outcome",
        json!({ "run_id": run_id, "rating": "fixed" }),
    )
    .await;
    assert_eq!(output(&rated)["report"], Value::Null, "{rated}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# Someone else's notes\n"
    );
    std::fs::remove_file(&path).unwrap();
    let rated = call(
        &mut wire,
        3,
        "troubleshoot_outcome",
        json!({ "run_id": run_id, "rating": "partly" }),
    )
    .await;
    assert_eq!(output(&rated)["report"], Value::Null, "{rated}");
    assert!(!path.exists(), "no report is made anew");
    let next = call(
        &mut wire,
        4,
        "troubleshoot",
        session("Billing crashes on start today", "", &["Out of memory"]),
    )
    .await;
    assert_eq!(output(&next)["similar"][0]["rating"], "partly");
}

#[tokio::test]
async fn the_person_rates_the_fix_at_the_end_of_a_session_or_leaves_it_for_later() {
    let mut wire = start();
    wire.initialize(json!({ "elicitation": {} })).await;
    let rate = |request: &Value| {
        let message = request["params"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Did the fix for \"Billing crashes on start\" work?"),
            "{message}"
        );
        let rating = &request["params"]["requestedSchema"]["properties"]["rating"];
        assert_eq!(rating["default"], "later");
        json!({ "action": "accept", "content": { "rating": "partly", "note": "better, not gone" } })
    };
    let params = json!({ "name": "troubleshoot", "arguments": session("Billing crashes on start", "", &["Out of memory"]) });
    let reply = wire.request_answering(1, "tools/call", params, &rate).await;
    assert_eq!(
        output(&reply)["outcome"],
        json!({ "rating": "partly", "note": "better, not gone" })
    );
    tokio::time::sleep(Duration::from_millis(3)).await;
    // Declined: the run still succeeds, the rating left for later.
    let decline = |_: &Value| json!({ "action": "decline" });
    let params = json!({ "name": "troubleshoot", "arguments": session("Billing crashes on start once more", "", &["Out of memory"]) });
    let declined = wire
        .request_answering(2, "tools/call", params, &decline)
        .await;
    assert_eq!(
        output(&declined)["outcome"],
        json!({ "rating": "later", "note": "" })
    );
    tokio::time::sleep(Duration::from_millis(3)).await;
    let mut next = session("Billing crashes on start today", "", &["Out of memory"]);
    next["rating"] = json!("later");
    let reply = call(&mut wire, 3, "troubleshoot", next).await;
    let similar = &output(&reply)["similar"];
    assert_eq!(
        similar[0]["rating"], "partly",
        "the rated one first: {similar}"
    );
    assert_eq!(similar[0]["rating_note"], "better, not gone");
    assert_eq!(similar[1]["rating"], Value::Null);
}

#[tokio::test]
async fn the_model_drafts_the_causes_with_the_sessions_alike_in_view_and_the_person_sees_them() {
    let mut wire = start();
    wire.initialize(json!({ "elicitation": {}, "sampling": {} }))
        .await;
    let mut earlier = session(
        "The billing service crashes on start",
        "billing",
        &["Out of memory"],
    );
    earlier["rating"] = json!("fixed");
    earlier["rating_note"] = json!("a 1 GiB limit");
    call(&mut wire, 1, "troubleshoot", earlier).await;

    let client = |request: &Value| match request["method"].as_str() {
        Some("sampling/createMessage") => {
            let draft = json!([{ "cause": "Out of memory", "likelihood": "high", "evidence": "" }]);
            let plan = json!([{ "step": "Read the logs", "expected": "" }]);
            let prompt = request["params"]["messages"][0]["content"]["text"]
                .as_str()
                .unwrap();
            let text = if prompt.contains("List the likely causes") {
                draft
            } else {
                plan
            };
            json!({ "role": "assistant", "model": "m", "content": { "type": "text", "text": text.to_string() } })
        }
        _ => {
            let mut content = serde_json::Map::new();
            for (name, field) in request["params"]["requestedSchema"]["properties"]
                .as_object()
                .unwrap()
            {
                if let Some(default) = field.get("default") {
                    content.insert(name.clone(), default.clone());
                }
            }
            json!({ "action": "accept", "content": content })
        }
    };
    let arguments =
        json!({ "failure": "The billing service crashes on start again", "component": "billing" });
    let params = json!({ "name": "troubleshoot", "arguments": arguments });
    let reply = wire
        .request_answering(2, "tools/call", params, &client)
        .await;
    assert_eq!(output(&reply)["similar"][0]["rating"], "fixed", "{reply}");
    let sample = wire
        .seen
        .iter()
        .find(|m| m["method"] == "sampling/createMessage")
        .unwrap();
    let prompt = sample["params"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert_contains_all(
        prompt,
        &[
            "Component: billing\n",
            "Earlier failures alike, most alike first, with the causes confirmed then and whether the fix worked:\n\
             - The billing service crashes on start (words in common: billing, service, crashes, start); \
             causes: Out of memory; fix: fixed\n",
        ],
    );
    let review = wire
        .seen
        .iter()
        .find(|m| m["method"] == "elicitation/create")
        .unwrap();
    let message = review["params"]["message"].as_str().unwrap();
    assert!(
        message.ends_with(
            "Earlier failures alike: The billing service crashes on start (causes: Out of memory; fix: fixed)."
        ),
        "{message}"
    );
}
