//! One pooled connection while a caller holds it, and the pipeline of its transaction.
//!
//! A statement whose result nobody reads (`Session::write`: an insert of a row, an update
//! of a run's task, the audit row) is not sent on its own: it waits, encoded, until the
//! transaction next needs an answer, and goes out with that statement, or with the
//! `COMMIT`, as one batch of messages (`tokio-postgres` sends the requests of futures polled
//! together back to back, and the server answers them in order). `BEGIN` waits likewise. A
//! transaction that writes without reading is then one round trip, its `COMMIT` included.
//!
//! A statement that takes a lock every host's commits take turns on (the audit chain's) is
//! held back further, to the `COMMIT`'s own batch (`Session::write_at_commit`): a
//! transaction then holds that lock only while it commits, never while its caller waits
//! for something else. A shared transaction waits, before its commit, for the one before
//! it to commit (`store/shared.rs`); holding the chain's lock meanwhile would stop that
//! one's commit, which needs the lock too, until the server ended the waiting one's idle
//! transaction.
//!
//! Invariant: statements reach the server in the order they were made, but for those held
//! to the `COMMIT`, which go last, in their order; each with its own result checked before
//! the transaction is reported committed; an error of any of them aborts the transaction
//! on the server, so that its `COMMIT` keeps nothing.
//! Invariant: a queued statement's values are encoded when it is queued, against the types
//! the server gave for its parameters, so that it sends exactly what an immediate one
//! would.

use std::cell::{Cell, RefCell};
use std::error::Error;
use std::future::Future;

use bytes::BytesMut;
use deadpool_postgres::Object;
use futures::TryStreamExt;
use tokio_postgres::Statement;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use super::{Drive, connection_lost};
use crate::store::StoreError;
use crate::store::sql::Param;

/// What a queued statement's failure means.
#[derive(Debug, Clone)]
pub(crate) enum OnError {
    /// The transaction fails with the server's error.
    Fail,
    /// A division by zero is the lease fence of run `0` finding no row it may write
    /// (`runs.rs`): the run is driven by another process now.
    LeaseLost(String),
}

/// A statement waiting for the transaction's next round trip.
enum Queued {
    /// A statement without parameters: `BEGIN`, sent with the first statement of the
    /// transaction, a savepoint's, or a lock held to the commit.
    Simple(&'static str),
    Bound {
        statement: Statement,
        values: Vec<Encoded>,
        on_error: OnError,
        /// Given the integer the statement returns in its first row and column, once it
        /// ran: the statement is then sent as a query.
        then: Option<Then>,
    },
}

/// What is done with a queued statement's returned integer.
pub(crate) type Then = Box<dyn FnOnce(i64) + Send>;

/// A value encoded as the server takes it for its parameter's type; `None` is NULL.
#[derive(Debug)]
struct Encoded(Option<Vec<u8>>);

impl ToSql for Encoded {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match &self.0 {
            None => Ok(IsNull::Yes),
            Some(bytes) => {
                out.extend_from_slice(bytes);
                Ok(IsNull::No)
            }
        }
    }

    /// Checked when it was encoded, against the same type.
    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// One pooled connection while a caller holds it.
pub(crate) struct Session {
    client: Option<Object>,
    /// Whether a transaction is open on it (its `BEGIN` may still be queued).
    pub(crate) open: Cell<bool>,
    /// Whether anything of the open transaction has reached the server.
    sent: Cell<bool>,
    /// Whether a statement failed since the transaction began.
    pub(crate) failed: Cell<bool>,
    /// Whether a statement failed because the connection was lost (the server ended the
    /// session, or the socket closed).
    pub(crate) lost: Cell<bool>,
    /// Whether the transaction's `COMMIT` may have reached the server: then whether it was
    /// kept is not known.
    pub(crate) committing: Cell<bool>,
    /// The run whose lease a queued fence found held by another owner, if one did: what
    /// the transaction's failure is, whatever the statements after it answered.
    pub(crate) lease_lost: RefCell<Option<String>>,
    queued: RefCell<Vec<Queued>>,
    /// The runtime the connection lives on, which this session drives while it waits.
    drive: Drive,
    /// Statements held to the `COMMIT`'s batch ([`Session::write_at_commit`]).
    at_commit: RefCell<Vec<Queued>>,
    /// How many of them there were when the savepoint was opened.
    at_savepoint: Cell<usize>,
}

impl Session {
    pub(super) fn new(client: Object, drive: Drive) -> Session {
        Session {
            client: Some(client),
            open: Cell::new(false),
            sent: Cell::new(false),
            failed: Cell::new(false),
            lost: Cell::new(false),
            committing: Cell::new(false),
            lease_lost: RefCell::default(),
            queued: RefCell::default(),
            drive,
            at_commit: RefCell::default(),
            at_savepoint: Cell::new(0),
        }
    }

