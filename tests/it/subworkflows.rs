//! Sub-workflows: a `workflow` node runs an installed workflow as a child run, linked to
//! its node, owned as its parent is, durable as any run; its output is the node's. On
//! both backends: the link, a crash of parent and child in one process resumed by
//! another with each effect once, cancel reaching the child, budgets across the tree. At
//! load: an unknown name and a cycle refused, the cycle named.

mod killed;
mod tasks;

use std::sync::Arc;
use std::time::Duration;

use mcp_task_server::app::{App, Config};
use mcp_task_server::engine::installed::Installed;
use mcp_task_server::engine::report::{NodeStatus, RunReport, RunStatus};
use mcp_task_server::engine::{Engine, Limits, RunOptions};
use mcp_task_server::store::Store;
use serde_json::{Value, json};

use crate::durable::until;
use crate::support::Sandbox;
use crate::support::backends::{Place, on_both_backends};
use crate::support::db::sorted_titles;
use crate::support::engine::{checked_inputs, plan};

/// A child that makes a todo, waits, and makes another; its output names both.
pub(crate) const CHILD: &str = r#"
[inputs.title]
type = "string"
required = true
[inputs.pause]
type = "string"
default = "10ms"
[nodes.first]
tool = "add_task"
args = { title = "{{ inputs.title }} 1" }
[nodes.pause]
wait = "{{ inputs.pause }}"
needs = ["first"]
[nodes.second]
tool = "add_task"
args = { title = "{{ inputs.title }} 2" }
needs = ["pause"]
[output]
titles = "[nodes.first.output.title, nodes.second.output.title]"
"#;

/// A parent around one child, with a todo before and after; the child waits `pause`.
fn parent(pause: &str) -> String {
    r#"
[nodes.before]
tool = "add_task"
args = { title = "before" }
[nodes.call]
workflow = { name = "child", inputs = { title = "child", pause = "PAUSE" } }
needs = ["before"]
[nodes.after]
tool = "add_task"
args = { title = "after {{ nodes.call.output.titles | length }}" }
needs = ["call"]
"#
    .replace("PAUSE", pause)
}

/// A "process" on the site's database: an application with the site's workflows.
struct Proc {
    app: App,
}

impl Proc {
    fn engine(&self) -> &Engine {
        self.app.engine()
    }
}

struct Site {
    files: Sandbox,
    place: Place,
}

impl Site {
    fn new(place: Place) -> Site {
        let files = Sandbox::new();
        files.workflow("child.toml", CHILD);
        Site { files, place }
    }

    fn process(&self, limits: Limits) -> Proc {
        let registry = mcp_task_server::runs::RegistryConfig {
            lease: Duration::from_millis(150),
            ..Default::default()
        };
        let config = Config {
            limits,
            registry,
            workflows: Some(self.files.workflows.clone()),
            ..Config::new(self.place.location(), &self.files.workspace)
        };
        Proc {
            app: App::open(&config).expect("the application opens"),
        }
    }

    fn store(&self) -> Store {
        self.place.store()
    }
}

fn start(proc: &Proc, toml: &str, options: RunOptions) -> mcp_task_server::engine::RunHandle {
    let plan = plan(toml);
    let inputs = checked_inputs(&plan, json!({}));
    proc.engine().start(plan, inputs, options)
}

/// The child runs of run `id`: (id, node, status).
fn children(store: &Store, id: &str) -> Vec<(String, String, String)> {
    let rows = store.child_runs(id).unwrap();
    rows.into_iter()
        .map(|c| (c.id, c.parent_node, c.status))
        .collect()
}

fn output(report: &RunReport, node: &str) -> Value {
    report.nodes[node].output.clone().unwrap_or(Value::Null)
}

