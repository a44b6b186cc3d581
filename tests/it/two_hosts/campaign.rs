//! A crash campaign, run by hand: two hosts race on one PostgreSQL database while they are
//! killed (SIGKILL) over and over, each at a random moment of its work, and started again.
//! Every run a host acknowledged finishes, and every run that exists (acknowledged or
//! not: a host may record a start and die before it answers) makes each of its todos
//! exactly once, with one audit row each, on one intact chain; but a run taken over again
//! and again from hosts that died with none of its nodes done in between, which is failed
//! on purpose (poisoned) and makes each todo at most once.
//!
//! ```sh
//! TASKS_TEST_POSTGRES=postgres://… CAMPAIGN_KILLS=500 \
//!     cargo test --locked --test it two_hosts::campaign -- --ignored --nocapture
//! ```
//!
//! `CAMPAIGN_KILLS` (default 500) is how many kills; `CAMPAIGN_SEED` seeds the moments.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_task_server::store::{Durability, Scratch, Store, TodoFilter};
use serde_json::{Value, json};

use super::{job, serve, workspace};
use crate::support::wait_until_within;

/// Starts given to a host before it is killed, at most.
const STARTS_PER_LIFE: u64 = 6;

/// SplitMix64, so that a campaign's moments can be drawn again from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One life of a host: `serve` started, given the runs `runs` one after another (each
/// start waits for its answer), and killed `after` from its start, whatever it is doing.
/// Returns the runs it acknowledged.
fn life(dir: &std::path::Path, db: &str, runs: std::ops::Range<u64>, after: Duration) -> Vec<u64> {
    let mut child = serve(
        dir,
        db,
        &["--lease", "2s"],
        &[],
        Stdio::piped(),
        Stdio::null(),
    );
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let talk = {
        let mut stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let acknowledged = Arc::clone(&acknowledged);
        std::thread::spawn(move || {
            let mut lines = stdout.lines();
            let mut send =
                |message: Value| writeln!(stdin, "{message}").and_then(|()| stdin.flush());
            let opened = send(json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": { "name": "campaign", "version": "1" } } }))
            .and_then(|()| {
                send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            });
            if opened.is_err() {
                return;
            }
            for n in runs {
                let call = json!({ "jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
                    "params": { "name": "job", "arguments": { "n": n }, "task": {} } });
                if send(call).is_err() {
                    return;
                }
                // Its answer, or the end of the host.
                loop {
                    let Some(Ok(line)) = lines.next() else { return };
                    let Ok(reply) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    if reply["id"] == json!(n + 1) {
                        if reply["result"]["task"]["taskId"].is_string() {
                            acknowledged.lock().unwrap().push(n);
                        }
                        break;
                    }
                }
            }
        })
    };
    std::thread::sleep(after);
    let _ = child.kill();
    let _ = child.wait();
    talk.join().unwrap();
    acknowledged.lock().unwrap().clone()
}

#[test]
#[ignore = "a crash campaign of minutes, run by hand (see the module's documentation)"]
fn two_hosts_killed_hundreds_of_times_lose_and_double_nothing() {
    let Some(scratch) = Scratch::postgres("two_hosts_crash_campaign") else {
        return;
    };
    let kills = env_number("CAMPAIGN_KILLS", 500);
    let seed = env_number("CAMPAIGN_SEED", 0x5eed);
    // A short wait between the two todos: a kill falls before, between or after them.
    let dir = workspace(&[("job", &job("job", "30ms", false))]);
    let db = scratch.url().to_owned();
    let store = Store::open_at(&db, Durability::Normal).unwrap();
    let started = Instant::now();

    // Two hosts at a time, each killed at a random moment of its life and started again:
    // while one dies, the other lives and takes the dead one's runs over.
    let next = Arc::new(Mutex::new(0_u64));
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let lives = kills.div_ceil(2);
    std::thread::scope(|scope| {
        for slot in 0..2 {
            let (dir, db) = (dir.path(), db.as_str());
            let (next, acknowledged) = (Arc::clone(&next), Arc::clone(&acknowledged));
            let mut rng = Rng(seed ^ slot);
            scope.spawn(move || {
                for _ in 0..lives {
                    let first = {
                        let mut next = next.lock().unwrap();
                        let first = *next;
                        *next += STARTS_PER_LIFE;
                        first
                    };
                    // From 20 ms (before the host has even opened the store) to 620 ms.
                    let after = Duration::from_millis(20 + rng.below(600));
                    let acked = life(dir, db, first..first + STARTS_PER_LIFE, after);
                    acknowledged.lock().unwrap().extend(acked);
                }
            });
        }
    });
    let given = *next.lock().unwrap();
    let acknowledged = acknowledged.lock().unwrap().clone();
    eprintln!(
        "{} kills of {} starts ({} acknowledged) in {:.1} s",
        2 * lives,
        given,
        acknowledged.len(),
        started.elapsed().as_secs_f64()
    );

    // One host left alive takes every orphaned run over and finishes it.
    let mut last = serve(
        dir.path(),
        &db,
        &["--lease", "2s"],
        &[],
        Stdio::null(),
        Stdio::null(),
    );
    wait_until_within("every run finishes", Duration::from_secs(180), || {
        store
            .list_runs(Some("running"), mcp_task_server::store::Scope::Everyone, 1)
            .unwrap()
            .is_empty()
    });
    let _ = last.kill();
    let _ = last.wait();

    let runs = store
        .list_runs(None, mcp_task_server::store::Scope::Everyone, usize::MAX)
        .unwrap();
    // A run taken over again and again from hosts that died with none of its nodes done
    // in between is failed on purpose (poisoned, `takeovers`): it makes its todos at most
    // once; every other run succeeds and makes each exactly once.
    let mut by_n = std::collections::BTreeMap::new();
    let mut poisoned = 0;
    for run in &runs {
        let n = super::input_n(&store, &run.id);
        let succeeded = match run.status.as_str() {
            "succeeded" => true,
            _ => {
                let error = store
                    .run(&run.id)
                    .unwrap()
                    .unwrap()
                    .error
                    .unwrap_or_default();
                assert!(
                    error.starts_with("run_poisoned"),
                    "run {n}: {}: {error}",
                    run.status
                );
                poisoned += 1;
                false
            }
        };
        assert!(by_n.insert(n, succeeded).is_none(), "run {n} twice");
    }
    for n in &acknowledged {
        assert!(by_n.contains_key(n), "acknowledged run {n} is lost");
    }
    let todos = store.list_todos(&TodoFilter::default()).unwrap();
    let mut made = std::collections::BTreeMap::new();
    for todo in &todos {
        *made.entry(todo.title.clone()).or_insert(0) += 1;
    }
    for (n, succeeded) in &by_n {
        for which in ["first", "second"] {
            let title = format!("job {n} {which}");
            let count = made.remove(&title).unwrap_or(0);
            match succeeded {
                true => assert_eq!(count, 1, "{title}"),
                false => assert!(count <= 1, "{title}: {count}"),
            }
        }
    }
    assert!(made.is_empty(), "todos without their run: {made:?}");
    let audit = store.audit_rows().unwrap();
    let calls = audit.iter().filter(|row| row.tool == "add_task").count();
    assert_eq!(calls, todos.len(), "one audit row per todo");
    let chain = store.verify_audit_chain().unwrap();
    assert!(chain.is_ok(), "{chain:?}");
    eprintln!(
        "{} runs finished ({poisoned} failed as poisoned), each todo at most once and twice \
         for each succeeded run ({} todos, {} add_task audit rows), chain intact; {:.1} s in all",
        by_n.len(),
        todos.len(),
        calls,
        started.elapsed().as_secs_f64()
    );
}
