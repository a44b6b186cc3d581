//! PostgreSQL, the shared backend: several hosts on one store.
//!
//! The store's interface is synchronous, because SQLite's is and because every guarantee
//! of the layers above (a tool's effect and its audit row in one transaction) is written
//! as a closure over a transaction. PostgreSQL is reached through `tokio-postgres`, with a
//! `deadpool-postgres` pool, and bridged:
//!
//! - the pool's connections live on a current-thread runtime with no thread of its own
//!   (`Drive`): a caller waiting for its statement drives that runtime itself, so that it
//!   writes its request and sleeps in the poll for the socket's answer on its own thread.
//!   A round trip then wakes one thread, the caller's, when the answer comes; a runtime
//!   thread between caller and socket would add two wake-ups of threads to each. While one
//!   caller drives, another waits for its answer as before: the driving thread runs its
//!   connection and wakes it;
//! - the listener for other hosts' changes, which must be read while no caller waits,
//!   lives on a runtime with a thread of its own (`pg-io`);
//! - on a multi-threaded runtime the wait is announced with `block_in_place`, so that the
//!   runtime moves its other tasks to another thread meanwhile.

pub(super) mod connect;
mod guard;
mod listen;
mod password;
mod schema;
mod session;
mod tls;
pub use password::password_file;
pub(crate) use session::{OnError, Session, Then};

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::config::Host;

use connect::{Connector, Target};

use super::StoreError;
use super::wakes::Wakes;

/// How long a caller waits for a new connection to open, trying again meanwhile.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a transaction whose connection was lost is tried again: long enough for the
/// server to restart.
const RECONNECT_WINDOW: Duration = Duration::from_secs(30);

/// How a process reaches PostgreSQL, beyond what the URL says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgOptions {
    /// Connections the process keeps open at most.
    pub pool_size: usize,
    /// How long a call waits for a free connection when all are in use.
    pub pool_timeout: Duration,
    /// Answer a server that asks for the password in clear text or as an MD5 hash on a
    /// connection without TLS (refused by default: anyone on the way could read it).
    pub allow_insecure_auth: bool,
}

impl Default for PgOptions {
    fn default() -> PgOptions {
        PgOptions {
            pool_size: 16,
            pool_timeout: Duration::from_secs(30),
            allow_insecure_auth: false,
        }
    }
}
/// How long a connection may sit inside a transaction without sending its next statement
/// before PostgreSQL ends its session. A host stalled mid-transaction (stopped, paused, or
/// cut off while its connection stays open) would otherwise keep its runs' rows locked for
/// as long as the server keeps the connection, and other hosts' claims skip locked rows:
/// its runs would never be taken over. The store's transactions send their statements
/// back to back, so a live host never comes near this.
const STALLED_TRANSACTION: &str = "5s";

/// Whether `location` names a PostgreSQL database rather than a SQLite file.
pub fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// Whether an event would log a statement's parameters: `tokio-postgres` logs them at
/// `debug` (through the `log` crate), and some are secrets (the key of the `secrets`
/// table, when it is made). A logger should drop such events whatever its level.
pub fn logs_statement_parameters(metadata: &tracing::Metadata<'_>) -> bool {
    metadata.target() == "tokio_postgres::query" && *metadata.level() >= tracing::Level::DEBUG
}

/// Whether `location` is a PostgreSQL URL that holds a password itself.
pub fn url_holds_password(location: &str) -> bool {
    is_url(location)
        && connect::read_url(location).is_ok_and(|(config, _, _)| config.get_password().is_some())
}

/// A database location fit for a log line: a PostgreSQL URL without its user and password
/// (`host:port/database`); a SQLite path as it is.
pub fn redacted(location: &str) -> String {
    if !is_url(location) {
        return location.to_owned();
    }
    match connect::read_url(location) {
        Ok((config, _, _)) => format!("postgres://{}", describe(&config)),
        Err(_) => "postgres://(a URL that does not parse)".to_owned(),
    }
}

/// The keys of the runs this process made or fenced, by run id: a run's key never changes, and
/// knowing it lets a batch's fence go out with the rest of its transaction instead of in
/// a round trip of its own (`runs.rs`). Only a hint: the fence checks the run's id too, and
/// a run gone or finished fails it as a run held by another owner does.
#[derive(Default)]
pub(crate) struct RunKeys(parking_lot::Mutex<std::collections::HashMap<String, i64>>);

/// Keys remembered at most; past it the table starts again.
const KEYS_KEPT: usize = 4096;

impl RunKeys {
    pub(crate) fn get(&self, run_id: &str) -> Option<i64> {
        self.0.lock().get(run_id).copied()
    }

