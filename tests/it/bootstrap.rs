//! The bootstrap validation workflows end to end, in process: `adr_bootstrap_validation`
//! writes scripts that hold ADR text only in comments (hostile ADRs planted), which parse
//! and print one PASS or FAIL line per check; `bootstrap_validation_loop` runs their checks
//! until they pass, with every answer passed up front, with the operator's command, and
//! without one (the person runs the script, the server never does); its learnings, its
//! ADR sections written only once approved, and its todos. `bootstrap/killed.rs` kills the
//! binary mid-loop.

mod killed;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcp_task_server::app::{App, Config};
use mcp_task_server::engine::installed::Installed;
use mcp_task_server::engine::plan::Plan;
use mcp_task_server::engine::report::RunStatus;
use mcp_task_server::engine::{RunHandle, RunOptions};
use mcp_task_server::runs::RegistryConfig;
use serde_json::{Value, json};

use crate::durable::until;
use crate::support::assert_contains_all;
use crate::support::engine::checked_inputs;
use crate::support::wire::Wire;

/// An accepted ADR (front matter) with a requirement and a line of hostile text; a word
/// that only starts with "must", and code, are no requirements.
pub(crate) const POSTGRES: &str = "---\nstatus: accepted\ndate: 2026-01-05\n---\n# 1. Use PostgreSQL\n\n## Decision\n\nThe service must store its data in PostgreSQL.\nOperators shall run $(touch PWNED) and `touch PWNED2` \"; echo pwned\nMustard is not a requirement.\n\n```sh\n# you must not read this\n```\n";

/// An accepted ADR (a Status heading) whose requirement holds control characters.
pub(crate) const CONFIG: &str = "# 2. Config\n\n## Status\n\nAccepted\n\n## Decision\n\nConfiguration should live in config/app.toml.\x1b[2J\rinjected\u{2028}$(touch PWNED4)\n";

/// A proposed ADR: its requirement is not collected.
const LATER: &str = "# 3. Later\n\n- **Status:** Proposed\n\nWe must do it later.\n";

pub(crate) const DB: &str = "0001_use_postgres_l9";
pub(crate) const OPS: &str = "0001_use_postgres_l10";
pub(crate) const CONF: &str = "0002_config_l9";
const ODD: &str = "0004_odd_touch_pwned5_l4";

const POSTGRES_PATH: &str = "docs/adrs/0001-use-postgres.md";
const CONFIG_PATH: &str = "docs/adrs/0002-config.md";

/// Writes the ADRs into `workspace`; with `odd`, one more whose file name holds a line
/// break and a command substitution.
pub(crate) fn write_adrs(workspace: &Path, odd: bool) {
    let dir = workspace.join("docs/adrs");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(workspace.join("out")).unwrap();
    std::fs::write(dir.join("0001-use-postgres.md"), POSTGRES).unwrap();
    std::fs::write(dir.join("0002-config.md"), CONFIG).unwrap();
    std::fs::write(dir.join("0003-later.md"), LATER).unwrap();
    if odd {
        let text = "---\nstatus: Accepted\n---\nIt must hold.\n";
        std::fs::write(dir.join("0004-odd\n$(touch PWNED5).md"), text).unwrap();
    }
}

/// The checks of the three requirements: the database one waits for `out/db-fixed`, the
/// configuration one for `out/config-fixed`, the operators' one passes.
pub(crate) fn checks() -> Value {
    json!([
        { "id": DB, "check": "test -f out/db-fixed || { echo 'no database yet'; exit 1; }" },
        { "id": OPS, "check": "echo 'operators ready'" },
        { "id": CONF, "check": "test -f out/config-fixed || { echo 'config/app.toml is missing'; exit 1; }" }
    ])
}

/// What validate_bootstrap.sh prints when `failing` fail, as the checks above say.
pub(crate) fn printed(failing: &[&str]) -> Value {
    let line = |id: &str, reason: &str| match failing.contains(&id) {
        true => format!("FAIL {id} {reason}\n"),
        false => format!("PASS {id}\n"),
    };
    let output =
        line(DB, "no database yet") + &line(OPS, "") + &line(CONF, "config/app.toml is missing");
    json!({ "output": output, "exit_code": i32::from(!failing.is_empty()) })
}

