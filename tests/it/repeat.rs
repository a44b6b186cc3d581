//! Repeating nodes: a node runs again, after its delay, until `until` holds of what its
//! iteration produced, at most `max` times; each iteration is kept, the last one is the
//! node's output. In memory on virtual time, and durably across a crash on both backends.

use std::time::Duration;

use mcp_task_server::engine::report::{NodeStatus, RunStatus};
use mcp_task_server::engine::{Engine, Limits, RunOptions};
use mcp_task_server::store::Store;
use mcp_task_server::todos::Tools;
use serde_json::{Value, json};

use crate::durable::{SHORT, World, crash, resume_elsewhere, start, until};
use crate::support::backends::on_both_backends;
use crate::support::engine::{Harness, assert_problem, plan, problems};

/// A node that makes a todo per iteration, done at the third.
const THIRD_TIME: &str = r#"
    [nodes.poll]
    tool = "add_task"
    args = { title = "try {{ repeat.iteration }}" }
    repeat = { until = "repeat.iteration == 3", max = 5, delay = "10s" }
    [nodes.after]
    render = "{{ nodes.poll.output.title }}"
    needs = ["poll"]
"#;

fn titles(store: &Store) -> Vec<String> {
    let todos = store.list_todos(&Default::default()).unwrap();
    todos.into_iter().map(|todo| todo.title).collect()
}

#[tokio::test(start_paused = true)]
async fn a_node_repeats_until_its_condition_holds_and_its_last_iteration_is_its_output() {
    let harness = Harness::new();
    let run = harness.run(&plan(THIRD_TIME), json!({})).await;
    assert_eq!(run.report.status, RunStatus::Succeeded, "{:?}", run.report);
    assert_eq!(titles(harness.store()), ["try 1", "try 2", "try 3"]);
    assert_eq!(run.node("poll").attempts, 3, "one attempt per iteration");
    assert_eq!(run.node("after").output, Some(json!("try 3")));
    // Two delays between three iterations, on virtual time. No upper bound: the paused
    // clock jumps to whatever timer is next while the store works. The lower bound has
    // half a second to spare: a delay is kept as a time on the wall clock, which goes on
    // by the few real milliseconds the store takes while the paused clock does not.
    let two_delays = Duration::from_secs(20) - Duration::from_millis(500);
    assert!(run.elapsed >= two_delays, "{:?}", run.elapsed);
}

#[tokio::test(start_paused = true)]
async fn until_reads_the_output_of_the_iteration_and_previous_the_one_before() {
    // Each iteration doubles what the one before produced; done once it passes 20.
    let toml = r#"
        [nodes.grow]
        value = "(repeat.previous or 1) * 2"
        repeat = { until = "output > 20 and output == repeat.previous * 2", max = 10 }
    "#;
    let run = Harness::new().run(&plan(toml), json!({})).await;
    assert_eq!(run.report.status, RunStatus::Succeeded, "{:?}", run.report);
    assert_eq!(run.node("grow").output, Some(json!(32)));
    assert_eq!(run.node("grow").attempts, 5, "2, 4, 8, 16, 32");
}

#[tokio::test(start_paused = true)]
async fn a_node_whose_condition_never_holds_fails_at_max_with_its_last_output() {
    let toml = r#"
        [nodes.poll]
        value = "repeat.iteration"
        repeat = { until = "false", max = 4, delay = "1s" }
        on_failure = "continue"
        [nodes.after]
        value = "nodes.poll.output"
        needs = ["poll"]
        trigger = "all_done"
    "#;
    let run = Harness::new().run(&plan(toml), json!({})).await;
    let poll = run.node("poll");
    assert_eq!(poll.status, NodeStatus::Failed);
    let error = poll.error.as_ref().expect("an error");
    assert_eq!(error.code.as_str(), "repeat_exhausted");
    assert!(
        error.message.contains("after 4 iterations"),
        "{}",
        error.message
    );
    assert_eq!(poll.attempts, 4);
    assert_eq!(run.node("after").output, Some(json!(4)), "the last one");
}

