//! Persistence: opening the database, migrations, and one function per query.
//!
//! The store knows nothing of MCP or of the engine: it speaks in todos, audit entries,
//! runs, node rows, the runs' task rows and questions, all of them plain data. It keeps
//! them in SQLite (a file, the default) or in PostgreSQL (a URL, for several hosts on one
//! store); each query is written once, for both (`sql.rs`).

mod audit;
pub mod chain;
mod changes;
mod commit;
mod grouped;
mod history;
mod listings;
mod migrations;
mod nodes;
pub(crate) mod postgres;
mod rounds;
mod run_tasks;
mod runs;
// Test scaffolding: for this crate's unit tests, and for its integration tests and benches
// through the `testing` feature (see Cargo.toml); no part of the library's API otherwise.
#[cfg(any(test, feature = "testing"))]
mod scratch;
mod shared;
mod sql;
mod todos;
mod wakes;
mod write_tx;
mod written;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{ReentrantMutex, ReentrantMutexGuard};
use rusqlite::{Connection, OpenFlags};

use postgres::Pg;
use sql::Db;
use write_tx::WriteTx;

pub use audit::{AUDIT_ARGS_CAP, AuditEntry, AuditOutcome, AuditRow, ReadyAudit};
pub use commit::{AuditRecord, Batch, Write};
pub use history::{HistoryQuery, HistoryRow};
pub use listings::{AuditQuery, ListedRun, RunQuery};
pub use nodes::NodeRow;
pub use postgres::{
    PgOptions, is_url, logs_statement_parameters, password_file, redacted, url_holds_password,
};
pub use run_tasks::{QuestionRow, RunHead, TaskRow, TaskTiming};
pub use runs::{
    ChildRow, NewParent, NewRun, NewRunTask, Owner, ParentRef, RunEnd, RunEndRow, RunPollRow,
    RunRow, RunSummary, Scope,
};
#[cfg(any(test, feature = "testing"))]
pub use scratch::{Held, Scratch, TEST_POSTGRES, note_skipped};
pub use todos::{NewTodo, Todo, TodoFilter, TodoStatus};
pub use wakes::Wakes;
pub use written::{FileWrite, WrittenFile};

/// Process-wide SQLite settings, made once, before the first connection opens.
///
/// Why turn memory statistics off: with them on, every allocation SQLite makes takes a
/// global mutex, which cost a sixth of the time of a durable run's commits. SQLite's own
/// guidance recommends building with them off; this does the same at run time. A call
/// after SQLite has started (another library opened a connection first) is refused by
/// SQLite and changes nothing.
fn configure_sqlite() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `sqlite3_config` with this option takes one int argument; it runs once,
        // before this process opens a connection through this module.
        unsafe {
            rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 0);
        }
    });
}

/// The page cache of a connection, in KiB.
const CACHE_KIB: i64 = 32 * 1024;
/// Prepared statements kept per connection: more than this module has queries.
const STATEMENT_CACHE: usize = 128;

