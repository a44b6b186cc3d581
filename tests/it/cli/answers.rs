//! `--answers FILE`: a run's questions answered from a file, without a terminal; and a
//! resumed run that answers from it only what is still open.

use std::process::Stdio;

use mcp_task_server::store::Store;
use serde_json::{Value, json};

use super::{Ran, Sandbox, run_id_of};
use crate::support::wait_until;

const ASK: &str = include_str!("../../fixtures/ask.toml");
const ANSWERS: &str = include_str!("../../fixtures/answers.toml");

/// Runs `workflow` of the sandbox's folder with `answers` as its answers file, then `more`.
pub(super) fn run_answered(sandbox: &Sandbox, workflow: &str, answers: &str, more: &[&str]) -> Ran {
    let file = sandbox.file("answers.json", answers);
    let mut args = vec![
        "workflows",
        "run",
        workflow,
        "--answers",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    sandbox.run(&args)
}

/// The binary with `args`, in the background, its output thrown away.
fn spawn_quiet(sandbox: &Sandbox, args: &[&str]) -> std::process::Child {
    let mut command = sandbox.command(args);
    command.stdout(Stdio::null()).stderr(Stdio::null());
    command.spawn().unwrap()
}

/// The id of the newest run in `store`.
fn latest_run(store: &Store) -> Option<String> {
    store
        .list_runs(None, mcp_task_server::store::Scope::Everyone, 1)
        .unwrap()
        .first()
        .map(|r| r.id.clone())
}

/// The `answer` rows of the audit log: each reply to a question, with its arguments.
fn answer_rows(sandbox: &Sandbox) -> Vec<(String, Value, String)> {
    crate::support::audit_rows(&sandbox.db)
        .into_iter()
        .filter(|row| row.tool == "answer")
        .map(|row| {
            let args = serde_json::from_str(&row.args).expect("audit args are JSON");
            (row.node_id.unwrap_or_default(), args, row.outcome)
        })
        .collect()
}

#[test]
fn an_answers_file_answers_an_input_node_without_asking() {
    let sandbox = Sandbox::new();
    sandbox.workflow("ask.toml", ASK);
    let ran = run_answered(&sandbox, "ask", r#"{"approve": {"ok": true}}"#, &[]);
    let report = ran.assert_code(0).json();
    assert_eq!(report["nodes"]["approve"]["output"], json!({ "ok": true }));
    assert_eq!(crate::support::task_titles(&sandbox.db), ["approved world"]);
    assert!(
        ran.stderr.contains("`approve`: answered from"),
        "{}",
        ran.stderr
    );
    let rows = answer_rows(&sandbox);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].0, "approve");
    assert_eq!(rows[0].1["answer"], json!({ "ok": true }));
    assert_eq!(rows[0].2, "ok");
}

#[test]
fn an_answers_file_answers_a_sample_as_text_and_a_fan_out_by_instance() {
    let sandbox = Sandbox::new();
    sandbox.workflow("answers.toml", ANSWERS);
    let answers = r#"{"release": {"name": "1.4"}, "notes": "Faster.",
        "check": [{"done": true}, {"done": false}]}"#;
    let report = run_answered(&sandbox, "answers", answers, &[])
        .assert_code(0)
        .json();
    let output = &report["output"];
    assert_eq!(output["name"], "1.4");
    assert_eq!(
        output["notes"],
        json!({ "text": "Faster.", "model": "person" })
    );
    assert_eq!(
        output["checks"],
        json!([{ "done": true }, { "done": false }])
    );
    let written = std::fs::read_to_string(sandbox.workspace.join("notes-1.4.md")).unwrap();
    assert_eq!(written, "Faster.");

    // One answer for every instance of the fan-out, and a sample's reply as an object.
    let answers = r#"{"release": {"name": "1.5"}, "notes": {"text": "Smaller."},
        "check": {"done": true}}"#;
    let report = run_answered(&sandbox, "answers", answers, &[])
        .assert_code(0)
        .json();
    let output = &report["output"];
    assert_eq!(
        output["notes"],
        json!({ "text": "Smaller.", "model": "person" })
    );
    assert_eq!(
        output["checks"],
        json!([{ "done": true }, { "done": true }])
    );
}

