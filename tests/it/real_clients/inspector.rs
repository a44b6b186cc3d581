//! The MCP Inspector: its one-shot CLI (`--cli`) in the `legacy`, `auto` and `modern`
//! eras, and its session CLI (`mcpdo`) with a daemon of the sandbox's own.

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::process::Command;

use super::checks::{adr_answers_up_front, report};
use super::clients::{Ran, installed, node, npm_package, run, std_command};
use super::workflows::assert_adr_planned;
use crate::support::Sandbox;

/// An inline workflow with nothing to wait for.
pub(super) const QUICK: &str = r#"{"definition":{"name":"quick","nodes":{"hi":{"render":"hi"}}}}"#;

/// The MCP Inspector: its package directory and a Node.js it runs on (>= 22.19).
pub(super) struct Inspector {
    node: PathBuf,
    package: PathBuf,
}

pub(super) fn inspector() -> Result<Inspector, String> {
    let package = npm_package("@modelcontextprotocol/inspector")?;
    let node = node((22, 19))?;
    Ok(Inspector { node, package })
}

impl Inspector {
    /// `inspector --cli --format json --protocol-era <era> <args> -- <server>`.
    pub(super) fn cli(&self, sandbox: &Sandbox, era: &str, args: &[&str]) -> Command {
        let mut command = self.command(sandbox, "clients/launcher/build/index.js");
        command
            .args(["--cli", "--format", "json", "--protocol-era", era])
            .args(args)
            .arg("--")
            .args(sandbox.server());
        let mut command = Command::from(command);
        command.kill_on_drop(true);
        command
    }

    /// The CLI in protocol era `era` with `args`, against the server at `url` over
    /// Streamable HTTP.
    pub(super) fn cli_url(
        &self,
        sandbox: &Sandbox,
        era: &str,
        url: &str,
        args: &[&str],
    ) -> Command {
        let mut command = self.command(sandbox, "clients/launcher/build/index.js");
        command
            .args(["--cli", "--format", "json", "--protocol-era", era])
            .args(["--server-url", url])
            .args(args);
        let mut command = Command::from(command);
        command.kill_on_drop(true);
        command
    }

    /// `mcpdo --format json <args>`, with a daemon of the sandbox's own.
    pub(super) fn session(&self, sandbox: &Sandbox, args: &[&str]) -> Command {
        let mut command = Command::from(self.session_std(sandbox, args));
        command.kill_on_drop(true);
        command
    }

    pub(super) fn session_std(&self, sandbox: &Sandbox, args: &[&str]) -> std::process::Command {
        let mut command = self.command(sandbox, "clients/mcpdo/build/mcp-bin.js");
        command
            .env("MCP_INSPECTOR_DAEMON_DIR", sandbox.path("daemon"))
            .env("MCP_INSPECTOR_DAEMON_TOKEN", "real-clients-daemon-token")
            .env("MCP_INSPECTOR_SECRET_STORE", "memory")
            .args(["--format", "json"])
            .args(args);
        command
    }

    pub(super) fn command(&self, sandbox: &Sandbox, entry: &str) -> std::process::Command {
        let mut command = std_command(&self.node, sandbox);
        command
            .env("HOME", sandbox.path("home"))
            .env_remove("MCP_CATALOG_PATH")
            .env_remove("MCP_CLIENT_CONFIG_PATH")
            .arg(self.package.join(entry));
        command
    }

    /// Connects the session CLI to the server as `@tasks` in `era`; the daemon stops
    /// when the returned guard drops.
    pub(super) async fn connect<'a>(&'a self, sandbox: &'a Sandbox, era: &str) -> Daemon<'a> {
        let daemon = sandbox.path("daemon");
        std::fs::create_dir_all(&daemon).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&daemon, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let server = sandbox.server();
        let config = json!({ "mcpServers": { "tasks": {
            "command": server[0].to_string_lossy(),
            "args": server[1..].iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>(),
        } } });
        let path = sandbox.path("mcp.json");
        std::fs::write(&path, config.to_string()).unwrap();
        let guard = Daemon {
            inspector: self,
            sandbox,
        };
        let path = path.to_string_lossy().into_owned();
        let connected = run(self.session(
            sandbox,
            &["--config", &path, "connect", "tasks", "--era", era],
        ))
        .await
        .succeeded()
        .json();
        assert_eq!(connected["name"], "tasks", "{connected}");
        assert_eq!(connected["protocolEra"], era, "{connected}");
        guard
    }
}

/// The session CLI's daemon, stopped on drop (and killed by its pid if it will not stop).
pub(super) struct Daemon<'a> {
    inspector: &'a Inspector,
    sandbox: &'a Sandbox,
}

impl Daemon<'_> {
    pub(super) async fn run(&self, args: &[&str]) -> Ran {
        let mut all = vec!["--connection", "tasks"];
        all.extend_from_slice(args);
        run(self.inspector.session(self.sandbox, &all)).await
    }
}

