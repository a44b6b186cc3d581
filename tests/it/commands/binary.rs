//! The operator's commands through the binary: a secret of the server's environment the
//! command never sees, a flood of output that the server's memory never holds, a server
//! killed in the middle of a command whose resumed run asks, a shutdown that kills the
//! command, a reload on SIGHUP (and one refused), a start refused, and `workflows validate`.

use std::io::{BufRead as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::{alive, wait_for_go};
use crate::support::backends::{Place, on_both_backends};
use crate::support::{Sandbox, wait_until};

/// A sandbox (workflows folder, workspace, database) whose workspace holds the scripts,
/// and beside it the commands file `commands`, owner-only.
fn sandbox(commands: &str, workflows: &[(&str, &str)]) -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.workspace.join("out")).unwrap();
    let write =
        |name: &str, body: &str| std::fs::write(sandbox.workspace.join(name), body).unwrap();
    write("echo.sh", r#"printf '[%s]\n' "$@""#);
    write("env.sh", "env");
    write(
        "flood.sh",
        "head -c 268435456 /dev/zero | tr '\\0' x\necho flooded >&2",
    );
    wait_for_go(&sandbox.workspace);
    set_commands(&sandbox, commands);
    for (name, text) in workflows {
        sandbox.workflow(name, text);
    }
    sandbox
}