#[test]
fn a_file_answer_that_does_not_fit_its_form_fails_its_node_with_every_problem() {
    let sandbox = Sandbox::new();
    sandbox.workflow("answers.toml", ANSWERS);
    let answers = r#"{"release": {"name": "far too long", "colour": "red"}}"#;
    let ran = run_answered(&sandbox, "answers", answers, &[]);
    let report = ran.assert_code(1).json();
    let release = &report["nodes"]["release"];
    assert_eq!(release["status"], "failed");
    assert_eq!(release["error"]["code"], "refused", "{release}");
    for problem in [
        "`name`: must be at most 8 UTF-16 code units long (got 12)",
        "`colour`: unknown property",
    ] {
        assert!(ran.stderr.contains(problem), "{problem} in\n{}", ran.stderr);
    }
    let outcomes: Vec<String> = answer_rows(&sandbox).into_iter().map(|r| r.2).collect();
    assert_eq!(outcomes, ["rejected", "ok"], "the misfit, then the refusal");
}

#[test]
fn a_bad_answers_file_is_refused_before_the_run_naming_every_problem() {
    let sandbox = Sandbox::new();
    sandbox.workflow("answers.toml", ANSWERS);
    let answers = r#"{"relase": {}, "save": {}, "release": [{"name": "a"}], "notes": 7}"#;
    let ran = run_answered(&sandbox, "answers", answers, &[]);
    ran.assert_code(1);
    assert_eq!(ran.stdout, "", "no report without a run");
    for problem in [
        "`relase` names no node of workflow `answers` (the nodes that ask are `release`, \
         `notes`, `check`)",
        "`save` is a write_file node; only input, sample and command nodes take answers",
        "`release` does not fan out (it has no `for_each`), so its answer is one value",
        "`notes`: a sample's answer is its text",
    ] {
        assert!(ran.stderr.contains(problem), "{problem} in\n{}", ran.stderr);
    }
    for (text, problem) in [
        ("{\"release\": ", "not valid JSON"),
        ("[]", "must be a JSON object keyed by node id"),
    ] {
        let ran = run_answered(&sandbox, "answers", text, &[]);
        ran.assert_code(1);
        assert!(ran.stderr.contains(problem), "{problem} in\n{}", ran.stderr);
    }
    let missing = sandbox.dir.path().join("missing.json");
    let ran = sandbox.run(&[
        "workflows",
        "run",
        "answers",
        "--answers",
        missing.to_str().unwrap(),
    ]);
    ran.assert_code(1);
    assert!(
        ran.stderr.contains("cannot read the answers file"),
        "{}",
        ran.stderr
    );
    if sandbox.db.exists() {
        let store = Store::open(&sandbox.db).unwrap();
        assert!(
            store
                .list_runs(None, mcp_task_server::store::Scope::Everyone, 10)
                .unwrap()
                .is_empty(),
            "no run started"
        );
    }
}

#[test]
fn a_question_the_answers_file_leaves_out_takes_its_default_or_fails_naming_the_file() {
    let sandbox = Sandbox::new();
    sandbox.workflow("ask.toml", ASK);
    let ran = run_answered(&sandbox, "ask", "{}", &[]);
    let report = ran.assert_code(1).json();
    let approve = &report["nodes"]["approve"];
    assert_eq!(approve["status"], "failed");
    assert_eq!(
        approve["error"]["message"],
        "no answer was given, and nobody was there to ask"
    );
    assert!(
        ran.stderr.contains("`approve` asks a question that")
            && ran.stderr.contains("answers.json does not answer"),
        "{}",
        ran.stderr
    );

    let with_default = ASK.replace(
        "required = [\"ok\"] } }",
        "required = [\"ok\"] }, default = { ok = true } }",
    );
    assert_ne!(with_default, ASK);
    sandbox.workflow("ask.toml", &with_default);
    let ran = run_answered(&sandbox, "ask", "{}", &[]);
    let report = ran.assert_code(0).json();
    assert_eq!(report["nodes"]["approve"]["output"], json!({ "ok": true }));
    assert!(
        ran.stderr.contains("it takes its default"),
        "{}",
        ran.stderr
    );
}

/// A workflow with a sample only the client's model may answer.
const MODEL_ONLY: &str = r#"
name = "review"
[nodes.analyse]
sample = { prompt = "Review ADR 7.", person = false }
"#;

