//! `history` nodes: a run reads earlier finished runs of a workflow, newest first, with
//! their times, statuses, inputs and outputs; filtered by status and by a `where` over
//! `past`; only its own principal's (every principal's for the local user); within the
//! operator's caps on rows, bytes and runs scanned; from a history that outlives the runs'
//! purge and has a TTL of its own. On both backends, through the application as the
//! binary opens it, and once through the real server over HTTP with two principals.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcp_task_server::app::{App, Config};
use mcp_task_server::engine::observer::Event;
use mcp_task_server::engine::plan::Plan;
use mcp_task_server::engine::report::{NodeStatus, RunReport, RunStatus};
use mcp_task_server::engine::{Engine, Limits, RunOptions};
use mcp_task_server::runs::housekeeping::{self, Chores};
use mcp_task_server::runs::{Registry, RegistryConfig};
use mcp_task_server::store::{Batch, Owner, RunEnd, Write};
use serde_json::{Value, json};

use crate::support::backends::{Place, on_both_backends};
use crate::support::engine::{Harness, checked_inputs, plan};

/// The workflow whose runs are read: it succeeds with its input in its output, fails when
/// asked to, and waits (to be cancelled) when asked to.
const DEPLOY: &str = r#"
name = "deploy"
[inputs.env]
type = "string"
[inputs.fail]
type = "boolean"
default = false
[inputs.hold]
type = "boolean"
default = false
[nodes.check]
value = { expr = "inputs.fail", schema = { type = "boolean", const = false } }
[nodes.hold]
when = "inputs.hold"
wait = "1h"
[output]
env = "inputs.env"
"#;

/// A workflow that reads the history of `deploy` with the node `past` given.
fn reader(past: &str) -> Arc<Plan> {
    plan(&format!(
        "name = \"reader\"\n[inputs.env]\ntype = \"string\"\ndefault = \"prod\"\n\
         [nodes.past]\nhistory = {past}\n[output]\npast = \"nodes.past.output\"\n"
    ))
}

/// The application over `place`, as the binary opens it, with these limits and history
/// TTL.
struct World {
    app: App,
    _workspace: tempfile::TempDir,
}

impl World {
    fn new(place: &Place) -> World {
        World::with(place, Limits::default(), RegistryConfig::default())
    }

    fn with(place: &Place, limits: Limits, registry: RegistryConfig) -> World {
        let workspace = tempfile::tempdir().unwrap();
        let app = open(&place.location(), workspace.path(), limits, registry);
        World {
            app,
            _workspace: workspace,
        }
    }

    fn engine(&self) -> &Engine {
        self.app.engine()
    }

    fn registry(&self) -> &Arc<Registry> {
        self.app.registry()
    }

    /// Runs `plan` to its end for `principal` (the local user for `None`).
    async fn run(&self, plan: &Arc<Plan>, inputs: Value, principal: Option<&str>) -> RunReport {
        let options = RunOptions {
            owner: Owner {
                principal: principal.map(str::to_owned),
                session: None,
            },
            ..RunOptions::default()
        };
        let inputs = checked_inputs(plan, inputs);
        let report = self.engine().run(Arc::clone(plan), inputs, options).await;
        // Runs that end in the same millisecond are ordered by id: these are kept apart.
        tokio::time::sleep(Duration::from_millis(3)).await;
        report
    }

    /// A run of `deploy` for `principal`, to its end.
    async fn deploy(&self, inputs: Value, principal: Option<&str>) -> RunReport {
        self.run(&plan(DEPLOY), inputs, principal).await
    }

    /// A run of `deploy` that is cancelled while it waits.
    async fn cancelled_deploy(&self, env: &str) -> RunReport {
        let plan = plan(DEPLOY);
        let inputs = checked_inputs(&plan, json!({ "env": env, "hold": true }));
        let handle = self.engine().start(plan, inputs, RunOptions::default());
        tokio::time::sleep(Duration::from_millis(50)).await;
        handle.cancel.cancel();
        let report = handle.join.await.unwrap();
        tokio::time::sleep(Duration::from_millis(3)).await;
        report
    }

    /// What the node `past` of a `reader` run read.
    async fn read(&self, past: &str, principal: Option<&str>) -> Value {
        let report = self.run(&reader(past), json!({}), principal).await;
        let node = &report.nodes["past"];
        assert_eq!(node.status, NodeStatus::Succeeded, "{node:?}");
        node.output.clone().unwrap()
    }
}

