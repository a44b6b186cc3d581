//! Tests that run on both backends: each becomes a module of two tests, `sqlite` (a
//! database file of its own) and `postgres` (a schema of its own on the server
//! `TASKS_TEST_POSTGRES` names; where it names none, the test says it skipped).

use mcp_task_server::store::{Durability, Scratch, Store};

/// Where a test's database is, kept while the test runs.
pub(crate) enum Place {
    Sqlite(tempfile::TempDir),
    Postgres(Scratch),
}

impl Place {
    pub(crate) fn sqlite() -> Place {
        Place::Sqlite(tempfile::tempdir().expect("a temporary directory"))
    }

    /// `None` when no PostgreSQL server is named (the skip is noted on stderr).
    pub(crate) fn postgres(test: &str) -> Option<Place> {
        Scratch::postgres(test).map(Place::Postgres)
    }

    /// Another database of the same backend, empty.
    pub(crate) fn fresh(&self) -> Place {
        match self {
            Place::Sqlite(_) => Place::sqlite(),
            Place::Postgres(_) => Place::Postgres(
                Scratch::postgres("a fresh schema").expect("the server named before answers"),
            ),
        }
    }

    /// What `--db` takes: the file's path, or the schema's URL.
    pub(crate) fn location(&self) -> String {
        match self {
            Place::Sqlite(dir) => dir.path().join("tasks.db").display().to_string(),
            Place::Postgres(scratch) => scratch.url().to_owned(),
        }
    }

    /// How many rows `table` holds, read apart from the store, as another client would.
    pub(crate) fn count(&self, table: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        match self {
            Place::Sqlite(_) => rusqlite::Connection::open(self.location())
                .and_then(|conn| conn.query_row(&sql, [], |row| row.get(0)))
                .expect("the table counts"),
            Place::Postgres(scratch) => scratch.count(&sql).expect("the table counts"),
        }
    }

    /// Runs `sql` (statements without parameters) apart from the store, as another client
    /// would; `Err` holds the database's message.
    pub(crate) fn execute(&self, sql: &str) -> Result<(), String> {
        match self {
            Place::Sqlite(_) => rusqlite::Connection::open(self.location())
                .and_then(|conn| conn.execute_batch(sql))
                .map_err(|error| error.to_string()),
            Place::Postgres(scratch) => scratch.execute(sql),
        }
    }

    /// The store there (a new handle each time, as another process would open it).
    pub(crate) fn store(&self) -> Store {
        Store::open_at(&self.location(), Durability::Normal).expect("the test database opens")
    }
}

/// `on_both_backends! { fn name(place) { ... } }`: the body, given a [`Place`], runs once
/// on each backend. `async fn` makes the two tests `#[tokio::test]`s on a multi-threaded
/// runtime.
macro_rules! on_both_backends {
    ($(#[$attr:meta])* fn $name:ident($place:ident) $body:block) => {
        $(#[$attr])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($place: $crate::support::backends::Place) $body

            #[test]
            fn sqlite() {
                run($crate::support::backends::Place::sqlite());
            }

            #[test]
            fn postgres() {
                if let Some(place) =
                    $crate::support::backends::Place::postgres(concat!(module_path!(), "::postgres"))
                {
                    run(place);
                }
            }
        }
    };
    ($(#[$attr:meta])* async fn $name:ident($place:ident) $body:block) => {
        $(#[$attr])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run($place: $crate::support::backends::Place) $body

            #[tokio::test]
            async fn sqlite() {
                run($crate::support::backends::Place::sqlite()).await;
            }

            #[tokio::test]
            async fn postgres() {
                if let Some(place) =
                    $crate::support::backends::Place::postgres(concat!(module_path!(), "::postgres"))
                {
                    run(place).await;
                }
            }
        }
    };
}

pub(crate) use on_both_backends;
