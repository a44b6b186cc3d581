//! DAG shapes and the engine-side plumbing shared by the benches: the `engine` bench of the
//! main crate and the `peers` bench package include this file.

// Each bench uses a part of this file.
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::{Map, Value, json};

use mcp_task_server::engine::plan::Plan;
use mcp_task_server::engine::report::RunReport;
use mcp_task_server::engine::validate::{Limits, validate};
use mcp_task_server::engine::{Engine, RunOptions, loader};
use mcp_task_server::store::Store;
use mcp_task_server::todos::Tools;

/// High enough that the limit never throttles the widest shape.
pub const MAX_PARALLEL: usize = 10_000;

/// A DAG as the parents of each node; parents always come earlier.
pub type Shape = Vec<Vec<usize>>;

pub fn chain(n: usize) -> Shape {
    (0..n)
        .map(|i| if i == 0 { vec![] } else { vec![i - 1] })
        .collect()
}

/// One root, then `width` nodes that each need only the root.
pub fn fanout(width: usize) -> Shape {
    std::iter::once(vec![])
        .chain((0..width).map(|_| vec![0]))
        .collect()
}

/// `layers` layers of `width` nodes, each needing every node of the layer before.
pub fn diamond(layers: usize, width: usize) -> Shape {
    (0..layers * width)
        .map(|i| match i / width {
            0 => vec![],
            layer => ((layer - 1) * width..layer * width).collect(),
        })
        .collect()
}

/// SplitMix64: a fixed, tiny generator so every run builds the same graph.
pub struct SplitMix(u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `n` nodes, each with up to three parents drawn among the nodes before it.
pub fn random(n: usize, seed: u64) -> Shape {
    let mut rng = SplitMix(seed);
    (0..n)
        .map(|i| {
            if i == 0 {
                return vec![];
            }
            let count = rng.below(4);
            let mut parents: Vec<usize> = (0..count).map(|_| rng.below(i)).collect();
            parents.sort_unstable();
            parents.dedup();
            parents
        })
        .collect()
}

pub fn edges(shape: &Shape) -> usize {
    shape.iter().map(Vec::len).sum()
}

pub fn node_id(i: usize) -> String {
    format!("n{i}")
}

/// The shape as an inline (JSON) definition of no-op nodes.
pub fn definition_json(name: &str, shape: &Shape) -> Value {
    let nodes: Map<String, Value> = shape
        .iter()
        .enumerate()
        .map(|(i, parents)| {
            let mut node = json!({ "render": "x" });
            if !parents.is_empty() {
                let needs: Vec<String> = parents.iter().map(|&p| node_id(p)).collect();
                node["needs"] = json!(needs);
            }
            (node_id(i), node)
        })
        .collect();
    json!({ "name": name, "max_parallel": MAX_PARALLEL, "nodes": nodes })
}

/// The shape as a workflow file of no-op nodes.
pub fn definition_toml(name: &str, shape: &Shape) -> String {
    let mut text = format!("name = \"{name}\"\nmax_parallel = {MAX_PARALLEL}\n");
    for (i, parents) in shape.iter().enumerate() {
        text.push_str(&format!("\n[nodes.{}]\nrender = \"x\"\n", node_id(i)));
        if !parents.is_empty() {
            let needs: Vec<String> = parents
                .iter()
                .map(|&p| format!("\"{}\"", node_id(p)))
                .collect();
            text.push_str(&format!("needs = [{}]\n", needs.join(", ")));
        }
    }
    text
}

/// Decodes, validates and plans a shape; panics on any problem.
pub fn plan(name: &str, shape: &Shape) -> Arc<Plan> {
    let def = loader::parse_json(&definition_json(name, shape)).expect("definition decodes");
    validate(&def, &Tools::exists, Limits::FILE).expect("definition validates");
    Arc::new(Plan::new(Arc::new(def)))
}

/// One measured run of `plan` with no inputs, spawned on the runtime as a real run is.
pub async fn spawned_run(engine: Engine, plan: Arc<Plan>) -> RunReport {
    let run =
        tokio::spawn(async move { engine.run(plan, Map::new(), RunOptions::default()).await });
    run.await.expect("run task")
}

pub fn engine() -> Engine {
    let store = Store::open_in_memory().expect("in-memory store");
    Engine::new(Tools::new(store), &std::env::temp_dir())
}

/// A multi-thread runtime with two workers, as on the machines the figures come from.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}
