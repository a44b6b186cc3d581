//! PostgreSQL with and without TLS, measured in one run: the `add_task` call in this
//! process (the tool, its audit row, one transaction), lock-step, on one private cluster
//! (tests/it/support/cluster.rs) reached once in plain text and once over `verify-full` TLS.
//!
//! Run: `cargo bench --bench pg_tls` (needs PostgreSQL installed: `tests/postgres/ensure`
//! installs it). `BENCH_N` sets the calls measured (default 2000).

// A bench prints its table on stdout; no MCP stream is there.
#![allow(clippy::print_stdout)]

// The integration tests' cluster helper; this bench uses a part of it.
#[allow(dead_code)]
#[path = "../tests/it/support/cluster.rs"]
mod cluster;

use std::time::Instant;

use cluster::{Cluster, PASSWORD};
use mcp_task_server::store::{Durability, Store};
use mcp_task_server::todos::{Origin, Tools};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// `n` lock-step `add_task` calls on the store at `url`, after 100 not counted (µs).
fn add_task_times(url: &str, n: usize) -> Vec<f64> {
    let store = Store::open_at(url, Durability::Normal).expect("the cluster answers");
    let tools = Tools::new(store);
    let mut times = Vec::with_capacity(n);
    for i in 0..n + 100 {
        let mut args = serde_json::Map::new();
        args.insert("title".into(), format!("todo {i}").into());
        let started = Instant::now();
        tools
            .invoke("add_task", &args, Origin::default())
            .expect("add_task is a tool")
            .expect("add_task succeeds");
        if i >= 100 {
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    times.sort_by(f64::total_cmp);
    times
}

fn main() {
    let n = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let cluster = match Cluster::start(true) {
        Ok(cluster) => cluster,
        Err(missing) => {
            eprintln!("{missing}: nothing to measure");
            return;
        }
    };
    let plain = cluster.url(&format!("sslmode=disable&password={PASSWORD}"));
    println!("\nadd_task in process on PostgreSQL, lock-step, {n} calls (µs)");
    println!(
        "{:<12} {:>8} {:>8} {:>8}",
        "connection", "p50", "p99", "mean"
    );
    for (name, url) in [("plain", plain), ("verify-full", cluster.verified_url())] {
        let times = add_task_times(&url, n);
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        println!(
            "{name:<12} {:>8.1} {:>8.1} {:>8.1}",
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            mean
        );
    }
}
