//! The workflow engine end to end: workflows written as TOML, validated, planned and run
//! on paused virtual time, observed through their events.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use mcp_task_server::engine::attempt::{backoff_delays, jitter_seed};
use mcp_task_server::engine::definition::RetryPolicy;
use mcp_task_server::engine::report::{NodeStatus, RunStatus};
use mcp_task_server::engine::{Engine, RunOptions};
use mcp_task_server::store::Store;
use mcp_task_server::todos::{Origin, Tools};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use NodeStatus::{Cancelled, Failed, Running, Skipped, Succeeded};

use crate::support::engine::{Harness, Rec, Recorder, assert_problem, plan, problems};
use crate::support::rng::Rng;

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

// ---------------------------------------------------------------------------------------
// Random DAGs
// ---------------------------------------------------------------------------------------

/// A random DAG: node `i` needs only nodes before it.
struct Dag {
    parents: Vec<Vec<usize>>,
    render: Vec<bool>,
    max_parallel: usize,
}

impl Dag {
    fn random(rng: &mut Rng) -> Dag {
        let n = rng.range(10, 200);
        let mut parents = Vec::with_capacity(n);
        let mut render = Vec::with_capacity(n);
        for i in 0..n {
            let mut mine: Vec<usize> = Vec::new();
            if i > 0 {
                for _ in 0..rng.range(0, 3) {
                    let parent = rng.range(0, i - 1);
                    if !mine.contains(&parent) {
                        mine.push(parent);
                    }
                }
            }
            parents.push(mine);
            render.push(rng.chance(1, 2));
        }
        Dag {
            parents,
            render,
            max_parallel: rng.range(1, 8),
        }
    }

    /// The workflow, with `extra` = (node, need) added to the needs.
    fn toml(&self, extra: Option<(usize, usize)>) -> String {
        let mut text = format!("max_parallel = {}\n", self.max_parallel);
        for (i, parents) in self.parents.iter().enumerate() {
            let mut needs: Vec<String> = parents.iter().map(|p| format!("\"n{p}\"")).collect();
            if let Some((_, need)) = extra.filter(|(node, _)| *node == i) {
                needs.push(format!("\"n{need}\""));
            }
            text += &format!("\n[nodes.n{i}]\nneeds = [{}]\n", needs.join(", "));
            match (self.render[i], parents.first()) {
                (true, Some(p)) => {
                    text += &format!("render = \"n{i} after {{{{ nodes.n{p}.status }}}}\"\n")
                }
                (true, None) => text += &format!("render = \"n{i}\"\n"),
                (false, _) => text += "wait = \"1ms\"\n",
            }
        }
        text
    }
}

/// Checks the recorded events of a run of `dag`: edges respected, parallelism bounded,
/// every node run once to success. Returns the peak number of nodes running at once.
fn check_dag_run(seed: u64, dag: &Dag, events: &[Rec]) -> usize {
    let n = dag.parents.len();
    let mut status: HashMap<&str, NodeStatus> = HashMap::new();
    let mut running = 0usize;
    let mut peak = 0usize;
    let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
    let index: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();
    for event in events {
        let Some((node, new)) = event.node_change() else {
            continue;
        };
        let i = index[node];
        let old = status.insert(node, new);
        match new {
            Running => {
                assert_eq!(old, None, "seed {seed}: `{node}` started twice");
                for &p in &dag.parents[i] {
                    assert_eq!(
                        status.get(names[p].as_str()),
                        Some(&Succeeded),
                        "seed {seed}: `{node}` started before its upstream `n{p}` succeeded"
                    );
                }
                running += 1;
                peak = peak.max(running);
                assert!(
                    running <= dag.max_parallel,
                    "seed {seed}: {running} nodes running at once, max_parallel = {}",
                    dag.max_parallel
                );
            }
            Succeeded => {
                assert_eq!(
                    old,
                    Some(Running),
                    "seed {seed}: `{node}` succeeded unstarted"
                );
                running -= 1;
            }
            other => panic!("seed {seed}: `{node}` became {other:?}"),
        }
    }
    assert_eq!(status.len(), n, "seed {seed}: not every node ran");
    peak
}

#[tokio::test(start_paused = true)]
async fn random_dags_respect_every_edge_and_max_parallel() {
    let mut peaks = Vec::new();
    for seed in 1..=50u64 {
        let mut rng = Rng::new(seed);
        let dag = Dag::random(&mut rng);
        let plan = plan(&dag.toml(None));
        let harness = Harness::new();
        let run = harness.run(&plan, json!({})).await;
        assert_eq!(run.report.status, RunStatus::Succeeded, "seed {seed}");
        for (i, parents) in dag.parents.iter().enumerate() {
            let node = format!("n{i}");
            assert_eq!(run.status(&node), Succeeded, "seed {seed}: {node}");
            if dag.render[i] && !parents.is_empty() {
                assert_eq!(run.output(&node), &json!(format!("{node} after succeeded")));
            }
        }
        let peak = check_dag_run(seed, &dag, &run.events);
        peaks.push((dag.max_parallel, peak));
    }
    // The bound is reached, not merely respected: some runs fill every slot.
    assert!(
        peaks.iter().any(|&(max, peak)| max > 1 && peak == max),
        "no run ever filled its slots: {peaks:?}"
    );
}

