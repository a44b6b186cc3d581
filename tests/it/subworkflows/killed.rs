//! A parent and its child run, the real binary killed with SIGKILL at seeded moments and
//! resumed with `workflows resume` of the parent until the tree is done: each todo of
//! either run exists once, each call is audited once, and the parent has one child per
//! attempt of its node.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use mcp_task_server::store::{Scope, Store};

use super::CHILD;
use crate::support::Sandbox;
use crate::support::backends::{Place, on_both_backends};
use crate::support::db::sorted_titles;
use crate::support::rng::Rng;
use crate::support::wait_until;

/// Two children one after another, the second fanned out over two items, between todos of
/// the parent.
const NESTED: &str = r#"
[nodes.before]
tool = "add_task"
args = { title = "before" }
[nodes.one]
workflow = { name = "child", inputs = { title = "one", pause = "400ms" } }
needs = ["before"]
[nodes.two]
for_each = "['a', 'b']"
workflow = { name = "child", inputs = { title = "two {{ item }}", pause = "300ms" } }
needs = ["one"]
[nodes.after]
tool = "add_task"
args = { title = "after" }
needs = ["two"]
"#;

struct Site {
    files: Sandbox,
    place: Place,
}

impl Site {
    fn spawn(&self, args: &[&str]) -> Child {
        let mut command = self.files.binary(self.place.location());
        command
            .arg("--lease")
            .arg("900ms")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command.spawn().unwrap()
    }
}

/// The run at the top of the tree, once recorded.
fn parent_id(store: &Store) -> Option<String> {
    let runs = store.list_runs(None, Scope::Everyone, 100).unwrap();
    runs.into_iter()
        .map(|r| r.id)
        .find(|id| store.run(id).unwrap().is_some_and(|r| r.parent.is_none()))
}

fn kill_after(child: &mut Child, store: &Store, delay: Duration) {
    wait_until("the parent is recorded", || parent_id(store).is_some());
    let since = Instant::now();
    while since.elapsed() < delay {
        if let Some(id) = parent_id(store)
            && store
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
    let id = parent_id(store).unwrap();
    let children = store.child_runs(&id).unwrap();
    let states: Vec<&str> = children.iter().map(|c| c.status.as_str()).collect();
    eprintln!(
        "killed after {delay:?}: children {states:?}, todos {:?}",
        sorted_titles(store)
    );
}

fn killed_and_resumed(seed: u64, place: Place) {
    let site = Site {
        files: Sandbox::new(),
        place,
    };
    site.files.workflow("child.toml", CHILD);
    site.files.workflow("nested.toml", NESTED);
    let store = site.place.store();
    let mut rng = Rng::new(seed);
    let kills: Vec<Duration> = (0..4)
        .map(|_| Duration::from_millis(20 + rng.below(600)))
        .collect();
    let mut child = site.spawn(&["workflows", "run", "nested"]);
    for delay in &kills {
        kill_after(&mut child, &store, *delay);
        let id = parent_id(&store).unwrap();
        child = site.spawn(&["workflows", "resume", &id]);
    }
    let id = parent_id(&store).unwrap();
    let ended = child.wait().unwrap();
    let run = store.run(&id).unwrap().unwrap();
    assert!(
        ended.success() || run.status == "succeeded",
        "seed {seed}, kills {kills:?}: {run:?}"
    );
    assert_eq!(run.status, "succeeded", "seed {seed}, kills {kills:?}");
    assert_eq!(
        sorted_titles(&store),
        [
            "after", "before", "one 1", "one 2", "two a 1", "two a 2", "two b 1", "two b 2"
        ],
        "each todo once, seed {seed}, kills {kills:?}"
    );
    let audit = store.audit_rows().unwrap();
    let calls = audit.iter().filter(|r| r.tool == "add_task").count();
    assert_eq!(calls, 8, "one audited call per todo, seed {seed}");
    let children = store.child_runs(&id).unwrap();
    let nodes: Vec<(&str, Option<i64>)> = (children.iter())
        .map(|c| (c.parent_node.as_str(), c.parent_instance))
        .collect();
    assert_eq!(
        nodes,
        [("one", None), ("two", Some(0)), ("two", Some(1))],
        "one child per attempt, none started twice, seed {seed}"
    );
    assert!(
        children.iter().all(|c| c.status == "succeeded"),
        "{children:?}"
    );
}

on_both_backends! {
    fn a_parent_and_its_children_killed_anywhere_finish_with_each_effect_once(place) {
        for seed in 1..=3 {
            killed_and_resumed(seed, place.fresh());
        }
    }
}
