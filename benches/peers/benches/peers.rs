//! The workflow engine beside two Rust DAG executors, dagrs 0.9 and dagx 0.3, on the same
//! shapes, in the same process, on the same two-worker tokio runtime.
//! Run from this folder: `cargo bench`.
//!
//! Every run is spawned as a task on the runtime. Building a graph is not timed for any of
//! the three: the engine reuses one plan; dagx consumes its graph on each run and dagrs must
//! be reset between runs, so a fresh graph is built for every iteration outside the timer
//! (`iter_batched`), and dropped outside it too.
//!
//! Dependencies are real in all three: the engine orders nodes by `needs`; a dagx task takes
//! its upstream output as its input; a dagrs node (which a graph orders only through its
//! channels) is a relay that receives from every upstream node before it sends downstream.

use std::sync::Arc;

#[path = "../../support/shapes.rs"]
mod shapes;

// The allocator the server binary ships with, shared by all three executors.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Map;
use tokio::runtime::Runtime;

use mcp_task_server::engine::plan::Plan;
use mcp_task_server::engine::report::{RunReport, RunStatus};
use mcp_task_server::engine::{Engine, RunOptions};

use shapes::{Shape, chain, diamond, fanout, runtime};

/// The last node's depth (longest path from a root, in edges): what a relay reports.
fn depth(shape: &Shape) -> u64 {
    let mut depth = vec![0u64; shape.len()];
    for (i, parents) in shape.iter().enumerate() {
        depth[i] = parents.iter().map(|&p| depth[p] + 1).max().unwrap_or(0);
    }
    depth[shape.len() - 1]
}

mod ours {
    use super::*;

    pub use super::shapes::engine;

    /// No-op nodes (`render = "x"`, returned without templating), decoded, validated, planned.
    pub fn plan(shape: &Shape) -> Arc<Plan> {
        super::shapes::plan("peers", shape)
    }

    pub async fn run(engine: Engine, plan: Arc<Plan>) -> RunReport {
        tokio::spawn(async move { engine.run(plan, Map::new(), RunOptions::default()).await })
            .await
            .expect("run task")
    }
}

mod with_dagx {
    use dagx::{DagRunner, Task, TaskHandle, task};

    use super::Shape;

    pub struct Source;

    #[task]
    impl Source {
        async fn run(&mut self) -> u64 {
            0
        }
    }

    pub struct Step;

    #[task]
    impl Step {
        async fn run(&mut self, upstream: &u64) -> u64 {
            upstream + 1
        }
    }

    /// Chains and fan-outs: every node but the root takes its one parent's output.
    /// Returns the graph and the last node. dagx takes at most 8 inputs per task.
    pub fn build(shape: &Shape) -> (DagRunner, TaskHandle<u64>) {
        let dag = DagRunner::new();
        let mut handles: Vec<TaskHandle<u64>> = Vec::with_capacity(shape.len());
        for parents in shape {
            let handle = match parents.as_slice() {
                [] => dag.add_task(Source).into(),
                [parent] => dag.add_task(Step).depends_on(handles[*parent]),
                _ => panic!("the dagx side supports one parent per node"),
            };
            handles.push(handle);
        }
        let last = *handles.last().expect("a non-empty shape");
        (dag, last)
    }

    pub async fn run(dag: DagRunner) -> DagRunner {
        tokio::spawn(async move {
            dag.run(|fut| {
                tokio::spawn(fut);
            })
            .await
            .expect("dagx run");
            dag
        })
        .await
        .expect("run task")
    }
}

mod with_dagrs {
    use std::sync::Arc;

    use dagrs::async_trait::async_trait;
    use dagrs::{
        Action, Content, DefaultNode, EnvVar, Graph, InChannels, Node, NodeId, NodeTable,
        OutChannels, Output,
    };

    use super::Shape;

    /// Receives from every upstream node, then sends its depth downstream.
    pub struct Relay;

