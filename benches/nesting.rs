//! What composing and repeating cost: a parent whose `for_each` runs 100 one-node child
//! workflows, per child, beside the same 100 nodes run inline; and a node repeated 100
//! times, per iteration, beside a chain of 100 nodes. Both on a file database (children
//! are always recorded runs), and the repetition in memory too. Run: `cargo bench --bench
//! nesting`.

#[path = "support/shapes.rs"]
mod shapes;

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Map;

use mcp_task_server::engine::installed::Installed;
use mcp_task_server::engine::plan::Plan;
use mcp_task_server::engine::report::RunStatus;
use mcp_task_server::engine::validate::{Limits, validate};
use mcp_task_server::engine::{Engine, RunOptions, loader};
use mcp_task_server::runs::{Registry, RegistryConfig};
use mcp_task_server::store::{Durability, Store};
use mcp_task_server::todos::Tools;
use shapes::runtime;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const N: usize = 100;

/// The child every `workflow` node runs: one no-op node.
const ONE: &str = "[nodes.only]\nrender = \"x\"\n";

fn plan(toml: &str) -> Arc<Plan> {
    let def = loader::parse_toml("bench.toml", "bench", toml).expect("decodes");
    validate(&def, &Tools::exists, Limits::FILE).expect("validates");
    Arc::new(Plan::new(Arc::new(def)))
}

/// A durable engine on a file database in `dir`, with `one.toml` installed.
fn durable(dir: &Path) -> Engine {
    let flows = dir.join("workflows");
    std::fs::create_dir_all(&flows).unwrap();
    std::fs::write(flows.join("one.toml"), ONE).unwrap();
    let (installed, rejected) = Installed::load(Some(&flows));
    assert!(rejected.is_empty(), "the child loads");
    let store = Store::open_with(dir.join("bench.db"), Durability::Normal).expect("store");
    let tools = Tools::new(store.clone());
    let registry = Registry::new(store, tools.clone(), RegistryConfig::default());
    Engine::new(tools, dir)
        .with_journal(Arc::new(registry))
        .with_workflows(Arc::new(installed))
}

fn memory() -> Engine {
    let store = Store::open_in_memory().expect("store");
    Engine::new(Tools::new(store), &std::env::temp_dir())
}

/// Runs `plan` to success; a run of a durable engine is recorded, as a workflow's is.
async fn run(engine: &Engine, plan: &Arc<Plan>) {
    let options = RunOptions {
        record: true,
        ..RunOptions::default()
    };
    let report = engine.run(Arc::clone(plan), Map::new(), options).await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    black_box(report);
}

fn bench_children(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let engine = durable(dir.path());
    let items = format!("range({N}) | list");
    let children = plan(&format!(
        "max_parallel = 100\n[nodes.each]\nfor_each = \"{items}\"\nworkflow = \"one\"\n"
    ));
    let inline = plan(&format!(
        "max_parallel = 100\n[nodes.each]\nfor_each = \"{items}\"\nrender = \"x\"\n"
    ));
    let mut group = c.benchmark_group("nesting");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(20);
    group.bench_function(BenchmarkId::new("children", N), |b| {
        b.to_async(&rt).iter(|| run(&engine, &children));
    });
    group.bench_function(BenchmarkId::new("inline_instances", N), |b| {
        b.to_async(&rt).iter(|| run(&engine, &inline));
    });
    group.finish();
}

fn bench_repeat(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let recorded = durable(dir.path());
    let in_memory = memory();
    let repeated = plan(&format!(
        "[nodes.again]\nvalue = \"repeat.iteration\"\nrepeat = {{ until = \"output == {N}\", max = {N} }}\n"
    ));
    let mut chain = String::new();
    for i in 0..N {
        chain += &format!("[nodes.n{i}]\nvalue = \"{i}\"\n");
        if i > 0 {
            chain += &format!("needs = [\"n{}\"]\n", i - 1);
        }
    }
    let chain = plan(&chain);
    let mut group = c.benchmark_group("repeat");
    group.throughput(Throughput::Elements(N as u64));
    for (name, engine) in [("memory", &in_memory), ("durable", &recorded)] {
        group.bench_function(BenchmarkId::new(format!("{name}/iterations"), N), |b| {
            b.to_async(&rt).iter(|| run(engine, &repeated));
        });
        group.bench_function(BenchmarkId::new(format!("{name}/chain"), N), |b| {
            b.to_async(&rt).iter(|| run(engine, &chain));
        });
    }
    group.finish();
}

criterion_group!(benches, bench_children, bench_repeat);
criterion_main!(benches);
