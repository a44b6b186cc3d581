use std::time::Duration;

use serde_json::{Map, Value, json};

use super::schema::MAX_SAFE_INTEGER;
use super::{
    ErrorCode, Origin, ToolError, Tools, add_task, complete_task, delete_task, list_tasks,
    search_tasks,
};
use crate::schema::{Schema, is_calendar_date};
use crate::store::{AuditRow, Durability, Scratch, Store, TodoFilter, TodoStatus};

/// The byte cap on recorded audit arguments, as documented on `store::audit::AUDIT_ARGS_CAP`.
const AUDIT_ARGS_CAP: usize = 4096;

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("test arguments must be an object, got {other}"),
    }
}

fn wire(text: &str) -> Map<String, Value> {
    serde_json::from_str(text).expect("test arguments are valid JSON objects")
}

/// The fields an `invalid_input` error names, in the order they were reported.
fn problem_fields<T: std::fmt::Debug>(result: Result<T, ToolError>) -> Vec<String> {
    let error = match result {
        Ok(value) => panic!("expected invalid_input, got Ok({value:?})"),
        Err(error) => error,
    };
    assert_eq!(error.code, ErrorCode::InvalidInput, "{error}");
    let list = error
        .message
        .strip_prefix("invalid arguments: ")
        .unwrap_or_else(|| panic!("unexpected message shape: {}", error.message));
    list.split("; ")
        .map(|problem| {
            problem
                .split_once(": ")
                .unwrap_or_else(|| panic!("problem without a rule: {problem}"))
                .0
                .to_owned()
        })
        .collect()
}

/// Asserts that `result` is an error saying `field` is required.
fn assert_required<T: std::fmt::Debug>(result: Result<T, ToolError>, field: &str) {
    let error = result.unwrap_err();
    let said = format!("{field}: is required");
    assert!(error.message.contains(&said), "{}", error.message);
}

fn add(value: Value) -> Result<crate::store::NewTodo, ToolError> {
    add_task::parse(&args(value))
}

fn search(value: Value) -> Result<String, ToolError> {
    search_tasks::parse(&args(value))
}

fn list(value: Value) -> Result<TodoFilter, ToolError> {
    list_tasks::parse(&args(value))
}

/// Makes each test a module of two: the test on SQLite, and on PostgreSQL where
/// `TASKS_TEST_POSTGRES` names a server (else it says it skipped).
macro_rules! on_both_backends {
    (fn $name:ident($tools:ident) $body:block) => {
        mod $name {
            use super::*;

            fn run($tools: Tools) $body

            #[test]
            fn sqlite() {
                run(Tools::new(Store::open_in_memory().expect("an in-memory store opens")));
            }

            #[test]
            fn postgres() {
                let test = concat!(module_path!(), "::postgres");
                let Some(scratch) = Scratch::postgres(test) else {
                    return;
                };
                let store = Store::open_at(scratch.url(), Durability::Normal)
                    .expect("the scratch schema opens");
                run(Tools::new(store));
            }
        }
    };
}

fn invoke(tools: &Tools, name: &str, value: Value) -> Result<Value, ToolError> {
    tools
        .invoke(name, &args(value), Origin::default())
        .unwrap_or_else(|| panic!("{name} is a known tool"))
}

fn audit(tools: &Tools) -> Vec<AuditRow> {
    tools.store().audit_rows().expect("the audit log reads")
}

// ---- title and query lengths, in UTF-16 code units ----

/// Reads a tool's arguments, answering the text field it checked.
type ReadText = fn(Value) -> Result<String, ToolError>;

/// The two text fields limited to 200 UTF-16 code units, each with the parser of its tool.
const LIMITED_TEXTS: [(&str, ReadText); 2] = [
    ("title", |value| add(value).map(|new| new.title)),
    ("query", search),
];

#[test]
fn text_of_200_ascii_characters_is_accepted_and_201_rejected() {
    for (field, parse) in LIMITED_TEXTS {
        let text = "a".repeat(200);
        assert_eq!(parse(json!({ field: text })).unwrap(), text, "{field}");
        let result = parse(json!({ field: "a".repeat(201) }));
        assert_eq!(problem_fields(result), [field]);
    }
}

