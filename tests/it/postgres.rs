//! What PostgreSQL itself must guarantee, beyond the behaviour both backends share
//! (`store.rs` and the other modules that run on both): the audit log and finished tasks
//! are kept by the database whoever writes, and schemas are versioned.
//!
//! Each test skips, saying so, where `TASKS_TEST_POSTGRES` names no server.

use mcp_task_server::store::{
    AuditEntry, AuditOutcome, Durability, NewTodo, Scratch, Store, StoreError, TodoFilter,
};

use crate::support::BIN;

fn scratch(test: &str) -> Option<(Scratch, Store)> {
    let scratch = Scratch::postgres(test)?;
    let store = Store::open_at(scratch.url(), Durability::Normal).expect("the schema opens");
    Some((scratch, store))
}

#[test]
fn the_audit_log_refuses_update_delete_and_truncate_from_any_client() {
    let Some((scratch, store)) = scratch("the_audit_log_refuses_update_delete_and_truncate") else {
        return;
    };
    store
        .append_audit(&AuditEntry {
            tool: "add_task",
            args: "{}",
            outcome: AuditOutcome::Rejected,
            run_id: None,
            node_id: None,
            principal: None,
        })
        .unwrap();
    for sql in [
        "UPDATE audit_log SET outcome = 'ok'",
        "DELETE FROM audit_log",
        "TRUNCATE audit_log",
    ] {
        let error = scratch.execute(sql).expect_err(sql);
        assert!(error.contains("append-only"), "{sql}: {error}");
    }
    let rows = store.audit_rows().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].outcome, "rejected");
}

#[test]
fn a_newer_schema_version_fails_to_open_with_a_clear_error() {
    let Some((scratch, store)) = scratch("a_newer_schema_version_fails_to_open") else {
        return;
    };
    let current = store.schema_version().unwrap();
    drop(store);
    scratch
        .execute(&format!(
            "INSERT INTO schema_migrations (version) VALUES ({})",
            current + 1
        ))
        .unwrap();
    match Store::open_at(scratch.url(), Durability::Normal) {
        Err(StoreError::SchemaTooNew { found, supported }) => {
            assert_eq!((found, supported), (current + 1, current));
        }
        Err(other) => panic!("expected SchemaTooNew, got {other}"),
        Ok(_) => panic!("a schema newer than this build must not open"),
    }
}

#[test]
fn processes_opening_a_fresh_schema_at_once_all_migrate_it_safely() {
    let Some(scratch) = Scratch::postgres("processes_opening_a_fresh_schema_at_once") else {
        return;
    };
    let url = scratch.url().to_owned();
    let openers: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || Store::open_at(&url, Durability::Normal).map(drop))
        })
        .collect();
    for opener in openers {
        opener
            .join()
            .unwrap()
            .expect("every opener finds a migrated schema");
    }
    let store = Store::open_at(&url, Durability::Normal).unwrap();
    store
        .insert_todo(&NewTodo {
            title: "after".into(),
            ..NewTodo::default()
        })
        .unwrap();
    assert_eq!(store.list_todos(&Default::default()).unwrap().len(), 1);
}

#[test]
fn an_unreachable_server_is_a_clear_error_that_names_it_without_the_password() {
    // Port 1 on loopback: nothing listens there.
    let url = "postgres://someone:secret-password@127.0.0.1:1/tasks";
    let error = match Store::open_at(url, Durability::Normal) {
        Err(error) => error.to_string(),
        Ok(_) => panic!("nothing listens on port 1"),
    };
    assert!(
        error.contains("cannot reach PostgreSQL at 127.0.0.1:1/tasks"),
        "{error}"
    );
    assert!(!error.contains("secret-password"), "{error}");
}

/// A run of one node, `ask`, started over MCP, whose lease `host-a` holds for an hour.
fn new_run(id: &str) -> mcp_task_server::store::NewRun<'_> {
    mcp_task_server::store::NewRun {
        id,
        workflow: "w",
        snapshot: "{}",
        plan_hash: "h",
        inputs: "{}",
        node_ids: "[\"ask\"]",
        nodes: 1,
        origin: "mcp",
        answers: "parked",
        deadline_ms: None,
        lease_owner: "host-a",
        lease_ms: 3_600_000,
        retry_of: None,
        idempotency: None,
        principal: None,
        session: None,
        parent: None,
        trace_parent: None,
        trace_link: None,
    }
}

