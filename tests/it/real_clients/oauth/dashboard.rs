//! The dashboard's sign-in through the issuer, in a real browser
//! (`tests/clients/dashboard_oauth.mjs`: Debian's Chromium under playwright-core): Alice and
//! Bob each run a workflow over MCP with the TypeScript SDK; then, in the browser, the
//! dashboard sends Alice to the issuer (authorization code with PKCE, the server a
//! confidential client), she signs in and allows it, comes back signed in, and sees her
//! run and not Bob's. Screenshots go to `target/dashboard-screenshots/oauth/`.

use std::path::{Path, PathBuf};

use super::super::clients::{Ran, clients_dir, npm_package};
use super::assert_no_token_logged;
use super::deployment::{ALICE, BOB, Deployment};
use crate::support::skip;

/// Chromium, and playwright-core installed as locked; else what is missing.
fn browser() -> Result<PathBuf, String> {
    let chromium = skip::chromium()?;
    npm_package("playwright-core")?;
    Ok(chromium)
}

/// The task (run) id the `work` scenario created.
fn run_of(ran: &Ran, deployment: &Deployment) -> String {
    assert!(ran.success, "{}\n{}", ran.dump(), deployment.logs());
    ran.event("taskCreated")["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn the_dashboard_signs_alice_in_at_the_issuer_and_shows_her_run_and_not_bobs() {
    let Some(chromium) = skip::or_skip(
        browser(),
        "Install Chromium (apt-get install chromium) and playwright-core (tests/clients/install)",
        &[skip::REAL_CLIENTS],
    ) else {
        return;
    };
    let Some(deployment) = Deployment::start(&[]) else {
        return;
    };
    let alices = run_of(&deployment.client("work", ALICE, &[]).await, &deployment);
    let bobs = run_of(&deployment.client("work", BOB, &[]).await, &deployment);

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../dashboard-screenshots/oauth");
    let mut browser = tokio::process::Command::new(&deployment.node);
    browser
        .arg("--test")
        .arg("--test-concurrency=1")
        .arg(clients_dir().join("dashboard_oauth.mjs"))
        .env("DASHBOARD", &deployment.server.base)
        .env("ISSUER", &deployment.issuer.url)
        .env("PERSON", ALICE.name)
        .env("PASSWORD", ALICE.password)
        .env("OWN_RUN", &alices)
        .env("OTHER_RUN", &bobs)
        .env("SHOTS", &shots)
        .env("CHROMIUM", chromium)
        .current_dir(clients_dir())
        .kill_on_drop(true);
    let ran = tokio::time::timeout(std::time::Duration::from_secs(120), browser.output())
        .await
        .expect("the browser tests end within 2 minutes")
        .expect("run node");
    let out = String::from_utf8_lossy(&ran.stdout);
    let err = String::from_utf8_lossy(&ran.stderr);
    assert!(
        ran.status.success(),
        "the browser tests failed:\n{out}\n{err}\n{}",
        deployment.logs()
    );
    assert!(out.contains("# fail 0"), "{out}");
    assert!(!out.contains("# pass 0\n"), "no browser test ran: {out}");
    assert_no_token_logged(&deployment);
}