#[test]
fn text_of_100_emoji_is_200_units_and_accepted_and_one_more_letter_rejected() {
    for (field, parse) in LIMITED_TEXTS {
        let text = "😀".repeat(100);
        assert_eq!(parse(json!({ field: text })).unwrap(), text, "{field}");
        let result = parse(json!({ field: format!("{text}a") }));
        assert_eq!(problem_fields(result), [field]);
    }
}

#[test]
fn text_with_combining_marks_counts_each_mark_as_a_unit() {
    for (field, parse) in LIMITED_TEXTS {
        let accepted = "e\u{301}".repeat(100);
        assert_eq!(
            parse(json!({ field: accepted })).unwrap(),
            accepted,
            "{field}"
        );
        let result = parse(json!({ field: format!("{accepted}a") }));
        assert_eq!(problem_fields(result), [field]);
    }
}

#[test]
fn empty_missing_or_non_string_text_is_rejected() {
    for (field, parse) in LIMITED_TEXTS {
        assert_eq!(problem_fields(parse(json!({ field: "" }))), [field]);
        assert_eq!(problem_fields(parse(json!({}))), [field]);
        assert_eq!(problem_fields(parse(json!({ field: 1 }))), [field]);
    }
}

#[test]
fn the_title_limit_is_the_one_the_published_schema_states() {
    let published = Tools::specs()
        .into_iter()
        .find(|spec| spec.name == "add_task")
        .expect("add_task is published")
        .input_schema;
    let mut tighter = published.clone();
    tighter["properties"]["title"]["maxLength"] = json!(5);
    let (published, tighter) = (Schema::compile(&published), Schema::compile(&tighter));
    let six = args(json!({ "title": "abcdef" }));
    assert_eq!(add_task::read(&published, &six).unwrap().title, "abcdef");
    let error = add_task::read(&tighter, &six).unwrap_err();
    assert_eq!(
        error.message,
        "invalid arguments: title: must be 1 to 5 UTF-16 code units long (got 6)"
    );
    let five = args(json!({ "title": "abcde" }));
    assert_eq!(add_task::read(&tighter, &five).unwrap().title, "abcde");
}

#[test]
fn title_length_error_reports_the_unit_count() {
    let error = add(json!({ "title": "a".repeat(201) })).unwrap_err();
    assert!(error.message.contains("(got 201)"), "{}", error.message);
}

#[test]
fn title_of_200_characters_ending_in_an_emoji_is_rejected() {
    let title = format!("{}😀", "a".repeat(199));
    assert_eq!(title.chars().count(), 200);
    assert_eq!(problem_fields(add(json!({ "title": title }))), ["title"]);
}

#[test]
fn title_of_200_precomposed_accented_letters_is_accepted() {
    let title = "\u{e9}".repeat(200);
    assert_eq!(title.len(), 400);
    assert_eq!(add(json!({ "title": title })).unwrap().title, title);
}

#[test]
fn missing_title_is_rejected_as_required() {
    assert_required(add(json!({})), "title");
}

#[test]
fn non_string_title_is_rejected() {
    for title in [json!(5), json!(null), json!(["a"]), json!({ "text": "a" })] {
        assert_eq!(problem_fields(add(json!({ "title": title }))), ["title"]);
    }
}

// ---- dates ----

#[test]
fn real_days_are_calendar_dates() {
    for date in [
        "2024-02-29", // a leap day in a leap year
        "2000-02-29", // a leap day in a century divisible by 400
        "2026-12-01",
        "2026-01-01",
        "2026-01-31",
        "2026-04-30",
        "2026-02-28",
    ] {
        assert!(is_calendar_date(date), "{date}");
    }
}

#[test]
fn impossible_days_and_other_forms_are_not_calendar_dates() {
    // "２6-01-01" is ten bytes long, as a date is.
    assert_eq!("２6-01-01".len(), 10);
    for text in [
        "2023-02-29", // a leap day in a common year
        "1900-02-29", // a leap day in a century not divisible by 400
        "2026-13-01",
        "2026-00-01",
        "2026-01-00",
        "2026-01-32",
        "2026-04-31",
        "2026-02-30",
        "2026-1-1", // no zero padding
        "2026-01-1",
        "2026-1-01",
        "226-01-01",
        "",
        " 2026-01-01",
        "2026-01-01 ",
        " 2026-01-01 ",
        "２０２６-０１-０１", // full-width digits
        "２026-01-01",
        "２6-01-01",
        "2026/01/01", // other separators and trailing parts
        "2026-01-01T00:00:00Z",
        "+026-01-01",
        "2026-0a-01",
    ] {
        assert!(!is_calendar_date(text), "{text:?}");
    }
}

