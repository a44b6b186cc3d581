//! The public `Store` API on a database file: filters, search, audit log, schema versions.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_task_server::store::{
    AuditEntry, AuditOutcome, Held, NewTodo, Scope, Store, StoreError, Todo, TodoFilter, TodoStatus,
};
use rusqlite::Connection;
use tempfile::TempDir;

use crate::support::backends::on_both_backends;

/// The store of a test that runs on both backends.
struct On {
    store: Store,
}

struct Db {
    _dir: TempDir,
    path: PathBuf,
    store: Store,
}

fn temp_db() -> Db {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("tasks.db");
    let store = Store::open(&path).expect("a fresh database opens");
    Db {
        _dir: dir,
        path,
        store,
    }
}

/// A run with an empty plan whose lease `me` holds for good.
fn run_held_by_me(id: &str) -> mcp_task_server::store::NewRun<'_> {
    mcp_task_server::store::NewRun {
        id,
        workflow: "w",
        snapshot: "{}",
        plan_hash: "h",
        inputs: "{}",
        node_ids: "[]",
        nodes: 0,
        origin: "cli",
        answers: "none",
        deadline_ms: None,
        lease_owner: "me",
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

fn insert(store: &Store, title: &str, due: Option<&str>, tags: &[&str]) -> Todo {
    store
        .insert_todo(&NewTodo {
            title: title.to_owned(),
            due: due.map(str::to_owned),
            tags: tags.iter().map(|t| t.to_string()).collect(),
        })
        .expect("insert succeeds")
}

fn titles(todos: &[Todo]) -> Vec<&str> {
    todos.iter().map(|t| t.title.as_str()).collect()
}

fn listed(store: &Store, filter: TodoFilter) -> Vec<String> {
    store
        .list_todos(&filter)
        .expect("list succeeds")
        .into_iter()
        .map(|t| t.title)
        .collect()
}

fn searched(store: &Store, query: &str) -> Vec<String> {
    store
        .search_todos(query)
        .expect("search succeeds")
        .into_iter()
        .map(|t| t.title)
        .collect()
}

fn due_filter(after: Option<&str>, before: Option<&str>) -> TodoFilter {
    TodoFilter {
        due_after: after.map(str::to_owned),
        due_before: before.map(str::to_owned),
        ..TodoFilter::default()
    }
}

/// Four todos: three with due dates in January 2026 and one without.
fn dated(store: &Store) {
    insert(store, "jan01", Some("2026-01-01"), &[]);
    insert(store, "jan10", Some("2026-01-10"), &[]);
    insert(store, "undated", None, &[]);
    insert(store, "jan20", Some("2026-01-20"), &[]);
}

on_both_backends! {
    fn inserted_todo_is_open_with_the_given_fields(place) {
        let db = On { store: place.store() };
        let todo = insert(&db.store, "write tests", Some("2026-03-01"), &["dev", "qa"]);
        assert_eq!(todo.id, 1);
        assert_eq!(todo.title, "write tests");
        assert_eq!(todo.status, TodoStatus::Open);
        assert_eq!(todo.due.as_deref(), Some("2026-03-01"));
        assert_eq!(todo.tags, ["dev", "qa"]);
        assert_eq!(todo.completed_at, None);
        assert_eq!(db.store.get_todo(1).unwrap(), Some(todo));
    }
}

on_both_backends! {
    fn list_without_filter_returns_every_todo_in_ascending_id_order(place) {
        let db = On { store: place.store() };
        for title in ["c", "a", "b"] {
            insert(&db.store, title, None, &[]);
        }
        let todos = db.store.list_todos(&TodoFilter::default()).unwrap();
        assert_eq!(titles(&todos), ["c", "a", "b"]);
        let ids: Vec<i64> = todos.iter().map(|t| t.id).collect();
        assert_eq!(ids, [1, 2, 3]);
    }
}

on_both_backends! {
    fn due_after_includes_a_todo_due_on_the_bound(place) {
        let db = On { store: place.store() };
        dated(&db.store);
        assert_eq!(
            listed(&db.store, due_filter(Some("2026-01-10"), None)),
            ["jan10", "jan20"]
        );
    }
}

on_both_backends! {
    fn due_before_includes_a_todo_due_on_the_bound(place) {
        let db = On { store: place.store() };
        dated(&db.store);
        assert_eq!(
            listed(&db.store, due_filter(None, Some("2026-01-10"))),
            ["jan01", "jan10"]
        );
    }
}

on_both_backends! {
    fn equal_due_bounds_select_exactly_that_day(place) {
        let db = On { store: place.store() };
        dated(&db.store);
        assert_eq!(
            listed(
                &db.store,
                due_filter(Some("2026-01-10"), Some("2026-01-10"))
            ),
            ["jan10"]
        );
    }
}

on_both_backends! {
    fn todos_without_due_never_match_a_due_bound(place) {
        let db = On { store: place.store() };
        dated(&db.store);
        assert_eq!(
            listed(&db.store, due_filter(Some("0001-01-01"), None)),
            ["jan01", "jan10", "jan20"]
        );
        assert_eq!(
            listed(&db.store, due_filter(None, Some("9999-12-31"))),
            ["jan01", "jan10", "jan20"]
        );
        assert_eq!(
            listed(&db.store, TodoFilter::default()),
            ["jan01", "jan10", "undated", "jan20"]
        );
    }
}

on_both_backends! {
    fn due_bounds_outside_every_date_select_nothing(place) {
        let db = On { store: place.store() };
        dated(&db.store);
        assert!(listed(&db.store, due_filter(Some("2026-01-21"), None)).is_empty());
        assert!(listed(&db.store, due_filter(None, Some("2025-12-31"))).is_empty());
        assert!(
            listed(
                &db.store,
                due_filter(Some("2026-01-11"), Some("2026-01-19"))
            )
            .is_empty()
        );
    }
}

on_both_backends! {
    fn status_filter_selects_open_or_done(place) {
        let db = On { store: place.store() };
        for title in ["a", "b", "c", "d"] {
            insert(&db.store, title, None, &[]);
        }
        db.store.complete_todo(2).unwrap().unwrap();
        db.store.complete_todo(4).unwrap().unwrap();
        let open = TodoFilter {
            status: Some(TodoStatus::Open),
            ..TodoFilter::default()
        };
        let done = TodoFilter {
            status: Some(TodoStatus::Done),
            ..TodoFilter::default()
        };
        assert_eq!(listed(&db.store, open), ["a", "c"]);
        assert_eq!(listed(&db.store, done), ["b", "d"]);
    }
}

on_both_backends! {
    fn tag_filter_matches_whole_tags_only(place) {
        let db = On { store: place.store() };
        insert(&db.store, "a", None, &["work"]);
        insert(&db.store, "b", None, &["homework"]);
        insert(&db.store, "c", None, &["home", "work"]);
        insert(&db.store, "d", None, &["Work"]);
        insert(&db.store, "e", None, &[]);
        let filter = |tag: &str| TodoFilter {
            tag: Some(tag.to_owned()),
            ..TodoFilter::default()
        };
        assert_eq!(listed(&db.store, filter("work")), ["a", "c"]);
        assert_eq!(listed(&db.store, filter("home")), ["c"]);
        assert_eq!(listed(&db.store, filter("Work")), ["d"]);
        assert!(listed(&db.store, filter("wor")).is_empty());
        assert!(listed(&db.store, filter("%")).is_empty());
    }
}

on_both_backends! {
    fn tag_filter_matches_tags_with_quotes_and_wildcards_literally(place) {
        let db = On { store: place.store() };
        insert(&db.store, "a", None, &["it's", "50%"]);
        insert(&db.store, "b", None, &["its", "500"]);
        let filter = |tag: &str| TodoFilter {
            tag: Some(tag.to_owned()),
            ..TodoFilter::default()
        };
        assert_eq!(listed(&db.store, filter("it's")), ["a"]);
        assert_eq!(listed(&db.store, filter("50%")), ["a"]);
        assert_eq!(listed(&db.store, filter("50_")), Vec::<String>::new());
    }
}

on_both_backends! {
    fn status_tag_and_due_filters_combine(place) {
        let db = On { store: place.store() };
        insert(&db.store, "open-work-early", Some("2026-01-01"), &["work"]);
        insert(&db.store, "open-work-mid", Some("2026-01-15"), &["work"]);
        insert(&db.store, "done-work-mid", Some("2026-01-15"), &["work"]);
        insert(&db.store, "open-home-mid", Some("2026-01-15"), &["home"]);
        insert(&db.store, "open-work-undated", None, &["work"]);
        insert(&db.store, "open-work-late", Some("2026-02-01"), &["work"]);
        db.store.complete_todo(3).unwrap().unwrap();

        let filter = TodoFilter {
            status: Some(TodoStatus::Open),
            tag: Some("work".to_owned()),
            due_after: Some("2026-01-01".to_owned()),
            due_before: Some("2026-01-31".to_owned()),
        };
        assert_eq!(
            listed(&db.store, filter),
            ["open-work-early", "open-work-mid"]
        );

        let done_work = TodoFilter {
            status: Some(TodoStatus::Done),
            tag: Some("work".to_owned()),
            ..TodoFilter::default()
        };
        assert_eq!(listed(&db.store, done_work), ["done-work-mid"]);
    }
}

/// Titles for the search tests; each query below must pick out exactly its own.
fn searchable(store: &Store) {
    for title in [
        "100% done",
        "100 percent done",
        "snake_case",
        "snakeXcase",
        "back\\slash",
        "backslash",
        "hello world",
        "r\u{e9}sum\u{e9}",
    ] {
        insert(store, title, None, &[]);
    }
}

on_both_backends! {
    fn search_for_percent_finds_only_literal_percent_signs(place) {
        let db = On { store: place.store() };
        searchable(&db.store);
        assert_eq!(searched(&db.store, "%"), ["100% done"]);
        assert_eq!(searched(&db.store, "0% d"), ["100% done"]);
        assert!(searched(&db.store, "%%").is_empty());
    }
}

on_both_backends! {
    fn search_for_underscore_finds_only_literal_underscores(place) {
        let db = On { store: place.store() };
        searchable(&db.store);
        assert_eq!(searched(&db.store, "_"), ["snake_case"]);
        assert_eq!(searched(&db.store, "e_c"), ["snake_case"]);
    }
}

on_both_backends! {
    fn search_for_backslash_finds_only_literal_backslashes(place) {
        let db = On { store: place.store() };
        searchable(&db.store);
        assert_eq!(searched(&db.store, "\\"), ["back\\slash"]);
        assert_eq!(searched(&db.store, "k\\s"), ["back\\slash"]);
        assert!(searched(&db.store, "\\\\").is_empty());
    }
}

on_both_backends! {
    fn search_is_case_insensitive_for_ascii_letters(place) {
        let db = On { store: place.store() };
        searchable(&db.store);
        assert_eq!(searched(&db.store, "HELLO"), ["hello world"]);
        assert_eq!(searched(&db.store, "Lo WoR"), ["hello world"]);
    }
}

on_both_backends! {
    fn search_is_case_sensitive_for_non_ascii_letters(place) {
        let db = On { store: place.store() };
        searchable(&db.store);
        assert_eq!(
            searched(&db.store, "r\u{e9}sum\u{e9}"),
            ["r\u{e9}sum\u{e9}"]
        );
        assert!(searched(&db.store, "\u{c9}").is_empty());
        assert!(searched(&db.store, "R\u{c9}SUM\u{c9}").is_empty());
        assert_eq!(
            searched(&db.store, "R\u{e9}SUM\u{e9}"),
            ["r\u{e9}sum\u{e9}"]
        );
    }
}

on_both_backends! {
    fn search_results_are_in_ascending_id_order(place) {
        let db = On { store: place.store() };
        searchable(&db.store);
        let ids: Vec<i64> = db
            .store
            .search_todos("done")
            .unwrap()
            .iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(ids, [1, 2]);
    }
}

const INJECTIONS: [&str; 3] = ["'); DROP TABLE todos; --", "Robert'); --", "%' OR '1'='1"];

#[test]
fn injection_shaped_titles_are_stored_verbatim() {
    let db = temp_db();
    insert(&db.store, "plain", None, &[]);
    for title in INJECTIONS {
        insert(&db.store, title, None, &["'; DELETE FROM todos; --"]);
    }
    let todos = db.store.list_todos(&TodoFilter::default()).unwrap();
    assert_eq!(
        titles(&todos),
        ["plain", INJECTIONS[0], INJECTIONS[1], INJECTIONS[2]]
    );
    assert_eq!(todos[1].tags, ["'; DELETE FROM todos; --"]);

    let conn = Connection::open(&db.path).unwrap();
    let count: i64 = conn
        .query_row("SELECT count(*) FROM todos", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 4);
}

on_both_backends! {
    fn injection_shaped_titles_are_found_verbatim_by_search(place) {
        let db = On { store: place.store() };
        insert(&db.store, "plain", None, &[]);
        insert(&db.store, "1=1", None, &[]);
        for title in INJECTIONS {
            insert(&db.store, title, None, &[]);
        }
        for title in INJECTIONS {
            assert_eq!(searched(&db.store, title), [title]);
        }
        assert_eq!(
            searched(&db.store, "'"),
            [INJECTIONS[0], INJECTIONS[1], INJECTIONS[2]]
        );
        assert_eq!(searched(&db.store, "' OR '1'='1"), [INJECTIONS[2]]);
        assert_eq!(listed(&db.store, TodoFilter::default()).len(), 5);
    }
}

on_both_backends! {
    fn injection_shaped_filter_values_match_nothing(place) {
        let db = On { store: place.store() };
        insert(&db.store, "a", Some("2026-01-01"), &["work"]);
        let filter = TodoFilter {
            tag: Some("work' OR '1'='1".to_owned()),
            ..TodoFilter::default()
        };
        assert!(listed(&db.store, filter).is_empty());
        let filter = due_filter(Some("' OR 1=1 --"), None);
        assert_eq!(listed(&db.store, filter), ["a"]);
        let filter = due_filter(None, Some("' OR 1=1 --"));
        assert!(listed(&db.store, filter).is_empty());
        assert_eq!(listed(&db.store, TodoFilter::default()), ["a"]);
    }
}

on_both_backends! {
    fn complete_marks_done_once_and_keeps_the_first_completion_time(place) {
        let db = On { store: place.store() };
        insert(&db.store, "a", None, &[]);
        let first = db.store.complete_todo(1).unwrap().unwrap();
        assert_eq!(first.status, TodoStatus::Done);
        assert!(first.completed_at.is_some());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let second = db.store.complete_todo(1).unwrap().unwrap();
        assert_eq!(second, first);
        assert_eq!(db.store.complete_todo(2).unwrap(), None);
    }
}

on_both_backends! {
    fn delete_returns_the_todo_once(place) {
        let db = On { store: place.store() };
        let todo = insert(&db.store, "a", Some("2026-05-05"), &["x"]);
        assert_eq!(db.store.delete_todo(1).unwrap(), Some(todo));
        assert_eq!(db.store.delete_todo(1).unwrap(), None);
        assert_eq!(db.store.get_todo(1).unwrap(), None);
    }
}

on_both_backends! {
    fn a_deleted_todos_id_never_names_another_todo(place) {
        let db = On { store: place.store() };
        for title in ["a", "b", "c"] {
            insert(&db.store, title, None, &[]);
        }
        // The newest deleted: the next todo does not take its id.
        db.store.delete_todo(3).unwrap().unwrap();
        assert_eq!(insert(&db.store, "d", None, &[]).id, 4);
        // An older one deleted: the newest still holds the highest id.
        db.store.delete_todo(2).unwrap().unwrap();
        assert_eq!(insert(&db.store, "e", None, &[]).id, 5);
        // Every todo deleted, newest first and then oldest first.
        for id in [5, 4, 1] {
            db.store.delete_todo(id).unwrap().unwrap();
        }
        assert_eq!(insert(&db.store, "f", None, &[]).id, 6);
        db.store.delete_todo(6).unwrap().unwrap();
        let reopened = place.store();
        assert_eq!(insert(&reopened, "g", None, &[]).id, 7);
        assert_eq!(titles(&reopened.list_todos(&TodoFilter::default()).unwrap()), ["g"]);
    }
}

fn append(store: &Store, tool: &str, args: &str, outcome: AuditOutcome) {
    store
        .append_audit(&AuditEntry {
            tool,
            args,
            outcome,
            run_id: None,
            node_id: None,
            principal: None,
        })
        .expect("audit append succeeds");
}

on_both_backends! {
    /// Each store appends after the head it last wrote unless another wrote since, or the
    /// transaction that wrote it rolled back: the log stays one chain either way.
    fn appends_from_two_stores_and_after_a_rollback_stay_one_chain(place) {
        let a = place.store();
        let b = place.store();
        let entry = |tool| AuditEntry {
            tool,
            args: "{}",
            outcome: AuditOutcome::Ok,
            run_id: None,
            node_id: None,
            principal: None,
        };
        a.append_audit(&entry("a1")).unwrap();
        a.append_audit(&entry("a2")).unwrap();
        b.append_audit(&entry("b1")).unwrap();
        a.append_audit(&entry("a3")).unwrap();
        let rolled_back = a.try_transaction(|tx| {
            tx.append_audit(&entry("undone"))?;
            Err::<(), _>(StoreError::Commit("rolled back on purpose".into()))
        });
        assert!(rolled_back.is_err());
        a.append_audit(&entry("a4")).unwrap();
        b.append_audit(&entry("b2")).unwrap();
        let rows = a.audit_rows().unwrap();
        let tools: Vec<&str> = rows.iter().map(|row| row.tool.as_str()).collect();
        assert_eq!(tools, ["a1", "a2", "b1", "a3", "a4", "b2"]);
        assert_eq!(rows.iter().map(|row| row.id).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6]);
        let intact = a.verify_audit_chain().unwrap().expect("one chain");
        assert_eq!(intact.checked, 6);
    }
}