    pub(crate) fn client(&self) -> &Object {
        self.client.as_ref().expect("the client is held until drop")
    }

    /// Whether the connection is closed, as far as its socket has said by now: nothing
    /// reads the socket between two waits, so its runtime is let run first.
    pub(crate) fn closed(&self) -> bool {
        self.drive.settle();
        self.client().is_closed()
    }

    fn prepared(&self, sql: &str) -> Result<Statement, StoreError> {
        let client = self.client();
        self.noted(self.drive.wait(client.prepare_cached(sql)))
    }

    pub(crate) fn execute(&self, sql: &str, params: &[&dyn Param]) -> Result<u64, StoreError> {
        let statement = self.prepared(sql)?;
        let client = self.client();
        self.pipelined(client.execute_raw(&statement, upcast(params)))
    }

    pub(crate) fn query(
        &self,
        sql: &str,
        params: &[&dyn Param],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let statement = self.prepared(sql)?;
        let client = self.client();
        self.pipelined(async {
            let rows = client.query_raw(&statement, upcast(params)).await?;
            rows.try_collect().await
        })
    }

    /// [`Session::query`] with values only PostgreSQL binds (arrays, say).
    pub(crate) fn query_typed(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let statement = self.prepared(sql)?;
        let client = self.client();
        self.pipelined(client.query(&statement, params))
    }

    /// A statement whose result nobody reads: inside a transaction it goes out with the
    /// transaction's next round trip; an error fails the transaction.
    pub(crate) fn write(&self, sql: &str, params: &[&dyn Param]) -> Result<(), StoreError> {
        self.write_as(sql, params, OnError::Fail)
    }

    /// [`Session::write`] with values only PostgreSQL binds.
    pub(crate) fn write_typed(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(), StoreError> {
        let params: Vec<&dyn ToSql> = params.iter().map(|p| *p as &dyn ToSql).collect();
        self.queue(sql, &params, OnError::Fail)
    }

    /// [`Session::write`], its failure read as `on_error` says.
    pub(crate) fn write_as(
        &self,
        sql: &str,
        params: &[&dyn Param],
        on_error: OnError,
    ) -> Result<(), StoreError> {
        let params: Vec<&dyn ToSql> = upcast(params).collect();
        self.queue(sql, &params, on_error)
    }

    /// [`Session::write`] of a statement that returns an integer (`RETURNING key`), which
    /// `then` is given once the statement ran, before its transaction's end: a hint, kept
    /// whether or not the transaction then commits.
    pub(crate) fn write_then(
        &self,
        sql: &str,
        params: &[&dyn Param],
        then: Then,
    ) -> Result<(), StoreError> {
        let params: Vec<&dyn ToSql> = upcast(params).collect();
        self.queue_then(sql, &params, OnError::Fail, Some(then))
    }

    /// [`Session::write`] of a statement held to the `COMMIT`'s batch: one that takes a lock
    /// every host's commits wait for (the audit chain's), so that the transaction holds
    /// it only while it commits. Outside a transaction, at once. Its error fails the
    /// commit, and with it the transaction.
    pub(crate) fn write_at_commit(
        &self,
        sql: &str,
        params: &[&dyn Param],
    ) -> Result<(), StoreError> {
        let params: Vec<&dyn ToSql> = upcast(params).collect();
        if let Some(made) = self.bound(sql, &params, OnError::Fail, None)? {
            self.at_commit.borrow_mut().push(made);
        }
        Ok(())
    }

    /// Takes the lock `sql` takes (a transaction-level one, without parameters) with the
    /// `COMMIT`'s batch, as [`Session::write_at_commit`] does; once however often the
    /// transaction asks for it, since a lock held is held.
    pub(crate) fn lock_at_commit(&self, sql: &'static str) -> Result<(), StoreError> {
        if !self.open.get() {
            return self.batch(sql);
        }
        let mut held = self.at_commit.borrow_mut();
        if !held
            .iter()
            .any(|q| matches!(q, Queued::Simple(s) if *s == sql))
        {
            held.push(Queued::Simple(sql));
        }
        Ok(())
    }

    fn queue(&self, sql: &str, params: &[&dyn ToSql], on_error: OnError) -> Result<(), StoreError> {
        self.queue_then(sql, params, on_error, None)
    }

    fn queue_then(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        on_error: OnError,
        then: Option<Then>,
    ) -> Result<(), StoreError> {
        if let Some(made) = self.bound(sql, params, on_error, then)? {
            self.queued.borrow_mut().push(made);
        }
        Ok(())
    }

    /// The statement `sql` with its values encoded, to queue; outside a transaction it
    /// runs at once instead, and there is nothing to queue.
    fn bound(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        on_error: OnError,
        then: Option<Then>,
    ) -> Result<Option<Queued>, StoreError> {
        let statement = self.prepared(sql)?;
        if !self.open.get() {
            // Outside a transaction each statement commits on its own, at once.
            let client = self.client();
            let rows = self.pipelined(async {
                let rows = client.query_raw(&statement, params.iter().copied()).await?;
                rows.try_collect::<Vec<_>>().await
            })?;
            if let (Some(then), Some(row)) = (then, rows.first()) {
                then(row.try_get(0)?);
            }
            return Ok(None);
        }
        let types = statement.params();
        if types.len() != params.len() {
            return Err(StoreError::Commit(format!(
                "a statement takes {} values, {} were given",
                types.len(),
                params.len()
            )));
        }
        let values = params
            .iter()
            .zip(types)
            .map(|(value, ty)| encode(*value, ty))
            .collect::<Result<_, _>>()?;
        Ok(Some(Queued::Bound {
            statement,
            values,
            on_error,
            then,
        }))
    }

    /// Sends what is queued and waits for every answer: after it, each statement made so
    /// far has been run, and checked.
    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        if self.queued.borrow().is_empty() {
            return Ok(());
        }
        self.pipelined(async { Ok(()) })
    }

