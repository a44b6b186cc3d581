//! Queries on the `todos` table.
//!
//! Every value reaches SQL as a bound parameter; no statement text is built from input.
//! Ids, dates and times are stored as text, in both databases alike.

use super::sql::Row;
use super::{Store, StoreError, Tx};
use crate::clock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TodoStatus {
    Open,
    Done,
}

impl TodoStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TodoStatus::Open => "open",
            TodoStatus::Done => "done",
        }
    }
}

/// An item of the task manager, as stored. Its JSON shape is the tools' business
/// (`tools/schema.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Todo {
    pub id: i64,
    pub title: String,
    pub status: TodoStatus,
    pub due: Option<String>,
    pub tags: Vec<String>,
    pub created_at: String,
    pub completed_at: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct NewTodo {
    pub title: String,
    pub due: Option<String>,
    pub tags: Vec<String>,
}

/// Conditions of `list_tasks`; all of them must hold. Date bounds are inclusive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TodoFilter {
    pub status: Option<TodoStatus>,
    pub tag: Option<String>,
    pub due_after: Option<String>,
    pub due_before: Option<String>,
}

const COLUMNS: &str = "id, title, status, due, tags, created_at, completed_at";

fn todo_from_row(row: &Row<'_>) -> Result<Todo, StoreError> {
    let status: String = row.get(2)?;
    let tags: String = row.get(4)?;
    Ok(Todo {
        id: row.get(0)?,
        title: row.get(1)?,
        status: if status == "done" {
            TodoStatus::Done
        } else {
            TodoStatus::Open
        },
        due: row.get(3)?,
        // The column is only ever written by `insert_todo` from a Vec<String>.
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        created_at: row.get(5)?,
        completed_at: row.get(6)?,
    })
}

/// Escapes `%`, `_` and the escape character itself so that `LIKE` matches them literally.
pub(crate) fn escape_like(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len() + 2);
    for ch in text.chars() {
        if matches!(ch, '\\' | '%' | '_') {
            escaped.push('\\');
        }
        escaped.push(ch);
    }
    escaped
}

/// The title search. SQLite's `LIKE` folds ASCII letters only; PostgreSQL's `LIKE` folds
/// none and its `ILIKE` folds every letter, so there both sides are folded by `translate`,
/// which maps the 26 ASCII capitals and nothing else.
const SEARCH_SQLITE: &str = "SELECT id, title, status, due, tags, created_at, completed_at \
     FROM todos WHERE title LIKE ?1 ESCAPE '\\' ORDER BY id ASC";
const SEARCH_POSTGRES: &str = "SELECT id, title, status, due, tags, created_at, completed_at \
     FROM todos \
     WHERE translate(title, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') \
     LIKE translate(?1, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') \
     ESCAPE '\\' ORDER BY id ASC";

/// `list_tasks`: one fixed statement, where a NULL parameter switches its condition off.
const LIST_SQLITE: &str = "SELECT id, title, status, due, tags, created_at, completed_at \
     FROM todos
     WHERE (?1 IS NULL OR status = ?1)
       AND (?2 IS NULL OR EXISTS (SELECT 1 FROM json_each(todos.tags) WHERE value = ?2))
       AND (?3 IS NULL OR (due IS NOT NULL AND due >= ?3))
       AND (?4 IS NULL OR (due IS NOT NULL AND due <= ?4))
     ORDER BY id ASC";
const LIST_POSTGRES: &str = "SELECT id, title, status, due, tags, created_at, completed_at \
     FROM todos
     WHERE (?1::text IS NULL OR status = ?1)
       AND (?2::text IS NULL OR tags::jsonb @> jsonb_build_array(?2::text))
       AND (?3::text IS NULL OR (due IS NOT NULL AND due >= ?3))
       AND (?4::text IS NULL OR (due IS NOT NULL AND due <= ?4))
     ORDER BY id ASC";

/// A new todo's id never names a deleted todo: one more than the highest id in the table or
/// than the highest deleted while it was the newest (SQLite's migration 7 keeps that one).
/// PostgreSQL's identity column never gives an id twice by itself.
const INSERT_SQLITE: &str = "INSERT INTO todos (id, title, due, tags, created_at)
     VALUES (max(coalesce((SELECT max(id) FROM todos), 0), (SELECT high FROM todo_ids)) + 1,
             ?1, ?2, ?3, ?4)";