on_both_backends! {
    fn audit_rows_read_back_in_order_of_writing(place) {
        let db = On { store: place.store() };
        append(&db.store, "add_task", r#"{"title":"a"}"#, AuditOutcome::Ok);
        append(
            &db.store,
            "delete_task",
            r#"{"id":1}"#,
            AuditOutcome::Rejected,
        );
        append(
            &db.store,
            "complete_task",
            r#"{"id":9}"#,
            AuditOutcome::NotFound,
        );
        append(&db.store, "list_tasks", "{}", AuditOutcome::Error);
        let rows = db.store.audit_rows().unwrap();
        let summary: Vec<(&str, &str, &str)> = rows
            .iter()
            .map(|r| (r.tool.as_str(), r.args.as_str(), r.outcome.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("add_task", r#"{"title":"a"}"#, "ok"),
                ("delete_task", r#"{"id":1}"#, "rejected"),
                ("complete_task", r#"{"id":9}"#, "not_found"),
                ("list_tasks", "{}", "error"),
            ]
        );
        assert!(rows.iter().all(|r| r.at.ends_with('Z')));
    }
}

#[test]
fn audit_log_refuses_update() {
    let db = temp_db();
    append(&db.store, "add_task", "{}", AuditOutcome::Rejected);
    let conn = Connection::open(&db.path).unwrap();
    let error = conn
        .execute("UPDATE audit_log SET outcome = 'ok'", [])
        .unwrap_err();
    assert!(error.to_string().contains("append-only"), "{error}");
    assert_eq!(db.store.audit_rows().unwrap()[0].outcome, "rejected");
}

#[test]
fn audit_log_refuses_delete() {
    let db = temp_db();
    append(&db.store, "add_task", "{}", AuditOutcome::Ok);
    append(&db.store, "list_tasks", "{}", AuditOutcome::Ok);
    let conn = Connection::open(&db.path).unwrap();
    let error = conn.execute("DELETE FROM audit_log", []).unwrap_err();
    assert!(error.to_string().contains("append-only"), "{error}");
    let error = conn
        .execute("DELETE FROM audit_log WHERE id = 1", [])
        .unwrap_err();
    assert!(error.to_string().contains("append-only"), "{error}");
    assert_eq!(db.store.audit_rows().unwrap().len(), 2);
}

#[test]
fn reads_of_one_request_see_one_snapshot_while_another_process_writes() {
    let db = temp_db();
    insert(&db.store, "first", None, &[]);
    let other = Connection::open(&db.path).unwrap();
    let count = |store: &Store| store.list_todos(&TodoFilter::default()).unwrap().len();

    let (before, during) = db
        .store
        .reading(|| {
            let before = count(&db.store);
            other
                .execute(
                    "INSERT INTO todos (title, created_at) VALUES ('second', '2026-12-02T00:00:00Z')",
                    [],
                )
                .unwrap();
            (before, count(&db.store))
        })
        .unwrap();
    assert_eq!(
        (before, during),
        (1, 1),
        "the snapshot holds until the reads end"
    );
    assert_eq!(
        count(&db.store),
        2,
        "the next request sees the other's write"
    );
}

#[test]
fn a_write_inside_a_read_transaction_fails_and_keeps_nothing() {
    let db = temp_db();
    let written = db
        .store
        .reading(|| {
            db.store.transaction(|tx| {
                tx.insert_todo(&NewTodo {
                    title: "inside".into(),
                    due: None,
                    tags: vec![],
                })
            })
        })
        .unwrap();
    assert!(
        written.is_err(),
        "a write transaction cannot start in a read one"
    );
    assert!(
        db.store
            .list_todos(&TodoFilter::default())
            .unwrap()
            .is_empty()
    );
    // The connection is free again for writes.
    assert_eq!(insert(&db.store, "after", None, &[]).id, 1);
}

/// The schema version this build migrates to.
const SCHEMA_VERSION: i64 = 15;

fn user_version(path: &Path) -> i64 {
    Connection::open(path)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

#[test]
fn reopening_keeps_the_data_and_the_schema_version() {
    let Db { _dir, path, store } = temp_db();
    insert(&store, "kept", Some("2026-07-01"), &["a", "b"]);
    insert(&store, "done", None, &[]);
    store.complete_todo(2).unwrap().unwrap();
    append(&store, "add_task", r#"{"title":"kept"}"#, AuditOutcome::Ok);
    let before = store.list_todos(&TodoFilter::default()).unwrap();
    drop(store);

    assert_eq!(user_version(&path), SCHEMA_VERSION);
    let reopened = Store::open(&path).expect("the database reopens");
    assert_eq!(reopened.list_todos(&TodoFilter::default()).unwrap(), before);
    assert_eq!(reopened.audit_rows().unwrap().len(), 1);
    assert_eq!(insert(&reopened, "next", None, &[]).id, 3);
    drop(reopened);

    assert_eq!(user_version(&path), SCHEMA_VERSION);
    let again = Store::open(&path).expect("the database reopens twice");
    assert_eq!(again.list_todos(&TodoFilter::default()).unwrap().len(), 3);
}

#[test]
fn fresh_database_has_the_current_schema_version() {
    let db = temp_db();
    assert_eq!(user_version(&db.path), SCHEMA_VERSION);
}

/// The schema of release 0.1.0 (migration 1), as that release created it.
const RELEASE_0_1_SCHEMA: &str = r#"
    CREATE TABLE tasks (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        title        TEXT NOT NULL,
        status       TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done')),
        due          TEXT,
        tags         TEXT NOT NULL DEFAULT '[]',
        created_at   TEXT NOT NULL,
        completed_at TEXT
    );
    CREATE INDEX tasks_due ON tasks (due);
    CREATE TABLE audit_log (
        id      INTEGER PRIMARY KEY AUTOINCREMENT,
        at      TEXT NOT NULL,
        tool    TEXT NOT NULL,
        args    TEXT NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'rejected', 'not_found', 'error')),
        run_id  TEXT,
        node_id TEXT
    );
    CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
    CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
    INSERT INTO tasks (title, status, due, tags, created_at, completed_at) VALUES
        ('open one', 'open', '2026-05-01', '["a"]', '2026-11-30T10:00:00.000Z', NULL),
        ('done one', 'done', NULL, '[]', '2026-11-30T10:00:01.000Z', '2026-11-30T11:00:00.000Z'),
        ('deleted one', 'open', NULL, '[]', '2026-11-30T10:00:02.000Z', NULL);
    DELETE FROM tasks WHERE title = 'deleted one';
    INSERT INTO audit_log (at, tool, args, outcome, run_id, node_id) VALUES
        ('2026-11-30T10:00:00.000Z', 'add_task', '{"title":"open one"}', 'ok', NULL, NULL),
        ('2026-11-30T10:00:02.000Z', 'delete_task', '{"id":3}', 'rejected', 'r1', 'n1');
    PRAGMA user_version = 1;
"#;

#[test]
fn a_database_of_the_previous_release_migrates_and_keeps_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch(RELEASE_0_1_SCHEMA)
        .unwrap();

    let store = Store::open(&path).expect("the old database opens and migrates");
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    let todos = store.list_todos(&TodoFilter::default()).unwrap();
    assert_eq!(titles(&todos), ["open one", "done one"]);
    assert_eq!(todos[0].tags, ["a"]);
    assert_eq!(todos[1].status, TodoStatus::Done);
    let audit = store.audit_rows().unwrap();
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[1].run_id.as_deref(), Some("r1"));
    assert_eq!(
        audit[1].principal, None,
        "old rows were made for no principal"
    );
    // The id of the todo deleted before the migration is not given again.
    assert_eq!(insert(&store, "new", None, &[]).id, 4);
    assert!(
        store
            .list_runs(None, Scope::Everyone, 10)
            .unwrap()
            .is_empty()
    );
    // The audit log keeps its ids, and goes on from the last of them.
    assert_eq!(audit.iter().map(|row| row.id).collect::<Vec<_>>(), [1, 2]);
    append(&store, "list_tasks", "{}", AuditOutcome::Ok);
    assert_eq!(store.audit_rows().unwrap()[2].id, 3);
    // The chain begins after the rows the migration found, which it counts apart.
    let intact = store
        .verify_audit_chain()
        .unwrap()
        .expect("the chain holds");
    assert_eq!((intact.checked, intact.unchained), (1, 2));
    // It is still append-only after the migration, and still refuses an unknown outcome.
    let conn = Connection::open(&path).unwrap();
    assert!(conn.execute("DELETE FROM audit_log", []).is_err());
    assert!(conn.execute("UPDATE audit_log SET tool = 'x'", []).is_err());
    let bogus = "INSERT INTO audit_log (at, tool, args, outcome) VALUES ('t', 'x', '{}', 'bogus')";
    assert!(conn.execute(bogus, []).is_err());
    // Its outcome check builds no temporary index at each insert.
    let plan: Vec<String> = conn
        .prepare(&format!("EXPLAIN {}", bogus.replace("'bogus'", "'ok'")))
        .unwrap()
        .query_map([], |row| row.get(1))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!plan.iter().any(|op| op == "OpenEphemeral"), "{plan:?}");
    // Its due-date index now leaves out the todos without a due date.
    let due_index: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'todos_due'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert!(due_index.ends_with("WHERE due IS NOT NULL"), "{due_index}");
    // The todos' table is named for them, and nothing is left under the old name.
    let named = |name: &str| -> i64 {
        conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = ?1",
            [name],
            |row| row.get(0),
        )
        .unwrap()
    };
    assert_eq!((named("todos"), named("tasks")), (1, 0));
    assert_eq!(
        (named("todos_keep_high_id"), named("tasks_keep_high_id")),
        (1, 0)
    );
    // No table keeps a sequence row that every insert would rewrite.
    let sequenced: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE sql LIKE '%AUTOINCREMENT%'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(sequenced, 0);
}