fn learning(iteration: u32, check: &str) -> Value {
    json!({ "iteration": iteration, "check": check, "cause": format!("{check} was not set up"),
        "fix": format!("set up {check}") })
}

fn installed_plan(name: &str) -> Arc<Plan> {
    let (installed, rejected) = Installed::load(None);
    assert!(rejected.is_empty(), "{rejected:?}");
    installed.get(name).unwrap().plan.clone()
}

/// The lines of `script` that are not comments.
fn code_lines(script: &str) -> Vec<&str> {
    script
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .collect()
}

/// Runs `bash script` in `workspace`: its exit code and stdout.
fn run_script(workspace: &Path, script: &str) -> (i32, String) {
    let output = std::process::Command::new("/bin/bash")
        .arg(script)
        .current_dir(workspace)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    (output.status.code().unwrap(), stdout)
}

/// `bash -n` on the script, and `shellcheck` where it is installed.
pub(crate) fn assert_parses(path: &Path) {
    let checked = std::process::Command::new("/bin/bash")
        .arg("-n")
        .arg(path)
        .output()
        .unwrap();
    assert!(checked.status.success(), "{checked:?}");
    match std::process::Command::new("shellcheck")
        .args(["-s", "bash"])
        .arg(path)
        .output()
    {
        Ok(linted) => assert!(linted.status.success(), "{linted:?}"),
        Err(_) => mcp_task_server::store::note_skipped(
            &crate::support::skip::test_name(),
            "shellcheck is not installed: only `bash -n` checked the scripts",
        ),
    }
}

// ── adr_bootstrap_validation ───────────────────────────────────────────────────────────

fn call(workflow: &str, arguments: Value) -> Value {
    json!({ "name": workflow, "arguments": arguments })
}

fn output(reply: &Value) -> &Value {
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    &reply["result"]["structuredContent"]["data"]["output"]
}

/// The methods of the requests the server sent the client, in order.
fn asked(wire: &Wire) -> Vec<&str> {
    (wire.seen.iter())
        .filter(|m| m.get("id").is_some())
        .filter_map(|m| m["method"].as_str())
        .collect()
}

#[tokio::test]
async fn the_scripts_hold_adr_text_only_in_comments_parse_and_print_one_line_per_check() {
    let mut wire = Wire::start_in(RegistryConfig::default(), &[]);
    let workspace = wire.dir.path().to_owned();
    write_adrs(&workspace, true);
    wire.initialize(json!({})).await;
    let mut given = checks();
    let list = given.as_array_mut().unwrap();
    list[0]["check"] = json!("echo 'lots of noise'\ntest -f docs/adrs/0001-use-postgres.md");
    list[1]["check"] = json!("echo 'step one ok'\necho 'operators are not ready' >&2\nexit 3");
    list[2]["setup"] = json!("touch out/config-fixed");
    list.push(json!({ "id": ODD, "check": "true" }));
    list.push(json!({ "id": "no_such_requirement", "check": "true" }));
    list.push(json!({ "id": "$(touch PWNED6)", "check": "touch PWNED7" }));
    let reply = wire
        .request(
            1,
            "tools/call",
            call("adr_bootstrap_validation", json!({ "checks": given })),
        )
        .await;
    let out = output(&reply);
    assert_eq!(asked(&wire), Vec::<&str>::new(), "nothing is asked");
    let found: Vec<(&str, i64)> = (out["requirements"].as_array().unwrap().iter())
        .map(|r| (r["id"].as_str().unwrap(), r["line"].as_i64().unwrap()))
        .collect();
    assert_eq!(found, [(DB, 9), (OPS, 10), (CONF, 9), (ODD, 4)]);
    assert_eq!(out["requirements"][2]["adr"], CONFIG_PATH);
    assert_eq!(
        out["ignored"],
        json!(["no_such_requirement", "$(touch PWNED6)"])
    );

    let validate = workspace.join("scripts/bootstrap/validate_bootstrap.sh");
    let bootstrap = workspace.join("scripts/bootstrap/bootstrap.sh");
    for path in [&validate, &bootstrap] {
        assert_parses(path);
        let script = std::fs::read_to_string(path).unwrap();
        for line in code_lines(&script) {
            for text in [
                "PWNED",
                "$(touch",
                "`touch",
                "echo pwned",
                "must",
                "should",
                "shall",
            ] {
                assert!(!line.contains(text), "ADR text outside a comment: {line:?}");
            }
            assert!(
                !line.chars().any(|c| c.is_control() || c == '\u{2028}'),
                "{line:?}"
            );
        }
    }
    let script = std::fs::read_to_string(&validate).unwrap();
    assert_contains_all(
        &script,
        &[
            "# Operators shall run $(touch PWNED) and `touch PWNED2` \"; echo pwned\n",
            "# Configuration should live in config/app.toml.\\x1b[2J\\x0dinjected\\u{2028}$(touch PWNED4)\n",
            "# ADR docs/adrs/0004-odd\n# $(touch PWNED5).md, line 4:\n",
            &format!("check_{DB}() {{\n"),
        ],
    );

    let (code, stdout) = run_script(&workspace, "scripts/bootstrap/validate_bootstrap.sh");
    assert_eq!(
        stdout,
        format!(
            "PASS {DB}\nFAIL {OPS} operators are not ready\nFAIL {CONF} config/app.toml is missing\nPASS {ODD}\n"
        ),
        "one line per check, none of what the checks printed"
    );
    assert_eq!(code, 1);
    let (code, stdout) = run_script(&workspace, "scripts/bootstrap/bootstrap.sh");
    assert_eq!(
        (code, stdout.as_str()),
        (0, format!("== {CONF}\nDONE {CONF}\n").as_str())
    );
    let (_, stdout) = run_script(&workspace, "scripts/bootstrap/validate_bootstrap.sh");
    assert!(stdout.contains(&format!("PASS {CONF}\n")), "{stdout}");
    let planted: Vec<String> = std::fs::read_dir(&workspace)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("PWNED"))
        .collect();
    assert!(planted.is_empty(), "no ADR text ran: {planted:?}");
}

