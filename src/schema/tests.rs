use serde_json::{Map, Value, json};

use super::*;

fn options() -> Value {
    json!({
        "type": "array", "minItems": 2,
        "items": {
            "type": "object", "required": ["name", "effort"], "additionalProperties": false,
            "properties": {
                "name": { "type": "string", "minLength": 1 },
                "pros": { "type": "array", "items": { "type": "string" } },
                "effort": { "enum": ["low", "medium", "high"] },
                "confidence": { "type": "integer", "minimum": 0, "maximum": 100 }
            }
        }
    })
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// The `invalid arguments: ...` message of `args` against `schema`.
fn refusal(schema: &Value, value: Value) -> String {
    check_args(schema, &args(value)).unwrap_err().0
}

/// `path: rule` for each problem of `value` against `schema`, read as `dialect`.
fn said(schema: &Value, value: &Value, dialect: Dialect) -> Vec<String> {
    problems(schema, value, dialect)
        .into_iter()
        .map(|p| format!("{}: {}", p.path, p.rule))
        .collect()
}

#[test]
fn a_value_that_fits_has_no_problems() {
    let value = json!([
        { "name": "a", "pros": ["fast"], "effort": "low", "confidence": 80 },
        { "name": "b", "effort": "high" }
    ]);
    assert_eq!(value_problems(&options(), &value), Vec::<String>::new());
}

#[test]
fn every_misfit_is_named_with_its_path() {
    let value = json!([
        { "name": "", "pros": ["fast", 3], "effort": "huge", "confidence": 101, "x": 1 }
    ]);
    let problems = value_problems(&options(), &value);
    assert_eq!(
        problems,
        [
            "must hold at least 2 items (got 1)",
            "`[0].x`: unknown property",
            "`[0].name`: must be at least 1 UTF-16 code unit long (got 0)",
            "`[0].pros[1]`: must be a string",
            "`[0].effort`: must be one of: \"low\", \"medium\", \"high\"",
            "`[0].confidence`: must be an integer from 0 to 100 (got 101)",
        ]
    );
    assert_eq!(value_problems(&options(), &json!({})), ["must be an array"]);
}

#[test]
fn a_schema_with_a_keyword_it_cannot_check_is_refused() {
    assert_eq!(schema_problems(&options()), Vec::<String>::new());
    let problems = schema_problems(&json!({
        "type": "objet",
        "properties": { "a": { "pattern": "^x" } },
        "required": "a"
    }));
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems[0].contains("`type` \"objet\""), "{problems:?}");
    assert!(problems[1].starts_with("`a`: `pattern` is not supported"));
    assert!(problems[2].contains("`required` is a list"));
}

#[test]
fn a_schema_with_a_keyword_of_the_wrong_shape_is_refused() {
    let problems = schema_problems(&json!({
        "type": "object",
        "properties": {
            "day": { "type": "string", "format": "weekday" },
            "pick": { "oneOf": [{ "title": "no const" }] },
            "json": { "type": "string", "contentSchema": { "type": "array" } },
            "list": { "type": "array", "maxItems": -1 }
        }
    }));
    assert_eq!(problems.len(), 4, "{problems:?}");
    assert!(problems[0].starts_with("`day`: unknown format \"weekday\""));
    assert!(problems[1].starts_with("`pick`: `oneOf` is a non-empty list of choices"));
    assert!(problems[2].starts_with("`json`: `contentSchema` goes with contentMediaType"));
    assert!(problems[3].starts_with("`list`: `maxItems` is a whole number"));
}

#[test]
fn a_pattern_is_taken_only_as_the_shape_of_a_date() {
    let date =
        json!({ "type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" });
    assert_eq!(schema_problems(&date), Vec::<String>::new());
    let other = json!({ "type": "string", "format": "date", "pattern": "^[0-9]+$" });
    assert_eq!(schema_problems(&other).len(), 1);
}

#[test]
fn a_tools_arguments_are_refused_with_every_field_and_its_rule_at_once() {
    let schema = json!({
        "type": "object",
        "properties": {
            "title": { "type": "string", "minLength": 1, "maxLength": 5 },
            "id": { "type": "integer", "minimum": 1, "maximum": 9 },
            "confirm": { "type": "boolean", "const": true }
        },
        "required": ["title", "id", "confirm"],
        "additionalProperties": false
    });
    assert_eq!(
        refusal(&schema, json!({ "id": 10, "extra": 1, "confirm": false })),
        "invalid arguments: extra: unknown property; title: is required; \
         id: must be a positive integer no larger than 9 (got 10); \
         confirm: must be the boolean literal true"
    );
    assert!(
        check_args(
            &schema,
            &args(json!({ "title": "t", "id": 9, "confirm": true }))
        )
        .is_ok()
    );
}

