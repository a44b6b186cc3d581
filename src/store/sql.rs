//! One query, two databases: the store's statements are written once and run on SQLite or
//! on PostgreSQL.
//!
//! A statement is SQLite text with numbered parameters (`?1`, `?2`, ...); on PostgreSQL
//! they become `$1`, `$2`, .... Where the two dialects differ, a query names both texts
//! with [`Db::dialect`]. Values cross as [`Param`]s and come back as [`Column`]s, types
//! both drivers know; every value is a bound parameter, and no statement text is built
//! from input.

use super::StoreError;
use super::postgres::Session;

/// A value a statement binds: one both drivers can send.
pub(crate) trait Param: rusqlite::ToSql + tokio_postgres::types::ToSql + Sync {}

impl<T: rusqlite::ToSql + tokio_postgres::types::ToSql + Sync> Param for T {}

/// A value a row yields: one both drivers can read.
pub(crate) trait Column:
    rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a>
{
}

impl<T: rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a>> Column for T {}

/// The connection a statement runs on.
#[derive(Clone, Copy)]
pub(crate) enum Db<'c> {
    Sqlite(&'c rusqlite::Connection),
    Postgres(&'c Session),
}

/// A row of a result, from either database.
pub(crate) enum Row<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r tokio_postgres::Row),
}

impl Row<'_> {
    /// The value of column `index` (from 0).
    pub(crate) fn get<T: Column>(&self, index: usize) -> Result<T, StoreError> {
        match self {
            Row::Sqlite(row) => Ok(row.get(index)?),
            Row::Postgres(row) => Ok(row.try_get(index)?),
        }
    }
}

/// A struct read from a row, field `i` from column `i`: the fields are named in the order of
/// the query's columns, and no column index is written by hand to be kept in step with them.
/// Fields read otherwise (from several columns, or converted) follow a `;`, each with its
/// own expression. A first column other than 0 is given before the struct's name.
macro_rules! from_columns {
    ($row:expr, $first:literal.., $ty:ident { $($field:ident),+ $(,)? $(; $($other:ident: $value:expr),+ $(,)?)? }) => {{
        let row: &$crate::store::sql::Row<'_> = $row;
        let mut column = $first..;
        $ty {
            $($field: row.get(column.next().unwrap_or_default())?,)+
            $($($other: $value,)+)?
        }
    }};
    ($row:expr, $ty:ident $fields:tt) => {
        $crate::store::sql::from_columns!($row, 0.., $ty $fields)
    };
}
pub(crate) use from_columns;

/// A statement in both dialects, for [`Db::pick`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dialects {
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

/// A statement that reads the database's clock, written once: its parts are string
/// literals and `NOW_MS`, the database's time in milliseconds since the Unix epoch
/// (PostgreSQL's `clock_timestamp()`, SQLite's `unixepoch('subsec')`). Leases are claimed,
/// renewed and expired by it, so that no host's clock enters a lease comparison.
macro_rules! on_db_clock {
    (@sqlite NOW_MS) => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
    (@postgres NOW_MS) => {
        "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
    };
    (@$db:ident $text:literal) => {
        $text
    };
    ($($part:tt)+) => {
        $crate::store::sql::Dialects {
            sqlite: concat!($($crate::store::sql::on_db_clock!(@sqlite $part)),+),
            postgres: concat!($($crate::store::sql::on_db_clock!(@postgres $part)),+),
        }
    };
}
pub(crate) use on_db_clock;