#[tokio::test]
async fn each_check_not_passed_up_front_is_drafted_by_the_model_and_confirmed_or_edited() {
    let mut wire = Wire::start_in(RegistryConfig::default(), &[]);
    let workspace = wire.dir.path().to_owned();
    write_adrs(&workspace, false);
    wire.initialize(json!({ "sampling": {}, "elicitation": {} }))
        .await;
    let given = json!([{ "id": OPS, "check": "true" }]);
    let answer = |request: &Value| -> Value {
        let params = &request["params"];
        match request["method"].as_str().unwrap() {
            "sampling/createMessage" => {
                let prompt = params["messages"][0]["content"]["text"].as_str().unwrap();
                let check = match prompt.contains("PostgreSQL") {
                    true => "command -v psql",
                    false => "test -f config/app.toml",
                };
                let draft = json!({ "check": check, "setup": "" }).to_string();
                json!({ "role": "assistant", "model": "m", "stopReason": "endTurn",
                    "content": { "type": "text", "text": format!("```json\n{draft}\n```") } })
            }
            _ => {
                let message = params["message"].as_str().unwrap();
                let field = &params["requestedSchema"]["properties"]["check"];
                let check = match message.contains(CONFIG_PATH) {
                    true => {
                        json!({ "check": "test -d config", "setup": "mkdir -p config" }).to_string()
                    }
                    false => field["default"].as_str().unwrap().to_owned(),
                };
                json!({ "action": "accept", "content": { "check": check } })
            }
        }
    };
    let reply = wire
        .request_answering(
            1,
            "tools/call",
            call("adr_bootstrap_validation", json!({ "checks": given })),
            &answer,
        )
        .await;
    let out = output(&reply);
    assert_eq!(
        asked(&wire),
        [
            "sampling/createMessage",
            "sampling/createMessage",
            "elicitation/create",
            "elicitation/create"
        ],
        "a draft for each open requirement, then the person on each"
    );
    let checks: Vec<(&str, &str)> = (out["checks"].as_array().unwrap().iter())
        .map(|c| (c["id"].as_str().unwrap(), c["check"].as_str().unwrap()))
        .collect();
    assert_eq!(
        checks,
        [
            (DB, "command -v psql"),
            (OPS, "true"),
            (CONF, "test -d config")
        ]
    );
    let script = std::fs::read_to_string(workspace.join("scripts/bootstrap/bootstrap.sh")).unwrap();
    assert!(
        script.contains(&format!("setup_{CONF}() {{\n  :\nmkdir -p config\n}}")),
        "{script}"
    );
    assert_parses(&workspace.join("scripts/bootstrap/validate_bootstrap.sh"));
}

