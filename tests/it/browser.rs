//! The dashboard in a real browser, on both backends: the server binary with `--http`, a
//! tokens file of two principals and the workflows of `tests/fixtures/dashboard`, driven
//! by `tests/clients/dashboard.mjs` (Debian's Chromium under playwright-core, as locked
//! in `tests/clients`). The script's steps are the tests a person's use of the dashboard
//! rests on: signing in, a run started from MCP seen waiting, its DAG and question, the
//! answer given in the browser and the run seen finishing live, its file, cancel and
//! retry, a run started from its workflow's page, and what another principal, a page
//! without a login and a cross-site form get. It saves screenshots of the runs list, a
//! run's page and the todos under `target/dashboard-screenshots/<backend>/`.
//!
//! Where Chromium or playwright-core is missing the test says it skipped; with
//! `TASKS_REAL_CLIENTS=required` (as `.ci/run` sets, after installing both) it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::{self, skip};

const CLIENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients");
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/dashboard.mjs");
const WORKFLOWS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dashboard");
const ALICE: &str = "alice-7f3a9c2e5b8d1f4a6c0e9b3d7a2f5c8e";
const BOB: &str = "bob-e1c4b7a0d3f6c9b2e5a8d1f4c7b0a3e6";

/// The browser, and the node that runs the script, if both are installed; else what is
/// missing.
fn tools() -> Result<(PathBuf, PathBuf), String> {
    let chromium = skip::chromium()?;
    if !Path::new(CLIENTS)
        .join("node_modules/playwright-core")
        .is_dir()
    {
        return Err("playwright-core is not installed (tests/clients/install)".to_owned());
    }
    let pinned = Path::new(CLIENTS).join("node_modules/.bin/node");
    let node = if pinned.exists() {
        pinned
    } else {
        PathBuf::from("node")
    };
    Ok((chromium, node))
}

fn dashboard_in_a_browser(place: &support::backends::Place, backend: &str) {
    let Some((chromium, node)) = skip::or_skip(
        tools(),
        "Install Chromium (apt-get install chromium) and playwright-core (tests/clients/install)",
        &[skip::REAL_CLIENTS],
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("alice {ALICE}\nbob {BOB}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The folder runs write in, which must not hold the tokens file.
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let mut server = Command::new(support::BIN)
        .env_remove("TASKS_DB_PATH")
        .env("RUST_LOG", "info")
        .current_dir(dir.path())
        .args(["--db", &place.location(), "--http", "127.0.0.1:0"])
        .arg("--http-tokens")
        .arg(&tokens)
        .args(["--workflows", WORKFLOWS, "--workspace"])
        .arg(workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server");
    let addr = support::listening_address(server.stderr.take().unwrap());
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("../dashboard-screenshots")
        .join(backend);
    let ran = Command::new(node)
        .arg("--test")
        .arg("--test-concurrency=1")
        .arg(SCRIPT)
        .env("DASHBOARD", format!("http://{addr}"))
        .env("ALICE", ALICE)
        .env("BOB", BOB)
        .env("SHOTS", &shots)
        .env("CHROMIUM", chromium)
        .current_dir(CLIENTS)
        .output()
        .expect("run node");
    let _ = server.kill();
    let _ = server.wait();
    let out = String::from_utf8_lossy(&ran.stdout);
    let err = String::from_utf8_lossy(&ran.stderr);
    assert!(
        ran.status.success(),
        "the browser tests failed:\n{out}\n{err}"
    );
    assert!(out.contains("# fail 0"), "{out}");
    assert!(!out.contains("# pass 0\n"), "no browser test ran: {out}");
}

mod the_dashboard_in_a_browser {
    use super::*;

    #[test]
    fn sqlite() {
        dashboard_in_a_browser(&support::backends::Place::sqlite(), "sqlite");
    }

    #[test]
    fn postgres() {
        if let Some(place) = support::backends::Place::postgres(&skip::test_name()) {
            dashboard_in_a_browser(&place, "postgres");
        }
    }
}