    pub(crate) fn remember(&self, run_id: &str, key: i64) {
        let mut keys = self.0.lock();
        if keys.len() >= KEYS_KEPT {
            keys.clear();
        }
        keys.insert(run_id.to_owned(), key);
    }
}

/// The pool and the runtime that drives its connections.
pub(crate) struct Pg {
    pool: Pool,
    /// The keys of runs this process made or fenced.
    pub(crate) keys: Arc<RunKeys>,
    /// The transactions shared by the runs and calls ready at once (`store/shared.rs`).
    pub(super) lane: super::shared::Lane,
    /// Where the database is, for messages: host, port and database, never the password.
    target: String,
    options: PgOptions,
    /// The pool's connections' runtime, driven by their callers.
    drive: Drive,
    /// The listener's runtime.
    io: Io,
}

/// The listener's runtime; dropped in the background, since the last handle to a store
/// may go inside another runtime, where a blocking shutdown is refused.
struct Io(Option<tokio::runtime::Runtime>);

impl Drop for Io {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// The current-thread runtime the pool's connections live on, driven by whichever caller
/// waits for one of them ([`Drive::wait`]).
#[derive(Clone)]
pub(crate) struct Drive(Arc<Io>);

impl Drive {
    fn new() -> std::io::Result<Drive> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Drive(Arc::new(Io(Some(runtime)))))
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        (self.0)
            .0
            .as_ref()
            .expect("the runtime lives as long as its handles")
    }

    /// Waits on this thread for `future`, a request on a connection of the pool, driving
    /// the connections meanwhile. Where this thread is inside a current-thread runtime
    /// (a test's, say), which cannot run another, a thread of the moment drives them
    /// while this one waits.
    pub(crate) fn wait<F: Future>(&self, future: F) -> F::Output {
        blocking(|| {
            let runtime = self.runtime();
            if OUTSIDE_RUNTIME.get() {
                return runtime.block_on(future);
            }
            // Whatever `future` spawns (a new connection's task) and its timers go to the
            // connections' runtime, not to the one this thread is in.
            let _context = runtime.enter();
            let (done, finished) = tokio::sync::oneshot::channel::<()>();
            std::thread::scope(|scope| {
                scope.spawn(move || runtime.block_on(finished));
                let out = block_on(future);
                drop(done);
                out
            })
        })
    }

    /// Lets the connections catch up with what their sockets say: a connection the server
    /// closed while nobody drove it is then known closed, and one dropped is closed.
    /// It is a task of that runtime, which yields twice: the runtime polls its sockets
    /// at the first yield, and runs the connections woken before the second ends.
    pub(crate) fn settle(&self) {
        let _ = self.wait(self.settling());
    }

    /// The task [`Drive::settle`] waits for. It yields on the connections' runtime, never
    /// on the caller's: a yield there could wait for a runtime the caller blocks.
    fn settling(&self) -> tokio::task::JoinHandle<()> {
        self.runtime().spawn(async {
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
        })
    }
}

impl Pg {
    /// Opens a pool on the database `url` names and brings its schema up to date.
    pub(crate) fn connect(
        url: &str,
        options: PgOptions,
        wakes: &Arc<Wakes>,
    ) -> Result<Pg, StoreError> {
        let mut target = Target::parse(url, options.allow_insecure_auth)?;
        if target.config.get_application_name().is_none() {
            target.config.application_name("mcp-task-server");
        }
        let config = target.config.clone();
        let described = describe(&config);
        let drive = Drive::new()
            .map_err(|error| StoreError::Commit(format!("cannot start a runtime: {error}")))?;
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("pg-io")
            .enable_all()
            .build()
            .map_err(|error| StoreError::Commit(format!("cannot start a runtime: {error}")))?;
        let manager = Manager::from_connect(
            config,
            Connector(target.clone()),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(options.pool_timeout))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .post_create(Hook::async_fn(|client, _| {
                Box::pin(async move {
                    let set = format!(
                        "SET idle_in_transaction_session_timeout = '{STALLED_TRANSACTION}'"
                    );
                    client.batch_execute(&set).await.map_err(HookError::Backend)
                })
            }))
            .build()
            .map_err(|error| StoreError::BadLocation(error.to_string()))?;
        let weak = Arc::new(pool.weak());
        crate::telemetry::metrics::connection_pool("postgres", move || {
            let status = weak.upgrade()?.status();
            let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
            Some(crate::telemetry::metrics::PoolStatus {
                open: count(status.size),
                idle: count(status.available),
                max: count(status.max_size),
                waiting: count(status.waiting),
            })
        });
        let pg = Pg {
            pool,
            keys: Arc::default(),
            lane: Default::default(),
            target: described,
            options,
            drive,
            io: Io(Some(io)),
        };
        schema::migrate(&pg)?;
        // Once open, a store hears every change made after: it waits until it listens. A
        // listener that cannot connect is no reason to refuse the store; its waiters poll.
        let listening = listen::spawn(pg.runtime(), target, wakes);
        let timeout = pg
            .runtime()
            .spawn(async move { tokio::time::timeout(CONNECT_TIMEOUT, listening).await });
        if !matches!(wait(timeout), Ok(Ok(Ok(())))) {
            tracing::warn!(target = %pg.target, "not listening for other hosts' changes yet; polling meanwhile");
        }
        Ok(pg)
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.io
            .0
            .as_ref()
            .expect("the runtime lives as long as the pool")
    }