#[tokio::test(start_paused = true)]
async fn each_instance_of_a_for_each_node_repeats_on_its_own() {
    let toml = r#"
        [nodes.each]
        for_each = "[2, 3]"
        value = "item * repeat.iteration"
        repeat = { until = "repeat.iteration == item", max = 5 }
    "#;
    let run = Harness::new().run(&plan(toml), json!({})).await;
    assert_eq!(run.report.status, RunStatus::Succeeded, "{:?}", run.report);
    assert_eq!(run.node("each").output, Some(json!([4, 9])));
    assert_eq!(run.node("each").attempts, 5, "2 iterations, then 3");
}

#[tokio::test(start_paused = true)]
async fn a_repeat_over_the_operators_cap_fails_its_node_naming_the_option() {
    let workspace = tempfile::tempdir().unwrap();
    let engine = Engine::new(
        Tools::new(Store::open_in_memory().unwrap()),
        workspace.path(),
    )
    .with_limits(Limits {
        max_repeat: 3,
        ..Limits::default()
    });
    let toml = r#"
        [nodes.poll]
        value = "1"
        repeat = { until = "false", max = 4 }
    "#;
    let report = engine
        .run(plan(toml), Default::default(), RunOptions::default())
        .await;
    let poll = &report.nodes["poll"];
    assert_eq!(poll.status, NodeStatus::Failed);
    let error = poll.error.as_ref().unwrap();
    assert_eq!(error.code.as_str(), "budget_exceeded");
    assert!(error.message.contains("max-repeat"), "{}", error.message);
    assert_eq!(poll.attempts, 0, "nothing ran");
}

#[test]
fn repeat_and_output_are_named_only_where_they_exist() {
    let found = problems(
        r#"
        [nodes.a]
        value = "1"
        when = "repeat.iteration > 1"
        repeat = { until = "output == 1", max = 2 }
        [nodes.b]
        value = "repeat.iteration"
        needs = ["a"]
        [nodes.c]
        value = "output"
        needs = ["a"]
        [nodes.d]
        value = "repeat.count"
        repeat = { until = "true", max = 2 }
        "#,
    );
    assert_problem(&found, "nodes.a.when: `repeat` is not available in `when`");
    assert_problem(
        &found,
        "nodes.b.value: `repeat` is only available in a node with `repeat`",
    );
    assert_problem(
        &found,
        "nodes.c.value: `output` is only available in `repeat.until`",
    );
    assert_problem(&found, "unknown field `repeat.count`");
}

#[test]
fn a_repeat_needs_a_condition_and_a_bound() {
    let found = problems(
        r#"
        [nodes.a]
        value = "1"
        repeat = { max = 0, every = "1s", delay = "soon" }
        "#,
    );
    assert_problem(&found, "nodes.a.repeat: missing required key `until`");
    assert_problem(
        &found,
        "nodes.a.repeat.max: must be between 1 and 1000000, got 0",
    );
    assert_problem(&found, "nodes.a.repeat.every: unknown key `every`");
    assert_problem(&found, "nodes.a.repeat.delay: invalid duration `soon`");
    let found = problems("[nodes.a]\nvalue = \"1\"\nrepeat = { until = \"output ==\", max = 2 }\n");
    assert_problem(&found, "nodes.a.repeat.until: expression syntax error");
}

/// The stored iterations of unit `node` of a run.
fn stored_iterations(store: &Store, run_id: &str, node: &str) -> Vec<Value> {
    let rows = store.nodes(run_id).unwrap();
    let row = rows
        .into_iter()
        .find(|row| row.node_id == node && row.instance == -1);
    match row.and_then(|row| row.iterations) {
        Some(text) => serde_json::from_str(&text).unwrap(),
        None => Vec::new(),
    }
}