fn open(db: &str, workspace: &Path, limits: Limits, registry: RegistryConfig) -> App {
    App::open(&Config {
        limits,
        registry,
        ..Config::new(db, workspace)
    })
    .expect("the application opens")
}

/// The ids of the runs a history output lists, in its order.
fn ids(output: &Value) -> Vec<String> {
    let runs = output["runs"].as_array().expect("a list of runs");
    runs.iter()
        .map(|run| run["run_id"].as_str().unwrap().to_owned())
        .collect()
}

on_both_backends! {
    async fn a_run_reads_earlier_runs_newest_first_with_their_times_status_inputs_and_output(place) {
        let world = World::new(&place);
        let first = world.deploy(json!({ "env": "prod" }), None).await;
        let failed = world.deploy(json!({ "env": "test", "fail": true }), None).await;
        let cancelled = world.cancelled_deploy("prod").await;
        assert_eq!(
            (first.status, failed.status, cancelled.status),
            (RunStatus::Succeeded, RunStatus::Failed, RunStatus::Cancelled)
        );
        let read = world.read("{ workflow = \"deploy\" }", None).await;
        assert_eq!(
            ids(&read),
            [cancelled.run_id.as_str(), failed.run_id.as_str(), first.run_id.as_str()]
        );
        assert_eq!(read["truncated"], false);
        let runs = read["runs"].as_array().unwrap();
        let oldest = &runs[2];
        let keys: Vec<&str> = oldest.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["run_id", "workflow", "status", "created_at", "finished_at", "inputs", "output", "error"]
        );
        assert_eq!(oldest["workflow"], "deploy");
        assert_eq!(oldest["status"], "succeeded");
        assert_eq!(oldest["inputs"], json!({ "env": "prod", "fail": false, "hold": false }));
        assert_eq!(oldest["output"], json!({ "env": "prod" }));
        assert_eq!(oldest["error"], Value::Null);
        let (created, finished) = (oldest["created_at"].as_str().unwrap(), oldest["finished_at"].as_str().unwrap());
        assert!(created.ends_with('Z') && created <= finished, "{created} {finished}");
        assert_eq!(runs[1]["status"], "failed");
        assert!(runs[1]["error"].as_str().unwrap().contains("check"), "{}", runs[1]);
        assert_eq!(runs[0]["status"], "cancelled");
        assert!(runs[0]["finished_at"].as_str().unwrap() >= finished);
        // A workflow nobody ran has no history; another workflow's runs are not in it.
        let none = world.read("{ workflow = \"release_checklist\" }", None).await;
        assert_eq!(none, json!({ "runs": [], "truncated": false }));
    }
}

on_both_backends! {
    async fn status_where_and_limit_pick_which_earlier_runs_are_read(place) {
        let world = World::new(&place);
        let mut prod = Vec::new();
        for i in 0..4 {
            let env = if i % 2 == 0 { "prod" } else { "test" };
            let report = world.deploy(json!({ "env": env }), None).await;
            if env == "prod" {
                prod.push(report.run_id);
            }
        }
        let failed = world.deploy(json!({ "env": "prod", "fail": true }), None).await;
        let cancelled = world.cancelled_deploy("test").await;

        let read = world.read("{ workflow = \"deploy\", status = \"failed\" }", None).await;
        assert_eq!(ids(&read), [failed.run_id.as_str()]);
        let read = world.read("{ workflow = \"deploy\", status = [\"cancelled\", \"failed\"] }", None).await;
        assert_eq!(ids(&read), [cancelled.run_id.as_str(), failed.run_id.as_str()]);
        // `where` sees the earlier run as `past`, beside the node's own context.
        let read = world
            .read("{ workflow = \"deploy\", status = \"succeeded\", where = \"past.inputs.env == inputs.env\" }", None)
            .await;
        assert_eq!(ids(&read), [prod[1].as_str(), prod[0].as_str()]);
        let read = world.read("{ workflow = \"deploy\", limit = 2 }", None).await;
        assert_eq!(ids(&read), [cancelled.run_id.as_str(), failed.run_id.as_str()]);
        assert_eq!(read["truncated"], false, "a limit reached is no truncation");
        let read = world
            .read("{ workflow = \"deploy\", limit = 1, where = \"past.output and past.output.env == 'test'\" }", None)
            .await;
        assert_eq!(read["runs"].as_array().unwrap().len(), 1);
        assert_eq!(read["runs"][0]["inputs"]["env"], "test");
        // A templated workflow name and limit are read when the node runs.
        let read = world
            .read("{ workflow = \"{{ 'dep' ~ 'loy' }}\", limit = \"{{ 1 + 1 }}\" }", None)
            .await;
        assert_eq!(read["runs"].as_array().unwrap().len(), 2);
    }
}

