//! The audit log's promise, on both backends: no effect commits without its row, a call's
//! failure inside a group commit spoils no other call, and `db verify` walks the hash
//! chain and names the first row changed, removed or inserted out of order.

use std::process::Command;

use mcp_task_server::store::chain::{Fields, chain_hash};
use mcp_task_server::store::{AuditRow, TodoFilter};
use mcp_task_server::todos::{ErrorCode, OwnedOrigin, Tools};
use serde_json::{Map, Value, json};

use crate::support::BIN;
use crate::support::backends::{Place, on_both_backends};

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// `db verify` on `place`: its exit success and its stdout.
fn verify(place: &Place) -> (bool, String) {
    let out = Command::new(BIN)
        .env_remove("TASKS_DB_PATH")
        .args(["--db", &place.location(), "db", "verify"])
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.lines().count() == 1,
        "one line of verdict: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), stdout)
}

/// `calls` add_task calls at once, through the group commit, on a runtime of 4 threads.
fn busy(
    tools: &Tools,
    calls: usize,
    title: impl Fn(usize) -> String,
) -> Vec<Result<Value, ErrorCode>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let calls = (0..calls).map(|i| {
            let call = tools
                .invoke_grouped(
                    "add_task",
                    args(json!({ "title": title(i) })),
                    OwnedOrigin::default(),
                )
                .expect("add_task exists");
            tokio::spawn(call)
        });
        let mut out = Vec::new();
        for call in calls.collect::<Vec<_>>() {
            out.push(call.await.unwrap().map_err(|error| error.code));
        }
        out
    })
}

fn drop_append_only_triggers(place: &Place) {
    let sql = match place {
        Place::Sqlite(_) => "DROP TRIGGER audit_log_no_update; DROP TRIGGER audit_log_no_delete;",
        Place::Postgres(_) => "DROP TRIGGER audit_log_no_change ON audit_log;",
    };
    place.execute(sql).expect("the triggers drop");
}

fn quoted(text: Option<&str>) -> String {
    text.map_or("NULL".into(), |text| {
        format!("'{}'", text.replace('\'', "''"))
    })
}

/// The statement that puts `row` back as it was (or as forged).
fn insert_sql(place: &Place, row: &AuditRow) -> String {
    let overriding = match place {
        Place::Sqlite(_) => "",
        Place::Postgres(_) => "OVERRIDING SYSTEM VALUE",
    };
    format!(
        "INSERT INTO audit_log (id, at, tool, args, outcome, run_id, node_id, principal,
                                args_sha256, prev_hash, hash) {overriding}
         VALUES ({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {})",
        row.id,
        quoted(Some(&row.at)),
        quoted(Some(&row.tool)),
        quoted(Some(&row.args)),
        quoted(Some(&row.outcome)),
        quoted(row.run_id.as_deref()),
        quoted(row.node_id.as_deref()),
        quoted(row.principal.as_deref()),
        quoted(row.args_sha256.as_deref()),
        quoted(row.prev_hash.as_deref()),
        quoted(row.hash.as_deref()),
    )
}

on_both_backends! {
    fn db_verify_passes_on_a_busy_store_and_names_an_edited_deleted_or_inserted_row(place) {
        let tools = Tools::new(place.store());
        let results = busy(&tools, 120, |i| format!("todo {i}"));
        assert!(results.iter().all(Result::is_ok));
        let (ok, verdict) = verify(&place);
        assert!(ok, "{verdict}");
        assert!(verdict.starts_with("audit chain intact: 120 rows checked"), "{verdict}");

        let rows = tools.store().audit_rows().unwrap();
        drop_append_only_triggers(&place);

        // One row edited: named; put back: whole again.
        place.execute("UPDATE audit_log SET outcome = 'error' WHERE id = 37").unwrap();
        let (ok, verdict) = verify(&place);
        assert!(!ok);
        assert!(verdict.contains("row 37 was changed"), "{verdict}");
        place.execute("UPDATE audit_log SET outcome = 'ok' WHERE id = 37").unwrap();
        assert!(verify(&place).0);

        // One row deleted: named; put back: whole again.
        place.execute("DELETE FROM audit_log WHERE id = 50").unwrap();
        let (ok, verdict) = verify(&place);
        assert!(!ok);
        assert!(verdict.contains("row 50 was removed"), "{verdict}");
        place.execute(&insert_sql(&place, &rows[49])).unwrap();
        assert!(verify(&place).0);

        // One row inserted, well formed but out of order: a copy of row 10 appended, its
        // hash made again for its new id.
        let mut forged = rows[9].clone();
        forged.id = 121;
        forged.hash = Some(chain_hash(
            forged.prev_hash.as_deref().unwrap(),
            &Fields::of(&forged).unwrap(),
        ));
        place.execute(&insert_sql(&place, &forged)).unwrap();
        let (ok, verdict) = verify(&place);
        assert!(!ok);
        assert!(verdict.contains("row 121 was inserted out of order"), "{verdict}");
    }
}