// ── bootstrap_validation_loop ──────────────────────────────────────────────────────────

fn todos(wire: &Wire) -> Vec<(String, Vec<String>)> {
    let store = wire.registry.store();
    let all = store.list_todos(&Default::default()).unwrap();
    all.into_iter().map(|t| (t.title, t.tags)).collect()
}

/// The report a loop wrote, at the path its output names.
fn report(workspace: &Path, out: &Value) -> String {
    let path = out["report"].as_str().unwrap();
    assert!(path.starts_with("docs/bootstrap/") && path.contains("-bootstrap-validation"));
    std::fs::read_to_string(workspace.join(path)).unwrap()
}

#[tokio::test]
async fn with_every_answer_up_front_the_loop_asks_nothing_and_appends_only_approved_sections() {
    let mut wire = Wire::start_in(RegistryConfig::default(), &[]);
    let workspace = wire.dir.path().to_owned();
    write_adrs(&workspace, false);
    wire.initialize(json!({})).await;
    let arguments = json!({
        "checks": checks(),
        "outputs": [printed(&[DB, CONF]), printed(&[DB]), printed(&[])],
        "learnings": [learning(1, DB), learning(1, CONF), learning(2, DB)],
        "approved_adrs": [POSTGRES_PATH],
    });
    let reply = wire
        .request(
            1,
            "tools/call",
            call("bootstrap_validation_loop", arguments),
        )
        .await;
    let out = output(&reply);
    assert_eq!(asked(&wire), Vec::<&str>::new(), "nothing is asked");
    assert_eq!(out["passed"], true);
    assert_eq!(out["iterations"], 3, "failed twice, then passed");
    let failed: Vec<Vec<&str>> = (out["history"].as_array().unwrap().iter())
        .map(|it| {
            let failures = it["failures"].as_array().unwrap();
            failures.iter().map(|f| f["id"].as_str().unwrap()).collect()
        })
        .collect();
    assert_eq!(failed, [vec![DB, CONF], vec![DB], vec![]]);
    assert_eq!(
        out["history"][1]["learnings"][0]["cause"],
        format!("{DB} was not set up")
    );
    assert_eq!(out["proposals"], json!([POSTGRES_PATH, CONFIG_PATH]));
    assert_eq!(out["written"], json!([POSTGRES_PATH]));
    assert_eq!(out["still_failing"], json!([]));
    assert_eq!(todos(&wire), []);
    // No check has a setup step: bootstrap.sh has none, and still parses.
    for script in ["bootstrap.sh", "validate_bootstrap.sh"] {
        assert_parses(&workspace.join("scripts/bootstrap").join(script));
    }

    let adr = std::fs::read_to_string(workspace.join(POSTGRES_PATH)).unwrap();
    let appended = adr
        .strip_prefix(POSTGRES)
        .expect("the ADR is kept, the section appended");
    assert!(
        appended.starts_with("\n## Deployment experience\n\n### "),
        "{appended}"
    );
    assert_contains_all(
        appended,
        &[
            &format!("- Line 9 (`{DB}`): The service must store its data in PostgreSQL.\n"),
            &format!("  - Failed: no database yet. Cause: {DB} was not set up. Fix: set up {DB}\n"),
        ],
    );
    assert_eq!(
        appended.matches("  - Failed:").count(),
        2,
        "once per failed iteration"
    );
    let config = std::fs::read_to_string(workspace.join(CONFIG_PATH)).unwrap();
    assert_eq!(config, CONFIG, "not approved: not written");
    // The section quotes a requirement: the next generation does not take it for one.
    let again = wire
        .request(
            2,
            "tools/call",
            call("adr_bootstrap_validation", json!({ "checks": checks() })),
        )
        .await;
    let ids: Vec<&str> = (output(&again)["requirements"].as_array().unwrap().iter())
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [DB, OPS, CONF]);

    let text = report(&workspace, out);
    assert_contains_all(
        &text,
        &[
            "- Verdict: **Every check passes**\n",
            "- Iterations: 3 of at most 5\n",
            "### Iteration 1\n\nRun by: given; exit code 1.\n",
            &format!("- [ ] `{DB}`: no database yet\n"),
            &format!("- [x] `{OPS}`\n"),
            &format!("- `{CONF}`: cause: {CONF} was not set up; fix: set up {CONF}\n"),
            "### Iteration 3\n\nRun by: given; exit code 0.\n",
            &format!("- {POSTGRES_PATH}: appended\n"),
            &format!("- {CONFIG_PATH}: proposed, not written (not approved)\n"),
            "None: every check passes.\n",
        ],
    );
}

