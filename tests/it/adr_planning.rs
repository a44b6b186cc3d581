//! The interactive ADR planner (`workflows/interactive_adr_planning.toml`) end to end, in
//! process: with every answer passed up front, with a client whose model drafts each
//! phase and whose user confirms it, with a client that has no model, and cancelled
//! mid-way. Checks the file it writes, its number, its todos and their tags.

use mcp_task_server::runs::RegistryConfig;
use serde_json::{Value, json};

use crate::support::wire::{Wire, files_in};

fn start() -> Wire {
    Wire::start_in(RegistryConfig::default(), &[])
}

fn adr_dir(wire: &Wire) -> std::path::PathBuf {
    wire.dir.path().join("docs/adrs")
}

fn findings() -> Value {
    json!([{ "source": "incident 42", "insight": "events dropped on deploy", "relevance": "high" }])
}

fn options() -> Value {
    json!([
        { "name": "Queue", "description": "A durable queue in front of billing",
          "pros": ["durable"], "cons": ["ops cost"], "risks": ["new infra"],
          "effort": "medium", "confidence": 80 },
        { "name": "Client retries", "description": "Retry on failure", "pros": ["cheap"],
          "cons": ["lossy"], "effort": "low", "confidence": 40 }
    ])
}

fn impacts() -> Value {
    json!({ "technical": ["a new dependency"], "business": ["no lost revenue"],
        "team": ["on-call for the queue"], "risks": ["queue outage"],
        "dependencies": ["the queue service"] })
}

fn plan() -> Value {
    let long = format!(
        "Switch the producer {}",
        "and check every consumer ".repeat(12)
    );
    json!({ "phases": ["pilot", "rollout"],
        "tasks": [
            { "description": "Provision the queue", "priority": "high", "effort": "2d" },
            { "description": long, "priority": "critical", "effort": "1d", "assignee": "ann" }
        ],
        "timeline": "Q1",
        "successCriteria": ["no lost events for a month"] })
}

/// Every phase's answer, as a plain tool-calling agent passes them.
fn all_answers(title: &str) -> Value {
    json!({ "title": title, "problem": "Billing events are lost when billing restarts.",
        "findings": findings(), "options": options(),
        "decision": { "name": "Queue", "rationale": "Durability matters most",
                      "tradeoffs": ["more to operate"] },
        "impacts": impacts(), "plan": plan() })
}

fn call(arguments: Value) -> Value {
    json!({ "name": "interactive_adr_planning", "arguments": arguments,
        "_meta": { "progressToken": "adr" } })
}

fn todos(wire: &Wire) -> Vec<(String, Vec<String>)> {
    let store = wire.registry.store();
    let all = store.list_todos(&Default::default()).unwrap();
    all.into_iter().map(|t| (t.title, t.tags)).collect()
}