#[test]
fn add_task_keeps_a_valid_due_date() {
    let new = add(json!({ "title": "t", "due": "2024-02-29" })).unwrap();
    assert_eq!(new.due.as_deref(), Some("2024-02-29"));
}

/// Values that are no calendar date, each rejected wherever a date is expected.
fn not_dates() -> [Value; 13] {
    [
        json!("2023-02-29"),
        json!("1900-02-29"),
        json!("2026-13-01"),
        json!("2026-01-00"),
        json!("2026-1-1"),
        json!("2026-01-1"),
        json!(""),
        json!(" 2026-01-01"),
        json!("2026-01-01 "),
        json!("２０２６-０１-０１"),
        json!(20260101),
        json!(null),
        json!(true),
    ]
}

#[test]
fn add_task_rejects_invalid_due_dates() {
    for due in not_dates() {
        let result = add(json!({ "title": "t", "due": due }));
        assert_eq!(problem_fields(result), ["due"], "due = {due}");
    }
}

// ---- tags ----

#[test]
fn ten_tags_are_accepted() {
    let tags: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    assert_eq!(
        add(json!({ "title": "t", "tags": tags })).unwrap().tags,
        tags
    );
}

#[test]
fn eleven_tags_are_rejected() {
    let tags: Vec<String> = (0..11).map(|i| format!("t{i}")).collect();
    let result = add(json!({ "title": "t", "tags": tags }));
    assert_eq!(problem_fields(result), ["tags"]);
}

#[test]
fn tag_of_40_units_is_accepted_and_41_rejected() {
    let tag = "x".repeat(40);
    assert_eq!(
        add(json!({ "title": "t", "tags": [tag] })).unwrap().tags,
        [tag]
    );
    let result = add(json!({ "title": "t", "tags": ["ok", "x".repeat(41)] }));
    assert_eq!(problem_fields(result), ["tags[1]"]);
}

#[test]
fn tag_of_20_emoji_is_accepted_and_one_more_letter_rejected() {
    let tag = "😀".repeat(20);
    let tags = add(json!({ "title": "t", "tags": [tag] })).unwrap().tags;
    assert_eq!(tags, [tag.as_str()]);
    let result = add(json!({ "title": "t", "tags": [format!("{tag}a")] }));
    assert_eq!(problem_fields(result), ["tags[0]"]);
}

#[test]
fn empty_tag_is_rejected() {
    let result = add(json!({ "title": "t", "tags": ["a", ""] }));
    assert_eq!(problem_fields(result), ["tags[1]"]);
}

#[test]
fn non_string_tags_are_rejected_by_position() {
    let result = add(json!({ "title": "t", "tags": [1, "ok", null, ["x"]] }));
    assert_eq!(problem_fields(result), ["tags[0]", "tags[2]", "tags[3]"]);
}

#[test]
fn tags_that_are_not_an_array_are_rejected() {
    for tags in [json!("work"), json!({ "0": "work" }), json!(3), json!(null)] {
        let result = add(json!({ "title": "t", "tags": tags }));
        assert_eq!(problem_fields(result), ["tags"], "tags = {tags}");
    }
}

#[test]
fn empty_tag_list_is_accepted() {
    assert!(
        add(json!({ "title": "t", "tags": [] }))
            .unwrap()
            .tags
            .is_empty()
    );
}

// ---- ids ----

fn complete(value: Value) -> Result<i64, ToolError> {
    complete_task::parse(&args(value))
}

fn delete_with_id(id: Value) -> Result<i64, ToolError> {
    delete_task::parse(&args(json!({ "id": id, "confirm": true })))
}

#[test]
fn id_of_one_is_accepted() {
    assert_eq!(complete(json!({ "id": 1 })).unwrap(), 1);
    assert_eq!(delete_with_id(json!(1)).unwrap(), 1);
}

#[test]
fn id_of_max_safe_integer_is_accepted() {
    assert_eq!(
        complete(json!({ "id": MAX_SAFE_INTEGER })).unwrap(),
        MAX_SAFE_INTEGER
    );
    assert_eq!(
        delete_with_id(json!(9_007_199_254_740_991_i64)).unwrap(),
        9_007_199_254_740_991
    );
}

