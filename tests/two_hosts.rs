//! Two hosts, one PostgreSQL: two `serve` processes on one database, each given runs by a
//! client of its own. Runs are each driven exactly once. A host that stops (SIGSTOP: alive,
//! so no one can tell it died, but renewing nothing, as a host cut off by the network) has
//! its runs taken over by the other once their leases expire; started again, it writes
//! nothing more of them. Every todo is made exactly once.
//!
//! PostgreSQL only: it skips, saying so, where `TASKS_TEST_POSTGRES` names no server.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_task_server::store::{Durability, Scope, Scratch, Store};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-task-server");

/// A todo, a wait long enough to be caught in, a second todo.
const JOB: &str = r#"
name = "job"
description = "Makes a todo, waits, makes another."
expose_as_tool = true

[inputs.n]
type = "integer"

[nodes.first]
tool = "add_task"
args = { title = "job {{ inputs.n }} first" }

[nodes.pause]
wait = "1500ms"
needs = ["first"]

[nodes.second]
tool = "add_task"
args = { title = "job {{ inputs.n }} second" }
needs = ["pause"]
"#;

const RUNS_PER_HOST: u64 = 4;

/// A host: `serve` on the shared database, given `runs` as 2025-11-25 tasks at once.
fn host(dir: &std::path::Path, db: &str, runs: std::ops::Range<u64>) -> Child {
    let mut child = Command::new(BIN)
        .env_remove("RUST_LOG")
        .args(["--db", db, "--lease", "1s", "--workflows"])
        .arg(dir.join("workflows"))
        .arg("--workspace")
        .arg(dir)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the host starts");
    let stdin = child.stdin.as_mut().unwrap();
    let mut send = |message: serde_json::Value| writeln!(stdin, "{message}").unwrap();
    send(
        json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": { "name": "two-hosts", "version": "1" } } }),
    );
    send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    for n in runs {
        send(
            json!({ "jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
            "params": { "name": "job", "arguments": { "n": n }, "task": {} } }),
        );
    }
    stdin.flush().unwrap();
    child
}

fn signal(child: &Child, signal: i32) {
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: sends a signal to a child of this process, which has not been reaped.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let limit = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < limit, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn statuses(store: &Store) -> Vec<String> {
    let runs = store.list_runs(None, Scope::Everyone, 100).unwrap();
    runs.into_iter().map(|r| r.status).collect()
}

#[test]
fn a_stopped_hosts_runs_are_finished_by_the_other_once_each_and_it_writes_nothing_after() {
    two_hosts_lose_one(Loss::Stopped);
}

#[test]
fn a_killed_hosts_runs_are_finished_by_the_other_once_each() {
    two_hosts_lose_one(Loss::Killed);
}

/// How host A is lost mid-run.
#[derive(Clone, Copy, PartialEq)]
enum Loss {
    /// SIGSTOP, then SIGCONT once the other host has finished everything.
    Stopped,
    /// SIGKILL.
    Killed,
}

fn two_hosts_lose_one(loss: Loss) {
    let Some(scratch) = Scratch::postgres("two_hosts") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("workflows")).unwrap();
    std::fs::write(dir.path().join("workflows/job.toml"), JOB).unwrap();
    let store = Store::open_at(scratch.url(), Durability::Normal).unwrap();

    let mut a = host(dir.path(), scratch.url(), 0..RUNS_PER_HOST);
    let mut b = host(dir.path(), scratch.url(), RUNS_PER_HOST..2 * RUNS_PER_HOST);
    let all = (2 * RUNS_PER_HOST) as usize;
    wait_until(
        "every run has made its first todo",
        Duration::from_secs(20),
        || store.list_todos(&Default::default()).unwrap().len() >= all,
    );
    let a_owner_prefix = format!("{}@", a.id());
    let held_by_a = || {
        store
            .list_runs(Some("running"), Scope::Everyone, 100)
            .unwrap()
            .iter()
            .filter(|r| {
                let run = store.run(&r.id).unwrap().unwrap();
                run.lease_owner
                    .is_some_and(|o| o.starts_with(&a_owner_prefix))
            })
            .count()
    };
    assert_eq!(
        held_by_a(),
        RUNS_PER_HOST as usize,
        "each host drives the runs it was given"
    );

    match loss {
        Loss::Stopped => signal(&a, libc::SIGSTOP),
        Loss::Killed => {
            a.kill().unwrap();
            a.wait().unwrap();
        }
    }
    wait_until("every run has succeeded", Duration::from_secs(30), || {
        statuses(&store).iter().all(|s| s == "succeeded")
    });
    assert_eq!(statuses(&store).len(), all);

    if loss == Loss::Stopped {
        // Started again, the stopped host finds its leases gone and writes nothing.
        signal(&a, libc::SIGCONT);
        std::thread::sleep(Duration::from_secs(2));
        a.kill().unwrap();
        a.wait().unwrap();
    }
    b.kill().unwrap();
    b.wait().unwrap();

    let mut titles: Vec<String> = store
        .list_todos(&Default::default())
        .unwrap()
        .into_iter()
        .map(|t| t.title)
        .collect();
    titles.sort();
    let mut expected: Vec<String> = (0..2 * RUNS_PER_HOST)
        .flat_map(|n| [format!("job {n} first"), format!("job {n} second")])
        .collect();
    expected.sort();
    assert_eq!(titles, expected, "every todo exactly once");
    let audit = store.audit_rows().unwrap();
    let calls = audit.iter().filter(|r| r.tool == "add_task").count();
    assert_eq!(calls, 2 * all, "one audited call per todo");
}
