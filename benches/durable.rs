//! Durable scheduling: what recording a run in SQLite adds per node, beside the in-memory
//! figure of the same run, and how long a stored 10 000-node run takes to resume.
//! Run: `cargo bench --bench durable -- --warm-up-time 2 --measurement-time 5`.
//!
//! `durable/<variant>/<shape>` runs the no-op shapes of the `engine` bench (`render = "x"`,
//! planned once, each run spawned on a two-worker runtime) with five journals:
//! - `memory`: no journal, exactly as `schedule` in the `engine` bench;
//! - `group_normal`, `group_full`: the task registry on a file database, with
//!   `synchronous = NORMAL` or `FULL`, committing as the engine does by default (one batch
//!   at each point where the run would wait, every 256 synchronous units, and at the end);
//! - `per_transition_normal`, `per_transition_full`: the same registry behind a wrapper that
//!   commits every unit change of a batch on its own, to compare against one commit per
//!   transition.
//!
//! Each variant and shape gets a fresh database in `tempfile::tempdir()`, which honours
//! `TMPDIR`: it must be on a disk, not a tmpfs, for FULL to wait for anything. The database
//! grows over the iterations (a run row, a task row per node and a node row per
//! node, never purged); its size at the end of each benchmark is printed to stderr.
//!
//! The whole suite takes about 17 minutes on two vCPUs, a third of it
//! `per_transition_normal/random/10000`; a filter narrows it, e.g. `-- group_`.
//!
//! `resume/*` works on unfinished `random/10000` runs, recorded through the journal as the
//! engine records them. The scheduler's `Run` is private to the crate, so load-and-rebuild
//! alone cannot be timed; instead:
//! - `plan_from_snapshot`: parsing the stored plan, the part of a load that grows with it;
//! - `load/half`: `Journal::load` of a run whose first half of the nodes has succeeded;
//! - `resume_cancelled/half`, `resume_cancelled/last`: `Engine::resume` of a run with half,
//!   or all but the last node, succeeded, with a cancelled token, awaited to its end: load,
//!   claim, rebuild, then the run is finalised as cancelled, which commits the nodes it never
//!   reached (5 000, or 1) and the run's end.

#[path = "support/shapes.rs"]
mod shapes;

use std::collections::HashMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use mcp_task_server::engine::actions::BoxFuture;
use mcp_task_server::engine::journal::{
    Answers, Journal, JournalError, RunBatch, RunOrigin, RunPoll, RunProgress, RunStart, StoredRun,
    ToolCall, UnitChange, UnitState,
};
use mcp_task_server::engine::observer::Event;
use mcp_task_server::engine::plan::Plan;
use mcp_task_server::engine::report::{NodeError, NodeStatus, RunStatus};
use mcp_task_server::engine::{Engine, RunOptions};
use mcp_task_server::runs::{Registry, RegistryConfig};
use mcp_task_server::store::{Durability, Store};
use mcp_task_server::todos::{ToolResult, Tools};
use shapes::{
    Shape, chain, diamond, edges, engine, fanout, node_id, plan, random, runtime, spawned_run,
};

// The allocator the binary ships with, so the figures are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Commits every unit change of a batch as a commit of its own, through the registry: what
/// the engine would cost if it committed each transition instead of grouping them.
struct PerTransition(Registry);

impl Journal for PerTransition {
    fn create(&self, start: &RunStart<'_>) -> Result<(), JournalError> {
        self.0.create(start)
    }

    /// One batch per unit, each with the batch's progress; the questions and answers go
    /// with the first, the run's end with the last, so nothing is committed before what it
    /// depends on (the journal's invariant).
    fn commit(&self, batch: &RunBatch<'_>) -> Result<(), JournalError> {
        let Some(last) = batch.units.len().checked_sub(1) else {
            return self.0.commit(batch);
        };
        for (i, &unit) in batch.units.iter().enumerate() {
            let first = i == 0;
            self.0.commit(&RunBatch {
                run_id: batch.run_id,
                units: vec![unit],
                questions: if first {
                    batch.questions.clone()
                } else {
                    Vec::new()
                },
                answers: if first {
                    batch.answers.clone()
                } else {
                    Vec::new()
                },
                progress: batch.progress,
                end: if i == last { batch.end } else { None },
                audits: if first { batch.audits } else { &[] },
            })?;
        }
        Ok(())
    }

