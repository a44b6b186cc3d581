//! PostgreSQL reached as a deployment reaches it: over verified TLS, the password out of
//! the command line and the logs, through a server restart and an exhausted pool. Each
//! test starts a cluster of its own (`support/cluster.rs`), never the shared one.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use mcp_task_server::store::{Durability, Held, PgOptions, Store, StoreError};
use mcp_task_server::todos::{Origin, Tools};

use crate::support::cluster::{CLEARTEXT_USER, Cluster, PASSWORD};
use crate::support::{BIN, skip, sorted_titles};

/// A cluster of the test's own, with TLS on when `tls`; `None`, after a note, where
/// PostgreSQL is not installed and CI does not require it.
fn cluster(tls: bool) -> Option<Cluster> {
    skip::or_skip(
        Cluster::start(tls),
        "Install PostgreSQL with tests/postgres/ensure",
        &[skip::REAL_CLIENTS, skip::TEST_POSTGRES],
    )
}

fn open(url: &str) -> Result<Store, StoreError> {
    Store::open_at(url, Durability::Normal)
}

fn open_error(url: &str, options: PgOptions) -> String {
    match Store::open_at_with(url, Durability::Normal, options) {
        Ok(_) => panic!("{url} opened"),
        Err(error) => error.to_string(),
    }
}

fn add_task(store: &Store, title: &str) {
    let mut args = serde_json::Map::new();
    args.insert("title".into(), title.into());
    Tools::new(store.clone())
        .invoke("add_task", &args, Origin::default())
        .expect("add_task is a tool")
        .expect("add_task succeeds");
}
/// The binary with `args`, its environment free of anything that would change the test.
fn server(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .env_remove("TASKS_DB_PATH");
    command
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn verify_full_connects_over_tls_and_add_task_works() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    let store = open(&cluster.verified_url()).expect("verify-full against the cluster's CA");
    add_task(&store, "over TLS");
    assert_eq!(sorted_titles(&store), ["over TLS"]);
    let log = cluster.log();
    let store_connections: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("connection authorized: user=tasks"))
        .collect();
    assert!(!store_connections.is_empty(), "{log}");
    for line in store_connections {
        assert!(
            line.contains("SSL enabled (protocol=TLSv1.3"),
            "every connection is encrypted: {line}"
        );
    }
}

#[test]
fn a_certificate_signed_by_another_ca_is_refused_with_a_clear_error() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    let url = format!(
        "{}&sslrootcert={}",
        cluster.url(&format!("sslmode=verify-full&password={PASSWORD}")),
        cluster.other_ca().display()
    );
    let error = open_error(&url, PgOptions::default());
    assert!(
        error.contains("certificate was refused") && error.contains("sslrootcert"),
        "{error}"
    );
    assert!(!error.contains(PASSWORD), "{error}");
    // The same with verify-ca: the chain is checked whatever the name.
    let error = open_error(
        &url.replace("verify-full", "verify-ca"),
        PgOptions::default(),
    );
    assert!(error.contains("certificate was refused"), "{error}");
}

#[test]
fn verify_full_without_a_root_file_is_refused_before_connecting() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    // HOME without ~/.postgresql/root.crt: libpq's default root file is missing.
    let home = tempfile::tempdir().unwrap();
    let out = server(&["--db", &cluster.url("sslmode=verify-full"), "db", "migrate"])
        .env("HOME", home.path())
        .env("PGPASSWORD", PASSWORD)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("sslrootcert=FILE"), "{}", text(&out));
}

#[test]
fn sslmode_require_against_a_server_without_tls_is_refused() {
    let Some(cluster) = cluster(false) else {
        return;
    };
    let url = cluster.url(&format!("sslmode=require&password={PASSWORD}"));
    let error = open_error(&url, PgOptions::default());
    assert!(error.contains("server does not support TLS"), "{error}");
    // The default, prefer, falls back to plain text with such a server.
    let store = open(&cluster.url(&format!("password={PASSWORD}"))).unwrap();
    add_task(&store, "in plain text");
}

#[test]
fn a_cleartext_password_request_without_tls_is_refused_unless_allowed() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    let plain = format!(
        "postgres://{CLEARTEXT_USER}:{PASSWORD}@127.0.0.1:{}/{CLEARTEXT_USER}?sslmode=disable",
        cluster.port
    );
    let error = open_error(&plain, PgOptions::default());
    assert!(
        error.contains("asked for the password in clear text") && error.contains("refused"),
        "{error}"
    );
    assert!(
        !cluster.log().contains("authenticated"),
        "no password was sent: {}",
        cluster.log()
    );
    let allowed = PgOptions {
        allow_insecure_auth: true,
        ..PgOptions::default()
    };
    Store::open_at_with(&plain, Durability::Normal, allowed).expect("allowed on request");
    // Over TLS the same request is answered: nobody on the way can read it.
    open(&plain.replace("sslmode=disable", "sslmode=require")).expect("over TLS");
}

