//! The `workflows` terminal commands, run as the built binary in a temporary directory.

mod answers;
mod builtin_answers;
mod old_database;
mod terminal;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::support::{self, Sandbox};

/// What a run of the binary left behind, as text.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn from(output: Output) -> Ran {
        Ran {
            code: output.status.code(),
            stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        }
    }

    fn assert_code(&self, code: i32) -> &Ran {
        assert_eq!(
            self.code,
            Some(code),
            "exit status\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Stdout as exactly one JSON value.
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON value ({e}):\n{}\n--- stderr ---\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

// The terminal commands' ways to run the binary in the shared sandbox.
impl Sandbox {
    /// The binary on the sandbox's database, then `args`.
    fn command<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut command = self.binary(&self.db);
        command.args(args);
        command
    }

    /// Runs [`Sandbox::command`] to its end.
    fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Ran {
        let output = self.command(args).output().expect("run the binary");
        Ran::from(output)
    }
}

const HELLO: &str = r#"description = "Say hello"

[inputs.who]
type = "string"
default = "world"

[nodes.greet]
render = "hello {{ inputs.who }}"

[output]
text = "nodes.greet.output"
"#;

/// One problem of each kind, at known places: an unknown key (2:10), an unknown tool (8:8),
/// a template naming an undeclared input (9:18), an unknown need (13:10) and a cycle (17:9).
const FLAWED: &str = r#"name = "flawed"
colour = "red"

[inputs.version]
type = "string"

[nodes.create]
tool = "add_tsk"
args = { title = "{{ inputs.versoin }}" }

[nodes.after]
render = "after"
needs = ["nowhere"]

[nodes.ping]
render = "ping"
needs = ["pong"]

[nodes.pong]
render = "pong"
needs = ["ping"]
"#;

/// Not TOML at all: the error is at 2:4, where `]]` should be.
const BROKEN: &str = "name = \"broken\"\n[[x\n";

#[test]
fn validate_accepts_a_good_file() {
    let sandbox = Sandbox::new();
    let good = sandbox.file("hello.toml", HELLO);
    let ran = sandbox.run(&["workflows".as_ref(), "validate".as_ref(), good.as_os_str()]);
    ran.assert_code(0);
    assert!(
        ran.stdout
            .contains(&format!("ok    {} (hello, 1 nodes)", good.display())),
        "{}",
        ran.stdout
    );
    assert!(
        !ran.stderr.contains(&good.display().to_string()),
        "{}",
        ran.stderr
    );
}

/// The problem lines of `stderr`: those that start with `prefix`.
fn problem_lines<'s>(stderr: &'s str, prefix: &str) -> Vec<&'s str> {
    stderr.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// Splits `path:line:column: dotted.path: message` after `path:`, checking its shape.
fn parse_problem<'l>(line: &'l str, path: &str) -> (u32, u32, &'l str, &'l str) {
    let rest = line
        .strip_prefix(path)
        .and_then(|rest| rest.strip_prefix(':'))
        .unwrap_or_else(|| panic!("not a problem of {path}: {line}"));
    let mut parts = rest.splitn(3, ": ");
    let (Some(position), Some(dotted), Some(message)) = (parts.next(), parts.next(), parts.next())
    else {
        panic!("not `path:line:column: dotted.path: message`: {line}");
    };
    let (line_no, column) = position
        .split_once(':')
        .unwrap_or_else(|| panic!("no line:column in {line}"));
    (
        line_no.parse().unwrap_or_else(|_| panic!("line in {line}")),
        column
            .parse()
            .unwrap_or_else(|_| panic!("column in {line}")),
        dotted,
        message,
    )
}

