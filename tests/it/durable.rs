//! Durable runs in one test process: each "process" is an engine with its own connection
//! and its own lease owner on a shared database file. A crash is a run task aborted
//! mid-way: nothing more of it is written, as when the process dies.

mod pick_up;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcp_task_server::app::{App, Config};
use mcp_task_server::engine::journal::JournalError;
use mcp_task_server::engine::report::{NodeStatus, RunReport, RunStatus};
use mcp_task_server::engine::{Engine, Limits, ResumeError, RunHandle, RunOptions};
use mcp_task_server::runs::housekeeping::{self, Chores};
use mcp_task_server::runs::{Registry, RegistryConfig};
use mcp_task_server::store::Store;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::backends::{Place, on_both_backends};
use crate::support::engine::{checked_inputs, plan};

/// One "process" on the shared database.
pub(crate) struct Proc {
    pub(crate) engine: Engine,
    pub(crate) registry: Arc<Registry>,
}

fn process(db: &str, workspace: &Path, lease: Duration) -> Proc {
    process_with(db, workspace, lease, Limits::default())
}

fn process_with(db: &str, workspace: &Path, lease: Duration, limits: Limits) -> Proc {
    let registry = RegistryConfig {
        lease,
        ..RegistryConfig::default()
    };
    process_of(&Config {
        limits,
        registry,
        ..Config::new(db, workspace)
    })
}

/// A "process" as the binary opens it.
fn process_of(config: &Config) -> Proc {
    let app = App::open(config).expect("the application opens");
    Proc {
        engine: app.engine().clone(),
        registry: app.registry().clone(),
    }
}

/// The database the "processes" share, and their workspace.
pub(crate) struct World {
    dir: TempDir,
    place: Place,
}

impl World {
    pub(crate) fn new(place: Place) -> World {
        World {
            dir: tempfile::tempdir().unwrap(),
            place,
        }
    }

    fn db(&self) -> String {
        self.place.location()
    }

    pub(crate) fn process(&self, lease: Duration) -> Proc {
        process(&self.db(), self.dir.path(), lease)
    }

    fn process_with(&self, lease: Duration, limits: Limits) -> Proc {
        process_with(&self.db(), self.dir.path(), lease, limits)
    }

    /// A "process" that runs the operator's commands of the file at `commands`.
    pub(crate) fn process_running(&self, lease: Duration, commands: &Path) -> Proc {
        process_of(&Config {
            registry: RegistryConfig {
                lease,
                ..RegistryConfig::default()
            },
            commands: Some(commands.to_owned()),
            ..Config::new(self.db(), self.dir.path())
        })
    }