#[tokio::test]
async fn with_every_answer_up_front_it_asks_nothing_and_writes_the_next_numbered_adr() {
    let mut wire = start();
    let dir = adr_dir(&wire);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("0007-earlier.md"), "# 7").unwrap();
    std::fs::write(dir.join("0012-later.md"), "# 12").unwrap();
    std::fs::write(dir.join("00123-not-four-digits.md"), "x").unwrap();
    std::fs::write(dir.join("README.md"), "x").unwrap();
    wire.initialize(json!({})).await;

    let reply = wire
        .request(
            1,
            "tools/call",
            call(all_answers("Use a queue for billing")),
        )
        .await;
    let result = &reply["result"];
    assert_eq!(result["isError"], false, "{reply}");
    let output = &result["structuredContent"]["data"]["output"];
    assert_eq!(output["adr"], "docs/adrs/0013-use-a-queue-for-billing.md");
    assert_eq!(output["number"], 13);
    let asked = wire.seen.iter().filter(|m| m.get("id").is_some()).count();
    assert_eq!(asked, 0, "nothing is asked: {:?}", wire.seen);

    let adr = std::fs::read_to_string(dir.join("0013-use-a-queue-for-billing.md")).unwrap();
    for section in [
        "# 0013. Use a queue for billing\n",
        "- Status: Proposed\n",
        "## Context\n\nBilling events are lost when billing restarts.\n",
        "- **incident 42** (high relevance): events dropped on deploy\n",
        "## Decision\n\nWe choose **Queue**.\n\nDurability matters most\n",
        "- more to operate\n",
        "## Considered Options\n",
        "### Queue (chosen)\n",
        "### Client retries\n",
        "- Effort: medium\n- Confidence: 80%\n",
        "- Cons:\n  - lossy\n",
        "## Consequences\n",
        "### Technical\n\n- a new dependency\n",
        "### Dependencies\n\n- the queue service\n",
        "## Implementation Plan\n",
        "1. pilot\n2. rollout\n",
        "- [ ] Provision the queue (priority: high, effort: 2d)\n",
        "assignee: ann)\n",
        "### Timeline\n\nQ1\n",
        "### Success Criteria\n\n- no lost events for a month\n",
        "## References\n\n- incident 42\n",
        "## Revision History\n",
    ] {
        assert!(adr.contains(section), "{section:?} in:\n{adr}");
    }

    // A todo per planned task, tagged with the ADR's number and the task's priority; a
    // description longer than a todo title may be is cut with a visible marker.
    let made = todos(&wire);
    assert_eq!(made.len(), 2, "{made:?}");
    assert_eq!(made[0].0, "Provision the queue");
    assert_eq!(made[0].1, ["adr-0013", "priority:high"]);
    assert!(made[1].0.ends_with('…') && made[1].0.chars().count() <= 200);
    assert_eq!(made[1].1, ["adr-0013", "priority:critical"]);

    // The result links to the file beside the structured data.
    let link = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "resource_link")
        .expect("a resource link");
    assert_eq!(link["name"], "0013-use-a-queue-for-billing.md");
    assert!(link["uri"].as_str().unwrap().starts_with("file:///"));
    assert!(
        link["uri"]
            .as_str()
            .unwrap()
            .ends_with("/docs/adrs/0013-use-a-queue-for-billing.md")
    );
    assert_eq!(link["mimeType"], "text/markdown");

    // Progress counts the seven phases, not the 26 nodes.
    wire.await_seen(|m| {
        m["method"] == "notifications/progress" && m["params"]["progress"].as_f64() == Some(7.0)
    })
    .await;
    let totals: Vec<&Value> = wire
        .seen
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| &m["params"]["total"])
        .collect();
    assert!(totals.iter().all(|t| t.as_f64() == Some(7.0)), "{totals:?}");
}

#[tokio::test]
async fn an_answer_passed_up_front_that_misfits_its_phase_fails_the_run_naming_every_problem() {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let mut answers = all_answers("Bad options");
    answers["options"] = json!([{ "name": "", "effort": "huge", "confidence": 101 }]);
    let reply = wire.request(1, "tools/call", call(answers)).await;
    let result = &reply["result"];
    assert_eq!(result["isError"], true);
    let node = &result["structuredContent"]["data"]["nodes"]["options"];
    assert_eq!(node["status"], "failed");
    let message = node["error"]["message"].as_str().unwrap();
    for problem in [
        "`[0].name`: must be at least 1 UTF-16 code unit long (got 0)",
        "`[0].effort`: must be one of",
        "`[0].confidence`: must be an integer from 0 to 100 (got 101)",
        "`[0].description`: is required",
    ] {
        assert!(message.contains(problem), "{problem} in {message}");
    }
    assert!(files_in(&adr_dir(&wire)).is_empty());
    assert!(todos(&wire).is_empty());
}

