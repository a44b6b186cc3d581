//! A PostgreSQL schema, read from `information_schema` and the catalogue (`pg_constraint`,
//! `pg_index`), described in SQLite's terms where the two name the same thing.

use mcp_task_server::store::Scratch;

use super::{Schema, Table};

/// The schema of `scratch`.
pub(super) fn schema(scratch: &Scratch) -> Schema {
    let name = scratch.schema();
    let mut schema = Schema::default();
    let tables = rows(
        scratch,
        &format!(
            "SELECT table_name FROM information_schema.tables \
             WHERE table_schema = '{name}' AND table_type = 'BASE TABLE'"
        ),
    );
    for row in tables {
        schema.tables.insert(text(&row[0]), Table::default());
    }
    let columns = rows(
        scratch,
        &format!(
            "SELECT table_name, column_name, data_type, is_nullable \
             FROM information_schema.columns WHERE table_schema = '{name}'"
        ),
    );
    for row in columns {
        let not_null = text(&row[3]) == "NO";
        table(&mut schema, &row[0])
            .columns
            .insert(text(&row[1]), (text(&row[2]), not_null));
    }

    // Primary keys, unique constraints and foreign keys, their columns in key order.
    let constraints = rows(
        scratch,
        &format!(
            "SELECT t.relname, c.contype, {columns}, f.relname, {referenced}, c.confdeltype \
             FROM pg_constraint c \
             JOIN pg_class t ON t.oid = c.conrelid \
             JOIN pg_namespace n ON n.oid = t.relnamespace \
             LEFT JOIN pg_class f ON f.oid = c.confrelid \
             WHERE n.nspname = '{name}' AND c.contype IN ('p', 'u', 'f')",
            columns = column_list("c.conkey", "c.conrelid"),
            referenced = column_list("c.confkey", "c.confrelid"),
        ),
    );
    for row in constraints {
        let columns = list(&row[2]);
        let table = table(&mut schema, &row[0]);
        match text(&row[1]).as_str() {
            "p" => table.primary_key = columns,
            "u" => {
                table.uniques.insert(columns);
            }
            _ => {
                table.foreign_keys.insert(format!(
                    "({}) -> {} ({}) on delete {}",
                    columns.join(", "),
                    text(&row[3]),
                    list(&row[4]).join(", "),
                    on_delete(&text(&row[5]))
                ));
            }
        }
    }

    // The indexes made by `CREATE INDEX`: not those that back a constraint.
    let indexes = rows(
        scratch,
        &format!(
            "SELECT t.relname, i.relname, x.indisunique, x.indpred IS NOT NULL, {columns} \
             FROM pg_index x \
             JOIN pg_class i ON i.oid = x.indexrelid \
             JOIN pg_class t ON t.oid = x.indrelid \
             JOIN pg_namespace n ON n.oid = t.relnamespace \
             WHERE n.nspname = '{name}' AND NOT EXISTS ( \
                 SELECT 1 FROM pg_constraint c \
                 WHERE c.conindid = x.indexrelid AND c.contype IN ('p', 'u', 'x'))",
            columns = column_list("x.indkey::int2[]", "x.indrelid"),
        ),
    );
    for row in indexes {
        let entry = (list(&row[4]), text(&row[2]) == "t", text(&row[3]) == "t");
        table(&mut schema, &row[0])
            .indexes
            .insert(text(&row[1]), entry);
    }
    schema
}

/// SQL for the names of the columns numbered in the array `numbers` of relation
/// `relation`, in order, joined by commas; a 0 (an expression) as `<expression>`.
fn column_list(numbers: &str, relation: &str) -> String {
    format!(
        "(SELECT string_agg(coalesce(a.attname, '<expression>'), ',' ORDER BY k.ord) \
          FROM unnest({numbers}) WITH ORDINALITY AS k(number, ord) \
          LEFT JOIN pg_attribute a ON a.attrelid = {relation} AND a.attnum = k.number)"
    )
}

/// A foreign key's `ON DELETE` action as SQLite's `pragma_foreign_key_list` names it.
fn on_delete(code: &str) -> &'static str {
    match code {
        "a" => "no action",
        "r" => "restrict",
        "c" => "cascade",
        "n" => "set null",
        "d" => "set default",
        other => panic!("an ON DELETE action PostgreSQL does not have: {other}"),
    }
}

fn table<'a>(schema: &'a mut Schema, name: &Option<String>) -> &'a mut Table {
    let name = text(name);
    schema
        .tables
        .get_mut(&name)
        .unwrap_or_else(|| panic!("{name} is not a table of the schema"))
}

fn rows(scratch: &Scratch, sql: &str) -> Vec<Vec<Option<String>>> {
    scratch.rows(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn text(value: &Option<String>) -> String {
    value.clone().unwrap_or_default()
}

fn list(value: &Option<String>) -> Vec<String> {
    value
        .as_deref()
        .map(|joined| joined.split(',').map(str::to_owned).collect())
        .unwrap_or_default()
}