on_both_backends! {
    async fn a_child_runs_an_installed_workflow_and_its_output_is_the_nodes(place) {
        let site = Site::new(place);
        let a = site.process(Limits::default());
        let report = start(&a, &parent("10ms"), RunOptions::default()).join.await.unwrap();
        assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
        assert_eq!(
            output(&report, "call"),
            json!({ "titles": ["child 1", "child 2"] })
        );
        let store = site.store();
        assert_eq!(
            sorted_titles(&store),
            ["after 2", "before", "child 1", "child 2"]
        );
        let kids = children(&store, &report.run_id);
        assert_eq!(kids.len(), 1, "{kids:?}");
        let (child_id, node, status) = &kids[0];
        assert_eq!((node.as_str(), status.as_str()), ("call", "succeeded"));
        let child = store.run(child_id).unwrap().unwrap();
        let link = child.parent.expect("the child names its parent");
        assert_eq!(link.run_id, report.run_id);
        assert_eq!((link.node.as_str(), link.instance), ("call", None));
        assert_eq!(child.depth, 1);
        assert_eq!(child.workflow, "child");
        // Each report names the other: the parent's node lists its child, the child names
        // the node that started it.
        let view = a.app.registry().run_view(&report.run_id).unwrap().unwrap();
        let runs = serde_json::to_value(&view.nodes["call"].runs).unwrap();
        assert_eq!(
            runs,
            json!([{ "run_id": child_id, "workflow": "child", "status": "succeeded" }])
        );
        let child_view = a.app.registry().run_view(child_id).unwrap().unwrap();
        let parent_json = serde_json::to_value(&child_view).unwrap()["parent"].clone();
        assert_eq!(
            parent_json,
            json!({ "run_id": report.run_id, "node": "call" })
        );
        // The child's calls are audited under its own run.
        let audit = store.audit_rows().unwrap();
        let of_child = audit.iter().filter(|r| r.run_id.as_deref() == Some(child_id.as_str()));
        assert_eq!(of_child.count(), 2);
    }
}

on_both_backends! {
    async fn parent_and_child_cut_off_together_are_resumed_elsewhere_with_each_effect_once(place) {
        // The crash comes at a different moment each time: before the child started, in
        // its wait, after it ended.
        let mut cut_child_running = false;
        for cut in [0u64, 60, 200, 500] {
            let site = Site::new(place.fresh());
            // "Process" A on a runtime of its own, shut down as a dying process stops:
            // every task of it, parent and child, stops where it is.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let a = Arc::new(site.process(Limits::default()));
            let on_a = Arc::clone(&a);
            let handle = runtime
                .spawn(async move { start(&on_a, &parent("300ms"), RunOptions::default()) })
                .await
                .unwrap();
            let run_id = handle.run_id.clone();
            tokio::time::sleep(Duration::from_millis(cut)).await;
            runtime.shutdown_background();
            drop(a);
            let at_cut = children(&site.store(), &run_id);
            cut_child_running |= at_cut.iter().any(|(_, _, status)| status == "running");
            let b = site.process(Limits::default());
            tokio::time::sleep(Duration::from_millis(400)).await;
            let report = match b.engine().resume(&run_id, RunOptions::default()) {
                Ok(handle) => handle.join.await.unwrap(),
                // A crash that came after the run's end leaves nothing to resume.
                Err(_) => {
                    let run = site.store().run(&run_id).unwrap().unwrap();
                    assert_eq!(run.status, "succeeded", "cut at {cut} ms");
                    continue;
                }
            };
            assert_eq!(report.status, RunStatus::Succeeded, "cut at {cut} ms: {report:?}");
            let store = site.store();
            assert_eq!(
                sorted_titles(&store),
                ["after 2", "before", "child 1", "child 2"],
                "each effect once, cut at {cut} ms"
            );
            let kids = children(&store, &run_id);
            assert_eq!(kids.len(), 1, "one child, taken over with its parent: {kids:?}");
            assert_eq!(kids[0].2, "succeeded");
        }
        assert!(cut_child_running, "some cut came while the child ran");
    }
}

on_both_backends! {
    async fn cancelling_the_parent_cancels_its_child(place) {
        let site = Site::new(place);
        let a = site.process(Limits::default());
        let handle = start(&a, &parent("30s"), RunOptions::default());
        let store = site.store();
        let run_id = handle.run_id.clone();
        until("the child waits", || {
            let kids = children(&store, &run_id);
            kids.first().is_some_and(|(id, _, _)| {
                store.nodes(id).unwrap().iter().any(|n| n.node_id == "pause" && n.status == "running")
            })
        })
        .await;
        handle.cancel.cancel();
        let report = handle.join.await.unwrap();
        assert_eq!(report.status, RunStatus::Cancelled);
        let child_id = children(&store, &run_id)[0].0.clone();
        until("the child is cancelled", || {
            store.run(&child_id).unwrap().unwrap().status == "cancelled"
        })
        .await;
        assert_eq!(sorted_titles(&store), ["before", "child 1"]);
    }
}

