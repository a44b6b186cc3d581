//! Scratch databases for tests and benchmarks: a PostgreSQL schema of their own, made
//! on the server `TASKS_TEST_POSTGRES` names and dropped with them; and a store's
//! connection held by another writer, to keep calls waiting for it.
//!
//! `TASKS_TEST_POSTGRES` is a URL, or `required`: the server `tests/postgres/ensure` sets
//! up on `127.0.0.1:5432`. Where it is unset (a laptop without PostgreSQL),
//! [`Scratch::postgres`] says so on stderr and returns `None`, so that a test can skip
//! visibly. Where it is set, a server that cannot be reached fails the test: CI sets it
//! to `required`, and a skip there would pass silently.

use std::sync::mpsc;
use std::thread::JoinHandle;

use super::postgres::connect::Target;
use super::{Store, StoreError};

/// The variable naming the PostgreSQL server tests may use: a URL, or `required`.
pub const TEST_POSTGRES: &str = "TASKS_TEST_POSTGRES";

/// The server `tests/postgres/ensure` starts or installs, and makes this role and database
/// on: what `TASKS_TEST_POSTGRES=required` names.
const ENSURED_POSTGRES: &str = "postgres://tasks_test:tasks_test@127.0.0.1:5432/tasks_test";

/// The URL of the PostgreSQL server tests use, and whether it was named as `required`;
/// `None` where `TASKS_TEST_POSTGRES` is unset.
fn test_server() -> Option<(String, bool)> {
    match std::env::var(TEST_POSTGRES) {
        Ok(value) if value == "required" => Some((ENSURED_POSTGRES.to_owned(), true)),
        Ok(url) => Some((url, false)),
        Err(_) => None,
    }
}

/// Says on the process's own stderr that `test` skipped, and why.
///
/// Not `eprintln!`: libtest captures what a test prints that way and shows it only when
/// the test fails, so the note of a test that skipped (and passed) would never be seen.
/// A write to the stderr handle itself is not captured.
pub fn note_skipped(test: &str, why: &str) {
    use std::io::Write;
    let note = format!("SKIPPED {test}: {why}\n");
    let _ = std::io::stderr().write_all(note.as_bytes());
}

/// A schema of its own on the test server; dropped, with everything in it, on drop.
pub struct Scratch {
    server: String,
    schema: String,
    url: String,
}

impl Scratch {
    /// A fresh schema for `test`, or `None` with a note on stderr when no server is named.
    /// A server named that does not answer fails the test.
    pub fn postgres(test: &str) -> Option<Scratch> {
        let Some((server, required)) = test_server() else {
            note_skipped(
                test,
                &format!(
                    "on PostgreSQL, which {TEST_POSTGRES} does not name (set it to \
                     postgres://… or to `required`, the server of tests/postgres/ensure)"
                ),
            );
            return None;
        };
        let schema = format!("test_{}", uuid::Uuid::new_v4().simple());
        admin(&server, &format!("CREATE SCHEMA {schema}"), Ask::Execute).unwrap_or_else(|error| {
            if required {
                panic!(
                    "{TEST_POSTGRES}=required, but the server tests/postgres/ensure sets up \
                     ({server}) does not answer: {error}"
                )
            }
            panic!("{TEST_POSTGRES}={server}: {error}")
        });
        let separator = if server.contains('?') { '&' } else { '?' };
        let url = format!("{server}{separator}options=-csearch_path%3D{schema}");
        Some(Scratch {
            server,
            schema,
            url,
        })
    }

    /// The URL of the schema: the server's, with the schema as its search path.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema's name.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Runs `sql` in the schema on a connection of its own, as another client would;
    /// `Err` holds the server's message.
    pub fn execute(&self, sql: &str) -> Result<(), String> {
        admin(&self.url, sql, Ask::Execute).map(drop)
    }

    /// The one integer a query such as `SELECT COUNT(*) FROM t` answers, read in the
    /// schema on a connection of its own.
    pub fn count(&self, sql: &str) -> Result<i64, String> {
        match admin(&self.url, sql, Ask::Count)? {
            Answer::Count(count) => Ok(count),
            _ => unreachable!("a count is asked for"),
        }
    }

    /// Every row a query answers, each value as PostgreSQL writes it as text (`None` for
    /// NULL), read in the schema on a connection of its own: what a test that reads the
    /// catalogue compares.
    pub fn rows(&self, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
        match admin(&self.url, sql, Ask::Rows)? {
            Answer::Rows(rows) => Ok(rows),
            _ => unreachable!("rows are asked for"),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let sql = format!(
            "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS {} CASCADE",
            self.schema
        );
        if let Err(error) = admin(&self.server, &sql, Ask::Execute) {
            eprintln!("scratch schema {} not dropped: {error}", self.schema);
        }
    }
}

/// A transaction another writer holds open on a store (a run's long commit, say), until
/// [`Held::release`] or drop: calls made meanwhile wait for the connection.
pub struct Held {
    release: mpsc::Sender<()>,
    holder: JoinHandle<Result<(), StoreError>>,
}

impl Held {
    /// Opens a transaction on `store` from a thread of its own; returns once it is open.
    pub fn connection_of(store: &Store) -> Held {
        let (release, released) = mpsc::channel::<()>();
        let (holding, held) = mpsc::channel::<()>();
        let store = store.clone();
        let holder = std::thread::spawn(move || {
            store.transaction(|_| {
                holding.send(()).unwrap();
                // A sender dropped (a test that panicked) releases as well.
                let _ = released.recv();
            })
        });
        held.recv().expect("the holder opened its transaction");
        Held { release, holder }
    }

    /// Ends the transaction and waits until the connection is free.
    pub fn release(self) {
        drop(self.release);
        self.holder
            .join()
            .expect("the holder did not panic")
            .expect("the held transaction committed");
    }
}

/// What [`admin`] makes of its statements.
enum Ask {
    Execute,
    Count,
    Rows,
}

enum Answer {
    Done,
    Count(i64),
    Rows(Vec<Vec<Option<String>>>),
}

/// Runs `sql` on `server` from a thread of its own, whatever runtime the caller is in.
fn admin(server: &str, sql: &str, ask: Ask) -> Result<Answer, String> {
    // Opened as the store opens its own (TLS, the password file), whatever the URL asks.
    let target = Target::parse(server, false).map_err(|e| e.to_string())?;
    let sql = sql.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async {
            let (client, connection) = target
                .open(&target.config)
                .await
                .map_err(|e| super::postgres::describe_error(&e))?;
            let driver = tokio::spawn(connection);
            let done = match ask {
                Ask::Execute => client.batch_execute(&sql).await.map(|()| Answer::Done),
                Ask::Count => client
                    .query_one(&sql, &[])
                    .await
                    .and_then(|row| row.try_get(0))
                    .map(Answer::Count),
                Ask::Rows => client.simple_query(&sql).await.map(|messages| {
                    let rows = messages.iter().filter_map(|message| match message {
                        tokio_postgres::SimpleQueryMessage::Row(row) => Some(
                            (0..row.len())
                                .map(|i| row.get(i).map(str::to_owned))
                                .collect(),
                        ),
                        _ => None,
                    });
                    Answer::Rows(rows.collect())
                }),
            };
            let done = done.map_err(|e| super::postgres::describe_error(&e));
            drop(client);
            let _ = driver.await;
            done
        })
    })
    .join()
    .map_err(|_| "the admin thread panicked".to_owned())?
}