    pub(crate) fn schema_version(&self) -> Result<i64, StoreError> {
        schema::version(&self.session()?)
    }

    /// A connection of the pool, each statement committing on its own. A connection that
    /// cannot be opened is tried again, for up to [`CONNECT_TIMEOUT`]: nothing was sent,
    /// so trying again is safe.
    pub(crate) fn session(&self) -> Result<Session, StoreError> {
        let started = Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            let pool = self.pool.clone();
            // Opening a connection spawns its task, and registers its socket and its
            // timers, in the connections' runtime, which its callers drive. The yields
            // first let that runtime hear of connections the server closed meanwhile, so
            // that the pool passes over them.
            let settled = self.drive.settling();
            let got = self.drive.wait(async {
                let _ = settled.await;
                pool.get().await
            });
            match got {
                Ok(client) => {
                    return Ok(Session::new(client, self.drive.clone()));
                }
                Err(deadpool_postgres::PoolError::Timeout(
                    deadpool_postgres::TimeoutType::Wait,
                )) => {
                    return Err(StoreError::Busy(format!(
                        "all {} connections to PostgreSQL at {} stayed in use for {:?}; \
                         raise --pg-pool-size or --pg-pool-timeout if the load is expected",
                        self.options.pool_size, self.target, self.options.pool_timeout
                    )));
                }
                // The server answered (a wrong password, no such database), or its
                // certificate or its way of asking for the password was refused: trying
                // again would only repeat the answer.
                Err(deadpool_postgres::PoolError::Backend(error)) if final_answer(&error) => {
                    return Err(StoreError::Unreachable {
                        target: self.target.clone(),
                        reason: describe_error(&error),
                    });
                }
                Err(error) if started.elapsed() + pause < CONNECT_TIMEOUT => {
                    tracing::debug!(target = %self.target, error = %chain(&error), "PostgreSQL not reached; trying again");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(error) => {
                    return Err(StoreError::Unreachable {
                        target: self.target.clone(),
                        reason: chain(&error),
                    });
                }
            }
        }
    }

    /// Runs `work` in one transaction, committed when it returns `Ok` and rolled back
    /// otherwise. A statement that failed inside fails the commit too: PostgreSQL will
    /// have aborted the transaction, and nothing of it is kept.
    ///
    /// When the connection is lost before the commit is sent (the server restarted, or
    /// ended the session), nothing of the transaction was kept either: `work` runs again
    /// on a new connection, for up to [`RECONNECT_WINDOW`], so that a restart of the
    /// server fails no run; so is a connection found closed just before the commit (the
    /// server's notice that it ends the session closed it while `work` ran). A connection
    /// lost during the commit is an error: the server may or may not have committed, and
    /// running `work` again could do it twice.
    pub(crate) fn transaction<T>(
        &self,
        work: impl FnMut(&Session) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // One announcement of the wait for the whole transaction, its round trips and its
        // retries.
        blocking(|| self.transaction_blocking(work))
    }

