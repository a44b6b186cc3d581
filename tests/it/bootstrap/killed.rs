//! The bootstrap validation loop in the real binary, killed with SIGKILL at seeded moments
//! and resumed with `workflows resume` until it is done: the iterations kept before each
//! kill are kept as they were, the loop goes on at the iteration that had not finished,
//! and each iteration has one child run.

use std::os::unix::fs::PermissionsExt as _;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use mcp_task_server::store::{Scope, Store};
use serde_json::{Value, json};

use super::{DB, VALIDATE, checks, write_adrs};

/// The operator's command, allowed to write the check's counter in `out`.
fn commands() -> String {
    format!("{VALIDATE}writable = [\"out\"]\n")
}
use crate::support::Sandbox;
use crate::support::backends::{Place, on_both_backends};
use crate::support::rng::Rng;
use crate::support::wait_until;

struct Site {
    files: Sandbox,
    place: Place,
}

impl Site {
    fn new(place: Place) -> Site {
        let files = Sandbox::new();
        write_adrs(&files.workspace, false);
        let commands = files.file("commands.toml", &commands());
        std::fs::set_permissions(&commands, std::fs::Permissions::from_mode(0o600)).unwrap();
        Site { files, place }
    }

    fn spawn(&self, args: &[&str]) -> Child {
        let mut command = self.files.binary(self.place.location());
        command
            .arg("--lease")
            .arg("900ms")
            .arg("--commands")
            .arg(self.files.path("commands.toml"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command.spawn().unwrap()
    }
}

/// The loop's run, once recorded.
fn loop_id(store: &Store) -> Option<String> {
    let runs = store.list_runs(None, Scope::Everyone, 100).unwrap();
    runs.into_iter()
        .find(|r| r.workflow == "bootstrap_validation_loop")
        .map(|r| r.id)
}

/// The outputs of the iterations of node `iterate` stored so far.
fn stored_iterations(store: &Store, run_id: &str) -> Vec<Value> {
    let rows = store.nodes(run_id).unwrap();
    let row = (rows.into_iter()).find(|row| row.node_id == "iterate" && row.instance == -1);
    let kept: Vec<Value> = match row.and_then(|row| row.iterations) {
        Some(text) => serde_json::from_str(&text).unwrap(),
        None => Vec::new(),
    };
    kept.into_iter().map(|it| it["output"].clone()).collect()
}

fn kill_after(child: &mut Child, store: &Store, delay: Duration) -> Vec<Value> {
    wait_until("the loop is recorded", || loop_id(store).is_some());
    let since = Instant::now();
    while since.elapsed() < delay {
        let id = loop_id(store).unwrap();
        if store
            .run(&id)
            .unwrap()
            .is_some_and(|r| r.status != "running")
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = stored_iterations(store, &loop_id(store).unwrap());
    eprintln!("killed after {delay:?}: {} iterations kept", kept.len());
    kept
}

fn killed_and_resumed(seed: u64, place: Place) {
    let site = Site::new(place);
    let store = site.place.store();
    // The database check fails on its first two runs: it counts them, then takes a while.
    let mut given = checks();
    given[0]["check"] = json!(
        "n=$(( $(cat out/runs 2>/dev/null || echo 0) + 1 )); echo \"$n\" > out/runs\nsleep 0.2\n[ \"$n\" -ge 3 ] || { echo \"run $n\"; exit 1; }"
    );
    given[2]["check"] = json!("true");
    let learnings: Vec<Value> = (1..=3)
        .map(|i| json!({ "iteration": i, "check": DB, "cause": "not yet", "fix": "wait" }))
        .collect();
    // Nobody waits for fixes: the check passes on its own at its third run.
    let inputs = json!({ "checks": given, "learnings": learnings, "approved_adrs": [],
        "wait_for_fixes": false });
    let inputs = inputs.to_string();
    let mut rng = Rng::new(seed);
    let kills: Vec<Duration> = (0..3)
        .map(|_| Duration::from_millis(100 + rng.below(700)))
        .collect();
    let mut child = site.spawn(&[
        "workflows",
        "run",
        "bootstrap_validation_loop",
        "--inputs-json",
        &inputs,
    ]);
    let mut kept_at_kills = Vec::new();
    for delay in &kills {
        kept_at_kills.push(kill_after(&mut child, &store, *delay));
        let id = loop_id(&store).unwrap();
        child = site.spawn(&["workflows", "resume", &id]);
    }
    let id = loop_id(&store).unwrap();
    let ended = child.wait().unwrap();
    let run = store.run(&id).unwrap().unwrap();
    assert!(
        ended.success() || run.status == "succeeded",
        "seed {seed}: {run:?}"
    );
    assert_eq!(run.status, "succeeded", "seed {seed}, kills {kills:?}");
    let output: Value = serde_json::from_str(run.output.as_deref().unwrap()).unwrap();
    assert_eq!(output["passed"], true, "seed {seed}: {output}");
    let final_iterations = stored_iterations(&store, &id);
    let numbers: Vec<i64> = (output["history"].as_array().unwrap().iter())
        .map(|it| it["iteration"].as_i64().unwrap())
        .collect();
    let expected: Vec<i64> = (1..=final_iterations.len() as i64).collect();
    assert_eq!(
        numbers, expected,
        "each iteration once, in order, seed {seed}"
    );
    for kept in &kept_at_kills {
        assert_eq!(
            kept[..],
            final_iterations[..kept.len()],
            "an iteration kept before a kill is kept as it was, seed {seed}"
        );
    }
    let children = store.child_runs(&id).unwrap();
    let iterations = children
        .iter()
        .filter(|c| c.parent_node == "iterate")
        .count();
    assert_eq!(
        iterations,
        final_iterations.len(),
        "one child run per iteration, seed {seed}"
    );
    assert!(
        children.iter().all(|c| c.status == "succeeded"),
        "{children:?}"
    );
}

on_both_backends! {
    fn a_loop_killed_anywhere_resumes_at_the_iteration_that_had_not_finished(place) {
        for seed in 1..=2 {
            killed_and_resumed(seed, place.fresh());
        }
    }
}