on_both_backends! {
    async fn a_where_that_fails_fails_its_node_naming_the_run_it_failed_on(place) {
        let world = World::new(&place);
        let earlier = world.deploy(json!({ "env": "prod" }), None).await;
        let report = world
            .run(&reader("{ workflow = \"deploy\", where = \"past.output.env.nope.deeper\" }"), json!({}), None)
            .await;
        let node = &report.nodes["past"];
        assert_eq!(node.status, NodeStatus::Failed);
        let error = node.error.as_ref().unwrap();
        assert_eq!(error.code.as_str(), "template_error");
        assert!(
            error.message.contains(&format!("history.where, on run {}", earlier.run_id)),
            "{}",
            error.message
        );
    }
}

on_both_backends! {
    async fn a_principal_reads_only_its_own_runs_and_the_local_user_reads_everyones(place) {
        let world = World::new(&place);
        let alice = world.deploy(json!({ "env": "prod" }), Some("alice")).await;
        let bob = world.deploy(json!({ "env": "prod" }), Some("bob")).await;
        let local = world.deploy(json!({ "env": "prod" }), None).await;
        let past = "{ workflow = \"deploy\" }";
        assert_eq!(ids(&world.read(past, Some("alice")).await), [alice.run_id.as_str()]);
        assert_eq!(ids(&world.read(past, Some("bob")).await), [bob.run_id.as_str()]);
        assert_eq!(ids(&world.read(past, Some("carol")).await), Vec::<String>::new());
        assert_eq!(
            ids(&world.read(past, None).await),
            [local.run_id.as_str(), bob.run_id.as_str(), alice.run_id.as_str()]
        );
    }
}

on_both_backends! {
    async fn the_current_run_is_never_in_its_own_history(place) {
        let world = World::new(&place);
        let selfish = plan(
            "name = \"selfish\"\n[nodes.past]\nhistory.workflow = \"selfish\"\n\
             [output]\npast = \"nodes.past.output\"\n",
        );
        let first = world.run(&selfish, json!({}), None).await;
        assert_eq!(first.output["past"], json!({ "runs": [], "truncated": false }));
        let second = world.run(&selfish, json!({}), None).await;
        assert_eq!(ids(&second.output["past"]), [first.run_id.as_str()]);
        assert_ne!(second.run_id, first.run_id);
    }
}

on_both_backends! {
    async fn the_row_cap_holds_for_a_written_and_a_templated_limit(place) {
        let limits = Limits { max_history_rows: 3, ..Limits::default() };
        let world = World::with(&place, limits, RegistryConfig::default());
        for _ in 0..5 {
            world.deploy(json!({ "env": "prod" }), None).await;
        }
        let read = world.read("{ workflow = \"deploy\", limit = 3 }", None).await;
        assert_eq!(read["runs"].as_array().unwrap().len(), 3);
        // An unsaid limit (20) is the cap where the cap is lower.
        let read = world.read("{ workflow = \"deploy\" }", None).await;
        assert_eq!(read["runs"].as_array().unwrap().len(), 3);
        assert_eq!(read["truncated"], false);
        // Over the cap, a limit a template gives fails its node; it is never retried.
        let report = world
            .run(&reader("{ workflow = \"deploy\", limit = \"{{ 4 }}\" }"), json!({}), None)
            .await;
        let node = &report.nodes["past"];
        assert_eq!(node.status, NodeStatus::Failed);
        let error = node.error.as_ref().unwrap();
        assert_eq!(error.code.as_str(), "budget_exceeded");
        assert!(error.message.contains("max-history-rows"), "{}", error.message);
        assert_eq!(node.attempts, 1);
    }
}

on_both_backends! {
    async fn the_byte_cap_leaves_out_the_runs_that_would_not_fit_and_says_so(place) {
        let limits = Limits { max_history_bytes: 1024, ..Limits::default() };
        let world = World::with(&place, limits, RegistryConfig::default());
        let long = "x".repeat(300);
        for _ in 0..6 {
            world.deploy(json!({ "env": long }), None).await;
        }
        let read = world.read("{ workflow = \"deploy\" }", None).await;
        let kept = read["runs"].as_array().unwrap().len();
        assert!((1..6).contains(&kept), "{kept} runs kept");
        assert_eq!(read["truncated"], true);
        assert!(serde_json::to_string(&read).unwrap().len() <= 1024);
        // Within the cap, nothing is left out.
        let read = world.read("{ workflow = \"deploy\", limit = 1 }", None).await;
        assert_eq!(read["truncated"], false);
    }
}

