//! The built-in workflows as the clients run them: what the model drafts and the person
//! answers (`tests/clients/scenarios.json`), and what a run of each must leave behind:
//! the ADR planner's file and todos, the readiness report, the troubleshooting plan and
//! the research report; and what the readiness and troubleshooting workflows remember of
//! the runs before.

use serde_json::{Value, json};

use super::checks::report;
use super::clients::Ran;
use crate::support::{self, Sandbox, assert_contains_all};

/// The title every ADR scenario plans, and the slug of its file.
pub(super) const ADR_TITLE: &str = "Queue for billing events";

pub(super) const ADR_SLUG: &str = "queue-for-billing-events";

/// The questions the planner asks a client that can sample and elicit, in order, as the
/// client scripts name them: the problem; each analysis (findings, options, impacts,
/// plan) drafted by the model, then reviewed by the person; the decision after the options.
pub(super) const ADR_QUESTIONS: [(&str, &str); 10] = [
    ("elicitation/create", "problem"),
    ("sampling/createMessage", "draft findings"),
    ("elicitation/create", "review findings"),
    ("sampling/createMessage", "draft options"),
    ("elicitation/create", "review options"),
    ("elicitation/create", "decision"),
    ("sampling/createMessage", "draft impacts"),
    ("elicitation/create", "review impacts"),
    ("sampling/createMessage", "draft plan"),
    ("elicitation/create", "review plan"),
];

/// The sections every ADR has.
pub(super) const ADR_SECTIONS: [&str; 7] = [
    "## Context",
    "## Decision",
    "## Considered Options",
    "## Consequences",
    "## Implementation Plan",
    "## References",
    "## Revision History",
];

/// What the model drafts and what the person answers for each built-in workflow, as data
/// the client scripts share: `{workflow: {arguments, drafts, forms}}`.
pub(super) const SCENARIOS: &str = include_str!("../../clients/scenarios.json");

/// The scenario of built-in workflow `flow`.
pub(super) fn scenario(flow: &str) -> Value {
    let all: Value = serde_json::from_str(SCENARIOS).expect("scenarios.json is JSON");
    all.get(flow)
        .cloned()
        .unwrap_or_else(|| panic!("scenarios.json has no {flow}"))
}

