//! A sampled result is fenced: a host whose run was taken over while it waited for its
//! client's model records neither the model's answer nor its audit row once the answer
//! comes.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use mcp_task_server::store::{Durability, Scope, Scratch, Store};
use serde_json::{Value, json};

use super::{serve, stop, workspace};
use crate::support::wait_until_within;

/// One question to the client's model.
const SAMPLED: &str = r#"
name = "sampled"
description = "Asks the model."
expose_as_tool = true

[nodes.ask]
sample = { prompt = "Say something." }
"#;

#[test]
fn a_host_whose_run_was_taken_over_records_no_sampled_answer_nor_its_audit_row() {
    let Some(scratch) = Scratch::postgres("two_hosts_sampled") else {
        return;
    };
    let dir = workspace(&[("sampled", SAMPLED)]);
    let store = Store::open_at(scratch.url(), Durability::Normal).unwrap();
    let log = dir.path().join("a.log");
    let file = std::fs::File::create(&log).unwrap();
    let lease = ["--lease", "1s"];
    let mut a = serve(dir.path(), scratch.url(), &lease, &[], Stdio::piped(), file);
    let mut replies = BufReader::new(a.stdout.take().unwrap()).lines();
    let mut stdin = a.stdin.take().unwrap();
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": { "sampling": {} },
        "clientInfo": { "name": "two-hosts", "version": "1" } } }),
    );
    send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    send(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "sampled", "arguments": {} } }));
    let asked = loop {
        let line = replies.next().expect("a request for a sample").unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["method"] == "sampling/createMessage" {
            break message;
        }
    };

    // Another host, taking A for dead, takes the run over while the model thinks.
    let runs = store
        .list_runs(Some("running"), Scope::Everyone, 10)
        .unwrap();
    let [run] = &runs[..] else {
        panic!("one run: {runs:?}")
    };
    let held = store.run(&run.id).unwrap().unwrap().lease_owner.unwrap();
    assert!(
        store
            .claim_run(&run.id, "another-host", 600_000, Some(&held), None)
            .unwrap()
    );
    send(json!({ "jsonrpc": "2.0", "id": asked["id"], "result": {
        "role": "assistant", "model": "test-model", "stopReason": "endTurn",
        "content": { "type": "text", "text": "Something." } } }));
    wait_until_within(
        "A's journal refuses the run",
        Duration::from_secs(30),
        || std::fs::read_to_string(&log).is_ok_and(|log| log.contains("be saved")),
    );
    std::thread::sleep(Duration::from_millis(500));
    stop(a);

    let audit = store.audit_rows().unwrap();
    assert!(
        audit.iter().all(|r| r.tool != "answer"),
        "the answer's audit row landed: {audit:?}"
    );
    let questions = store.questions(&run.id).unwrap();
    assert!(
        questions.iter().all(|q| q.answer.is_none()),
        "the answer landed: {questions:?}"
    );
    let nodes = store.nodes(&run.id).unwrap();
    assert!(
        nodes.iter().all(|n| n.status != "succeeded"),
        "the node's record landed: {nodes:?}"
    );
    assert_eq!(
        store.lease_owner(&run.id).unwrap(),
        Some(Some("another-host".to_owned()))
    );
}