impl Drop for Daemon<'_> {
    fn drop(&mut self) {
        let stopped = self
            .inspector
            .session_std(self.sandbox, &["daemon", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let lock = self.sandbox.path("daemon").join("mcpdod.lock");
        if !stopped && let Ok(pid) = std::fs::read_to_string(lock) {
            let _ = std::process::Command::new("kill").arg(pid.trim()).status();
        }
    }
}

pub(super) fn tool_names(listed: &Value) -> Vec<&str> {
    listed["result"]["tools"]
        .as_array()
        .expect("a tools array")
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

/// Fails unless every tool of [`TOOLS`] is listed.
pub(super) fn assert_lists_the_tools(listed: &Value) {
    let names = tool_names(listed);
    for tool in TOOLS {
        assert!(names.contains(&tool), "{tool} is not listed: {names:?}");
    }
}

/// The todo tools, the workflow tools and `ask` from the sandbox's workflows folder.
pub(super) const TOOLS: [&str; 8] = [
    "add_task",
    "list_tasks",
    "complete_task",
    "delete_task",
    "search_tasks",
    "list_workflows",
    "run_workflow",
    "ask",
];

#[tokio::test]
async fn inspector_cli_2025_11_25_era_lists_every_tool_and_calls_add_task() {
    let Some(inspector) = installed(inspector()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let init = run(inspector.cli(&sandbox, "legacy", &["--method", "initialize"]))
        .await
        .succeeded()
        .json();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "mcp-task-server");

    let listed = run(inspector.cli(&sandbox, "legacy", &["--method", "tools/list"]))
        .await
        .succeeded()
        .json();
    assert_lists_the_tools(&listed);

    let args = ["--method", "tools/call", "--tool-name", "add_task"];
    let added = run(inspector.cli(
        &sandbox,
        "legacy",
        &[
            &args[..],
            &["--tool-args-json", r#"{"title":"from the inspector"}"#],
        ]
        .concat(),
    ))
    .await
    .succeeded()
    .json();
    let result = &added["result"];
    assert_eq!(result["isError"], false, "{added}");
    assert_eq!(report(result)["title"], "from the inspector");
}

#[tokio::test]
async fn inspector_cli_modern_era_runs_a_workflow_as_a_task_and_polls_it_to_its_result() {
    let Some(inspector) = installed(inspector()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let init = run(inspector.cli(&sandbox, "modern", &["--method", "initialize"]))
        .await
        .succeeded()
        .json();
    assert_eq!(init["result"]["protocolVersion"], "2026-07-28");
    assert_eq!(
        init["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({})
    );

    let listed = run(inspector.cli(&sandbox, "modern", &["--method", "tools/list"]))
        .await
        .succeeded()
        .json();
    assert_lists_the_tools(&listed);

    let call = [
        "--method",
        "tools/call",
        "--tool-name",
        "run_workflow",
        "--tool-args-json",
        QUICK,
    ];
    let ran = run(inspector.cli(&sandbox, "modern", &call))
        .await
        .succeeded()
        .json();
    let result = &ran["result"];
    assert_eq!(result["isError"], false, "{ran}");
    let report = report(result);
    assert_eq!(report["workflow"], "quick");
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["nodes"]["hi"]["output"], "hi");
}

#[tokio::test]
async fn inspector_cli_auto_era_discovers_2026_07_28_and_calls_add_task() {
    let Some(inspector) = installed(inspector()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let init = run(inspector.cli(&sandbox, "auto", &["--method", "initialize"]))
        .await
        .succeeded()
        .json();
    assert_eq!(init["result"]["protocolVersion"], "2026-07-28");

    let call = [
        "--method",
        "tools/call",
        "--tool-name",
        "add_task",
        "--tool-args-json",
        r#"{"title":"auto","tags":["x"]}"#,
    ];
    let added = run(inspector.cli(&sandbox, "auto", &call))
        .await
        .succeeded()
        .json();
    let todo = report(&added["result"]);
    assert_eq!(todo["title"], "auto");
    assert_eq!(todo["tags"], json!(["x"]));
}

#[tokio::test]
async fn inspector_cli_modern_era_plans_an_adr_with_every_answer_passed_up_front() {
    let Some(inspector) = installed(inspector()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let answers = adr_answers_up_front().to_string();
    let call = [
        "--method",
        "tools/call",
        "--tool-name",
        "interactive_adr_planning",
        "--tool-args-json",
        &answers,
    ];
    let ran = run(inspector.cli(&sandbox, "modern", &call))
        .await
        .succeeded()
        .json();
    let result = &ran["result"];
    // Nothing was asked: every node that asks was skipped.
    let nodes = &report(result)["nodes"];
    for node in [
        "problem_ask",
        "research_draft",
        "research_review",
        "options_draft",
        "options_review",
        "decision_ask",
        "impacts_draft",
        "impacts_review",
        "plan_draft",
        "plan_review",
    ] {
        assert_eq!(nodes[node]["status"], "skipped", "{node}: {}", nodes[node]);
    }
    assert_adr_planned(&sandbox, result, 1);
}

#[tokio::test]
async fn inspector_session_modern_era_answers_the_question_of_an_ask_task_and_gets_the_task() {
    let Some(inspector) = installed(inspector()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let session = inspector.connect(&sandbox, "modern").await;

    let pending = session
        .run(&["tools/call", "ask", "who:=inspector"])
        .await
        .succeeded()
        .json();
    let pending = &pending["elicitationPending"];
    assert_eq!(pending["message"], "Approve inspector?", "{pending}");
    assert_eq!(pending["mode"], "form");
    assert_eq!(pending["origin"], "task-input-required");
    assert_eq!(
        pending["requestedSchema"],
        json!({ "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] })
    );
    let id = pending["elicitationId"].as_str().unwrap();

    let result = session
        .run(&["elicitation/respond", id, "ok:=true"])
        .await
        .succeeded()
        .json();
    assert_eq!(result["isError"], false, "{result}");
    let report = report(&result);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(
        report["nodes"]["todo"]["output"]["title"],
        "approved inspector"
    );

    // A workflow's run id is its task's id.
    let run_id = report["run_id"].as_str().unwrap();
    let got = session.run(&["tasks/get", run_id]).await.succeeded().json();
    let task = &got["task"];
    assert_eq!(task["taskId"], run_id, "{got}");
    assert_eq!(task["status"], "completed");
    assert_eq!(task["statusMessage"], "3/3 · completed");
    assert_eq!(
        task["raw"]["result"]["structuredContent"]["data"]["nodes"]["todo"]["output"]["title"],
        "approved inspector"
    );
}

#[tokio::test]
async fn inspector_2025_11_25_era_sees_task_support_and_runs_workflows_and_tasks() {
    let Some(inspector) = installed(inspector()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let listed = run(inspector.cli(&sandbox, "legacy", &["--method", "tools/list"]))
        .await
        .succeeded()
        .json();
    let tools = listed["result"]["tools"].as_array().unwrap();
    for tool in tools
        .iter()
        .filter(|t| TOOLS.contains(&t["name"].as_str().unwrap()))
    {
        let expected = if tool["name"] == "list_workflows" {
            Value::Null
        } else {
            json!({ "taskSupport": "optional" })
        };
        assert_eq!(tool["execution"], expected, "{}", tool["name"]);
    }

    let call = [
        "--method",
        "tools/call",
        "--tool-name",
        "run_workflow",
        "--tool-args-json",
        QUICK,
    ];
    let ran = run(inspector.cli(&sandbox, "legacy", &call)).await;
    let ran = ran.succeeded().json();
    assert_eq!(report(&ran["result"])["status"], "succeeded");

    let session = inspector.connect(&sandbox, "legacy").await;
    let added = session
        .run(&["tools/call", "--task", "add_task", "title:=as a task"])
        .await
        .succeeded()
        .json();
    assert_eq!(report(&added)["title"], "as a task");
    let listed = session.run(&["tasks/list"]).await.succeeded().json();
    let tasks = listed["tasks"].as_array().unwrap();
    // The call's task, then the sub-task of its one node.
    assert_eq!(tasks.len(), 2, "{listed}");
    assert_eq!(tasks[1]["statusMessage"], "succeeded", "{listed}");
    let task_id = tasks[0]["taskId"].as_str().unwrap();
    let got = session
        .run(&["tasks/get", task_id])
        .await
        .succeeded()
        .json();
    assert_eq!(got["task"]["status"], "completed", "{got}");
}

#[tokio::test]
async fn inspector_cli_lists_prompts_gets_one_and_reads_a_workflow_resource() {
    let Some(inspector) = installed(inspector()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let listed = run(inspector.cli(&sandbox, "legacy", &["--method", "prompts/list"]))
        .await
        .succeeded()
        .json();
    let prompts = listed["result"]["prompts"].as_array().unwrap();
    assert!(
        prompts
            .iter()
            .any(|p| p["name"] == "interactive_adr_planning"),
        "{listed}"
    );
    let args = [
        "--method",
        "prompts/get",
        "--prompt-name",
        "interactive_adr_planning",
        "--prompt-args",
        "title=Pick a queue",
    ];
    let got = run(inspector.cli(&sandbox, "legacy", &args))
        .await
        .succeeded()
        .json();
    let text = got["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("`title`: \"Pick a queue\""), "{got}");
    let uri = "tasks://workflows/interactive_adr_planning/diagram.mmd";
    let read = run(inspector.cli(
        &sandbox,
        "legacy",
        &["--method", "resources/read", "--uri", uri],
    ))
    .await
    .succeeded()
    .json();
    let diagram = read["result"]["contents"][0]["text"].as_str().unwrap();
    assert!(diagram.contains("subgraph phase_adr_generation"), "{read}");
}
