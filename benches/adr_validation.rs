//! `adr_validation` over a folder of `BENCH_ADRS` (default 200) generated ADRs, a third
//! each in the Nygard, MADR 4 and log4brains formats, in a temporary workspace: the wall
//! time of one whole run without a model (a child run of `adr_check` per ADR, the folder's
//! checks, the ratchet's read of history, the report written), and its time per ADR.
//! Run: `cargo bench --bench adr_validation`.
//!
//! Each measured iteration is a recorded run of alice's, as over HTTP with tokens, writing
//! its report to a folder of its own (a day holds at most 99 reports of one folder). The
//! corpus is clean, so no iteration opens todos; every run reads the last one's findings.
//! Criterion reports the median with the mean, and the throughput in ADRs per second; the
//! time of one run and its time per ADR are printed once before the measurement.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Map, Value, json};

use mcp_task_server::app::{App, Config};
use mcp_task_server::engine::RunOptions;
use mcp_task_server::engine::plan::Plan;
use mcp_task_server::engine::report::RunStatus;
use mcp_task_server::engine::validate::check_inputs;
use mcp_task_server::store::Owner;

// The allocator the binary ships with, so the figures are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn options() -> RunOptions {
    RunOptions {
        record: true,
        owner: Owner {
            principal: Some("alice".to_owned()),
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

/// The ADR of `format` (0 Nygard, 1 MADR, 2 log4brains) numbered `n` (log4brains ADRs
/// are dated instead): its file name and text.
fn adr(format: usize, n: usize) -> (String, String) {
    let context = "The service loses events when it restarts, and the team must choose \
                   how to keep them. ";
    match format {
        0 => (
            format!("{n:04}-decision-number-{n}.md"),
            format!(
                "# {n}. Decision number {n}\n\nDate: 2024-01-15\n\n## Status\n\nAccepted\n\n\
                 ## Context\n\n{}\n\n## Decision\n\nWe will keep them in a queue. See \
                 [the first ADR](0001-decision-number-1.md).\n\n## Consequences\n\n\
                 One more service to operate.\n",
                context.repeat(4)
            ),
        ),
        1 => (
            format!("{n:04}-decision-number-{n}.md"),
            format!(
                "---\nstatus: accepted\ndate: 2024-03-01\ndecision-makers: [Ana, Ben]\n---\n\n\
                 # Decision number {n}\n\n## Context and Problem Statement\n\n{}\n\n\
                 ## Considered Options\n\n* A queue\n* Retries\n* Nothing\n\n\
                 ## Decision Outcome\n\nChosen option: \"A queue\", because it is durable.\n\n\
                 ### Consequences\n\n* Good, because no event is lost.\n* Bad, because it \
                 costs more.\n\n### Confirmation\n\nA test restarts the service.\n",
                context.repeat(4)
            ),
        ),
        _ => (
            format!(
                "2024{:02}{:02}-decision-number-{n}.md",
                n % 12 + 1,
                n % 28 + 1
            ),
            format!(
                "# Decision number {n}\n\n- Status: draft\n- Date: 2024-01-05\n\n\
                 ## Context and Problem Statement\n\n{}\n\n## Considered Options\n\n\
                 - log4brains\n- A wiki\n\n## Decision Outcome\n\nChosen option: \
                 \"log4brains\".\n",
                context.repeat(4)
            ),
        ),
    }
}

/// One recorded run of `adr_validation` over docs/adrs, to its end; its output.
async fn validate(app: &App, plan: &Arc<Plan>, report_dir: String) -> Value {
    let mut given = Map::new();
    given.insert("folder".to_owned(), json!("docs/adrs"));
    given.insert("report_dir".to_owned(), json!(report_dir));
    // As a call's arguments are: checked, defaults filled in, absent ones null.
    let def = plan
        .def
        .as_deref()
        .expect("an installed plan keeps its definition");
    let inputs = check_inputs(def, &given).expect("the inputs fit");
    let report = app.engine().run(Arc::clone(plan), inputs, options()).await;
    assert_eq!(report.status, RunStatus::Succeeded, "{:?}", report.error);
    report.output
}

fn bench_adr_validation(c: &mut Criterion) {
    let adrs = env("BENCH_ADRS", 200) as usize;
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tasks.db");
    let workspace = dir.path().join("workspace");
    let folder = workspace.join("docs/adrs");
    std::fs::create_dir_all(&folder).unwrap();
    // The numbered ADRs are numbered without a gap, the log4brains ones among them.
    let mut numbered = 0;
    for i in 0..adrs {
        let format = i % 3;
        numbered += usize::from(format != 2);
        let (name, text) = adr(format, if format == 2 { i } else { numbered });
        std::fs::write(folder.join(name), text).unwrap();
    }
    let app = App::open(&Config::new(db.display().to_string(), workspace)).unwrap();
    let plan = Arc::clone(&app.workflows().get("adr_validation").unwrap().plan);

    // Once, checked: every ADR read, no finding; its wall time.
    let reports = AtomicUsize::new(0);
    let next_dir = || format!("bench/{}", reports.fetch_add(1, Ordering::Relaxed));
    let started = Instant::now();
    let output = rt.block_on(validate(&app, &plan, next_dir()));
    let took = started.elapsed();
    assert_eq!(output["adrs"].as_array().unwrap().len(), adrs);
    assert_eq!(output["findings"], json!([]), "{}", output["findings"]);
    eprintln!(
        "adr_validation: {adrs} ADRs in {:.0} ms, {:.2} ms per ADR",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e3 / adrs as f64
    );

    let mut group = c.benchmark_group("adr_validation");
    group.sample_size(10);
    group.throughput(Throughput::Elements(adrs as u64));
    group.bench_function(adrs.to_string(), |b| {
        b.to_async(&rt).iter(|| validate(&app, &plan, next_dir()));
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(2)).measurement_time(Duration::from_secs(20));
    targets = bench_adr_validation
}
criterion_main!(benches);
