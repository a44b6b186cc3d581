//! The operator's commands, as a hostile workflow author or model would try them: real
//! processes (`/bin/sh` scripts written into a temporary workspace) run by `command` nodes
//! of the application, with the commands file the operator gave. Here in one process;
//! `commands/binary.rs` drives the binary (its environment, its memory, a kill, a reload).

mod binary;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use mcp_task_server::app::{App, Config};
use mcp_task_server::engine::command::confinement_available;
use mcp_task_server::engine::report::{NodeStatus, RunReport, RunStatus};
use mcp_task_server::engine::{RunHandle, RunOptions};
use mcp_task_server::store::AuditRow;
use serde_json::{Value, json};
use sha2::Digest as _;
use tempfile::TempDir;

use crate::durable::{SHORT, World, crash, until};
use crate::support::backends::on_both_backends;
use crate::support::engine::{checked_inputs, plan};

/// The commands of most tests: each runs a script of the workspace with `/bin/sh`.
const COMMANDS: &str = r#"
[commands.echo]
argv = ["/bin/sh", "echo.sh", "{text}"]
env = ["PATH"]
[commands.echo.params.text]
type = "string"
maxLength = 100

[commands.fail]
argv = ["/bin/sh", "fail.sh"]
ok_exit_codes = [0, 3]

[commands.slow]
argv = ["/bin/sh", "slow.sh"]
env = ["PATH"]
writable = ["out"]
timeout = "2s"

[commands.write]
argv = ["/bin/sh", "write.sh", "{outside}"]
writable = ["out"]
[commands.write.params.outside]
type = "string"
"#;

/// A workspace with the scripts of [`COMMANDS`] and the folder `out`, and, outside it, the
/// commands file (the workspace must not hold it).
pub(crate) struct Site {
    dir: TempDir,
}

impl Site {
    pub(crate) fn new(commands: &str) -> Site {
        let site = Site {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(site.workspace().join("out")).unwrap();
        site.script("echo.sh", r#"printf '[%s]\n' "$@""#);
        site.script("fail.sh", "echo 'about to fail' >&2\nexit ${CODE:-7}");
        // Leaves a child behind, says both process ids, and waits for it.
        site.script(
            "slow.sh",
            "sleep 300 &\necho $! > out/child.pid\necho $$ > out/leader.pid\nwait",
        );
        site.script(
            "write.sh",
            "echo ok > out/inside.txt\n\
             echo no > root.txt; echo \"root: $?\"\n\
             echo no > \"$1\"; echo \"outside: $?\"",
        );
        site.set_commands(commands);
        site
    }

    pub(crate) fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    /// The commands file, readable and writable by its owner alone.
    pub(crate) fn commands(&self) -> PathBuf {
        self.dir.path().join("commands.toml")
    }

    pub(crate) fn set_commands(&self, toml: &str) {
        let path = self.commands();
        std::fs::write(&path, toml).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    /// Writes the script `name` into the workspace.
    pub(crate) fn script(&self, name: &str, body: &str) {
        std::fs::write(self.workspace().join(name), body).unwrap();
    }

    /// A file under the workspace's `out`, if a command wrote it.
    pub(crate) fn out(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.workspace().join("out").join(name)).ok()
    }

    /// The process id a script wrote to `out/<name>`, once it has.
    pub(crate) fn pid(&self, name: &str) -> Option<i32> {
        self.out(name)?.trim().parse().ok()
    }

    /// The application on a database in memory, over this workspace and commands file.
    fn app(&self) -> App {
        let config = Config {
            commands: Some(self.commands()),
            ..Config::new(":memory:", self.workspace())
        };
        App::open(&config).expect("the application opens")
    }
}

/// Whether process `pid` runs: a zombie (an orphan whose adoptive parent has not reaped it
/// yet) has ended.
pub(crate) fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with(['Z', 'X'])
        }
    }
}

fn start(app: &App, toml: &str, inputs: Value) -> RunHandle {
    let plan = plan(toml);
    let inputs = checked_inputs(&plan, inputs);
    app.engine().start(plan, inputs, RunOptions::default())
}

async fn run(app: &App, toml: &str, inputs: Value) -> RunReport {
    start(app, toml, inputs).join.await.unwrap()
}