    fn commit_tool_call(
        &self,
        batch: &RunBatch<'_>,
        call: &ToolCall<'_>,
        settle: &dyn Fn(&ToolResult) -> UnitState,
    ) -> Result<(ToolResult, UnitState), JournalError> {
        self.0.commit_tool_call(batch, call, settle)
    }

    fn commit_placing(
        &self,
        batch: &RunBatch<'_>,
        place: &mut dyn FnMut(),
    ) -> Result<(), JournalError> {
        self.0.commit_placing(batch, place)
    }

    fn load(&self, run_id: &str) -> Result<StoredRun, JournalError> {
        self.0.load(run_id)
    }

    fn claim(&self, run_id: &str, answers: Option<Answers>) -> Result<(), JournalError> {
        self.0.claim(run_id, answers)
    }

    fn poll(&self, run_id: &str) -> Result<Option<RunPoll>, JournalError> {
        self.0.poll(run_id)
    }

    fn request_cancel(&self, run_id: &str) -> Result<bool, JournalError> {
        Journal::request_cancel(&self.0, run_id)
    }

    fn running_runs_of(&self, principal: &str) -> Result<u64, JournalError> {
        self.0.running_runs_of(principal)
    }

    fn answer(
        &self,
        run_id: &str,
        node: &str,
        instance: Option<usize>,
        key: &str,
    ) -> BoxFuture<Result<Value, NodeError>> {
        self.0.answer(run_id, node, instance, key)
    }
}

#[derive(Clone, Copy)]
enum Variant {
    Memory,
    Group(Durability),
    PerTransition(Durability),
}

const VARIANTS: [Variant; 5] = [
    Variant::Memory,
    Variant::Group(Durability::Normal),
    Variant::Group(Durability::Full),
    Variant::PerTransition(Durability::Normal),
    Variant::PerTransition(Durability::Full),
];

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Memory => "memory",
            Variant::Group(Durability::Normal) => "group_normal",
            Variant::Group(Durability::Full) => "group_full",
            Variant::PerTransition(Durability::Normal) => "per_transition_normal",
            Variant::PerTransition(Durability::Full) => "per_transition_full",
        }
    }

    /// The engine of this variant; a durable one keeps its database in `dir`.
    fn engine(self, dir: &Path) -> Engine {
        let (durability, per_transition) = match self {
            Variant::Memory => return engine(),
            Variant::Group(durability) => (durability, false),
            Variant::PerTransition(durability) => (durability, true),
        };
        let (tools, registry) = registry(dir, durability);
        let journal: Arc<dyn Journal> = match per_transition {
            true => Arc::new(PerTransition(registry)),
            false => Arc::new(registry),
        };
        Engine::new(tools, dir).with_journal(journal)
    }

    /// A commit per unit makes one run last from half a second (1 000 nodes) to half a
    /// minute (`random/10000`) on the machine these figures come from, so criterion's
    /// minimum of 10 samples is already long enough.
    fn sample_size(self) -> usize {
        match self {
            Variant::PerTransition(_) => 10,
            _ => 100,
        }
    }

    /// `per_transition_full` on `random/10000`: one run of `per_transition_normal` there
    /// already takes 20 to 35 s, and FULL adds a disk wait per commit, so that benchmark
    /// alone would take over five minutes. The 1 000-node shapes show what FULL adds.
    fn skips(self, nodes: usize) -> bool {
        matches!(self, Variant::PerTransition(Durability::Full)) && nodes > 1_001
    }
}

/// A file database in `dir`, its tools, and the registry on it.
fn registry(dir: &Path, durability: Durability) -> (Tools, Registry) {
    let store = Store::open_with(dir.join("bench.db"), durability).expect("file store");
    let tools = Tools::new(store.clone());
    let registry = Registry::new(store, tools.clone(), RegistryConfig::default());
    (tools, registry)
}

/// The database's size with its write-ahead log, in MiB.
fn db_mib(dir: &Path) -> f64 {
    let bytes: u64 = ["bench.db", "bench.db-wal"]
        .iter()
        .filter_map(|name| std::fs::metadata(dir.join(name)).ok())
        .map(|meta| meta.len())
        .sum();
    bytes as f64 / (1024.0 * 1024.0)
}