#[test]
fn types_one_or_several_are_checked_and_said() {
    let schema = json!({ "type": ["string", "null"] });
    assert_eq!(
        said(&schema, &json!(null), Dialect::Data),
        Vec::<String>::new()
    );
    assert_eq!(
        said(&schema, &json!("x"), Dialect::Data),
        Vec::<String>::new()
    );
    assert_eq!(
        said(&schema, &json!(1), Dialect::Data),
        [": must be a string or null"]
    );
    for (kind, misfit, wanted) in [
        ("object", json!([]), "an object"),
        ("array", json!({}), "an array"),
        ("string", json!(1), "a string"),
        ("number", json!("1"), "a number"),
        ("integer", json!(1.5), "an integer"),
        ("boolean", json!(0), "a boolean"),
        ("null", json!(false), "null"),
    ] {
        let schema = json!({ "type": kind });
        let expected = format!(": must be {wanted}");
        assert_eq!(said(&schema, &misfit, Dialect::Data), [expected]);
    }
}

#[test]
fn an_integer_written_with_a_zero_fraction_is_one_in_arguments_only() {
    let schema = json!({ "type": "integer" });
    let two: Value = serde_json::from_str("2.0").unwrap();
    assert_eq!(
        said(&schema, &two, Dialect::Arguments),
        Vec::<String>::new()
    );
    assert_eq!(said(&schema, &two, Dialect::Data), [": must be an integer"]);
    assert_eq!(whole(&two), Some(2));
}

#[test]
fn a_nul_character_is_refused_in_arguments_and_kept_in_data() {
    let schema = json!({ "type": "object", "properties": { "a": { "type": "string" } } });
    assert_eq!(
        refusal(&schema, json!({ "a": "x\u{0}y" })),
        "invalid arguments: a: must not contain a NUL character (U+0000)"
    );
    let data = json!({ "a": "x\u{0}y" });
    assert_eq!(said(&schema, &data, Dialect::Data), Vec::<String>::new());
}

#[test]
fn lengths_are_counted_in_utf16_code_units_within_their_bounds() {
    let schema = json!({ "type": "string", "minLength": 2, "maxLength": 4 });
    assert_eq!(
        said(&schema, &json!("😀😀"), Dialect::Data),
        Vec::<String>::new()
    );
    assert_eq!(
        said(&schema, &json!("😀😀a"), Dialect::Data),
        [": must be 2 to 4 UTF-16 code units long (got 5)"]
    );
    assert_eq!(
        said(&schema, &json!("a"), Dialect::Data),
        [": must be 2 to 4 UTF-16 code units long (got 1)"]
    );
    let at_most = json!({ "type": "string", "maxLength": 1 });
    assert_eq!(
        said(&at_most, &json!("ab"), Dialect::Data),
        [": must be at most 1 UTF-16 code unit long (got 2)"]
    );
}

#[test]
fn item_counts_and_every_item_are_checked() {
    let schema =
        json!({ "type": "array", "minItems": 1, "maxItems": 2, "items": { "type": "string" } });
    assert_eq!(
        said(&schema, &json!([1, "a", null]), Dialect::Data),
        [
            ": must hold 1 to 2 items (got 3)",
            "[0]: must be a string",
            "[2]: must be a string",
        ]
    );
    assert_eq!(
        said(&schema, &json!({}), Dialect::Data),
        [": must be an array of strings"]
    );
    assert_eq!(
        said(&schema, &json!([]), Dialect::Data),
        [": must hold 1 to 2 items (got 0)"]
    );
}

#[test]
fn numbers_outside_their_bounds_are_refused_with_the_number() {
    let schema = json!({ "type": "number", "minimum": 0.5 });
    assert_eq!(
        said(&schema, &json!(0.5), Dialect::Data),
        Vec::<String>::new()
    );
    assert_eq!(
        said(&schema, &json!(0.25), Dialect::Data),
        [": must be a number no smaller than 0.5 (got 0.25)"]
    );
    let schema = json!({ "type": "integer", "maximum": 3 });
    assert_eq!(
        said(&schema, &json!(4), Dialect::Data),
        [": must be an integer no larger than 3 (got 4)"]
    );
    let id = json!({ "type": "integer", "minimum": 1, "maximum": 9007199254740991_i64 });
    for misfit in ["0", "-1", "9007199254740992", "1e300", "1.5", "\"1\""] {
        let value: Value = serde_json::from_str(misfit).unwrap();
        let problems = problems(&id, &value, Dialect::Arguments);
        assert_eq!(problems.len(), 1, "{misfit}");
        let rule = problems[0].rule.to_string();
        assert!(
            rule.starts_with("must be a positive integer no larger than 9007199254740991"),
            "{misfit}: {rule}"
        );
    }
}