    /// Runs statements given as text, without parameters (schema changes).
    pub(crate) fn batch(&self, sql: &str) -> Result<(), StoreError> {
        self.pipelined(self.client().batch_execute(sql))
    }

    pub(crate) fn begin(&self) {
        self.at_commit.borrow_mut().clear();
        self.queued.borrow_mut().push(Queued::Simple("BEGIN"));
        self.open.set(true);
        self.sent.set(false);
        self.failed.set(false);
    }

    /// Opens a savepoint, sent with the statements that follow it.
    pub(crate) fn savepoint(&self) {
        self.at_savepoint.set(self.at_commit.borrow().len());
        self.queued
            .borrow_mut()
            .push(Queued::Simple("SAVEPOINT member"));
    }

    /// Ends the savepoint: kept, it is released with the statements that follow; else
    /// everything since it is undone now, and the transaction, no longer failed, goes on.
    pub(crate) fn end_savepoint(&self, keep: bool) -> Result<(), StoreError> {
        if keep {
            self.queued
                .borrow_mut()
                .push(Queued::Simple("RELEASE SAVEPOINT member"));
            return Ok(());
        }
        self.queued.borrow_mut().clear();
        self.at_commit
            .borrow_mut()
            .truncate(self.at_savepoint.get());
        self.batch("ROLLBACK TO SAVEPOINT member; RELEASE SAVEPOINT member")?;
        self.failed.set(false);
        self.lease_lost.borrow_mut().take();
        Ok(())
    }

    /// Commits the transaction, with every statement still queued: one round trip. A
    /// transaction that sent nothing and queued nothing but its `BEGIN` costs none.
    pub(crate) fn commit(&self) -> Result<(), StoreError> {
        let held = std::mem::take(&mut *self.at_commit.borrow_mut());
        self.queued.borrow_mut().extend(held);
        let idle =
            !self.sent.get() && matches!(&self.queued.borrow()[..], [Queued::Simple("BEGIN")]);
        if idle {
            self.queued.borrow_mut().clear();
            self.open.set(false);
            return Ok(());
        }
        self.committing.set(true);
        let result = self.pipelined(self.client().batch_execute("COMMIT"));
        // Answered, the `COMMIT` ended the transaction (a rollback, after a statement of it
        // failed); only a lost connection leaves it in doubt.
        if result.is_ok() || !self.lost.get() {
            self.open.set(false);
        }
        result
    }

    /// Rolls the transaction back. What is still queued is never sent; a transaction that
    /// sent nothing needs no round trip.
    pub(crate) fn rollback(&self) -> Result<(), StoreError> {
        self.queued.borrow_mut().clear();
        self.at_commit.borrow_mut().clear();
        if !self.sent.get() {
            self.open.set(false);
            return Ok(());
        }
        self.batch("ROLLBACK")?;
        self.open.set(false);
        Ok(())
    }