#[test]
fn a_model_only_sample_is_never_asked_at_the_terminal_and_takes_only_a_models_reply_from_a_file() {
    let sandbox = Sandbox::new();
    sandbox.workflow("review.toml", MODEL_ONLY);
    // Nobody here has a model: the node fails as unsupported, saying so.
    let ran = run_answered(&sandbox, "review", "{}", &[]);
    let report = ran.assert_code(1).json();
    let analyse = &report["nodes"]["analyse"];
    assert_eq!(analyse["error"]["code"], "unsupported", "{report}");
    let message = analyse["error"]["message"].as_str().unwrap();
    assert!(message.contains("the client has no model"), "{message}");
    assert!(
        ran.stderr.contains("there is no model here"),
        "{}",
        ran.stderr
    );

    // A person's text in the file is refused before the run; a model's reply is taken.
    let ran = run_answered(&sandbox, "review", r#"{"analyse": "Fine."}"#, &[]);
    ran.assert_code(1);
    assert_eq!(ran.stdout, "", "no report without a run");
    assert!(
        ran.stderr
            .contains("`analyse`: only the client's model answers it"),
        "{}",
        ran.stderr
    );
    let reply = json!({ "text": "Clear.", "model": "claude" });
    let ran = run_answered(
        &sandbox,
        "review",
        &json!({ "analyse": reply }).to_string(),
        &[],
    );
    let report = ran.assert_code(0).json();
    assert_eq!(report["nodes"]["analyse"]["output"], reply);
}

#[test]
fn resume_answers_from_the_file_only_the_questions_still_open() {
    let sandbox = Sandbox::new();
    sandbox.workflow("answers.toml", ANSWERS);
    let store = Store::open(&sandbox.db).unwrap();
    let mut child = spawn_quiet(
        &sandbox,
        &["workflows", "run", "answers", "--wait-for-answers"],
    );
    let run = || latest_run(&store);
    let asked = |id: &str| store.questions(id).unwrap().len();
    wait_until("the release is asked", || {
        run().is_some_and(|id| asked(&id) == 1)
    });
    let id = run().unwrap();
    let named = sandbox.run(&["workflows", "answer", &id, "release", r#"{"name": "1.4"}"#]);
    named.assert_code(0);
    wait_until("the notes and checks are asked", || asked(&id) == 4);
    child.kill().unwrap();
    child.wait().unwrap();

    let file = sandbox.file(
        "answers.json",
        r#"{"release": {"name": "9.9"}, "notes": "Faster.", "check": {"done": true}}"#,
    );
    let resumed = sandbox.run(&[
        "workflows",
        "resume",
        &id,
        "--answers",
        file.to_str().unwrap(),
    ]);
    let report = resumed.assert_code(0).json();
    assert_eq!(run_id_of(&resumed), id);
    assert_eq!(report["output"]["name"], "1.4", "the stored answer stands");
    assert_eq!(report["output"]["notes"]["text"], "Faster.");
    assert!(sandbox.workspace.join("notes-1.4.md").exists());
    let answered: Vec<(String, Option<u64>)> = answer_rows(&sandbox)
        .into_iter()
        .map(|(node, args, _)| (node, args["instance"].as_u64()))
        .collect();
    assert_eq!(
        answered.len(),
        4,
        "release once, then notes and each check: {answered:?}"
    );
    assert_eq!(answered[0], ("release".to_owned(), None));
    assert_eq!(
        answered
            .iter()
            .filter(|(node, _)| node == "release")
            .count(),
        1
    );
}

#[test]
fn a_run_started_with_nobody_to_answer_asks_its_questions_of_the_file_it_is_resumed_with() {
    let sandbox = Sandbox::new();
    sandbox.workflow("ask.toml", ASK);
    let store = Store::open(&sandbox.db).unwrap();
    // No terminal, no answers file: the question would take no answer at all.
    let mut child = spawn_quiet(&sandbox, &["workflows", "run", "ask"]);
    let run = || latest_run(&store);
    wait_until("the run waits in its pause", || {
        run().is_some_and(|id| {
            let rows = store.nodes(&id).unwrap();
            rows.iter()
                .any(|r| r.node_id == "pause" && r.status == "running")
        })
    });
    child.kill().unwrap();
    child.wait().unwrap();

    let id = run().unwrap();
    let file = sandbox.file("answers.json", r#"{"approve": {"ok": true}}"#);
    let resumed = sandbox.run(&[
        "workflows",
        "resume",
        &id,
        "--answers",
        file.to_str().unwrap(),
    ]);
    let report = resumed.assert_code(0).json();
    assert_eq!(report["status"], "succeeded", "{report}");
    assert_eq!(report["nodes"]["approve"]["output"], json!({ "ok": true }));
    assert_eq!(report["nodes"]["todo"]["output"]["title"], "approved world");
}

#[test]
fn the_adr_planner_runs_from_the_terminal_with_every_question_answered_from_a_file() {
    let sandbox = Sandbox::new();
    let findings = r#"[{"source": "incident 42", "insight": "events lost", "relevance": "high"}]"#;
    let options = r#"[{"name": "Queue", "description": "a queue", "pros": ["durable"],
        "cons": [], "effort": "medium", "confidence": 80}]"#;
    let impacts = r#"{"technical": ["a broker"], "business": [], "team": [], "risks": [],
        "dependencies": []}"#;
    let plan = r#"{"phases": ["pilot"], "tasks": [{"description": "Provision the queue",
        "priority": "high", "effort": "2d"}], "successCriteria": ["no lost events"]}"#;
    // The drafts a model would write are the person's here, typed as text; each review
    // confirms its draft.
    let answers = json!({
        "problem_ask": { "statement": "Billing events are lost on restart." },
        "research_draft": findings,
        "research_review": { "findings": findings },
        "options_draft": options,
        "options_review": { "options": options },
        "decision_ask": { "choice": "Queue", "rationale": "Durability", "tradeoffs": "ops" },
        "impacts_draft": impacts,
        "impacts_review": { "impacts": impacts },
        "plan_draft": plan,
        "plan_review": { "plan": plan }
    });
    let ran = run_answered(
        &sandbox,
        "interactive_adr_planning",
        &answers.to_string(),
        &["--input", "title=Queue for billing"],
    );
    let report = ran.assert_code(0).json();
    assert_eq!(
        report["output"]["adr"],
        "docs/adrs/0001-queue-for-billing.md"
    );
    assert_eq!(
        report["nodes"]["research_draft"]["output"]["model"],
        "person"
    );
    let adr = std::fs::read_to_string(
        sandbox
            .workspace
            .join("docs/adrs/0001-queue-for-billing.md"),
    )
    .unwrap();
    assert!(adr.contains("We choose **Queue**."), "{adr}");
    assert!(adr.contains("- [ ] Provision the queue (priority: high, effort: 2d)"));
    let todo = &report["output"]["todos"][0];
    assert_eq!(todo["title"], "Provision the queue");
    assert_eq!(todo["tags"], json!(["adr-0001", "priority:high"]));
}