/// A task's timing in these tests.
const TIMING: mcp_task_server::store::TaskTiming = mcp_task_server::store::TaskTiming {
    ttl_ms: 60_000,
    poll_interval_ms: 1000,
};

/// A run (`new_run`) whose lease `host-a` holds, with its task `working` and its node's
/// question asked.
fn held_run(store: &Store, id: &str) -> i64 {
    let (run, timing) = (new_run(id), TIMING);
    store
        .try_transaction(|tx| {
            let key = tx.insert_run(&run)?;
            tx.insert_run_task(key, 0, timing, "0/1", None)?;
            tx.ask(key, 0, -1, "q1", "{}")?;
            Ok(key)
        })
        .unwrap()
}

fn audit_entry(tool: &str) -> AuditEntry<'_> {
    AuditEntry {
        tool,
        args: "{}",
        outcome: AuditOutcome::Ok,
        run_id: None,
        node_id: None,
        principal: None,
    }
}

/// A fence whose run's key the host knows goes out with the rest of its batch, unanswered
/// until the commit. Another host holding the run by then aborts the whole transaction:
/// the batch's task update and audit row are not kept, and the error is the lost lease.
#[test]
fn a_batch_whose_fence_goes_out_with_its_commit_keeps_nothing_once_another_host_holds_the_run() {
    let Some((scratch, host_a)) = scratch("a_fence_sent_with_its_commit") else {
        return;
    };
    let host_b = Store::open_at(scratch.url(), Durability::Normal).unwrap();
    let key = held_run(&host_a, "r1");
    // A first fence, answered on its own: host A knows the run's key from then on.
    host_a
        .try_transaction(|tx| tx.fence("r1", "host-a", 3_600_000, false).map(drop))
        .unwrap();
    assert!(
        host_b
            .claim_run("r1", "host-b", 3_600_000, Some("host-a"), None)
            .unwrap()
    );
    let audit_rows = host_a.audit_rows().unwrap().len();
    let outcome = host_a.try_transaction(|tx| {
        tx.fence("r1", "host-a", 3_600_000, true)?;
        tx.update_run_task(
            key,
            "input_required",
            "written by a host without the lease",
            50,
            None,
            None,
        )?;
        tx.append_audit(&audit_entry("after_the_lease"))?;
        Ok(())
    });
    assert!(
        matches!(&outcome, Err(StoreError::LeaseLost { run_id }) if run_id == "r1"),
        "{outcome:?}"
    );
    assert_eq!(host_a.audit_rows().unwrap().len(), audit_rows);
    let task = host_b.run_task("r1").unwrap().unwrap();
    assert_eq!((task.status.as_str(), task.progress), ("working", 0));
    assert_eq!(
        host_b.lease_owner("r1").unwrap(),
        Some(Some("host-b".to_owned()))
    );
    // The connection is clean again: the host's next transaction commits.
    host_a.append_audit(&audit_entry("next")).unwrap();
    assert!(host_a.verify_audit_chain().unwrap().is_ok());
}

/// A statement nobody waits for fails at the commit it went out with: the transaction
/// keeps nothing, not even what was written and answered before it, and says why.
#[test]
fn a_new_run_whose_id_is_taken_is_refused_at_its_commit_with_all_its_transaction_wrote() {
    use mcp_task_server::store::NewRunTask;
    let Some((_scratch, store)) = scratch("a_queued_statement_that_fails") else {
        return;
    };
    held_run(&store, "r1");
    let run = new_run("r1");
    let task = NewRunTask {
        created_ms: 0,
        timing: TIMING,
        message: "0/1",
        label: None,
    };
    let audit_rows = store.audit_rows().unwrap().len();
    let outcome = store.try_transaction(|tx| {
        let todo = tx.insert_todo(&NewTodo {
            title: "made, then undone".into(),
            due: None,
            tags: Vec::new(),
        })?;
        tx.insert_run_and_task(&run, &task)?;
        tx.append_audit(&audit_entry("start"))?;
        Ok(todo)
    });
    let error = outcome.expect_err("the run's id is taken").to_string();
    assert!(error.contains("23505"), "a unique violation: {error}");
    assert!(store.list_todos(&TodoFilter::default()).unwrap().is_empty());
    assert_eq!(store.audit_rows().unwrap().len(), audit_rows);
    store.append_audit(&audit_entry("next")).unwrap();
    assert!(store.verify_audit_chain().unwrap().is_ok());
}