on_both_backends! {
    async fn a_cancel_asked_of_the_parent_through_the_store_reaches_the_child(place) {
        let site = Site::new(place);
        let a = site.process(Limits::default());
        let handle = start(&a, &parent("30s"), RunOptions::default());
        let store = site.store();
        let run_id = handle.run_id.clone();
        until("the child runs", || !children(&store, &run_id).is_empty()).await;
        let child_id = children(&store, &run_id)[0].0.clone();
        // What another process asks: the parent and every run below it are marked.
        assert!(store.request_cancel(&run_id).unwrap());
        let child = store.run(&child_id).unwrap().unwrap();
        assert!(child.cancel_requested, "{child:?}");
        let chores = mcp_task_server::runs::housekeeping::Chores {
            take_over: false,
            purge: false,
        };
        mcp_task_server::runs::housekeeping::round(a.engine(), a.app.registry(), chores);
        let report = handle.join.await.unwrap();
        assert_eq!(report.status, RunStatus::Cancelled);
        until("the child is cancelled", || {
            store.run(&child_id).unwrap().unwrap().status == "cancelled"
        })
        .await;
    }
}

#[tokio::test]
async fn a_failed_child_fails_its_node_with_workflow_failed_naming_the_child() {
    let site = Site::new(Place::sqlite());
    site.files.workflow(
        "broken.toml",
        r#"
        [nodes.missing]
        tool = "complete_task"
        args = { id = 424242 }
        "#,
    );
    let a = site.process(Limits::default());
    let toml = r#"
        [nodes.call]
        workflow = "broken"
        on_failure = "continue"
        [nodes.after]
        value = "1"
        needs = ["call"]
        trigger = "all_done"
    "#;
    let report = start(&a, toml, RunOptions::default()).join.await.unwrap();
    let call = &report.nodes["call"];
    assert_eq!(call.status, NodeStatus::Failed);
    let error = call.error.as_ref().unwrap();
    assert_eq!(error.code.as_str(), "workflow_failed");
    assert!(
        error.message.contains("workflow `broken`"),
        "{}",
        error.message
    );
    assert!(
        error.message.contains("not_found") || error.message.contains("424242"),
        "{}",
        error.message
    );
    assert_eq!(report.nodes["after"].status, NodeStatus::Succeeded);
}

#[tokio::test]
async fn inputs_that_do_not_fit_the_child_fail_the_node_before_any_child_runs() {
    let site = Site::new(Place::sqlite());
    let a = site.process(Limits::default());
    let toml = r#"
        [nodes.call]
        workflow = { name = "child", inputs = { pause = "1s" } }
    "#;
    let report = start(&a, toml, RunOptions::default()).join.await.unwrap();
    let error = report.nodes["call"].error.clone().unwrap();
    assert_eq!(error.code.as_str(), "invalid_value");
    assert!(error.message.contains("title"), "{}", error.message);
    assert!(children(&site.store(), &report.run_id).is_empty());
}

