//! A load test on loopback, bounded in time: 32 sessions at once mixing `add_task`,
//! `list_tasks` and short workflow runs. No call may fail, and every todo a call
//! acknowledged exists exactly once, with its audit row. Throughput and latency are
//! printed, never asserted: the machines are shared.

use std::collections::HashMap;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{HttpServer, call, open_session_as};

use crate::support;

const SESSIONS: usize = 32;
const LOAD_FOR: Duration = Duration::from_secs(10);

/// What one session did: the titles of the todos it was told were added, how many calls
/// it made, and how long each took.
struct Done {
    added: Vec<String>,
    latencies: Vec<Duration>,
    errors: Vec<String>,
}

fn session(server: &HttpServer, index: usize, start: &Barrier) -> Done {
    let headers = open_session_as(server, vec![]).0;
    let tag = format!("s{index}");
    let mut done = Done {
        added: Vec::new(),
        latencies: Vec::new(),
        errors: Vec::new(),
    };
    start.wait();
    let began = Instant::now();
    let mut i = 0u64;
    while began.elapsed() < LOAD_FOR {
        i += 1;
        let title = format!("{tag}-{i}");
        let (tool, arguments) = match i % 4 {
            0 => ("list_tasks", json!({"filter": {"tag": tag}})),
            1 => (
                "run_workflow",
                json!({"definition": {"nodes": {"hi": {"render": "hi {{ run.id }}"}}}}),
            ),
            _ => ("add_task", json!({"title": title, "tags": [tag]})),
        };
        let sent = Instant::now();
        let reply = server.post(&headers, &call(i, tool, arguments));
        done.latencies.push(sent.elapsed());
        let result = reply
            .messages()
            .into_iter()
            .find(|m| m["id"] == json!(i))
            .map(|m| m["result"].clone());
        match result {
            Some(result) if result["isError"] == json!(false) => {
                if tool == "add_task" {
                    assert_eq!(result["structuredContent"]["data"]["title"], json!(title));
                    done.added.push(title);
                }
            }
            _ => done
                .errors
                .push(format!("{tool}: {} {}", reply.status, reply.body)),
        }
    }
    done
}

#[test]
fn thirty_two_sessions_at_once_lose_nothing_and_fail_no_call() {
    let server = Arc::new(HttpServer::start(&["--http-max-sessions", "64"]));
    let start = Arc::new(Barrier::new(SESSIONS));
    let began = Instant::now();
    let sessions: Vec<_> = (0..SESSIONS)
        .map(|index| {
            let (server, start) = (server.clone(), start.clone());
            std::thread::spawn(move || session(&server, index, &start))
        })
        .collect();
    let done: Vec<Done> = sessions.into_iter().map(|s| s.join().unwrap()).collect();
    let elapsed = began.elapsed();

    let errors: Vec<&String> = done.iter().flat_map(|d| &d.errors).collect();
    assert!(
        errors.is_empty(),
        "{} calls failed, first: {}",
        errors.len(),
        errors[0]
    );
    let mut latencies: Vec<Duration> = done.iter().flat_map(|d| d.latencies.clone()).collect();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    eprintln!(
        "load: {} calls by {SESSIONS} sessions in {:.1} s: {:.0} calls/s, p50 {:?}, p99 {:?}",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        at(0.50),
        at(0.99)
    );

    // Every acknowledged todo is stored exactly once, with one audit row of its call.
    let mut stored: HashMap<String, usize> = HashMap::new();
    for title in support::task_titles(&server.db.path) {
        *stored.entry(title).or_default() += 1;
    }
    let mut audited: HashMap<String, usize> = HashMap::new();
    for row in support::audit_rows(&server.db.path) {
        if row.tool == "add_task" && row.outcome == "ok" {
            let args: serde_json::Value = serde_json::from_str(&row.args).unwrap();
            *audited
                .entry(args["title"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    let acknowledged: Vec<&String> = done.iter().flat_map(|d| &d.added).collect();
    assert!(!acknowledged.is_empty());
    assert_eq!(
        stored.len(),
        acknowledged.len(),
        "no todo but the acknowledged ones"
    );
    for title in acknowledged {
        assert_eq!(stored.get(title), Some(&1), "{title} is stored once");
        assert_eq!(audited.get(title), Some(&1), "{title} has its audit row");
    }
}
