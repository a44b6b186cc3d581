//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `tests/clients/package-lock.json`) against the server over Streamable HTTP: every
//! scenario of the 2025-11-25 and 2026-07-28 revisions, and the ten `tasks-*` scenarios of
//! the SEP-2663 extension. The tools the scenarios call are workflow files in
//! `tests/conformance/workflows`; the scenarios a server with our features cannot pass are
//! listed, each with its reason, in `tests/conformance/expected-failures.yml`, and the
//! suite fails on a listed scenario that starts to pass as on one that stops.

use std::path::{Path, PathBuf};

use super::clients::{command, installed, node, npm_package, run};
use super::http::HttpServer;
use crate::support::Sandbox;

const CONFORMANCE: &str = "@modelcontextprotocol/conformance";

/// The ten scenarios of the SEP-2663 task extension.
const TASK_SCENARIOS: [&str; 10] = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
];

/// The suite's entry point, run with the pinned Node.js 22.
fn conformance() -> Result<(PathBuf, PathBuf), String> {
    let package = npm_package(CONFORMANCE)?;
    let node = node((22, 0))?;
    Ok((node, package.join("dist/index.js")))
}

/// The server with the conformance fixtures as its workflows.
fn fixture_server(sandbox: &Sandbox) -> HttpServer {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/workflows");
    HttpServer::start_line(sandbox, sandbox.server_with(&fixtures), &[])
}

/// Runs the suite's `server` command with `args` and the expected failures; passes when
/// it exits 0.
async fn suite(sandbox: &Sandbox, server: &HttpServer, args: &[&str]) {
    let Some((node, entry)) = installed(conformance()) else {
        return;
    };
    let expected =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/expected-failures.yml");
    let mut command = command(&node, sandbox);
    command
        .arg(entry)
        .args(["server", "--url", &server.url])
        .args(args)
        .arg("--expected-failures")
        .arg(expected)
        .env("NO_COLOR", "1");
    // The suite writes its results under `results/` of the sandbox, its working directory.
    let ran = run(command).await;
    assert!(
        ran.success,
        "the conformance suite failed ({args:?})\n{}",
        ran.dump()
    );
}

#[tokio::test]
async fn conformance_suite_passes_its_2025_11_25_scenarios() {
    let sandbox = Sandbox::for_clients();
    let server = fixture_server(&sandbox);
    suite(&sandbox, &server, &["--spec-version", "2025-11-25"]).await;
}

#[tokio::test]
async fn conformance_suite_passes_its_2026_07_28_scenarios() {
    let sandbox = Sandbox::for_clients();
    let server = fixture_server(&sandbox);
    suite(&sandbox, &server, &["--spec-version", "2026-07-28"]).await;
}

#[tokio::test]
async fn conformance_suite_passes_the_task_extension_scenarios() {
    let sandbox = Sandbox::for_clients();
    let server = fixture_server(&sandbox);
    for scenario in TASK_SCENARIOS {
        suite(&sandbox, &server, &["--scenario", scenario]).await;
    }
}