#[tokio::test]
async fn nesting_deeper_than_the_operators_cap_fails_the_node_that_would_go_deeper() {
    let site = Site::new(Place::sqlite());
    site.files.workflow(
        "level2.toml",
        "[nodes.deep]\nworkflow = { name = \"child\", inputs = { title = \"deep\" } }\n",
    );
    site.files
        .workflow("level1.toml", "[nodes.down]\nworkflow = \"level2\"\n");
    let limits = Limits {
        max_workflow_depth: 2,
        ..Limits::default()
    };
    let a = site.process(limits);
    let report = start(
        &a,
        "[nodes.top]\nworkflow = \"level1\"\n",
        RunOptions::default(),
    )
    .join
    .await
    .unwrap();
    assert_eq!(report.status, RunStatus::Failed);
    let error = report.nodes["top"].error.clone().unwrap();
    assert_eq!(error.code.as_str(), "workflow_failed");
    // The failure comes from the node two levels down, which would have gone to three.
    let store = site.store();
    let level1 = &children(&store, &report.run_id)[0].0;
    let level2 = &children(&store, level1)[0].0;
    let deep = store.nodes(level2).unwrap();
    let deep = deep.iter().find(|n| n.node_id == "deep").unwrap();
    assert_eq!(deep.status, "failed");
    assert!(
        deep.error
            .as_deref()
            .unwrap()
            .contains("max-workflow-depth"),
        "{deep:?}"
    );
    assert!(
        sorted_titles(&store).is_empty(),
        "the child at depth 3 never ran"
    );
}

#[tokio::test]
async fn the_units_of_a_tree_of_runs_count_against_one_budget() {
    let site = Site::new(Place::sqlite());
    // Each child fans out to 8 units; alone each fits the budget of 12, two do not.
    site.files.workflow(
        "fan.toml",
        r#"
        [nodes.each]
        for_each = "[1, 2, 3, 4, 5, 6, 7, 8]"
        value = "item"
        "#,
    );
    let limits = Limits {
        max_run_units: 12,
        ..Limits::default()
    };
    let a = site.process(limits);
    let alone = start(
        &a,
        "[nodes.one]\nworkflow = \"fan\"\n",
        RunOptions::default(),
    )
    .join
    .await
    .unwrap();
    assert_eq!(alone.status, RunStatus::Succeeded, "{alone:?}");
    let toml = r#"
        [nodes.one]
        workflow = "fan"
        [nodes.two]
        workflow = "fan"
        needs = ["one"]
    "#;
    let report = start(&a, toml, RunOptions::default()).join.await.unwrap();
    assert_eq!(report.nodes["one"].status, NodeStatus::Succeeded);
    let error = report.nodes["two"].error.clone().unwrap();
    assert_eq!(error.code.as_str(), "workflow_failed", "{error:?}");
    let store = site.store();
    let second = &children(&store, &report.run_id)[1].0;
    let each = store.nodes(second).unwrap();
    let each = each
        .iter()
        .find(|n| n.node_id == "each" && n.instance == -1)
        .unwrap();
    assert!(
        each.error
            .as_deref()
            .unwrap()
            .contains("the runs of this tree"),
        "{each:?}"
    );
}

#[tokio::test]
async fn a_child_run_counts_against_its_principals_unfinished_runs() {
    let site = Site::new(Place::sqlite());
    let a = Proc {
        app: site.process(Limits::default()).app.with_max_runs(1),
    };
    let options = RunOptions {
        owner: mcp_task_server::store::Owner {
            principal: Some("alice".into()),
            session: None,
        },
        ..RunOptions::default()
    };
    let report = start(&a, &parent("10ms"), options).join.await.unwrap();
    let error = report.nodes["call"].error.clone().unwrap();
    assert_eq!(error.code.as_str(), "budget_exceeded", "{error:?}");
    assert!(
        error.message.contains("alice has 1 unfinished runs"),
        "{}",
        error.message
    );
}

#[test]
fn workflows_that_call_each_other_in_a_cycle_are_refused_at_load_naming_the_cycle() {
    let files = Sandbox::new();
    files.workflow("a.toml", "[nodes.x]\nworkflow = \"b\"\n");
    files.workflow("b.toml", "[nodes.y]\nworkflow = \"a\"\n");
    files.workflow("selfish.toml", "[nodes.me]\nworkflow = \"selfish\"\n");
    files.workflow("caller.toml", "[nodes.c]\nworkflow = \"a\"\n");
    files.workflow("lost.toml", "[nodes.l]\nworkflow = \"nowhere\"\n");
    files.workflow("fine.toml", "[nodes.f]\nworkflow = \"child\"\n");
    files.workflow("child.toml", CHILD);
    let (installed, rejected) = Installed::load(Some(&files.workflows));
    let problems = |file: &str| -> String {
        let found = rejected.iter().find(|r| r.origin.ends_with(file));
        found.map(|r| r.problems.to_string()).unwrap_or_default()
    };
    assert!(
        problems("a.toml").contains("a cycle: a → b → a"),
        "{}",
        problems("a.toml")
    );
    assert!(
        problems("b.toml").contains("a cycle: a → b → a"),
        "{}",
        problems("b.toml")
    );
    assert!(
        problems("selfish.toml").contains("selfish → selfish"),
        "{}",
        problems("selfish.toml")
    );
    assert!(
        problems("caller.toml").contains("calls workflow `a`, which is left out"),
        "{}",
        problems("caller.toml")
    );
    assert!(
        problems("lost.toml").contains("nodes.l.workflow")
            && problems("lost.toml").contains("`nowhere`, which is not installed"),
        "{}",
        problems("lost.toml")
    );
    assert!(installed.get("fine").is_some() && installed.get("child").is_some());
    for name in ["a", "b", "selfish", "caller", "lost"] {
        assert!(installed.get(name).is_none(), "{name} left out");
    }
}