/// The audit rows of command runs and refusals, with their arguments read.
fn command_rows(app: &App) -> Vec<(AuditRow, Value)> {
    let store = app.engine().todo_tools().store();
    let rows = store.audit_rows().unwrap().into_iter();
    rows.filter(|row| row.tool == "command")
        .map(|row| {
            let args = serde_json::from_str(&row.args).unwrap();
            (row, args)
        })
        .collect()
}

const ECHO: &str = r#"
[inputs.text]
type = "string"
[nodes.say]
command = { name = "echo", args = { text = "{{ inputs.text }}" } }
"#;

#[tokio::test]
async fn a_command_node_runs_the_operators_program_and_answers_its_exit_output_and_time() {
    let site = Site::new(COMMANDS);
    let app = site.app();
    let report = run(&app, ECHO, json!({ "text": "hello world" })).await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let output = report.nodes["say"].output.clone().unwrap();
    let mut keys: Vec<&String> = output.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["exit_code", "stderr", "stdout", "took_ms", "truncated"]
    );
    assert_eq!(output["exit_code"], 0);
    assert_eq!(output["stdout"], "[hello world]\n");
    assert_eq!(output["truncated"], false);
    let rows = command_rows(&app);
    assert_eq!(rows.len(), 1);
    let (row, args) = &rows[0];
    assert_eq!(row.outcome, "ok");
    assert_eq!(row.node_id.as_deref(), Some("say"));
    assert_eq!(args["command"], "echo");
    assert_eq!(args["argv"], json!(["/bin/sh", "echo.sh", "hello world"]));
    assert_eq!(args["exit_code"], 0);
    assert_eq!(args["took_ms"], output["took_ms"]);
    let digest = sha2::Sha256::digest(b"[hello world]\n");
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        args["output_sha256"], hex,
        "the digest of stdout, then stderr"
    );
}

#[tokio::test]
async fn an_exit_the_operator_does_not_list_fails_the_node_and_one_listed_does_not() {
    let site = Site::new(COMMANDS);
    let app = site.app();
    let toml = r#"
        [nodes.bad]
        command = { name = "fail" }
        on_failure = "continue"
    "#;
    let report = run(&app, toml, json!({})).await;
    let bad = &report.nodes["bad"];
    assert_eq!(bad.status, NodeStatus::Failed);
    let error = bad.error.as_ref().unwrap();
    assert_eq!(error.code.as_str(), "command_failed");
    assert!(
        error
            .message
            .contains("exited with 7, which the commands file does not list as fine")
            && error.message.contains("its stderr ends: about to fail"),
        "{}",
        error.message
    );
    site.script("fail.sh", "exit 3");
    let report = run(&app, toml, json!({})).await;
    assert_eq!(report.nodes["bad"].status, NodeStatus::Succeeded);
    assert_eq!(report.nodes["bad"].output.as_ref().unwrap()["exit_code"], 3);
    let outcomes: Vec<String> = command_rows(&app)
        .into_iter()
        .map(|(row, _)| row.outcome)
        .collect();
    assert_eq!(outcomes, ["error", "ok"]);
}