on_both_backends! {
    async fn iterations_are_kept_across_a_crash_and_each_runs_exactly_once(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let toml = THIRD_TIME.replace("10s", "600ms");
        let handle = start(&a, &toml, json!({}), RunOptions::default());
        let run_id = handle.run_id.clone();
        let store = world.store();
        until("the first iteration is stored", || {
            stored_iterations(&store, &run_id, "poll").len() == 1
        })
        .await;
        crash(handle).await;
        assert_eq!(world.todo_titles(), ["try 1"]);

        let (b, report) = resume_elsewhere(&world, &run_id).await;
        assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
        assert_eq!(world.todo_titles(), ["try 1", "try 2", "try 3"]);
        let view = b.registry.run_view(&run_id).unwrap().unwrap();
        let poll = &view.nodes["poll"];
        assert_eq!(poll.attempts, 3);
        assert_eq!(poll.output.as_ref().unwrap()["title"], "try 3");
        let iterations = poll.iterations.as_ref().expect("kept iterations");
        let outputs: Vec<&Value> = iterations.iter().map(|it| &it.output["title"]).collect();
        assert_eq!(outputs, ["try 1", "try 2", "try 3"]);
        for iteration in iterations {
            assert_eq!(iteration.attempts, 1, "{iteration:?}");
            assert!(iteration.started_at.is_some() && iteration.finished_at.is_some());
        }
        // The view's JSON says so as `get_run` does.
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["nodes"]["poll"]["iterations"][1]["iteration"], 2);
        assert_eq!(json["nodes"]["after"].get("iterations"), None);
    }
}

on_both_backends! {
    async fn the_run_task_says_which_iteration_its_node_is_at(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let toml = THIRD_TIME.replace("10s", "2s");
        let handle = start(&a, &toml, json!({}), RunOptions::default());
        let run_id = handle.run_id.clone();
        let store = world.store();
        until("the first iteration is stored", || {
            stored_iterations(&store, &run_id, "poll").len() == 1
        })
        .await;
        until("the run task says so", || {
            let task = a.registry.task(&run_id).unwrap().unwrap();
            task.status_message.as_deref() == Some("0/2 · poll · iteration 2/5")
        })
        .await;
        handle.cancel.cancel();
        let report = handle.join.await.unwrap();
        assert_eq!(report.status, RunStatus::Cancelled);
        assert_eq!(world.todo_titles(), ["try 1"], "cancelled between iterations");
    }
}

on_both_backends! {
    async fn a_repeating_question_is_asked_anew_each_iteration_under_a_key_of_its_own(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let parked = RunOptions {
            park_questions: true,
            ..RunOptions::default()
        };
        let toml = r#"
            [nodes.review]
            input = { message = "Draft {{ repeat.iteration }}: good enough?", schema = { type = "object", properties = { good = { type = "boolean" } } } }
            repeat = { until = "output.good", max = 3 }
        "#;
        let handle = start(&a, toml, json!({}), parked);
        let id = handle.run_id.clone();
        let store = world.store();
        for (asked, good) in [(1, false), (2, true)] {
            until("the question is asked", || store.questions(&id).unwrap().len() == asked).await;
            let open = a.registry.open_questions(&id).unwrap();
            assert_eq!(open.len(), 1, "{open:?}");
            let text = serde_json::to_string(&open[0].request).unwrap();
            assert!(text.contains(&format!("Draft {asked}: good enough?")), "{text}");
            a.registry.answer_question(&id, "review", None, &json!({ "good": good })).unwrap();
        }
        let report = handle.join.await.unwrap();
        assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
        assert_eq!(report.nodes["review"].output, Some(json!({ "good": true })));
        let keys: Vec<String> = store.questions(&id).unwrap().into_iter().map(|q| q.key).collect();
        assert_eq!(keys, ["attempt-1", "attempt-2"]);
    }
}