    #[async_trait]
    impl Action for Relay {
        async fn run(
            &self,
            input: &mut InChannels,
            output: &mut OutChannels,
            _: Arc<EnvVar>,
        ) -> Output {
            let received = input
                .map(|content| {
                    *content
                        .expect("upstream sent")
                        .into_inner::<u64>()
                        .expect("a depth")
                })
                .await;
            let depth = received.into_iter().max().map_or(0, |d| d + 1);
            for sent in output.broadcast(Content::new(depth)).await {
                sent.expect("downstream receives");
            }
            Output::new(depth)
        }
    }

    pub fn build(shape: &Shape) -> (Graph, NodeId) {
        let mut table = NodeTable::new();
        let mut graph = Graph::new();
        let mut ids = Vec::with_capacity(shape.len());
        for i in 0..shape.len() {
            let node = DefaultNode::with_action(format!("n{i}"), Relay, &mut table);
            ids.push(node.id());
            graph.add_node(node).expect("add node");
        }
        let mut children = vec![Vec::new(); shape.len()];
        for (i, parents) in shape.iter().enumerate() {
            for &p in parents {
                children[p].push(ids[i]);
            }
        }
        for (p, to) in children.into_iter().enumerate() {
            if !to.is_empty() {
                graph.add_edge(ids[p], to).expect("add edge");
            }
        }
        graph.set_env(EnvVar::new(table));
        (graph, ids[shape.len() - 1])
    }

    pub async fn run(mut graph: Graph) -> Graph {
        tokio::spawn(async move {
            graph.async_start().await.expect("dagrs run");
            graph
        })
        .await
        .expect("run task")
    }
}

/// Runs each executor once on `shape` and checks that it ran every node, in order.
fn check(rt: &Runtime, engine: &Engine, plan: &Arc<Plan>, shape: &Shape, with_dagx: bool) {
    let report = rt.block_on(ours::run(engine.clone(), Arc::clone(plan)));
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(report.nodes.len(), shape.len());
    let (graph, last) = with_dagrs::build(shape);
    let graph = rt.block_on(with_dagrs::run(graph));
    let results = graph.get_results::<u64>();
    assert_eq!(results.len(), shape.len());
    let reached = results[&last].as_deref().copied();
    assert_eq!(
        reached,
        Some(depth(shape)),
        "dagrs relayed along the longest path"
    );
    if with_dagx {
        let (dag, last) = with_dagx::build(shape);
        let dag = rt.block_on(with_dagx::run(dag));
        assert_eq!(dag.get(last).expect("dagx output"), depth(shape));
    }
}

fn bench_peers(c: &mut Criterion) {
    let rt = runtime();
    let engine = ours::engine();
    let shapes: [(&str, String, Shape, bool); 5] = [
        ("chain", "100".into(), chain(100), true),
        ("chain", "1000".into(), chain(1000), true),
        ("fanout", "100".into(), fanout(100), true),
        ("fanout", "1000".into(), fanout(1000), true),
        // Every node has 100 inputs, beyond dagx's 8.
        ("diamond", "10x100".into(), diamond(10, 100), false),
    ];
    for (kind, size, shape, with_dagx) in shapes {
        let plan = ours::plan(&shape);
        check(&rt, &engine, &plan, &shape, with_dagx);
        let mut group = c.benchmark_group(format!("peers/{kind}/{size}"));
        group.throughput(Throughput::Elements(shape.len() as u64));
        group.bench_function(BenchmarkId::from_parameter("ours"), |b| {
            b.to_async(&rt).iter_batched(
                || (engine.clone(), Arc::clone(&plan)),
                |(engine, plan)| ours::run(engine, plan),
                BatchSize::SmallInput,
            );
        });
        if with_dagx {
            group.bench_function(BenchmarkId::from_parameter("dagx"), |b| {
                b.to_async(&rt).iter_batched(
                    || with_dagx::build(&shape).0,
                    with_dagx::run,
                    BatchSize::SmallInput,
                );
            });
        }
        group.bench_function(BenchmarkId::from_parameter("dagrs"), |b| {
            b.to_async(&rt).iter_batched(
                || with_dagrs::build(&shape).0,
                with_dagrs::run,
                BatchSize::SmallInput,
            );
        });
        group.finish();
    }
}

criterion_group!(benches, bench_peers);
criterion_main!(benches);