#[test]
fn a_run_resumed_to_park_its_questions_keeps_them_parked_for_the_next_resume() {
    let sandbox = Sandbox::new();
    sandbox.workflow("ask.toml", ASK);
    let store = Store::open(&sandbox.db).unwrap();
    let mut child = spawn_quiet(&sandbox, &["workflows", "run", "ask"]);
    wait_until("the run is recorded", || latest_run(&store).is_some());
    child.kill().unwrap();
    child.wait().unwrap();
    let id = latest_run(&store).unwrap();
    assert_eq!(store.run(&id).unwrap().unwrap().answers, "none");

    // Resumed to park its question, then killed while it waits for the answer.
    let mut child = spawn_quiet(
        &sandbox,
        &["workflows", "resume", &id, "--wait-for-answers"],
    );
    wait_until("the approval is asked", || {
        store.questions(&id).unwrap().len() == 1
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(store.run(&id).unwrap().unwrap().answers, "parked");

    // Answered from another terminal, the next plain resume takes the answer instead of
    // failing the node for want of a default.
    let answered = sandbox.run(&["workflows", "answer", &id, "approve", r#"{"ok": true}"#]);
    answered.assert_code(0);
    let report = sandbox
        .run(&["workflows", "resume", &id])
        .assert_code(0)
        .json();
    assert_eq!(report["nodes"]["todo"]["output"]["title"], "approved world");
}

#[test]
fn workflows_answer_refuses_an_answer_that_does_not_fit_with_its_problems_and_asks_again() {
    let sandbox = Sandbox::new();
    sandbox.workflow("answers.toml", ANSWERS);
    let store = Store::open(&sandbox.db).unwrap();
    let mut child = spawn_quiet(
        &sandbox,
        &["workflows", "run", "answers", "--wait-for-answers"],
    );
    let run = || latest_run(&store);
    wait_until("the release is asked", || {
        run().is_some_and(|id| store.questions(&id).unwrap().len() == 1)
    });
    let id = run().unwrap();
    let misfit = r#"{"name": "far too long", "colour": "red"}"#;
    let refused = sandbox.run(&["workflows", "answer", &id, "release", misfit]);
    refused.assert_code(1);
    for problem in [
        "`name`: must be at most 8 UTF-16 code units long (got 12)",
        "`colour`: unknown property",
    ] {
        assert!(
            refused.stderr.contains(problem),
            "{problem} in\n{}",
            refused.stderr
        );
    }
    let keys: Vec<String> = store
        .questions(&id)
        .unwrap()
        .into_iter()
        .map(|q| q.key)
        .collect();
    assert_eq!(
        keys,
        ["attempt-1", "attempt-1.r2"],
        "asked again under a new key"
    );

    let taken = sandbox.run(&["workflows", "answer", &id, "release", r#"{"name": "1.4"}"#]);
    taken.assert_code(0);
    assert!(taken.stdout.contains("(attempt-1.r2)"), "{}", taken.stdout);
    child.kill().unwrap();
    child.wait().unwrap();
    let outcomes: Vec<String> = answer_rows(&sandbox).into_iter().map(|r| r.2).collect();
    assert_eq!(
        outcomes,
        ["rejected", "ok"],
        "the misfit, then the answer taken"
    );
}

/// A child run's questions are answered from the parent's answers file, keyed by the path
/// to them: `review>approve` for the child of `review`, `each#1>approve` for one instance
/// of a fanned-out `workflow` node, and `each>approve` for the others. A key whose first
/// node starts no child run is refused before the run, with the others' problems.
#[test]
fn an_answers_file_answers_the_questions_of_child_runs_by_their_path() {
    let sandbox = Sandbox::new();
    sandbox.workflow(
        "approval.toml",
        r#"
        [nodes.approve]
        input = { message = "Approve?", schema = { type = "object", properties = { ok = { type = "boolean" } }, required = ["ok"] } }
        "#,
    );
    sandbox.workflow(
        "parent.toml",
        r#"
        [nodes.review]
        workflow = "approval"
        [nodes.each]
        for_each = "['a', 'b', 'c']"
        workflow = "approval"
        [nodes.note]
        render = "done"
        "#,
    );
    let answers = r#"{"review>approve": {"ok": true}, "each>approve": {"ok": false},
        "each#1>approve": {"ok": true}}"#;
    let ran = run_answered(&sandbox, "parent", answers, &[]);
    ran.assert_code(0);
    for unit in ["`review>approve`", "`each#0>approve`", "`each#1>approve`"] {
        assert!(
            ran.stderr.contains(&format!("{unit}: answered from")),
            "{unit} in\n{}",
            ran.stderr
        );
    }
    let mut answered: Vec<Value> = answer_rows(&sandbox)
        .into_iter()
        .map(|(node, args, outcome)| {
            assert_eq!((node.as_str(), outcome.as_str()), ("approve", "ok"));
            args["answer"].clone()
        })
        .collect();
    answered.sort_by_key(|answer| answer.to_string());
    assert_eq!(
        answered,
        [
            json!({"ok": false}),
            json!({"ok": false}),
            json!({"ok": true}),
            json!({"ok": true})
        ]
    );

    let wrong = r#"{"note>approve": {"ok": true}, "nope>approve": {}, "review>": {}}"#;
    let ran = run_answered(&sandbox, "parent", wrong, &[]);
    ran.assert_code(1);
    for problem in [
        "`note>approve`: `note` is a render node, not a `workflow` node",
        "`nope>approve`: `nope` names no node of workflow `parent`",
        "`review>`: a child run's question is keyed by its path",
    ] {
        assert!(ran.stderr.contains(problem), "{problem} in\n{}", ran.stderr);
    }
}

/// A child run's question that nothing here answers takes the default of the child's own
/// node, not of the parent's node at the same place in its plan.
#[test]
fn a_child_runs_question_left_unanswered_takes_its_own_nodes_default() {
    let sandbox = Sandbox::new();
    sandbox.workflow(
        "approval.toml",
        r#"
        [nodes.approve]
        input = { message = "Approve?", schema = { type = "object", properties = { ok = { type = "boolean" } } }, default = { ok = true } }
        "#,
    );
    sandbox.workflow(
        "parent.toml",
        r#"
        [nodes.first]
        input = { message = "Name?", schema = { type = "object", properties = { name = { type = "string" } } }, default = { name = "parent's" } }
        [nodes.review]
        workflow = "approval"
        needs = ["first"]
        "#,
    );
    let ran = run_answered(&sandbox, "parent", "{}", &[]);
    ran.assert_code(0);
    let said = ran
        .stderr
        .lines()
        .find(|line| line.starts_with("`review>approve`: "));
    assert!(
        said.is_some_and(|line| line.ends_with("answers.json has no answer; it takes its default")),
        "{}",
        ran.stderr
    );
    let answered: Vec<(String, Value)> = answer_rows(&sandbox)
        .into_iter()
        .map(|(node, args, _)| (node, args["answer"].clone()))
        .collect();
    assert!(
        answered.contains(&("approve".to_owned(), json!({"ok": true}))),
        "{answered:?}"
    );
}
