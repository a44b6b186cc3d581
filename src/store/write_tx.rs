//! A write transaction begun, committed and rolled back with cached statements.
//!
//! Why not rusqlite's `Transaction`: it runs `BEGIN IMMEDIATE` and `COMMIT` through
//! `execute_batch`, which parses each anew; on a one-row tool call those two parses cost
//! about as much as the row's own insert.

use rusqlite::Connection;

use super::Conn;

/// Open until [`WriteTx::commit`] succeeds; dropped before that, it rolls back.
pub(crate) struct WriteTx<'c> {
    conn: &'c Conn,
}

impl<'c> WriteTx<'c> {
    /// `BEGIN IMMEDIATE`: takes the write lock now, so that the busy timeout covers the
    /// wait for it and no statement inside fails for want of it.
    pub(crate) fn begin(conn: &'c Conn) -> rusqlite::Result<WriteTx<'c>> {
        run(conn, "BEGIN IMMEDIATE")?;
        Ok(WriteTx { conn })
    }

    /// The connection the transaction runs on.
    pub(crate) fn conn(&self) -> &'c Conn {
        self.conn
    }

    /// Commits. On failure the transaction is still open, and dropping `self` rolls it
    /// back.
    pub(crate) fn commit(self) -> rusqlite::Result<()> {
        run(self.conn, "COMMIT")?;
        self.conn.audit_head.committed();
        Ok(())
    }

    /// A savepoint inside the transaction, and its end: `keep` releases it, otherwise
    /// everything written since it is undone first.
    pub(crate) fn savepoint(&self) -> rusqlite::Result<()> {
        run(self.conn, "SAVEPOINT batch")
    }

    pub(crate) fn end_savepoint(&self, keep: bool) -> rusqlite::Result<()> {
        if !keep {
            self.conn.audit_head.rolled_back();
            run(self.conn, "ROLLBACK TO batch")?;
        }
        run(self.conn, "RELEASE batch")
    }
}

impl std::ops::Deref for WriteTx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for WriteTx<'_> {
    fn drop(&mut self) {
        // Committed, nothing is pending; otherwise what the transaction wrote is gone.
        self.conn.audit_head.rolled_back();
        // After a successful COMMIT the connection is back in autocommit mode; SQLite may
        // also have rolled back on its own after some errors. Either way nothing is open.
        if !self.conn.is_autocommit()
            && let Err(error) = run(self.conn, "ROLLBACK")
        {
            tracing::warn!(%error, "a failed transaction could not be rolled back");
        }
    }
}

fn run(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(conn: &Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap()
    }

    fn table() -> Conn {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        Conn::new(conn)
    }

    #[test]
    fn a_transaction_keeps_its_rows_if_committed_and_leaves_nothing_if_dropped() {
        for (commit, rows) in [(true, 1), (false, 0)] {
            let conn = table();
            let tx = WriteTx::begin(&conn).unwrap();
            tx.execute("INSERT INTO t VALUES (1)", []).unwrap();
            if commit {
                tx.commit().unwrap();
            } else {
                drop(tx);
            }
            assert_eq!(count(&conn), rows, "committed: {commit}");
            assert!(conn.is_autocommit());
        }
    }

    #[test]
    fn a_savepoint_ended_without_keeping_undoes_only_what_followed_it() {
        let conn = table();
        let tx = WriteTx::begin(&conn).unwrap();
        tx.execute("INSERT INTO t VALUES (1)", []).unwrap();
        tx.savepoint().unwrap();
        tx.execute("INSERT INTO t VALUES (2)", []).unwrap();
        tx.end_savepoint(false).unwrap();
        tx.savepoint().unwrap();
        tx.execute("INSERT INTO t VALUES (3)", []).unwrap();
        tx.end_savepoint(true).unwrap();
        tx.commit().unwrap();
        let kept: Vec<i64> = conn
            .prepare("SELECT x FROM t ORDER BY x")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(kept, [1, 3]);
    }
}