on_both_backends! {
    async fn the_scan_cap_bounds_the_runs_a_where_looks_at(place) {
        let limits = Limits { max_history_scan: 3, ..Limits::default() };
        let world = World::with(&place, limits, RegistryConfig::default());
        let oldest = world.deploy(json!({ "env": "rare" }), None).await;
        for _ in 0..4 {
            world.deploy(json!({ "env": "prod" }), None).await;
        }
        let read = world
            .read("{ workflow = \"deploy\", where = \"past.inputs.env == 'rare'\" }", None)
            .await;
        assert_eq!(read, json!({ "runs": [], "truncated": true }));
        // What the scan reaches is read; without a `where` nothing is scanned.
        let read = world
            .read("{ workflow = \"deploy\", where = \"past.inputs.env == 'prod'\" }", None)
            .await;
        assert_eq!(read["runs"].as_array().unwrap().len(), 3);
        assert_eq!(read["truncated"], true);
        let read = world.read("{ workflow = \"deploy\" }", None).await;
        assert_eq!(read["runs"].as_array().unwrap().len(), 5);
        assert_eq!(ids(&read)[4], oldest.run_id);
        assert_eq!(read["truncated"], false);
        // A scan that reaches the oldest run is complete.
        let wide = Limits { max_history_scan: 5, ..Limits::default() };
        let world = World::with(&place, wide, RegistryConfig::default());
        let read = world
            .read("{ workflow = \"deploy\", where = \"past.inputs.env == 'rare'\" }", None)
            .await;
        assert_eq!(ids(&read), [oldest.run_id.as_str()]);
        assert_eq!(read["truncated"], false);
    }
}

on_both_backends! {
    async fn a_where_reads_page_after_page_through_many_runs(place) {
        let world = World::new(&place);
        let mut every = Vec::new();
        for i in 0..230 {
            // No sleep: many end in the same millisecond, ordered then by their ids.
            let plan = plan(DEPLOY);
            let inputs = checked_inputs(&plan, json!({ "env": format!("e{i}") }));
            every.push(world.engine().run(plan, inputs, RunOptions::default()).await.run_id);
        }
        let read = world
            .read("{ workflow = \"deploy\", limit = 100, where = \"past.inputs.env[1:] | int % 2 == 0\" }", None)
            .await;
        let found = ids(&read);
        assert_eq!(found.len(), 100);
        let mut sorted = found.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 100, "no run twice");
        for id in &found {
            let i = every.iter().position(|e| e == id).unwrap();
            assert_eq!(i % 2, 0);
        }
        // Newest first: the 100 newest of the even ones.
        let envs: Vec<i64> = read["runs"].as_array().unwrap().iter()
            .map(|r| r["inputs"]["env"].as_str().unwrap()[1..].parse().unwrap())
            .collect();
        let mut newest: Vec<i64> = (0..230).filter(|i| i % 2 == 0).rev().take(100).collect();
        newest.sort_unstable();
        let mut got = envs.clone();
        got.sort_unstable();
        assert_eq!(got, newest);
    }
}

on_both_backends! {
    async fn the_history_outlives_the_runs_purge_and_goes_with_its_own_ttl(place) {
        let registry = RegistryConfig { history_ttl: Duration::from_millis(300), ..RegistryConfig::default() };
        let world = World::with(&place, Limits::default(), registry);
        let earlier = world.deploy(json!({ "env": "prod" }), None).await;
        assert_eq!(world.registry().purge(Duration::ZERO).unwrap(), 1);
        assert_eq!(place.count("runs"), 0);
        let read = world.read("{ workflow = \"deploy\" }", None).await;
        assert_eq!(ids(&read), [earlier.run_id.as_str()]);
        assert_eq!(read["runs"][0]["output"], json!({ "env": "prod" }));
        // Past its TTL, housekeeping purges it with the runs' own purge.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let reader_runs = place.count("run_history");
        assert_eq!(reader_runs, 2, "the deploy run's and the reader's");
        let chores = Chores { take_over: false, purge: true };
        housekeeping::round(world.engine(), world.registry(), chores);
        assert_eq!(place.count("run_history"), 0);
        let read = world.read("{ workflow = \"deploy\" }", None).await;
        assert_eq!(read, json!({ "runs": [], "truncated": false }));
        // A history not yet expired is kept by the round.
        assert_eq!(world.registry().purge_expired_history().unwrap(), 0);
        assert_eq!(place.count("run_history"), 1);
    }
}

