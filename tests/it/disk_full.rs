//! Disk full during concurrent calls, with a real limit: the server runs with
//! `RLIMIT_FSIZE` set, so that its writes past the limit fail (`EFBIG`, SIGXFSZ ignored)
//! while 64 `add_task` calls share group commits. Every call is answered, every todo in
//! the store was acknowledged, and every acknowledged todo is there exactly once, with its
//! audit row: a client that retries what failed never doubles a todo.

use std::collections::HashMap;

use mcp_task_server::store::{Store, TodoFilter};
use serde_json::json;

use crate::support;
use crate::support::{TempDb, envelope, server_command, try_call};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_full_during_64_concurrent_add_task_calls_acknowledges_exactly_what_is_kept() {
    let temp = TempDb::new();
    drop(Store::open(&temp.path).expect("a fresh database"));
    let size = std::fs::metadata(&temp.path).unwrap().len();
    // Room for some commits in the write-ahead log, not for many rounds of long todos.
    let limit = (size + 96 * 1024) as libc::rlim_t;
    let mut command = server_command(temp.dir.path());
    command.arg("--db").arg(&temp.path);
    // SAFETY: between fork and exec, only async-signal-safe calls (`signal`, `setrlimit`).
    unsafe {
        command.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let rlimit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rlimit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let server = support::Server::spawn(command, temp.path.clone()).await;

    // Rounds of 64 concurrent calls, until the limit is reached and one more round after.
    let mut acknowledged = Vec::new();
    let mut failed = 0;
    let mut full_rounds = 0;
    for round in 0..40 {
        let titles: Vec<String> = (0..64)
            .map(|i| format!("{round:02}.{i:02} {}", "x".repeat(190)))
            .collect();
        let answers = futures::future::join_all(
            titles
                .iter()
                .map(|title| try_call(&server.client, "add_task", json!({ "title": title }))),
        )
        .await;
        let failed_before = failed;
        for (title, answer) in titles.iter().zip(answers) {
            let answer = answer.unwrap_or_else(|e| panic!("call {title:.5} got no answer: {e}"));
            let envelope = envelope(&answer);
            if envelope["ok"] == true {
                assert_eq!(envelope["data"]["title"], title.as_str());
                acknowledged.push(title.clone());
            } else {
                assert_eq!(envelope["error"]["code"], "internal_error", "{envelope}");
                failed += 1;
            }
        }
        if failed > failed_before {
            full_rounds += 1;
            if full_rounds == 2 {
                break;
            }
        }
    }
    let stderr = server.stderr();
    drop(server.stop().await);
    assert!(
        !acknowledged.is_empty() && failed > 0,
        "the limit must let some calls through and refuse others \
         ({} acknowledged, {failed} failed); stderr:\n{stderr}",
        acknowledged.len()
    );

    let store = Store::open(&temp.path).expect("the database opens without the limit");
    let mut kept: HashMap<String, usize> = HashMap::new();
    for todo in store.list_todos(&TodoFilter::default()).unwrap() {
        *kept.entry(todo.title).or_default() += 1;
    }
    let mut audited: HashMap<String, usize> = HashMap::new();
    for row in store.audit_rows().unwrap() {
        let args: serde_json::Value = serde_json::from_str(&row.args).unwrap();
        if row.outcome == "ok" {
            *audited
                .entry(args["title"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    for title in kept.keys() {
        assert!(
            acknowledged.contains(title),
            "todo {title:.2} kept but never acknowledged"
        );
    }
    for title in &acknowledged {
        assert_eq!(
            kept.get(title),
            Some(&1),
            "acknowledged todo {title:.2} kept once"
        );
        assert_eq!(
            audited.get(title),
            Some(&1),
            "acknowledged todo {title:.2} audited once"
        );
    }
    assert_eq!(
        audited.len(),
        acknowledged.len(),
        "no audit row without its todo"
    );
    eprintln!("{} acknowledged, {failed} refused", acknowledged.len());
    assert!(store.verify_audit_chain().unwrap().is_ok());
}