/// A path `i -> ... -> j` exists in `dag`: an ancestor `i` of `j` picked at random.
fn random_ancestor(rng: &mut Rng, dag: &Dag, j: usize) -> usize {
    let mut at = j;
    loop {
        let parents = &dag.parents[at];
        if parents.is_empty() || (at != j && rng.chance(1, 3)) {
            return at;
        }
        at = parents[rng.range(0, parents.len() - 1)];
    }
}

#[test]
fn a_back_edge_in_a_random_dag_is_rejected_with_the_cycle_path() {
    for seed in 100..150u64 {
        let mut rng = Rng::new(seed);
        let dag = Dag::random(&mut rng);
        let with_parents: Vec<usize> = (0..dag.parents.len())
            .filter(|&i| !dag.parents[i].is_empty())
            .collect();
        let j = with_parents[rng.range(0, with_parents.len() - 1)];
        let i = random_ancestor(&mut rng, &dag, j);
        assert_ne!(i, j);
        // `n{i}` now needs `n{j}`, which already (transitively) needs `n{i}`.
        let found = problems(&dag.toml(Some((i, j))));
        let cycles: Vec<&String> = found
            .iter()
            .filter(|p| p.contains("needs form a cycle"))
            .collect();
        assert_eq!(cycles.len(), 1, "seed {seed}: {found:#?}");
        let message = cycles[0];
        let path = message
            .split("needs form a cycle: ")
            .nth(1)
            .and_then(|rest| rest.split(" (").next())
            .unwrap_or_else(|| panic!("seed {seed}: no path in {message}"));
        let ids: Vec<usize> = path
            .split(" -> ")
            .map(|id| id.trim_start_matches('n').parse().expect("a node id"))
            .collect();
        assert!(ids.len() >= 3, "seed {seed}: {path}");
        assert_eq!(ids.first(), ids.last(), "seed {seed}: not closed: {path}");
        for pair in ids.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            let needs = dag.parents[after].contains(&before) || (after, before) == (i, j);
            assert!(
                needs,
                "seed {seed}: n{after} does not need n{before} in {path}"
            );
        }
        let back_edge = ids.windows(2).any(|pair| pair == [j, i]);
        assert!(back_edge, "seed {seed}: n{j} -> n{i} is not in {path}");
        assert!(
            message.contains(&format!("nodes.n{}.needs", ids[0])),
            "{message}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Scheduling
// ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_fast_chain_finishes_before_a_slow_sibling_branch() {
    let plan = plan(
        r#"
        [nodes.root]
        render = "go"
        [nodes.slow]
        wait = "200ms"
        needs = ["root"]
        [nodes.a]
        render = "a"
        needs = ["root"]
        [nodes.b]
        render = "b"
        needs = ["a"]
        [nodes.c]
        render = "c"
        needs = ["b"]
        "#,
    );
    let harness = Harness::new();
    let start = Instant::now();
    let run = harness.run(&plan, json!({})).await;
    assert_eq!(run.report.status, RunStatus::Succeeded);
    assert!(run.position("c", Succeeded) < run.position("slow", Succeeded));
    assert!(run.position("b", Running) < run.position("slow", Succeeded));
    assert_eq!(run.time_of("c", Succeeded) - start, Duration::ZERO);
    assert_eq!(run.time_of("slow", Succeeded) - start, ms(200));
    assert_eq!(run.elapsed, ms(200));
}

// ---------------------------------------------------------------------------------------
// Trigger rules and on_failure
// ---------------------------------------------------------------------------------------

/// A join node: its id, trigger rule, needs, and expected status and reason.
type JoinCase = (
    &'static str,
    &'static str,
    &'static [&'static str],
    NodeStatus,
    Option<&'static str>,
);