#[tokio::test]
async fn at_max_iterations_each_check_still_failing_is_one_todo_and_nothing_unapproved_is_written()
{
    let mut wire = Wire::start_in(RegistryConfig::default(), &[]);
    let workspace = wire.dir.path().to_owned();
    write_adrs(&workspace, false);
    wire.initialize(json!({})).await;
    // The second run lacks the line of one check and names one the scripts do not have.
    let second = json!({ "output": format!("FAIL {DB} no database yet\nPASS {OPS}\nPASS stale_check\n"),
        "exit_code": 1 });
    let arguments = json!({
        "checks": checks(), "max_iterations": 2,
        "outputs": [printed(&[DB, CONF]), second],
        "learnings": [learning(1, DB), learning(1, CONF), learning(2, DB), learning(2, CONF),
                      learning(2, "stale_check")],
        "approved_adrs": [],
    });
    for id in [1, 2] {
        let reply = wire
            .request(
                id,
                "tools/call",
                call("bootstrap_validation_loop", arguments.clone()),
            )
            .await;
        let out = output(&reply);
        assert_eq!(out["passed"], false);
        assert_eq!(out["iterations"], 2);
        assert_eq!(out["still_failing"], json!([DB, CONF]));
        let failures = &out["history"][1]["failures"];
        assert_eq!(failures[1]["reason"], "no PASS or FAIL line for this check");
        assert_eq!(failures[2]["id"], "stale_check");
        assert_eq!(failures[2]["reason"], "a PASS line for an unknown check id");
        assert_eq!(out["written"], json!([]));
        let made = out["todos"].as_array().unwrap().len();
        assert_eq!(made, if id == 1 { 2 } else { 0 }, "todos made once");
        let text = report(&workspace, out);
        assert!(
            text.contains("- Verdict: **Checks still failing**\n"),
            "{text}"
        );
        assert!(text.contains(&format!("- `{CONF}` ({CONFIG_PATH}, line 9): no PASS or FAIL line for this check (todo #2)\n")), "{text}");
    }
    let tags = vec!["bootstrap".to_owned()];
    assert_eq!(
        todos(&wire),
        [
            (
                format!("Bootstrap check {DB} fails ({POSTGRES_PATH}, line 9)"),
                tags.clone()
            ),
            (
                format!("Bootstrap check {CONF} fails ({CONFIG_PATH}, line 9)"),
                tags
            ),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join(POSTGRES_PATH)).unwrap(),
        POSTGRES
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join(CONFIG_PATH)).unwrap(),
        CONFIG
    );
}

#[tokio::test]
async fn a_loop_asked_for_more_than_twenty_iterations_is_refused_before_anything_runs() {
    let mut wire = Wire::start_in(RegistryConfig::default(), &[]);
    write_adrs(wire.dir.path(), false);
    wire.initialize(json!({})).await;
    let arguments = json!({ "checks": checks(), "max_iterations": 1000,
        "outputs": [printed(&[])], "approved_adrs": [] });
    let reply = wire
        .request(
            1,
            "tools/call",
            call("bootstrap_validation_loop", arguments),
        )
        .await;
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let text = reply["result"].to_string();
    assert!(
        text.contains("max_iterations") && text.contains("20"),
        "{text}"
    );
    assert!(
        !wire.dir.path().join("scripts").exists(),
        "nothing was generated"
    );
}

// ── the operator's command, or the person ──────────────────────────────────────────────