#[tokio::test]
async fn titles_that_clean_to_nothing_or_try_to_escape_make_safe_file_names() {
    let mut wire = start();
    wire.initialize(json!({})).await;
    let titles = [
        ("../../etc/passwd", "0001-etc-passwd.md"),
        ("日本語 / 🚀", "0002-decision.md"),
        ("Über Çaching: a/b", "0003-uber-caching-a-b.md"),
    ];
    for (i, (title, _)) in titles.iter().enumerate() {
        let mut answers = all_answers(title);
        answers["plan"]["tasks"] = json!([]);
        let reply = wire
            .request(i as i64 + 1, "tools/call", call(answers))
            .await;
        assert_eq!(reply["result"]["isError"], false, "{reply}");
    }
    let expected: Vec<&str> = titles.iter().map(|(_, file)| *file).collect();
    assert_eq!(files_in(&adr_dir(&wire)), expected);
    assert!(!wire.dir.path().join("etc").exists());
}

/// The model's drafts, by what the prompt asks for, as a model writes them: fenced.
fn draft(prompt: &str) -> String {
    let data = if prompt.contains("research findings") {
        findings()
    } else if prompt.contains("List two to five options") {
        options()
    } else if prompt.contains("Assess the decision's impacts") {
        impacts()
    } else {
        plan()
    };
    format!("Here is the draft:\n```json\n{data}\n```")
}

/// A user who confirms every draft as it is, and chooses the first option.
fn confirm(form: &Value) -> Value {
    let mut content = serde_json::Map::new();
    for (name, field) in form["requestedSchema"]["properties"].as_object().unwrap() {
        let value = match name.as_str() {
            "statement" => json!("Billing events are lost when billing restarts."),
            "choice" => field["enum"][0].clone(),
            "rationale" => json!("Durability matters most"),
            "tradeoffs" => json!("more to operate\n\nslower deploys"),
            "text" => json!(draft(form["message"].as_str().unwrap())),
            _ => field["default"].clone(),
        };
        content.insert(name.clone(), value);
    }
    json!({ "action": "accept", "content": content })
}

fn client(request: &Value) -> Value {
    match request["method"].as_str() {
        Some("sampling/createMessage") => {
            let prompt = request["params"]["messages"][0]["content"]["text"]
                .as_str()
                .unwrap();
            json!({ "role": "assistant", "model": "test-model", "stopReason": "endTurn",
                "content": { "type": "text", "text": draft(prompt) } })
        }
        _ => confirm(&request["params"]),
    }
}

#[tokio::test]
async fn the_model_drafts_each_phase_the_user_confirms_it_and_decides() {
    let mut wire = start();
    let dir = adr_dir(&wire);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("0002-use-sqlite.md"),
        "# 0002. Use SQLite\n\nOne file.\n",
    )
    .unwrap();
    wire.initialize(json!({ "elicitation": {}, "sampling": {} }))
        .await;
    let reply = wire
        .request_answering(1, "tools/call", call(json!({ "title": "Queue" })), &client)
        .await;
    let result = &reply["result"];
    assert_eq!(result["isError"], false, "{reply}");
    let asked: Vec<&str> = wire
        .seen
        .iter()
        .filter(|m| m.get("id").is_some())
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert_eq!(
        asked,
        [
            "elicitation/create",     // the problem
            "sampling/createMessage", // research
            "elicitation/create",
            "sampling/createMessage", // options
            "elicitation/create",
            "elicitation/create",     // the decision
            "sampling/createMessage", // impacts
            "elicitation/create",
            "sampling/createMessage", // the plan
            "elicitation/create",
        ]
    );
    // The decision is chosen among the options on the table, and its form is flat.
    let decision = wire
        .seen
        .iter()
        .filter(|m| m["method"] == "elicitation/create")
        .nth(3)
        .unwrap();
    let choice = &decision["params"]["requestedSchema"]["properties"]["choice"];
    assert_eq!(choice["enum"], json!(["Queue", "Client retries"]));
    // A draft's field is text for the client; the schema it is checked against is not sent.
    let review = &wire
        .seen
        .iter()
        .find(|m| {
            m["method"] == "elicitation/create"
                && m["params"]["requestedSchema"]["properties"]
                    .get("findings")
                    .is_some()
        })
        .unwrap();
    let field = &review["params"]["requestedSchema"]["properties"]["findings"];
    assert_eq!(field["type"], "string");
    assert_eq!(field.get("contentSchema"), None);

    let data = &result["structuredContent"]["data"]["output"];
    assert_eq!(data["decision"]["name"], "Queue");
    assert_eq!(
        data["decision"]["tradeoffs"],
        json!(["more to operate", "slower deploys"])
    );
    assert_eq!(data["findings"], findings());
    assert_eq!(data["adr"], "docs/adrs/0003-queue.md");
    // The research draws on the ADRs already there.
    let research = wire
        .seen
        .iter()
        .find(|m| m["method"] == "sampling/createMessage")
        .unwrap();
    let prompt = research["params"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(
        prompt.contains("docs/adrs/0002-use-sqlite.md\n# 0002. Use SQLite"),
        "{prompt}"
    );
    assert_eq!(todos(&wire).len(), 2);
}