    /// The folder the "processes" run their file actions and commands in.
    pub(crate) fn workspace(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn store(&self) -> Store {
        self.place.store()
    }

    pub(crate) fn todo_titles(&self) -> Vec<String> {
        let store = self.store();
        let todos = store.list_todos(&Default::default()).unwrap();
        todos.into_iter().map(|t| t.title).collect()
    }
}

pub(crate) const SHORT: Duration = Duration::from_millis(150);

/// Polls `check` every 10 ms until it holds, for at most 10 s.
pub(crate) async fn until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

fn node_status(store: &Store, run_id: &str, node: &str) -> Option<String> {
    let rows = store.nodes(run_id).unwrap();
    rows.into_iter()
        .find(|r| r.node_id == node && r.instance == -1)
        .map(|r| r.status)
}

/// Another "process" takes the crashed run over once its lease ran out, and finishes it.
pub(crate) async fn resume_elsewhere(world: &World, run_id: &str) -> (Proc, RunReport) {
    tokio::time::sleep(SHORT * 2).await;
    let b = world.process(SHORT);
    let handle = b.engine.resume(run_id, RunOptions::default()).unwrap();
    let report = handle.join.await.unwrap();
    (b, report)
}

/// Waits until node `node` of the run is running.
async fn until_running(store: &Store, run_id: &str, node: &str) {
    until(&format!("`{node}` runs"), || {
        node_status(store, run_id, node).as_deref() == Some("running")
    })
    .await;
}

pub(crate) fn start(proc: &Proc, toml: &str, inputs: Value, options: RunOptions) -> RunHandle {
    let plan = plan(toml);
    let inputs = checked_inputs(&plan, inputs);
    proc.engine.start(plan, inputs, options)
}

/// Kills a run the way a dying process does: its task stops, nothing more is written.
pub(crate) async fn crash(handle: RunHandle) -> String {
    handle.join.abort();
    let _ = handle.join.await;
    handle.run_id
}

const TOOL_WAIT_TOOL: &str = r#"
    [nodes.first]
    tool = "add_task"
    args = { title = "first" }
    [nodes.pause]
    wait = "300ms"
    needs = ["first"]
    [nodes.last]
    tool = "add_task"
    args = { title = "last" }
    needs = ["pause"]
"#;

on_both_backends! {
    async fn a_run_has_a_task_per_node_from_its_start_with_the_run_id_as_parent(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let handle = start(&a, TOOL_WAIT_TOOL, json!({}), RunOptions::default());
        let store = world.store();
        let run_id = handle.run_id.clone();
        until_running(&store, &run_id, "pause").await;

        let parent = a.registry.task(&run_id).unwrap().expect("the run's task");
        assert_eq!(parent.parent_task_id, None);
        assert_eq!(parent.status, "working");
        let message = parent.status_message.clone().unwrap();
        assert!(message.starts_with("1/3 · "), "{message}");
        let subs = a.registry.sub_tasks(&run_id, None, 100).unwrap();
        let nodes: Vec<&str> = subs.iter().filter_map(|t| t.node_id.as_deref()).collect();
        assert_eq!(nodes, ["first", "pause", "last"]);
        let by_node = |n: &str| {
            subs.iter()
                .find(|t| t.node_id.as_deref() == Some(n))
                .unwrap()
        };
        assert_eq!(by_node("first").status, "completed");
        assert_eq!(by_node("pause").status, "working");
        assert_eq!(by_node("last").status, "working");
        assert_eq!(by_node("last").status_message.as_deref(), Some("pending"));
        for task in subs.iter().chain([&parent]) {
            let id = uuid::Uuid::parse_str(&task.task_id).expect("task ids are UUIDs");
            assert_eq!(id.get_version_num(), 4, "{}", task.task_id);
        }
        // Every sub-task, the pending one included, answers by its id alone.
        for task in &subs {
            assert_eq!(a.registry.task(&task.task_id).unwrap().as_ref(), Some(task));
        }
        // An id that shares the run's first half but names no unit of it is no task.
        let forged = format!("{}-8000-000000000000", &run_id[..18]);
        assert_eq!(a.registry.task(&forged).unwrap(), None);

        let report = handle.join.await.unwrap();
        assert_eq!(report.status, RunStatus::Succeeded);
        let parent = a.registry.task(&run_id).unwrap().unwrap();
        assert_eq!(
            (parent.status.as_str(), parent.progress),
            ("completed", 100)
        );
    }
}

on_both_backends! {
    async fn a_run_resumed_after_a_crash_finishes_without_repeating_a_finished_tool_call(place) {
        let world = World::new(place);
        // A lease long enough to outlive the steps between the crash and the early resume
        // on a loaded machine: that resume must find it held.
        let crashed_lease = Duration::from_millis(1500);
        let a = world.process(crashed_lease);
        let handle = start(&a, TOOL_WAIT_TOOL, json!({}), RunOptions::default());
        let store = world.store();
        let id = handle.run_id.clone();
        until_running(&store, &id, "pause").await;
        let deadline = store
            .nodes(&id)
            .unwrap()
            .into_iter()
            .find(|r| r.node_id == "pause")
            .and_then(|r| r.deadline_ms)
            .expect("the wait's deadline is stored");
        let run_id = crash(handle).await;
        assert_eq!(world.todo_titles(), ["first"]);

        let b = world.process(SHORT);
        // The dead run's lease runs out first: the crashed "process" is this one, still alive.
        let early = b.engine.resume(&run_id, RunOptions::default());
        assert!(matches!(
            early,
            Err(ResumeError::Journal(JournalError::Held(_)))
        ));
        tokio::time::sleep(crashed_lease + SHORT).await;
        let report = b
            .engine
            .resume(&run_id, RunOptions::default())
            .unwrap()
            .join
            .await
            .unwrap();

        assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
        assert_eq!(world.todo_titles(), ["first", "last"]);
        assert_eq!(report.nodes["first"].attempts, 1);
        let pause = store
            .nodes(&run_id)
            .unwrap()
            .into_iter()
            .find(|r| r.node_id == "pause")
            .unwrap();
        let finished = mcp_task_server::clock::ms_from_iso(pause.finished_at.as_deref().unwrap());
        assert!(
            finished.unwrap() >= deadline,
            "the resumed wait ends at the stored deadline"
        );
        let audit = store.audit_rows().unwrap();
        let calls: Vec<&str> = audit
            .iter()
            .map(|r| r.node_id.as_deref().unwrap())
            .collect();
        assert_eq!(calls, ["first", "last"]);
        assert!(audit.iter().all(|r| r.run_id.as_deref() == Some(&*run_id)));
    }
}

on_both_backends! {
    async fn a_wait_longer_than_its_timeout_times_out_however_late_its_run_resumes(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let toml = r#"
            [nodes.slow]
            wait = "400ms"
            timeout = "100ms"
        "#;
        let handle = start(&a, toml, json!({}), RunOptions::default());
        let store = world.store();
        let id = handle.run_id.clone();
        until_running(&store, &id, "slow").await;
        let run_id = crash(handle).await;
        // The process stays down past the end of the whole wait: this, then the lease's
        // expiry that `resume_elsewhere` waits out.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let (_, report) = resume_elsewhere(&world, &run_id).await;

        assert_eq!(report.status, RunStatus::Failed, "{report:?}");
        let slow = &report.nodes["slow"];
        assert_eq!(slow.status, NodeStatus::Failed);
        let error = slow.error.as_ref().expect("the node's error");
        assert!(error.message.contains("timed out after 100ms"), "{error:?}");
    }
}

on_both_backends! {
    async fn a_process_that_lost_its_lease_writes_nothing_more_and_the_new_owner_finishes(place) {
        let world = World::new(place);
        // No housekeeping renews A's lease while it waits: it stalls past it.
        let a = world.process(Duration::from_millis(100));
        let handle = start(&a, TOOL_WAIT_TOOL, json!({}), RunOptions::default());
        let store = world.store();
        let id = handle.run_id.clone();
        until_running(&store, &id, "pause").await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        let b = world.process(Duration::from_secs(30));
        let taken = b.engine.resume(&id, RunOptions::default()).unwrap();

        let lost = handle.join.await.unwrap();
        let finished = taken.join.await.unwrap();
        assert_eq!(lost.status, RunStatus::Failed);
        assert_eq!(
            lost.error.as_deref(),
            Some("run taken over by another process")
        );
        assert_eq!(finished.status, RunStatus::Succeeded);
        assert_eq!(world.todo_titles(), ["first", "last"]);
        assert_eq!(store.run(&id).unwrap().unwrap().status, "succeeded");
    }
}

on_both_backends! {
    async fn a_live_process_keeps_its_run_from_another(place) {
        let world = World::new(place);
        let a = world.process(Duration::from_secs(30));
        let handle = start(&a, TOOL_WAIT_TOOL, json!({}), RunOptions::default());
        let b = world.process(Duration::from_secs(30));
        let refused = b.engine.resume(&handle.run_id, RunOptions::default());
        assert!(
            matches!(refused, Err(ResumeError::Journal(JournalError::Held(_)))),
            "{:?}",
            refused.err()
        );
        assert!(b.registry.orphans().unwrap().is_empty());
        assert_eq!(handle.join.await.unwrap().status, RunStatus::Succeeded);
        assert_eq!(world.todo_titles(), ["first", "last"]);
    }
}

on_both_backends! {
    async fn a_cancel_asked_for_by_another_process_stops_the_run_there(place) {
        let world = World::new(place);
        let a = world.process(Duration::from_secs(30));
        let handle = start(
            &a,
            r#"
            [nodes.long]
            wait = "1h"
            [nodes.after]
            render = "after"
            needs = ["long"]
            "#,
            json!({}),
            RunOptions::default(),
        );
        let b = world.process(Duration::from_secs(30));
        let store = world.store();
        let id = handle.run_id.clone();
        until_running(&store, &id, "long").await;
        assert!(b.registry.request_cancel(&id).unwrap());
        let chores = Chores {
            take_over: false,
            purge: false,
        };
        housekeeping::round(&a.engine, &a.registry, chores);

        let report = handle.join.await.unwrap();
        assert_eq!(report.status, RunStatus::Cancelled);
        assert_eq!(report.nodes["long"].status, NodeStatus::Cancelled);
        assert_eq!(store.run(&id).unwrap().unwrap().status, "cancelled");
        let task = a.registry.task(&id).unwrap().unwrap();
        assert_eq!(task.status, "cancelled");
        assert!(!b.registry.request_cancel(&id).unwrap(), "a finished run");
    }
}

on_both_backends! {
    async fn a_retried_run_keeps_what_succeeded_and_runs_the_failure_again(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let handle = start(
            &a,
            r#"
            [nodes.make]
            tool = "add_task"
            args = { title = "made once" }
            [nodes.finish]
            tool = "complete_task"
            args = { id = 99 }
            needs = ["make"]
            "#,
            json!({}),
            RunOptions::default(),
        );
        let failed = handle.join.await.unwrap();
        assert_eq!(failed.status, RunStatus::Failed);

        let again = a
            .engine
            .retry(&failed.run_id, RunOptions::default())
            .unwrap();
        let retried = again.join.await.unwrap();
        assert_ne!(retried.run_id, failed.run_id);
        assert_eq!(retried.status, RunStatus::Failed);
        assert_eq!(retried.nodes["make"].status, NodeStatus::Succeeded);
        assert_eq!(world.todo_titles(), ["made once"]);
        let audit = world.store().audit_rows().unwrap();
        let tools: Vec<&str> = audit.iter().map(|r| r.tool.as_str()).collect();
        assert_eq!(tools, ["add_task", "complete_task", "complete_task"]);
        let stored = world.store().run(&retried.run_id).unwrap().unwrap();
        assert_eq!(stored.retry_of.as_deref(), Some(&*failed.run_id));

        let refused = a.engine.retry(&failed.run_id, RunOptions::default());
        assert!(refused.is_ok(), "a failed run can be retried again");
        let _ = refused.unwrap().join.await;
        let succeeded = start(&a, TOOL_WAIT_TOOL, json!({}), RunOptions::default())
            .join
            .await
            .unwrap();
        let not_retryable = a.engine.retry(&succeeded.run_id, RunOptions::default());
        assert!(matches!(
            not_retryable,
            Err(ResumeError::NotRetryable { .. })
        ));
    }
}

const ASK: &str = r#"
    [nodes.ask]
    input = { message = "Which colour?", schema = { type = "object", properties = { colour = { type = "string" } } } }
    [nodes.echo]
    render = "{{ nodes.ask.output.colour }}"
    needs = ["ask"]
    [output]
    colour = "nodes.echo.output"
"#;

on_both_backends! {
    async fn a_parked_question_waits_across_a_restart_and_takes_its_answer(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let parked = RunOptions {
            park_questions: true,
            ..RunOptions::default()
        };
        let handle = start(&a, ASK, json!({}), parked.clone());
        let store = world.store();
        let id = handle.run_id.clone();
        until("the question is asked", || {
            store.questions(&id).unwrap().len() == 1
        })
        .await;
        let ask_task = a
            .registry
            .sub_tasks(&id, None, 10)
            .unwrap()
            .into_iter()
            .find(|t| t.node_id.as_deref() == Some("ask"))
            .unwrap();
        assert_eq!(ask_task.status, "input_required");
        assert_eq!(
            a.registry.task(&id).unwrap().unwrap().status,
            "input_required"
        );
        crash(handle).await;

        tokio::time::sleep(SHORT * 2).await;
        let b = world.process(SHORT);
        let resumed = b.engine.resume(&id, parked).unwrap();
        // An answer that does not fit the form is refused, every problem named, and the
        // question is asked again under a new key.
        let misfit = b
            .registry
            .answer_question(&id, "ask", None, &json!({ "colour": 7, "size": "L" }));
        let Err(mcp_task_server::runs::AnswerError::Invalid { problems }) = misfit else {
            panic!("a misfit answer is refused: {misfit:?}");
        };
        assert_eq!(
            problems,
            [
                "`size`: unknown property",
                "`colour`: must be a string"
            ]
        );
        let key = b
            .registry
            .answer_question(&id, "ask", None, &json!({ "colour": "teal" }))
            .unwrap();
        assert_eq!(key, "attempt-1.r2");
        let report = resumed.join.await.unwrap();
        assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
        assert_eq!(report.output, json!({ "colour": "teal" }));
        let questions = store.questions(&id).unwrap();
        let keys: Vec<(&str, Option<&str>)> = questions
            .iter()
            .map(|q| (q.key.as_str(), q.refusal.as_deref()))
            .collect();
        assert_eq!(
            keys,
            [("attempt-1", Some("reasked")), ("attempt-1.r2", None)],
            "asked once across the restart, then again after the misfit"
        );
        assert!(questions[1].request.contains("Which colour?"));
        let again = b.registry.answer_question(&id, "ask", None, &json!({}));
        assert!(
            again.is_err(),
            "an answered question takes no second answer"
        );
    }
}

/// An `input` and a `sample` node that ask at once.
const ASK_BOTH: &str = r#"
    [nodes.ask]
    input = { message = "Which colour?", schema = { type = "object", properties = { colour = { type = "string" } } } }
    [nodes.draft]
    sample = { prompt = "Name a colour.", system = "One word.", max_tokens = 16 }
"#;

on_both_backends! {
    async fn a_question_is_stored_as_runs_have_always_written_it_and_read_back_as_its_type(place) {
        use mcp_task_server::engine::question::Question;
        let world = World::new(place);
        let a = world.process(SHORT);
        let parked = RunOptions {
            park_questions: true,
            ..RunOptions::default()
        };
        let handle = start(&a, ASK_BOTH, json!({}), parked);
        let store = world.store();
        let id = handle.run_id.clone();
        until("both questions are asked", || {
            store.questions(&id).unwrap().len() == 2
        })
        .await;
        let mut stored: Vec<String> = store
            .questions(&id)
            .unwrap()
            .into_iter()
            .map(|q| q.request)
            .collect();
        stored.sort();
        let input = r#"{"kind":"input","message":"Which colour?","schema":{"type":"object","properties":{"colour":{"type":"string"}}}}"#;
        let sample = r#"{"kind":"sample","prompt":"Name a colour.","system":"One word.","maxTokens":16}"#;
        assert_eq!(stored, [input, sample]);
        let mut open: Vec<Question> = a
            .registry
            .open_questions(&id)
            .unwrap()
            .into_iter()
            .map(|q| q.request)
            .collect();
        open.sort_by_key(|q| q.kind());
        assert_eq!(
            open,
            [
                serde_json::from_str::<Question>(input).unwrap(),
                serde_json::from_str::<Question>(sample).unwrap(),
            ]
        );
        assert_eq!(open[0].message(), "Which colour?");
        assert_eq!(
            open[1],
            Question::Sample {
                prompt: "Name a colour.".into(),
                system: Some("One word.".into()),
                max_tokens: 16,
                person: true,
            }
        );
        crash(handle).await;
    }
}

on_both_backends! {
    async fn a_run_whose_caller_is_gone_takes_the_default_of_its_question(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let handle = start(
            &a,
            r#"
            [nodes.pause]
            wait = "200ms"
            [nodes.ask]
            input = { message = "Go?", schema = { type = "object" }, default = { go = true } }
            needs = ["pause"]
            [nodes.strict]
            input = { message = "Really?", schema = { type = "object" } }
            needs = ["ask"]
            "#,
            json!({}),
            RunOptions::default(),
        );
        let id = crash(handle).await;
        let (_, report) = resume_elsewhere(&world, &id).await;
        assert_eq!(report.nodes["ask"].output, Some(json!({ "go": true })));
        assert_eq!(report.nodes["strict"].status, NodeStatus::Failed);
        assert_eq!(
            report.nodes["strict"].error.as_ref().unwrap().code,
            "unsupported"
        );
    }
}

on_both_backends! {
    async fn sub_tasks_page_in_plan_order_and_each_id_leads_back_to_its_task(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let toml = r#"
            [inputs.items]
            type = "array"
            default = ["a", "b", "c"]
            [nodes.first]
            tool = "add_task"
            args = { title = "first" }
            [nodes.each]
            for_each = "inputs.items"
            tool = "add_task"
            args = { title = "{{ item }}" }
            needs = ["first"]
            [nodes.hold]
            wait = "10s"
            needs = ["each"]
            [nodes.last]
            tool = "add_task"
            args = { title = "last" }
            needs = ["hold"]
        "#;
        let handle = start(&a, toml, json!({}), RunOptions::default());
        let (store, id) = (world.store(), handle.run_id.clone());
        until_running(&store, &id, "hold").await;

        let all = a.registry.sub_tasks(&id, None, 100).unwrap();
        let units: Vec<(String, Option<i64>, String)> = all
            .iter()
            .map(|t| (t.node_id.clone().unwrap(), t.instance, t.status.clone()))
            .collect();
        let unit = |n: &str, k: Option<i64>, s: &str| (n.to_owned(), k, s.to_owned());
        assert_eq!(
            units,
            [
                unit("first", None, "completed"),
                unit("each", None, "completed"),
                unit("each", Some(0), "completed"),
                unit("each", Some(1), "completed"),
                unit("each", Some(2), "completed"),
                unit("hold", None, "working"),
                unit("last", None, "working"),
            ]
        );
        for size in 1..=all.len() {
            let mut paged = Vec::new();
            let mut after: Option<String> = None;
            loop {
                let page = a.registry.sub_tasks(&id, after.as_deref(), size).unwrap();
                assert!(page.len() <= size);
                let Some(last) = page.last() else { break };
                after = Some(last.task_id.clone());
                paged.extend(page);
            }
            assert_eq!(paged, all, "pages of {size}");
        }
        for task in &all {
            let found = a.registry.task(&task.task_id).unwrap();
            assert_eq!(found.as_ref(), Some(task));
            assert_eq!(task.parent_task_id.as_deref(), Some(id.as_str()));
        }
        let ids: std::collections::HashSet<&str> = all.iter().map(|t| &*t.task_id).collect();
        assert_eq!(ids.len(), all.len(), "every unit has its own id");
        crash(handle).await;
    }
}

on_both_backends! {
    async fn every_instance_has_its_sub_task_once_its_node_expands(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let toml = r#"
            max_parallel = 1
            [inputs.items]
            type = "array"
            default = ["a", "b", "c"]
            [nodes.each]
            for_each = "inputs.items"
            wait = "10s"
        "#;
        let handle = start(&a, toml, json!({}), RunOptions::default());
        let (store, id) = (world.store(), handle.run_id.clone());
        until("the first instance runs", || {
            store
                .nodes(&id)
                .unwrap()
                .iter()
                .any(|r| r.instance == 0 && r.status == "running")
        })
        .await;
        let subs = a.registry.sub_tasks(&id, None, 10).unwrap();
        let seen: Vec<(Option<i64>, Option<&str>)> = subs
            .iter()
            .map(|t| (t.instance, t.status_message.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [
                (None, Some("running")),
                (Some(0), Some("running")),
                (Some(1), Some("pending")),
                (Some(2), Some("pending")),
            ]
        );
        for task in &subs {
            assert_eq!(a.registry.task(&task.task_id).unwrap().as_ref(), Some(task));
        }
        crash(handle).await;
    }
}

on_both_backends! {
    async fn a_fan_out_keeps_finished_instances_and_progress_never_goes_back(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let handle = start(
            &a,
            r#"
            max_parallel = 2
            [inputs.items]
            type = "array"
            default = ["a", "b", "c", "d"]
            [nodes.each]
            for_each = "inputs.items"
            tool = "add_task"
            args = { title = "{{ item }}" }
            [nodes.slow]
            for_each = "inputs.items"
            wait = "100ms"
            needs = ["each"]
            "#,
            json!({}),
            RunOptions::default(),
        );
        let store = world.store();
        let id = handle.run_id.clone();
        let mut seen = Vec::new();
        until("two slow instances are done", || {
            let progress = store.run_task(&id).unwrap().map_or(0, |t| t.progress);
            seen.push(progress);
            store
                .nodes(&id)
                .unwrap()
                .iter()
                .filter(|r| r.node_id == "slow" && r.instance >= 0 && r.status == "succeeded")
                .count()
                >= 2
        })
        .await;
        crash(handle).await;
        tokio::time::sleep(SHORT * 2).await;
        let b = world.process(SHORT);
        let resumed = b.engine.resume(&id, RunOptions::default()).unwrap();
        let mut polling = true;
        while polling {
            seen.push(store.run_task(&id).unwrap().map_or(0, |t| t.progress));
            polling = store.run(&id).unwrap().unwrap().status == "running";
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let report = resumed.join.await.unwrap();
        seen.push(store.run_task(&id).unwrap().unwrap().progress);

        assert_eq!(report.status, RunStatus::Succeeded);
        assert_eq!(world.todo_titles(), ["a", "b", "c", "d"]);
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
        assert_eq!(seen.last(), Some(&100));
        assert!(seen.iter().any(|&p| p > 50 && p < 100), "{seen:?}");
    }
}

on_both_backends! {
    async fn an_identical_file_left_by_an_interrupted_write_counts_as_written(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let toml = r#"
            [nodes.pause]
            wait = "200ms"
            [nodes.write]
            write_file = { path = "out/report.txt", content = "hello" }
            needs = ["pause"]
        "#;
        let handle = start(&a, toml, json!({}), RunOptions::default());
        let id = crash(handle).await;
        // As if the crash came between the write and its record: the intent is stored and
        // the file is in place.
        let store = world.store();
        let intent = mcp_task_server::engine::files::content_hash("hello");
        let row = mcp_task_server::store::NodeRow {
            node: 1,
            node_id: "write".into(),
            instance: -1,
            status: "running".into(),
            reason: None,
            attempts: 0,
            next_attempt_ms: None,
            deadline_ms: None,
            asking: None,
            output: None,
            error: None,
            intent: Some(intent),
            started_at: None,
            finished_at: None,
            retried: None,
            iterations: None,
            updated_at: String::new(),
        };
        store
            .transaction(|tx| tx.upsert_nodes(tx.run_key(&id)?, std::slice::from_ref(&row)))
            .unwrap()
            .unwrap();
        std::fs::create_dir_all(world.dir.path().join("out")).unwrap();
        std::fs::write(world.dir.path().join("out/report.txt"), "hello").unwrap();

        let (_, report) = resume_elsewhere(&world, &id).await;
        assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
        assert_eq!(report.nodes["write"].attempts, 1);

        // Without the recorded intent, the same file is someone else's: a conflict.
        let c = world.process(SHORT);
        let fresh = start(&c, toml, json!({}), RunOptions::default())
            .join
            .await
            .unwrap();
        assert_eq!(fresh.status, RunStatus::Failed);
        assert_eq!(
            fresh.nodes["write"].error.as_ref().unwrap().code,
            "file_error"
        );
    }
}

on_both_backends! {
    async fn a_direct_tool_call_writes_no_run(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let result = a
            .engine
            .call_tool(
                "add_task",
                json!({ "title": "direct" }).as_object().unwrap().clone(),
            )
            .await;
        assert!(result.unwrap().is_ok());
        let store = world.store();
        assert!(
            store
                .list_runs(None, mcp_task_server::store::Scope::Everyone, 10)
                .unwrap()
                .is_empty()
        );
        let audit = store.audit_rows().unwrap();
        assert_eq!(audit.len(), 1);
        assert!(audit[0].run_id.is_some() && audit[0].node_id.as_deref() == Some("add_task"));
    }
}

on_both_backends! {
    async fn a_finished_run_is_purged_after_its_ttl_and_a_running_one_never_is(place) {
        let world = World::new(place);
        let store = world.store();
        let registry = RegistryConfig {
            lease: SHORT,
            task_ttl: Duration::from_millis(1),
            ..RegistryConfig::default()
        };
        let proc = process_of(&Config {
            registry,
            ..Config::new(world.place.location(), world.dir.path())
        });
        let done = start(&proc, TOOL_WAIT_TOOL, json!({}), RunOptions::default())
            .join
            .await
            .unwrap();
        let long = start(
            &proc,
            "[nodes.long]\nwait = \"1h\"\n",
            json!({}),
            RunOptions::default(),
        );
        tokio::time::sleep(Duration::from_millis(20)).await;

        let rows = |table: &str| world.place.count(table);
        assert_eq!(
            rows("nodes"),
            4,
            "three of the finished run, one of the running"
        );
        assert_eq!(proc.registry.purge_expired().unwrap(), 1);
        assert_eq!(rows("nodes"), 1, "the purged run's rows went with it");
        assert_eq!(rows("run_tasks"), 1);
        assert!(store.run(&done.run_id).unwrap().is_none());
        assert!(proc.registry.task(&done.run_id).unwrap().is_none());
        assert_eq!(store.run(&long.run_id).unwrap().unwrap().status, "running");
        assert_eq!(
            proc.registry.task(&long.run_id).unwrap().unwrap().status,
            "working"
        );
        assert_eq!(proc.registry.purge(Duration::ZERO).unwrap(), 0);
        assert_eq!(
            store.audit_rows().unwrap().len(),
            2,
            "the audit log is kept"
        );
        long.cancel.cancel();
        assert_eq!(long.join.await.unwrap().status, RunStatus::Cancelled);
    }
}

on_both_backends! {
    async fn runs_of_one_plan_share_its_stored_copy_until_the_last_is_purged(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let plans = || world.place.count("plans");
        let plan = plan(TOOL_WAIT_TOOL);
        let mut ids = Vec::new();
        for _ in 0..3 {
            let inputs = checked_inputs(&plan, json!({}));
            let handle = a
                .engine
                .start(Arc::clone(&plan), inputs, RunOptions::default());
            ids.push(handle.run_id.clone());
            handle.join.await.unwrap();
        }
        let other = start(
            &a,
            "[nodes.only]\nwait = \"1ms\"\n",
            json!({}),
            RunOptions::default(),
        );
        other.join.await.unwrap();
        assert_eq!(plans(), 2, "one stored plan per distinct plan");
        for id in &ids {
            let view = a.registry.run_view(id).unwrap().unwrap();
            let nodes: Vec<&String> = view.nodes.keys().collect();
            assert_eq!(
                nodes,
                ["first", "pause", "last"],
                "each run reads the shared copy"
            );
        }

        assert_eq!(a.registry.purge(Duration::ZERO).unwrap(), 4);
        assert_eq!(plans(), 0, "a plan goes with its last run");
    }
}

/// A caller that never answers: its questions stay open until the run is gone.
struct Silent;

impl mcp_task_server::engine::actions::Interaction for Silent {
    fn ask(
        &self,
        _message: String,
        _schema: Value,
    ) -> mcp_task_server::engine::actions::BoxFuture<
        Result<Value, mcp_task_server::engine::report::NodeError>,
    > {
        Box::pin(std::future::pending())
    }

    fn sample(
        &self,
        _prompt: String,
        _system: Option<String>,
        _max_tokens: u32,
    ) -> mcp_task_server::engine::actions::BoxFuture<
        Result<Value, mcp_task_server::engine::report::NodeError>,
    > {
        Box::pin(std::future::pending())
    }
}

on_both_backends! {
    async fn a_question_its_caller_never_answered_takes_its_default_once_the_caller_is_gone(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let caller = RunOptions {
            interaction: Some(Arc::new(Silent)),
            ..RunOptions::default()
        };
        let handle = start(
            &a,
            r#"
            [nodes.ask]
            input = { message = "Go?", schema = { type = "object" }, default = { go = "by default" } }
            "#,
            json!({}),
            caller,
        );
        let store = world.store();
        let id = handle.run_id.clone();
        until("the question is asked", || {
            store.questions(&id).unwrap().len() == 1
        })
        .await;
        crash(handle).await;
        let (b, report) = resume_elsewhere(&world, &id).await;
        assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
        assert_eq!(
            report.nodes["ask"].output,
            Some(json!({ "go": "by default" }))
        );
        assert_eq!(b.registry.task(&id).unwrap().unwrap().status, "completed");
    }
}

on_both_backends! {
    async fn a_run_that_stops_every_process_at_the_same_point_ends_poisoned(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let toml = "[nodes.stuck]\nwait = \"1h\"\n";
        let handle = start(&a, toml, json!({}), RunOptions::default());
        let store = world.store();
        let run_id = handle.run_id.clone();
        until_running(&store, &run_id, "stuck").await;
        crash(handle).await;
        // Each process takes the run over and dies at the same point, no node finished.
        let mut processes = vec![a];
        for _ in 0..mcp_task_server::engine::DEFAULT_MAX_TAKEOVERS {
            tokio::time::sleep(SHORT * 2).await;
            let next = world.process(SHORT);
            let handle = next.engine.resume(&run_id, RunOptions::default()).unwrap();
            tokio::time::sleep(SHORT / 3).await;
            crash(handle).await;
            processes.push(next);
        }
        // The next process fails it rather than waiting an hour on it.
        tokio::time::sleep(SHORT * 2).await;
        let last = world.process(SHORT);
        let handle = last.engine.resume(&run_id, RunOptions::default()).unwrap();
        let report = tokio::time::timeout(Duration::from_secs(30), handle.join)
            .await
            .expect("the poisoned run ends at once")
            .unwrap();

        assert_eq!(report.status, RunStatus::Failed, "{report:?}");
        let error = report.error.unwrap_or_default();
        assert!(error.starts_with("run_poisoned"), "{error}");
        let stored = store.run(&run_id).unwrap().expect("the run is stored");
        assert_eq!(stored.status, "failed");
        assert!(stored.error.unwrap_or_default().contains("run_poisoned"));
    }
}

on_both_backends! {
    async fn a_run_that_finishes_a_node_between_takeovers_is_not_poisoned(place) {
        let world = World::new(place);
        let mut toml = String::new();
        let steps = mcp_task_server::engine::DEFAULT_MAX_TAKEOVERS + 1;
        for i in 0..=steps {
            let needs = match i {
                0 => String::new(),
                _ => format!("needs = [\"w{}\"]\n", i - 1),
            };
            toml.push_str(&format!("[nodes.w{i}]\nwait = \"400ms\"\n{needs}"));
        }
        let a = world.process(SHORT);
        let handle = start(&a, &toml, json!({}), RunOptions::default());
        let store = world.store();
        let run_id = handle.run_id.clone();
        until_running(&store, &run_id, "w0").await;
        crash(handle).await;
        let mut processes = vec![a];
        for i in 0..steps {
            tokio::time::sleep(SHORT * 2).await;
            let next = world.process(SHORT);
            let handle = next.engine.resume(&run_id, RunOptions::default()).unwrap();
            // This process finishes a node before it dies.
            until_running(&store, &run_id, &format!("w{}", i + 1)).await;
            crash(handle).await;
            processes.push(next);
        }
        let (_last, report) = resume_elsewhere(&world, &run_id).await;
        assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    }
}

/// A caller with a bug: its answer panics while the run waits on it.
struct Panicking;

impl mcp_task_server::engine::actions::Interaction for Panicking {
    fn ask(
        &self,
        _message: String,
        _schema: Value,
    ) -> mcp_task_server::engine::actions::BoxFuture<
        Result<Value, mcp_task_server::engine::report::NodeError>,
    > {
        Box::pin(async { panic!("a caller's bug") })
    }

    fn sample(
        &self,
        _prompt: String,
        _system: Option<String>,
        _max_tokens: u32,
    ) -> mcp_task_server::engine::actions::BoxFuture<
        Result<Value, mcp_task_server::engine::report::NodeError>,
    > {
        Box::pin(async { panic!("a caller's bug") })
    }
}

on_both_backends! {
    async fn a_panic_in_a_waiting_attempt_fails_its_node_and_the_run_goes_on(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let caller = RunOptions {
            interaction: Some(Arc::new(Panicking)),
            ..RunOptions::default()
        };
        let handle = start(
            &a,
            r#"
            [nodes.ask]
            input = { message = "Go?", schema = { type = "object" } }
            on_failure = "continue"
            [nodes.think]
            sample = { prompt = "Why?" }
            on_failure = "continue"
            [nodes.beside]
            render = "went on"
            "#,
            json!({}),
            caller,
        );
        let id = handle.run_id.clone();
        let report = tokio::time::timeout(Duration::from_secs(30), handle.join)
            .await
            .expect("the run ends")
            .expect("the run's task does not unwind");
        for node in ["ask", "think"] {
            assert_eq!(report.nodes[node].status, NodeStatus::Failed, "{report:?}");
            let error = report.nodes[node].error.as_ref().unwrap();
            assert_eq!(error.code, "internal_error", "{error:?}");
        }
        assert_eq!(report.nodes["beside"].output, Some(json!("went on")));
        let stored = world.store().run(&id).unwrap().expect("the run is stored");
        assert_ne!(stored.status, "running");
    }
}

on_both_backends! {
    async fn the_operator_sets_how_many_takeovers_poison_a_run(place) {
        let world = World::new(place);
        let once = Limits {
            max_takeovers: 1,
            ..Limits::default()
        };
        let a = world.process_with(SHORT, once);
        let toml = "[nodes.stuck]\nwait = \"1h\"\n";
        let handle = start(&a, toml, json!({}), RunOptions::default());
        let store = world.store();
        let run_id = handle.run_id.clone();
        until_running(&store, &run_id, "stuck").await;
        crash(handle).await;
        tokio::time::sleep(SHORT * 2).await;
        let b = world.process_with(SHORT, once);
        let handle = b.engine.resume(&run_id, RunOptions::default()).unwrap();
        tokio::time::sleep(SHORT / 3).await;
        crash(handle).await;
        // One takeover is all this operator allows: the next process fails the run.
        tokio::time::sleep(SHORT * 2).await;
        let c = world.process_with(SHORT, once);
        let handle = c.engine.resume(&run_id, RunOptions::default()).unwrap();
        let report = tokio::time::timeout(Duration::from_secs(30), handle.join)
            .await
            .expect("the poisoned run ends at once")
            .unwrap();
        let error = report.error.unwrap_or_default();
        assert!(error.starts_with("run_poisoned"), "{error}");
        drop((a, b));
    }
}

on_both_backends! {
    async fn each_retried_attempt_keeps_its_times_error_and_delay_across_a_crash(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let toml = r#"
            [nodes.flaky]
            wait = "10s"
            timeout = "50ms"
            retry = { max_attempts = 3, initial_delay = "200ms", factor = 2.0 }
        "#;
        let handle = start(&a, toml, json!({}), RunOptions::default());
        let store = world.store();
        let id = handle.run_id.clone();
        until("the first attempt is retried", || {
            let rows = store.nodes(&id).unwrap();
            rows.iter().any(|row| row.retried.is_some())
        })
        .await;
        let run_id = crash(handle).await;
        let (b, report) = resume_elsewhere(&world, &run_id).await;
        assert_eq!(report.status, RunStatus::Failed, "{report:?}");

        let view = b.registry.run_view(&run_id).unwrap().unwrap();
        let flaky = &view.nodes["flaky"];
        assert_eq!(flaky.attempts, 3);
        assert_eq!(flaky.error.as_ref().unwrap().code, "timeout");
        let retried = flaky.retried.as_ref().expect("the retried attempts");
        // The first attempt, written by the process that crashed, is kept by the one that
        // finished the run; the last attempt is the node's own record.
        assert_eq!(retried.len(), 2, "{retried:?}");
        let ms = |v: &str| mcp_task_server::clock::ms_from_iso(v).unwrap();
        for (n, (attempt, delay)) in retried.iter().zip([200, 400]).enumerate() {
            assert_eq!(attempt.attempt, n + 1);
            assert_eq!(attempt.error.code, "timeout");
            assert!(attempt.error.message.contains("timed out after 50ms"));
            assert_eq!(attempt.retry_delay_ms, delay);
            assert_eq!(ms(&attempt.retry_at) - ms(&attempt.failed_at), delay);
            assert!(ms(attempt.started_at.as_deref().unwrap()) <= ms(&attempt.failed_at));
        }
        assert_eq!(retried[0].started_at.as_deref(), flaky.started_at());
        assert_eq!(retried[1].started_at.as_deref(), Some(retried[0].retry_at.as_str()));
    }
}

on_both_backends! {
    async fn a_run_whose_runtime_shuts_down_under_it_is_left_running_for_a_takeover(place) {
        // A process exiting drops its runtime with runs in flight: a timer or task refused
        // then is no fault of the run, which stays as stored for the next process.
        for _ in 0..3 {
            let world = World::new(place.fresh());
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let a = Arc::new(world.process(SHORT));
            let on_a = Arc::clone(&a);
            let handle = runtime
                .spawn(async move { start(&on_a, TOOL_WAIT_TOOL, json!({}), RunOptions::default()) })
                .await
                .unwrap();
            runtime.shutdown_background();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let run = world.store().run(&handle.run_id).unwrap().unwrap();
            assert_eq!(run.status, "running", "{run:?}");
            let (_b, report) = resume_elsewhere(&world, &handle.run_id).await;
            assert_eq!(report.status, RunStatus::Succeeded);
            assert_eq!(world.todo_titles(), ["first", "last"]);
        }
    }
}