#[test]
fn validate_reports_every_problem_of_a_file_with_its_line_and_column() {
    let sandbox = Sandbox::new();
    let flawed = sandbox.file("flawed.toml", FLAWED);
    let ran = sandbox.run(&[
        "workflows".as_ref(),
        "validate".as_ref(),
        flawed.as_os_str(),
    ]);
    ran.assert_code(1);

    let path = flawed.display().to_string();
    let lines = problem_lines(&ran.stderr, &path);
    let problems: Vec<(u32, u32, &str, &str)> =
        lines.iter().map(|l| parse_problem(l, &path)).collect();
    let at: Vec<(u32, u32, &str)> = problems.iter().map(|&(l, c, p, _)| (l, c, p)).collect();
    assert_eq!(
        at,
        [
            (2, 10, "colour"),
            (8, 8, "nodes.create.tool"),
            (9, 18, "nodes.create.args.title"),
            (13, 10, "nodes.after.needs[0]"),
            (17, 9, "nodes.ping.needs"),
        ],
        "stderr:\n{}",
        ran.stderr
    );
    let messages: Vec<&str> = problems.iter().map(|p| p.3).collect();
    assert!(
        messages[0].starts_with("unknown key `colour`"),
        "{messages:?}"
    );
    assert_eq!(messages[1], "unknown tool `add_tsk`");
    assert!(
        messages[2].starts_with("unknown input `inputs.versoin`"),
        "{messages:?}"
    );
    assert_eq!(messages[3], "unknown node `nowhere`");
    assert!(
        messages[4].contains("cycle") && messages[4].contains("ping -> pong -> ping"),
        "{messages:?}"
    );
    assert!(
        ran.stdout.contains(&format!("FAIL  {path} (5 problems)")),
        "{}",
        ran.stdout
    );
}

#[test]
fn validate_reports_on_each_of_several_paths() {
    let sandbox = Sandbox::new();
    let good = sandbox.file("hello.toml", HELLO);
    let flawed = sandbox.file("flawed.toml", FLAWED);
    let broken = sandbox.file("broken.toml", BROKEN);
    let missing = sandbox.dir.path().join("missing.toml");
    let ran = sandbox.run(&[
        "workflows".as_ref(),
        "validate".as_ref(),
        good.as_os_str(),
        flawed.as_os_str(),
        broken.as_os_str(),
        missing.as_os_str(),
    ]);
    ran.assert_code(1);

    assert!(ran.stdout.contains(&format!("ok    {}", good.display())));
    for bad in [&flawed, &broken, &missing] {
        assert!(
            ran.stdout.contains(&format!("FAIL  {}", bad.display())),
            "{}",
            ran.stdout
        );
    }
    let flawed_path = flawed.display().to_string();
    assert_eq!(problem_lines(&ran.stderr, &flawed_path).len(), 5);
    let broken_path = broken.display().to_string();
    let broken_lines = problem_lines(&ran.stderr, &broken_path);
    assert_eq!(broken_lines.len(), 1, "{}", ran.stderr);
    let (line, column, _, _) = parse_problem(broken_lines[0], &broken_path);
    assert_eq!((line, column), (2, 4), "{}", broken_lines[0]);
    let missing_path = missing.display().to_string();
    assert_eq!(
        problem_lines(&ran.stderr, &missing_path).len(),
        1,
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains("3 of 4 workflow files have problems"));
}

#[test]
fn validate_without_paths_checks_the_built_ins_and_the_folder() {
    let sandbox = Sandbox::new();
    sandbox.workflow("hello.toml", HELLO);
    let ran = sandbox.run(&["workflows", "validate"]);
    ran.assert_code(0);
    assert!(
        ran.stdout.contains("(release_checklist, 2 nodes)"),
        "{}",
        ran.stdout
    );
    assert!(ran.stdout.contains("(hello, 1 nodes)"), "{}", ran.stdout);

    let broken = sandbox.workflow("broken.toml", BROKEN);
    let ran = sandbox.run(&["workflows", "validate"]);
    ran.assert_code(1);
    assert!(
        ran.stdout.contains(&format!("FAIL  {}", broken.display())),
        "{}",
        ran.stdout
    );
}