#[test]
fn newer_schema_version_fails_to_open_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    drop(Store::open(&path).unwrap());
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();

    let error = match Store::open(&path) {
        Ok(_) => panic!("a database from a newer build must not open"),
        Err(error) => error,
    };
    assert!(
        matches!(
            error,
            StoreError::SchemaTooNew {
                found,
                supported: SCHEMA_VERSION
            } if found == SCHEMA_VERSION + 1
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("newer"), "{message}");
    let (found, supported) = ((SCHEMA_VERSION + 1).to_string(), SCHEMA_VERSION.to_string());
    assert!(
        message.contains(&found) && message.contains(&supported),
        "{message}"
    );
}

#[test]
fn empty_file_with_a_newer_schema_version_fails_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.db");
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let result = Store::open(&path);
    assert!(
        matches!(result, Err(StoreError::SchemaTooNew { found: 99, .. })),
        "{:?}",
        result.err()
    );
}

#[test]
fn opening_a_path_in_a_missing_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no").join("such").join("dir");
    let path = missing.join("tasks.db");
    let error = match Store::open(&path) {
        Ok(_) => panic!("a database in a missing directory must not open"),
        Err(error) => error,
    };
    assert!(matches!(error, StoreError::Open { .. }), "{error:?}");
    assert!(
        error.to_string().contains("tasks.db"),
        "the error names the path: {error}"
    );
    assert!(!missing.exists());
}