/// A workspace with the ADRs, and beside it the commands file when one is given.
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let site = Site {
            dir: tempfile::tempdir().unwrap(),
        };
        write_adrs(&site.workspace(), false);
        site
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    /// The application, with a commands file of `commands` when given.
    fn app(&self, commands: Option<&str>) -> App {
        let path = self.dir.path().join("commands.toml");
        if let Some(commands) = commands {
            std::fs::write(&path, commands).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let config = Config {
            commands: commands.map(|_| path),
            ..Config::new(":memory:", self.workspace())
        };
        App::open(&config).expect("the application opens")
    }
}

/// The operator's command: validate_bootstrap.sh, whose failing checks exit 1.
pub(crate) const VALIDATE: &str = r#"
[commands.validate_bootstrap]
argv = ["/bin/bash", "scripts/bootstrap/validate_bootstrap.sh"]
env = ["PATH"]
ok_exit_codes = [0, 1]
on_resume = "rerun"
"#;

fn start_loop(app: &App, inputs: Value) -> RunHandle {
    let plan = installed_plan("bootstrap_validation_loop");
    let options = RunOptions {
        park_questions: true,
        ..RunOptions::default()
    };
    app.engine()
        .start(plan.clone(), checked_inputs(&plan, inputs), options)
}

/// Waits for the run's open question of node `node`, and returns its message.
async fn question(app: &App, run_id: &str, node: &str) -> String {
    question_of(app, run_id, node, None).await
}

/// Waits for the run's open question of instance `instance` of node `node`, and returns
/// its request as JSON text.
async fn question_of(app: &App, run_id: &str, node: &str, instance: Option<usize>) -> String {
    let registry = app.registry();
    let mut message = String::new();
    until(&format!("`{node}` asks"), || {
        let open = registry.open_questions(run_id).unwrap();
        match open
            .iter()
            .find(|q| q.node_id == node && q.instance == instance)
        {
            Some(q) => {
                message = serde_json::to_value(&q.request).unwrap().to_string();
                true
            }
            None => false,
        }
    })
    .await;
    message
}

fn answer(app: &App, run_id: &str, node: &str, instance: Option<usize>, answer: Value) {
    (app.registry()
        .answer_question(run_id, node, instance, &answer))
    .unwrap();
}

/// The command runs the audit recorded, with their argv.
fn command_runs(app: &App) -> Vec<Value> {
    let rows = app.engine().todo_tools().store().audit_rows().unwrap();
    (rows.into_iter())
        .filter(|row| row.tool == "command")
        .map(|row| serde_json::from_str::<Value>(&row.args).unwrap()["argv"].clone())
        .collect()
}

