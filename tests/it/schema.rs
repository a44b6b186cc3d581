//! The two backends' schemas agree: a fresh SQLite database and a fresh PostgreSQL schema,
//! each brought to its latest migration, have the same tables, the same columns in each
//! (names, nullability, types as [`TYPES`] maps them), the same indexes (their columns,
//! uniqueness and whether they are partial, under the same names), and the same primary
//! keys, unique constraints and foreign keys. What differs on purpose is listed in
//! [`ALLOWED`], each with its reason; a difference that goes away fails the test too, so
//! that the list stays true.
//!
//! Not compared: triggers (SQLite's are SQL, PostgreSQL's call PL/pgSQL functions, and
//! PostgreSQL's also notify other hosts), `CHECK` constraints, defaults, and collations
//! (PostgreSQL gives the texts the store orders the `C` collation, as
//! `store/postgres/schema.rs` says).

mod postgres;
mod sqlite;

use std::collections::{BTreeMap, BTreeSet};

use crate::support::backends::Place;

/// Each SQLite type the migrations declare, and the PostgreSQL types a column of it may
/// have: integers are `BIGINT`, as the store binds them, and a flag SQLite keeps as 0 or
/// 1 is a `BOOLEAN` (`runs.cancel_requested`).
const TYPES: [(&str, &[&str]); 3] = [
    ("INTEGER", &["bigint", "boolean"]),
    ("TEXT", &["text"]),
    ("BLOB", &["bytea"]),
];

/// The differences between the two schemas that are meant, each with its reason.
const ALLOWED: [(&str, &str); 4] = [
    (
        "table todo_ids: only on sqlite",
        "SQLite hands out a deleted newest todo's id again; this table keeps the highest \
         such id (SQLite's migration 7). A PostgreSQL identity never repeats a value.",
    ),
    (
        "table schema_migrations: only on postgres",
        "SQLite keeps its schema version in `PRAGMA user_version`.",
    ),
    (
        "secrets.name: NOT NULL only on postgres",
        "known difference: SQLite lets the primary key of a table with rowids hold NULL \
         (a quirk it keeps for compatibility), and `secrets` was made without `NOT NULL`; \
         the store never writes a NULL name. Making SQLite refuse one means copying the \
         table in a new migration.",
    ),
    (
        "written_files.path: NOT NULL only on postgres",
        "known difference: as `secrets.name`, a `TEXT PRIMARY KEY` of a table with rowids \
         without `NOT NULL`; the store never writes a NULL path.",
    ),
];

/// A schema as both backends describe it, in SQLite's terms.
#[derive(Debug, Default)]
struct Schema {
    tables: BTreeMap<String, Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// Each column's type as declared (SQLite) or named (PostgreSQL), and whether it
    /// refuses NULL.
    columns: BTreeMap<String, (String, bool)>,
    primary_key: Vec<String>,
    /// The column lists of `UNIQUE` constraints, beside the primary key.
    uniques: BTreeSet<Vec<String>>,
    /// `(columns) -> table (columns) on delete <action>`.
    foreign_keys: BTreeSet<String>,
    /// The indexes made by `CREATE INDEX`, by name: their columns (an expression as
    /// `<expression>`), whether unique, whether partial.
    indexes: BTreeMap<String, (Vec<String>, bool, bool)>,
}

#[test]
fn both_backends_migrate_to_the_same_tables_columns_indexes_and_keys() {
    let Some(postgres) = Place::postgres(&crate::support::skip::test_name()) else {
        return;
    };
    let sqlite = Place::sqlite();
    let (Place::Sqlite(_), Place::Postgres(scratch)) = (&sqlite, &postgres) else {
        unreachable!("one place of each backend");
    };
    drop(sqlite.store());
    drop(postgres.store());
    let on_sqlite = sqlite::schema(&sqlite.location());
    let on_postgres = postgres::schema(scratch);
    assert!(
        on_sqlite.tables.contains_key("runs") && on_postgres.tables.contains_key("runs"),
        "both schemas were read: {on_sqlite:#?}\n{on_postgres:#?}"
    );

    let found = differences(&on_sqlite, &on_postgres);
    let mut allowed: Vec<String> = ALLOWED.iter().map(|(d, _)| d.to_string()).collect();
    allowed.sort();
    assert_eq!(
        found, allowed,
        "the schemas differ otherwise than ALLOWED says (left: found, right: allowed)"
    );
}