#[test]
fn list_shows_the_built_in_and_folder_workflows_and_leaves_out_a_broken_file() {
    let sandbox = Sandbox::new();
    sandbox.workflow("hello.toml", HELLO);
    let broken = sandbox.workflow("broken.toml", BROKEN);
    let ran = sandbox.run(&["workflows", "list"]);
    ran.assert_code(0);

    let names: Vec<&str> = ran
        .stdout
        .lines()
        .map(|line| line.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        [
            "adr_bootstrap_validation",
            "adr_check",
            "adr_validation",
            "bootstrap_iteration",
            "bootstrap_validation_loop",
            "deployment_readiness",
            "interactive_adr_planning",
            "release_checklist",
            "research",
            "troubleshoot",
            "troubleshoot_outcome",
            "hello"
        ],
        "{}",
        ran.stdout
    );
    let hello = ran.stdout.lines().last().unwrap();
    assert!(
        hello.contains("1 nodes") && hello.contains("Say hello"),
        "{hello}"
    );
    assert!(!ran.stdout.contains("broken"), "{}", ran.stdout);
    assert!(
        ran.stderr
            .contains(&format!("{}:2:4: invalid TOML", broken.display())),
        "{}",
        ran.stderr
    );
}

/// Runs `release_checklist` with `args` after its name.
fn run_release<S: AsRef<std::ffi::OsStr>>(sandbox: &Sandbox, args: &[S]) -> Ran {
    let mut all: Vec<&std::ffi::OsStr> = vec![
        "workflows".as_ref(),
        "run".as_ref(),
        "release_checklist".as_ref(),
    ];
    all.extend(args.iter().map(AsRef::as_ref));
    sandbox.run(&all)
}

fn titles(todos: &Value) -> Vec<&str> {
    todos
        .as_array()
        .unwrap_or_else(|| panic!("a list of todos: {todos}"))
        .iter()
        .map(|todo| todo["title"].as_str().expect("a title"))
        .collect()
}

#[test]
fn run_prints_only_the_report_as_json_and_the_todos_are_stored() {
    let sandbox = Sandbox::new();
    let ran = run_release(
        &sandbox,
        &["--input", "version=9.9", "--input", r#"steps=["a","b"]"#],
    );
    ran.assert_code(0);
    let report = ran.json();

    let run_id = report["run_id"].as_str().expect("a run id");
    assert_eq!(run_id.len(), 36, "a UUID: {run_id}");
    assert_eq!(report["status"], "succeeded");
    let todos = &report["output"]["todos"];
    assert_eq!(titles(todos), ["9.9: a", "9.9: b"]);
    for todo in todos.as_array().unwrap() {
        assert_eq!(todo["tags"], json!(["release", "v9.9"]));
        assert_eq!(todo["status"], "open");
    }
    let summary = report["output"]["summary"].as_str().expect("a summary");
    assert!(
        summary.starts_with("Release 9.9: 2 todos created."),
        "{summary}"
    );

    let steps = &report["nodes"]["steps"];
    assert_eq!(steps["status"], "succeeded");
    assert!(
        steps["attempts"].as_u64().is_some_and(|n| n >= 1),
        "{steps}"
    );
    assert_eq!(&steps["output"], todos);
    let node = &report["nodes"]["summary"];
    assert_eq!(node["status"], "succeeded");
    assert_eq!(node["attempts"], 1);
    assert_eq!(node["output"], summary);

    assert_eq!(support::task_titles(&sandbox.db), ["9.9: a", "9.9: b"]);
    let rows = support::audit_rows(&sandbox.db);
    assert_eq!(rows.len(), 3, "{rows:#?}");
    // The start, audited as over MCP: the workflow and its inputs, under the run.
    let start = &rows[0];
    assert_eq!(
        (start.tool.as_str(), start.outcome.as_str()),
        ("run_workflow", "ok")
    );
    assert_eq!(start.run_id.as_deref(), Some(run_id));
    assert_eq!(start.node_id, None);
    assert_eq!(start.principal, None, "the terminal's local user");
    let args: Value = serde_json::from_str(&start.args).unwrap();
    assert_eq!(args["inputs"]["version"], "9.9", "{args}");
    for row in &rows[1..] {
        assert_eq!(
            (row.tool.as_str(), row.outcome.as_str()),
            ("add_task", "ok")
        );
        assert_eq!(row.run_id.as_deref(), Some(run_id));
        assert_eq!(row.node_id.as_deref(), Some("steps"));
    }
}

#[test]
fn a_failed_run_exits_one_with_the_node_error_in_the_report() {
    let sandbox = Sandbox::new();
    let file = sandbox.file(
        "finish.toml",
        "[nodes.finish]\ntool = \"complete_task\"\nargs = { id = 999999 }\n",
    );
    let ran = sandbox.run(&["workflows".as_ref(), "run".as_ref(), file.as_os_str()]);
    ran.assert_code(1);
    let report = ran.json();

    assert_eq!(report["status"], "failed");
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains("finish")),
        "{report:#}"
    );
    let node = &report["nodes"]["finish"];
    assert_eq!(node["status"], "failed");
    assert_eq!(node["error"]["code"], "not_found");
    assert!(
        node["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("999999")),
        "{node:#}"
    );
    let rows = support::audit_rows(&sandbox.db);
    let rows: Vec<(&str, &str)> = (rows.iter())
        .map(|row| (row.tool.as_str(), row.outcome.as_str()))
        .collect();
    assert_eq!(
        rows,
        [("run_workflow", "ok"), ("complete_task", "not_found")]
    );
}