#[tokio::test]
async fn a_repeated_workflow_node_runs_a_new_child_each_iteration() {
    let site = Site::new(Place::sqlite());
    let a = site.process(Limits::default());
    let toml = r#"
        [nodes.call]
        workflow = { name = "child", inputs = { title = "round {{ repeat.iteration }}" } }
        repeat = { until = "repeat.iteration == 2", max = 3 }
    "#;
    let report = start(&a, toml, RunOptions::default()).join.await.unwrap();
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let store = site.store();
    assert_eq!(
        sorted_titles(&store),
        ["round 1 1", "round 1 2", "round 2 1", "round 2 2"]
    );
    let kids = children(&store, &report.run_id);
    assert_eq!(kids.len(), 2, "{kids:?}");
    assert_ne!(kids[0].0, kids[1].0);
    assert_eq!(
        output(&report, "call"),
        json!({ "titles": ["round 2 1", "round 2 2"] })
    );
}

#[tokio::test]
async fn the_parents_progress_rolls_up_its_childs() {
    let site = Site::new(Place::sqlite());
    let a = site.process(Limits::default());
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let observer = {
        let seen = Arc::clone(&seen);
        move |event: &mcp_task_server::engine::observer::Event<'_>| {
            if let mcp_task_server::engine::observer::Event::ChildProgressed {
                node, percent, ..
            } = event
            {
                seen.lock().push((node.to_string(), *percent));
            }
        }
    };
    let options = RunOptions {
        observer: Some(Arc::new(observer)),
        ..RunOptions::default()
    };
    let handle = start(&a, &parent("1500ms"), options);
    let store = site.store();
    let run_id = handle.run_id.clone();
    // While the child waits with one of its three nodes done, the parent's task shows
    // its own node done and a share of the child's.
    until("the parent's progress takes in the child's", || {
        store
            .run_task(&run_id)
            .unwrap()
            .is_some_and(|task| task.progress > 33)
    })
    .await;
    let report = handle.join.await.unwrap();
    assert_eq!(report.status, RunStatus::Succeeded);
    let seen = seen.lock();
    assert!(
        seen.iter()
            .any(|(node, percent)| node == "call" && *percent >= 33),
        "{seen:?}"
    );
}

on_both_backends! {
    async fn a_child_belongs_to_its_parents_principal_and_session(place) {
        // Whatever a principal may read of its runs, it reads of their children, and
        // another principal reads neither: the child's owner is the parent's.
        let site = Site::new(place);
        let a = site.process(Limits::default());
        let alice = mcp_task_server::store::Owner {
            principal: Some("alice".into()),
            session: Some("s-1".into()),
        };
        let options = RunOptions {
            owner: alice.clone(),
            ..RunOptions::default()
        };
        let report = start(&a, &parent("10ms"), options).join.await.unwrap();
        assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
        let store = site.store();
        let child = &children(&store, &report.run_id)[0].0;
        assert_eq!(store.run_owner(child).unwrap(), Some(alice));
        let bobs = store
            .list_runs(None, mcp_task_server::store::Scope::Principal("bob"), 10)
            .unwrap();
        assert!(bobs.is_empty(), "{bobs:?}");
    }
}