#[tokio::test]
async fn without_a_model_the_user_writes_each_draft() {
    let mut wire = start();
    wire.initialize(json!({ "elicitation": {} })).await;
    let reply = wire
        .request_answering(1, "tools/call", call(json!({ "title": "Queue" })), &client)
        .await;
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    let methods: Vec<&str> = wire
        .seen
        .iter()
        .filter(|m| m.get("id").is_some())
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert!(
        methods.iter().all(|m| *m == "elicitation/create"),
        "{methods:?}"
    );
    assert_eq!(methods.len(), 10);
    let first_draft = wire
        .seen
        .iter()
        .find(|m| {
            m["params"]["requestedSchema"]["properties"]
                .get("text")
                .is_some()
        })
        .expect("a draft asked of the user");
    let message = first_draft["params"]["message"].as_str().unwrap();
    assert!(message.contains("List the research findings"), "{message}");
    let output = &reply["result"]["structuredContent"]["data"]["output"];
    assert_eq!(output["options"], options());
}

#[tokio::test]
async fn a_run_cancelled_before_its_last_phase_leaves_no_adr_and_no_todos() {
    let mut wire = start();
    wire.initialize(json!({ "elicitation": {} })).await;
    let params = json!({ "name": "interactive_adr_planning",
        "arguments": { "title": "Queue" }, "task": { "ttl": 60000 } });
    let created = wire.request(1, "tools/call", params).await;
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    wire.poll_until(2, json!({ "taskId": task_id }), "input_required")
        .await;
    let cancelled = wire
        .request(3, "tasks/cancel", json!({ "taskId": task_id }))
        .await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert!(files_in(&adr_dir(&wire)).is_empty());
    assert!(todos(&wire).is_empty());
}

#[tokio::test]
async fn a_corrected_draft_that_misfits_its_phase_is_asked_again_and_the_fitting_one_is_taken() {
    let mut wire = start();
    wire.initialize(json!({ "elicitation": {}, "sampling": {} }))
        .await;
    let reviews = std::sync::atomic::AtomicUsize::new(0);
    let answer = |request: &Value| {
        let form = &request["params"]["requestedSchema"]["properties"];
        if form.get("findings").is_some()
            && reviews.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0
        {
            // A relevance the phase does not know.
            let wrong = json!([{ "source": "s", "insight": "i", "relevance": "huge" }]);
            return json!({ "action": "accept", "content": { "findings": wrong.to_string() } });
        }
        client(request)
    };
    let reply = wire
        .request_answering(1, "tools/call", call(json!({ "title": "Queue" })), &answer)
        .await;
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert_eq!(
        reviews.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "asked again once"
    );
    let output = &reply["result"]["structuredContent"]["data"]["output"];
    assert_eq!(output["findings"], findings());
}
