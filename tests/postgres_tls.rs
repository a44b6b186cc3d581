//! PostgreSQL reached as a deployment reaches it: over verified TLS, the password out of
//! the command line and the logs, through a server restart and an exhausted pool. Each
//! test starts a cluster of its own (tests/common/cluster.rs), never the shared one.

#[path = "common/cluster.rs"]
mod cluster;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use cluster::{CLEARTEXT_USER, Cluster, PASSWORD};
use mcp_task_server::store::{Durability, Held, PgOptions, Store, StoreError};
use mcp_task_server::todos::{Origin, Tools};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-task-server");

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

fn titles(store: &Store) -> Vec<String> {
    let mut titles: Vec<String> = store
        .list_todos(&Default::default())
        .unwrap()
        .into_iter()
        .map(|todo| todo.title)
        .collect();
    titles.sort();
    titles
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
    let Some(cluster) = Cluster::start(true) else {
        return;
    };
    let store = open(&cluster.verified_url()).expect("verify-full against the cluster's CA");
    add_task(&store, "over TLS");
    assert_eq!(titles(&store), ["over TLS"]);
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
    let Some(cluster) = Cluster::start(true) else {
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
    let Some(cluster) = Cluster::start(true) else {
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
    let Some(cluster) = Cluster::start(false) else {
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
    let Some(cluster) = Cluster::start(true) else {
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
    let Some(cluster) = Cluster::start(true) else {
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
    let Some(cluster) = Cluster::start(true) else {
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
    assert_eq!(titles(&store), ["parameter-marker-51d2"]);
}

#[test]
fn an_exhausted_pool_waits_for_its_timeout_then_says_what_to_raise() {
    let Some(cluster) = Cluster::start(true) else {
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
    let Some(cluster) = Cluster::start(true) else {
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
    while titles(&store).len() < 5 {
        assert!(Instant::now() < deadline, "the run never began");
        std::thread::sleep(Duration::from_millis(5));
    }
    cluster.restart();
    let out = run.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let expected: Vec<String> = (0..nodes).map(|i| format!("t{i:02}")).collect();
    assert_eq!(titles(&store), expected, "nothing lost or doubled");
}

#[test]
fn runs_go_on_across_a_postgresql_restart_with_nothing_lost_or_doubled() {
    let Some(cluster) = Cluster::start(true) else {
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
    while titles(&store) != ["first"] {
        assert!(Instant::now() < deadline, "the run never began");
        std::thread::sleep(Duration::from_millis(50));
    }
    cluster.restart();
    let out = run.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        titles(&store),
        ["first", "second"],
        "nothing lost or doubled"
    );
    add_task(&store, "this store's connections came back too");
}

/// The test targets whose tests run on both backends (tests/backends/mod.rs).
const CONTRACT_TARGETS: [&str; 9] = [
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
/// TLS. They are the test binaries of this build (`cargo test` builds them all first).
#[test]
fn the_contract_suite_passes_over_verified_tls() {
    let Some(cluster) = Cluster::start(true) else {
        return;
    };
    let required = std::env::var("TASKS_REAL_CLIENTS").is_ok_and(|v| v == "required");
    let mut ran = 0;
    for target in CONTRACT_TARGETS {
        let Some(binary) = contract_binary(target) else {
            let note = format!(
                "the test binary of `{target}` is missing or older than the library: build \
                 every test target first (`cargo test --no-run`)"
            );
            assert!(!required, "{note}");
            mcp_task_server::store::note_skipped("the contract suite over TLS", &note);
            return;
        };
        let out = Command::new(&binary)
            .args(["::postgres", "--test-threads", "2"])
            .env("TASKS_TEST_POSTGRES", cluster.verified_url())
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let output = text(&out);
        assert!(out.status.success(), "{target} over TLS:\n{output}");
        assert!(!output.contains("SKIPPED"), "{output}");
        ran += passed(&output);
    }
    assert!(ran > 50, "only {ran} tests ran");
    let log = cluster.log();
    assert!(
        log.lines()
            .filter(|line| line.contains("connection authorized: user=tasks"))
            .all(|line| line.contains("SSL enabled")),
        "every connection was encrypted"
    );
}

/// The newest test binary of `target`, if it was linked after the library this test
/// binary was (the newest library older than it).
fn contract_binary(target: &str) -> Option<std::path::PathBuf> {
    let this = std::env::current_exe().ok()?;
    let linked = std::fs::metadata(&this).ok()?.modified().ok()?;
    let deps = this.parent()?.to_path_buf();
    let built = |name: &dyn Fn(&str) -> bool| -> Vec<(std::time::SystemTime, std::path::PathBuf)> {
        std::fs::read_dir(&deps)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| entry.file_name().to_str().is_some_and(name))
            .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
            .collect()
    };
    let prefix = format!("{target}-");
    // A bench of the same name (`benches/durable.rs`) builds into the same folder: the
    // test binary is the one whose dependency file names `tests/<target>.rs`.
    let source = format!("tests/{target}.rs");
    let (binary_built, binary) = built(&|name: &str| {
        name.strip_prefix(&prefix)
            .is_some_and(|hash| hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()))
            && std::fs::read_to_string(deps.join(format!("{name}.d")))
                .is_ok_and(|dependencies| dependencies.contains(&source))
    })
    .into_iter()
    .max()?;
    let (library_built, _) =
        built(&|name: &str| name.starts_with("libmcp_task_server-") && name.ends_with(".rlib"))
            .into_iter()
            .filter(|(built, _)| *built <= linked)
            .max()?;
    (binary_built >= library_built).then_some(binary)
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
    let Some(cluster) = Cluster::start(true) else {
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
    let Some(cluster) = Cluster::start(true) else {
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