#[test]
fn processes_opening_a_fresh_database_at_once_all_migrate_it_safely() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    let openers: Vec<_> = (0..4)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || Store::open(&path).map(|_| ()))
        })
        .collect();
    for opener in openers {
        opener.join().unwrap().expect("every opener succeeds");
    }
    assert_eq!(user_version(&path), SCHEMA_VERSION);
}

#[test]
fn a_database_locked_past_the_busy_timeout_never_splits_a_call_from_its_audit_row() {
    let Db { _dir, path, store } = temp_db();
    let tools = mcp_task_server::todos::Tools::new(store.clone());
    let blocker = Connection::open(&path).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let args = serde_json::json!({ "title": "blocked" });
    let result = tools
        .invoke("add_task", args.as_object().unwrap(), Default::default())
        .expect("add_task exists");
    assert_eq!(result.unwrap_err().code.as_str(), "internal_error");
    blocker.execute_batch("ROLLBACK").unwrap();
    assert!(store.list_todos(&TodoFilter::default()).unwrap().is_empty());
    assert!(
        store.audit_rows().unwrap().is_empty(),
        "neither the effect nor its row"
    );
}

#[test]
fn tasks_of_one_protocol_page_newest_first_with_a_cursor_that_stays_valid() {
    let Db { _dir, path, store } = temp_db();
    let conn = Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO plans (key, hash, snapshot, node_ids, nodes) VALUES (1, 'h', '{}', '[]', 0)",
        [],
    )
    .unwrap();
    for (i, era) in [(1, "a"), (2, "b"), (3, "a"), (4, "a"), (5, "a")] {
        conn.execute(
            "INSERT INTO runs (key, id, workflow, plan_key, status, origin, created_at, updated_at)
             VALUES (?1, ?2, 'w', 1, 'running', 'cli', 'now', 'now')",
            rusqlite::params![i, format!("t{i}")],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO run_tasks (run_key, status, created_at, updated_at, updated_ms,
                 ttl_ms, poll_interval_ms, era)
             VALUES (?1, 'working', 'now', 'now', ?1, 1, 1, ?2)",
            rusqlite::params![i, era],
        )
        .unwrap();
    }
    let ids = |page: &[mcp_task_server::store::TaskRow]| -> Vec<String> {
        page.iter().map(|t| t.head.run_id.clone()).collect()
    };
    let first = store
        .list_tasks_page("a", Scope::Everyone, None, 2)
        .unwrap();
    assert_eq!(ids(&first), ["t5", "t4"]);
    // A task that changes keeps its place.
    conn.execute("UPDATE run_tasks SET updated_ms = 99 WHERE run_key = 1", [])
        .unwrap();
    let second = store
        .list_tasks_page("a", Scope::Everyone, Some("t4"), 2)
        .unwrap();
    assert_eq!(ids(&second), ["t3", "t1"]);
    assert!(
        store
            .list_tasks_page("a", Scope::Everyone, Some("t1"), 2)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        ids(&store
            .list_tasks_page("b", Scope::Everyone, None, 9)
            .unwrap()),
        ["t2"]
    );
}