impl<'c> Db<'c> {
    /// The text of `statement` for this database.
    pub(crate) fn pick(self, statement: Dialects) -> &'static str {
        self.dialect(statement.sqlite, statement.postgres)
    }

    /// `sqlite` on SQLite, `postgres` on PostgreSQL: for the statements whose dialects
    /// differ. Both may use `?N` parameters.
    pub(crate) fn dialect(self, sqlite: &'static str, postgres: &'static str) -> &'static str {
        match self {
            Db::Sqlite(_) => sqlite,
            Db::Postgres(_) => postgres,
        }
    }

    /// Runs a statement; returns how many rows it changed.
    pub(crate) fn execute(self, sql: &str, params: &[&dyn Param]) -> Result<u64, StoreError> {
        match self {
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                bind(&mut stmt, params)?;
                Ok(stmt.raw_execute()? as u64)
            }
            Db::Postgres(session) => session.execute(&numbered(sql), params),
        }
    }

    /// Runs a statement whose result nobody reads. On PostgreSQL, inside a transaction, it
    /// goes out with the transaction's next round trip (`postgres/session.rs`), and its
    /// error fails the transaction then.
    pub(crate) fn write(self, sql: &str, params: &[&dyn Param]) -> Result<(), StoreError> {
        match self {
            Db::Sqlite(_) => self.execute(sql, params).map(drop),
            Db::Postgres(session) => session.write(&numbered(sql), params),
        }
    }

    /// Runs an `INSERT` and returns the integer key (column `key`) of the row it made.
    pub(crate) fn insert(
        self,
        sql: &str,
        key: &str,
        params: &[&dyn Param],
    ) -> Result<i64, StoreError> {
        match self {
            // `RETURNING` would stage the row in a temporary table; the rowid is at hand.
            Db::Sqlite(conn) => {
                self.execute(sql, params)?;
                Ok(conn.last_insert_rowid())
            }
            Db::Postgres(_) => {
                let sql = format!("{sql} RETURNING {key}");
                self.query_opt(&sql, params, |row| row.get(0))?
                    .ok_or_else(|| StoreError::NotFound("the inserted row".into()))
            }
        }
    }

    /// Every row of a query, each read by `read`.
    pub(crate) fn query<T>(
        self,
        sql: &str,
        params: &[&dyn Param],
        mut read: impl FnMut(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let mut out = Vec::new();
        self.each_row(sql, params, |row| {
            out.push(read(row)?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// The first row of a query, if there is one.
    pub(crate) fn query_opt<T>(
        self,
        sql: &str,
        params: &[&dyn Param],
        mut read: impl FnMut(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let mut first = None;
        self.each_row(sql, params, |row| {
            first = Some(read(row)?);
            Ok(false)
        })?;
        Ok(first)
    }

    /// Runs a query and hands its rows to `visit` in order, for as long as it answers
    /// `true`: the one place that steps through a result on either database.
    fn each_row(
        self,
        sql: &str,
        params: &[&dyn Param],
        mut visit: impl FnMut(&Row<'_>) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        match self {
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                bind(&mut stmt, params)?;
                let mut rows = stmt.raw_query();
                while let Some(row) = rows.next()? {
                    if !visit(&Row::Sqlite(row))? {
                        break;
                    }
                }
            }
            Db::Postgres(session) => {
                for row in &session.query(&numbered(sql), params)? {
                    if !visit(&Row::Postgres(row))? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }
}

fn bind(stmt: &mut rusqlite::CachedStatement<'_>, params: &[&dyn Param]) -> rusqlite::Result<()> {
    for (index, param) in params.iter().enumerate() {
        let value: &dyn rusqlite::ToSql = *param;
        stmt.raw_bind_parameter(index + 1, value)?;
    }
    Ok(())
}

/// SQLite's `?N` parameters as PostgreSQL's `$N`. A `?` not followed by a digit is left
/// alone (PostgreSQL texts name their own operators).
pub(crate) fn numbered(sql: &str) -> std::borrow::Cow<'_, str> {
    if !sql.contains('?') {
        return sql.into();
    }
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(ch);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_parameters_become_dollar_parameters() {
        assert_eq!(
            numbered("SELECT a FROM t WHERE a = ?1 AND b = ?12 OR ?2 IS NULL"),
            "SELECT a FROM t WHERE a = $1 AND b = $12 OR $2 IS NULL"
        );
    }

    #[test]
    fn a_question_mark_not_followed_by_a_digit_is_kept() {
        assert_eq!(numbered("SELECT tags ? $1"), "SELECT tags ? $1");
    }
}
