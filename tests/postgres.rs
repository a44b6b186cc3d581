//! What PostgreSQL itself must guarantee, beyond the behaviour both backends share
//! (tests/store.rs and the others that run on both): the audit log and finished tasks
//! are kept by the database whoever writes, and schemas are versioned.
//!
//! Each test skips, saying so, where `TASKS_TEST_POSTGRES` names no server.

use mcp_task_server::store::{
    AuditEntry, AuditOutcome, Durability, NewTodo, Scratch, Store, StoreError,
};

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

#[test]
fn a_url_asking_for_tls_is_refused_with_what_to_do_instead() {
    let error = match Store::open_at(
        "postgres://u:p@127.0.0.1:1/tasks?sslmode=require",
        Durability::Normal,
    ) {
        Err(error) => error.to_string(),
        Ok(_) => panic!("TLS is not built in"),
    };
    assert!(error.contains("sslmode=require"), "{error}");
    assert!(error.contains("sslmode=disable or prefer"), "{error}");
}