#[test]
fn batches_committed_at_once_from_many_threads_each_get_their_own_result() {
    use mcp_task_server::store::{Batch, NodeRow, Write};
    let Db {
        _dir,
        path: _,
        store,
    } = temp_db();
    let runs: Vec<String> = (0..8).map(|i| format!("run-{i}")).collect();
    store
        .try_transaction(|tx| {
            for id in &runs {
                tx.insert_run(&run_held_by_me(id))?;
            }
            Ok(())
        })
        .unwrap();
    let row = |node: i64| NodeRow {
        node,
        node_id: format!("n{node}"),
        instance: -1,
        status: "succeeded".into(),
        reason: None,
        attempts: 1,
        next_attempt_ms: None,
        deadline_ms: None,
        asking: None,
        output: None,
        error: None,
        intent: None,
        started_at: None,
        finished_at: None,
        retried: None,
        iterations: None,
        updated_at: String::new(),
    };
    let threads: Vec<_> = runs
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let (store, id) = (store.clone(), id.clone());
            // Run 3's writer holds no lease: its batches must fail, and only its batches.
            let owner = if i == 3 { "someone else" } else { "me" }.to_owned();
            let rows: Vec<NodeRow> = (0..50).map(row).collect();
            std::thread::spawn(move || {
                (0..50)
                    .map(|k| {
                        let batch = Batch {
                            run_id: id.clone(),
                            fence: Some((owner.clone(), i64::MAX)),
                            writes: vec![Write::Nodes(vec![rows[k].clone()])],
                        };
                        store.commit(batch)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for (i, thread) in threads.into_iter().enumerate() {
        let results = thread.join().unwrap();
        match i {
            3 => assert!(
                results
                    .iter()
                    .all(|r| matches!(r, Err(StoreError::LeaseLost { .. })))
            ),
            _ => assert!(results.iter().all(Result::is_ok), "run {i}: {results:?}"),
        }
    }
    for (i, id) in runs.iter().enumerate() {
        let expected = if i == 3 { 0 } else { 50 };
        assert_eq!(store.nodes(id).unwrap().len(), expected, "{id}");
    }
}

#[test]
fn node_rows_written_in_one_batch_read_back_exactly_whatever_their_number() {
    use mcp_task_server::store::NodeRow;
    let Db {
        _dir,
        path: _,
        store,
    } = temp_db();
    let key = store
        .try_transaction(|tx| tx.insert_run(&run_held_by_me("r")))
        .unwrap();
    let row = |node: i64, status: &str| NodeRow {
        node: node / 3,
        node_id: format!("n{}", node / 3),
        instance: node % 3 - 1,
        status: status.into(),
        reason: (node % 2 == 0).then(|| format!("reason {node}")),
        attempts: node,
        next_attempt_ms: Some(node * 10),
        deadline_ms: None,
        asking: None,
        output: Some(format!("{{\"n\":{node}}}")),
        error: None,
        intent: Some(format!("i{node}")),
        started_at: Some("2026-12-01T00:00:00.000Z".into()),
        finished_at: None,
        retried: None,
        iterations: None,
        updated_at: String::new(),
    };
    // Two full statements of many rows and a remainder, then every row again, changed.
    for status in ["running", "succeeded"] {
        let rows: Vec<NodeRow> = (0..37).map(|n| row(n, status)).collect();
        store
            .transaction(|tx| tx.upsert_nodes(key, &rows))
            .unwrap()
            .unwrap();
        let stored = store.nodes("r").unwrap();
        assert_eq!(stored.len(), rows.len());
        for (stored, written) in stored.iter().zip(&rows) {
            assert!(!stored.updated_at.is_empty());
            let stored = NodeRow {
                updated_at: String::new(),
                ..stored.clone()
            };
            assert_eq!(&stored, written);
        }
    }
}

#[test]
fn a_store_opened_for_full_durability_commits_with_synchronous_full() {
    use mcp_task_server::store::Durability;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    let full = Store::open_with(&path, Durability::Full).unwrap();
    assert_eq!(full.durability().unwrap(), Durability::Full);
    let normal = Store::open(&path).unwrap();
    assert_eq!(normal.durability().unwrap(), Durability::Normal);
}

on_both_backends! {
    fn runs_are_listed_by_whom_they_belong_to(place) {
        let db = On { store: place.store() };
        let owners = [
            ("local", None, None),
            ("alice-1", Some("alice"), Some("s1")),
            ("alice-2", Some("alice"), Some("s2")),
            ("bob", Some("bob"), Some("s3")),
            ("session-only", None, Some("s1")),
        ];
        db.store
            .try_transaction(|tx| {
                for (id, principal, session) in owners {
                    let mut run = run_held_by_me(id);
                    run.principal = principal;
                    run.session = session;
                    tx.insert_run(&run)?;
                }
                Ok(())
            })
            .unwrap();
        let listed = |scope| -> Vec<String> {
            let mut ids: Vec<String> = db
                .store
                .list_runs(None, scope, 10)
                .unwrap()
                .into_iter()
                .map(|run| run.id)
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(listed(Scope::Everyone).len(), owners.len());
        assert_eq!(listed(Scope::Principal("alice")), ["alice-1", "alice-2"]);
        assert_eq!(listed(Scope::Principal("carol")), Vec::<String>::new());
        assert_eq!(listed(Scope::Session("s1")), ["alice-1", "session-only"]);
        assert_eq!(listed(Scope::Nobody), ["local"]);
        let owner = db.store.run_owner("bob").unwrap().unwrap();
        assert_eq!(owner.principal.as_deref(), Some("bob"));
        assert_eq!(db.store.run_owner("nobody-knows").unwrap(), None);
    }
}

on_both_backends! {
    fn idempotency_keys_are_each_principals_own(place) {
        let store = place.store();
        let start = |id: &'static str, principal: Option<&'static str>, call: &'static str| {
            store.try_transaction(|tx| {
                let mut run = run_held_by_me(id);
                run.principal = principal;
                run.idempotency = Some(("key-1", call));
                tx.insert_run(&run)
            })
        };
        start("alices", Some("alice"), "alice's call").unwrap();
        // Another principal's run under the same key is a run of its own.
        start("bobs", Some("bob"), "bob's call").unwrap();
        start("nobodys", None, "a local call").unwrap();
        let found = |principal| store.run_by_idempotency_key(principal, "key-1").unwrap();
        let run = |id: &str, call: &str| Some((id.to_owned(), call.to_owned()));
        assert_eq!(found(Some("alice")), run("alices", "alice's call"));
        assert_eq!(found(Some("bob")), run("bobs", "bob's call"));
        assert_eq!(found(None), run("nobodys", "a local call"));
        assert_eq!(found(Some("carol")), None);
        // Within one principal the key still names one run.
        assert!(start("alices-again", Some("alice"), "alice's call").is_err());
        assert!(start("nobodys-again", None, "a local call").is_err());
        assert_eq!(found(Some("alice")), run("alices", "alice's call"));
    }
}

fn new_todo(title: &str) -> NewTodo {
    NewTodo {
        title: title.to_owned(),
        due: None,
        tags: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_calls_made_while_the_connection_is_busy_all_commit_once_it_is_free() {
    let db = temp_db();
    let store = db.store.clone();
    // Another writer holds the connection (a run's commit, say) while the calls arrive.
    let held = Held::connection_of(&store);
    let calls: Vec<_> = (0..20)
        .map(|i| {
            let call = store.grouped(move |tx| tx.insert_todo(&new_todo(&format!("t{i}"))));
            tokio::spawn(call)
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        calls.iter().all(|call| !call.is_finished()),
        "no call is answered before its commit"
    );
    held.release();
    for call in calls {
        let answered = tokio::time::timeout(Duration::from_secs(5), call).await;
        let todo = answered
            .expect("no call is stranded")
            .unwrap()
            .expect("committed and inserted");
        assert!(
            db.store.get_todo(todo.id).unwrap().is_some(),
            "visible once answered"
        );
    }
    assert_eq!(listed(&db.store, TodoFilter::default()).len(), 20);
}

/// The frames in the write-ahead log of the database at `path`.
fn wal_frames(path: &std::path::Path) -> u64 {
    let wal = path.with_extension("db-wal");
    let bytes = std::fs::metadata(wal).map_or(0, |m| m.len());
    // A 32-byte header, then frames of a 24-byte header and a 4096-byte page.
    bytes.saturating_sub(32) / (24 + 4096)
}

#[tokio::test]
async fn grouped_calls_ready_together_share_one_commit() {
    let db = temp_db();
    db.store
        .grouped(|tx| tx.insert_todo(&new_todo("before")))
        .await
        .unwrap();
    let before = wal_frames(&db.path);
    // As a burst of requests does: each call is made by a task of its own, all of them
    // ready to run before the first one commits.
    let calls: Vec<_> = (0..32)
        .map(|i| {
            let store = db.store.clone();
            tokio::spawn(async move {
                store
                    .grouped(move |tx| tx.insert_todo(&new_todo(&format!("t{i}"))))
                    .await
            })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    let written = wal_frames(&db.path) - before;
    // One commit writes the table's few changed pages; one commit a call would write a
    // page or more each.
    assert!(written < 8, "{written} frames for 32 calls");
    assert_eq!(listed(&db.store, TodoFilter::default()).len(), 33);
}

#[tokio::test]
async fn a_grouped_call_whose_drainer_was_dropped_unpolled_still_commits() {
    let db = temp_db();
    let first = db.store.grouped(|tx| tx.insert_todo(&new_todo("first")));
    let second = db.store.grouped(|tx| tx.insert_todo(&new_todo("second")));
    // The first caller was to drain; its request is dropped before it ran.
    drop(first);
    let todo = tokio::time::timeout(Duration::from_secs(5), second)
        .await
        .expect("the queued call is not stranded")
        .expect("committed and inserted");
    assert_eq!(todo.title, "second");
    assert_eq!(
        listed(&db.store, TodoFilter::default()),
        ["first", "second"]
    );
}

on_both_backends! {
    /// Leases are set and expired by the database's clock, in milliseconds since the epoch;
    /// the callers give only their length.
    fn a_lease_runs_its_length_on_the_databases_clock_and_then_may_be_claimed(place) {
        let store = place.store();
        let since_epoch = || {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            i64::try_from(now.unwrap().as_millis()).unwrap()
        };
        let before = since_epoch();
        store
            .try_transaction(|tx| tx.insert_run(&run_held_by_me("r")))
            .unwrap();
        let after = since_epoch();
        let expires = store.run("r").unwrap().unwrap().lease_expires_ms.unwrap();
        // The database and this test share a machine, so a clock: a second either side.
        let hour = 3_600_000;
        assert!(
            (before + hour - 1000..=after + hour + 1000).contains(&expires),
            "{before} + 1 h <= {expires} <= {after} + 1 h"
        );
        let held = |store: &Store| store.unfinished_runs("cli", "other").unwrap();
        assert_eq!(held(&store), [("r".to_owned(), Some("me".to_owned()), false)]);
        assert!(!store.claim_run("r", "other", hour, None, None).unwrap());

        // Renewed for no time at all, the lease has run out a moment later.
        store.renew_leases("me", 0).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(held(&store), [("r".to_owned(), Some("me".to_owned()), true)]);
        assert!(store.claim_run("r", "other", hour, None, None).unwrap());
        assert_eq!(store.lease_owner("r").unwrap(), Some(Some("other".to_owned())));
    }
}

on_both_backends! {
    /// What the dashboard's live pages and resource subscriptions wait on: the stamp moves
    /// with a commit that changes a run, from any store on this database, and not with
    /// reads or with commits to another database (on PostgreSQL, another schema on the
    /// same server).
    fn the_change_stamp_moves_with_this_databases_commits_only(place) {
        let watcher = place.store();
        let writer = place.store();
        let other = place.fresh();
        let elsewhere = other.store();
        let add_run = |store: &Store, id: &str| {
            store
                .try_transaction(|tx| tx.insert_run(&run_held_by_me(id)))
                .unwrap();
        };
        let moved_from = |before: &str| {
            // PostgreSQL tells a commit after it: allow it a while to arrive.
            (0..500).any(|_| {
                let moved = watcher.change_stamp().unwrap() != before;
                if !moved {
                    std::thread::sleep(Duration::from_millis(10));
                }
                moved
            })
        };
        let before = watcher.change_stamp().unwrap();
        add_run(&elsewhere, "elsewhere");
        watcher.list_runs(None, Scope::Everyone, 10).unwrap();
        writer.list_runs(None, Scope::Everyone, 10).unwrap();
        // Time for a notification that should not come.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            watcher.change_stamp().unwrap(),
            before,
            "moved by another database's commit or a read"
        );

        add_run(&writer, "here");
        assert!(moved_from(&before), "a commit by another store on this database");
        let before = watcher.change_stamp().unwrap();
        add_run(&watcher, "mine");
        assert!(moved_from(&before), "a commit by the watcher's own store");
    }
}