/// `RUNS` batches at once, each on its own thread, fencing its run `r{n}`, updating its
/// task and appending an audit row named `tool`: their outcomes, in run order.
fn batches_at_once(store: &Store, keys: &[i64], tool: &str) -> Vec<Result<(), StoreError>> {
    let start = std::sync::Barrier::new(keys.len());
    std::thread::scope(|scope| {
        let batches: Vec<_> = (keys.iter().enumerate())
            .map(|(n, &key)| {
                let start = &start;
                scope.spawn(move || {
                    let run = format!("r{n}");
                    start.wait();
                    store.shared(|tx| {
                        tx.fence(&run, "host-a", 3_600_000, true)?;
                        tx.update_run_task(key, "input_required", tool, 50, None, None)?;
                        tx.append_audit(&AuditEntry {
                            run_id: Some(&run),
                            ..audit_entry(tool)
                        })
                    })
                })
            })
            .collect();
        batches.into_iter().map(|b| b.join().unwrap()).collect()
    })
}

/// The batches of many runs ready at once share transactions (the rows one transaction
/// inserts carry its id, `xmin`), each still fenced by its own run's lease: the batch of a
/// run another host took keeps nothing, and every other batch keeps all it wrote.
#[test]
fn batches_of_many_runs_share_commits_and_one_that_lost_its_lease_spoils_none_of_the_others() {
    const RUNS: usize = 48;
    let Some((scratch, host_a)) = scratch("batches_share_commits") else {
        return;
    };
    let host_b = Store::open_at(scratch.url(), Durability::Normal).unwrap();
    let keys: Vec<i64> = (0..RUNS)
        .map(|n| held_run(&host_a, &format!("r{n}")))
        .collect();

    let outcomes = batches_at_once(&host_a, &keys, "shared");
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let transactions = scratch
        .count("SELECT count(DISTINCT xmin::text) FROM audit_log WHERE tool = 'shared'")
        .unwrap();
    assert!(
        transactions < RUNS as i64,
        "{RUNS} batches in {transactions} transactions: none shared"
    );

    assert!(
        host_b
            .claim_run("r7", "host-b", 3_600_000, Some("host-a"), None)
            .unwrap()
    );
    let outcomes = batches_at_once(&host_a, &keys, "after_r7_was_taken");
    for (n, outcome) in outcomes.iter().enumerate() {
        let task = host_b.run_task(&format!("r{n}")).unwrap().unwrap();
        match n {
            7 => {
                assert!(
                    matches!(outcome, Err(StoreError::LeaseLost { run_id }) if run_id == "r7"),
                    "{outcome:?}"
                );
                assert_eq!(task.status_message.as_deref(), Some("shared"));
            }
            _ => {
                assert!(outcome.is_ok(), "run {n}: {outcome:?}");
                assert_eq!(task.status_message.as_deref(), Some("after_r7_was_taken"));
            }
        }
    }
    let rows = host_a.audit_rows().unwrap();
    let after: Vec<_> = (rows.iter())
        .filter(|row| row.tool == "after_r7_was_taken")
        .collect();
    assert_eq!(after.len(), RUNS - 1);
    assert!(after.iter().all(|row| row.run_id.as_deref() != Some("r7")));
    assert!(host_a.verify_audit_chain().unwrap().is_ok());
}