#[tokio::test]
async fn an_unknown_command_fails_its_node_and_is_audited_rejected_and_without_a_file_none_runs() {
    let site = Site::new(COMMANDS);
    let app = site.app();
    let toml = r#"
        [nodes.sneak]
        command = { name = "rm_everything", args = { path = "/" } }
    "#;
    let report = run(&app, toml, json!({})).await;
    let error = report.nodes["sneak"].error.clone().unwrap();
    assert_eq!(error.code.as_str(), "command_not_allowed");
    assert!(
        error.message.contains("does not name it"),
        "{}",
        error.message
    );
    let rows = command_rows(&app);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0.outcome, "rejected");
    assert_eq!(rows[0].1["command"], "rm_everything");

    // No commands file: the same workflow, and one naming a command a file would hold.
    let bare = App::open(&Config::new(":memory:", site.workspace())).unwrap();
    let report = run(&bare, ECHO, json!({ "text": "hi" })).await;
    let error = report.nodes["say"].error.clone().unwrap();
    assert_eq!(error.code.as_str(), "command_not_allowed");
    assert!(
        error.message.contains("without a commands file"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn hostile_values_arrive_as_one_literal_argv_element_each_or_are_refused() {
    let site = Site::new(COMMANDS);
    let app = site.app();
    for text in [
        "two words",
        "a; touch out/pwned",
        "$(touch out/pwned)",
        "`touch out/pwned`",
        "a && touch out/pwned || b",
        "> out/pwned",
        "${HOME}",
        "'quoted' \"twice\"",
        "",
    ] {
        let report = run(&app, ECHO, json!({ "text": text })).await;
        assert_eq!(report.status, RunStatus::Succeeded, "{text:?}: {report:?}");
        let output = report.nodes["say"].output.clone().unwrap();
        assert_eq!(output["stdout"], format!("[{text}]\n"), "{text:?}");
    }
    for (text, said) in [
        ("line\nbreak", "must not contain a line break"),
        ("nul\0byte", "must not contain a NUL"),
        ("-rf", "must not start with `-`"),
        ("--output=/etc/passwd", "must not start with `-`"),
        (&"x".repeat(101)[..], "at most 100"),
    ] {
        let report = run(&app, ECHO, json!({ "text": text })).await;
        let error = report.nodes["say"].error.clone().unwrap();
        assert_eq!(error.code.as_str(), "invalid_value", "{text:?}");
        assert!(
            error.message.contains("`text`") && error.message.contains(said),
            "{text:?}: {}",
            error.message
        );
    }
    assert_eq!(site.out("pwned"), None, "no value reached a shell");
    let outcomes: Vec<String> = command_rows(&app)
        .into_iter()
        .map(|(row, _)| row.outcome)
        .collect();
    assert_eq!(outcomes.iter().filter(|o| *o == "ok").count(), 9);
    assert_eq!(outcomes.iter().filter(|o| *o == "rejected").count(), 5);
}

#[tokio::test]
async fn a_write_outside_the_writable_folders_is_refused_by_landlock() {
    let confinement = confinement_available();
    if !confinement.filesystem() {
        mcp_task_server::store::note_skipped(
            &crate::support::skip::test_name(),
            &format!("this kernel cannot confine writes ({confinement})"),
        );
        return;
    }
    let site = Site::new(COMMANDS);
    let elsewhere = tempfile::tempdir().unwrap();
    let outside = elsewhere.path().join("escaped.txt");
    let app = site.app();
    let toml = r#"
        [inputs.outside]
        type = "string"
        [nodes.write]
        command = { name = "write", args = { outside = "{{ inputs.outside }}" } }
    "#;
    let report = run(&app, toml, json!({ "outside": outside.to_str().unwrap() })).await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let output = report.nodes["write"].output.clone().unwrap();
    assert_eq!(site.out("inside.txt").as_deref(), Some("ok\n"));
    assert!(!site.workspace().join("root.txt").exists());
    assert!(!outside.exists());
    let stdout = output["stdout"].as_str().unwrap();
    assert!(
        !stdout.contains("root: 0") && !stdout.contains("outside: 0"),
        "{stdout}"
    );
    let stderr = output["stderr"].as_str().unwrap();
    assert!(stderr.contains("Permission denied"), "{stderr}");
}

#[tokio::test]
async fn a_grandchild_left_running_is_killed_with_the_command_at_its_timeout() {
    let site = Site::new(COMMANDS);
    let app = site.app();
    let report = run(
        &app,
        "[nodes.slow]\ncommand = { name = \"slow\" }\n",
        json!({}),
    )
    .await;
    let error = report.nodes["slow"].error.clone().unwrap();
    assert_eq!(error.code.as_str(), "timeout");
    assert!(
        error
            .message
            .contains("ran past its timeout of 2s and was killed with its process group"),
        "{}",
        error.message
    );
    let (leader, child) = (
        site.pid("leader.pid").unwrap(),
        site.pid("child.pid").unwrap(),
    );
    // SIGKILL is delivered, not awaited: a process of the group may take a moment to end.
    until("the group is gone", || !alive(leader) && !alive(child)).await;
    let rows = command_rows(&app);
    assert_eq!(rows[0].1["outcome"], "timed_out");
    assert_eq!(rows[0].0.outcome, "error");
}

#[tokio::test]
async fn a_cancelled_run_kills_the_command_with_its_group_and_audits_it() {
    let commands = COMMANDS.replace("timeout = \"2s\"", "timeout = \"10m\"");
    let site = Site::new(&commands);
    let app = site.app();
    let handle = start(
        &app,
        "[nodes.slow]\ncommand = { name = \"slow\" }\n",
        json!({}),
    );
    until("the command runs", || site.pid("leader.pid").is_some()).await;
    let (leader, child) = (
        site.pid("leader.pid").unwrap(),
        site.pid("child.pid").unwrap(),
    );
    assert!(alive(leader) && alive(child));
    handle.cancel.cancel();
    let report = handle.join.await.unwrap();
    assert_eq!(report.status, RunStatus::Cancelled);
    assert_eq!(report.nodes["slow"].status, NodeStatus::Cancelled);
    until("the group is gone", || !alive(leader) && !alive(child)).await;
    let rows = command_rows(&app);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1["outcome"], "cancelled");
}

/// A workflow that runs `build` where the operator allows it, and else asks a person to
/// run it and report back: the fallback of the docs.
const FALLBACK: &str = r#"
[nodes.build]
command = { name = "echo", args = { text = "built" } }
when = "command_allowed('echo')"

[nodes.ask_person]
input = { message = "Please run `./echo.sh built` and paste what it printed.", schema = { type = "object", properties = { stdout = { type = "string" } } }, default = { stdout = "(nobody ran it)" } }
when = "not command_allowed('echo')"

[nodes.report]
value = "nodes.build.output.stdout if nodes.build.status == 'succeeded' else nodes.ask_person.output.stdout"
needs = ["build", "ask_person"]
trigger = "all_done"

[output]
stdout = "nodes.report.output"
"#;

#[tokio::test]
async fn command_allowed_lets_a_workflow_fall_back_to_asking_a_person() {
    let site = Site::new(COMMANDS);
    let report = run(&site.app(), FALLBACK, json!({})).await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    assert_eq!(report.nodes["ask_person"].status, NodeStatus::Skipped);
    assert_eq!(report.output, json!({ "stdout": "[built]\n" }));

    site.set_commands("[commands.other]\nargv = [\"/bin/true\"]\n");
    let report = run(&site.app(), FALLBACK, json!({})).await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    assert_eq!(report.nodes["build"].status, NodeStatus::Skipped);
    assert_eq!(report.output, json!({ "stdout": "(nobody ran it)" }));
}

/// Four commands cut off by a crash, one for each thing a resumed run may do. Each counts
/// its starts, says its process id, and waits until `out/go` exists.
const RESUMABLE: &str = r#"
[commands.ask_done]
argv = ["/bin/sh", "wait_for_go.sh", "ask_done"]
env = ["PATH"]
writable = ["out"]
[commands.ask_failed]
argv = ["/bin/sh", "wait_for_go.sh", "ask_failed"]
env = ["PATH"]
writable = ["out"]
[commands.rerun]
argv = ["/bin/sh", "wait_for_go.sh", "rerun"]
env = ["PATH"]
writable = ["out"]
on_resume = "rerun"
[commands.fail]
argv = ["/bin/sh", "wait_for_go.sh", "fail"]
env = ["PATH"]
writable = ["out"]
on_resume = "fail"
"#;

const CUT_OFF: &str = r#"
[nodes.ask_done]
command = { name = "ask_done" }
[nodes.ask_failed]
command = { name = "ask_failed" }
on_failure = "continue"
[nodes.rerun]
command = { name = "rerun" }
[nodes.fail]
command = { name = "fail" }
on_failure = "continue"
"#;

/// Writes the waiting script into `workspace`.
pub(crate) fn wait_for_go(workspace: &Path) {
    std::fs::create_dir_all(workspace.join("out")).unwrap();
    std::fs::write(
        workspace.join("wait_for_go.sh"),
        "echo started >> \"out/$1.starts\"\n\
         echo $$ > \"out/$1.pid\"\n\
         while [ ! -e out/go ]; do sleep 0.05; done",
    )
    .unwrap();
}

fn starts(workspace: &Path, name: &str) -> usize {
    let path = workspace.join("out").join(format!("{name}.starts"));
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}

on_both_backends! {
    async fn a_run_resumed_after_a_crash_mid_command_does_what_its_on_resume_says(place) {
        let world = World::new(place);
        let files = tempfile::tempdir().unwrap();
        let commands = files.path().join("commands.toml");
        std::fs::write(&commands, RESUMABLE).unwrap();
        std::fs::set_permissions(&commands, std::fs::Permissions::from_mode(0o600)).unwrap();
        wait_for_go(world.workspace());
        let a = world.process_running(SHORT, &commands);
        let parked = RunOptions {
            park_questions: true,
            ..RunOptions::default()
        };
        let handle = crate::durable::start(&a, CUT_OFF, json!({}), parked.clone());
        let id = handle.run_id.clone();
        let out = world.workspace().join("out");
        until("every command runs", || {
            ["ask_done", "ask_failed", "rerun", "fail"].iter().all(|n| out.join(format!("{n}.pid")).exists())
        })
        .await;
        crash(handle).await;
        std::fs::write(out.join("go"), "").unwrap();

        tokio::time::sleep(SHORT * 2).await;
        let b = world.process_running(SHORT, &commands);
        let resumed = b.engine.resume(&id, parked).unwrap();
        let store = world.store();
        until("both questions are asked", || store.questions(&id).unwrap().len() == 2).await;
        let open = b.registry.open_questions(&id).unwrap();
        let text = serde_json::to_string(&open[0].request).unwrap();
        assert!(text.contains("was running when the server that ran it stopped"), "{text}");
        assert!(text.contains("Did it complete?"), "{text}");
        b.registry.answer_question(&id, "ask_done", None, &json!({ "outcome": "completed" })).unwrap();
        b.registry.answer_question(&id, "ask_failed", None, &json!({ "outcome": "failed" })).unwrap();
        let report = resumed.join.await.unwrap();

        let done = &report.nodes["ask_done"];
        assert_eq!(done.status, NodeStatus::Succeeded, "{report:?}");
        assert_eq!(done.output.as_ref().unwrap()["completed_by"], "person");
        let failed = report.nodes["ask_failed"].error.clone().unwrap();
        assert_eq!(failed.code.as_str(), "command_interrupted");
        assert!(failed.message.contains("said it did not complete"), "{}", failed.message);
        assert_eq!(report.nodes["rerun"].status, NodeStatus::Succeeded);
        assert_eq!(report.nodes["rerun"].output.as_ref().unwrap()["exit_code"], 0);
        let fail = report.nodes["fail"].error.clone().unwrap();
        assert_eq!(fail.code.as_str(), "command_interrupted");
        assert!(fail.message.contains("its on_resume is \"fail\""), "{}", fail.message);
        let ws = world.workspace();
        assert_eq!(
            [starts(ws, "ask_done"), starts(ws, "ask_failed"), starts(ws, "rerun"), starts(ws, "fail")],
            [1, 1, 2, 1],
            "run again only where on_resume says rerun"
        );
    }
}

on_both_backends! {
    async fn a_resumed_command_that_asks_fails_when_nobody_can_answer(place) {
        let world = World::new(place);
        let files = tempfile::tempdir().unwrap();
        let commands = files.path().join("commands.toml");
        std::fs::write(&commands, RESUMABLE).unwrap();
        std::fs::set_permissions(&commands, std::fs::Permissions::from_mode(0o600)).unwrap();
        wait_for_go(world.workspace());
        let a = world.process_running(SHORT, &commands);
        let toml = "[nodes.ask_done]\ncommand = { name = \"ask_done\" }\n";
        let handle = crate::durable::start(&a, toml, json!({}), RunOptions::default());
        let id = handle.run_id.clone();
        let pid = world.workspace().join("out/ask_done.pid");
        until("the command runs", || pid.exists()).await;
        crash(handle).await;

        tokio::time::sleep(SHORT * 2).await;
        let b = world.process_running(SHORT, &commands);
        let report = b.engine.resume(&id, RunOptions::default()).unwrap().join.await.unwrap();
        let error = report.nodes["ask_done"].error.clone().unwrap();
        assert_eq!(error.code.as_str(), "command_interrupted");
        assert!(error.message.contains("nobody who could say whether it completed"), "{}", error.message);
        assert_eq!(starts(world.workspace(), "ask_done"), 1, "not run again unasked");
    }
}
