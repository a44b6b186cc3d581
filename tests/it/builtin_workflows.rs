//! The built-in workflows beside the ADR planner (which `adr_planning.rs` covers) end to
//! end, in process, over a raw JSON-RPC wire: each with every answer passed up front
//! (nothing asked), and each with a 2025-11-25 client whose model and user answer a plain
//! `tools/call`. Checks the reports they write, the todos they make and their tags.

use mcp_task_server::runs::RegistryConfig;
use serde_json::{Value, json};

use crate::support::assert_contains_all;
use crate::support::wire::{Wire, files_in};

fn start() -> Wire {
    Wire::start_in(RegistryConfig::default(), &[])
}

fn call(workflow: &str, arguments: Value) -> Value {
    json!({ "name": workflow, "arguments": arguments, "_meta": { "progressToken": workflow } })
}

fn todos(wire: &Wire) -> Vec<(i64, String, Vec<String>)> {
    let store = wire.registry.store();
    let all = store.list_todos(&Default::default()).unwrap();
    all.into_iter().map(|t| (t.id, t.title, t.tags)).collect()
}

/// The methods of the requests the server sent the client, in order.
fn asked(wire: &Wire) -> Vec<&str> {
    wire.seen
        .iter()
        .filter(|m| m.get("id").is_some())
        .filter_map(|m| m["method"].as_str())
        .collect()
}

/// The requests the server sent the client with `method`, in order.
fn requests<'w>(wire: &'w Wire, method: &str) -> Vec<&'w Value> {
    wire.seen.iter().filter(|m| m["method"] == method).collect()
}

/// The run's output, after checking that the call succeeded.
fn output(reply: &Value) -> &Value {
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    &reply["result"]["structuredContent"]["data"]["output"]
}

/// The report a run wrote, at the path its output names, after checking that the result
/// links to it and that its name ends with a `YYYY-MM-DD` date (and maybe a `-N`).
fn report(wire: &Wire, reply: &Value) -> (String, String) {
    let path = output(reply)["report"].as_str().unwrap().to_owned();
    let name = path.rsplit('/').next().unwrap();
    let link = reply["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "resource_link")
        .unwrap_or_else(|| panic!("a resource link in {reply}"));
    assert_eq!(link["name"], name);
    assert!(link["uri"].as_str().unwrap().ends_with(&format!("/{path}")));
    assert_eq!(link["mimeType"], "text/markdown");
    let text = std::fs::read_to_string(wire.dir.path().join(&path)).unwrap();
    (path, text)
}

/// The `YYYY-MM-DD` in `text` right after `marker`.
fn date_after<'t>(text: &'t str, marker: &str) -> &'t str {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} in {text}"))
        + marker.len();
    let date = &text[start..start + 10];
    let shape = date.bytes().enumerate().all(|(i, b)| match i {
        4 | 7 => b == b'-',
        _ => b.is_ascii_digit(),
    });
    assert!(shape, "{date:?} is a date");
    date
}

/// A reply of the client's model.
fn model_says(text: &str) -> Value {
    json!({ "role": "assistant", "model": "test-model", "stopReason": "endTurn",
        "content": { "type": "text", "text": text } })
}