/// Another host hears of a shared commit once, however many runs' batches it carries: the
/// triggers' notifications are per statement with a fixed payload, and PostgreSQL folds a
/// transaction's equal notifications into one, so that the global lock a `NOTIFY` takes at
/// commit is taken once per committed batch, not once per run.
#[test]
fn a_shared_commit_of_many_runs_batches_tells_another_host_once() {
    const RUNS: usize = 48;
    let Some((scratch, host_a)) = scratch("shared_commit_told_once") else {
        return;
    };
    let keys: Vec<i64> = (0..RUNS)
        .map(|n| held_run(&host_a, &format!("r{n}")))
        .collect();
    // Opened after the runs were made: it listens before reading its first stamp, so it
    // is told of nothing before that stamp.
    let host_b = Store::open_at(scratch.url(), Durability::Normal).unwrap();
    let stamp = |store: &Store| -> u64 { store.change_stamp().unwrap().parse().unwrap() };
    let before = stamp(&host_b);
    let cancelled = host_b.wakes().cancelled.notified();

    let outcomes = batches_at_once(&host_a, &keys, "told_once");
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let transactions = scratch
        .count("SELECT count(DISTINCT xmin::text) FROM audit_log WHERE tool = 'told_once'")
        .unwrap() as u64;
    assert!(
        transactions < RUNS as u64,
        "{RUNS} batches in {transactions} transactions: none shared"
    );
    // A last commit, which host b hears after every one before it (a listener is told of
    // commits in their order): a cancel, then its change.
    assert!(host_a.request_cancel("r0").unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(woken("the last commit's cancel", cancelled));
    let expected = before + transactions + 1;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stamp(&host_b) < expected && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(
        stamp(&host_b) - before,
        transactions + 1,
        "changes heard for {transactions} shared commits and the last one"
    );
}

/// A takeover claims its runs in batches, one statement each: only runs whose lease is
/// free, ran out or is held by an owner known to be dead, at most as many as asked,
/// oldest first; a live owner's runs stay its own.
#[test]
fn orphaned_runs_are_claimed_in_batches_and_a_live_owners_runs_are_not() {
    let Some((_scratch, store)) = scratch("orphans_claimed_in_batches") else {
        return;
    };
    let runs: Vec<String> = (0..5).map(|n| format!("r{n}")).collect();
    for run in &runs {
        held_run(&store, run);
    }
    for run in ["r1", "r2", "r3"] {
        assert!(store.release_lease(run, "host-a").unwrap());
    }
    let claim = |gone: &[String]| store.claim_runs(&runs, "host-b", 60_000, gone, 2).unwrap();
    assert_eq!(claim(&[]), ["r1", "r2"]);
    assert_eq!(claim(&[]), ["r3"]);
    assert!(claim(&[]).is_empty(), "host-a lives: its runs stay its own");
    assert_eq!(claim(&["host-a".to_owned()]), ["r0", "r4"]);
    for run in &runs {
        assert_eq!(
            store.lease_owner(run).unwrap(),
            Some(Some("host-b".to_owned()))
        );
    }
}

/// Waits for `notified` for at most 10 s: a wake-up that never comes fails the test.
async fn woken(what: &str, notified: impl std::future::Future<Output = ()>) {
    tokio::time::timeout(std::time::Duration::from_secs(10), notified)
        .await
        .unwrap_or_else(|_| panic!("no wake-up for {what}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_hosts_answer_cancel_release_and_task_change_wake_this_host() {
    let Some((scratch, host_a)) = scratch("another_hosts_changes_wake_this_host") else {
        return;
    };
    let host_b = Store::open_at(scratch.url(), Durability::Normal).unwrap();
    let key = held_run(&host_a, "r1");
    // An open store listens: it hears every change made after it opened.
    let wakes = host_a.wakes();

    let answered = wakes.answered.notified();
    assert!(
        host_b
            .answer("r1", 0, -1, "q1", Ok("{\"ok\":true}"))
            .unwrap()
    );
    woken("an answer", answered).await;

    let task = wakes.tasks.notified();
    host_b
        .transaction(|tx| tx.update_run_task(key, "input_required", "asking", 0, None, None))
        .unwrap()
        .unwrap();
    woken("a task's new status", task).await;

    let cancelled = wakes.cancelled.notified();
    assert!(host_b.request_cancel("r1").unwrap());
    woken("a cancel", cancelled).await;

    let released = wakes.released.notified();
    assert_eq!(host_b.release_leases("host-a").unwrap(), 1);
    woken("leases given up", released).await;
}

/// A host stalled inside a transaction, its connection still open (a stopped process, a
/// paused machine, a host cut off), holds its run's row locked, and claims skip locked
/// rows. PostgreSQL ends such a session after a few seconds: the run can then be taken
/// over, and nothing the stalled transaction wrote is kept.
#[test]
fn a_host_stalled_inside_a_transaction_loses_it_and_its_run_can_be_taken_over() {
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    let Some((scratch, host_a)) = scratch("a_host_stalled_inside_a_transaction") else {
        return;
    };
    let host_b = Store::open_at(scratch.url(), Durability::Normal).unwrap();
    held_run(&host_a, "r1");
    let (locked_tx, locked) = mpsc::channel();
    let (resume, stalled) = mpsc::channel::<()>();
    let host_a = std::thread::spawn(move || {
        let mut first = true;
        host_a.try_transaction(|tx| {
            // A lease of a day, which the claim below must not find kept.
            tx.fence("r1", "host-a", 86_400_000, false)?;
            // The transaction runs again on a new connection once the server has ended
            // the first: that one stalls no more (its fence, whose key is known by then,
            // goes out with its commit, and is refused there).
            if std::mem::take(&mut first) {
                locked_tx.send(()).unwrap();
                // No next statement until the test is done waiting.
                let _ = stalled.recv_timeout(Duration::from_secs(60));
            }
            Ok(())
        })
    });
    locked.recv().unwrap();
    let claim = || host_b.claim_run("r1", "host-b", 7_000, Some("host-a"), None);
    assert!(!claim().unwrap(), "the stalled transaction holds the row");

    let start = Instant::now();
    while !claim().unwrap() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the run was never taken over from the stalled host"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    resume.send(()).unwrap();
    let stalled_outcome = host_a.join().unwrap();
    assert!(
        stalled_outcome.is_err(),
        "the stalled transaction cannot commit"
    );
    assert_eq!(
        host_b.lease_owner("r1").unwrap(),
        Some(Some("host-b".to_owned()))
    );
    let run = host_b.run("r1").unwrap().unwrap();
    let expires = run.lease_expires_ms.unwrap();
    assert!(
        expires < mcp_task_server::clock::now_ms() + 3_600_000,
        "the fence's write is not kept: the lease ends at {expires}"
    );
}

/// A transaction its caller abandons by a panic ends on the server at once, with its
/// locks: its connection is closed, not left open until the server's idle-transaction
/// timeout (5 s) ends it. The connections are driven by their callers, so the closing is
/// done before the panic goes on.
#[test]
fn a_transaction_abandoned_by_a_panic_lets_its_locks_go_at_once() {
    use std::time::{Duration, Instant};
    let Some((scratch, host_a)) = scratch("a_transaction_abandoned_by_a_panic") else {
        return;
    };
    let host_b = Store::open_at(scratch.url(), Durability::Normal).unwrap();
    held_run(&host_a, "r1");
    let abandoned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _: Result<(), _> = host_a.try_transaction(|tx| {
            tx.fence("r1", "host-a", 86_400_000, false)?;
            // A read, so that the fence has reached the server and holds the row.
            tx.get_todo(1)?;
            panic!("the caller gives up inside the transaction");
        });
    }));
    assert!(abandoned.is_err(), "the transaction panicked");
    // Well within the server's idle-transaction timeout, the row is free.
    let start = Instant::now();
    while !host_b
        .claim_run("r1", "host-b", 7_000, Some("host-a"), None)
        .unwrap()
    {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "the abandoned transaction still holds the run's row"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Host A lives on, with its pool: the row was let go by the transaction's end alone.
    drop(host_a);
}

/// A transaction takes the audit chain's lock only as it commits, whatever round trips it
/// makes after its audit row. A shared transaction waits for the one before it to commit
/// (`store/shared.rs`), and that one's commit takes the lock too: were the lock taken by
/// the waiting transaction's earlier round trip, both would wait until PostgreSQL ended
/// the idle one (5 s later, failing its callers' first try).
#[test]
fn an_audit_row_takes_the_chains_lock_only_as_its_transaction_commits() {
    let Some((scratch, store)) = scratch("chain_lock_at_commit") else {
        return;
    };
    let schema = scratch.schema().replace('\'', "''");
    // The lock `store/audit.rs` takes: two keys, the second the schema's hash, as an oid.
    let chain_lock_held = format!(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
           AND classid = 1635083369::oid AND objsubid = 2
           AND objid::bigint = (hashtext('{schema}')::bigint + 4294967296) % 4294967296"
    );
    let held_before_commit = store
        .try_transaction(|tx| {
            tx.append_audit(&audit_entry("first"))?;
            // A round trip after the row: a read the transaction waits for.
            tx.get_todo(1)?;
            Ok(scratch.count(&chain_lock_held).unwrap())
        })
        .unwrap();
    assert_eq!(
        held_before_commit, 0,
        "the chain's lock held before the commit"
    );
    let rows = store.audit_rows().unwrap();
    assert_eq!(rows.iter().filter(|row| row.tool == "first").count(), 1);
    assert!(store.verify_audit_chain().unwrap().is_ok());
}

#[test]
fn a_tool_call_whose_audit_row_cannot_be_written_keeps_no_effect() {
    use mcp_task_server::todos::{Origin, Tools};
    let Some((scratch, store)) = scratch("a_tool_call_whose_audit_row_cannot_be_written") else {
        return;
    };
    // The database refuses the audit row, as a full disk or a lost privilege would.
    scratch
        .execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'no space left'; END $$;
             CREATE TRIGGER refuse BEFORE INSERT ON audit_log
                 FOR EACH ROW EXECUTE FUNCTION refuse();",
        )
        .unwrap();
    let tools = Tools::new(store.clone());
    let mut args = serde_json::Map::new();
    args.insert("title".into(), "lost with its audit row".into());
    let result = tools
        .invoke("add_task", &args, Origin::default())
        .expect("add_task is a tool");
    let error = result.expect_err("the call fails");
    assert_eq!(error.code.as_str(), "internal_error", "{error:?}");
    assert!(
        store.list_todos(&Default::default()).unwrap().is_empty(),
        "the effect went with its audit row"
    );

    scratch.execute("DROP TRIGGER refuse ON audit_log").unwrap();
    assert!(
        tools
            .invoke("add_task", &args, Origin::default())
            .unwrap()
            .is_ok()
    );
    assert_eq!(store.list_todos(&Default::default()).unwrap().len(), 1);
    assert_eq!(store.audit_rows().unwrap().len(), 1);
}

