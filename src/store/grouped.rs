//! Group commit of concurrent tool calls: calls that arrive while the connection is busy
//! share the next transaction, so that many calls pay for one `COMMIT` (its locks and its
//! WAL writes, most of a small call's cost) instead of one each.
//!
//! There is no committer thread. The first caller to queue a call while no one drains
//! becomes the drainer: it yields once, so that the calls already ready on the runtime
//! (the rest of a burst of requests) queue theirs behind it, then runs every call queued
//! in one transaction on its own thread, and goes on while more arrive. One call alone
//! pays one yield and no hand-off. A caller that finds a drainer only queues its call and
//! awaits the result. When the connection is held by other work (a run's commit, a read),
//! a blocking-pool thread waits for it, so that no async worker blocks.
//!
//! Invariant: a call's result is delivered only after the transaction holding its writes
//! has committed; if the commit fails, every call of the group fails and none of their
//! writes is kept.
//! Invariant: a call whose work fails (its audit row refused included) is undone alone,
//! and the others commit. The calls of a group first run one after another in the
//! transaction itself, which is all a group of calls that succeed pays for; if one fails,
//! that transaction is rolled back whole, and the group runs again in a new one, each call
//! under a savepoint of its own (so a call's work may run twice; nothing of its first run
//! is kept).

use std::future::Future;
use std::sync::Mutex;

use futures::future::Either;
use tokio::sync::oneshot;

use super::write_tx::WriteTx;
use super::{Backend, Conn, Sqlite, Store, StoreError, Tx};

