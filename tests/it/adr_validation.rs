//! `adr_validation` (`workflows/adr_validation.toml`, one `adr_check` child run per ADR)
//! end to end, in process, on the fixture corpus of `tests/fixtures/adrs`: every planted
//! defect found with its rule and line and nothing on a clean ADR, in the Nygard, MADR 4
//! and log4brains formats; the ratchet against the last run over the folder, its todos
//! made once; the folder found or refused clearly; another principal's runs never its
//! baseline; a folder too large for the budgets refused, not hung on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcp_task_server::app::{App, Config};
use mcp_task_server::engine::report::{NodeStatus, RunReport, RunStatus};
use mcp_task_server::engine::{Limits, RunOptions};
use mcp_task_server::runs::RegistryConfig;
use mcp_task_server::store::Owner;
use serde_json::{Value, json};

use crate::support::backends::{Place, on_both_backends};
use crate::support::engine::checked_inputs;
use crate::support::wire::Wire;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/adrs");

fn start() -> Wire {
    Wire::start_in(RegistryConfig::default(), &[])
}

/// Copies the fixture folder `name` to `to`, which is made.
fn copy_fixture(name: &str, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(Path::new(FIXTURES).join(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// The line (from 1) of the first line of the fixture file that holds `needle`.
fn line_of(folder: &str, file: &str, needle: &str) -> u64 {
    let text = std::fs::read_to_string(Path::new(FIXTURES).join(folder).join(file)).unwrap();
    let at = text.lines().position(|line| line.contains(needle));
    at.unwrap_or_else(|| panic!("{needle:?} in {file}")) as u64 + 1
}

fn call(arguments: Value) -> Value {
    json!({ "name": "adr_validation", "arguments": arguments,
        "_meta": { "progressToken": "adrs" } })
}

/// The run's output, after checking that the call succeeded.
fn output(reply: &Value) -> &Value {
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    &reply["result"]["structuredContent"]["data"]["output"]
}

/// A failed call's reason (the error of the node it failed at) and its run's output.
fn failure(reply: &Value) -> (&str, &Value) {
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let content = &reply["result"]["structuredContent"];
    assert_eq!(content["error"]["code"], "run_failed");
    let nodes = content["data"]["nodes"].as_object().unwrap();
    // `analyse` fails without a model and the run goes on past it: not why a run failed.
    let failed = nodes
        .iter()
        .find(|(id, node)| node["status"] == "failed" && id.as_str() != "analyse")
        .map(|(_, node)| node);
    let message =
        failed.unwrap_or_else(|| panic!("a failed node in {content}"))["error"]["message"]
            .as_str()
            .unwrap();
    (message, &content["data"]["output"])
}

/// The error of the node a run failed at.
fn failed_node(report: &RunReport) -> String {
    let failed = report
        .nodes
        .values()
        .find(|node| node.status == NodeStatus::Failed);
    let error = failed.and_then(|node| node.error.as_ref());
    error
        .map(|error| error.message.clone())
        .unwrap_or_else(|| format!("{report:?}"))
}

/// The findings as (rule, file, line), sorted.
fn found(out: &Value) -> Vec<(String, String, u64)> {
    let mut found: Vec<(String, String, u64)> = out["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let file = f["file"].as_str().unwrap().to_owned();
            (
                f["rule"].as_str().unwrap().to_owned(),
                file,
                f["line"].as_u64().unwrap(),
            )
        })
        .collect();
    found.sort();
    found
}

fn todo_titles(wire: &Wire) -> Vec<String> {
    let store = wire.registry.store();
    let all = store.list_todos(&Default::default()).unwrap();
    all.into_iter()
        .inspect(|t| assert_eq!(t.tags, ["adr-lint"]))
        .map(|t| t.title)
        .collect()
}

#[tokio::test]
async fn every_planted_defect_is_found_with_its_rule_and_line_and_a_clean_adr_has_none() {
    let mut wire = start();
    copy_fixture("defects", &wire.dir.path().join("docs/adrs"));
    wire.initialize(json!({})).await;
    let reply = wire.request(1, "tools/call", call(json!({}))).await;
    let out = output(&reply);
    let at = |file: &str, needle: &str| line_of("defects", file, needle);
    let mut expected: Vec<(&str, &str, u64)> = vec![
        ("title-number", "0002-use-a-message-queue.md", 1),
        (
            "status-invalid",
            "0003-cache-sessions-in-redis.md",
            at("0003-cache-sessions-in-redis.md", "Finished"),
        ),
        (
            "date-invalid",
            "0004-log-in-json.md",
            at("0004-log-in-json.md", "Date:"),
        ),
        (
            "section-empty",
            "0005-deploy-with-containers.md",
            at("0005-deploy-with-containers.md", "## Consequences"),
        ),
        ("section-missing", "0006-split-the-monolith.md", 1),
        (
            "options-too-few",
            "0008-choose-a-search-engine.md",
            at("0008-choose-a-search-engine.md", "## Considered Options"),
        ),
        (
            "date-missing",
            "0009-pick-a-ci-service.md",
            at("0009-pick-a-ci-service.md", "# Pick"),
        ),
        (
            "section-missing",
            "0010-version-the-api.md",
            at("0010-version-the-api.md", "# Version"),
        ),
        (
            "supersede-backlink",
            "0012-use-a-secrets-manager.md",
            at("0012-use-a-secrets-manager.md", "Accepted"),
        ),
        (
            "supersede-missing",
            "0013-keep-a-changelog.md",
            at("0013-keep-a-changelog.md", "Superseded by 99"),
        ),
        (
            "link-broken",
            "0014-document-the-api.md",
            at("0014-document-the-api.md", "../guides/api.md"),
        ),
        ("number-duplicate", "0015-use-feature-flags.md", 1),
        ("number-duplicate", "0015-use-trunk-based-development.md", 1),
        ("number-missing", "0017-measure-lead-time.md", 1),
        (
            "status-invalid",
            "20240210-track-decisions-in-log4brains.md",
            at(
                "20240210-track-decisions-in-log4brains.md",
                "- Status: done",
            ),
        ),
        ("file-name", "20241301-plan-capacity.md", 1),
        (
            "index-status",
            "README.md",
            at("README.md", "0007-use-madr.md"),
        ),
    ];
    expected.sort();
    let expected: Vec<(String, String, u64)> = expected
        .into_iter()
        .map(|(rule, file, line)| (rule.to_owned(), format!("docs/adrs/{file}"), line))
        .collect();
    assert_eq!(found(out), expected);

    // Each finding says its severity, its identity and why; the identity has no line.
    let findings = out["findings"].as_array().unwrap();
    let by_rule = |rule: &str| findings.iter().find(|f| f["rule"] == rule).unwrap();
    assert_eq!(by_rule("number-missing")["severity"], "warning");
    assert_eq!(by_rule("number-missing")["detail"], "16");
    assert_eq!(
        by_rule("section-empty")["id"],
        "section-empty docs/adrs/0005-deploy-with-containers.md consequences"
    );
    assert_eq!(
        by_rule("link-broken")["message"],
        "the link `../guides/api.md` leads to no file"
    );
    assert!(
        by_rule("index-status")["message"]
            .as_str()
            .unwrap()
            .contains("the index says proposed, 0007-use-madr.md says accepted")
    );
    assert_eq!(out["counts"], json!({ "errors": 16, "warnings": 1 }));
    let formats = out["formats"].as_array().unwrap();
    for format in ["nygard", "madr", "log4brains"] {
        assert!(formats.contains(&json!(format)), "{format} in {formats:?}");
    }
    // The first run is the baseline: it passes, and each error is a todo.
    assert_eq!(out["passed"], true);
    assert_eq!(out["ratchet"]["baseline"], Value::Null);
    assert_eq!(todo_titles(&wire).len(), 16);
}

#[tokio::test]
async fn a_clean_corpus_in_three_formats_passes_with_no_finding_a_table_per_adr_and_no_todo() {
    let mut wire = start();
    copy_fixture("clean", &wire.dir.path().join("docs/adrs"));
    wire.initialize(json!({})).await;
    let reply = wire.request(1, "tools/call", call(json!({}))).await;
    let out = output(&reply);
    assert_eq!(out["findings"], json!([]), "{out}");
    assert_eq!(
        out["formats"],
        json!(["nygard", "nygard", "madr", "log4brains"])
    );
    assert_eq!(out["folder"], "docs/adrs");
    assert_eq!(todo_titles(&wire), Vec::<String>::new());
    let asked = wire.seen.iter().filter(|m| m.get("id").is_some()).count();
    assert_eq!(asked, 0, "nothing is asked");

    let report = out["report"].as_str().unwrap();
    assert!(report.starts_with("docs/adr-reports/") && report.ends_with("-docs-adrs.md"));
    let text = std::fs::read_to_string(wire.dir.path().join(report)).unwrap();
    for needle in [
        "# ADR validation: docs/adrs\n",
        "- ADRs: 4\n",
        "- Errors: 0, warnings: 0\n",
        "### 0003-store-data-in-sqlite-or-postgresql.md\n",
        "Store data in SQLite or PostgreSQL · madr · accepted · 2024-03-01",
        "No findings.",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
    // One sub-task per ADR: four child runs of `adr_check`.
    let runs = &reply["result"]["structuredContent"]["data"];
    assert_eq!(runs["status"], "succeeded");
    let link = reply["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "resource_link");
    assert!(link.is_some(), "the report is linked: {reply}");
}

/// Writes `text` as the ADR `file` of the workspace's docs/adrs.
fn write_adr(wire: &Wire, file: &str, text: &str) {
    std::fs::write(wire.dir.path().join("docs/adrs").join(file), text).unwrap();
}

fn read_adr(wire: &Wire, file: &str) -> String {
    std::fs::read_to_string(wire.dir.path().join("docs/adrs").join(file)).unwrap()
}

#[tokio::test]
async fn the_ratchet_fails_a_run_with_a_new_error_naming_it_and_passes_one_with_fewer() {
    let mut wire = start();
    copy_fixture("clean", &wire.dir.path().join("docs/adrs"));
    let first = "0001-record-architecture-decisions.md";
    let clean_first = read_adr(&wire, first);
    write_adr(
        &wire,
        first,
        &clean_first.replace("Date: 2024-01-15", "Date: 15 January 2024"),
    );
    wire.initialize(json!({})).await;

    // The baseline: one error, one todo.
    let reply = wire.request(1, "tools/call", call(json!({}))).await;
    let out = output(&reply);
    assert_eq!(
        out["errors"],
        json!(["date-invalid docs/adrs/0001-record-architecture-decisions.md"])
    );
    assert_eq!(
        todo_titles(&wire),
        ["date-invalid docs/adrs/0001-record-architecture-decisions.md"]
    );

    // A new error: the run fails naming it, its findings still in its output.
    let madr = "0003-store-data-in-sqlite-or-postgresql.md";
    let clean_madr = read_adr(&wire, madr);
    write_adr(
        &wire,
        madr,
        &clean_madr.replace("status: accepted", "status: approved"),
    );
    let reply = wire.request(2, "tools/call", call(json!({}))).await;
    let (message, out) = failure(&reply);
    assert!(message.contains("ADR errors rose from 1 to 2"), "{message}");
    assert!(
        message
            .contains("new: status-invalid docs/adrs/0003-store-data-in-sqlite-or-postgresql.md"),
        "{message}"
    );
    assert!(!message.contains("date-invalid"), "{message}");
    assert_eq!(out["ratchet"]["new"].as_array().unwrap().len(), 1);
    assert_eq!(out["errors"].as_array().unwrap().len(), 2);
    assert_eq!(todo_titles(&wire).len(), 2);

    // Again, unchanged: the failed run is the baseline; nothing rose, nothing is new.
    let reply = wire.request(3, "tools/call", call(json!({}))).await;
    let out = output(&reply);
    assert_eq!(out["ratchet"]["before"], 2);
    assert_eq!(out["ratchet"]["new"], json!([]));
    assert_eq!(todo_titles(&wire).len(), 2, "no duplicate todo");

    // One error fewer: it passes, and says which was fixed.
    write_adr(&wire, first, &clean_first);
    let reply = wire.request(4, "tools/call", call(json!({}))).await;
    let out = output(&reply);
    assert_eq!(out["passed"], true);
    assert_eq!(
        (
            out["ratchet"]["before"].as_u64(),
            out["ratchet"]["after"].as_u64()
        ),
        (Some(2), Some(1))
    );
    assert_eq!(
        out["ratchet"]["fixed"],
        json!(["date-invalid docs/adrs/0001-record-architecture-decisions.md"])
    );

    // The error comes back while its todo is still open: the run fails, and no second
    // todo is made for it.
    write_adr(
        &wire,
        first,
        &clean_first.replace("Date: 2024-01-15", "Date: 15 January 2024"),
    );
    let reply = wire.request(5, "tools/call", call(json!({}))).await;
    let (message, _) = failure(&reply);
    assert!(
        message.contains("new: date-invalid docs/adrs/0001"),
        "{message}"
    );
    let titles = todo_titles(&wire);
    assert_eq!(titles.len(), 2, "{titles:?}");
}

#[tokio::test]
async fn the_folder_is_docs_adrs_else_docs_decisions_and_a_missing_or_empty_one_is_refused_clearly()
{
    let mut wire = start();
    wire.initialize(json!({})).await;
    let reply = wire.request(1, "tools/call", call(json!({}))).await;
    let (message, _) = failure(&reply);
    assert!(
        message
            .contains("no ADR folder: neither docs/adrs nor docs/decisions holds a Markdown file"),
        "{message}"
    );
    let reply = wire
        .request(2, "tools/call", call(json!({ "folder": "docs/none" })))
        .await;
    let (message, _) = failure(&reply);
    assert!(message.contains("no ADR in docs/none"), "{message}");
    // A folder outside the workspace is refused, as every file action's path is.
    for (id, outside, why) in [
        (6, "../etc", "contains `..`; refused"),
        (7, "/etc", "is absolute"),
    ] {
        let reply = wire
            .request(id, "tools/call", call(json!({ "folder": outside })))
            .await;
        let (message, _) = failure(&reply);
        assert!(message.contains(why), "{outside}: {message}");
    }

    copy_fixture("clean", &wire.dir.path().join("docs/decisions"));
    let reply = wire.request(3, "tools/call", call(json!({}))).await;
    assert_eq!(output(&reply)["folder"], "docs/decisions");
    assert_eq!(output(&reply)["findings"], json!([]));

    // Both: docs/adrs first. A README alone is no ADR.
    std::fs::create_dir_all(wire.dir.path().join("docs/adrs")).unwrap();
    write_adr(&wire, "README.md", "# Decisions\n");
    let reply = wire.request(4, "tools/call", call(json!({}))).await;
    let (message, _) = failure(&reply);
    assert!(message.contains("no ADR in docs/adrs"), "{message}");
    copy_fixture("clean", &wire.dir.path().join("docs/adrs"));
    let reply = wire.request(5, "tools/call", call(json!({}))).await;
    assert_eq!(output(&reply)["folder"], "docs/adrs");
}

// ── Through the application, for other principals and other limits ─────────────────────

struct World {
    app: App,
    workspace: tempfile::TempDir,
    _place: Place,
}

impl World {
    fn new(limits: Limits) -> World {
        World::on(Place::sqlite(), limits)
    }

    fn on(place: Place, limits: Limits) -> World {
        let workspace = tempfile::tempdir().unwrap();
        let app = App::open(&Config {
            limits,
            ..Config::new(place.location(), workspace.path())
        })
        .expect("the application opens");
        World {
            app,
            workspace,
            _place: place,
        }
    }

    fn adrs(&self) -> PathBuf {
        self.workspace.path().join("docs/adrs")
    }

    /// A run of `adr_validation` to its end for `principal`.
    async fn validate(&self, principal: &str) -> RunReport {
        let plan = Arc::clone(&self.app.workflows().get("adr_validation").unwrap().plan);
        let options = RunOptions {
            owner: Owner {
                principal: Some(principal.to_owned()),
                session: None,
            },
            ..RunOptions::default()
        };
        let inputs = checked_inputs(&plan, json!({}));
        let report = self.app.engine().run(plan, inputs, options).await;
        // Runs that end in the same millisecond are ordered by id: these are kept apart.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        report
    }
}

on_both_backends! {
    async fn another_principal_never_takes_a_run_of_someone_else_as_its_baseline(place) {
        let world = World::on(place, Limits::default());
        copy_fixture("clean", &world.adrs());
        let first = world.adrs().join("0001-record-architecture-decisions.md");
        let clean = std::fs::read_to_string(&first).unwrap();
        std::fs::write(&first, clean.replace("## Context", "## Background")).unwrap();
        let alice = world.validate("alice").await;
        assert_eq!(alice.status, RunStatus::Succeeded, "{:?}", alice.error);
        assert_eq!(alice.output["ratchet"]["baseline"], Value::Null);

        let madr = world
            .adrs()
            .join("0003-store-data-in-sqlite-or-postgresql.md");
        let text = std::fs::read_to_string(&madr).unwrap();
        std::fs::write(&madr, text.replace("date: 2024-03-01", "date: March 2024")).unwrap();
        let alice_again = world.validate("alice").await;
        assert_eq!(alice_again.status, RunStatus::Failed);
        assert_eq!(
            alice_again.output["ratchet"]["baseline"],
            json!(alice.run_id)
        );

        // Bob's ratchet starts fresh: alice's runs over the same folder are not his.
        let bob = world.validate("bob").await;
        assert_eq!(bob.status, RunStatus::Succeeded, "{:?}", bob.error);
        assert_eq!(bob.output["ratchet"]["baseline"], Value::Null);
        assert_eq!(bob.output["ratchet"]["after"], 2);
        let bob_again = world.validate("bob").await;
        assert_eq!(bob_again.output["ratchet"]["baseline"], json!(bob.run_id));
    }
}

#[tokio::test]
async fn a_folder_larger_than_the_run_units_allow_fails_with_the_budget_named() {
    let limits = Limits {
        max_run_units: 200,
        ..Limits::default()
    };
    let world = World::new(limits);
    std::fs::create_dir_all(world.adrs()).unwrap();
    let nygard = std::fs::read_to_string(
        Path::new(FIXTURES).join("clean/0001-record-architecture-decisions.md"),
    )
    .unwrap();
    for n in 1..=60 {
        let text = nygard.replace("# 1. ", &format!("# {n}. "));
        std::fs::write(
            world
                .adrs()
                .join(format!("{n:04}-record-architecture-decisions.md")),
            text,
        )
        .unwrap();
    }
    let report = world.validate("alice").await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = failed_node(&report);
    assert!(
        error.contains("over the max-run-units budget (200)"),
        "{error}"
    );
    let check = &report.nodes["check"];
    assert_eq!(
        check.error.as_ref().unwrap().code.as_str(),
        "budget_exceeded"
    );
}

#[tokio::test]
async fn a_folder_of_more_entries_than_one_listing_holds_is_refused_before_any_adr_is_read() {
    let world = World::new(Limits::default());
    std::fs::create_dir_all(world.adrs()).unwrap();
    for n in 1..=1001 {
        std::fs::write(world.adrs().join(format!("{n:04}-x.md")), "# x\n").unwrap();
    }
    let report = world.validate("alice").await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = failed_node(&report);
    assert!(error.contains("holds more than 1 000 entries"), "{error}");
    assert_eq!(report.nodes["check"].status, NodeStatus::Skipped);
}

#[tokio::test]
async fn an_adr_too_large_for_the_template_budgets_is_a_finding_and_the_others_are_checked() {
    let world = World::new(Limits::default());
    copy_fixture("clean", &world.adrs());
    let lines = "a line\n".repeat(30_000);
    let text = format!(
        "# 4. Many lines\n\nDate: 2024-01-01\n\n## Status\n\nAccepted\n\n## Context\n\n{lines}"
    );
    std::fs::write(world.adrs().join("0004-many-lines.md"), text).unwrap();
    let report = world.validate("alice").await;
    assert_eq!(
        report.status,
        RunStatus::Succeeded,
        "{}",
        failed_node(&report)
    );
    let findings = report.output["findings"].as_array().unwrap();
    let rules: Vec<(&str, &str)> = findings
        .iter()
        .map(|f| (f["rule"].as_str().unwrap(), f["file"].as_str().unwrap()))
        .collect();
    assert_eq!(rules, [("check-failed", "docs/adrs/0004-many-lines.md")]);
    assert_eq!(report.output["adrs"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn a_baseline_too_large_to_read_back_fails_the_next_run_rather_than_pass_it_unchecked() {
    let limits = Limits {
        max_history_bytes: 2048,
        ..Limits::default()
    };
    let world = World::new(limits);
    copy_fixture("defects", &world.adrs());
    let first = world.validate("alice").await;
    assert_eq!(
        first.status,
        RunStatus::Succeeded,
        "{}",
        failed_node(&first)
    );
    let second = world.validate("alice").await;
    assert_eq!(second.status, RunStatus::Failed);
    let error = failed_node(&second);
    assert!(
        error.contains("is too large to read back as the baseline (--max-history-bytes)"),
        "{error}"
    );
}

/// A reply of the client's model.
fn model_says(text: &str) -> Value {
    json!({ "role": "assistant", "model": "test-model", "stopReason": "endTurn",
        "content": { "type": "text", "text": text } })
}

#[tokio::test]
async fn with_analysis_the_model_reviews_each_adr_not_reviewed_up_front_and_without_one_it_is_left_out()
 {
    let mut wire = start();
    copy_fixture("clean", &wire.dir.path().join("docs/adrs"));
    wire.initialize(json!({ "sampling": {} })).await;
    let model = |request: &Value| {
        let prompt = request["params"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap();
        assert!(prompt.contains("Is the decision clear?"), "{prompt}");
        let file = prompt
            .split_whitespace()
            .nth(1)
            .unwrap()
            .trim_end_matches(':');
        model_says(&format!("{file} is clear."))
    };
    let given =
        json!([{ "file": "0001-record-architecture-decisions.md", "text": "Reviewed by hand." }]);
    let arguments = json!({ "analysis": true, "analyses": given });
    let reply = wire
        .request_answering(1, "tools/call", call(arguments), &model)
        .await;
    let out = output(&reply);
    let asked: Vec<&str> = wire
        .seen
        .iter()
        .filter(|m| m["method"] == "sampling/createMessage")
        .filter_map(|m| m["params"]["messages"][0]["content"]["text"].as_str())
        .collect();
    assert_eq!(
        asked.len(),
        3,
        "the ADR reviewed up front is not put to the model"
    );
    // The ADR after the first one asked about is shown to the model with it.
    let about_0002 = asked
        .iter()
        .find(|p| p.contains("ADR 0002-store-data-in-postgresql.md:"))
        .unwrap();
    assert!(
        about_0002.contains("- 0003-store-data-in-sqlite-or-postgresql.md (accepted)"),
        "{about_0002}"
    );
    assert_eq!(
        out["analysis"],
        json!([
            { "file": "0001-record-architecture-decisions.md", "text": "Reviewed by hand.", "by": "given" },
            { "file": "0002-store-data-in-postgresql.md", "text": "0002-store-data-in-postgresql.md is clear.", "by": "test-model" },
            { "file": "0003-store-data-in-sqlite-or-postgresql.md", "text": "0003-store-data-in-sqlite-or-postgresql.md is clear.", "by": "test-model" },
            { "file": "20240105-adopt-log4brains.md", "text": "20240105-adopt-log4brains.md is clear.", "by": "test-model" }
        ])
    );

    // A client without a model: the rules still run, and the analysis is left out.
    let mut plain = start();
    copy_fixture("clean", &plain.dir.path().join("docs/adrs"));
    plain.initialize(json!({})).await;
    let reply = plain
        .request(1, "tools/call", call(json!({ "analysis": true })))
        .await;
    let out = output(&reply);
    assert_eq!(out["analysis"], json!([]));
    assert_eq!(out["findings"], json!([]));
    let text =
        std::fs::read_to_string(plain.dir.path().join(out["report"].as_str().unwrap())).unwrap();
    assert!(
        text.contains("The analysis is left out: the client has no model to ask"),
        "{text}"
    );
}

/// The server's requests to the client the wire saw (questions put to it).
fn server_requests(wire: &Wire) -> Vec<&Value> {
    let asked = wire.seen.iter();
    asked
        .filter(|m| m.get("id").is_some() && m.get("method").is_some())
        .collect()
}

/// Checks that a run over the faulty fixture found what one without an analysis finds,
/// and that its report and output say the analysis was left out for want of a model.
async fn assert_complete_without_analysis(wire: &Wire, out: &Value) {
    let mut rules_only = start();
    copy_fixture("defects", &rules_only.dir.path().join("docs/adrs"));
    rules_only.initialize(json!({})).await;
    let reply = (rules_only)
        .request(1, "tools/call", call(json!({ "analysis": false })))
        .await;
    let expected = output(&reply);
    assert!(!found(expected).is_empty());
    assert_eq!(found(out), found(expected), "the findings are complete");
    assert_eq!(out["counts"], expected["counts"]);
    assert_eq!(out["analysis"], json!([]));
    let why = out["analysis_left_out"].as_str().unwrap();
    assert!(why.contains("the client has no model"), "{why}");
    let text = std::fs::read_to_string(wire.dir.path().join(out["report"].as_str().unwrap()));
    let text = text.unwrap();
    assert!(
        text.contains("## Analysis\n\nThe analysis is left out: the client has no model to ask"),
        "{text}"
    );
}

#[tokio::test]
async fn a_client_that_can_elicit_but_has_no_model_is_asked_nothing_and_gets_every_finding() {
    let mut wire = start();
    copy_fixture("defects", &wire.dir.path().join("docs/adrs"));
    wire.initialize(json!({ "elicitation": {} })).await;
    // The defaults: the analysis is on.
    let reply = wire.request(1, "tools/call", call(json!({}))).await;
    let out = output(&reply);
    assert_eq!(
        server_requests(&wire),
        Vec::<&Value>::new(),
        "no form, no sample"
    );
    assert_complete_without_analysis(&wire, out).await;
}

#[tokio::test]
async fn a_task_of_a_client_that_can_elicit_but_has_no_model_is_asked_nothing_and_finishes() {
    let mut wire = start();
    copy_fixture("defects", &wire.dir.path().join("docs/adrs"));
    wire.initialize(json!({ "elicitation": {} })).await;
    let params = json!({ "name": "adr_validation", "arguments": {}, "task": { "ttl": 60000 } });
    let created = wire.request(1, "tools/call", params).await;
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // `tasks/result` puts the task's questions to the client until it ends.
    let result = wire
        .request(2, "tasks/result", json!({ "taskId": task_id }))
        .await;
    assert_eq!(
        server_requests(&wire),
        Vec::<&Value>::new(),
        "no form, no sample"
    );
    assert_eq!(result["result"]["isError"], false, "{result}");
    let out = &result["result"]["structuredContent"]["data"]["output"];
    assert_complete_without_analysis(&wire, out).await;
}

#[tokio::test]
async fn by_default_a_client_with_a_model_is_sampled_once_per_adr_and_never_shown_a_form() {
    let mut wire = start();
    copy_fixture("clean", &wire.dir.path().join("docs/adrs"));
    wire.initialize(json!({ "elicitation": {}, "sampling": {} }))
        .await;
    let reply = wire
        .request_answering(1, "tools/call", call(json!({})), &|_| model_says("Clear."))
        .await;
    let out = output(&reply);
    let methods: Vec<&str> = server_requests(&wire)
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    let adrs = out["adrs"].as_array().unwrap().len();
    assert_eq!(adrs, 4);
    assert_eq!(methods, vec!["sampling/createMessage"; adrs]);
    let reviews = out["analysis"].as_array().unwrap();
    assert_eq!(reviews.len(), adrs, "{out}");
    assert!(
        reviews.iter().all(|r| r["by"] == "test-model"),
        "{reviews:?}"
    );
    assert_eq!(out["analysis_left_out"], Value::Null);
}