#[tokio::test(start_paused = true)]
async fn trigger_rules_decide_joins_after_succeeded_failed_and_skipped_upstreams() {
    #[rustfmt::skip]
    let cases: &[JoinCase] = &[
        ("all_success_ok",      "all_success", &["ok", "ok2"],         Succeeded, None),
        ("all_success_failed",  "all_success", &["ok", "bad"],         Skipped,   Some("upstream failed")),
        ("all_success_skipped", "all_success", &["ok", "skip"],        Skipped,   Some("upstream skipped")),
        ("all_success_both",    "all_success", &["bad", "skip"],       Skipped,   Some("upstream failed")),
        ("all_done_mixed",      "all_done",    &["ok", "bad", "skip"], Succeeded, None),
        ("all_done_failed",     "all_done",    &["bad"],               Succeeded, None),
        ("one_success_one",     "one_success", &["bad", "skip", "ok"], Succeeded, None),
        ("one_success_none",    "one_success", &["bad", "skip"],       Skipped,   Some("no upstream succeeded")),
        ("none_failed_skips",   "none_failed", &["ok", "skip"],        Succeeded, None),
        ("none_failed_failed",  "none_failed", &["ok", "bad"],         Skipped,   Some("upstream failed")),
    ];
    let mut toml = String::from(
        r#"
        [nodes.ok]
        render = "ok"
        [nodes.ok2]
        render = "ok2"
        [nodes.bad]
        tool = "complete_task"
        args = { id = 999999 }
        on_failure = "continue"
        [nodes.skip]
        render = "never"
        when = "false"
        [nodes.gated]
        render = "never"
        needs = ["ok"]
        when = "nodes.ok.output == 'nope'"
        "#,
    );
    for (join, rule, needs, _, _) in cases {
        let needs: Vec<String> = needs.iter().map(|n| format!("\"{n}\"")).collect();
        toml += &format!(
            "[nodes.{join}]\nrender = \"{join}\"\ntrigger = \"{rule}\"\nneeds = [{}]\n",
            needs.join(", ")
        );
    }
    let run = Harness::new().run(&plan(&toml), json!({})).await;
    assert_eq!(run.report.status, RunStatus::Succeeded, "{:?}", run.report);
    assert_eq!(run.status("bad"), Failed);
    assert_eq!(run.error_code("bad"), "not_found");
    assert_eq!(run.status("skip"), Skipped);
    assert_eq!(run.reason("skip"), Some("condition false"));
    assert_eq!(run.status("gated"), Skipped);
    assert_eq!(run.reason("gated"), Some("condition false"));
    for (join, rule, _, status, reason) in cases {
        assert_eq!(run.status(join), *status, "{join} ({rule})");
        assert_eq!(run.reason(join), *reason, "{join} ({rule})");
        match status {
            Succeeded => assert_eq!(run.output(join), &json!(join)),
            _ => assert!(run.started_from(0).iter().all(|n| n != join), "{join} ran"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_fail_run_failure_cancels_running_nodes_skips_its_downstream_and_starts_nothing_more() {
    let plan = plan(
        r#"
        max_parallel = 2
        [nodes.slow]
        wait = "10s"
        [nodes.bad]
        tool = "complete_task"
        args = { id = 999999 }
        [nodes.queued]
        render = "queued"
        [nodes.after_slow]
        render = "after"
        needs = ["slow"]
        [nodes.after_bad]
        render = "after"
        needs = ["bad"]
        trigger = "all_done"
        "#,
    );
    let run = Harness::new().run(&plan, json!({})).await;
    assert_eq!(run.report.status, RunStatus::Failed);
    assert_eq!(
        run.report.error.as_deref(),
        Some("run failed at node `bad`")
    );
    assert_eq!(run.status("bad"), Failed);
    assert_eq!(run.error_code("bad"), "not_found");
    assert_eq!(run.status("slow"), Cancelled);
    assert_eq!(run.reason("slow"), Some("run failed at node `bad`"));
    for node in ["queued", "after_slow"] {
        assert_eq!(run.status(node), Cancelled, "{node}");
        assert_eq!(run.reason(node), Some("run failed at node `bad`"), "{node}");
    }
    // Downstream of the failed node, even under `all_done`: it can never run now.
    assert_eq!(run.status("after_bad"), Skipped);
    assert_eq!(run.reason("after_bad"), Some("upstream failed"));
    let failed_at = run.position("bad", Failed);
    assert_eq!(run.started_from(failed_at), Vec::<&str>::new());
    assert!(run.position("slow", Running) < failed_at);
    assert!(
        run.elapsed < ms(10),
        "the slow node was waited for: {:?}",
        run.elapsed
    );
}

#[tokio::test(start_paused = true)]
async fn a_continue_failure_lets_the_run_succeed_and_skips_all_success_downstream() {
    let plan = plan(
        r#"
        [nodes.bad]
        tool = "complete_task"
        args = { id = 999999 }
        on_failure = "continue"
        [nodes.fine]
        wait = "5ms"
        [nodes.down]
        render = "down"
        needs = ["bad"]
        [nodes.further]
        render = "further"
        needs = ["down", "fine"]
        [nodes.independent]
        render = "ok"
        needs = ["fine"]
        "#,
    );
    let run = Harness::new().run(&plan, json!({})).await;
    assert_eq!(run.report.status, RunStatus::Succeeded);
    assert_eq!(run.report.error, None);
    assert_eq!(run.status("bad"), Failed);
    assert_eq!(run.status("down"), Skipped);
    assert_eq!(run.reason("down"), Some("upstream failed"));
    assert_eq!(run.status("further"), Skipped);
    assert_eq!(run.reason("further"), Some("upstream skipped"));
    assert_eq!(run.status("fine"), Succeeded);
    assert_eq!(run.status("independent"), Succeeded);
}

#[tokio::test]
async fn a_node_downstream_of_a_failure_it_goes_on_past_reads_why_it_failed() {
    let plan = plan(
        r#"
        [nodes.bad]
        tool = "complete_task"
        args = { id = 999999 }
        on_failure = "continue"
        [nodes.ok]
        render = "ok"
        [nodes.why]
        needs = ["bad", "ok"]
        trigger = "all_done"
        value = "{'code': nodes.bad.error.code, 'said': nodes.bad.error.message | length > 0, 'ok_has_none': nodes.ok.error is not defined}"
        "#,
    );
    let run = Harness::new().run(&plan, json!({})).await;
    assert_eq!(run.report.status, RunStatus::Succeeded, "{:?}", run.report);
    assert_eq!(
        run.output("why"),
        &json!({ "code": "not_found", "said": true, "ok_has_none": true })
    );
}

// ---------------------------------------------------------------------------------------
// Retries
// ---------------------------------------------------------------------------------------

fn policy(max_attempts: u32, initial: u64, factor: f32, max: u64, jitter: bool) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_delay: ms(initial),
        max_delay: ms(max),
        factor,
        jitter,
    }
}

fn delays(policy: &RetryPolicy, seed: u64) -> Vec<Duration> {
    backoff_delays(policy, seed).collect()
}

#[test]
fn backoff_doubles_from_the_initial_delay() {
    let plain = policy(5, 100, 2.0, 1000, false);
    assert_eq!(delays(&plain, 7), [ms(100), ms(200), ms(400), ms(800)]);
    assert_eq!(
        delays(&policy(1, 100, 2.0, 1000, false), 7),
        Vec::<Duration>::new()
    );
    assert_eq!(delays(&policy(2, 100, 2.0, 1000, false), 7), [ms(100)]);
}

#[test]
fn backoff_is_capped_at_max_delay() {
    let steep = policy(5, 100, 10.0, 1000, false);
    assert_eq!(delays(&steep, 7), [ms(100), ms(1000), ms(1000), ms(1000)]);
}

#[test]
fn jitter_adds_up_to_the_base_delay_and_is_seeded() {
    let plain = policy(6, 100, 2.0, 1000, false);
    let jittered = RetryPolicy {
        jitter: true,
        ..plain
    };
    let bases = delays(&plain, 0);
    assert_eq!(bases, [ms(100), ms(200), ms(400), ms(800), ms(1000)]);
    let seed = jitter_seed("run-1", "node", None);
    let first = delays(&jittered, seed);
    assert_eq!(first.len(), bases.len());
    assert_ne!(first, bases, "jitter changed nothing");
    for (delay, base) in first.iter().zip(&bases) {
        let high = (*base * 2).min(jittered.max_delay);
        assert!(
            *base <= *delay && *delay <= high,
            "{delay:?} outside [{base:?}, {high:?}]"
        );
    }
    assert_eq!(delays(&jittered, seed), first, "same seed, other delays");
    let other = jitter_seed("run-2", "node", None);
    assert_ne!(other, seed);
    assert_ne!(delays(&jittered, other), first, "other seed, same delays");
    assert_ne!(jitter_seed("run-1", "node", Some(0)), seed);
}

#[tokio::test(start_paused = true)]
async fn timed_out_attempts_are_retried_on_schedule_then_fail() {
    let plan = plan(
        r#"
        [nodes.slow]
        wait = "1s"
        timeout = "50ms"
        retry = { max_attempts = 3, initial_delay = "100ms", factor = 2.0 }
        "#,
    );
    let start = Instant::now();
    let run = Harness::new().run(&plan, json!({})).await;
    assert_eq!(run.report.status, RunStatus::Failed);
    assert_eq!(run.status("slow"), Failed);
    assert_eq!(run.error_code("slow"), "timeout");
    assert_eq!(run.node("slow").attempts, 3);
    assert_eq!(run.elapsed, ms(50 + 100 + 50 + 200 + 50));
    let attempts: Vec<(u32, Option<Duration>, Duration)> = run
        .events
        .iter()
        .filter_map(|e| match e {
            Rec::AttemptFailed {
                attempt,
                code,
                retry_in,
                at,
                ..
            } => {
                assert_eq!(*code, "timeout");
                Some((*attempt, *retry_in, *at - start))
            }
            Rec::Node { .. } => None,
        })
        .collect();
    assert_eq!(
        attempts,
        [
            (1, Some(ms(100)), ms(50)),
            (2, Some(ms(200)), ms(200)),
            (3, None, ms(450)),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn errors_that_cannot_change_are_not_retried() {
    let plan = plan(
        r#"
        [nodes.missing]
        tool = "complete_task"
        args = { id = 999999 }
        retry = { max_attempts = 3, initial_delay = "100ms" }
        "#,
    );
    let harness = Harness::new();
    let run = harness.run(&plan, json!({})).await;
    assert_eq!(run.status("missing"), Failed);
    assert_eq!(run.error_code("missing"), "not_found");
    assert_eq!(run.node("missing").attempts, 1);
    assert_eq!(run.elapsed, Duration::ZERO);
    let failures: Vec<&Rec> = run
        .events
        .iter()
        .filter(|e| matches!(e, Rec::AttemptFailed { .. }))
        .collect();
    assert!(
        matches!(
            failures.as_slice(),
            [Rec::AttemptFailed {
                attempt: 1,
                retry_in: None,
                ..
            }]
        ),
        "{failures:?}"
    );
    assert_eq!(harness.store().audit_rows().unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------
// Timeouts and cancellation
// ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn an_attempt_past_its_timeout_fails_the_node_with_code_timeout() {
    let plan = plan(
        r#"
        [nodes.slow]
        wait = "1s"
        timeout = "100ms"
        [nodes.after]
        render = "after"
        needs = ["slow"]
        "#,
    );
    let run = Harness::new().run(&plan, json!({})).await;
    assert_eq!(run.status("slow"), Failed);
    assert_eq!(run.error_code("slow"), "timeout");
    assert!(
        run.error_message("slow").contains("100ms"),
        "{}",
        run.error_message("slow")
    );
    assert_eq!(run.node("slow").attempts, 1);
    assert_eq!(run.status("after"), Skipped);
    assert_eq!(run.reason("after"), Some("upstream failed"));
    assert_eq!(run.report.status, RunStatus::Failed);
    assert_eq!(run.elapsed, ms(100));
}

#[tokio::test(start_paused = true)]
async fn the_run_timeout_fails_the_run_and_cancels_what_is_running() {
    let plan = plan(
        r#"
        timeout = "100ms"
        [nodes.quick]
        wait = "10ms"
        [nodes.slow]
        wait = "1s"
        [nodes.after]
        render = "after"
        needs = ["slow"]
        "#,
    );
    let run = Harness::new().run(&plan, json!({})).await;
    assert_eq!(run.report.status, RunStatus::Failed);
    let error = run.report.error.as_deref().unwrap_or_default();
    assert!(error.contains("timed out"), "{error}");
    assert_eq!(run.status("quick"), Succeeded);
    assert_eq!(run.status("slow"), Cancelled);
    assert_eq!(run.reason("slow"), Some(error));
    assert_eq!(run.status("after"), Cancelled);
    assert_eq!(run.elapsed, ms(100));
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_started_run_cancels_running_and_downstream_nodes() {
    let plan = plan(
        r#"
        [nodes.nap]
        wait = "1h"
        [nodes.quick]
        render = "quick"
        [nodes.after]
        render = "after"
        needs = ["nap"]
        [nodes.last]
        render = "last"
        needs = ["after", "quick"]
        trigger = "all_done"
        "#,
    );
    let harness = Harness::new();
    let recorder = Recorder::default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let inner = recorder.observer();
    let observer = move |event: &mcp_task_server::engine::observer::Event<'_>| {
        inner.event(event);
        if let mcp_task_server::engine::observer::Event::NodeChanged {
            node,
            status: Running,
            ..
        } = event
        {
            let _ = tx.send(node.to_string());
        }
    };
    let options = RunOptions {
        observer: Some(Arc::new(observer)),
        ..RunOptions::default()
    };
    let start = Instant::now();
    let handle = harness.engine.start(plan, Map::new(), options);
    loop {
        match rx.recv().await.as_deref() {
            Some("nap") => break,
            Some(_) => {}
            None => panic!("the run ended before `nap` started"),
        }
    }
    let at_cancel = recorder.count();
    handle.cancel.cancel();
    let report = handle.join.await.expect("the run task completes");
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_secs(1), "{elapsed:?} passed");
    assert_eq!(report.status, RunStatus::Cancelled);
    assert_eq!(report.run_id, handle.run_id);
    assert_eq!(report.error.as_deref(), Some("run cancelled"));
    for node in ["nap", "after", "last"] {
        assert_eq!(report.nodes[node].status, Cancelled, "{node}");
        assert_eq!(report.nodes[node].reason.as_deref(), Some("run cancelled"));
    }
    let events = recorder.take();
    let started_after: Vec<_> = events[at_cancel..]
        .iter()
        .filter_map(Rec::node_change)
        .filter(|(_, status)| *status == Running)
        .collect();
    assert_eq!(started_after, []);
}

// ---------------------------------------------------------------------------------------
// for_each
// ---------------------------------------------------------------------------------------

const FOR_EACH: &str = r#"
    [inputs.items]
    type = "array"
    required = true
    [nodes.add]
    tool = "add_task"
    args = { title = "{{ item }} #{{ index }}" }
    for_each = "inputs.items"
    "#;

#[tokio::test(start_paused = true)]
async fn for_each_runs_one_instance_per_item_and_collects_outputs_in_order() {
    let harness = Harness::new();
    let run = harness
        .run(
            &plan(FOR_EACH),
            json!({ "items": ["milk", "eggs", "bread"] }),
        )
        .await;
    assert_eq!(run.report.status, RunStatus::Succeeded);
    let Value::Array(todos) = run.output("add") else {
        panic!("not a list: {}", run.output("add"));
    };
    let titles: Vec<&str> = todos.iter().map(|t| t["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["milk #0", "eggs #1", "bread #2"]);
    assert!(todos.iter().all(|t| t["status"] == "open"));
    assert_eq!(run.node("add").attempts, 3);
    let stored = harness.store().audit_rows().unwrap();
    assert_eq!(stored.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn for_each_over_an_empty_list_succeeds_with_an_empty_list() {
    let harness = Harness::new();
    let run = harness.run(&plan(FOR_EACH), json!({ "items": [] })).await;
    assert_eq!(run.status("add"), Succeeded);
    assert_eq!(run.output("add"), &json!([]));
    assert!(harness.store().audit_rows().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn for_each_over_something_else_than_a_list_is_a_template_error() {
    let plan = plan(
        r#"
        [inputs.items]
        type = "string"
        required = true
        [nodes.add]
        tool = "add_task"
        args = { title = "{{ item }}" }
        for_each = "inputs.items"
        "#,
    );
    let run = Harness::new().run(&plan, json!({ "items": "milk" })).await;
    assert_eq!(run.status("add"), Failed);
    assert_eq!(run.error_code("add"), "template_error");
    assert!(
        run.error_message("add").contains("expected a list"),
        "{}",
        run.error_message("add")
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_for_each_instance_fails_the_node_naming_its_index() {
    let plan = plan(
        r#"
        [inputs.items]
        type = "array"
        required = true
        [nodes.add]
        tool = "add_task"
        args = { title = "{{ item }}" }
        for_each = "inputs.items"
        "#,
    );
    let run = Harness::new()
        .run(&plan, json!({ "items": ["milk", "", "bread"] }))
        .await;
    assert_eq!(run.report.status, RunStatus::Failed);
    assert_eq!(run.status("add"), Failed);
    assert_eq!(run.error_code("add"), "invalid_input");
    let message = run.error_message("add");
    assert!(message.starts_with("item 1: "), "{message}");
    assert!(message.contains("title"), "{message}");
}

// ---------------------------------------------------------------------------------------
// Templates
// ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_sole_expression_keeps_its_json_type_and_outputs_flow_downstream() {
    let plan = plan(
        r#"
        [inputs.title]
        type = "string"
        required = true
        [inputs.tags]
        type = "array"
        default = ["home", "weekly"]
        [nodes.add]
        tool = "add_task"
        args = { title = "{{ inputs.title }} ({{ inputs.tags | length }} tags)", tags = "{{ inputs.tags }}" }
        [nodes.done]
        tool = "complete_task"
        args = { id = "{{ nodes.add.output.id }}" }
        needs = ["add"]
        [nodes.who]
        render = "run {{ run.id }}"
        [output]
        id = "nodes.done.output.id"
        run = "run.id"
        "#,
    );
    let run = Harness::new().run(&plan, json!({ "title": "Shop" })).await;
    assert_eq!(run.report.status, RunStatus::Succeeded, "{:?}", run.report);
    let added = run.output("add");
    assert_eq!(added["title"], "Shop (2 tags)");
    assert_eq!(added["tags"], json!(["home", "weekly"]));
    let done = run.output("done");
    assert_eq!(done["id"], added["id"]);
    assert_eq!(done["status"], "done");
    let run_id = run.report.run_id.as_str();
    assert_eq!(run.output("who"), &json!(format!("run {run_id}")));
    assert_eq!(
        run.report.output,
        json!({ "id": added["id"], "run": run_id })
    );
}

#[test]
fn templates_naming_unknown_or_non_upstream_things_are_rejected() {
    let found = problems(
        r#"
        [inputs.title]
        type = "string"
        [nodes.a]
        render = "{{ inputs.nope }}"
        [nodes.b]
        render = "{{ nodes.ghost.output }}"
        [nodes.c]
        render = "{{ nodes.a.output }}"
        [nodes.d]
        tool = "add_task"
        args = { title = "{{ nodes.c.output }}" }
        needs = ["a"]
        "#,
    );
    assert_problem(&found, "nodes.a.render: unknown input `inputs.nope`");
    assert_problem(&found, "nodes.b.render: unknown node `nodes.ghost`");
    assert_problem(&found, "`nodes.a` is not upstream of `c`: add it to needs");
    assert_problem(&found, "nodes.d.args.title");
    assert_problem(&found, "`nodes.c` is not upstream of `d`");
    assert_eq!(found.len(), 4, "{found:#?}");
}

// ---------------------------------------------------------------------------------------
// write_file
// ---------------------------------------------------------------------------------------

fn write_plan(path: &str, overwrite: bool) -> String {
    format!(
        r#"
        [nodes.save]
        write_file = {{ path = "{path}", content = "hello {{{{ run.id }}}}", overwrite = {overwrite} }}
        "#
    )
}

#[tokio::test(start_paused = true)]
async fn write_file_writes_under_the_workspace() {
    let harness = Harness::new();
    let run = harness
        .run(&plan(&write_plan("notes/today.md", false)), json!({}))
        .await;
    assert_eq!(run.status("save"), Succeeded, "{:?}", run.node("save"));
    let content = format!("hello {}", run.report.run_id);
    assert_eq!(
        run.output("save"),
        &json!({ "path": "notes/today.md", "bytes": content.len() })
    );
    let written = harness.workspace.path().join("notes/today.md");
    assert_eq!(std::fs::read_to_string(written).unwrap(), content);
}

#[tokio::test(start_paused = true)]
async fn write_file_refuses_paths_leaving_the_workspace() {
    let harness = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), harness.workspace.path().join("link")).unwrap();
    let absolute = outside.path().join("abs.md");
    let cases = [
        (absolute.to_str().unwrap().to_owned(), "absolute"),
        ("../escape.md".to_owned(), "`..`"),
        ("notes/../../escape.md".to_owned(), "`..`"),
        ("link/through.md".to_owned(), "symbolic link"),
    ];
    for (path, why) in &cases {
        let run = harness.run(&plan(&write_plan(path, true)), json!({})).await;
        assert_eq!(run.status("save"), Failed, "{path}");
        assert_eq!(run.error_code("save"), "file_error", "{path}");
        let message = run.error_message("save");
        assert!(message.contains(why), "{path}: {message}");
    }
    let leaked: Vec<_> = std::fs::read_dir(outside.path()).unwrap().collect();
    assert!(leaked.is_empty(), "written outside: {leaked:?}");
    assert!(
        !harness
            .workspace
            .path()
            .parent()
            .unwrap()
            .join("escape.md")
            .exists()
    );
}

#[tokio::test(start_paused = true)]
async fn write_file_replaces_an_existing_file_only_with_overwrite() {
    let harness = Harness::new();
    let target = harness.workspace.path().join("note.md");
    std::fs::write(&target, "original").unwrap();
    let run = harness
        .run(&plan(&write_plan("note.md", false)), json!({}))
        .await;
    assert_eq!(run.status("save"), Failed);
    assert_eq!(run.error_code("save"), "file_error");
    assert!(run.error_message("save").contains("already exists"));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "original");
    let run = harness
        .run(&plan(&write_plan("note.md", true)), json!({}))
        .await;
    assert_eq!(run.status("save"), Succeeded);
    let expected = format!("hello {}", run.report.run_id);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), expected);
}

// ---------------------------------------------------------------------------------------
// Direct tool calls as one-node runs
// ---------------------------------------------------------------------------------------

fn without_created_at(mut value: Value) -> Value {
    let removed = value
        .as_object_mut()
        .and_then(|map| map.remove("createdAt"));
    assert!(removed.is_some_and(|at| at.is_string()), "no createdAt");
    value
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_direct_tool_call_returns_what_the_tool_returns_and_is_audited_as_a_run() {
    let harness = Harness::new();
    let direct = Tools::new(Store::open_in_memory().unwrap());
    let good = args(json!({ "title": "Buy milk", "due": "2030-01-02", "tags": ["home"] }));
    let via_engine = harness.engine.call_tool("add_task", good.clone()).await;
    let via_tools = direct.invoke("add_task", &good, Origin::default());
    let (via_engine, via_tools) = (via_engine.unwrap().unwrap(), via_tools.unwrap().unwrap());
    assert_eq!(via_engine["title"], "Buy milk");
    assert_eq!(
        without_created_at(via_engine),
        without_created_at(via_tools)
    );

    let bad = args(json!({ "title": "", "colour": "red" }));
    let via_engine = harness.engine.call_tool("add_task", bad.clone()).await;
    let via_tools = direct.invoke("add_task", &bad, Origin::default());
    let rejected = via_engine.unwrap().unwrap_err();
    assert_eq!(rejected.code.as_str(), "invalid_input");
    assert_eq!(rejected, via_tools.unwrap().unwrap_err());

    let missing = args(json!({ "id": 999999 }));
    let via_engine = harness
        .engine
        .call_tool("complete_task", missing.clone())
        .await;
    let via_tools = direct.invoke("complete_task", &missing, Origin::default());
    assert_eq!(via_engine, via_tools);

    let engine_rows = harness.store().audit_rows().unwrap();
    let tool_rows = direct.store().audit_rows().unwrap();
    assert_eq!(engine_rows.len(), 3);
    assert_eq!(tool_rows.len(), 3);
    let mut run_ids = Vec::new();
    for (row, plain) in engine_rows.iter().zip(&tool_rows) {
        let run_id = row.run_id.as_deref().expect("a run id");
        uuid::Uuid::parse_str(run_id).unwrap_or_else(|e| panic!("{run_id}: {e}"));
        run_ids.push(run_id);
        assert_eq!(row.node_id.as_deref(), Some(row.tool.as_str()));
        assert_eq!(
            (&row.tool, &row.args, &row.outcome),
            (&plain.tool, &plain.args, &plain.outcome)
        );
        assert_eq!((&plain.run_id, &plain.node_id), (&None, &None));
    }
    assert_eq!(engine_rows[0].node_id.as_deref(), Some("add_task"));
    assert_eq!(engine_rows[1].outcome, "rejected");
    let distinct: BTreeSet<&str> = run_ids.iter().copied().collect();
    assert_eq!(distinct.len(), 3, "each call is its own run: {run_ids:?}");

    assert!(
        harness
            .engine
            .call_tool("no_such_tool", good)
            .await
            .is_none()
    );
    assert_eq!(harness.store().audit_rows().unwrap().len(), 3);
}

// ---------------------------------------------------------------------------------------
// input and sample without an MCP client
// ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn input_and_sample_nodes_without_a_client_take_the_default_or_fail() {
    let plan = plan(
        r#"
        [nodes.ask_default]
        input = { message = "Go?", schema = { type = "object", properties = { ok = { type = "boolean" } } }, default = { ok = true } }
        on_failure = "continue"
        [nodes.ask]
        input = { message = "Go?" }
        on_failure = "continue"
        [nodes.model]
        sample = { prompt = "Summarise" }
        on_failure = "continue"
        "#,
    );
    let run = Harness::new().run(&plan, json!({})).await;
    assert_eq!(run.status("ask_default"), Succeeded);
    assert_eq!(run.output("ask_default"), &json!({ "ok": true }));
    assert_eq!(run.status("ask"), Failed);
    assert_eq!(run.error_code("ask"), "unsupported");
    assert_eq!(run.status("model"), Failed);
    assert_eq!(run.error_code("model"), "unsupported");
    assert_eq!(run.node("model").attempts, 1);
}

/// A tool failure another attempt might cure (`internal_error`, here from a read-only
/// database) is retried on schedule, the first attempt included in the count, even though
/// that first attempt is made synchronously by the scheduler.
#[tokio::test(start_paused = true)]
async fn internal_errors_of_a_tool_are_retried_on_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    drop(Store::open(&path).unwrap());
    let read_only = Store::open(format!("file:{}?mode=ro", path.display())).unwrap();
    let engine = Engine::new(Tools::new(read_only), dir.path());
    let plan = plan(
        r#"
        [nodes.add]
        tool = "add_task"
        args = { title = "cannot be stored" }
        retry = { max_attempts = 3, initial_delay = "100ms", factor = 2.0 }
        "#,
    );
    let recorder = Recorder::default();
    let options = RunOptions {
        observer: Some(recorder.observer()),
        ..RunOptions::default()
    };
    let started = tokio::time::Instant::now();
    let report = engine.run(Arc::clone(&plan), Map::new(), options).await;
    assert_eq!(started.elapsed(), Duration::from_millis(300));
    let node = &report.nodes["add"];
    assert_eq!(node.status, Failed);
    assert_eq!(node.attempts, 3);
    assert_eq!(node.error.as_ref().unwrap().code, "internal_error");
    let failures: Vec<(u32, Option<Duration>, Duration)> = recorder
        .take()
        .into_iter()
        .filter_map(|event| match event {
            Rec::AttemptFailed {
                attempt,
                retry_in,
                at,
                ..
            } => Some((attempt, retry_in, at - started)),
            Rec::Node { .. } => None,
        })
        .collect();
    let ms = Duration::from_millis;
    assert_eq!(
        failures,
        [
            (1, Some(ms(100)), ms(0)),
            (2, Some(ms(200)), ms(100)),
            (3, None, ms(300)),
        ]
    );
}

/// A harness whose engine runs under `limits`.
fn limited(limits: mcp_task_server::engine::Limits) -> Harness {
    let mut harness = Harness::new();
    harness.engine = harness.engine.clone().with_limits(limits);
    harness
}

#[tokio::test]
async fn a_fan_out_over_its_instance_budget_fails_its_node_at_once_and_is_audited() {
    let harness = limited(mcp_task_server::engine::Limits {
        max_for_each: 5,
        ..Default::default()
    });
    let toml = "[nodes.fan]\nfor_each = \"range(6)\"\nrender = \"{{ item }}\"\n";
    let report = harness.run(&plan(toml), json!({})).await.report;
    assert_eq!(report.status, RunStatus::Failed);
    let fan = &report.nodes["fan"];
    let error = fan.error.as_ref().expect("an error");
    assert_eq!(error.code, "budget_exceeded");
    assert!(
        error.message.contains("max-for-each") && error.message.contains("`fan`"),
        "{}",
        error.message
    );
    assert!(fan.attempts <= 1, "a budget is never retried");
    let audit = harness.store().audit_rows().unwrap();
    let row = audit
        .iter()
        .find(|r| r.tool == "budget_exceeded")
        .expect("an audit row");
    assert_eq!(row.node_id.as_deref(), Some("fan"));
    assert!(row.args.contains("max-for-each"), "{}", row.args);
}

#[tokio::test]
async fn a_run_over_its_unit_budget_fails_the_node_that_would_pass_it() {
    let harness = limited(mcp_task_server::engine::Limits {
        max_run_units: 10,
        ..Default::default()
    });
    let toml = "[nodes.a]\nfor_each = \"range(5)\"\nrender = \"{{ item }}\"\n\
                [nodes.b]\nfor_each = \"range(5)\"\nrender = \"{{ item }}\"\nneeds = [\"a\"]\n";
    let report = harness.run(&plan(toml), json!({})).await.report;
    assert_eq!(report.nodes["a"].status, Succeeded);
    let error = report.nodes["b"].error.as_ref().expect("an error");
    assert_eq!(error.code, "budget_exceeded");
    assert!(
        error.message.contains("max-run-units") && error.message.contains("`b`"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn a_template_over_its_fuel_fails_with_budget_exceeded_naming_budget_and_node() {
    let harness = limited(mcp_task_server::engine::Limits {
        template: mcp_task_server::engine::template::TemplateLimits {
            fuel: 1000,
            max_output: 1 << 20,
        },
        ..Default::default()
    });
    let toml = "[nodes.loop]\nrender = \"{% for i in range(10000) %}{{ i }}{% endfor %}\"\n";
    let report = harness.run(&plan(toml), json!({})).await.report;
    let error = report.nodes["loop"].error.as_ref().expect("an error");
    assert_eq!(error.code, "budget_exceeded");
    assert!(
        error.message.contains("template-fuel") && error.message.contains("`loop`"),
        "{}",
        error.message
    );
}