fn prompt_of(request: &Value) -> &str {
    request["params"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
}

/// A user who accepts every field as it is pre-filled, and leaves the others empty.
fn accept_defaults(form: &Value) -> Value {
    let mut content = serde_json::Map::new();
    for (name, field) in form["requestedSchema"]["properties"].as_object().unwrap() {
        if let Some(default) = field.get("default") {
            content.insert(name.clone(), default.clone());
        }
    }
    json!({ "action": "accept", "content": content })
}

// ── deployment_readiness ───────────────────────────────────────────────────────────────

fn result(check: &str, passed: bool, note: &str) -> Value {
    json!({ "check": check, "passed": passed, "note": note })
}

/// The six default checks, two of them failed.
fn readiness_results() -> Value {
    json!([
        result("Tests pass", true, "412 passed"),
        result("Migrations reviewed", false, "0042 is not reviewed"),
        { "check": "Rollback plan ready", "passed": true },
        result("Monitoring and alerts in place", true, ""),
        result("On-call engineer assigned", false, "nobody this week"),
        result("Changelog updated", true, "")
    ])
}

#[tokio::test]
async fn readiness_with_every_result_up_front_asks_nothing_and_files_a_blocker_per_failed_check() {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let arguments = json!({ "version": "1.4.0", "results": readiness_results(), "threshold": 60 });
    let reply = wire
        .request(1, "tools/call", call("deployment_readiness", arguments))
        .await;
    let out = output(&reply);
    assert_eq!(asked(&wire), Vec::<&str>::new(), "nothing is asked");

    // 4 of 6 is 66.7 %: above a 60 % threshold, shown rounded down.
    assert_eq!(
        out["score"],
        json!({ "passed": 4, "total": 6, "percent": 66, "threshold": 60, "ready": true })
    );
    assert_eq!(out["ready"], true);
    assert_eq!(
        out["blockers"],
        json!(["Migrations reviewed", "On-call engineer assigned"])
    );

    let (path, text) = report(&wire, &reply);
    let date = date_after(&text, "- Date: ");
    assert_eq!(path, format!("docs/releases/1-4-0-readiness-{date}.md"));
    assert_contains_all(
        &text,
        &[
            "# Deployment readiness: 1.4.0\n",
            "- Environment: production\n",
            "- Verdict: **Ready**\n",
            "- Score: 4 of 6 checks passed (66%; threshold 60%)\n",
            "## Checks\n\n- [x] **Tests pass**: 412 passed\n",
            "- [ ] **Migrations reviewed**: 0042 is not reviewed\n",
            "- [x] **Rollback plan ready**\n",
            "- [x] **Changelog updated**\n",
            "## Blockers\n",
            "- Migrations reviewed: 0042 is not reviewed (todo #1)\n",
            "- On-call engineer assigned: nobody this week (todo #2)\n",
        ],
    );

    let tags = vec!["release-1.4.0".to_owned(), "blocker".to_owned()];
    assert_eq!(
        todos(&wire),
        [
            (
                1,
                "1.4.0 blocker: Migrations reviewed".to_owned(),
                tags.clone()
            ),
            (
                2,
                "1.4.0 blocker: On-call engineer assigned".to_owned(),
                tags
            ),
        ]
    );

    // Progress counts the five phases.
    wire.await_seen(|m| {
        m["method"] == "notifications/progress" && m["params"]["progress"].as_f64() == Some(5.0)
    })
    .await;
    let totals = wire
        .seen
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["total"].as_f64());
    assert!(totals.into_iter().all(|t| t == Some(5.0)));
}

#[tokio::test]
async fn readiness_below_its_threshold_is_not_ready_and_every_passed_check_makes_no_todo() {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let arguments = json!({ "version": "2.0", "checks": ["Tests pass", "Changelog updated"],
        "results": [result("Tests pass", true, ""), result("Changelog updated", false, "")] });
    let reply = wire
        .request(1, "tools/call", call("deployment_readiness", arguments))
        .await;
    let out = output(&reply);
    assert_eq!(out["score"]["percent"], 50);
    assert_eq!(out["ready"], false, "the default threshold is 100 %");
    let (_, text) = report(&wire, &reply);
    assert_contains_all(&text, &["- Verdict: **Not ready**\n", "threshold 100%"]);

    let arguments = json!({ "version": "2.1", "checks": ["Tests pass"],
        "results": [result("Tests pass", true, "")] });
    let reply = wire
        .request(2, "tools/call", call("deployment_readiness", arguments))
        .await;
    assert_eq!(output(&reply)["ready"], true);
    let (_, text) = report(&wire, &reply);
    assert_contains_all(&text, &["## Blockers\n\nNone: every check passed.\n"]);
    assert_eq!(todos(&wire).len(), 1, "{:?}", todos(&wire));
}