    /// Sends what is queued, then `last`, in one batch, and waits for every answer. The
    /// first error is the result: a queued statement's before `last`'s (which then only
    /// says that the transaction was aborted).
    fn pipelined<T>(
        &self,
        last: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, StoreError> {
        let queued = std::mem::take(&mut *self.queued.borrow_mut());
        if self.open.get() {
            self.sent.set(true);
        }
        if queued.is_empty() {
            return self.noted(self.drive.wait(last));
        }
        let client = self.client();
        let sends = queued.iter().map(|queued| async move {
            match queued {
                Queued::Simple(sql) => client.batch_execute(sql).await.map(|()| None),
                Queued::Bound {
                    statement,
                    values,
                    then: None,
                    ..
                } => client
                    .execute_raw(statement, values.iter())
                    .await
                    .map(|_| None),
                Queued::Bound {
                    statement, values, ..
                } => {
                    let rows = client.query_raw(statement, values.iter()).await?;
                    let rows: Vec<tokio_postgres::Row> = rows.try_collect().await?;
                    Ok(rows.first().and_then(|row| row.try_get::<_, i64>(0).ok()))
                }
            }
        });
        let (answers, last) = self.drive.wait(futures::future::join(
            futures::future::join_all(sends),
            last,
        ));
        let mut failed = None;
        for (queued, answer) in queued.into_iter().zip(answers) {
            match (queued, answer) {
                (_, Err(error)) if failed.is_some() => drop(error),
                (Queued::Simple(_), Err(error)) => failed = Some((error, OnError::Fail)),
                (Queued::Bound { on_error, .. }, Err(error)) => failed = Some((error, on_error)),
                (
                    Queued::Bound {
                        then: Some(then), ..
                    },
                    Ok(Some(returned)),
                ) => then(returned),
                (_, Ok(_)) => {}
            }
        }
        match failed {
            Some((error, on_error)) => {
                // The server answered a statement before the last with an error: the
                // transaction was aborted there, and a `COMMIT` among what followed kept
                // nothing.
                if error.as_db_error().is_some() {
                    self.committing.set(false);
                }
                self.note(&error);
                let error = read_error(error, &on_error);
                if let StoreError::LeaseLost { run_id } = &error {
                    *self.lease_lost.borrow_mut() = Some(run_id.clone());
                }
                Err(error)
            }
            None => self.noted(last),
        }
    }

    fn noted<T>(&self, result: Result<T, tokio_postgres::Error>) -> Result<T, StoreError> {
        result.map_err(|error| {
            self.note(&error);
            StoreError::from(error)
        })
    }

    fn note(&self, error: &tokio_postgres::Error) {
        self.failed.set(true);
        if connection_lost(error) {
            self.lost.set(true);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A transaction still open on the server here was left by a panic or a failed
        // `COMMIT`/`ROLLBACK`: the connection is closed rather than returned, which ends the
        // transaction. One that never reached the server left nothing to end.
        if self.open.get()
            && self.sent.get()
            && let Some(client) = self.client.take()
        {
            drop(Object::take(client));
            // Its connection closes when its runtime next runs: now, so that the server
            // ends the transaction (and lets its locks go) at once.
            self.drive.settle();
        }
    }
}

/// `value` encoded for a parameter of type `ty`, as `tokio-postgres` would send it.
fn encode(value: &dyn ToSql, ty: &Type) -> Result<Encoded, StoreError> {
    let mut out = BytesMut::new();
    match value.to_sql_checked(ty, &mut out) {
        Ok(IsNull::Yes) => Ok(Encoded(None)),
        Ok(IsNull::No) => Ok(Encoded(Some(out.to_vec()))),
        Err(error) => Err(StoreError::Commit(format!(
            "a value cannot be sent as {ty}: {error}"
        ))),
    }
}

/// A queued statement's error as `on_error` reads it.
fn read_error(error: tokio_postgres::Error, on_error: &OnError) -> StoreError {
    match on_error {
        OnError::LeaseLost(run_id)
            if error.code() == Some(&tokio_postgres::error::SqlState::DIVISION_BY_ZERO) =>
        {
            StoreError::LeaseLost {
                run_id: run_id.clone(),
            }
        }
        _ => StoreError::from(error),
    }
}

/// The values as `tokio-postgres` takes them.
fn upcast<'a>(params: &'a [&'a dyn Param]) -> impl ExactSizeIterator<Item = &'a dyn ToSql> + 'a {
    fn one<'a>(param: &&'a dyn Param) -> &'a dyn ToSql {
        *param
    }
    params.iter().map(one)
}
