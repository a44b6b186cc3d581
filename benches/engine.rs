//! Scheduling cost of the workflow engine on no-op nodes, validation of a large file, and
//! the overhead a one-node run adds to a direct tool call. Run: `cargo bench --bench engine`.
//!
//! A no-op node is `render = "x"`: a plain string, which the engine returns as it is,
//! without templating. Definitions are decoded, validated and planned once, outside the
//! timed loop; each measured run is spawned as a task on a two-worker runtime, which is
//! how the server runs workflows.

#[path = "support/shapes.rs"]
mod shapes;

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Map;

use mcp_task_server::engine::plan::Plan;
use mcp_task_server::engine::report::RunStatus;
use mcp_task_server::engine::validate::{Limits, validate};
use mcp_task_server::engine::{RunOptions, loader};
use mcp_task_server::todos::{Origin, Tools};
use shapes::{
    Shape, chain, definition_toml, diamond, edges, engine, fanout, plan, random, runtime,
    spawned_run,
};

// The allocator the binary ships with, so the figures are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bench_schedule(c: &mut Criterion) {
    let rt = runtime();
    let engine = engine();
    let shapes: [(&str, String, Shape); 5] = [
        ("chain", "100".into(), chain(100)),
        ("chain", "1000".into(), chain(1000)),
        ("fanout", "1000".into(), fanout(1000)),
        ("diamond", "10x100".into(), diamond(10, 100)),
        ("random", "10000".into(), random(10_000, 0x5eed)),
    ];
    let mut group = c.benchmark_group("schedule");
    for (kind, size, shape) in shapes {
        let plan = plan(kind, &shape);
        let nodes = shape.len();
        let check = rt.block_on(engine.run(Arc::clone(&plan), Map::new(), RunOptions::default()));
        assert_eq!(check.status, RunStatus::Succeeded, "{kind}/{size} succeeds");
        assert_eq!(check.nodes.len(), nodes);
        eprintln!(
            "schedule/{kind}/{size}: {nodes} nodes, {} edges",
            edges(&shape)
        );
        group.throughput(Throughput::Elements(nodes as u64));
        group.bench_function(BenchmarkId::new(kind, size), |b| {
            b.to_async(&rt).iter(|| {
                let engine = engine.clone();
                let plan = Arc::clone(&plan);
                async move { black_box(spawned_run(engine, plan).await) }
            });
        });
    }
    group.finish();
}

fn bench_validate(c: &mut Criterion) {
    let shape = random(10_000, 0x5eed);
    let text = definition_toml("random", &shape);
    let mut group = c.benchmark_group("validate");
    group.throughput(Throughput::Elements(shape.len() as u64));
    group.bench_function(BenchmarkId::new("file", shape.len()), |b| {
        b.iter(|| {
            let def =
                loader::parse_toml("bench.toml", "random", black_box(&text)).expect("file decodes");
            validate(&def, &Tools::exists, Limits::FILE).expect("file validates");
            black_box(Plan::new(Arc::new(def)))
        });
    });
    // The steps of `file` apart; `toml_syntax` is the TOML parser alone, inside `parse_toml`.
    group.bench_function(BenchmarkId::new("toml_syntax", shape.len()), |b| {
        b.iter(|| toml::de::DeTable::parse(black_box(&text)).expect("parses"));
    });
    group.bench_function(BenchmarkId::new("parse_toml", shape.len()), |b| {
        b.iter(|| loader::parse_toml("bench.toml", "random", black_box(&text)).expect("decodes"));
    });
    let def = Arc::new(loader::parse_toml("bench.toml", "random", &text).expect("decodes"));
    group.bench_function(BenchmarkId::new("check", shape.len()), |b| {
        b.iter(|| validate(black_box(&def), &Tools::exists, Limits::FILE).expect("validates"));
    });
    group.bench_function(BenchmarkId::new("plan", shape.len()), |b| {
        b.iter(|| Plan::new(black_box(Arc::clone(&def))));
    });
    group.finish();
}

fn bench_overhead(c: &mut Criterion) {
    let rt = runtime();
    let engine = engine();
    let tools = engine.todo_tools().clone();
    let args = Map::new();
    let mut group = c.benchmark_group("overhead/one_node");
    group.bench_function("call_tool/list_tasks", |b| {
        b.to_async(&rt).iter(|| async {
            let result = engine.call_tool("list_tasks", args.clone()).await;
            black_box(result.expect("tool exists").expect("list_tasks succeeds"))
        });
    });
    group.bench_function("invoke/list_tasks", |b| {
        b.to_async(&rt).iter(|| async {
            let result = tools.invoke("list_tasks", &args, Origin::default());
            black_box(result.expect("tool exists").expect("list_tasks succeeds"))
        });
    });
    group.finish();
}

criterion_group!(benches, bench_schedule, bench_validate, bench_overhead);
criterion_main!(benches);