#[cfg(unix)]
#[test]
fn the_password_comes_from_pgpassword_or_a_private_password_file_and_is_never_logged() {
    use std::os::unix::fs::PermissionsExt;
    let Some(cluster) = cluster(true) else {
        return;
    };
    let url = format!(
        "{}&sslrootcert={}",
        cluster.url("sslmode=verify-full"),
        cluster.ca().display()
    );
    let migrate = || {
        let mut command = server(&["--db", &url, "db", "migrate"]);
        command.env("RUST_LOG", "debug");
        command
    };

    let out = migrate().env("PGPASSWORD", PASSWORD).output().unwrap();
    assert!(out.status.success(), "PGPASSWORD: {}", text(&out));
    assert!(!text(&out).contains(PASSWORD), "{}", text(&out));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pgpass");
    std::fs::write(
        &file,
        format!("# the store\n127.0.0.1:*:tasks:tasks:{PASSWORD}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = migrate().env("PGPASSFILE", &file).output().unwrap();
    assert!(out.status.success(), "PGPASSFILE: {}", text(&out));
    assert!(!text(&out).contains(PASSWORD), "{}", text(&out));

    // A file others may read is ignored, as libpq ignores it, and the login fails.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = migrate().env("PGPASSFILE", &file).output().unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("password file ignored"),
        "{}",
        text(&out)
    );

    // A password on the command line works, with a warning that says where it shows.
    let out = server(&["--db", &cluster.verified_url(), "db", "migrate"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("password is on the command line"),
        "{}",
        text(&out)
    );
    let out = server(&["db", "migrate"])
        .env("TASKS_DB_PATH", cluster.verified_url())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        !text(&out).contains("on the command line"),
        "{}",
        text(&out)
    );

    let log = cluster.log();
    assert!(log.contains("statement:"), "statements are logged: {log}");
    assert!(!log.contains(PASSWORD), "{log}");
}

#[test]
fn debug_logging_never_shows_a_statements_parameters() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let flow = dir.path().join("flow.toml");
    std::fs::write(
        &flow,
        "[nodes.add]\ntool = \"add_task\"\nargs = { title = \"parameter-marker-51d2\" }\n",
    )
    .unwrap();
    let out = server(&["--db", &cluster.verified_url(), "workflows", "run"])
        .arg(&flow)
        .args(["--workspace"])
        .arg(dir.path())
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tokio_postgres"),
        "debug logging is on: {stderr}"
    );
    assert!(!stderr.contains("with parameters"), "{stderr}");
    assert!(!stderr.contains("parameter-marker-51d2"), "{stderr}");
    let store = open(&cluster.verified_url()).unwrap();
    assert_eq!(sorted_titles(&store), ["parameter-marker-51d2"]);
}

#[test]
fn an_exhausted_pool_waits_for_its_timeout_then_says_what_to_raise() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    let options = PgOptions {
        pool_size: 1,
        pool_timeout: Duration::from_secs(1),
        ..PgOptions::default()
    };
    let store = Store::open_at_with(&cluster.verified_url(), Durability::Normal, options).unwrap();
    let held = Held::connection_of(&store);
    let started = Instant::now();
    let error = store
        .list_todos(&Default::default())
        .expect_err("the only connection is held");
    assert!(started.elapsed() >= Duration::from_secs(1), "it waited");
    let StoreError::Busy(message) = &error else {
        panic!("expected Busy, got {error}");
    };
    assert!(
        message.contains("all 1 connections") && message.contains("--pg-pool-size"),
        "{message}"
    );
    held.release();
    add_task(&store, "once the connection is free");
}