fn set_commands(sandbox: &Sandbox, commands: &str) {
    let path = sandbox.path("commands.toml");
    std::fs::write(&path, commands).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// The binary on `db` with the sandbox's commands file, then `args`.
fn binary(sandbox: &Sandbox, db: &str, args: &[&str]) -> Command {
    let mut command = sandbox.binary(db);
    command
        .arg("--commands")
        .arg(sandbox.path("commands.toml"))
        .env_remove("TASKS_COMMANDS")
        .args(args);
    command
}

/// Stdout of a finished run of the binary, as one JSON value, after checking it exited
/// as `code` says.
fn json_of(output: std::process::Output, code: i32) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(code),
        "{stdout}\n--- stderr ---\n{stderr}"
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

#[test]
fn a_secret_of_the_servers_environment_never_reaches_the_command() {
    let commands = "[commands.env]\nargv = [\"/bin/sh\", \"env.sh\"]\nenv = [\"PATH\", \"LANG\"]\n";
    let workflow = "[nodes.env]\ncommand = { name = \"env\" }\n";
    let sandbox = sandbox(commands, &[("env.toml", workflow)]);
    let db = sandbox.db.to_str().unwrap().to_owned();
    let output = binary(&sandbox, &db, &["workflows", "run", "env", "--json"])
        .env("TASKS_TEST_SECRET", "hunter2-never-shown")
        .env("AWS_SECRET_ACCESS_KEY", "also-never-shown")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let report = json_of(output, 0);
    let stdout = report["nodes"]["env"]["output"]["stdout"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(stdout.contains("PATH=/usr/bin:/bin"), "{stdout}");
    assert!(
        !stdout.contains("hunter2") && !stdout.contains("also-never-shown"),
        "{stdout}"
    );
    assert!(!stdout.contains("TASKS_"), "{stdout}");
}

/// The peak resident memory of process `pid` since it started its program, in KiB
/// (`VmHWM`: of its own memory alone, not of the process it was forked from).
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_flood_of_output_is_capped_and_the_servers_memory_never_holds_it() {
    let commands = "[commands.flood]\nargv = [\"/bin/sh\", \"flood.sh\"]\nenv = [\"PATH\"]\n\
                    max_output = \"64KiB\"\ntimeout = \"10m\"\n\
                    [commands.hold]\nargv = [\"/bin/sh\", \"wait_for_go.sh\", \"hold\"]\n\
                    env = [\"PATH\"]\nwritable = [\"out\"]\n";
    // Once the flood is through, the run holds until the test has read the server's peak.
    let workflow = "[nodes.flood]\ncommand = { name = \"flood\" }\n\
                    [nodes.hold]\ncommand = { name = \"hold\" }\nneeds = [\"flood\"]\n";
    let sandbox = sandbox(commands, &[("flood.toml", workflow)]);
    let db = sandbox.db.to_str().unwrap().to_owned();
    let child = binary(&sandbox, &db, &["workflows", "run", "flood", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = sandbox.workspace.join("out");
    wait_until("the flood is through", || out.join("hold.pid").exists());
    let peak_mib = peak_kib(child.id()) / 1024;
    std::fs::write(out.join("go"), "").unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_str(&String::from_utf8_lossy(&output.stdout)).unwrap();
    let output = &report["nodes"]["flood"]["output"];
    assert_eq!(output["exit_code"], 0, "{report}");
    assert_eq!(output["truncated"], true);
    let kept = output["stdout"].as_str().unwrap();
    assert_eq!(kept.len(), 64 * 1024);
    assert!(kept.bytes().all(|b| b == b'x'));
    assert_eq!(output["stderr"], "flooded\n");
    assert!(
        peak_mib < 128,
        "256 MiB of output went through a server that peaked at {peak_mib} MiB"
    );
}

/// A command that waits for `out/go`, and a workflow that runs it.
const CUT_OFF_COMMANDS: &str = "[commands.deploy]\nargv = [\"/bin/sh\", \"wait_for_go.sh\", \"deploy\"]\nenv = [\"PATH\"]\nwritable = [\"out\"]\n";
const DEPLOY: &str = "[nodes.deploy]\ncommand = { name = \"deploy\" }\n";

fn run_id(place: &Place) -> Option<String> {
    let store = place.store();
    let runs = store.list_runs(None, mcp_task_server::store::Scope::Everyone, 1);
    runs.unwrap().into_iter().next().map(|run| run.id)
}

on_both_backends! {
    fn a_server_killed_in_the_middle_of_a_command_asks_on_resume_and_runs_it_again_if_told(place) {
        let sandbox = sandbox(CUT_OFF_COMMANDS, &[("deploy.toml", DEPLOY)]);
        let db = place.location();
        let with_lease = |args: &[&str]| {
            let mut command = binary(&sandbox, &db, args);
            command.arg("--lease").arg("600ms");
            command
        };
        let mut first = with_lease(&["workflows", "run", "deploy", "--wait-for-answers", "--json"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = sandbox.workspace.join("out");
        wait_until("the command runs", || out.join("deploy.pid").exists());
        first.kill().unwrap();
        first.wait().unwrap();
        // The command, in a session of its own, outlives a SIGKILL of the server: this is
        // the case `on_resume` is for. It is ended here, as an operator would find it.
        let leader: i32 = std::fs::read_to_string(out.join("deploy.pid")).unwrap().trim().parse().unwrap();
        assert!(alive(leader));
        // SAFETY: kills the process group the command leads.
        unsafe { libc::killpg(leader, libc::SIGKILL) };
        let id = run_id(&place).expect("the run is recorded");

        std::thread::sleep(Duration::from_millis(1200));
        let resumed = with_lease(&["workflows", "resume", &id, "--wait-for-answers", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let store = place.store();
        wait_until("the resumed run asks", || store.questions(&id).unwrap().len() == 1);
        let question = &store.questions(&id).unwrap()[0];
        assert_eq!(question.key, "attempt-1");
        assert!(question.request.contains("The command `deploy`"), "{}", question.request);
        assert!(question.request.contains("Did it complete?"), "{}", question.request);
        std::fs::write(out.join("go"), "").unwrap();
        let answered = with_lease(&["workflows", "answer", &id, "deploy", r#"{"outcome":"rerun"}"#])
            .output()
            .unwrap();
        assert!(answered.status.success(), "{}", String::from_utf8_lossy(&answered.stderr));
        let report = json_of(resumed.wait_with_output().unwrap(), 0);
        assert_eq!(report["status"], "succeeded", "{report}");
        assert_eq!(report["nodes"]["deploy"]["output"]["exit_code"], 0);
        assert_eq!(report["nodes"]["deploy"]["attempts"], 2, "the one cut off, and the rerun");
        let starts = std::fs::read_to_string(out.join("deploy.starts")).unwrap();
        assert_eq!(starts.lines().count(), 2, "run again once, as the person said");
    }
}

/// The binary serving stdio, spoken to in raw JSON-RPC lines, killed when dropped (and
/// after two minutes in any case, so that a server that never answers fails the test).
struct Serving {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    stderr: std::path::PathBuf,
    gone: Arc<AtomicBool>,
    next: u64,
}

impl Serving {
    fn start(sandbox: &Sandbox) -> Serving {
        let stderr = sandbox.path("serve.log");
        let db = sandbox.db.to_str().unwrap().to_owned();
        let mut child = binary(sandbox, &db, &["serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let gone: Arc<AtomicBool> = Arc::default();
        let (watched, pid) = (Arc::clone(&gone), child.id() as libc::pid_t);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(120));
            if !watched.load(Ordering::SeqCst) {
                // SAFETY: kills the server, which is still our unreaped child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        });
        let stdin = child.stdin.take();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut serving = Serving {
            child,
            stdin,
            stdout,
            stderr,
            gone,
            next: 1,
        };
        serving.request(
            "initialize",
            json!({ "protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": { "name": "commands-test", "version": "1" } }),
        );
        serving.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        serving
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and reads lines until its answer.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the server ended: {}",
                self.log()
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    /// Runs the workflow `name` and gives the text of its result.
    fn run(&mut self, name: &str) -> String {
        let answer = self.request(
            "tools/call",
            json!({ "name": "run_workflow", "arguments": { "workflow": name } }),
        );
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_owned()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn hang_up(&self) {
        // SAFETY: signals the server, still our unreaped child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGHUP) };
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.gone.store(true, Ordering::SeqCst);
    }
}

#[test]
fn sighup_reloads_the_commands_file_and_a_refused_reload_keeps_the_commands_in_force() {
    let echo = "[commands.echo]\nargv = [\"/bin/sh\", \"echo.sh\", \"early\"]\n";
    let late = "[nodes.late]\ncommand = { name = \"late\" }\n";
    let sandbox = sandbox(echo, &[("late.toml", late)]);
    let mut server = Serving::start(&sandbox);
    let said = server.log();
    assert!(
        said.contains("commands file loaded; confinement: "),
        "{said}"
    );
    let abi = mcp_task_server::engine::command::confinement_available().abi();
    match abi {
        0 => assert!(said.contains("no Landlock"), "{said}"),
        abi => assert!(said.contains(&format!("Landlock ABI {abi}")), "{said}"),
    }
    assert!(
        said.contains("late.toml"),
        "the unknown command is named at start: {said}"
    );
    let refused = server.run("late");
    assert!(refused.contains("command_not_allowed"), "{refused}");

    set_commands(
        &sandbox,
        &format!("{echo}[commands.late]\nargv = [\"/bin/sh\", \"echo.sh\", \"late\"]\n"),
    );
    server.hang_up();
    wait_until("the file is reloaded", || {
        server.log().contains("commands file reloaded")
    });
    let ran = server.run("late");
    assert!(ran.contains("[late]"), "{ran}");

    let path = sandbox.path("commands.toml");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    server.hang_up();
    wait_until("the reload is refused", || {
        server.log().contains("the commands in force stay")
    });
    assert!(
        server.log().contains("its group or others may write it"),
        "{}",
        server.log()
    );
    let still = server.run("late");
    assert!(still.contains("[late]"), "{still}");
}

#[test]
fn an_inline_definition_with_command_nodes_is_refused_every_one_named_and_nothing_runs() {
    let commands = "[commands.mark]\nargv = [\"/bin/sh\", \"mark.sh\"]\nwritable = [\"out\"]\n";
    let sandbox = sandbox(commands, &[]);
    std::fs::write(sandbox.workspace.join("mark.sh"), "echo ran > out/ran").unwrap();
    let mut server = Serving::start(&sandbox);
    let definition = json!({ "nodes": {
        "first": { "command": { "name": "mark" } },
        "fan": { "for_each": "[1, 2]", "command": { "name": "mark", "args": {} } },
        "probe": { "value": "command_allowed('mark')" },
        "fine": { "render": "x" },
    } });
    let answer = server.request(
        "tools/call",
        json!({ "name": "run_workflow", "arguments": { "definition": definition } }),
    );
    let result = &answer["result"]["structuredContent"];
    assert_eq!(result["ok"], false, "{answer}");
    assert_eq!(result["error"]["code"], "invalid_input");
    let message = result["error"]["message"].as_str().unwrap();
    for expected in [
        "nodes.first.command: command (`mark`) is not allowed in inline definitions",
        "nodes.fan.command: command (`mark`) is not allowed in inline definitions",
        "nodes.probe.value: `command_allowed` is not available in inline definitions",
    ] {
        assert!(message.contains(expected), "{expected:?} not in {message}");
    }
    drop(server);
    assert!(!sandbox.workspace.join("out/ran").exists(), "nothing ran");
    let rows = crate::support::audit_rows(&sandbox.db);
    let outcomes: Vec<(&str, &str)> = (rows.iter())
        .map(|row| (row.tool.as_str(), row.outcome.as_str()))
        .collect();
    assert_eq!(outcomes, [("run_workflow", "rejected")]);
}

#[test]
fn a_shutdown_in_the_middle_of_a_command_kills_its_process_group() {
    let sandbox = sandbox(CUT_OFF_COMMANDS, &[("deploy.toml", DEPLOY)]);
    let mut server = Serving::start(&sandbox);
    server.send(json!({ "jsonrpc": "2.0", "id": 99, "method": "tools/call",
        "params": { "name": "run_workflow", "arguments": { "workflow": "deploy" } } }));
    let pid = sandbox.workspace.join("out/deploy.pid");
    wait_until("the command runs", || pid.exists());
    let leader: i32 = std::fs::read_to_string(&pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(leader));
    // The client goes: stdin closes, and the server shuts down.
    drop(server.stdin.take());
    wait_until("the server exits", || {
        server.child.try_wait().unwrap().is_some()
    });
    wait_until("the command ends with the server", || !alive(leader));
}

#[test]
fn a_commands_file_others_may_write_is_refused_at_start() {
    let sandbox = sandbox("[commands.echo]\nargv = [\"/bin/sh\", \"echo.sh\"]\n", &[]);
    let path = sandbox.path("commands.toml");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
    let db = sandbox.db.to_str().unwrap().to_owned();
    let output = binary(&sandbox, &db, &["serve"]).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("its group or others may write it (mode 0664)"),
        "{stderr}"
    );
    assert!(stderr.contains("chmod go-w"), "{stderr}");
}

#[test]
fn workflows_validate_names_unknown_commands_and_refused_arguments_given_the_file() {
    let commands = "[commands.echo]\nargv = [\"/bin/sh\", \"echo.sh\", \"{text}\"]\n\
                    [commands.echo.params.text]\ntype = \"string\"\n";
    let workflow = "[nodes.a]\ncommand = { name = \"echo\", args = { text = \"-rf\" } }\n\
                    [nodes.b]\ncommand = { name = \"nope\" }\n";
    let sandbox = sandbox(commands, &[("uses.toml", workflow)]);
    let db = sandbox.db.to_str().unwrap().to_owned();
    let path = sandbox.workflows.join("uses.toml");
    let checked = binary(&sandbox, &db, &["workflows", "validate"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(checked.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(
        stderr.contains("uses.toml:2:"),
        "each problem at its line: {stderr}"
    );
    assert!(
        stderr.contains("nodes.a.command.args: `text`: must not start with `-`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("nodes.b.command.name: unknown command `nope`"),
        "{stderr}"
    );
    // Without a commands file, the same file is sound: which commands exist is the server's.
    let mut plain = sandbox.binary(&db);
    let plain = plain
        .env_remove("TASKS_COMMANDS")
        .args(["workflows", "validate"])
        .arg(&path);
    assert!(plain.output().unwrap().status.success());
}
