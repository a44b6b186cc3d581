//! The built-in `deployment_readiness`, `troubleshoot` and `research` run from the
//! terminal with every question answered from a file (`--answers`), on the arguments and
//! drafts the real-client tests use (`tests/clients/scenarios.json`).

use serde_json::{Value, json};

use super::answers::run_answered;
use super::{Ran, Sandbox};
use crate::support::assert_contains_all;

/// What the model drafts and what the person answers for each built-in workflow.
const SCENARIOS: &str = include_str!("../../clients/scenarios.json");

fn scenario(flow: &str) -> Value {
    let all: Value = serde_json::from_str(SCENARIOS).expect("scenarios.json is JSON");
    all[flow].clone()
}

/// The draft of `flow` that `asks`, as the text a person types: JSON, or the model's prose.
fn draft(flow: &str, asks: &str) -> String {
    let scenario = scenario(flow);
    let found = scenario["drafts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["asks"] == asks)
        .unwrap_or_else(|| panic!("{flow} has no draft {asks}"))
        .clone();
    match found["text"].as_str() {
        Some(text) => text.to_owned(),
        None => found["json"].to_string(),
    }
}

/// Runs `flow` with the scenario's arguments and `answers`; the report of a run that
/// succeeded.
fn run_built_in(sandbox: &Sandbox, flow: &str, answers: Value) -> Value {
    let inputs = scenario(flow)["arguments"].to_string();
    let ran: Ran = run_answered(
        sandbox,
        flow,
        &answers.to_string(),
        &["--inputs-json", &inputs],
    );
    let report = ran.assert_code(0).json();
    assert_eq!(report["status"], "succeeded", "{report}");
    report
}

/// The report file the run's output names.
fn report_text(sandbox: &Sandbox, report: &Value) -> String {
    let relative = report["output"]["report"].as_str().expect("a report path");
    std::fs::read_to_string(sandbox.workspace.join(relative))
        .unwrap_or_else(|e| panic!("the report {relative} is not there: {e}"))
}

/// Every stored todo as (title, tags), sorted.
fn todos(sandbox: &Sandbox) -> Vec<(String, Vec<String>)> {
    crate::support::sorted_todos(&sandbox.db)
}

#[test]
fn deployment_readiness_runs_from_the_terminal_with_each_open_check_answered_from_a_file() {
    let sandbox = Sandbox::new();
    // The fan-out of forms, one answer per open check in order.
    let answers = json!({ "ask_checks": [
        { "passed": true, "note": "both reversible" },
        { "passed": false, "note": "no plan for the new schema" }
    ] });
    let report = run_built_in(&sandbox, "deployment_readiness", answers);
    let output = &report["output"];
    assert_eq!(output["ready"], true);
    assert_eq!(output["blockers"], json!(["Rollback plan ready"]));
    let path = output["report"].as_str().unwrap();
    assert!(path.starts_with("docs/releases/1-4-0-readiness-"), "{path}");
    let text = report_text(&sandbox, &report);
    assert_contains_all(
        &text,
        &[
            "# Deployment readiness: 1.4.0\n",
            "- Verdict: **Ready**\n",
            "- [x] **Tests pass**: 412 passed\n",
            "- [x] **Migrations reviewed**: both reversible\n",
            "- [ ] **Rollback plan ready**: no plan for the new schema\n",
        ],
    );
    assert_eq!(
        todos(&sandbox),
        [(
            "1.4.0 blocker: Rollback plan ready".to_owned(),
            vec!["release-1.4.0".to_owned(), "blocker".to_owned()]
        )]
    );
}

#[test]
fn troubleshoot_runs_from_the_terminal_with_every_question_answered_from_a_file() {
    let sandbox = Sandbox::new();
    let flow = "troubleshoot";
    let (hypotheses, plan) = (draft(flow, "draft hypotheses"), draft(flow, "draft plan"));
    // The drafts a model would write are the person's here, typed as text; each review
    // confirms its draft.
    let answers = json!({
        "failure_ask": {
            "description": "The billing service crashes on start after the 2.3 upgrade\nIt exits with code 137.",
            "context": "Kubernetes, 512 MiB limit"
        },
        "hypotheses_draft": hypotheses,
        "hypotheses_review": { "hypotheses": hypotheses },
        "plan_draft": plan,
        "plan_review": { "plan": plan }
    });
    let report = run_built_in(&sandbox, flow, answers);
    assert_eq!(
        report["nodes"]["hypotheses_draft"]["output"]["model"],
        "person"
    );
    let tag = "troubleshoot-the-billing-service-crashes";
    assert_eq!(report["output"]["tag"], tag);
    let path = report["output"]["report"].as_str().unwrap();
    assert!(
        path.starts_with("docs/troubleshooting/")
            && path.ends_with("-the-billing-service-crashes.md"),
        "{path}"
    );
    assert_contains_all(
        &report_text(&sandbox, &report),
        &[
            "# Troubleshooting: The billing service crashes on start after the 2.3 upgrade\n",
            "### Context\n\nKubernetes, 512 MiB limit\n",
            "- **Out of memory** (high likelihood): exit code 137\n",
            "1. [ ] Read the pod's events\n   - Expected if the cause holds: OOMKilled\n",
            "2. [ ] Start it with a 1 GiB limit\n",
        ],
    );
    assert_eq!(
        todos(&sandbox),
        [
            (
                "Step 1: Read the pod's events (expect: OOMKilled)".to_owned(),
                vec![tag.to_owned()]
            ),
            (
                "Step 2: Start it with a 1 GiB limit".to_owned(),
                vec![tag.to_owned()]
            ),
        ]
    );
}

#[test]
fn research_runs_from_the_terminal_with_each_fanned_out_sub_question_answered_from_a_file() {
    let sandbox = Sandbox::new();
    let flow = "research";
    let subquestions = draft(flow, "draft subquestions");
    let answered = ["answer retention", "answer cost", "answer operations"].map(|a| draft(flow, a));
    // One answer per instance of the fan-out, in the order of the sub-questions.
    let answers = json!({
        "subquestions_draft": subquestions,
        "subquestions_review": { "subquestions": subquestions },
        "investigate": answered,
        "synthesis_draft": draft(flow, "synthesis")
    });
    let report = run_built_in(&sandbox, flow, answers);
    let output = &report["output"];
    let questions: Vec<String> = serde_json::from_str(&subquestions).unwrap();
    let findings: Vec<Value> = questions
        .iter()
        .zip(&answered)
        .map(|(q, a)| json!({ "question": q, "answer": a }))
        .collect();
    assert_eq!(output["findings"], json!(findings));
    let path = output["report"].as_str().unwrap();
    assert!(
        path.starts_with("docs/research/")
            && path.ends_with("-which-queue-suits-billing-events.md"),
        "{path}"
    );
    let text = report_text(&sandbox, &report);
    let mut parts = vec![
        "# Research: Which queue suits billing events?\n".to_owned(),
        "## Context\n\nEU only\n".to_owned(),
        format!("## Synthesis\n\n{}\n", draft(flow, "synthesis")),
    ];
    for (i, (q, a)) in questions.iter().zip(&answered).enumerate() {
        parts.push(format!("### {}. {q}\n\n{a}\n", i + 1));
    }
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    assert_contains_all(&text, &parts);
    assert_eq!(todos(&sandbox), []);
}