/// Installs a trigger that refuses the audit rows of calls whose arguments hold `poison`.
fn refuse_audit_rows_of_poison(place: &Place) {
    let sql = match place {
        Place::Sqlite(_) => {
            "CREATE TRIGGER audit_refused BEFORE INSERT ON audit_log
             WHEN NEW.args LIKE '%poison%'
             BEGIN SELECT RAISE(ABORT, 'audit refused'); END;"
        }
        Place::Postgres(_) => {
            "CREATE FUNCTION audit_refused() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.args LIKE '%poison%' THEN RAISE EXCEPTION 'audit refused'; END IF;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER audit_refused BEFORE INSERT ON audit_log
                 FOR EACH ROW EXECUTE FUNCTION audit_refused();"
        }
    };
    place.execute(sql).expect("the trigger installs");
}

on_both_backends! {
    fn an_audit_row_that_cannot_be_written_fails_the_call_and_leaves_no_effect(place) {
        let tools = Tools::new(place.store());
        refuse_audit_rows_of_poison(&place);
        let origin = mcp_task_server::todos::Origin::default();
        let refused = tools
            .invoke("add_task", &args(json!({ "title": "poison" })), origin)
            .unwrap()
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::InternalError);
        assert!(tools.store().list_todos(&TodoFilter::default()).unwrap().is_empty());
        assert_eq!(place.count("audit_log"), 0);
    }
}

on_both_backends! {
    fn a_call_that_fails_in_a_group_commit_spoils_no_other_call(place) {
        let tools = Tools::new(place.store());
        refuse_audit_rows_of_poison(&place);
        let title = |i: usize| if i.is_multiple_of(5) { format!("poison {i}") } else { format!("fine {i}") };
        let results = busy(&tools, 64, title);
        let mut acknowledged = Vec::new();
        for (i, result) in results.iter().enumerate() {
            match result {
                Ok(todo) => acknowledged.push(todo["title"].as_str().unwrap().to_owned()),
                Err(code) => {
                    assert_eq!(*code, ErrorCode::InternalError);
                    assert!(title(i).starts_with("poison"), "call {i} failed");
                }
            }
        }
        assert_eq!(acknowledged.len(), 64 - 13);
        let mut stored: Vec<String> = tools
            .store()
            .list_todos(&TodoFilter::default())
            .unwrap()
            .into_iter()
            .map(|todo| todo.title)
            .collect();
        stored.sort();
        acknowledged.sort();
        assert_eq!(stored, acknowledged, "exactly the acknowledged todos are kept");
        let audited = tools.store().audit_rows().unwrap();
        assert_eq!(audited.len(), acknowledged.len());
        assert!(audited.iter().all(|row| !row.args.contains("poison")));
        assert!(verify(&place).0);
    }
}