/// The model's reply to a prompt of `flow`: the first draft whose `prompt` the prompt
/// contains, JSON fenced as models write it, or plain text. What it drafts, and the text.
pub(super) fn draft_for(flow: &str, prompt: &str) -> (String, String) {
    let scenario = scenario(flow);
    let draft = scenario["drafts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| prompt.contains(d["prompt"].as_str().unwrap()))
        .unwrap_or_else(|| panic!("a sampling prompt {flow} does not send: {prompt}"));
    let text = match draft["text"].as_str() {
        Some(text) => text.to_owned(),
        None => format!("Here is the draft:\n```json\n{:#}\n```", draft["json"]),
    };
    (draft["asks"].as_str().unwrap().to_owned(), text)
}

/// A person's answer to a form of `flow`: the whole content of a form whose message a rule
/// names, else each field by its rule (a value, an option of its enum, or the field's
/// default, i.e. a draft confirmed as the model wrote it). What it asks, and the content.
pub(super) fn answer_for(flow: &str, message: &str, form: &Value) -> (String, Value) {
    let scenario = scenario(flow);
    let rules = scenario["forms"].as_array().unwrap();
    let whole = rules.iter().find(|r| {
        r["message"]
            .as_str()
            .is_some_and(|named| message.contains(named))
    });
    if let Some(rule) = whole {
        return (
            rule["asks"].as_str().unwrap().to_owned(),
            rule["content"].clone(),
        );
    }
    let mut asks = None;
    let mut content = serde_json::Map::new();
    let fields = form["properties"].as_object().expect("a form's properties");
    for (name, field) in fields {
        let (rule, value) = match rules.iter().find(|r| r["field"] == name.as_str()) {
            Some(rule) => match rule["enum"].as_u64() {
                Some(i) => (rule, field["enum"][i as usize].clone()),
                None => (rule, rule["value"].clone()),
            },
            None => match rules.iter().find(|r| r["default"] == true) {
                Some(rule) if field["default"].is_string() => (rule, field["default"].clone()),
                _ => panic!("a form field {flow} does not ask: {name}"),
            },
        };
        if let Some(named) = rule["asks"].as_str() {
            asks = Some(named.replace("{field}", name));
        }
        content.insert(name.clone(), value);
    }
    (
        asks.unwrap_or_else(|| panic!("a form of {flow}: {message}")),
        Value::Object(content),
    )
}

/// An analysis phase's answer, as the model drafts it and the person confirms it, or as
/// it is passed up front.
pub(super) fn adr_phase(phase: &str) -> Value {
    let asks = format!("draft {phase}");
    scenario("interactive_adr_planning")["drafts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["asks"] == asks.as_str())
        .unwrap_or_else(|| panic!("the ADR planner has no phase {phase}"))["json"]
        .clone()
}

/// The `question` events a client script printed, as (method, what it asks).
pub(super) fn questions(ran: &Ran) -> Vec<(String, String)> {
    ran.events()
        .iter()
        .filter(|e| e["event"] == "question")
        .map(|e| {
            let text = |key: &str| e[key].as_str().unwrap_or("?").to_owned();
            (text("method"), text("asks"))
        })
        .collect()
}

pub(super) fn assert_asked_every_question(asked: &[(String, String)]) {
    let expected: Vec<(String, String)> = ADR_QUESTIONS
        .iter()
        .map(|(method, asks)| (method.to_string(), asks.to_string()))
        .collect();
    assert_eq!(asked, expected);
}

/// Checks what a run of the planner left, given the tool's result: a successful report,
/// the ADR numbered `number` with every section, written as drafted and decided (the
/// first option), a link to it, and one todo per planned task with its tags.
pub(super) fn assert_adr_planned(sandbox: &Sandbox, result: &Value, number: u32) {
    assert_eq!(result["isError"], false, "{result}");
    let report = report(result);
    assert_eq!(report["status"], "succeeded", "{report}");
    let file = format!("{number:04}-{ADR_SLUG}.md");
    let relative = format!("docs/adrs/{file}");
    let output = &report["output"];
    assert_eq!(output["adr"], relative.as_str());
    assert_eq!(output["number"], number);
    assert_eq!(output["decision"]["name"], "Queue");
    assert_eq!(
        output["decision"]["tradeoffs"],
        json!(["more to operate", "slower deploys"])
    );

    let link = result["content"]
        .as_array()
        .expect("a content array")
        .iter()
        .find(|c| c["type"] == "resource_link")
        .unwrap_or_else(|| panic!("a resource link to the ADR: {result}"));
    assert_eq!(link["name"], file.as_str());
    let uri = link["uri"].as_str().unwrap();
    assert!(
        uri.starts_with("file:///") && uri.ends_with(&format!("/{relative}")),
        "{uri}"
    );

    let path = sandbox.workspace.join(&relative);
    let adr = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the ADR {} is not there: {e}", path.display()));
    assert!(
        adr.starts_with(&format!("# {number:04}. {ADR_TITLE}\n")),
        "{adr}"
    );
    for section in ADR_SECTIONS {
        let line = format!("\n{section}\n");
        assert_eq!(adr.matches(&line).count(), 1, "{section:?} once in:\n{adr}");
    }
    for written in [
        "Billing events are lost when billing restarts.\n",
        "- **incident 42** (high relevance): events dropped on deploy\n",
        "We choose **Queue**.\n\nDurability matters most\n",
        "### Queue (chosen)\n",
        "### Client retries\n",
        "### Technical\n\n- a new dependency\n",
        "- [ ] Provision the queue (priority: high, effort: 2d)\n",
        "- [ ] Switch the producer to the queue (priority: critical, effort: 1d, assignee: ann)\n",
    ] {
        assert!(adr.contains(written), "{written:?} in:\n{adr}");
    }

    let store = mcp_task_server::store::Store::open(&sandbox.db).unwrap();
    let mut todos: Vec<(String, Vec<String>)> = store
        .list_todos(&Default::default())
        .unwrap()
        .into_iter()
        .map(|t| (t.title, t.tags))
        .collect();
    todos.sort();
    let tag = format!("adr-{number:04}");
    assert_eq!(
        todos,
        [
            (
                "Provision the queue".to_owned(),
                vec![tag.clone(), "priority:high".to_owned()]
            ),
            (
                "Switch the producer to the queue".to_owned(),
                vec![tag, "priority:critical".to_owned()]
            ),
        ]
    );
}

/// The tool's result of a run that succeeded, and the run's output.
pub(super) fn succeeded_output(result: &Value) -> &Value {
    assert_eq!(result["isError"], false, "{result}");
    let report = report(result);
    assert_eq!(report["status"], "succeeded", "{report}");
    &report["output"]
}

/// The report file the run's output names, checked to lie in `folder` and be called
/// `<prefix><anything>.md`; its text.
pub(super) fn report_file(sandbox: &Sandbox, output: &Value, folder: &str, prefix: &str) -> String {
    let relative = output["report"].as_str().expect("the report's path");
    let name = relative
        .strip_prefix(&format!("{folder}/"))
        .unwrap_or_else(|| panic!("{relative} in {folder}"));
    assert!(name.starts_with(prefix) && name.ends_with(".md"), "{name}");
    let path = sandbox.workspace.join(relative);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the report {} is not there: {e}", path.display()))
}

/// Every todo in the sandbox's store, as (title, tags), sorted.
pub(super) fn stored_todos(sandbox: &Sandbox) -> Vec<(String, Vec<String>)> {
    support::sorted_todos(&sandbox.db)
}

pub(super) fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Checks a readiness run: the two open checks asked one form each, in order; the
/// verdict (2 of 3 passed, threshold 60%); the report with each check and the blocker;
/// one blocker todo, tagged with the release.
pub(super) fn assert_readiness_checked(
    sandbox: &Sandbox,
    result: &Value,
    asked: &[(String, String)],
) {
    assert_eq!(
        asked,
        owned(&[
            ("elicitation/create", "check Migrations reviewed"),
            ("elicitation/create", "check Rollback plan ready"),
        ])
    );
    let output = succeeded_output(result);
    assert_eq!(
        output["score"],
        json!({ "passed": 2, "total": 3, "percent": 66, "threshold": 60, "ready": true })
    );
    assert_eq!(output["blockers"], json!(["Rollback plan ready"]));
    let text = report_file(sandbox, output, "docs/releases", "1-4-0-readiness-");
    let todo_id = output["todos"][0]["id"].to_string();
    assert_contains_all(
        &text,
        &[
            "# Deployment readiness: 1.4.0\n",
            "- Verdict: **Ready**\n",
            "- Score: 2 of 3 checks passed (66%; threshold 60%)\n",
            "- [x] **Tests pass**: 412 passed\n",
            "- [x] **Migrations reviewed**: both reversible\n",
            "- [ ] **Rollback plan ready**: no plan for the new schema\n",
            &format!("- Rollback plan ready: no plan for the new schema (todo #{todo_id})\n"),
        ],
    );
    assert_eq!(
        stored_todos(sandbox),
        [(
            "1.4.0 blocker: Rollback plan ready".to_owned(),
            vec!["release-1.4.0".to_owned(), "blocker".to_owned()]
        )]
    );
}

pub(super) const FAILURE_TITLE: &str = "The billing service crashes on start after the 2.3 upgrade";

pub(super) const FAILURE_TAG: &str = "troubleshoot-the-billing-service-crashes";

/// Checks a troubleshooting run: the failure asked, then each draft made and confirmed,
/// then whether the fix worked (left for later); the report with the failure, its
/// component and context, the causes and the plan; one todo per step.
pub(super) fn assert_troubleshooting_planned(
    sandbox: &Sandbox,
    result: &Value,
    asked: &[(String, String)],
) {
    assert_eq!(
        asked,
        owned(&[
            ("elicitation/create", "failure"),
            ("sampling/createMessage", "draft hypotheses"),
            ("elicitation/create", "review hypotheses"),
            ("sampling/createMessage", "draft plan"),
            ("elicitation/create", "review plan"),
            ("elicitation/create", "rating"),
        ])
    );
    let output = succeeded_output(result);
    assert_eq!(output["title"], FAILURE_TITLE);
    assert_eq!(output["component"], "billing service");
    assert_eq!(output["outcome"], json!({ "rating": "later", "note": "" }));
    assert_eq!(
        output["similar"],
        json!([]),
        "a first session has nothing alike"
    );
    assert_eq!(output["tag"], FAILURE_TAG);
    let text = report_file(
        sandbox,
        output,
        "docs/troubleshooting",
        "", // <date>-<slug>.md
    );
    assert!(
        output["report"]
            .as_str()
            .unwrap()
            .ends_with("-the-billing-service-crashes.md"),
        "{output}"
    );
    assert_contains_all(
        &text,
        &[
            &format!("# Troubleshooting: {FAILURE_TITLE}\n"),
            "- Component: billing service\n",
            &format!("- Todos: tagged `{FAILURE_TAG}`\n"),
            "## Earlier sessions alike\n\nNone found.\n",
            "It exits with code 137.\n",
            "### Context\n\nKubernetes, 512 MiB limit\n",
            "- **Out of memory** (high likelihood): exit code 137\n",
            "- **A slow migration** (medium likelihood): 2.3 migrates\n",
            "1. [ ] Read the pod's events\n   - Expected if the cause holds: OOMKilled\n",
            "2. [ ] Start it with a 1 GiB limit\n",
        ],
    );
    let tags = vec![FAILURE_TAG.to_owned()];
    assert_eq!(
        stored_todos(sandbox),
        [
            (
                "Step 1: Read the pod's events (expect: OOMKilled)".to_owned(),
                tags.clone()
            ),
            ("Step 2: Start it with a 1 GiB limit".to_owned(), tags),
        ]
    );
}

/// The sub-questions of the research scenario, with the model's answers.
pub(super) const FINDINGS: [(&str, &str); 3] = [
    (
        "How long does each queue keep events?",
        "Kafka keeps events for as long as it is told; SQS for 14 days at most.",
    ),
    (
        "What does each cost at our volume?",
        "At a million events a day, SQS costs under a dollar; a Kafka cluster more.",
    ),
    (
        "What would we have to operate?",
        "SQS is managed; Kafka needs brokers and upgrades.",
    ),
];

/// Checks a research run: the sub-questions drafted and confirmed, each answered by the
/// model (in any order: they are asked at once), the synthesis; the report with the
/// question, its context, the synthesis and every answer; no todos.
pub(super) fn assert_research_reported(
    sandbox: &Sandbox,
    result: &Value,
    asked: &[(String, String)],
) {
    assert_eq!(asked.len(), 6, "{asked:?}");
    let mut fanned = asked[2..5].to_vec();
    fanned.sort();
    let in_order: Vec<(String, String)> = asked[..2]
        .iter()
        .chain(&fanned)
        .chain(&asked[5..])
        .cloned()
        .collect();
    assert_eq!(
        in_order,
        owned(&[
            ("sampling/createMessage", "draft subquestions"),
            ("elicitation/create", "review subquestions"),
            ("sampling/createMessage", "answer cost"),
            ("sampling/createMessage", "answer operations"),
            ("sampling/createMessage", "answer retention"),
            ("sampling/createMessage", "synthesis"),
        ])
    );
    let output = succeeded_output(result);
    let findings: Vec<Value> = FINDINGS
        .iter()
        .map(|(q, a)| json!({ "question": q, "answer": a }))
        .collect();
    assert_eq!(output["findings"], json!(findings));
    let synthesis = "SQS suits billing events: cheap, managed and long enough kept.";
    assert_eq!(output["synthesis"], synthesis);
    let text = report_file(sandbox, output, "docs/research", "");
    assert!(
        output["report"]
            .as_str()
            .unwrap()
            .ends_with("-which-queue-suits-billing-events.md"),
        "{output}"
    );
    let mut parts = vec![
        "# Research: Which queue suits billing events?\n".to_owned(),
        "- Sub-questions: 3\n".to_owned(),
        "## Context\n\nEU only\n".to_owned(),
        format!("## Synthesis\n\n{synthesis}\n"),
    ];
    for (i, (q, a)) in FINDINGS.iter().enumerate() {
        parts.push(format!("### {}. {q}\n\n{a}\n", i + 1));
    }
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    assert_contains_all(&text, &parts);
    assert_eq!(stored_todos(sandbox), []);
}

/// Checks what a client's `memory` scenario saw: the prompt of `troubleshoot_outcome`; the
/// second readiness check to one environment with its trend and the migrations check
/// recurring, its blocker tagged so; a session rated with `troubleshoot_outcome`, the
/// rating appended to its report; the next session alike showing it, with the cause
/// that proved true; a run that is no session refused.
pub(super) fn assert_remembered(sandbox: &Sandbox, ran: &Ran) {
    let names = ran.event("prompts")["names"].clone();
    assert!(
        names
            .as_array()
            .unwrap()
            .contains(&json!("troubleshoot_outcome")),
        "{names}"
    );
    let prompt = ran.event("prompt")["text"].as_str().unwrap().to_owned();
    assert!(prompt.contains("Pass the run id"), "{prompt}");

    let checked = ran.event("readiness")["results"].clone();
    let second = &checked[1]["data"]["output"];
    assert_eq!(
        second["recurring"],
        json!(["Migrations reviewed"]),
        "{second}"
    );
    assert_eq!(second["trend"]["runs"], 2);
    assert_eq!(
        second["trend"]["checks"][1],
        json!({ "check": "Migrations reviewed", "runs": 2, "failed": 2, "pass_rate": 0, "recurring": true })
    );
    let blockers: Vec<(String, Vec<String>)> = stored_todos(sandbox)
        .into_iter()
        .filter(|(title, _)| title.contains(" blocker: "))
        .collect();
    let tags = |tags: &[&str]| tags.iter().map(|t| t.to_string()).collect::<Vec<_>>();
    assert_eq!(
        blockers,
        [
            (
                "1.3.0 blocker: Migrations reviewed".to_owned(),
                tags(&["release-1.3.0", "blocker"])
            ),
            (
                "1.4.0 blocker: Migrations reviewed".to_owned(),
                tags(&["release-1.4.0", "blocker", "recurring"])
            ),
        ]
    );

    let rated = ran.event("rated");
    assert_eq!(
        rated["result"]["data"]["output"]["rating"], "fixed",
        "{rated}"
    );
    let report = rated["report"].as_str().unwrap();
    assert_contains_all(
        report,
        &[
            "## Outcome, rated ",
            "- Fix: fixed\n- Cause that proved true: Out of memory\n- Note: a 1 GiB limit\n",
        ],
    );

    let session = ran.event("session");
    let similar = &session["result"]["data"]["output"]["similar"];
    assert_eq!(similar.as_array().map(Vec::len), Some(1), "{session}");
    assert_eq!(similar[0]["run_id"], rated["runId"]);
    assert_eq!(similar[0]["rating"], "fixed");
    assert_eq!(similar[0]["cause"], "Out of memory");
    assert_eq!(similar[0]["causes"], json!(["Out of memory"]));

    let refused = ran.event("refused");
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["result"]["error"]["message"],
        "run failed at node `session_check`"
    );
}

/// The fixture ADRs of `tests/fixtures/adrs/<corpus>`, copied to the sandbox's
/// `docs/adrs` before its client runs.
fn with_adrs(sandbox: &Sandbox, corpus: &str) {
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/adrs")
        .join(corpus);
    let to = sandbox.workspace.join("docs/adrs");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Clean ADRs in the three formats.
pub(super) fn with_clean_adrs(sandbox: &Sandbox) {
    with_adrs(sandbox, "clean");
}

/// ADRs with one planted defect each.
pub(super) fn with_faulty_adrs(sandbox: &Sandbox) {
    with_adrs(sandbox, "defects");
}

/// Checks a validation of the clean ADRs with the model's analysis: each of the four ADRs
/// put to the model once, no finding, the model's reviews in the output and the report.
pub(super) fn assert_adrs_validated_and_reviewed(
    sandbox: &Sandbox,
    result: &Value,
    asked: &[(String, String)],
) {
    assert_eq!(
        asked,
        vec![
            (
                "sampling/createMessage".to_owned(),
                "review an ADR".to_owned()
            );
            4
        ]
    );
    let output = succeeded_output(result);
    assert_eq!(output["findings"], json!([]), "{output}");
    assert_eq!(
        output["formats"],
        json!(["nygard", "nygard", "madr", "log4brains"])
    );
    let review =
        "The decision is clear and its consequences are stated; no later ADR contradicts it.";
    let reviews = output["analysis"].as_array().unwrap();
    assert_eq!(reviews.len(), 4, "{output}");
    assert!(reviews.iter().all(|r| r["text"] == review), "{reviews:?}");
    let text = report_file(sandbox, output, "docs/adr-reports", "");
    assert_contains_all(
        &text,
        &[
            "# ADR validation: docs/adrs\n",
            "- Errors: 0, warnings: 0\n",
            "## Analysis\n",
            "### 20240105-adopt-log4brains.md (",
            review,
        ],
    );
    assert_eq!(stored_todos(sandbox), []);
}

/// Checks what FastMCP's client saw of a validation of the faulty ADRs: the prompt, the
/// findings as structured output, one todo per error, the report read through its link,
/// and the analysis left out for want of a model.
pub(super) fn assert_fastmcp_validated_the_adrs(seen: &super::cases::Seen) {
    let prompt = seen.ran.event("prompt")["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        prompt.contains("validate the architecture decision records"),
        "{prompt}"
    );
    let result = seen.ran.event("result")["result"].clone();
    let output = succeeded_output(&result);
    assert_eq!(output["counts"], json!({ "errors": 16, "warnings": 1 }));
    let rules: Vec<&str> = output["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["rule"].as_str())
        .collect();
    for rule in [
        "title-number",
        "options-too-few",
        "supersede-backlink",
        "index-status",
        "file-name",
    ] {
        assert!(rules.contains(&rule), "{rule} in {rules:?}");
    }
    let todos = stored_todos(&seen.sandbox);
    assert_eq!(todos.len(), 16);
    assert!(
        todos
            .iter()
            .all(|(_, tags)| tags == &["adr-lint".to_owned()]),
        "{todos:?}"
    );
    let read = seen.ran.event("read");
    assert_eq!(read["mimeType"], "text/markdown");
    let text = read["text"].as_str().unwrap();
    assert!(
        text.contains("| `options-too-few` | error | 13 |"),
        "{text}"
    );
    // FastMCP's client declares no sampling: the analysis, on by default, is left out.
    assert_eq!(output["analysis"], json!([]));
    let why = output["analysis_left_out"].as_str().unwrap_or_default();
    assert!(why.contains("model"), "{output}");
    assert!(
        text.contains("The analysis is left out: the client has no model to ask"),
        "{text}"
    );
}

/// Every answer of the bootstrap validation loop: its checks, two runs of the script (one
/// check failing, then none), the learning and the approval, so that nothing is asked.
pub(super) fn bootstrap_answers_up_front() -> Value {
    let scenario = scenario("bootstrap_validation_loop");
    let runs: Vec<Value> = (scenario["forms"].as_array().unwrap().iter())
        .filter(|form| form["asks"].as_str().unwrap().starts_with("paste run"))
        .map(|form| form["content"].clone())
        .collect();
    let learning = &scenario["drafts"][0]["json"];
    let mut arguments = scenario["arguments"].clone();
    arguments["outputs"] = json!(runs);
    arguments["learnings"] = json!([{ "iteration": 1, "check": "0001_use_postgres_l9",
        "cause": learning["cause"], "fix": learning["fix"] }]);
    arguments["approved_adrs"] = json!(["docs/adrs/0001-use-postgres.md"]);
    json!({ "workflow": "bootstrap_validation_loop", "arguments": arguments })
}

/// Checks a bootstrap loop's output and what it wrote: two iterations, the first failing
/// one check, the second passing; the learning in the ADR's appended section and in the
/// report; no todo.
pub(super) fn assert_bootstrap_looped(sandbox: &Sandbox, output: &Value) {
    assert_eq!(output["passed"], true, "{output}");
    assert_eq!(output["iterations"], 2, "{output}");
    assert_eq!(output["written"], json!(["docs/adrs/0001-use-postgres.md"]));
    let adr =
        std::fs::read_to_string(sandbox.workspace.join("docs/adrs/0001-use-postgres.md")).unwrap();
    assert!(adr.starts_with(crate::bootstrap::POSTGRES), "{adr}");
    assert_contains_all(
        &adr,
        &[
            "\n## Deployment experience\n",
            "  - Failed: no database yet. Cause: no database was provisioned. Fix: provision PostgreSQL 16\n",
        ],
    );
    let report = output["report"].as_str().unwrap();
    let text = std::fs::read_to_string(sandbox.workspace.join(report)).unwrap();
    assert_contains_all(
        &text,
        &[
            "- Verdict: **Every check passes**\n",
            "- Iterations: 2 of at most 2\n",
            "- [ ] `0001_use_postgres_l9`: no database yet\n",
            "- `0001_use_postgres_l9`: cause: no database was provisioned; fix: provision PostgreSQL 16\n",
        ],
    );
    assert_eq!(stored_todos(sandbox), []);
}

/// Checks a bootstrap loop a client answered as it ran: each run of the script pasted,
/// the learning drafted by the model and confirmed, the fixes said to be in, the section
/// approved; then what [`assert_bootstrap_looped`] checks.
pub(super) fn assert_bootstrap_looped_asking(
    sandbox: &Sandbox,
    result: &Value,
    asked: &[(String, String)],
) {
    assert_eq!(
        asked,
        owned(&[
            ("elicitation/create", "paste run 1"),
            ("sampling/createMessage", "draft learning"),
            ("elicitation/create", "review learning"),
            ("elicitation/create", "fixes in"),
            ("elicitation/create", "paste run 2"),
            ("elicitation/create", "approve section"),
        ])
    );
    assert_bootstrap_looped(sandbox, succeeded_output(result));
}

/// What FastMCP's client saw of the bootstrap loop with every answer up front: its prompt,
/// its output, and its report read through the last link of its result.
pub(super) fn assert_fastmcp_ran_the_bootstrap_loop(seen: &super::cases::Seen) {
    let ran = &seen.ran;
    let names = ran.event("prompts")["names"].clone();
    let listed = |name: &str| names.as_array().unwrap().iter().any(|n| n == name);
    assert!(
        listed("bootstrap_validation_loop") && listed("adr_bootstrap_validation"),
        "{names}"
    );
    let prompt = ran.event("prompt")["text"].as_str().unwrap().to_owned();
    assert!(
        prompt.contains("bring this project up to its accepted ADRs"),
        "{prompt}"
    );
    assert_bootstrap_looped(&seen.sandbox, &ran.event("output")["output"]);
    let read = ran.event("read");
    assert!(
        read["uri"]
            .as_str()
            .unwrap()
            .ends_with("-bootstrap-validation.md"),
        "{read}"
    );
    assert_eq!(read["mimeType"], "text/markdown");
    assert!(
        read["text"]
            .as_str()
            .unwrap()
            .starts_with("# Bootstrap validation: docs/adrs\n"),
        "{read}"
    );
}

/// The accepted ADRs the bootstrap workflows read.
pub(super) fn with_accepted_adrs(sandbox: &Sandbox) {
    crate::bootstrap::write_adrs(&sandbox.workspace, false);
}

/// Checks the scripts `adr_bootstrap_validation` wrote from the three requirements of the
/// accepted ADRs, each check as `checks` says it was made: the validation script holds a
/// function per check and parses, and the ADRs' text never left its comments.
pub(super) fn assert_bootstrap_scripts_written(sandbox: &Sandbox, output: &Value) {
    let checks = output["checks"].as_array().unwrap();
    let ids: Vec<&str> = checks.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            crate::bootstrap::DB,
            crate::bootstrap::OPS,
            crate::bootstrap::CONF
        ],
        "{output}"
    );
    let script = sandbox
        .workspace
        .join(output["validate_script"].as_str().unwrap());
    crate::bootstrap::assert_parses(&script);
    let text = std::fs::read_to_string(&script).unwrap();
    for id in ids {
        assert!(text.contains(&format!("check_{id}()")), "{text}");
    }
    for line in text.lines().filter(|line| line.contains("PWNED")) {
        assert!(
            line.trim_start().starts_with('#'),
            "ADR text outside a comment: {line}"
        );
    }
}
