//! `history` nodes over a long history: the time of a run whose one node reads earlier
//! finished runs of a workflow that has `BENCH_RUNS` (default 10 000) of them in a SQLite
//! store, beside the same run with a `render` node in its place, so that the difference is
//! the read. Run: `cargo bench --bench history`.
//!
//! The earlier runs are made in process through the engine and recorded as any run is,
//! each owned by alice, as over HTTP with tokens, so the read goes by the index that leads
//! with the principal; as many runs of the same workflow by bob sit beside them, never
//! read. Each measured iteration is a whole recorded run of alice's reader: its start, the
//! node, its end and its own row of history. The groups:
//! - `history/baseline`: the reader with `render = "x"` for its node;
//! - `history/newest/20`, `history/newest/100`: the 20 newest runs (the default limit), or
//!   100 (`--max-history-rows`);
//! - `history/where_none/10000`: a `where` that holds for no run, so every run is looked
//!   at, a page of 100 at a time, up to `--max-history-scan` (10 000).
//!
//! Criterion reports each figure's median with the mean.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::{Map, Value, json};

use mcp_task_server::app::{App, Config};
use mcp_task_server::engine::RunOptions;
use mcp_task_server::engine::plan::Plan;
use mcp_task_server::engine::report::RunStatus;
use mcp_task_server::store::Owner;

// The allocator the binary ships with, so the figures are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The workflow whose runs are read: one node, its input in its output.
const DEPLOY: &str = r#"
name = "deploy"
[inputs.env]
type = "string"
[inputs.n]
type = "integer"
[nodes.ship]
render = "shipped {{ inputs.n }} to {{ inputs.env }}"
[output]
env = "inputs.env"
n = "inputs.n"
"#;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn plan(name: &str, text: &str) -> Arc<Plan> {
    let def = mcp_task_server::engine::loader::parse_toml(&format!("{name}.toml"), name, text)
        .expect("the workflow decodes");
    Arc::new(Plan::new(Arc::new(def)))
}

/// A reader whose one node is `node` (a TOML value of an action).
fn reader(node: &str) -> Arc<Plan> {
    plan(
        "reader",
        &format!(
            "name = \"reader\"\n[nodes.past]\n{node}\n[output]\npast = \"nodes.past.output\"\n"
        ),
    )
}

fn options(principal: &str) -> RunOptions {
    RunOptions {
        record: true,
        owner: Owner {
            principal: Some(principal.to_owned()),
            session: None,
        },
        ..RunOptions::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// Makes `runs` finished runs of [`DEPLOY`] for alice and as many for bob, alternating.
fn fill(app: &App, rt: &tokio::runtime::Runtime, runs: usize) {
    let deploy = plan("deploy", DEPLOY);
    let started = Instant::now();
    rt.block_on(async {
        for n in 0..runs {
            for (principal, env) in [("alice", "prod"), ("bob", "test")] {
                let mut inputs = Map::new();
                inputs.insert("env".to_owned(), json!(env));
                inputs.insert("n".to_owned(), json!(n));
                let report = app
                    .engine()
                    .run(Arc::clone(&deploy), inputs, options(principal))
                    .await;
                assert_eq!(report.status, RunStatus::Succeeded);
            }
        }
    });
    eprintln!(
        "history: {runs} runs of alice's and {runs} of bob's made in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// One recorded run of alice's reader, to its end; its output.
async fn read(app: &App, reader: &Arc<Plan>) -> Value {
    let report = app
        .engine()
        .run(Arc::clone(reader), Map::new(), options("alice"))
        .await;
    assert_eq!(report.status, RunStatus::Succeeded, "{:?}", report.error);
    report.output
}

fn bench_history(c: &mut Criterion) {
    let runs = env("BENCH_RUNS", 10_000) as usize;
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tasks.db");
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let app = App::open(&Config::new(db.display().to_string(), workspace)).unwrap();
    fill(&app, &rt, runs);

    let cases = [
        ("baseline", String::new(), "render = \"x\"".to_owned()),
        (
            "newest",
            "20".to_owned(),
            "history = { workflow = \"deploy\" }".to_owned(),
        ),
        (
            "newest",
            "100".to_owned(),
            "history = { workflow = \"deploy\", limit = 100 }".to_owned(),
        ),
        (
            "where_none",
            runs.to_string(),
            "history = { workflow = \"deploy\", where = \"past.inputs.env == 'nowhere'\" }"
                .to_owned(),
        ),
    ];
    let mut group = c.benchmark_group("history");
    for (name, size, node) in cases {
        let reader = reader(&node);
        // What each case reads, checked once: alice's runs only, newest first.
        let output = rt.block_on(read(&app, &reader));
        if let Some(read) = output["past"]["runs"].as_array() {
            assert!(read.iter().all(|run| run["inputs"]["env"] == "prod"));
            let expected = match size.as_str() {
                "20" => 20.min(runs),
                "100" => 100.min(runs),
                _ => 0,
            };
            assert_eq!(read.len(), expected, "{name}/{size}");
            // Newest first, by when they finished (runs that ended in the same millisecond
            // by their ids).
            let ends: Vec<&str> = read
                .iter()
                .map(|run| run["finished_at"].as_str().unwrap())
                .collect();
            assert!(ends.windows(2).all(|w| w[0] >= w[1]), "{ends:?}");
        }
        if name == "where_none" {
            // Looked at every run and found none; the scan cap is exactly reached.
            assert_eq!(output["past"]["runs"], json!([]));
            group.sample_size(20);
        }
        let id = match size.is_empty() {
            true => BenchmarkId::from_parameter(name),
            false => BenchmarkId::new(name, &size),
        };
        group.bench_function(id, |b| {
            b.to_async(&rt).iter(|| read(&app, &reader));
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(2)).measurement_time(Duration::from_secs(5));
    targets = bench_history
}
criterion_main!(benches);