on_both_backends! {
    fn a_nul_in_a_run_input_is_stored_and_refused_by_the_tool_it_reaches(place) {
        let dir = tempfile::tempdir().unwrap();
        let definition = dir.path().join("nul.toml");
        std::fs::write(
            &definition,
            r#"name = "nul"
description = "Makes a todo named after its input."

[inputs.who]
type = "string"

[nodes.todo]
tool = "add_task"
args = { title = "hello {{ inputs.who }}" }
"#,
        )
        .unwrap();
        let out = Command::new(BIN)
            .env_remove("TASKS_DB_PATH")
            .current_dir(dir.path())
            .args(["--db", &place.location(), "workflows", "run"])
            .arg(&definition)
            .args(["--inputs-json", r#"{"who":"a\u0000b"}"#])
            .output()
            .expect("the binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr))
        });
        // The run is recorded, its input kept whole (as JSON), and its node failed by the
        // tool's validation, not by the database.
        assert_eq!(report["status"], "failed", "{report:#}");
        assert_eq!(report["nodes"]["todo"]["error"]["code"], "invalid_input", "{report:#}");
        let store = place.store();
        let rows = store.audit_rows().unwrap();
        let todo_row = rows.iter().find(|row| row.tool == "add_task").expect("the call is audited");
        assert_eq!(todo_row.outcome, "rejected");
        assert!(todo_row.args.contains("a\\u0000b"), "{}", todo_row.args);
        assert!(store.list_todos(&TodoFilter::default()).unwrap().is_empty());
        let run = store.run(report["run_id"].as_str().unwrap()).unwrap().expect("the run is stored");
        assert_eq!(run.status, "failed");
        assert!(verify(&place).0);
    }
}

on_both_backends! {
    fn rows_from_before_the_chain_are_counted_apart_and_the_chain_starts_after_them(place) {
        let store = place.store();
        // As a log migrated from before the chain holds them: rows without hashes, and the
        // migration's record of where the chain begins.
        let overriding = match place {
            Place::Sqlite(_) => "",
            Place::Postgres(_) => "OVERRIDING SYSTEM VALUE",
        };
        let fixed = match place {
            Place::Sqlite(_) => "DROP TRIGGER audit_chain_no_update;",
            Place::Postgres(_) => "DROP TRIGGER audit_chain_no_change ON audit_chain;",
        };
        place
            .execute(&format!(
                "INSERT INTO audit_log (id, at, tool, args, outcome) {overriding}
                 VALUES (1, '2025-01-01T00:00:00Z', 'add_task', '{{}}', 'ok'),
                        (2, '2025-01-01T00:00:01Z', 'list_tasks', '{{}}', 'ok');
                 {fixed}
                 UPDATE audit_chain SET legacy_until = 2;"
            ))
            .unwrap();
        let tools = Tools::new(store);
        let origin = mcp_task_server::todos::Origin::default();
        tools.invoke("add_task", &args(json!({ "title": "new" })), origin).unwrap().unwrap();
        let rows = tools.store().audit_rows().unwrap();
        assert_eq!(rows[2].id, 3);
        assert_eq!(rows[2].prev_hash.as_deref(), Some(mcp_task_server::store::chain::GENESIS));
        let (ok, verdict) = verify(&place);
        assert!(ok, "{verdict}");
        assert!(verdict.starts_with("audit chain intact: 1 rows checked"), "{verdict}");
        assert!(verdict.contains("2 earlier rows predate the chain"), "{verdict}");
    }
}

on_both_backends! {
    fn rows_of_every_shape_appended_by_two_hosts_at_once_verify_as_one_chain(place) {
        use mcp_task_server::store::{AuditEntry, AuditOutcome, AUDIT_ARGS_CAP};
        // Arguments in several scripts, one past the cap, a run and a node, a principal or
        // none, every outcome: each row's hash is made before the writer is taken and
        // linked inside it (on PostgreSQL by the server), and the walk checks every field.
        let long = "é".repeat(AUDIT_ARGS_CAP);
        let texts = ["{}", "{\"title\":\"naïve café 日本語 🦀\"}", &long, "{\"nul\":\"\\u0000\"}"];
        let outcomes = [
            AuditOutcome::Ok,
            AuditOutcome::Rejected,
            AuditOutcome::NotFound,
            AuditOutcome::Error,
        ];
        let hosts = [place.store(), place.store()];
        std::thread::scope(|scope| {
            for (h, store) in hosts.iter().enumerate() {
                let texts = &texts;
                scope.spawn(move || {
                    for i in 0..40 {
                        let entry = AuditEntry {
                            tool: if i % 2 == 0 { "add_task" } else { "run_workflow" },
                            args: texts[i % texts.len()],
                            outcome: outcomes[i % outcomes.len()],
                            run_id: (i % 3 == 0).then_some("r-Ω"),
                            node_id: (i % 3 == 0).then_some("node ü"),
                            principal: (i % 5 != 0).then_some(if h == 0 { "alice" } else { "bob" }),
                        };
                        store.append_audit(&entry).unwrap();
                    }
                });
            }
        });
        let (ok, verdict) = verify(&place);
        assert!(ok, "{verdict}");
        assert!(verdict.starts_with("audit chain intact: 80 rows checked"), "{verdict}");

        // A tampered row still breaks it, wherever it stands.
        drop_append_only_triggers(&place);
        place.execute("UPDATE audit_log SET principal = 'mallory' WHERE id = 61").unwrap();
        let (ok, verdict) = verify(&place);
        assert!(!ok);
        assert!(verdict.contains("row 61 was changed"), "{verdict}");
    }
}
