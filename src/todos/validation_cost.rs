//! What checking the arguments of a typical `add_task` call costs, read by the one
//! validator against the tool's published input schema, beside the hand-written checks of
//! [`Checker`] that did the same before. A measurement, not a test of speed: run it with
//! `cargo test --release --lib validation_cost -- --ignored --nocapture`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::validate::Checker;
use super::{ToolError, add_task};
use crate::store::NewTodo;

const CALLS: u32 = 1_000_000;

/// `add_task`'s arguments read by [`Checker`], its limits written out by hand.
fn by_hand(args: &Map<String, Value>) -> Result<NewTodo, ToolError> {
    let mut check = Checker::new();
    check.known_keys(args, "", &["title", "due", "tags"]);
    let title = check
        .required(args, "", "title")
        .and_then(|v| check.string(v, "title", 1, 200));
    let due = args.get("due").and_then(|v| check.date(v, "due"));
    let tags = args.get("tags").and_then(|value| {
        let Value::Array(items) = value else {
            check.problem("tags", "must be an array of strings");
            return None;
        };
        if items.len() > 10 {
            check.problem(
                "tags",
                format!("must hold at most 10 tags (got {})", items.len()),
            );
        }
        let tags: Vec<Option<String>> = items
            .iter()
            .enumerate()
            .map(|(i, item)| check.string(item, &format!("tags[{i}]"), 1, 40))
            .collect();
        tags.into_iter().collect::<Option<Vec<String>>>()
    });
    check.finish()?;
    Ok(NewTodo {
        title: title.expect("checked"),
        due,
        tags: tags.unwrap_or_default(),
    })
}

fn per_call(read: impl Fn() -> bool) -> Duration {
    for _ in 0..CALLS / 10 {
        black_box(read());
    }
    let start = Instant::now();
    for _ in 0..CALLS {
        black_box(read());
    }
    start.elapsed() / CALLS
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[test]
#[ignore = "a measurement: run with --release -- --ignored --nocapture"]
fn an_add_task_call_is_read_alike_by_hand_and_against_its_schema_each_timed() {
    let typical = object(json!({
        "title": "Buy milk and bread for the weekend",
        "due": "2026-12-01",
        "tags": ["home", "errands"]
    }));
    let refused = object(json!({ "title": "", "due": "2026-02-30", "tags": ["ok", 3], "x": 1 }));
    let new = add_task::parse(&typical).unwrap();
    let old = by_hand(&typical).unwrap();
    assert_eq!(
        (new.title, new.due, new.tags),
        (old.title, old.due, old.tags)
    );
    for args in [&typical, &refused] {
        let old = per_call(|| by_hand(black_box(args)).is_ok());
        let new = per_call(|| add_task::parse(black_box(args)).is_ok());
        let shown = serde_json::to_string(args).unwrap();
        eprintln!(
            "{shown}\n  hand-written checks: {old:?} a call\n  the schema's validator: {new:?} a call"
        );
    }
}