#[tokio::test]
async fn an_allowed_command_runs_until_its_checks_pass_and_a_section_is_written_once_approved() {
    let site = Site::new();
    let app = site.app(Some(VALIDATE));
    let learnings = json!([learning(1, DB), learning(1, CONF), learning(2, DB)]);
    let handle = start_loop(&app, json!({ "checks": checks(), "learnings": learnings }));
    let id = handle.run_id.clone();
    let out = site.workspace().join("out");
    // The person fixes the configuration after the first run, the database after the
    // second, and says so each time.
    let asked = question(&app, &id, "fixes").await;
    assert!(asked.contains("Iteration 1: 2 check(s) failed"), "{asked}");
    std::fs::write(out.join("config-fixed"), "").unwrap();
    answer(&app, &id, "fixes", None, json!({ "fixed": true }));
    until("the second iteration asks", || {
        let open = app.registry().open_questions(&id).unwrap();
        open.iter().any(|q| {
            q.node_id == "fixes"
                && serde_json::to_string(&q.request)
                    .unwrap()
                    .contains("Iteration 2")
        })
    })
    .await;
    std::fs::write(out.join("db-fixed"), "").unwrap();
    answer(&app, &id, "fixes", None, json!({ "fixed": true }));

    // Each ADR's section is shown as a diff; nothing is written before the answer.
    let asked = question_of(&app, &id, "approvals", Some(0)).await;
    assert_contains_all(
        &asked,
        &[
            &format!("Append this Deployment experience section to {POSTGRES_PATH}?"),
            "--- a/docs/adrs/0001-use-postgres.md\\n+++ b/docs/adrs/0001-use-postgres.md\\n@@ -13,3 +13,",
            " # you must not read this\\n ```\\n+\\n+## Deployment experience\\n+\\n+### ",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(site.workspace().join(POSTGRES_PATH)).unwrap(),
        POSTGRES
    );
    answer(&app, &id, "approvals", Some(0), json!({ "approve": true }));
    let asked = question_of(&app, &id, "approvals", Some(1)).await;
    assert!(asked.contains(CONFIG_PATH), "{asked}");
    answer(&app, &id, "approvals", Some(1), json!({ "approve": false }));
    let report = handle.join.await.unwrap();
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let output = report.output;
    assert_eq!(output["passed"], true);
    assert_eq!(output["iterations"], 3);
    assert_eq!(output["history"][0]["by"], "server");
    assert_eq!(output["written"], json!([POSTGRES_PATH]));
    let adr = std::fs::read_to_string(site.workspace().join(POSTGRES_PATH)).unwrap();
    assert!(
        adr.starts_with(POSTGRES) && adr.contains("## Deployment experience"),
        "{adr}"
    );
    assert_eq!(
        std::fs::read_to_string(site.workspace().join(CONFIG_PATH)).unwrap(),
        CONFIG
    );
    // The operator's argv, three times: no ADR text on any command line.
    let argv = json!(["/bin/bash", "scripts/bootstrap/validate_bootstrap.sh"]);
    assert_eq!(command_runs(&app), [argv.clone(), argv.clone(), argv]);
}

#[tokio::test]
async fn without_the_operators_command_the_server_never_runs_the_script_and_asks_the_person() {
    let site = Site::new();
    // A commands file that names another command allows this one no more than none does.
    let other = "[commands.other]\nargv = [\"/bin/true\"]\n";
    for commands in [None, Some(other)] {
        let app = site.app(commands);
        let given = json!([
            { "id": DB, "check": "touch out/ran; true" },
            { "id": OPS, "check": "touch out/ran; true" },
            { "id": CONF, "check": "touch out/ran; true" }
        ]);
        let handle = start_loop(&app, json!({ "checks": given, "max_iterations": 1 }));
        let id = handle.run_id.clone();
        let asked = question(&app, &id, "ask_output").await;
        assert!(
            asked.contains("this server may not run the checks. From the project's root, run `bash scripts/bootstrap/validate_bootstrap.sh`"),
            "{asked}"
        );
        let pasted =
            json!({ "output": format!("PASS {DB}\nPASS {OPS}\nPASS {CONF}\n"), "exit_code": 0 });
        answer(&app, &id, "ask_output", None, pasted);
        let report = handle.join.await.unwrap();
        assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
        let output = report.output;
        assert_eq!(output["passed"], true);
        assert_eq!(output["history"][0]["by"], "person");
        assert!(
            !site.workspace().join("out/ran").exists(),
            "the script never ran"
        );
        assert_eq!(command_runs(&app), Vec::<Value>::new());
    }
}

#[tokio::test]
async fn a_command_ending_outside_the_operators_exit_codes_fails_every_check_saying_why() {
    let site = Site::new();
    // The operator left out exit code 1: the failed run of the script fails its node.
    let strict = VALIDATE.replace("ok_exit_codes = [0, 1]\n", "");
    let app = site.app(Some(&strict));
    let learnings: Vec<Value> = [DB, OPS, CONF].iter().map(|id| learning(1, id)).collect();
    let inputs = json!({ "checks": checks(), "max_iterations": 1, "learnings": learnings,
        "approved_adrs": [] });
    let report = start_loop(&app, inputs).join.await.unwrap();
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let iteration = &report.output["history"][0];
    assert_eq!(iteration["by"], "server (the command failed)");
    let reasons: Vec<(&str, &str)> = (iteration["failures"].as_array().unwrap().iter())
        .map(|f| (f["id"].as_str().unwrap(), f["reason"].as_str().unwrap()))
        .collect();
    let none = "no PASS or FAIL line for this check";
    assert_eq!(reasons, [(DB, none), (OPS, none), (CONF, none)]);
    assert_eq!(report.output["still_failing"], json!([DB, OPS, CONF]));
    assert_eq!(command_runs(&app).len(), 1);
}
