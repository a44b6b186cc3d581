//! What a server left in its database: read through the store opened read-only, as
//! another process would read it while the server still has it open, or through a store
//! the test holds.

use std::path::Path;

use mcp_task_server::store::{AuditRow, Store, TodoFilter};

/// Every audit row of the database at `db`, in order of writing, read through the store
/// opened read-only (the server may still have it open).
pub(crate) fn audit_rows(db: &Path) -> Vec<AuditRow> {
    read_only(db).audit_rows().expect("read the audit log")
}

/// The store at `db`, opened read-only (the server may still have it open).
pub(crate) fn read_only(db: &Path) -> Store {
    let uri = format!("file:{}?mode=ro", db.display());
    Store::open(&uri).unwrap_or_else(|e| panic!("open {} read-only: {e}", db.display()))
}

/// The titles in the `tasks` table of the database at `db`, in id order.
pub(crate) fn task_titles(db: &Path) -> Vec<String> {
    read_only(db)
        .list_todos(&TodoFilter::default())
        .expect("read the todos")
        .into_iter()
        .map(|todo| todo.title)
        .collect()
}

/// Every todo of the database at `db` as (title, tags), sorted.
pub(crate) fn sorted_todos(db: &Path) -> Vec<(String, Vec<String>)> {
    let mut todos: Vec<(String, Vec<String>)> = read_only(db)
        .list_todos(&TodoFilter::default())
        .expect("read the todos")
        .into_iter()
        .map(|todo| (todo.title, todo.tags))
        .collect();
    todos.sort();
    todos
}

/// The titles of every todo in `store`, sorted.
pub(crate) fn sorted_titles(store: &Store) -> Vec<String> {
    let todos = store
        .list_todos(&TodoFilter::default())
        .expect("read the todos");
    let mut titles: Vec<String> = todos.into_iter().map(|todo| todo.title).collect();
    titles.sort();
    titles
}