/// A call waiting for a transaction: run inside it, then told whether it committed.
trait Call: Send {
    /// Runs the call's work; false when it failed, and its writes are to be undone.
    fn run(&mut self, tx: &Tx<'_>) -> bool;
    fn finish(self: Box<Self>, committed: Result<(), StoreError>);
}

struct Pending<T, F> {
    work: F,
    out: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> Call for Pending<T, F>
where
    T: Send,
    F: FnMut(&Tx<'_>) -> Result<T, StoreError> + Send,
{
    fn run(&mut self, tx: &Tx<'_>) -> bool {
        let out = (self.work)(tx).and_then(|out| tx.still_open().map(|()| out));
        let ok = out.is_ok();
        self.out = Some(out);
        ok
    }

    fn finish(self: Box<Self>, committed: Result<(), StoreError>) {
        let Pending { out, reply, .. } = *self;
        let result = committed.and_then(|()| {
            out.unwrap_or_else(|| Err(StoreError::Commit("the call did not run".into())))
        });
        // The caller may have gone (its request was dropped); its writes stand.
        let _ = reply.send(result);
    }
}

#[derive(Default)]
pub(super) struct Calls {
    queued: Vec<Box<dyn Call>>,
    /// Whether a drainer holds (or waits for) the connection and will see what is queued.
    draining: bool,
}

pub(super) type CallQueue = Mutex<Calls>;

fn lock_calls(calls: &CallQueue) -> std::sync::MutexGuard<'_, Calls> {
    calls
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Store {
    /// Runs `work` in a write transaction shared with the calls that arrive meanwhile, and
    /// resolves once that transaction has committed. `work` runs under a savepoint of its
    /// own: when it returns `Err`, what it wrote is undone and the other calls still
    /// commit. An `Err` is `work`'s or the commit's: either way nothing `work` wrote is
    /// kept.
    pub fn grouped<T, F>(
        &self,
        work: F,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + use<T, F>
    where
        T: Send + 'static,
        F: FnMut(&Tx<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        // PostgreSQL: the call shares a transaction with the runs' and the other calls'
        // that are ready at once (`shared.rs`).
        if let Backend::Postgres(_) = self.backend {
            let store = self.clone();
            return Either::Left(async move { store.shared(work) });
        }
        let (reply, result) = oneshot::channel();
        let drains = self.enqueue(Box::new(Pending {
            work,
            out: None,
            reply,
        }));
        let mut drainer = Drainer(drains.then(|| self.clone()));
        Either::Right(async move {
            if drainer.0.is_some() {
                YieldOnce(false).await;
                if let Some(store) = drainer.0.take() {
                    store.drain_soon();
                }
            }
            result
                .await
                .unwrap_or_else(|_| Err(StoreError::Commit("the commit was abandoned".into())))
        })
    }

    fn sqlite(&self) -> &Sqlite {
        match &self.backend {
            Backend::Sqlite(sqlite) => sqlite,
            Backend::Postgres(_) => unreachable!("only SQLite calls are queued"),
        }
    }

    /// Queues `call`; true if the caller is to drain the queue.
    fn enqueue(&self, call: Box<dyn Call>) -> bool {
        let mut calls = lock_calls(&self.sqlite().calls);
        calls.queued.push(call);
        !std::mem::replace(&mut calls.draining, true)
    }

    /// Drains the queue on this thread if the connection is free, else on a blocking
    /// thread once it is.
    fn drain_soon(&self) {
        // Held by this thread inside a transaction (`Store::reading`) is not free: the
        // group's write transaction could not start in it.
        match self.sqlite().conn.try_lock() {
            Some(conn) if conn.is_autocommit() => self.drain(&conn),
            _ => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    let store = self.clone();
                    runtime.spawn_blocking(move || store.drain(&store.sqlite().lock()));
                }
                Err(_) => self.drain(&self.sqlite().lock()),
            },
        }
    }

    /// Commits what is queued, group after group, until nothing is.
    fn drain(&self, conn: &Conn) {
        loop {
            let group = {
                let mut calls = lock_calls(&self.sqlite().calls);
                if calls.queued.is_empty() {
                    calls.draining = false;
                    return;
                }
                std::mem::take(&mut calls.queued)
            };
            commit_calls(conn, group);
        }
    }
}

/// Yields once: the task wakes itself, which puts it at the back of its worker's run
/// queue, behind the requests already read. `tokio::task::yield_now` would also wait for a
/// poll of the I/O driver first, one more system call (`epoll_wait`) for every call that
/// comes alone; a drainer yields once a group, so it cannot starve the driver.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// The duty to drain, which a drainer dropped before it drained (its request cancelled)
/// still carries out: otherwise the calls queued behind it would wait forever.
struct Drainer(Option<Store>);

impl Drop for Drainer {
    fn drop(&mut self) {
        if let Some(store) = self.0.take() {
            store.drain_soon();
        }
    }
}

/// One transaction for the group. Its calls run one after another in it; when one fails
/// (its work's error: a constraint, its audit row that could not be written), that
/// transaction is rolled back and the group runs again in a new one, each call under a
/// savepoint of its own, so that the failing call is rolled back alone and the others
/// commit. Savepoints cost each call two statements and a copy of every page it changes:
/// only a group with a failure pays for them.
///
/// Invariant: no call is acknowledged unless the transaction that holds all its writes
/// committed. SQLite rolls the whole transaction back on its own after some errors
/// (`SQLITE_FULL`, I/O errors), savepoints included, and the statements after would each
/// commit alone: once the connection is found back in autocommit mode, every call of the
/// group is failed, those already run (whose writes are gone) and those not yet run (which
/// never run), so that a client may retry any of them without doubling its effect.
///
/// On a read-only database no write transaction can start: the calls run as they come
/// (their reads succeed, their writes fail).
fn commit_calls(conn: &Conn, mut group: Vec<Box<dyn Call>>) {
    crate::telemetry::metrics::commit_group(group.len());
    let tx = match WriteTx::begin(conn) {
        Ok(tx) => tx,
        Err(_) if conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) => {
            for mut call in group {
                call.run(&Tx::sqlite(conn));
                call.finish(Ok(()));
            }
            return;
        }
        Err(error) => return fail_all(group, &error.into()),
    };
    let mut failed = false;
    for call in &mut group {
        failed = !call.run(&Tx::sqlite_tx(&tx));
        if tx.is_autocommit() {
            return fail_all(group, &rolled_back());
        }
        if failed {
            break;
        }
    }
    if failed {
        drop(tx);
        // Alone in its group, the failing call is undone with the transaction.
        if group.len() == 1 {
            return group.into_iter().for_each(|call| call.finish(Ok(())));
        }
        return commit_each(conn, group);
    }
    match tx.commit() {
        Ok(()) => group.into_iter().for_each(|call| call.finish(Ok(()))),
        Err(error) => fail_all(group, &error.into()),
    }
}

/// The group again, after a call of it failed: each call under a savepoint of its own.
fn commit_each(conn: &Conn, mut group: Vec<Box<dyn Call>>) {
    let tx = match WriteTx::begin(conn) {
        Ok(tx) => tx,
        Err(error) => return fail_all(group, &error.into()),
    };
    for call in &mut group {
        if let Err(error) = run_one(&tx, call.as_mut()) {
            return fail_all(group, &error);
        }
    }
    match tx.commit() {
        Ok(()) => group.into_iter().for_each(|call| call.finish(Ok(()))),
        Err(error) => fail_all(group, &error.into()),
    }
}

/// Runs one call under its savepoint. `Err` when the transaction itself is lost.
fn run_one(tx: &WriteTx<'_>, call: &mut dyn Call) -> Result<(), StoreError> {
    tx.savepoint()?;
    let ok = call.run(&Tx::sqlite_tx(tx));
    if tx.is_autocommit() {
        return Err(rolled_back());
    }
    tx.end_savepoint(ok)?;
    Ok(())
}

fn rolled_back() -> StoreError {
    StoreError::Commit("the database rolled the group's transaction back".into())
}

fn fail_all(group: Vec<Box<dyn Call>>, error: &StoreError) {
    let message = error.to_string();
    tracing::error!(calls = group.len(), error = %message, "a group commit failed: no call of it is kept");
    for call in group {
        call.finish(Err(StoreError::Commit(message.clone())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewTodo, TodoFilter};

    fn add(title: &str) -> impl FnMut(&Tx<'_>) -> Result<(), StoreError> + Send + 'static {
        let todo = NewTodo {
            title: title.to_owned(),
            due: None,
            tags: Vec::new(),
        };
        move |tx| tx.insert_todo(&todo).map(drop)
    }

    /// A call that adds a todo titled `title`, then fails.
    fn add_then_fail(
        title: &str,
    ) -> impl FnMut(&Tx<'_>) -> Result<(), StoreError> + Send + 'static {
        let mut add = add(title);
        move |tx| {
            add(tx)?;
            Err(StoreError::Commit("refused".into()))
        }
    }

    /// An empty store in memory, and a runtime to await its group commits on.
    fn store_and_runtime() -> (Store, tokio::runtime::Runtime) {
        let store = Store::open_in_memory().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        (store, runtime)
    }

    fn titles(store: &Store) -> Vec<String> {
        let todos = store.list_todos(&TodoFilter::default()).unwrap();
        todos.into_iter().map(|todo| todo.title).collect()
    }

    #[test]
    fn a_call_that_fails_is_undone_alone_and_the_others_of_its_group_commit() {
        let (store, runtime) = store_and_runtime();
        let first = store.grouped(add("first"));
        let failing = store.grouped(add_then_fail("undone"));
        let last = store.grouped(add("last"));
        let (first, failing, last) =
            runtime.block_on(async { (first.await, failing.await, last.await) });
        assert!(first.is_ok() && failing.is_err() && last.is_ok());
        assert_eq!(titles(&store), ["first", "last"]);
    }

    #[test]
    fn a_call_alone_in_its_group_that_fails_keeps_nothing_and_the_next_group_commits() {
        let (store, runtime) = store_and_runtime();
        let failing = runtime.block_on(store.grouped(add_then_fail("undone")));
        assert!(failing.is_err());
        assert!(
            titles(&store).is_empty(),
            "the failed call's write is undone"
        );
        let next = runtime.block_on(store.grouped(add("next")));
        assert!(next.is_ok());
        assert_eq!(titles(&store), ["next"]);
    }

    #[test]
    fn a_transaction_the_database_rolled_back_fails_every_call_of_its_group() {
        let (store, runtime) = store_and_runtime();
        let first = store.grouped(add("first"));
        // What SQLite does on its own after `SQLITE_FULL` or an I/O error mid-transaction:
        // the whole transaction, savepoints included, is rolled back.
        let rolled_back = store.grouped(|tx| tx.db.execute("ROLLBACK", &[]).map(drop));
        let last = store.grouped(add("last"));
        let (first, rolled_back, last) =
            runtime.block_on(async { (first.await, rolled_back.await, last.await) });
        assert!(first.is_err() && rolled_back.is_err() && last.is_err());
        assert!(
            titles(&store).is_empty(),
            "nothing of a failed group is kept"
        );
    }
}