/// How long a statement waits for a lock held by another connection before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `step` again while the database is busy, for up to [`BUSY_TIMEOUT`].
///
/// Why: while another process turns a fresh file into a WAL database and migrates it,
/// SQLite answers some steps of opening with `SQLITE_BUSY` at once, without waiting in the
/// busy handler (waiting there could deadlock two connections that both hold a read
/// lock). Trying again shortly after is what the busy handler would have done.
fn while_busy<T>(mut step: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
    let started = std::time::Instant::now();
    loop {
        match step() {
            Err(StoreError::Sqlite(error))
                if error.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            done => return done,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open database at {path}")]
    Open {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("database schema version {found} is newer than this build understands ({supported})")]
    SchemaTooNew { found: i64, supported: i64 },
    #[error("the database file is damaged ({detail}); restore it from a backup")]
    Corrupt { detail: String },
    #[error("the database is read-only and its schema is not initialised (version {found})")]
    ReadOnlyUninitialised { found: i64 },
    #[error("run {run_id} is driven by another process now")]
    LeaseLost { run_id: String },
    #[error("commit failed: {0}")]
    Commit(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("bad database location: {0}")]
    BadLocation(String),
    #[error("the database is busy: {0}")]
    Busy(String),
    #[error("cannot reach PostgreSQL at {target}: {reason}")]
    Unreachable { target: String, reason: String },
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// Not marked as the source: its message already holds the server's, which the source
    /// chain would repeat.
    #[error("PostgreSQL: {}", postgres::describe_error(.0))]
    Postgres(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> StoreError {
        StoreError::Postgres(error)
    }
}

/// How hard a commit works to survive a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=NORMAL`: nothing committed is lost when the process dies; the last
    /// commits may be lost if the machine does.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit waits for the disk.
    Full,
}

/// The connection while one caller holds it; the queries of `todos` and `audit` live here.
pub struct Tx<'c> {
    db: Db<'c>,
    /// SQLite: whether this runs inside a write transaction this module began. SQLite
    /// rolls a transaction back on its own after some errors (`SQLITE_FULL`, I/O errors):
    /// the statements after would then each commit alone.
    in_transaction: bool,
    /// SQLite: the chain's head as this process last appended it (`audit.rs`).
    audit_head: Option<&'c audit::HeadHint>,
    /// PostgreSQL: the keys of the runs this process made or fenced (`runs.rs`).
    keys: Option<&'c Arc<postgres::RunKeys>>,
}

/// A handle to the database, cheap to clone.
///
/// Why a blocking mutex and not an async one: every statement is a short, local SQLite
/// call (tens of microseconds) and the guard is never held across an `.await`. An async
/// mutex would add a wake-up per call for no benefit; `spawn_blocking` would add two
/// cross-thread hops, which on a small VM cost more than the query itself. Why a
/// re-entrant one: [`Store::reading`] holds the connection across the reads of a whole
/// request, each of which takes it again on the same thread.
#[derive(Clone)]
pub struct Store {
    backend: Backend,
    wakes: Arc<Wakes>,
}

#[derive(Clone)]
enum Backend {
    Sqlite(Arc<Sqlite>),
    Postgres(Arc<Pg>),
}

/// A SQLite database: its one connection, and the queues of the work waiting for it.
struct Sqlite {
    conn: ReentrantMutex<Conn>,
    queue: commit::GroupQueue,
    calls: grouped::CallQueue,
}

impl Store {
    /// Opens the database at `location`: a PostgreSQL URL (`postgres://…`) or a SQLite
    /// path. `durability` is SQLite's; PostgreSQL commits as its server is configured.
    pub fn open_at(location: &str, durability: Durability) -> Result<Store, StoreError> {
        Self::open_at_with(location, durability, PgOptions::default())
    }

    /// [`Store::open_at`], with the pool and authentication options of a PostgreSQL store.
    pub fn open_at_with(
        location: &str,
        durability: Durability,
        postgres: PgOptions,
    ) -> Result<Store, StoreError> {
        if is_url(location) {
            let wakes = Arc::default();
            Ok(Store {
                backend: Backend::Postgres(Arc::new(Pg::connect(location, postgres, &wakes)?)),
                wakes,
            })
        } else {
            Self::open_with(location, durability)
        }
    }

    /// The version the database's schema is at: this build's, once it is open.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        match &self.backend {
            Backend::Sqlite(sqlite) => {
                Ok(sqlite
                    .lock()
                    .pragma_query_value(None, "user_version", |row| row.get(0))?)
            }
            Backend::Postgres(pg) => pg.schema_version(),
        }
    }

    /// What other processes on the database changed, as far as the database tells:
    /// PostgreSQL does, SQLite never (its waiters poll).
    pub fn wakes(&self) -> &Wakes {
        &self.wakes
    }

    /// Which database keeps the store: `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    ///
    /// `path` may also be a SQLite `file:` URI, e.g. `file:tasks.db?mode=ro` to open an
    /// existing database read-only.
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        Self::open_with(path, Durability::Normal)
    }

    /// Like [`Store::open`], with a chosen durability.
    pub fn open_with(path: impl AsRef<Path>, durability: Durability) -> Result<Store, StoreError> {
        configure_sqlite();
        let path = path.as_ref();
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|source| StoreError::Open {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_connection(conn, durability).map_err(|e| match e {
            StoreError::Sqlite(source) => StoreError::Open {
                path: path.display().to_string(),
                source,
            },
            other => other,
        })
    }

    /// An in-memory database, for tests and benchmarks.
    pub fn open_in_memory() -> Result<Store, StoreError> {
        configure_sqlite();
        Self::from_connection(Connection::open_in_memory()?, Durability::Normal)
    }

    fn from_connection(mut conn: Connection, durability: Durability) -> Result<Store, StoreError> {
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Every query of this module is a cached statement, and a request may use a dozen
        // of them: rusqlite's default of 16 would evict and parse them again in turn.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.pragma_update(None, "foreign_keys", true)?;
        // A durable run writes a row per node and reads its plan back on resume: with
        // SQLite's default 2 MiB page cache, most of those touches become `pread` calls
        // once the file outgrows it. A larger cache keeps them in memory. No memory map:
        // in WAL mode every page fetched through one is first looked up in the WAL's
        // index, which cost a small tool call more than the map ever saved it.
        conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
        // Statement and savepoint journals stay in memory rather than in temporary files.
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        // A cached statement whose `LIMIT ?` gets a new value is otherwise planned again at
        // every step (SQLite reads bound limits when it plans): that was a quarter of a
        // `tasks/get`. With a stable query planner a statement keeps its plan.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        if !conn.is_readonly(rusqlite::MAIN_DB)? {
            // WAL lets readers proceed during a write; NORMAL loses nothing on a process
            // crash, which is the failure mode of a stdio child process.
            while_busy(|| Ok(conn.pragma_update(None, "journal_mode", "WAL")?))?;
            let synchronous = match durability {
                Durability::Normal => "NORMAL",
                Durability::Full => "FULL",
            };
            conn.pragma_update(None, "synchronous", synchronous)?;
        }
        while_busy(|| migrations::migrate(&mut conn))?;
        probe(&conn)?;
        Ok(Store {
            backend: Backend::Sqlite(Arc::new(Sqlite {
                conn: ReentrantMutex::new(Conn::new(conn)),
                queue: Default::default(),
                calls: Default::default(),
            })),
            wakes: Arc::default(),
        })
    }

    /// The durability this connection commits with, as SQLite reports it. PostgreSQL's
    /// commits wait for its disk (unless its server is told otherwise): `Full`.
    pub fn durability(&self) -> Result<Durability, StoreError> {
        let Backend::Sqlite(sqlite) = &self.backend else {
            return Ok(Durability::Full);
        };
        let level: i64 = sqlite
            .lock()
            .pragma_query_value(None, "synchronous", |row| row.get(0))?;
        // 2 is FULL and 3 EXTRA; 0 (OFF) is never set here.
        Ok(if level >= 2 {
            Durability::Full
        } else {
            Durability::Normal
        })
    }

    /// Whether writes to this database will be refused.
    pub(crate) fn is_read_only(&self) -> bool {
        match &self.backend {
            Backend::Sqlite(sqlite) => sqlite.lock().is_readonly(rusqlite::MAIN_DB).unwrap_or(true),
            Backend::Postgres(_) => false,
        }
    }

    /// Runs `work` inside one write transaction that commits when it returns: a tool's
    /// effect and its audit row then cost one commit, and land together. On a read-only
    /// database no write transaction can start, and the statements run as they come (the
    /// reads succeed, the writes fail). A database that is busy or locked beyond the busy
    /// timeout is an error, never a reason to run the statements apart.
    /// An error is the commit's: then nothing `work` wrote is kept.
    ///
    /// On PostgreSQL, `work` may run again when the connection was lost before the commit
    /// (a restart of the server): it must do nothing but the statements it sends.
    pub fn transaction<T>(&self, mut work: impl FnMut(&Tx<'_>) -> T) -> Result<T, StoreError> {
        self.try_transaction(|tx| Ok(work(tx)))
    }

    /// Like [`Store::transaction`], but an `Err` from `work` rolls everything back.
    pub fn try_transaction<T>(
        &self,
        mut work: impl FnMut(&Tx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let sqlite = match &self.backend {
            Backend::Sqlite(sqlite) => sqlite,
            Backend::Postgres(pg) => {
                return pg.transaction(|session| work(&Tx::postgres(session, &pg.keys)));
            }
        };
        let conn = sqlite.lock();
        match WriteTx::begin(&conn) {
            Ok(tx) => {
                let out = work(&Tx::sqlite_tx(&tx))?;
                Tx::sqlite_tx(&tx).still_open()?;
                tx.commit()?;
                Ok(out)
            }
            Err(_) if conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) => {
                work(&Tx::sqlite(&conn))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Runs `work`, a request's reads, in one read transaction: every read this thread makes
    /// through the store until `work` returns sees one snapshot, and the database's read
    /// lock is taken once instead of once per statement. Writers wait meanwhile, so `work`
    /// must be short, and it must not write (a write transaction cannot start inside it).
    /// PostgreSQL: each read runs as it comes, on a connection of the pool.
    /// The outer error is the transaction's, the inner one `work`'s.
    pub fn reading<T>(&self, work: impl FnOnce() -> T) -> Result<T, StoreError> {
        let Backend::Sqlite(sqlite) = &self.backend else {
            return Ok(work());
        };
        let conn = sqlite.lock();
        if !conn.is_autocommit() {
            // Already inside a transaction of this thread's: its snapshot serves.
            return Ok(work());
        }
        let statement = |sql: &str| -> Result<(), StoreError> {
            conn.prepare_cached(sql)?.raw_execute()?;
            Ok(())
        };
        statement("BEGIN")?;
        let out = work();
        // Nothing was written: ending the transaction only lets the read lock go.
        statement("COMMIT")?;
        Ok(out)
    }

    /// Runs `work` on a connection, each statement committing on its own.
    pub(crate) fn with<T>(
        &self,
        work: impl FnOnce(&Tx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match &self.backend {
            Backend::Sqlite(sqlite) => work(&Tx::sqlite(&sqlite.lock())),
            Backend::Postgres(pg) => {
                postgres::blocking(|| work(&Tx::postgres(&pg.session()?, &pg.keys)))
            }
        }
    }
}

/// Reads the schema and the root page of every table, so that a database whose file is
/// damaged there fails to open with a clear error, rather than failing call after call
/// once serving. A cheap look, not a full check: `db verify` runs SQLite's `quick_check`.
fn probe(conn: &Connection) -> Result<(), StoreError> {
    let looked = (|| -> rusqlite::Result<()> {
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")?
            .query_map([], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        for table in tables {
            // The name comes from the schema, quoted as an identifier.
            let sql = format!("SELECT 1 FROM \"{}\" LIMIT 1", table.replace('"', "\"\""));
            conn.query_row(&sql, [], |_| Ok(()))
                .or_else(|error| match error {
                    rusqlite::Error::QueryReturnedNoRows => Ok(()),
                    error => Err(error),
                })?;
        }
        Ok(())
    })();
    looked.map_err(corrupt_or)
}

/// A SQLite error that says the file is damaged, as [`StoreError::Corrupt`].
fn corrupt_or(error: rusqlite::Error) -> StoreError {
    match error.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            StoreError::Corrupt {
                detail: error.to_string(),
            }
        }
        _ => StoreError::Sqlite(error),
    }
}

impl Store {
    /// SQLite's `PRAGMA quick_check` (every page read, no index compared): `None` when it
    /// finds nothing wrong, else its first finding. PostgreSQL checks its own pages.
    pub(crate) fn quick_check(&self) -> Result<Option<String>, StoreError> {
        let Backend::Sqlite(sqlite) = &self.backend else {
            return Ok(None);
        };
        let found: String = sqlite
            .lock()
            .query_row("PRAGMA quick_check(1)", [], |row| row.get(0))
            .map_err(corrupt_or)?;
        Ok((found != "ok").then_some(found))
    }
}

impl Sqlite {
    /// The connection. A panic while holding it cannot leave SQLite inconsistent (an open
    /// transaction is rolled back when its guard drops), so the lock knows no poisoning.
    fn lock(&self) -> ReentrantMutexGuard<'_, Conn> {
        self.conn.lock()
    }
}

/// The SQLite connection, with what this process remembers of its database between
/// transactions. Only hints: the statement that uses one checks it, so that a hint gone
/// stale (another process wrote, a transaction rolled back) costs a statement, never a
/// wrong row.
pub(crate) struct Conn {
    connection: Connection,
    audit_head: audit::HeadHint,
}

impl Conn {
    fn new(connection: Connection) -> Conn {
        Conn {
            connection,
            audit_head: audit::HeadHint::default(),
        }
    }
}

impl std::ops::Deref for Conn {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.connection
    }
}

impl<'c> Tx<'c> {
    fn sqlite(conn: &'c Conn) -> Tx<'c> {
        Tx {
            db: Db::Sqlite(&conn.connection),
            in_transaction: false,
            audit_head: Some(&conn.audit_head),
            keys: None,
        }
    }

    /// Inside the write transaction `tx`.
    fn sqlite_tx(tx: &'c WriteTx<'_>) -> Tx<'c> {
        Tx {
            in_transaction: true,
            ..Tx::sqlite(tx.conn())
        }
    }

    fn postgres(session: &'c postgres::Session, keys: &'c Arc<postgres::RunKeys>) -> Tx<'c> {
        Tx {
            db: Db::Postgres(session),
            in_transaction: false,
            audit_head: None,
            keys: Some(keys),
        }
    }

    /// Whether this runs on a database opened read-only (SQLite's `mode=ro`), where every
    /// write fails.
    pub(crate) fn on_read_only_database(&self) -> bool {
        match self.db {
            Db::Sqlite(conn) => conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false),
            Db::Postgres(_) => false,
        }
    }

    /// Runs every statement made so far in this transaction and checks it, before the
    /// caller does something outside the database that they must precede (a file renamed
    /// into place under a lease just extended). PostgreSQL sends the statements whose
    /// results nobody reads with the transaction's next round trip: this is one; SQLite
    /// has run each already.
    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        match self.db {
            Db::Sqlite(_) => Ok(()),
            Db::Postgres(session) => session.flush(),
        }
    }

    /// `Err` when the database has rolled back the transaction this runs in (SQLite may,
    /// after a disk-full or I/O error): nothing may be written or acknowledged after.
    /// PostgreSQL refuses every statement of an aborted transaction by itself.
    pub(crate) fn still_open(&self) -> Result<(), StoreError> {
        match self.db {
            Db::Sqlite(conn) if self.in_transaction && conn.is_autocommit() => Err(
                StoreError::Commit("the database rolled the transaction back".into()),
            ),
            _ => Ok(()),
        }
    }
}