#[test]
fn choices_are_an_enum_a_const_or_titled_constants() {
    let status = json!({ "type": "string", "enum": ["open", "done"] });
    assert_eq!(
        said(&status, &json!("open"), Dialect::Data),
        Vec::<String>::new()
    );
    for misfit in [json!("closed"), json!(1)] {
        assert_eq!(
            said(&status, &misfit, Dialect::Data),
            [": must be one of: \"open\", \"done\""]
        );
    }
    let titled = json!({ "type": "string", "oneOf": [{ "const": "a", "title": "A" }] });
    assert_eq!(
        said(&titled, &json!("b"), Dialect::Data),
        [": must be one of: \"a\""]
    );
    let picks =
        json!({ "type": "array", "items": { "anyOf": [{ "const": "x" }, { "const": "y" }] } });
    assert_eq!(
        said(&picks, &json!(["y", "z"]), Dialect::Data),
        ["[1]: must be one of: \"x\", \"y\""]
    );
    let constant = json!({ "const": 3 });
    assert_eq!(
        said(&constant, &json!(4), Dialect::Data),
        [": must be exactly 3"]
    );
}

#[test]
fn formats_are_checked_dates_against_the_calendar() {
    let check = |format: &str, text: &str| {
        let schema = json!({ "type": "string", "format": format });
        said(&schema, &json!(text), Dialect::Data).is_empty()
    };
    assert!(check("date", "2024-02-29"));
    assert!(!check("date", "2023-02-29"));
    assert!(!check("date", "2024-2-29"));
    assert!(
        !check("date", "2026-W01-1"),
        "a week date is not a calendar date"
    );
    assert!(!check("date", "2026-001T1"), "nor is an ordinal date");
    assert!(check("date-time", "2026-12-01T10:00:00Z"));
    assert!(!check("date-time", "2026-12-01"));
    assert!(check("email", "me@example.org"));
    assert!(!check("email", "me"));
    assert!(check("uri", "https://example.org"));
    assert!(!check("uri", "example"));
    let date = json!({ "type": "string", "format": "date" });
    assert_eq!(
        said(&date, &json!("2026-13-01"), Dialect::Data),
        [": must be a real calendar date in the form YYYY-MM-DD"]
    );
    assert_eq!(
        said(&date, &json!(20261301), Dialect::Data),
        [": must be a string in the form YYYY-MM-DD"]
    );
}

#[test]
fn a_json_field_is_read_and_its_content_checked_at_nested_paths() {
    let schema = json!({
        "type": "object",
        "properties": { "rows": {
            "type": "string", "contentMediaType": "application/json",
            "contentSchema": { "type": "array", "items": {
                "type": "object", "required": ["n"], "properties": { "n": { "type": "integer" } }
            } }
        } }
    });
    let fenced = json!({ "rows": "```json\n[{\"n\": 1}]\n```" });
    assert_eq!(said(&schema, &fenced, Dialect::Data), Vec::<String>::new());
    let wrong = json!({ "rows": "[{\"n\": \"one\"}, {}]" });
    assert_eq!(
        said(&schema, &wrong, Dialect::Data),
        ["rows[0].n: must be an integer", "rows[1].n: is required"]
    );
    let problems = said(&schema, &json!({ "rows": "nope" }), Dialect::Data);
    assert!(problems[0].starts_with("rows: is not JSON"), "{problems:?}");
}

#[test]
fn unknown_keys_come_first_then_properties_in_the_schemas_order() {
    let schema = json!({
        "type": "object",
        "properties": { "b": { "type": "string" }, "a": { "type": "string" } },
        "required": ["a", "b"],
        "additionalProperties": false
    });
    assert_eq!(
        said(&schema, &json!({ "a": 1, "z": 1, "y": 1 }), Dialect::Data),
        [
            "z: unknown property",
            "y: unknown property",
            "b: is required",
            "a: must be a string"
        ]
    );
    let open = json!({ "type": "object", "properties": {} });
    assert_eq!(
        said(&open, &json!({ "z": 1 }), Dialect::Data),
        Vec::<String>::new()
    );
}

#[test]
fn annotations_check_nothing() {
    let schema = json!({
        "type": "string", "title": "T", "description": "D", "default": 5,
        "enum": ["a"], "enumNames": ["A"]
    });
    assert_eq!(schema_problems(&schema), Vec::<String>::new());
    assert_eq!(
        said(&schema, &json!("a"), Dialect::Data),
        Vec::<String>::new()
    );
}

#[test]
fn nested_objects_and_lists_name_each_misfit_by_its_full_path() {
    let schema = json!({
        "type": "object", "additionalProperties": false,
        "properties": { "filter": {
            "type": "object", "additionalProperties": false, "required": ["tags"],
            "properties": { "tags": { "type": "array", "items": {
                "type": "object", "additionalProperties": false,
                "properties": { "name": { "type": "string", "maxLength": 2 } }
            } } }
        } }
    });
    let value = json!({ "filter": { "tags": [{ "name": "abc" }, { "x": 1 }], "y": 2 } });
    assert_eq!(
        refusal(&schema, value),
        "invalid arguments: filter.y: unknown property; \
         filter.tags[0].name: must be at most 2 UTF-16 code units long (got 3); \
         filter.tags[1].x: unknown property"
    );
    assert_eq!(
        refusal(&schema, json!({ "filter": {} })),
        "invalid arguments: filter.tags: is required"
    );
}
