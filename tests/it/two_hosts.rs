//! Two hosts, one PostgreSQL: two `serve` processes on one database, each given runs by a
//! client of its own. Runs are each driven exactly once. A host that stops (SIGSTOP: alive,
//! so no one can tell it died, but renewing nothing, as a host cut off by the network) has
//! its runs taken over by the other once their leases expire; started again, it writes
//! nothing more of them. Every todo is made exactly once.
//!
//!
//! Beside those: a host whose clock runs ahead takes no live run (`skew.rs`); a host cut
//! off from the database by the network loses its runs and, back, writes nothing more of
//! them, and a host that loses its lease mid-`write_file` does not land its file
//! (`fencing.rs`, through the proxy of `proxy.rs`), nor record a sampled answer
//! (`sampled.rs`).
//!
//! PostgreSQL only: it skips, saying so, where `TASKS_TEST_POSTGRES` names no server.

mod campaign;
mod fencing;
mod proxy;
mod sampled;
mod skew;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mcp_task_server::store::{Durability, Scope, Scratch, Store};
use serde_json::json;

use crate::support::{BIN, sorted_titles, wait_until_within};

/// A workflow `name` that makes a todo, waits `wait`, writes a file `out/<n>.txt` when
/// `file`, and makes a second todo: the todos are titled as [`job_titles`] expects.
fn job(name: &str, wait: &str, file: bool) -> String {
    let (file_node, second_needs) = match file {
        true => (
            "\n[nodes.file]\n\
             write_file = { path = \"out/{{ inputs.n }}.txt\", content = \"job {{ inputs.n }}\" }\n\
             needs = [\"pause\"]\n",
            "file",
        ),
        false => ("", "pause"),
    };
    format!(
        r#"
name = "{name}"
description = "Makes a todo, waits, makes another."
expose_as_tool = true

[inputs.n]
type = "integer"

[nodes.first]
tool = "add_task"
args = {{ title = "job {{{{ inputs.n }}}} first" }}

[nodes.pause]
wait = "{wait}"
needs = ["first"]
{file_node}
[nodes.second]
tool = "add_task"
args = {{ title = "job {{{{ inputs.n }}}} second" }}
needs = ["{second_needs}"]
"#
    )
}

const RUNS_PER_HOST: u64 = 4;

/// A host: `serve` on the shared database, given `runs` as 2025-11-25 tasks at once.
fn host(dir: &std::path::Path, db: &str, runs: std::ops::Range<u64>) -> Child {
    let mut child = serve(
        dir,
        db,
        &["--lease", "1s"],
        &[],
        Stdio::null(),
        Stdio::null(),
    );
    give(&mut child, "job", runs);
    child
}

/// `serve` on the database `db`, with the workflows of `dir`/workflows and `dir` as its
/// workspace, `args` and `env` besides; its replies go to `out`, its log to `log`.
fn serve(
    dir: &std::path::Path,
    db: &str,
    args: &[&str],
    env: &[(&str, &str)],
    out: Stdio,
    log: impl Into<Stdio>,
) -> Child {
    Command::new(BIN)
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .args(["--db", db])
        .args(args)
        .arg("--workflows")
        .arg(dir.join("workflows"))
        .arg("--workspace")
        .arg(dir)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(out)
        .stderr(log)
        .spawn()
        .expect("the host starts")
}

/// Starts a session with the host and calls `tool` with `{n}` as a task for each `n` of
/// `runs`, at once.
fn give(host: &mut Child, tool: &str, runs: std::ops::Range<u64>) {
    let stdin = host.stdin.as_mut().unwrap();
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
            "params": { "name": tool, "arguments": { "n": n }, "task": {} } }),
        );
    }
    stdin.flush().unwrap();
}

/// The prefix of the lease owners of a host's process (`pid@machine:uuid`).
fn owner_prefix(host: &Child) -> String {
    format!("{}@", host.id())
}

/// The `n` input a run of the tests' workflows was given.
fn input_n(store: &Store, run_id: &str) -> u64 {
    let run = store.run(run_id).unwrap().unwrap();
    let inputs: serde_json::Value = serde_json::from_str(&run.inputs).unwrap();
    inputs["n"].as_u64().unwrap()
}

/// How many unfinished runs a lease owner starting with `prefix` holds.
fn held_by(store: &Store, prefix: &str) -> usize {
    store
        .list_runs(Some("running"), Scope::Everyone, 100)
        .unwrap()
        .iter()
        .filter(|r| {
            let run = store.run(&r.id).unwrap().unwrap();
            run.lease_owner.is_some_and(|o| o.starts_with(prefix))
        })
        .count()
}

/// "job {n} first" and "job {n} second" for each `n` of `runs`, sorted.
fn job_titles(runs: std::ops::Range<u64>) -> Vec<String> {
    let mut expected: Vec<String> = runs
        .flat_map(|n| [format!("job {n} first"), format!("job {n} second")])
        .collect();
    expected.sort();
    expected
}

/// A folder with the workflows folder holding `workflows` (name, text).
fn workspace(workflows: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("workflows")).unwrap();
    for (name, text) in workflows {
        std::fs::write(dir.path().join(format!("workflows/{name}.toml")), text).unwrap();
    }
    dir
}

/// Kills a host and reaps it.
fn stop(mut host: Child) {
    host.kill().unwrap();
    host.wait().unwrap();
}

fn signal(child: &Child, signal: i32) {
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: sends a signal to a child of this process, which has not been reaped.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
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
    // A wait long enough to be caught in.
    let dir = workspace(&[("job", &job("job", "1500ms", false))]);
    let store = Store::open_at(scratch.url(), Durability::Normal).unwrap();

    let mut a = host(dir.path(), scratch.url(), 0..RUNS_PER_HOST);
    let b = host(dir.path(), scratch.url(), RUNS_PER_HOST..2 * RUNS_PER_HOST);
    let all = (2 * RUNS_PER_HOST) as usize;
    wait_until_within(
        "every run has made its first todo",
        Duration::from_secs(20),
        || store.list_todos(&Default::default()).unwrap().len() >= all,
    );
    assert_eq!(
        held_by(&store, &owner_prefix(&a)),
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
    wait_until_within("every run has succeeded", Duration::from_secs(30), || {
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
    stop(b);

    assert_eq!(
        sorted_titles(&store),
        job_titles(0..2 * RUNS_PER_HOST),
        "every todo exactly once"
    );
    let audit = store.audit_rows().unwrap();
    let calls = audit.iter().filter(|r| r.tool == "add_task").count();
    assert_eq!(calls, 2 * all, "one audited call per todo");
}