    fn transaction_blocking<T>(
        &self,
        mut work: impl FnMut(&Session) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let mut retrying = false;
        loop {
            let session = match self.session() {
                Err(StoreError::Unreachable { .. })
                    if retrying && started.elapsed() < RECONNECT_WINDOW =>
                {
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
                session => session?,
            };
            let out = Self::attempt(&session, &mut work);
            if out.is_err()
                && session.lost.get()
                && !session.committing.get()
                && started.elapsed() < RECONNECT_WINDOW
            {
                tracing::info!(target = %self.target, "connection to PostgreSQL lost inside a transaction; nothing of it was kept, running it again");
                retrying = true;
                continue;
            }
            return out;
        }
    }

    fn attempt<T>(
        session: &Session,
        work: &mut impl FnMut(&Session) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        session.begin();
        let out = work(session);
        // A fence that found the run held by another owner is the transaction's failure,
        // whatever `work` made of the errors that followed it.
        let lease_lost = session.lease_lost.borrow_mut().take();
        let out = match (out, lease_lost) {
            (_, Some(run_id)) => Err(StoreError::LeaseLost { run_id }),
            (Ok(_), None) if session.failed.get() => Err(StoreError::Commit(
                "a statement of the transaction failed; nothing of it was kept".into(),
            )),
            (out, None) => out,
        };
        match out {
            // The server ended the session before the commit was sent (its notice closed
            // the connection while `work` ran): nothing of it was kept.
            Ok(_) if session.closed() => {
                session.lost.set(true);
                Err(StoreError::Commit(
                    "the connection to PostgreSQL closed before the commit".into(),
                ))
            }
            Ok(value) => {
                session.commit()?;
                Ok(value)
            }
            Err(error) => {
                // On a lost connection the rollback fails too; the session then closes
                // its connection rather than return it to the pool.
                let _ = session.rollback().map_err(|rollback| {
                    if !session.lost.get() {
                        tracing::warn!(error = %rollback, "rollback failed");
                    }
                });
                Err(error)
            }
        }
    }
}

/// What went wrong, in words: the server's own message (which `tokio-postgres`'s display
/// leaves out: "db error") and its code, or the error with its causes.
pub(crate) fn describe_error(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => tls::certificate_refused(error).unwrap_or_else(|| chain(error)),
    }
}

/// Whether `error` is an answer that trying again would repeat: the server's own, a
/// certificate refused, or a password request refused (see `guard`). A server shutting
/// down or starting up (`cannot_connect_now` and the rest of class 57P) answers for the
/// moment only: a restart is waited out.
fn final_answer(error: &tokio_postgres::Error) -> bool {
    if let Some(db) = error.as_db_error() {
        return !db.code().code().starts_with("57P");
    }
    if tls::certificate_refused(error).is_some() {
        return true;
    }
    causes(error).any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
    })
}

/// `error` and its causes, the error an `io::Error` wraps included (its `source` skips it).
fn causes<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |error| {
        match error.downcast_ref::<std::io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as _),
            None => error.source(),
        }
    })
}

/// Whether `error` says the connection is gone: closed, or ended by the server
/// (`admin_shutdown`, `crash_shutdown`, `idle_session_timeout` and the like, class 57P).
pub(super) fn connection_lost(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.as_db_error() {
        Some(db) => db.code().code().starts_with("57P"),
        None => causes(error).any(|cause| cause.downcast_ref::<std::io::Error>().is_some()),
    }
}

/// An error with its causes, `a: b: c`.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

/// `host:port/database`, for messages.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config.get_dbname().unwrap_or("postgres");
    format!("{host}:{port}/{database}")
}

/// Waits on this thread for `future`, which needs no runtime to make progress (its I/O is
/// done by the listener's runtime).
pub(super) fn wait<F: Future>(future: F) -> F::Output {
    blocking(|| block_on(future))
}

thread_local! {
    /// Whether this thread has announced that it blocks ([`blocking`]).
    static BLOCKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether, having announced it, this thread is outside any runtime, where it may
    /// drive one.
    static OUTSIDE_RUNTIME: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `work`, which waits on this thread for the database, having told the runtime
/// once: on a multi-threaded runtime, `block_in_place` hands this worker's other tasks to
/// another thread meanwhile, which costs a wake-up of that thread, so a transaction
/// announces it once for all its round trips rather than once for each.
pub(crate) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    if BLOCKING.get() {
        return work();
    }
    let flavor = tokio::runtime::Handle::try_current()
        .ok()
        .map(|runtime| runtime.runtime_flavor());
    let multi_threaded = flavor == Some(tokio::runtime::RuntimeFlavor::MultiThread);
    /// Says the thread no longer blocks, however `work` ends.
    struct Announced;
    impl Drop for Announced {
        fn drop(&mut self) {
            BLOCKING.set(false);
            OUTSIDE_RUNTIME.set(false);
        }
    }
    // Inside `block_in_place` a thread has left its runtime. In a current-thread
    // runtime's context, it may be running that runtime (or be one of its blocking
    // threads: there is no telling which).
    let outside = flavor.is_none() || multi_threaded;
    let announced = || {
        BLOCKING.set(true);
        OUTSIDE_RUNTIME.set(outside);
        let _announced = Announced;
        work()
    };
    if multi_threaded {
        tokio::task::block_in_place(announced)
    } else {
        announced()
    }
}

/// Polls `future` to its end on this thread. Inside a current-thread runtime, a
/// `JoinHandle` polled here spends the budget of the task this thread is running; once
/// spent, it waits for a wake that runtime defers until the task yields, which it cannot
/// while blocked here. Unconstrained, it is never out of budget (`block_in_place` lifts the
/// budget likewise).
fn block_on<F: Future>(future: F) -> F::Output {
    futures::executor::block_on(tokio::task::unconstrained(future))
}