#[test]
fn id_with_a_zero_fraction_counts_as_an_integer() {
    assert_eq!(complete_task::parse(&wire(r#"{"id": 1.0}"#)).unwrap(), 1);
    assert_eq!(
        delete_task::parse(&wire(r#"{"id": 42.0, "confirm": true}"#)).unwrap(),
        42
    );
    assert_eq!(
        complete_task::parse(&wire(r#"{"id": 9007199254740991.0}"#)).unwrap(),
        MAX_SAFE_INTEGER
    );
}

#[test]
fn ids_that_are_not_positive_safe_integers_are_rejected() {
    for text in [
        "1.5",
        "\"1\"",
        "0",
        "0.0",
        "-0.0",
        "-1",
        "-1.0",
        "9007199254740992",
        "9007199254740992.0",
        "18446744073709551615",
        "1e300",
        "-1e300",
        "null",
        "true",
        "[1]",
        "{\"id\": 1}",
    ] {
        let result = complete_task::parse(&wire(&format!(r#"{{"id": {text}}}"#)));
        assert_eq!(problem_fields(result), ["id"], "complete_task id = {text}");
        let result = delete_task::parse(&wire(&format!(r#"{{"id": {text}, "confirm": true}}"#)));
        assert_eq!(problem_fields(result), ["id"], "delete_task id = {text}");
    }
}

#[test]
fn missing_id_is_rejected_as_required() {
    assert_required(complete(json!({})), "id");
    let result = delete_task::parse(&args(json!({ "confirm": true })));
    assert_eq!(problem_fields(result), ["id"]);
}

// ---- confirm ----

#[test]
fn delete_with_confirm_true_is_accepted() {
    assert_eq!(delete_with_id(json!(7)).unwrap(), 7);
}

#[test]
fn confirm_other_than_the_boolean_true_is_rejected() {
    for confirm in [
        json!("true"),
        json!(1),
        json!(false),
        json!(null),
        json!([true]),
    ] {
        let result = delete_task::parse(&args(json!({ "id": 1, "confirm": confirm })));
        assert_eq!(problem_fields(result), ["confirm"], "confirm = {confirm}");
    }
}

#[test]
fn missing_confirm_is_rejected_as_required() {
    assert_required(delete_task::parse(&args(json!({ "id": 1 }))), "confirm");
}

// ---- unknown properties ----

#[test]
fn unknown_top_level_properties_are_rejected_in_every_tool() {
    assert_eq!(
        problem_fields(add(json!({ "title": "t", "priority": 1 }))),
        ["priority"]
    );
    assert_eq!(problem_fields(list(json!({ "limit": 5 }))), ["limit"]);
    assert_eq!(
        problem_fields(complete(json!({ "id": 1, "force": true }))),
        ["force"]
    );
    assert_eq!(
        problem_fields(delete_task::parse(&args(
            json!({ "id": 1, "confirm": true, "cascade": true })
        ))),
        ["cascade"]
    );
    assert_eq!(
        problem_fields(search(json!({ "query": "q", "regex": true }))),
        ["regex"]
    );
}

#[test]
fn unknown_property_nested_in_filter_is_rejected() {
    let result = list(json!({ "filter": { "status": "open", "extra": 1 } }));
    assert_eq!(problem_fields(result), ["filter.extra"]);
}

#[test]
fn proto_key_at_the_top_level_is_rejected() {
    let mut map = Map::new();
    map.insert("title".to_owned(), json!("t"));
    map.insert("__proto__".to_owned(), json!({ "admin": true }));
    assert!(map.contains_key("__proto__"));
    assert_eq!(problem_fields(add_task::parse(&map)), ["__proto__"]);

    let mut map = Map::new();
    map.insert("__proto__".to_owned(), json!({}));
    assert_eq!(problem_fields(list_tasks::parse(&map)), ["__proto__"]);
}

#[test]
fn proto_key_nested_in_filter_is_rejected() {
    let mut filter = Map::new();
    filter.insert("__proto__".to_owned(), json!({ "status": "done" }));
    let mut map = Map::new();
    map.insert("filter".to_owned(), Value::Object(filter));
    assert_eq!(
        problem_fields(list_tasks::parse(&map)),
        ["filter.__proto__"]
    );
}

#[test]
fn proto_key_parsed_from_wire_text_is_rejected() {
    let map = wire(r#"{"query": "q", "__proto__": {"query": "x"}}"#);
    assert!(map.contains_key("__proto__"));
    assert_eq!(problem_fields(search_tasks::parse(&map)), ["__proto__"]);
}

// ---- list_tasks filter ----

#[test]
fn list_without_filter_or_with_empty_filter_matches_everything() {
    assert_eq!(list(json!({})).unwrap(), TodoFilter::default());
    assert_eq!(
        list(json!({ "filter": {} })).unwrap(),
        TodoFilter::default()
    );
}

#[test]
fn filter_status_accepts_open_and_done() {
    let open = list(json!({ "filter": { "status": "open" } })).unwrap();
    assert_eq!(open.status, Some(TodoStatus::Open));
    let done = list(json!({ "filter": { "status": "done" } })).unwrap();
    assert_eq!(done.status, Some(TodoStatus::Done));
}

#[test]
fn filter_status_outside_the_enum_is_rejected() {
    for status in [
        json!("closed"),
        json!("OPEN"),
        json!(" open"),
        json!(""),
        json!(1),
        json!(null),
        json!(["open"]),
    ] {
        let result = list(json!({ "filter": { "status": status } }));
        assert_eq!(
            problem_fields(result),
            ["filter.status"],
            "status = {status}"
        );
    }
}

#[test]
fn filter_tag_follows_the_tag_rules() {
    let tag = "x".repeat(40);
    assert_eq!(
        list(json!({ "filter": { "tag": tag } })).unwrap().tag,
        Some(tag)
    );
    for bad in [json!("x".repeat(41)), json!(""), json!(5), json!(["a"])] {
        let result = list(json!({ "filter": { "tag": bad } }));
        assert_eq!(problem_fields(result), ["filter.tag"], "tag = {bad}");
    }
}

#[test]
fn filter_due_bounds_accept_calendar_dates() {
    let filter =
        list(json!({ "filter": { "dueAfter": "2000-02-29", "dueBefore": "2024-02-29" } })).unwrap();
    assert_eq!(filter.due_after.as_deref(), Some("2000-02-29"));
    assert_eq!(filter.due_before.as_deref(), Some("2024-02-29"));
}

#[test]
fn filter_due_bounds_are_validated_like_dates() {
    for bad in not_dates() {
        let result = list(json!({ "filter": { "dueAfter": bad } }));
        assert_eq!(
            problem_fields(result),
            ["filter.dueAfter"],
            "dueAfter = {bad}"
        );
        let result = list(json!({ "filter": { "dueBefore": bad } }));
        assert_eq!(
            problem_fields(result),
            ["filter.dueBefore"],
            "dueBefore = {bad}"
        );
    }
}

#[test]
fn filter_that_is_not_an_object_is_rejected() {
    for filter in [
        json!(null),
        json!([]),
        json!([{ "status": "open" }]),
        json!("open"),
        json!(1),
    ] {
        let result = list(json!({ "filter": filter }));
        assert_eq!(problem_fields(result), ["filter"], "filter = {filter}");
    }
}

// ---- every problem at once ----

#[test]
fn add_task_reports_every_problem_in_one_error() {
    let result = add(json!({
        "title": "",
        "due": "2023-02-29",
        "tags": ["ok", "", 3],
        "colour": "red"
    }));
    assert_eq!(
        problem_fields(result),
        ["colour", "title", "due", "tags[1]", "tags[2]"]
    );
}

#[test]
fn list_tasks_reports_every_filter_problem_in_one_error() {
    let result = list(json!({
        "filter": {
            "status": "closed",
            "tag": "",
            "dueAfter": "2026-1-1",
            "dueBefore": "2026-02-30",
            "extra": true
        },
        "page": 2
    }));
    let mut fields = problem_fields(result);
    fields.sort();
    assert_eq!(
        fields,
        [
            "filter.dueAfter",
            "filter.dueBefore",
            "filter.extra",
            "filter.status",
            "filter.tag",
            "page"
        ]
    );
}

#[test]
fn delete_task_reports_id_confirm_and_unknown_keys_together() {
    let result = delete_task::parse(&args(json!({ "id": 0, "confirm": "true", "force": 1 })));
    assert_eq!(problem_fields(result), ["force", "id", "confirm"]);
}

on_both_backends! {
    fn invoke_returns_one_invalid_input_error_naming_every_field(tools) {
        let error = invoke(
            &tools,
            "add_task",
            json!({ "title": "a".repeat(201), "due": "2026-1-1", "tags": "work", "x": 1 }),
        )
        .unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidInput);
        for field in ["x: ", "title: ", "due: ", "tags: "] {
            assert!(
                error.message.contains(field),
                "{field} in {}",
                error.message
            );
        }
    }
}

// ---- Tools::invoke and the audit log ----

on_both_backends! {
    fn unknown_tool_returns_none_and_writes_no_audit_row(tools) {
        let outcome = tools.invoke("drop_tasks", &args(json!({ "id": 1 })), Origin::default());
        assert!(outcome.is_none());
        assert!(audit(&tools).is_empty());
        assert!(Tools::exists("add_task"));
        assert!(!Tools::exists("drop_tasks"));
    }
}

on_both_backends! {
    fn accepted_call_writes_one_ok_audit_row_with_the_raw_args(tools) {
        let raw = args(json!({ "title": "buy milk", "due": "2026-12-01", "tags": ["home"] }));
        let data = tools
            .invoke("add_task", &raw, Origin::default())
            .unwrap()
            .unwrap();
        assert_eq!(data["title"], "buy milk");
        assert_eq!(data["status"], "open");
        assert_eq!(data["due"], "2026-12-01");
        assert_eq!(data["tags"], json!(["home"]));
        assert_eq!(data["completedAt"], Value::Null);
        assert!(data["createdAt"].is_string());

        let rows = audit(&tools);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].tool, "add_task");
        assert_eq!(rows[0].outcome, "ok");
        assert_eq!(rows[0].args, serde_json::to_string(&raw).unwrap());
        assert_eq!(rows[0].run_id, None);
        assert_eq!(rows[0].node_id, None);
    }
}

on_both_backends! {
    fn rejected_call_writes_one_rejected_audit_row_with_unknown_keys_kept(tools) {
        let raw = wire(r#"{"title": "t", "sneaky": {"nested": [1, 2]}, "__proto__": {"a": 1}}"#);
        let error = tools
            .invoke("add_task", &raw, Origin::default())
            .unwrap()
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidInput);

        let rows = audit(&tools);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].tool, "add_task");
        assert_eq!(rows[0].outcome, "rejected");
        assert_eq!(
            rows[0].args,
            r#"{"title":"t","sneaky":{"nested":[1,2]},"__proto__":{"a":1}}"#
        );
        assert!(
            tools
                .store()
                .list_todos(&TodoFilter::default())
                .unwrap()
                .is_empty()
        );
    }
}

on_both_backends! {
    fn missing_todo_writes_one_not_found_audit_row(tools) {
        let error = invoke(&tools, "complete_task", json!({ "id": 99 })).unwrap_err();
        assert_eq!(error.code, ErrorCode::NotFound);
        let error = invoke(&tools, "delete_task", json!({ "id": 99, "confirm": true })).unwrap_err();
        assert_eq!(error.code, ErrorCode::NotFound);

        let rows = audit(&tools);
        let summary: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.tool.as_str(), r.outcome.as_str()))
            .collect();
        assert_eq!(
            summary,
            [("complete_task", "not_found"), ("delete_task", "not_found")]
        );
        assert_eq!(rows[1].args, r#"{"id":99,"confirm":true}"#);
    }
}

on_both_backends! {
    fn every_tool_call_writes_exactly_one_audit_row_in_order(tools) {
        invoke(&tools, "add_task", json!({ "title": "one" })).unwrap();
        invoke(&tools, "list_tasks", json!({})).unwrap();
        invoke(&tools, "search_tasks", json!({ "query": "on" })).unwrap();
        invoke(&tools, "complete_task", json!({ "id": 1 })).unwrap();
        invoke(&tools, "delete_task", json!({ "id": 1, "confirm": false })).unwrap_err();
        invoke(&tools, "delete_task", json!({ "id": 1, "confirm": true })).unwrap();
        assert!(
            tools
                .invoke("no_such_tool", &Map::new(), Origin::default())
                .is_none()
        );

        let summary: Vec<(String, String)> = audit(&tools)
            .into_iter()
            .map(|r| (r.tool, r.outcome))
            .collect();
        let expected = [
            ("add_task", "ok"),
            ("list_tasks", "ok"),
            ("search_tasks", "ok"),
            ("complete_task", "ok"),
            ("delete_task", "rejected"),
            ("delete_task", "ok"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(t, o)| (t.to_string(), o.to_string()))
            .collect();
        assert_eq!(summary, expected);
    }
}

on_both_backends! {
    fn audit_row_records_the_origin_of_a_call(tools) {
        let origin = Origin {
            run_id: Some("run-7"),
            node_id: Some("node-b"),
            principal: Some("alice"),
        };
        tools
            .invoke("list_tasks", &Map::new(), origin)
            .unwrap()
            .unwrap();
        let rows = audit(&tools);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].run_id.as_deref(), Some("run-7"));
        assert_eq!(rows[0].node_id.as_deref(), Some("node-b"));
        assert_eq!(rows[0].principal.as_deref(), Some("alice"));
    }
}

on_both_backends! {
    fn rejected_delete_leaves_the_todo_in_place(tools) {
        invoke(&tools, "add_task", json!({ "title": "keep me" })).unwrap();
        for confirm in [json!(false), json!("true"), json!(1)] {
            invoke(
                &tools,
                "delete_task",
                json!({ "id": 1, "confirm": confirm }),
            )
            .unwrap_err();
        }
        invoke(&tools, "delete_task", json!({ "id": 1 })).unwrap_err();
        assert!(tools.store().get_todo(1).unwrap().is_some());
    }
}

/// Arguments `{"title":"<title>"}` whose serialisation is exactly `len` bytes of ASCII.
fn title_args_of_len(len: usize) -> Map<String, Value> {
    let raw = args(json!({ "title": "x".repeat(len - r#"{"title":""}"#.len()) }));
    assert_eq!(serde_json::to_string(&raw).unwrap().len(), len);
    raw
}

/// The one audit row of a call of `add_task` with `raw`, which it rejects.
fn rejected_add_audit_row(tools: &Tools, raw: &Map<String, Value>) -> AuditRow {
    tools
        .invoke("add_task", raw, Origin::default())
        .unwrap()
        .unwrap_err();
    let mut rows = audit(tools);
    assert_eq!(rows.len(), 1);
    rows.remove(0)
}

on_both_backends! {
    fn audit_args_at_the_cap_are_stored_verbatim(tools) {
        let raw = title_args_of_len(AUDIT_ARGS_CAP);
        let row = rejected_add_audit_row(&tools, &raw);
        assert_eq!(row.outcome, "rejected");
        assert_eq!(row.args, serde_json::to_string(&raw).unwrap());
    }
}

on_both_backends! {
    fn audit_args_one_byte_over_the_cap_are_truncated_with_a_marker(tools) {
        let raw = title_args_of_len(AUDIT_ARGS_CAP + 1);
        let full = serde_json::to_string(&raw).unwrap();
        assert_eq!(
            rejected_add_audit_row(&tools, &raw).args,
            format!(
                "{}…[truncated: {} bytes in all]",
                &full[..AUDIT_ARGS_CAP],
                AUDIT_ARGS_CAP + 1
            )
        );
    }
}

on_both_backends! {
    fn audit_args_are_cut_on_a_character_boundary(tools) {
        // 10 bytes of `{"title":"` then 4-byte emoji: byte 4096 falls inside an emoji.
        let raw = args(json!({ "title": "😀".repeat(2000) }));
        let full = serde_json::to_string(&raw).unwrap();
        assert!(!full.is_char_boundary(AUDIT_ARGS_CAP));
        let stored = rejected_add_audit_row(&tools, &raw).args;
        let marker = format!("…[truncated: {} bytes in all]", full.len());
        let kept = stored
            .strip_suffix(&marker)
            .unwrap_or_else(|| panic!("no truncation marker at the end of {stored}"));
        assert_eq!(kept.len(), AUDIT_ARGS_CAP - 2);
        assert!(full.starts_with(kept));
    }
}

on_both_backends! {
    fn completing_a_done_todo_succeeds_and_keeps_completed_at(tools) {
        invoke(&tools, "add_task", json!({ "title": "once" })).unwrap();
        let first = invoke(&tools, "complete_task", json!({ "id": 1 })).unwrap();
        assert_eq!(first["status"], "done");
        let completed_at = first["completedAt"].as_str().unwrap().to_owned();
        std::thread::sleep(Duration::from_millis(5));
        let second = invoke(&tools, "complete_task", json!({ "id": 1 })).unwrap();
        assert_eq!(second["status"], "done");
        assert_eq!(second["completedAt"], completed_at.as_str());
        assert_eq!(second, first);

        let outcomes: Vec<String> = audit(&tools).into_iter().map(|r| r.outcome).collect();
        assert_eq!(outcomes, ["ok", "ok", "ok"]);
    }
}

on_both_backends! {
    fn delete_returns_the_todo_as_it_was_and_removes_it(tools) {
        let added = invoke(
            &tools,
            "add_task",
            json!({ "title": "gone", "tags": ["a"] }),
        )
        .unwrap();
        let deleted = invoke(&tools, "delete_task", json!({ "id": 1, "confirm": true })).unwrap();
        assert_eq!(deleted, added);
        assert!(tools.store().get_todo(1).unwrap().is_none());
        let error = invoke(&tools, "delete_task", json!({ "id": 1, "confirm": true })).unwrap_err();
        assert_eq!(error.code, ErrorCode::NotFound);
    }
}

on_both_backends! {
    fn invoke_list_applies_the_parsed_filter(tools) {
        invoke(
            &tools,
            "add_task",
            json!({ "title": "a", "tags": ["work"] }),
        )
        .unwrap();
        invoke(
            &tools,
            "add_task",
            json!({ "title": "b", "tags": ["home"] }),
        )
        .unwrap();
        invoke(
            &tools,
            "add_task",
            json!({ "title": "c", "tags": ["work"] }),
        )
        .unwrap();
        invoke(&tools, "complete_task", json!({ "id": 3 })).unwrap();
        let listed = invoke(
            &tools,
            "list_tasks",
            json!({ "filter": { "tag": "work", "status": "open" } }),
        )
        .unwrap();
        let titles: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["title"].as_str().unwrap())
            .collect();
        assert_eq!(titles, ["a"]);
    }
}

// ---- NUL characters and the payload digest ----

on_both_backends! {
    fn a_nul_in_a_title_tag_or_query_is_invalid_input_and_audited(tools) {
        for (tool, value, field) in [
            ("add_task", json!({ "title": "a\u{0}b" }), "title"),
            ("add_task", json!({ "title": "t", "tags": ["x\u{0}"] }), "tags[0]"),
            ("search_tasks", json!({ "query": "\u{0}" }), "query"),
            ("list_tasks", json!({ "filter": { "tag": "\u{0}" } }), "filter.tag"),
        ] {
            let error = invoke(&tools, tool, value).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidInput, "{tool}: {error:?}");
            assert!(error.message.contains(&format!("{field}: must not contain a NUL")), "{error:?}");
        }
        let rows = audit(&tools);
        let outcomes: Vec<&str> = rows.iter().map(|r| r.outcome.as_str()).collect();
        assert_eq!(outcomes, ["rejected"; 4]);
        assert!(rows[0].args.contains("a\\u0000b"), "{}", rows[0].args);
        assert!(tools.store().list_todos(&TodoFilter::default()).unwrap().is_empty());
    }
}

on_both_backends! {
    fn the_sha256_of_the_whole_payload_is_stored_beside_the_capped_copy(tools) {
        let raw = args(json!({ "title": "t", "description": "x".repeat(3 * AUDIT_ARGS_CAP) }));
        let full = serde_json::to_string(&raw).unwrap();
        invoke(&tools, "add_task", Value::Object(raw)).unwrap_err();
        let small = args(json!({ "title": "small" }));
        invoke(&tools, "add_task", Value::Object(small.clone())).unwrap();
        let rows = audit(&tools);
        assert!(rows[0].args.len() < full.len());
        assert_eq!(
            rows[0].args_sha256.as_deref(),
            Some(crate::store::chain::sha256_hex(full.as_bytes()).as_str())
        );
        // Under the cap, the digest is that of the stored copy itself.
        assert_eq!(
            rows[1].args_sha256.as_deref(),
            Some(crate::store::chain::sha256_hex(rows[1].args.as_bytes()).as_str())
        );
        assert!(tools.store().verify_audit_chain().unwrap().is_ok());
    }
}

#[test]
fn every_tool_schema_published_is_one_the_validator_accepts() {
    for spec in Tools::specs() {
        assert_eq!(
            crate::schema::schema_problems(&spec.input_schema),
            Vec::<String>::new(),
            "{}",
            spec.name
        );
    }
}