/// A restart while a run commits node after node: the transactions cut off are run again
/// on new connections, and every node's todo is there once.
#[test]
fn a_restart_while_a_run_commits_loses_and_doubles_nothing() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let flow = dir.path().join("flow.toml");
    let nodes = 60;
    let mut definition = String::new();
    for i in 0..nodes {
        definition +=
            &format!("[nodes.n{i:02}]\ntool = \"add_task\"\nargs = {{ title = \"t{i:02}\" }}\n");
        if i > 0 {
            definition += &format!("needs = [\"n{:02}\"]\n", i - 1);
        }
    }
    std::fs::write(&flow, definition).unwrap();
    let run = server(&["--db", &cluster.verified_url(), "workflows", "run"])
        .arg(&flow)
        .args(["--workspace"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let store = open(&cluster.verified_url()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while sorted_titles(&store).len() < 5 {
        assert!(Instant::now() < deadline, "the run never began");
        std::thread::sleep(Duration::from_millis(5));
    }
    cluster.restart();
    let out = run.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let expected: Vec<String> = (0..nodes).map(|i| format!("t{i:02}")).collect();
    assert_eq!(sorted_titles(&store), expected, "nothing lost or doubled");
}

#[test]
fn runs_go_on_across_a_postgresql_restart_with_nothing_lost_or_doubled() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let flow = dir.path().join("flow.toml");
    std::fs::write(
        &flow,
        r#"
[nodes.first]
tool = "add_task"
args = { title = "first" }

[nodes.pause]
wait = "4s"
needs = ["first"]

[nodes.second]
tool = "add_task"
args = { title = "second" }
needs = ["pause"]
"#,
    )
    .unwrap();
    let run = server(&["--db", &cluster.verified_url(), "workflows", "run"])
        .arg(&flow)
        .args(["--workspace"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let store = open(&cluster.verified_url()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while sorted_titles(&store) != ["first"] {
        assert!(Instant::now() < deadline, "the run never began");
        std::thread::sleep(Duration::from_millis(50));
    }
    cluster.restart();
    let out = run.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        sorted_titles(&store),
        ["first", "second"],
        "nothing lost or doubled"
    );
    add_task(&store, "this store's connections came back too");
}

/// The modules whose tests run on both backends (`support/backends.rs`).
const CONTRACT_MODULES: [&str; 9] = [
    "store",
    "audit",
    "durable",
    "crash",
    "crash_tasks",
    "tasks",
    "task_protocols",
    "adr_planning",
    "builtin_workflows",
];

/// The suites that run on both backends, run again with `TASKS_TEST_POSTGRES` naming the
/// private cluster over `verify-full`: every store operation they make then goes over
/// TLS. They run in another process of this test binary, given their exact names, so that
/// the variable is that process's and not this one's, which every other test shares.
#[test]
fn the_contract_suite_passes_over_verified_tls() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    let this = std::env::current_exe().expect("the test binary's path");
    let listed = Command::new(&this)
        .args(["--list", "--format", "terse"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", text(&listed));
    let names: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .filter(|name| {
            name.ends_with("::postgres")
                && CONTRACT_MODULES
                    .iter()
                    .any(|module| name.starts_with(&format!("{module}::")))
        })
        .map(str::to_owned)
        .collect();
    assert!(
        names.len() > 50,
        "only {} contract tests: {names:?}",
        names.len()
    );
    let out = Command::new(&this)
        .arg("--exact")
        .args(&names)
        .args(["--test-threads", "2"])
        .env("TASKS_TEST_POSTGRES", cluster.verified_url())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let output = text(&out);
    assert!(
        out.status.success(),
        "the contract suite over TLS:\n{output}"
    );
    assert!(!output.contains("SKIPPED"), "{output}");
    let ran = passed(&output);
    assert_eq!(
        ran,
        names.len(),
        "every contract test ran and passed:\n{output}"
    );
    let log = cluster.log();
    assert!(
        log.lines()
            .filter(|line| line.contains("connection authorized: user=tasks"))
            .all(|line| line.contains("SSL enabled")),
        "every connection was encrypted"
    );
}

/// The tests libtest says passed.
fn passed(output: &str) -> usize {
    output
        .lines()
        .filter_map(|line| line.strip_prefix("test result: ok. "))
        .filter_map(|rest| rest.split(' ').next()?.parse::<usize>().ok())
        .sum()
}

#[test]
fn verify_full_checks_the_host_name_and_verify_ca_does_not() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    // The certificate is made out to 127.0.0.1 and localhost; `hostaddr` reaches the
    // server under a name it does not bear.
    let url = |mode: &str| {
        format!(
            "postgres://tasks:{PASSWORD}@db.wrong.example:{}/tasks?hostaddr=127.0.0.1&sslmode={mode}&sslrootcert={}",
            cluster.port,
            cluster.ca().display()
        )
    };
    let error = open_error(&url("verify-full"), PgOptions::default());
    assert!(
        error.contains("certificate was refused") && error.contains("host name"),
        "{error}"
    );
    let store = open(&url("verify-ca")).expect("verify-ca checks the chain alone");
    add_task(&store, "under another name");
}

/// The notifications sent while a store's listener was cut off are lost: once it listens
/// again it counts a change, so that live pages and subscriptions look again.
#[test]
fn a_listener_that_connects_again_counts_a_change_for_what_it_may_have_missed() {
    let Some(cluster) = cluster(true) else {
        return;
    };
    let store = open(&cluster.verified_url()).unwrap();
    let before = store.change_stamp().unwrap();
    cluster.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.change_stamp().unwrap() == before {
        assert!(Instant::now() < deadline, "the stamp never moved");
        std::thread::sleep(Duration::from_millis(20));
    }
}