#[tokio::test]
async fn readiness_checked_again_the_same_day_writes_a_second_report_and_keeps_open_blockers() {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let first = wire
        .request(
            1,
            "tools/call",
            call(
                "deployment_readiness",
                json!({ "version": "1.4.0", "results": readiness_results() }),
            ),
        )
        .await;
    let (first_path, _) = report(&wire, &first);

    // The on-call check now passes; the changelog has since been found wanting.
    let mut results = readiness_results();
    results[4] = result("On-call engineer assigned", true, "ann");
    results[5] = result("Changelog updated", false, "no entry for #77");
    let second = wire
        .request(
            2,
            "tools/call",
            call(
                "deployment_readiness",
                json!({ "version": "1.4.0", "results": results }),
            ),
        )
        .await;
    let (second_path, text) = report(&wire, &second);
    assert_eq!(
        second_path,
        first_path.replace(".md", "-2.md"),
        "the first report is kept"
    );
    assert_eq!(
        files_in(&wire.dir.path().join("docs/releases")).len(),
        2,
        "two reports"
    );
    // The migrations blocker is still open from the first check: no second todo for it.
    assert_contains_all(
        &text,
        &[
            "- Migrations reviewed: 0042 is not reviewed (todo #1)\n",
            "- Changelog updated: no entry for #77 (todo #3)\n",
        ],
    );
    let titles: Vec<String> = todos(&wire).into_iter().map(|(_, t, _)| t).collect();
    assert_eq!(
        titles,
        [
            "1.4.0 blocker: Migrations reviewed",
            "1.4.0 blocker: On-call engineer assigned",
            "1.4.0 blocker: Changelog updated"
        ]
    );
    assert_eq!(output(&second)["todos"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn readiness_asks_the_person_one_flat_form_per_check_the_agent_left_open() {
    let mut wire = start();
    wire.initialize(json!({ "elicitation": {}, "sampling": {} }))
        .await;
    let answer = |request: &Value| {
        let message = request["params"]["message"].as_str().unwrap();
        match message.contains("Migrations reviewed") {
            true => json!({ "action": "accept",
                "content": { "passed": false, "note": "two not reviewed" } }),
            false => json!({ "action": "accept", "content": { "passed": true } }),
        }
    };
    let arguments = json!({ "version": "3.0.0", "environment": "staging",
        "results": [result("Tests pass", true, "all green"), result("Changelog updated", true, "")] });
    let reply = wire
        .request_answering(
            1,
            "tools/call",
            call("deployment_readiness", arguments),
            &answer,
        )
        .await;
    let out = output(&reply);
    assert_eq!(asked(&wire), ["elicitation/create"; 4]);
    let messages: Vec<&str> = wire
        .seen
        .iter()
        .filter(|m| m["method"] == "elicitation/create")
        .map(|m| m["params"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages[0],
        "Release 3.0.0 to staging, check 1 of 4: Migrations reviewed. Did it pass?"
    );
    assert!(messages[3].contains("check 4 of 4: On-call engineer assigned"));
    let form = &requests(&wire, "elicitation/create")[0]["params"]["requestedSchema"];
    assert_eq!(form["properties"]["passed"]["type"], "boolean");
    assert_eq!(form["properties"]["note"]["type"], "string");
    assert_eq!(form["required"], json!(["passed"]));

    // The results keep the order of the checks, whoever answered them.
    assert_eq!(
        out["results"],
        json!([
            result("Tests pass", true, "all green"),
            result("Migrations reviewed", false, "two not reviewed"),
            result("Rollback plan ready", true, ""),
            result("Monitoring and alerts in place", true, ""),
            result("On-call engineer assigned", true, ""),
            result("Changelog updated", true, "")
        ])
    );
    assert_eq!(out["ready"], false);
    let made = todos(&wire);
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].1, "3.0.0 blocker: Migrations reviewed");
    assert_eq!(made[0].2, ["release-3.0.0", "blocker"]);
}

#[tokio::test]
async fn readiness_with_a_threshold_out_of_range_fails_before_asking_or_writing_anything() {
    let mut wire = start();
    wire.initialize(json!({ "elicitation": {} })).await;
    let reply = wire
        .request(
            1,
            "tools/call",
            call(
                "deployment_readiness",
                json!({ "version": "1.0", "threshold": 101, "results": readiness_results() }),
            ),
        )
        .await;
    let result = &reply["result"];
    assert_eq!(result["isError"], true, "{reply}");
    let node = &result["structuredContent"]["data"]["nodes"]["threshold"];
    let message = node["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("must be an integer from 0 to 100 (got 101)"),
        "{message}"
    );
    assert!(!wire.dir.path().join("docs/releases").exists());
    assert!(todos(&wire).is_empty());
}

// ── troubleshoot ───────────────────────────────────────────────────────────────────────

fn hypotheses() -> Value {
    json!([
        { "cause": "A stale config cache", "likelihood": "low", "evidence": "" },
        { "cause": "Out of memory", "likelihood": "high", "evidence": "exit code 137" },
        { "cause": "A slow migration", "likelihood": "medium", "evidence": "2.3 migrates" }
    ])
}

fn test_plan() -> Value {
    json!([
        { "step": "Read the pod's events", "expected": "OOMKilled" },
        { "step": "Start it with a 1 GiB limit", "expected": "" }
    ])
}

const FAILURE: &str =
    "The billing service crashes on start after the 2.3 upgrade\nIt exits with code 137.";

#[tokio::test]
async fn troubleshooting_with_every_answer_up_front_asks_nothing_and_files_a_todo_per_step() {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let arguments = json!({ "failure": FAILURE, "context": "Kubernetes, 512 MiB limit",
        "hypotheses": hypotheses(), "plan": test_plan() });
    let reply = wire
        .request(1, "tools/call", call("troubleshoot", arguments))
        .await;
    let out = output(&reply);
    assert_eq!(asked(&wire), Vec::<&str>::new(), "nothing is asked");
    // The name comes from the failure's first line; the tag fits in 40 characters.
    assert_eq!(
        out["title"],
        "The billing service crashes on start after the 2.3 upgrade"
    );
    assert_eq!(out["tag"], "troubleshoot-the-billing-service-crashes");

    let (path, text) = report(&wire, &reply);
    let date = date_after(&text, "- Date: ");
    assert_eq!(
        path,
        format!("docs/troubleshooting/{date}-the-billing-service-crashes.md")
    );
    assert_contains_all(
        &text,
        &[
            "# Troubleshooting: The billing service crashes on start after the 2.3 upgrade\n",
            "## Failure\n\nThe billing service crashes on start after the 2.3 upgrade\nIt exits with code 137.\n",
            "### Context\n\nKubernetes, 512 MiB limit\n",
            // Most likely first, whatever the order given.
            "## Likely causes\n\n- **Out of memory** (high likelihood): exit code 137\n\
             - **A slow migration** (medium likelihood): 2.3 migrates\n\
             - **A stale config cache** (low likelihood)\n",
            "## Test plan\n\n1. [ ] Read the pod's events\n   - Expected if the cause holds: OOMKilled\n\
             2. [ ] Start it with a 1 GiB limit\n",
        ],
    );

    let tag = vec!["troubleshoot-the-billing-service-crashes".to_owned()];
    assert_eq!(
        todos(&wire),
        [
            (
                1,
                "Step 1: Read the pod's events (expect: OOMKilled)".to_owned(),
                tag.clone()
            ),
            (2, "Step 2: Start it with a 1 GiB limit".to_owned(), tag),
        ]
    );
}

/// The client of an interactive troubleshooting: the model drafts, the user describes
/// the failure and confirms each draft.
fn troubleshooting_client(request: &Value) -> Value {
    match request["method"].as_str() {
        Some("sampling/createMessage") => {
            let prompt = prompt_of(request);
            let draft = match prompt.contains("List the likely causes") {
                true => hypotheses(),
                false => test_plan(),
            };
            model_says(&format!("```json\n{draft}\n```"))
        }
        _ => {
            let form = &request["params"];
            match form["requestedSchema"]["properties"].get("description") {
                Some(_) => json!({ "action": "accept", "content": {
                    "description": "Login fails with a 502 after the proxy change",
                    "context": "nginx 1.27" } }),
                None => accept_defaults(form),
            }
        }
    }
}

#[tokio::test]
async fn troubleshooting_drafts_causes_and_a_test_plan_that_the_person_confirms() {
    let mut wire = start();
    wire.initialize(json!({ "elicitation": {}, "sampling": {} }))
        .await;
    let reply = wire
        .request_answering(
            1,
            "tools/call",
            call("troubleshoot", json!({})),
            &troubleshooting_client,
        )
        .await;
    let out = output(&reply);
    assert_eq!(
        asked(&wire),
        [
            "elicitation/create",     // the failure
            "sampling/createMessage", // the causes
            "elicitation/create",
            "sampling/createMessage", // the test plan
            "elicitation/create",
            "elicitation/create", // whether the fix worked
        ]
    );
    let samples: Vec<&str> = wire
        .seen
        .iter()
        .filter(|m| m["method"] == "sampling/createMessage")
        .map(prompt_of)
        .collect();
    assert!(samples[0].contains("Login fails with a 502") && samples[0].contains("nginx 1.27"));
    assert!(
        samples[1].contains("Out of memory"),
        "the plan is drafted from the confirmed causes: {}",
        samples[1]
    );
    // A draft's field is text for the client; its schema stays on the server.
    let review = &requests(&wire, "elicitation/create")[1]["params"]["requestedSchema"]["properties"]
        ["hypotheses"];
    assert_eq!(review["type"], "string");
    assert_eq!(review.get("contentSchema"), None);

    assert_eq!(out["hypotheses"], hypotheses());
    assert_eq!(out["plan"], test_plan());
    // The person left the rating at its default, for later.
    assert_eq!(out["outcome"], json!({ "rating": "later", "note": "" }));
    assert_eq!(out["tag"], "troubleshoot-login-fails-with-a-502");
    let (_, text) = report(&wire, &reply);
    assert_contains_all(
        &text,
        &[
            "# Troubleshooting: Login fails with a 502 after the proxy change\n",
            "### Context\n\nnginx 1.27\n",
        ],
    );
    let made = todos(&wire);
    assert_eq!(made.len(), 2);
    assert!(
        made.iter()
            .all(|(_, _, tags)| tags == &["troubleshoot-login-fails-with-a-502"])
    );
}

// ── research ───────────────────────────────────────────────────────────────────────────

const QUESTION: &str = "Which queue suits billing events?";

const SUBQUESTIONS: [&str; 3] = [
    "How long does each queue keep events?",
    "What does each cost at our volume?",
    "What would we have to operate?",
];

fn subquestions() -> Value {
    json!(SUBQUESTIONS)
}

fn answer_to(subquestion: &str) -> String {
    format!("The answer to \u{201c}{subquestion}\u{201d}.")
}

#[tokio::test]
async fn research_with_every_answer_up_front_asks_nothing_and_reports_each_answer() {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let answers: Vec<Value> = SUBQUESTIONS
        .iter()
        .map(|q| json!({ "question": q, "answer": answer_to(q) }))
        .collect();
    let arguments = json!({ "question": QUESTION, "subquestions": subquestions(),
        "answers": answers, "synthesis": "Use the managed queue." });
    let reply = wire
        .request(1, "tools/call", call("research", arguments))
        .await;
    let out = output(&reply);
    assert_eq!(asked(&wire), Vec::<&str>::new(), "nothing is asked");
    assert_eq!(out["findings"], json!(answers));

    let (path, text) = report(&wire, &reply);
    let date = date_after(&text, "- Date: ");
    assert_eq!(
        path,
        format!("docs/research/{date}-which-queue-suits-billing-events.md")
    );
    assert_contains_all(
        &text,
        &[
            "# Research: Which queue suits billing events?\n",
            "## Synthesis\n\nUse the managed queue.\n",
            "### 1. How long does each queue keep events?\n\n\
             The answer to \u{201c}How long does each queue keep events?\u{201d}.\n",
            "### 2. What does each cost at our volume?\n",
            "### 3. What would we have to operate?\n\n\
             The answer to \u{201c}What would we have to operate?\u{201d}.\n",
        ],
    );
    assert!(todos(&wire).is_empty());
}

/// The client of an interactive research: its model drafts the sub-questions, answers
/// each, and synthesises; its user confirms the sub-questions as drafted.
fn research_client(request: &Value) -> Value {
    if request["method"] != "sampling/createMessage" {
        return accept_defaults(&request["params"]);
    }
    let prompt = prompt_of(request);
    if prompt.contains("Split the question") {
        model_says(&format!("Here they are:\n{}", subquestions()))
    } else if let Some((_, sub)) = prompt.split_once("Answer this sub-question of it: ") {
        model_says(&answer_to(sub.trim()))
    } else {
        model_says("Overall: the managed queue.")
    }
}

#[tokio::test]
async fn research_fans_the_sub_questions_out_to_the_model_then_synthesises_its_answers() {
    let mut wire = start();
    wire.initialize(json!({ "elicitation": {}, "sampling": {} }))
        .await;
    let reply = wire
        .request_answering(
            1,
            "tools/call",
            call(
                "research",
                json!({ "question": QUESTION, "context": "EU only" }),
            ),
            &research_client,
        )
        .await;
    let out = output(&reply);
    let methods = asked(&wire);
    assert_eq!(
        methods[..2],
        ["sampling/createMessage", "elicitation/create"]
    );
    assert_eq!(methods[2..], ["sampling/createMessage"; 4]);

    // One sample per sub-question, each with the question and its context.
    let prompts: Vec<&str> = wire
        .seen
        .iter()
        .filter(|m| m["method"] == "sampling/createMessage")
        .map(prompt_of)
        .collect();
    let mut fanned: Vec<&str> = prompts[1..4]
        .iter()
        .map(|p| {
            assert!(
                p.contains(QUESTION) && p.contains("Context: EU only"),
                "{p}"
            );
            p.split_once("Answer this sub-question of it: ")
                .unwrap()
                .1
                .trim()
        })
        .collect();
    fanned.sort_unstable();
    let mut expected = SUBQUESTIONS;
    expected.sort_unstable();
    assert_eq!(fanned, expected);
    // The synthesis is asked with every answer.
    for q in SUBQUESTIONS {
        assert!(prompts[4].contains(&answer_to(q)), "{}", prompts[4]);
    }

    assert_eq!(out["subquestions"], subquestions());
    assert_eq!(out["synthesis"], "Overall: the managed queue.");
    let (_, text) = report(&wire, &reply);
    assert_contains_all(
        &text,
        &[
            "## Context\n\nEU only\n",
            "## Synthesis\n\nOverall: the managed queue.\n",
            "### 2. What does each cost at our volume?\n\n\
             The answer to \u{201c}What does each cost at our volume?\u{201d}.\n",
        ],
    );
}

#[tokio::test]
async fn research_without_a_model_has_the_person_answer_each_sub_question() {
    let mut wire = start();
    wire.initialize(json!({ "elicitation": {} })).await;
    let person = |request: &Value| {
        let message = request["params"]["message"].as_str().unwrap();
        let text = match message.split_once("Answer this sub-question of it: ") {
            Some((_, sub)) => answer_to(sub.trim()),
            None if message.contains("Split the question") => subquestions().to_string(),
            None => "Overall: the managed queue.".to_owned(),
        };
        match request["params"]["requestedSchema"]["properties"].get("text") {
            Some(_) => json!({ "action": "accept", "content": { "text": text } }),
            None => accept_defaults(&request["params"]),
        }
    };
    let reply = wire
        .request_answering(
            1,
            "tools/call",
            call("research", json!({ "question": QUESTION })),
            &person,
        )
        .await;
    let out = output(&reply);
    // The draft, its confirmation, three answers and the synthesis: all the person's.
    assert_eq!(asked(&wire), ["elicitation/create"; 6]);
    let answers: Vec<&str> = out["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["answer"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = SUBQUESTIONS.iter().map(|q| answer_to(q)).collect();
    assert_eq!(answers, expected);
}

#[tokio::test]
async fn research_puts_to_the_model_only_the_sub_questions_left_unanswered() {
    let mut wire = start();
    wire.initialize(json!({ "sampling": {} })).await;
    let arguments = json!({ "question": QUESTION, "subquestions": subquestions(),
        "answers": [{ "question": "What does each cost at our volume?", "answer": "Little." }],
        "synthesis": "Use the managed queue." });
    let reply = wire
        .request_answering(
            1,
            "tools/call",
            call("research", arguments),
            &research_client,
        )
        .await;
    let out = output(&reply);
    assert_eq!(asked(&wire), ["sampling/createMessage"; 2]);
    // In the order of the sub-questions, whoever answered them.
    assert_eq!(
        out["findings"],
        json!([
            { "question": "How long does each queue keep events?",
              "answer": answer_to("How long does each queue keep events?") },
            { "question": "What does each cost at our volume?", "answer": "Little." },
            { "question": "What would we have to operate?",
              "answer": answer_to("What would we have to operate?") }
        ])
    );
}