fn bench_durable(c: &mut Criterion) {
    let rt = runtime();
    let shapes: [(&str, &str, Shape); 4] = [
        ("chain", "1000", chain(1000)),
        ("fanout", "1000", fanout(1000)),
        ("diamond", "10x100", diamond(10, 100)),
        ("random", "10000", random(10_000, 0x5eed)),
    ];
    // Shape by shape, all variants of a shape one after the other, so that the figures
    // compared side by side are measured as close in time as possible.
    let mut group = c.benchmark_group("durable");
    for (kind, size, shape) in shapes {
        let plan = plan(kind, &shape);
        let nodes = shape.len();
        eprintln!(
            "durable/*/{kind}/{size}: {nodes} nodes, {} edges",
            edges(&shape)
        );
        group.throughput(Throughput::Elements(nodes as u64));
        for variant in VARIANTS {
            let id = BenchmarkId::new(variant.name(), format!("{kind}/{size}"));
            if variant.skips(nodes) {
                eprintln!("durable/{}/{kind}/{size}: skipped", variant.name());
                continue;
            }
            let dir = tempfile::tempdir().expect("temporary folder");
            let engine = variant.engine(dir.path());
            // Checked on the first call only: criterion calls this closure once per sample,
            // and not at all when its filter leaves the benchmark out (a check run of
            // `per_transition_normal/random/10000` alone takes over half a minute).
            let mut checked = false;
            group.sample_size(variant.sample_size());
            group.bench_function(id, |b| {
                if !checked {
                    let check = rt.block_on(engine.run(
                        Arc::clone(&plan),
                        Map::new(),
                        RunOptions::default(),
                    ));
                    assert_eq!(check.status, RunStatus::Succeeded, "{kind}/{size} succeeds");
                    assert_eq!(check.nodes.len(), nodes);
                    checked = true;
                }
                b.to_async(&rt).iter(|| {
                    let engine = engine.clone();
                    let plan = Arc::clone(&plan);
                    async move { black_box(spawned_run(engine, plan).await) }
                });
            });
            if checked && !matches!(variant, Variant::Memory) {
                eprintln!(
                    "durable/{}/{kind}/{size}: database {:.1} MiB at the end",
                    variant.name(),
                    db_mib(dir.path())
                );
            }
        }
    }
    group.finish();
}

/// Records an unfinished run of `plan` whose nodes `0..done` of the shape have succeeded,
/// with `states` (one per node, as the engine wrote them), through the journal as the
/// engine would. Parents come before their children in a shape, so the succeeded prefix is
/// a state the engine can reach.
fn store_unfinished(
    registry: &Registry,
    plan: &Plan,
    names: &[String],
    states: &[UnitState],
    done: usize,
    run_id: &str,
) {
    let inputs = Map::new();
    registry
        .create(&RunStart {
            run_id,
            plan,
            inputs: &inputs,
            origin: RunOrigin::Cli,
            answers: Answers::Nobody,
            deadline_ms: None,
            retry_of: None,
            idempotency: None,
            task_label: None,
            audit: None,
            owner: &mcp_task_server::store::Owner::default(),
            created_ms: mcp_task_server::clock::now_ms(),
            parent: None,
            trace: None,
        })
        .expect("run recorded");
    let units = (0..done)
        .map(|i| UnitChange {
            node: &names[i],
            index: i,
            instance: None,
            state: &states[i],
        })
        .collect();
    registry
        .commit(&RunBatch {
            run_id,
            units,
            questions: Vec::new(),
            answers: Vec::new(),
            progress: RunProgress {
                percent: u8::try_from(100 * done / names.len()).expect("a percentage"),
                done,
                total: names.len(),
                current: done.checked_sub(1).map(|i| names[i].as_str()),
                asking: false,
                iteration: None,
            },
            end: None,
            audits: &[],
        })
        .expect("states committed");
}

