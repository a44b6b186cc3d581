//! A SQLite database's schema, read from `sqlite_master` and the table, index and
//! foreign key pragmas.

use rusqlite::Connection;

use super::{Schema, Table};

/// The schema of the database file at `path`, SQLite's own tables (`sqlite_*`) left out.
pub(super) fn schema(path: &str) -> Schema {
    let conn = Connection::open(path).expect("the database opens");
    let tables: Vec<(String, String)> = rows(
        &conn,
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    );
    let mut schema = Schema::default();
    for (name, sql) in tables {
        schema
            .tables
            .insert(name.clone(), table(&conn, &name, &sql));
    }
    schema
}

fn table(conn: &Connection, name: &str, sql: &str) -> Table {
    let mut table = Table::default();
    // (name, declared type, NOT NULL, position in the primary key or 0)
    let columns: Vec<(String, String, bool, i64)> = rows(
        conn,
        "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1)",
        [name],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
    );
    let mut key: Vec<(i64, String)> = columns
        .iter()
        .filter(|(_, _, _, pk)| *pk > 0)
        .map(|(column, _, _, pk)| (*pk, column.clone()))
        .collect();
    key.sort();
    table.primary_key = key.into_iter().map(|(_, column)| column).collect();
    // A primary key refuses NULL where it is the rowid (one `INTEGER` column) or the table
    // has no rowid; elsewhere SQLite lets it hold NULL unless the column says `NOT NULL`.
    let without_rowid = sql.to_uppercase().contains("WITHOUT ROWID");
    let rowid_alias = |column: &str| {
        table.primary_key == [column]
            && columns
                .iter()
                .any(|(c, declared, _, _)| c == column && declared == "INTEGER")
    };
    for (column, declared, not_null, pk) in &columns {
        let refuses_null = *not_null || (*pk > 0 && (without_rowid || rowid_alias(column)));
        table
            .columns
            .insert(column.clone(), (declared.clone(), refuses_null));
    }

    let indexes: Vec<(String, bool, String, bool)> = rows(
        conn,
        "SELECT name, \"unique\", origin, partial FROM pragma_index_list(?1)",
        [name],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
    );
    for (index, unique, origin, partial) in indexes {
        let columns: Vec<String> = rows(
            conn,
            "SELECT name FROM pragma_index_info(?1) ORDER BY seqno",
            [&index],
            |row| {
                let column: Option<String> = row.get(0)?;
                Ok(column.unwrap_or_else(|| "<expression>".to_owned()))
            },
        );
        match origin.as_str() {
            // The primary key's own index: the key is read from the columns above.
            "pk" => {}
            "u" => {
                table.uniques.insert(columns);
            }
            _ => {
                table.indexes.insert(index, (columns, unique, partial));
            }
        }
    }

    // (id, "table", "from", "to", on_delete), a key of several columns in several rows.
    let keys: Vec<(i64, String, String, String, String)> = rows(
        conn,
        "SELECT id, \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list(?1) \
         ORDER BY id, seq",
        [name],
        |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ))
        },
    );
    let mut ids: Vec<i64> = keys.iter().map(|k| k.0).collect();
    ids.dedup();
    for id in ids {
        let parts: Vec<_> = keys.iter().filter(|k| k.0 == id).collect();
        let from: Vec<&str> = parts.iter().map(|k| k.2.as_str()).collect();
        let to: Vec<&str> = parts.iter().map(|k| k.3.as_str()).collect();
        table.foreign_keys.insert(format!(
            "({}) -> {} ({}) on delete {}",
            from.join(", "),
            parts[0].1,
            to.join(", "),
            parts[0].4.to_lowercase()
        ));
    }
    table
}

fn rows<T, P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    params: P,
    read: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Vec<T> {
    let mut statement = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    statement
        .query_map(params, read)
        .and_then(Iterator::collect)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}