/// Installs a trigger that refuses the history rows of runs whose inputs hold `refused`.
fn refuse_history_of_refused_runs(place: &Place) {
    let sql = match place {
        Place::Sqlite(_) => {
            "CREATE TRIGGER history_refused BEFORE INSERT ON run_history
             WHEN NEW.inputs LIKE '%refused%'
             BEGIN SELECT RAISE(ABORT, 'history refused'); END;"
        }
        Place::Postgres(_) => {
            "CREATE FUNCTION history_refused() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.inputs LIKE '%refused%' THEN RAISE EXCEPTION 'history refused'; END IF;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER history_refused BEFORE INSERT ON run_history
                 FOR EACH ROW EXECUTE FUNCTION history_refused();"
        }
    };
    place.execute(sql).expect("the trigger installs");
}

on_both_backends! {
    async fn a_runs_end_and_its_history_row_are_saved_together_and_once(place) {
        let world = World::new(&place);
        refuse_history_of_refused_runs(&place);
        // Told each time the run ends, saved or not.
        let (ends, mut ended) = tokio::sync::mpsc::unbounded_channel();
        let observer = move |event: &Event<'_>| {
            if let Event::RunFinished { .. } = event {
                let _ = ends.send(());
            }
        };
        let plan = plan(DEPLOY);
        let inputs = checked_inputs(&plan, json!({ "env": "refused" }));
        let options = RunOptions { observer: Some(Arc::new(observer)), ..RunOptions::default() };
        let handle = world.engine().start(plan, inputs, options);
        // The history row cannot be written: nor is the end, which is tried again (the
        // run picked up anew) rather than saved without its history.
        ended.recv().await.unwrap();
        let store = place.store();
        let row = store.run(&handle.run_id).unwrap().unwrap();
        assert_eq!((row.status.as_str(), row.finished_at.as_deref()), ("running", None));
        assert_eq!(place.count("run_history"), 0);
        // Once it can be, both are saved, by the next try.
        place.execute(match place {
            Place::Sqlite(_) => "DROP TRIGGER history_refused",
            Place::Postgres(_) => "DROP TRIGGER history_refused ON run_history",
        }).unwrap();
        let report = handle.join.await.unwrap();
        assert_eq!(report.status, RunStatus::Succeeded);
        assert_eq!(store.run(&handle.run_id).unwrap().unwrap().status, "succeeded");
        assert_eq!(place.count("run_history"), 1);
        tokio::time::sleep(Duration::from_millis(3)).await;

        let saved = world.deploy(json!({ "env": "prod" }), None).await;
        assert_eq!(store.run(&saved.run_id).unwrap().unwrap().status, "succeeded");
        assert_eq!(place.count("run_history"), 2);
        // An end committed again (a process that ended it too, late) doubles nothing and
        // changes nothing of the history.
        let late = Batch {
            run_id: saved.run_id.clone(),
            fence: None,
            writes: vec![Write::Finish(RunEnd {
                status: "failed",
                error: Some("late".to_owned()),
                output: None,
            })],
        };
        store.commit(late).unwrap();
        assert_eq!(store.run(&saved.run_id).unwrap().unwrap().status, "succeeded");
        assert_eq!(place.count("run_history"), 2);
        let read = world.read("{ workflow = \"deploy\" }", None).await;
        assert_eq!(ids(&read), [saved.run_id.as_str(), handle.run_id.as_str()]);
        assert_eq!(read["runs"][0]["status"], "succeeded");
    }
}

#[tokio::test]
async fn an_engine_that_keeps_no_record_of_runs_fails_a_history_node_as_unsupported() {
    let harness = Harness::new();
    let recorded = harness
        .run(&reader("{ workflow = \"deploy\" }"), json!({}))
        .await;
    let node = recorded.node("past");
    assert_eq!(node.status, NodeStatus::Failed);
    let error = node.error.as_ref().unwrap();
    assert_eq!(error.code.as_str(), "unsupported");
    assert!(
        error.message.contains("no record of finished runs"),
        "{}",
        error.message
    );
}