const INSERT_POSTGRES: &str =
    "INSERT INTO todos (title, due, tags, created_at) VALUES (?1, ?2, ?3, ?4)";

impl Tx<'_> {
    pub fn insert_todo(&self, new: &NewTodo) -> Result<Todo, StoreError> {
        let tags = serde_json::to_string(&new.tags).expect("a list of strings serialises");
        let created_at = clock::now_iso();
        // The row is built from what was inserted: reading it back would cost more than
        // the insert.
        let id = self.db.insert(
            self.db.dialect(INSERT_SQLITE, INSERT_POSTGRES),
            "id",
            &[&new.title, &new.due, &tags, &created_at],
        )?;
        Ok(Todo {
            id,
            title: new.title.clone(),
            status: TodoStatus::Open,
            due: new.due.clone(),
            tags: new.tags.clone(),
            created_at,
            completed_at: None,
        })
    }

    pub fn get_todo(&self, id: i64) -> Result<Option<Todo>, StoreError> {
        self.db.query_opt(
            &format!("SELECT {COLUMNS} FROM todos WHERE id = ?1"),
            &[&id],
            todo_from_row,
        )
    }

    pub fn list_todos(&self, filter: &TodoFilter) -> Result<Vec<Todo>, StoreError> {
        self.db.query(
            self.db.dialect(LIST_SQLITE, LIST_POSTGRES),
            &[
                &filter.status.map(TodoStatus::as_str),
                &filter.tag,
                &filter.due_after,
                &filter.due_before,
            ],
            todo_from_row,
        )
    }

    /// Substring match on titles, case-insensitive for ASCII letters, wildcards literal.
    pub fn search_todos(&self, query: &str) -> Result<Vec<Todo>, StoreError> {
        let pattern = format!("%{}%", escape_like(query));
        self.db.query(
            self.db.dialect(SEARCH_SQLITE, SEARCH_POSTGRES),
            &[&pattern],
            todo_from_row,
        )
    }

    /// Marks a todo done; a todo already done is returned unchanged. `None` if there is none.
    pub fn complete_todo(&self, id: i64) -> Result<Option<Todo>, StoreError> {
        self.db.execute(
            "UPDATE todos SET status = 'done', completed_at = ?2 WHERE id = ?1 AND status = 'open'",
            &[&id, &clock::now_iso()],
        )?;
        self.get_todo(id)
    }

    /// Deletes a todo and returns it as it was. `None` if there is none.
    pub fn delete_todo(&self, id: i64) -> Result<Option<Todo>, StoreError> {
        // One statement: of two deletes at once, only one gets the row back (PostgreSQL
        // lets both read it first).
        self.db.query_opt(
            &format!("DELETE FROM todos WHERE id = ?1 RETURNING {COLUMNS}"),
            &[&id],
            todo_from_row,
        )
    }
}

/// The same queries, each on its own, for callers outside a tool call.
impl Store {
    pub fn insert_todo(&self, new: &NewTodo) -> Result<Todo, StoreError> {
        self.with(|tx| tx.insert_todo(new))
    }

    pub fn get_todo(&self, id: i64) -> Result<Option<Todo>, StoreError> {
        self.with(|tx| tx.get_todo(id))
    }

    pub fn list_todos(&self, filter: &TodoFilter) -> Result<Vec<Todo>, StoreError> {
        self.with(|tx| tx.list_todos(filter))
    }

    pub fn search_todos(&self, query: &str) -> Result<Vec<Todo>, StoreError> {
        self.with(|tx| tx.search_todos(query))
    }

    pub fn complete_todo(&self, id: i64) -> Result<Option<Todo>, StoreError> {
        self.with(|tx| tx.complete_todo(id))
    }

    pub fn delete_todo(&self, id: i64) -> Result<Option<Todo>, StoreError> {
        // Read, then deleted: one transaction, so that two deletes cannot both return it.
        self.try_transaction(|tx| tx.delete_todo(id))
    }
}