#[test]
fn db_migrate_brings_a_fresh_schema_to_this_builds_version_and_says_so() {
    let Some(scratch) = Scratch::postgres("db_migrate") else {
        return;
    };
    let run = || {
        std::process::Command::new(BIN)
            .args(["--db", scratch.url(), "db", "migrate"])
            .env_remove("RUST_LOG")
            .output()
            .expect("the binary runs")
    };
    let first = run();
    assert!(first.status.success(), "{first:?}");
    let said = String::from_utf8(first.stdout).unwrap();
    let version = Store::open_at(scratch.url(), Durability::Normal)
        .unwrap()
        .schema_version()
        .unwrap();
    assert!(
        said.starts_with("postgres database postgres://")
            && said
                .trim_end()
                .ends_with(&format!("schema version {version}")),
        "{said}"
    );
    assert!(!said.contains('@'), "no user or password: {said}");
    let again = run();
    assert!(
        again.status.success(),
        "migrating twice changes nothing: {again:?}"
    );
}

/// A database whose todos are still in the table `tasks` (schema version 5) has it renamed
/// `todos` when it opens, its todos and their ids kept.
#[test]
fn the_table_of_todos_is_renamed_on_an_existing_database_with_its_rows() {
    let Some((scratch, store)) = scratch("the_table_of_todos_is_renamed") else {
        return;
    };
    drop(store);
    // Back to version 5, as a database written by an earlier build, with a todo in it:
    // the migrations after it undone.
    scratch
        .execute(
            "DROP TRIGGER runs_delete_nodes ON runs;
             DROP FUNCTION nodes_go_with_their_runs();
             ALTER TABLE nodes ADD FOREIGN KEY (run_key) REFERENCES runs (key) ON DELETE CASCADE;
             ALTER TABLE todos RENAME TO tasks;
             ALTER INDEX todos_due RENAME TO tasks_due;
             ALTER TABLE nodes DROP COLUMN retried;
             ALTER TABLE nodes DROP COLUMN iterations;
             DROP TABLE run_history;
             ALTER TABLE runs DROP COLUMN parent_key, DROP COLUMN parent_node, DROP COLUMN parent_index,
                 DROP COLUMN parent_instance, DROP COLUMN depth;
             ALTER TABLE runs DROP COLUMN trace_parent, DROP COLUMN trace_link;
             DROP TABLE written_files;
             ALTER TABLE runs DROP COLUMN revision;
             DROP TRIGGER runs_changed ON runs;
             DROP TRIGGER run_tasks_changed ON run_tasks;
             DROP TRIGGER nodes_changed ON nodes;
             DROP TRIGGER task_questions_changed ON task_questions;
             DELETE FROM schema_migrations WHERE version >= 6;
             INSERT INTO tasks (title, due, created_at)
                 VALUES ('kept', '2026-12-24', '2026-12-05T00:00:00Z')",
        )
        .unwrap();
    let store = Store::open_at(scratch.url(), Durability::Normal).unwrap();
    let todos = store.list_todos(&TodoFilter::default()).unwrap();
    let kept: Vec<(i64, &str)> = todos.iter().map(|t| (t.id, t.title.as_str())).collect();
    assert_eq!(kept, [(1, "kept")]);
    let next = NewTodo {
        title: "next".into(),
        due: None,
        tags: Vec::new(),
    };
    assert_eq!(store.insert_todo(&next).unwrap().id, 2);
}