/// Every difference between the two schemas, one line each, sorted.
fn differences(sqlite: &Schema, postgres: &Schema) -> Vec<String> {
    let mut found = Vec::new();
    let names: BTreeSet<&String> = sqlite.tables.keys().chain(postgres.tables.keys()).collect();
    for name in names {
        match (sqlite.tables.get(name), postgres.tables.get(name)) {
            (Some(a), Some(b)) => compare_tables(name, a, b, &mut found),
            (Some(_), None) => found.push(format!("table {name}: only on sqlite")),
            (None, _) => found.push(format!("table {name}: only on postgres")),
        }
    }
    found.sort();
    found
}

fn compare_tables(table: &str, a: &Table, b: &Table, found: &mut Vec<String>) {
    let columns: BTreeSet<&String> = a.columns.keys().chain(b.columns.keys()).collect();
    for column in columns {
        let name = format!("{table}.{column}");
        match (a.columns.get(column), b.columns.get(column)) {
            (Some((a_type, a_not_null)), Some((b_type, b_not_null))) => {
                if !types_agree(a_type, b_type) {
                    found.push(format!("{name}: {a_type} on sqlite, {b_type} on postgres"));
                }
                match (a_not_null, b_not_null) {
                    (true, false) => found.push(format!("{name}: NOT NULL only on sqlite")),
                    (false, true) => found.push(format!("{name}: NOT NULL only on postgres")),
                    _ => {}
                }
            }
            (Some(_), None) => found.push(format!("{name}: only on sqlite")),
            (None, _) => found.push(format!("{name}: only on postgres")),
        }
    }
    if a.primary_key != b.primary_key {
        found.push(format!(
            "{table}: primary key {:?} on sqlite, {:?} on postgres",
            a.primary_key, b.primary_key
        ));
    }
    one_sided(table, "unique", &a.uniques, &b.uniques, found);
    one_sided(
        table,
        "foreign key",
        &a.foreign_keys,
        &b.foreign_keys,
        found,
    );
    let indexes: BTreeSet<&String> = a.indexes.keys().chain(b.indexes.keys()).collect();
    for index in indexes {
        match (a.indexes.get(index), b.indexes.get(index)) {
            (Some(x), Some(y)) if x == y => {}
            (Some(x), Some(y)) => found.push(format!(
                "{table}: index {index} (columns, unique, partial) {x:?} on sqlite, {y:?} on \
                 postgres"
            )),
            (Some(_), None) => found.push(format!("{table}: index {index}: only on sqlite")),
            (None, _) => found.push(format!("{table}: index {index}: only on postgres")),
        }
    }
}

/// Notes each member of `a` or `b` that the other lacks.
fn one_sided<T: Ord + std::fmt::Debug>(
    table: &str,
    kind: &str,
    a: &BTreeSet<T>,
    b: &BTreeSet<T>,
    found: &mut Vec<String>,
) {
    let show = |item: &T| format!("{item:?}").trim_matches('"').to_owned();
    for item in a.difference(b) {
        found.push(format!("{table}: {kind} {}: only on sqlite", show(item)));
    }
    for item in b.difference(a) {
        found.push(format!("{table}: {kind} {}: only on postgres", show(item)));
    }
}

/// Whether SQLite's declared type and PostgreSQL's agree, by [`TYPES`].
fn types_agree(sqlite: &str, postgres: &str) -> bool {
    TYPES
        .iter()
        .any(|(declared, named)| *declared == sqlite && named.contains(&postgres))
}
