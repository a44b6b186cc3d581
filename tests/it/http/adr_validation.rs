//! `adr_validation`'s ratchet through the real server over HTTP with tokens: a principal's
//! baseline is its own last run over the folder. Another principal's runs are never it, so
//! no caller can reset someone else's ratchet (a clean run of theirs taken for a baseline)
//! nor fail it (a run of theirs over a worse folder).

use serde_json::{Value, json};

use super::*;

/// Copies the fixture ADRs `corpus` into the server's workspace, `docs/adrs`.
fn with_adrs(server: &HttpServer, corpus: &str) -> std::path::PathBuf {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/adrs");
    let to = server.db.dir.path().join("workspace/docs/adrs");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(std::path::Path::new(fixtures).join(corpus)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    to
}

/// Calls `adr_validation` on docs/adrs; its envelope.
fn validate(server: &HttpServer, headers: &[String], id: u64) -> Value {
    let arguments = json!({ "folder": "docs/adrs" });
    let reply = server.post(headers, &call(id, "adr_validation", arguments));
    reply.response(id)["result"]["structuredContent"].clone()
}

#[test]
fn over_http_a_principals_adr_ratchet_is_measured_against_its_own_runs_only() {
    let server = HttpServer::start(&["--http-tokens", "{tokens}"]);
    let alice = open_session(&server, ALICE);
    let bob = open_session(&server, BOB);
    let folder = with_adrs(&server, "clean");
    let first = folder.join("0001-record-architecture-decisions.md");
    let clean = std::fs::read_to_string(&first).unwrap();

    // Alice's baseline: a clean folder.
    let run = validate(&server, &alice, 10);
    assert_eq!(run["ok"], true, "{run}");
    assert_eq!(run["data"]["output"]["ratchet"]["baseline"], Value::Null);
    let alice_baseline = run["data"]["run_id"].clone();

    // Bob validates a worse folder: his first run, so his own baseline; it passes.
    std::fs::write(&first, clean.replace("Date: 2024-01-15", "Date: soon")).unwrap();
    let run = validate(&server, &bob, 11);
    assert_eq!(run["ok"], true, "{run}");
    assert_eq!(run["data"]["output"]["ratchet"]["baseline"], Value::Null);
    // Then a clean one, which his next run compares with.
    std::fs::write(&first, &clean).unwrap();
    let run = validate(&server, &bob, 12);
    assert_eq!(run["data"]["output"]["ratchet"]["before"], 1);

    // Alice's ratchet is untouched by bob's runs: the error is new against her clean
    // baseline, and her run fails naming it.
    std::fs::write(&first, clean.replace("Date: 2024-01-15", "Date: soon")).unwrap();
    let run = validate(&server, &alice, 13);
    assert_eq!(run["ok"], false, "{run}");
    assert_eq!(run["data"]["output"]["ratchet"]["baseline"], alice_baseline);
    let verdict = run["data"]["nodes"]["verdict"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(
        verdict.contains("rose from 0 to 1") && verdict.contains("date-invalid docs/adrs/0001"),
        "{verdict}"
    );
}