fn bench_resume(c: &mut Criterion) {
    let rt = runtime();
    let shape = random(10_000, 0x5eed);
    let nodes = shape.len();
    let plan = plan("random", &shape);
    let names: Vec<String> = (0..nodes).map(node_id).collect();
    let dir = tempfile::tempdir().expect("temporary folder");
    let (tools, registry) = registry(dir.path(), Durability::Normal);
    let registry = Arc::new(registry);
    let journal: Arc<dyn Journal> = registry.clone();
    let engine = Engine::new(tools, dir.path()).with_journal(journal);

    // One finished run gives the states the engine itself stores for a succeeded node.
    let finished = rt.block_on(engine.run(Arc::clone(&plan), Map::new(), RunOptions::default()));
    assert_eq!(finished.status, RunStatus::Succeeded);
    let mut stored: HashMap<String, UnitState> = (registry.load(&finished.run_id))
        .expect("finished run loads")
        .units
        .into_iter()
        .map(|(node, _, state)| (node, state))
        .collect();
    let states: Vec<UnitState> = (names.iter())
        .map(|name| stored.remove(name).expect("every node stored"))
        .collect();

    let mut runs = 0;
    let mut fresh_run = |done: usize| {
        runs += 1;
        // A UUID, as the engine gives its runs: the registry derives task ids from it.
        let run_id = uuid::Uuid::new_v4().to_string();
        store_unfinished(&registry, &plan, &names, &states, done, &run_id);
        let cancel = CancellationToken::new();
        cancel.cancel();
        (run_id, cancel)
    };
    let resume = |engine: &Engine, (run_id, cancel): (String, CancellationToken)| {
        let handle = engine
            .resume(
                &run_id,
                RunOptions {
                    cancel,
                    ..RunOptions::default()
                },
            )
            .expect("the stored run resumes");
        async move { handle.join.await.expect("run task") }
    };

    let half = nodes / 2;
    let run = fresh_run(half);
    // `resume` spawns the run, so it must be called on the runtime.
    let check = rt.block_on(async { resume(&engine, run).await });
    assert_eq!(check.status, RunStatus::Cancelled);
    let cancelled = (check.nodes.values())
        .filter(|node| node.status == NodeStatus::Cancelled)
        .count();
    assert_eq!(cancelled, nodes - half, "the unfinished half is cancelled");

    let mut group = c.benchmark_group("resume");
    group.throughput(Throughput::Elements(nodes as u64));
    // What `load` spends on the plan: the snapshot is the whole 10 000-node plan as JSON.
    let snapshot = plan.snapshot();
    group.bench_function(BenchmarkId::new("plan_from_snapshot", nodes), |b| {
        b.iter(|| Plan::from_snapshot(black_box(&snapshot.text)).expect("snapshot parses"));
    });
    let (loaded, _) = fresh_run(half);
    group.bench_function(BenchmarkId::new("load/half", nodes), |b| {
        b.iter(|| registry.load(black_box(&loaded)).expect("run loads"));
    });
    // Each resume finishes its run, so every iteration gets a fresh stored one, untimed.
    // Recording it takes longer than the resume itself: 30 samples keep the group short.
    group.sample_size(30);
    group.bench_function(BenchmarkId::new("resume_cancelled/half", nodes), |b| {
        b.to_async(&rt).iter_batched(
            || fresh_run(half),
            |run| resume(&engine, run),
            BatchSize::PerIteration,
        );
    });
    // All but the last node succeeded: the most there is to load and rebuild, and almost
    // nothing for the cancel to commit.
    group.bench_function(BenchmarkId::new("resume_cancelled/last", nodes), |b| {
        b.to_async(&rt).iter_batched(
            || fresh_run(nodes - 1),
            |run| resume(&engine, run),
            BatchSize::PerIteration,
        );
    });
    // Load, claim and rebuild alone: the time from `resume` to the run's first event, which
    // the rebuilt run emits before it decides anything. The stored run is recorded, and the
    // resumed one cancelled and finished, outside the timed part.
    group.bench_function(BenchmarkId::new("load_and_rebuild/half", nodes), |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            let runs: Vec<_> = (0..iters).map(|_| fresh_run(half).0).collect();
            let engine = engine.clone();
            async move {
                for run_id in runs {
                    let (started, rebuilt) = tokio::sync::oneshot::channel::<()>();
                    let started = std::sync::Mutex::new(Some(started));
                    let observer = move |event: &Event<'_>| {
                        if matches!(event, Event::RunStarted { .. })
                            && let Some(tx) = started.lock().unwrap().take()
                        {
                            let _ = tx.send(());
                        }
                    };
                    let options = RunOptions {
                        observer: Some(Arc::new(observer)),
                        ..RunOptions::default()
                    };
                    let begun = std::time::Instant::now();
                    let handle = engine.resume(&run_id, options).expect("resumes");
                    rebuilt.await.expect("the run starts");
                    total += begun.elapsed();
                    handle.cancel.cancel();
                    black_box(handle.join.await.expect("run task"));
                }
                total
            }
        });
    });
    group.finish();
    eprintln!(
        "resume: {runs} stored runs, database {:.1} MiB at the end",
        db_mib(dir.path())
    );
}

criterion_group!(benches, bench_durable, bench_resume);
criterion_main!(benches);