#[test]
fn a_missing_required_input_exits_one_naming_it_and_runs_nothing() {
    let sandbox = Sandbox::new();
    let ran = run_release(&sandbox, &["--input", r#"steps=["a"]"#]);
    ran.assert_code(1);
    assert_eq!(ran.stdout, "", "no report without a run");
    assert!(
        ran.stderr
            .contains("inputs.version: the required input `version` is missing"),
        "{}",
        ran.stderr
    );
    if sandbox.db.exists() {
        assert!(support::task_titles(&sandbox.db).is_empty());
    }
}

#[test]
fn an_input_of_the_wrong_type_is_refused() {
    let sandbox = Sandbox::new();
    let ran = run_release(
        &sandbox,
        &["--input", "version=1", "--input", "steps=not json"],
    );
    ran.assert_code(1);
    assert_eq!(ran.stdout, "");
    assert!(ran.stderr.contains("--input steps"), "{}", ran.stderr);

    let ran = run_release(
        &sandbox,
        &["--input", "version=1", "--input", r#"steps={"a":1}"#],
    );
    ran.assert_code(1);
    assert!(
        ran.stderr.contains("input `steps` must be of type array"),
        "{}",
        ran.stderr
    );
}

#[test]
fn inputs_json_gives_every_input_and_input_overrides_its_keys() {
    let sandbox = Sandbox::new();
    let inputs = r#"{"version": "1.0", "steps": ["x", "y"]}"#;
    let ran = run_release(&sandbox, &["--inputs-json", inputs]);
    ran.assert_code(0);
    assert_eq!(titles(&ran.json()["output"]["todos"]), ["1.0: x", "1.0: y"]);

    let ran = run_release(
        &sandbox,
        &["--inputs-json", inputs, "--input", "version=2.0"],
    );
    ran.assert_code(0);
    assert_eq!(titles(&ran.json()["output"]["todos"]), ["2.0: x", "2.0: y"]);

    let ran = run_release(&sandbox, &["--inputs-json", "[1]"]);
    ran.assert_code(1);
    assert!(ran.stderr.contains("--inputs-json must be a JSON object"));
    assert_eq!(
        support::task_titles(&sandbox.db),
        ["1.0: x", "1.0: y", "2.0: x", "2.0: y"]
    );
}

const WRITER: &str = r#"[inputs.path]
type = "string"
required = true

[nodes.note]
write_file = { path = "{{ inputs.path }}", content = "run {{ run.id }}" }
"#;

#[test]
fn run_takes_a_file_path_and_write_file_stays_in_the_workspace() {
    let sandbox = Sandbox::new();
    let file = sandbox.file("writer.toml", WRITER);
    let run = |path: &str| {
        sandbox.run(&[
            "workflows".as_ref(),
            "run".as_ref(),
            file.as_os_str(),
            "--input".as_ref(),
            format!("path={path}").as_ref(),
        ])
    };

    let ran = run("notes/today.md");
    ran.assert_code(0);
    let report = ran.json();
    assert_eq!(report["status"], "succeeded");
    let written = std::fs::read_to_string(sandbox.workspace.join("notes/today.md"))
        .expect("the file is written under the workspace");
    assert_eq!(
        written,
        format!("run {}", report["run_id"].as_str().unwrap())
    );

    let ran = run("../x");
    ran.assert_code(1);
    let report = ran.json();
    assert_eq!(report["status"], "failed");
    let error = &report["nodes"]["note"]["error"];
    assert_eq!(error["code"], "file_error", "{report:#}");
    assert!(error["message"].as_str().unwrap().contains(".."), "{error}");
    assert!(!sandbox.dir.path().join("x").exists(), "nothing escaped");

    let outside = sandbox.dir.path().join("outside.md");
    let ran = run(outside.to_str().unwrap());
    ran.assert_code(1);
    assert_eq!(ran.json()["nodes"]["note"]["error"]["code"], "file_error");
    assert!(!outside.exists(), "an absolute path is refused");
}

#[test]
fn show_mermaid_prints_the_flowchart() {
    let sandbox = Sandbox::new();
    let ran = sandbox.run(&["workflows", "show", "release_checklist", "--mermaid"]);
    ran.assert_code(0);
    let lines: Vec<&str> = ran.stdout.lines().map(str::trim).collect();
    assert_eq!(lines[0], "flowchart TD", "{}", ran.stdout);
    assert!(lines.contains(&"steps --> summary"), "{}", ran.stdout);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("steps[") && l.contains("tool")),
        "{}",
        ran.stdout
    );
}

#[test]
fn an_unknown_workflow_name_fails_listing_the_known_ones() {
    let sandbox = Sandbox::new();
    sandbox.workflow("hello.toml", HELLO);
    for args in [
        ["workflows", "run", "no_such_flow"].as_slice(),
        ["workflows", "show", "no_such_flow", "--mermaid"].as_slice(),
    ] {
        let ran = sandbox.run(args);
        assert_ne!(ran.code, Some(0), "{args:?} succeeded");
        assert_eq!(ran.stdout, "", "{args:?}");
        let line = ran
            .stderr
            .lines()
            .find(|l| l.contains("no_such_flow"))
            .unwrap_or_else(|| panic!("{args:?}: no message naming it:\n{}", ran.stderr));
        assert!(
            line.contains(
                "known workflows: adr_bootstrap_validation, adr_check, adr_validation, \
                 bootstrap_iteration, bootstrap_validation_loop, deployment_readiness, \
                 interactive_adr_planning, release_checklist, research, troubleshoot, \
                 troubleshoot_outcome, hello"
            ),
            "{line}"
        );
    }
    assert!(!Path::new(&sandbox.db).exists() || support::task_titles(&sandbox.db).is_empty());
}

/// A workflow that fails at its second node, after its first made a todo.
const HALF: &str = r#"
[nodes.make]
tool = "add_task"
args = { title = "made" }
[nodes.finish]
tool = "complete_task"
args = { id = 42 }
needs = ["make"]
"#;

fn run_id_of(ran: &Ran) -> String {
    ran.json()["run_id"].as_str().expect("a run id").to_owned()
}

#[test]
fn runs_lists_stored_runs_newest_first_with_status_and_progress() {
    let sandbox = Sandbox::new();
    sandbox.workflow("hello.toml", HELLO);
    sandbox.workflow("half.toml", HALF);
    let ok = run_id_of(sandbox.run(&["workflows", "run", "hello"]).assert_code(0));
    let bad = run_id_of(sandbox.run(&["workflows", "run", "half"]).assert_code(1));

    let listed = sandbox.run(&["workflows", "runs"]);
    listed.assert_code(0);
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert!(lines[0].starts_with("ID"), "{}", listed.stdout);
    assert!(
        lines[1].starts_with(&bad) && lines[1].contains("failed"),
        "{}",
        listed.stdout
    );
    assert!(
        lines[2].starts_with(&ok) && lines[2].contains("succeeded"),
        "{}",
        listed.stdout
    );
    assert!(lines[2].contains("100%"), "{}", lines[2]);

    let failed_only = sandbox.run(&["workflows", "runs", "--status", "failed"]);
    assert_eq!(
        failed_only.stdout.lines().count(),
        2,
        "{}",
        failed_only.stdout
    );
    let refused = sandbox.run(&["workflows", "runs", "--status", "sleeping"]);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
}

#[test]
fn status_prints_the_stored_report_with_each_node_and_its_task() {
    let sandbox = Sandbox::new();
    sandbox.workflow("half.toml", HALF);
    let id = run_id_of(sandbox.run(&["workflows", "run", "half"]).assert_code(1));

    let status = sandbox.run(&["workflows", "status", &id]);
    let view = status.assert_code(0).json();
    assert_eq!(view["run_id"], id.as_str());
    assert_eq!(view["status"], "failed");
    assert_eq!(view["task_status"], "failed");
    assert_eq!(view["origin"], "cli");
    assert_eq!(view["nodes"]["make"]["status"], "succeeded");
    assert_eq!(view["nodes"]["finish"]["error"]["code"], "not_found");
    assert!(view["nodes"]["finish"]["task_id"].is_string(), "{view}");

    let missing = sandbox.run(&["workflows", "status", "no-such-run"]);
    missing.assert_code(1);
    assert!(
        missing.stderr.contains("no run with id no-such-run"),
        "{}",
        missing.stderr
    );
}

#[test]
fn retry_runs_a_failed_run_again_keeping_what_succeeded() {
    let sandbox = Sandbox::new();
    sandbox.workflow("half.toml", HALF);
    let id = run_id_of(sandbox.run(&["workflows", "run", "half"]).assert_code(1));

    let retried = sandbox.run(&["workflows", "retry", &id]);
    let report = retried.assert_code(1).json();
    assert_ne!(report["run_id"], id.as_str());
    assert_eq!(report["nodes"]["make"]["status"], "succeeded");
    assert_eq!(report["nodes"]["finish"]["status"], "failed");
    let store = mcp_task_server::store::Store::open(&sandbox.db).unwrap();
    assert_eq!(store.list_todos(&Default::default()).unwrap().len(), 1);

    let hello = {
        sandbox.workflow("hello.toml", HELLO);
        run_id_of(sandbox.run(&["workflows", "run", "hello"]).assert_code(0))
    };
    let refused = sandbox.run(&["workflows", "retry", &hello]);
    refused.assert_code(1);
    assert!(
        refused.stderr.contains("only a failed or cancelled run"),
        "{}",
        refused.stderr
    );
}

#[test]
fn resume_and_cancel_refuse_a_finished_run_and_purge_deletes_finished_runs() {
    let sandbox = Sandbox::new();
    sandbox.workflow("hello.toml", HELLO);
    let id = run_id_of(sandbox.run(&["workflows", "run", "hello"]).assert_code(0));

    let resumed = sandbox.run(&["workflows", "resume", &id]);
    resumed.assert_code(1);
    assert!(
        resumed.stderr.contains("already succeeded"),
        "{}",
        resumed.stderr
    );
    let cancelled = sandbox.run(&["workflows", "cancel", &id]);
    cancelled.assert_code(1);
    assert!(
        cancelled.stderr.contains("already succeeded"),
        "{}",
        cancelled.stderr
    );

    let kept = sandbox.run(&["workflows", "purge", "--older-than", "1h"]);
    assert_eq!(
        kept.assert_code(0).stdout.trim(),
        "purged 0 finished runs (their history stays for --history-ttl, 2160h); purged 0 \
         rows of history older than that"
    );
    let purged = sandbox.run(&["workflows", "purge"]);
    let said = &purged.assert_code(0).stdout;
    assert!(said.starts_with("purged 1 finished runs ("), "{said}");
    sandbox.run(&["workflows", "status", &id]).assert_code(1);
    // The run's history outlives it, until its own TTL.
    let history = |sandbox: &Sandbox| -> i64 {
        rusqlite::Connection::open(&sandbox.db)
            .and_then(|c| c.query_row("SELECT COUNT(*) FROM run_history", [], |r| r.get(0)))
            .unwrap()
    };
    assert_eq!(history(&sandbox), 1);
    let expired = sandbox.run(&["workflows", "purge", "--history-ttl", "1ms"]);
    let said = &expired.assert_code(0).stdout;
    assert!(
        said.ends_with("purged 1 rows of history older than that\n"),
        "{said}"
    );
    assert_eq!(history(&sandbox), 0);
    let store = mcp_task_server::store::Store::open(&sandbox.db).unwrap();
    // Hello calls no tool: its start, and the refused resume and cancel, are audited
    // under the run they name, as from any face.
    let rows: Vec<(String, String, Option<String>)> = (store.audit_rows().unwrap().into_iter())
        .map(|row| (row.tool, row.outcome, row.run_id))
        .collect();
    let of = |tool: &str, outcome: &str| (tool.to_owned(), outcome.to_owned(), Some(id.clone()));
    assert_eq!(
        rows,
        [
            of("run_workflow", "ok"),
            of("resume_run", "rejected"),
            of("cancel_run", "rejected")
        ]
    );
}

#[test]
fn cancel_ends_an_orphaned_run_as_cancelled() {
    let sandbox = Sandbox::new();
    sandbox.workflow(
        "long.toml",
        "[nodes.first]\ntool = \"add_task\"\nargs = { title = \"t\" }\n[nodes.long]\nwait = \"1h\"\nneeds = [\"first\"]\n",
    );
    let mut child = Command::new(support::BIN)
        .args(["--db".as_ref(), sandbox.db.as_os_str()])
        .args(["--workflows".as_ref(), sandbox.workflows.as_os_str()])
        .args(["workflows", "run", "long"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let store = mcp_task_server::store::Store::open(&sandbox.db).unwrap();
    let id = loop {
        let runs = store
            .list_runs(None, mcp_task_server::store::Scope::Everyone, 1)
            .unwrap();
        if let Some(run) = runs.first()
            && store
                .nodes(&run.id)
                .unwrap()
                .iter()
                .any(|n| n.node_id == "long")
        {
            break run.id.clone();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // Reading a run never takes it over: its lease stays the dead process's.
    let owner = || store.run(&id).unwrap().unwrap().lease_owner;
    let before = owner();
    sandbox.run(&["workflows", "runs"]).assert_code(0);
    sandbox.run(&["workflows", "status", &id]).assert_code(0);
    assert_eq!(owner(), before);
    assert!(before.is_some());

    let cancelled = sandbox.run(&["workflows", "cancel", &id]);
    assert_eq!(
        cancelled.assert_code(0).stdout.trim(),
        format!("run {id} cancelled")
    );
    let view = sandbox.run(&["workflows", "status", &id]).json();
    assert_eq!(view["status"], "cancelled");
    assert_eq!(view["nodes"]["first"]["status"], "succeeded");
    assert_eq!(view["nodes"]["long"]["status"], "cancelled");
}

#[test]
fn answer_names_what_is_wrong_when_there_is_nothing_to_answer() {
    let sandbox = Sandbox::new();
    sandbox.workflow("hello.toml", HELLO);
    let id = run_id_of(sandbox.run(&["workflows", "run", "hello"]).assert_code(0));
    let no_question = sandbox.run(&["workflows", "answer", &id, "greet", "yes"]);
    no_question.assert_code(1);
    assert!(
        no_question.stderr.contains("has no open question"),
        "{}",
        no_question.stderr
    );
    let no_run = sandbox.run(&["workflows", "answer", "nope", "greet", "yes"]);
    no_run.assert_code(1);
    assert!(
        no_run.stderr.contains("no run with id nope"),
        "{}",
        no_run.stderr
    );
}

#[test]
fn durability_ttl_and_lease_options_are_checked() {
    let sandbox = Sandbox::new();
    sandbox.workflow("hello.toml", HELLO);
    let full = sandbox.run(&["--durability", "full", "workflows", "run", "hello"]);
    full.assert_code(0);
    let bogus = sandbox.run(&["--durability", "sometimes", "workflows", "runs"]);
    assert_eq!(bogus.code, Some(2), "{}", bogus.stderr);
    assert!(
        bogus.stderr.contains("normal") && bogus.stderr.contains("full"),
        "{}",
        bogus.stderr
    );
    let zero = sandbox.run(&["--task-ttl", "0s", "workflows", "runs"]);
    assert_eq!(zero.code, Some(2), "{}", zero.stderr);
    assert!(zero.stderr.contains("more than zero"), "{}", zero.stderr);
    let nonsense = sandbox.run(&["--lease", "soon", "workflows", "runs"]);
    assert_eq!(nonsense.code, Some(2), "{}", nonsense.stderr);
}

#[test]
fn a_run_completes_on_more_worker_threads_and_none_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.workflow("hello.toml", HELLO);
    let four = sandbox.run(&["--worker-threads", "4", "workflows", "run", "hello"]);
    four.assert_code(0);
    let none = sandbox.run(&["--worker-threads", "0", "workflows", "runs"]);
    assert_eq!(none.code, Some(2), "{}", none.stderr);
    assert!(none.stderr.contains("--worker-threads"), "{}", none.stderr);
}

#[test]
fn show_mermaid_groups_a_phased_workflow_by_phase_in_phase_order() {
    let sandbox = Sandbox::new();
    let ran = sandbox.run(&["workflows", "show", "interactive_adr_planning", "--mermaid"]);
    ran.assert_code(0);
    let lines: Vec<&str> = ran.stdout.lines().map(str::trim).collect();
    let subgraphs: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("subgraph phase_"))
        .map(|l| l.split('[').next().unwrap())
        .collect();
    assert_eq!(
        subgraphs,
        [
            "problem_definition",
            "research_analysis",
            "option_exploration",
            "decision_making",
            "impact_assessment",
            "implementation_planning",
            "adr_generation"
        ],
        "{}",
        ran.stdout
    );
    // Each node stands inside its phase's subgraph.
    let research = lines
        .iter()
        .position(|l| l.starts_with("subgraph phase_research_analysis"))
        .unwrap();
    let end = research + lines[research..].iter().position(|l| *l == "end").unwrap();
    assert!(
        lines[research..end]
            .iter()
            .any(|l| l.starts_with("research_draft[")),
        "{}",
        ran.stdout
    );
    assert!(
        lines.contains(&"research_draft --> research_review"),
        "{}",
        ran.stdout
    );
}

#[test]
fn a_written_history_limit_over_the_operators_cap_is_refused_when_the_file_loads() {
    let sandbox = Sandbox::new();
    let file = sandbox.workflow(
        "reader.toml",
        "[nodes.past]\nhistory = { workflow = \"deploy\", limit = 50 }\n",
    );
    let file = file.to_str().unwrap();
    sandbox.run(&["workflows", "validate", file]).assert_code(0);
    let refused = sandbox.run(&["workflows", "validate", file, "--max-history-rows", "10"]);
    refused.assert_code(1);
    assert!(
        refused.stderr.contains(
            "nodes.past.history.limit: limit 50 is over the most runs a history node may read \
             (10, --max-history-rows)"
        ),
        "{}",
        refused.stderr
    );
}
