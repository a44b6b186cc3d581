//! End to end over stdio: the built binary as a child process, driven by an MCP client.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::ErrorCode;
use serde_json::{Map, Value, json};

use crate::support;
use crate::support::{
    Server, TempDb, audit_rows, call, expect_error, expect_ok, server_command, task_titles,
    try_call,
};

const SNAPSHOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/snapshots/tools_list.json"
);

/// Every published tool, in order, with its `readOnlyHint` and `destructiveHint`.
const TOOLS: [(&str, bool, bool); 17] = [
    ("add_task", false, false),
    ("list_tasks", true, false),
    ("complete_task", false, false),
    ("delete_task", false, true),
    ("search_tasks", true, false),
    ("list_workflows", true, false),
    // A workflow may delete todos.
    ("run_workflow", false, true),
    ("list_runs", true, false),
    ("get_run", true, false),
    // The built-in workflows exposed as tools: each writes a file, and all but `research`
    // make todos, but `research` and `troubleshoot_outcome`.
    ("adr_bootstrap_validation", false, true),
    ("adr_validation", false, true),
    ("bootstrap_validation_loop", false, true),
    ("deployment_readiness", false, true),
    ("interactive_adr_planning", false, true),
    ("research", false, true),
    ("troubleshoot", false, true),
    ("troubleshoot_outcome", false, true),
];

/// Input properties that are free-form objects by design: an inline workflow definition
/// (checked by the workflow validator), a workflow's inputs (checked against its own
/// schema), and the phases' structured answers of the ADR planner (checked by the
/// phase's `value` node, with every problem named).
const FREE_FORM_OBJECTS: [&str; 5] = [
    "run_workflow.definition",
    "run_workflow.inputs",
    "interactive_adr_planning.decision",
    "interactive_adr_planning.impacts",
    "interactive_adr_planning.plan",
];

/// `value` with the keys of every object in sorted order, arrays kept as they are.
fn sort_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let sorted: Map<String, Value> = keys
                .into_iter()
                .map(|k| (k.clone(), sort_keys(&map[k])))
                .collect();
            Value::Object(sorted)
        }
        Value::Array(items) => Value::Array(items.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}

/// The published tools as JSON, in the order the server lists them.
async fn published_tools(server: &Server) -> Vec<Value> {
    let tools = tokio::time::timeout(Duration::from_secs(10), server.client.list_all_tools())
        .await
        .expect("tools/list answers in time")
        .expect("tools/list succeeds");
    tools
        .iter()
        .map(|tool| serde_json::to_value(tool).expect("a tool serialises"))
        .collect()
}

#[tokio::test]
async fn tools_list_matches_the_committed_snapshot() {
    let server = Server::start().await;
    let tools = published_tools(&server).await;
    server.stop().await;

    let actual = serde_json::to_string_pretty(&sort_keys(&Value::Array(tools)))
        .expect("tools serialise")
        + "\n";
    if std::env::var("UPDATE_SNAPSHOTS").as_deref() == Ok("1") {
        std::fs::create_dir_all(Path::new(SNAPSHOT).parent().unwrap()).unwrap();
        std::fs::write(SNAPSHOT, &actual).expect("write the snapshot");
        return;
    }
    let expected = std::fs::read_to_string(SNAPSHOT).unwrap_or_else(|e| {
        panic!("cannot read {SNAPSHOT} ({e}); run with UPDATE_SNAPSHOTS=1 to create it")
    });
    if expected != actual {
        let first_difference = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "tools/list differs from {SNAPSHOT} from line {} on \
             (run with UPDATE_SNAPSHOTS=1 to accept the change)\n\
             --- expected ---\n{expected}\n--- actual ---\n{actual}",
            first_difference + 1
        );
    }
}

/// Asserts `additionalProperties: false` on every object level of `schema` except the
/// [`FREE_FORM_OBJECTS`], returning how many closed object levels there were.
fn assert_closed_objects(schema: &Value, path: &str) -> usize {
    let is_object = schema["type"] == "object" || schema.get("properties").is_some();
    if FREE_FORM_OBJECTS.contains(&path) {
        assert!(is_object, "{path} is an object");
        assert!(schema.get("properties").is_none(), "{path} is free-form");
        return 0;
    }
    let mut objects = 0;
    if is_object {
        assert_eq!(
            schema.get("additionalProperties"),
            Some(&Value::Bool(false)),
            "{path} must set additionalProperties: false"
        );
        objects += 1;
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (key, child) in properties {
            objects += assert_closed_objects(child, &format!("{path}.{key}"));
        }
    }
    if let Some(items) = schema.get("items") {
        objects += assert_closed_objects(items, &format!("{path}[]"));
    }
    objects
}

#[tokio::test]
async fn tools_list_publishes_closed_input_schemas_and_accurate_hints() {
    let server = Server::start().await;
    let tools = published_tools(&server).await;
    server.stop().await;

    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let expected: Vec<&str> = TOOLS.iter().map(|(name, _, _)| *name).collect();
    assert_eq!(names, expected);
    for (tool, (name, read_only, destructive)) in tools.iter().zip(TOOLS) {
        let levels = assert_closed_objects(&tool["inputSchema"], name);
        let expected_levels = if name == "list_tasks" { 2 } else { 1 };
        assert_eq!(
            levels, expected_levels,
            "closed object levels in {name}'s inputSchema"
        );

        let hints = &tool["annotations"];
        assert_eq!(hints["readOnlyHint"], read_only, "{name} readOnlyHint");
        assert_eq!(
            hints["destructiveHint"], destructive,
            "{name} destructiveHint"
        );
        assert_eq!(hints["openWorldHint"], false, "{name} openWorldHint");
        assert!(tool["title"].is_string(), "{name} has a title");
        assert!(tool["description"].is_string(), "{name} has a description");
        assert_eq!(
            tool["outputSchema"]["type"], "object",
            "{name} outputSchema"
        );
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn is_timestamp(text: &str) -> bool {
    let shape = "dddd-dd-ddTdd:dd:dd.dddZ";
    text.len() == shape.len()
        && text.bytes().zip(shape.bytes()).all(|(t, s)| match s {
            b'd' => t.is_ascii_digit(),
            _ => t == s,
        })
}

/// Checks the shape of a todo as the tools return it.
fn assert_todo(todo: &Value) {
    let mut keys: Vec<&str> = todo
        .as_object()
        .unwrap_or_else(|| panic!("a todo is an object: {todo}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "completedAt",
            "createdAt",
            "due",
            "id",
            "status",
            "tags",
            "title"
        ]
    );
    assert!(todo["id"].as_i64().is_some_and(|id| id > 0), "{todo}");
    assert!(todo["title"].is_string(), "{todo}");
    assert!(todo["due"].is_null() || todo["due"].is_string(), "{todo}");
    assert!(todo["tags"].is_array(), "{todo}");
    assert!(is_timestamp(todo["createdAt"].as_str().unwrap()), "{todo}");
    match todo["status"].as_str() {
        Some("open") => assert!(todo["completedAt"].is_null(), "{todo}"),
        Some("done") => assert!(
            is_timestamp(todo["completedAt"].as_str().unwrap()),
            "{todo}"
        ),
        _ => panic!("bad status in {todo}"),
    }
}

/// The ids of a list of todos, after checking each one's shape.
fn ids(data: &Value) -> Vec<i64> {
    data.as_array()
        .unwrap_or_else(|| panic!("a list of todos: {data}"))
        .iter()
        .map(|todo| {
            assert_todo(todo);
            todo["id"].as_i64().unwrap()
        })
        .collect()
}

#[tokio::test]
async fn todo_lifecycle_add_list_search_complete_delete() {
    let server = Server::start().await;
    let client = &server.client;

    let milk = expect_ok(
        &call(
            client,
            "add_task",
            json!({"title": "Buy milk", "due": "2025-03-01", "tags": ["home", "errand"]}),
        )
        .await,
    );
    assert_todo(&milk);
    assert_eq!(milk["title"], "Buy milk");
    assert_eq!(milk["status"], "open");
    assert_eq!(milk["due"], "2025-03-01");
    assert_eq!(milk["tags"], json!(["home", "errand"]));
    let report = expect_ok(&call(client, "add_task", json!({"title": "Write report"})).await);
    assert_todo(&report);
    assert_eq!(report["due"], Value::Null);
    assert_eq!(report["tags"], json!([]));
    let sale = expect_ok(&call(client, "add_task", json!({"title": "Sale: 50% off"})).await);
    let (milk_id, report_id, sale_id) = (
        milk["id"].as_i64().unwrap(),
        report["id"].as_i64().unwrap(),
        sale["id"].as_i64().unwrap(),
    );
    assert!(milk_id < report_id && report_id < sale_id, "ids ascend");

    let all = expect_ok(&call(client, "list_tasks", json!({})).await);
    assert_eq!(ids(&all), [milk_id, report_id, sale_id]);
    assert_eq!(all[0], milk, "list returns todos as add returned them");
    let tagged = expect_ok(&call(client, "list_tasks", json!({"filter": {"tag": "home"}})).await);
    assert_eq!(ids(&tagged), [milk_id]);
    let on_the_day = json!({"filter": {"dueAfter": "2025-03-01", "dueBefore": "2025-03-01"}});
    let due = expect_ok(&call(client, "list_tasks", on_the_day).await);
    assert_eq!(ids(&due), [milk_id], "due bounds are inclusive");
    let before = json!({"filter": {"dueBefore": "2025-02-28"}});
    assert_eq!(
        ids(&expect_ok(&call(client, "list_tasks", before).await)),
        [0_i64; 0]
    );

    let found = expect_ok(&call(client, "search_tasks", json!({"query": "MILK"})).await);
    assert_eq!(ids(&found), [milk_id], "search ignores ASCII case");
    let percent = expect_ok(&call(client, "search_tasks", json!({"query": "%"})).await);
    assert_eq!(ids(&percent), [sale_id], "% matches literally");
    let underscore = expect_ok(&call(client, "search_tasks", json!({"query": "_"})).await);
    assert_eq!(ids(&underscore), [0_i64; 0], "_ matches literally");

    let done = expect_ok(&call(client, "complete_task", json!({"id": milk_id})).await);
    assert_todo(&done);
    assert_eq!(done["status"], "done");
    assert_eq!(done["createdAt"], milk["createdAt"]);
    // Timestamps have millisecond precision: a rewrite would be visible after this pause.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let again = expect_ok(&call(client, "complete_task", json!({"id": milk_id})).await);
    assert_eq!(
        again, done,
        "completing twice changes nothing, completedAt included"
    );
    let status = json!({"filter": {"status": "done"}});
    assert_eq!(
        ids(&expect_ok(&call(client, "list_tasks", status).await)),
        [milk_id]
    );
    let status = json!({"filter": {"status": "open"}});
    assert_eq!(
        ids(&expect_ok(&call(client, "list_tasks", status).await)),
        [report_id, sale_id]
    );

    let deleted = expect_ok(
        &call(
            client,
            "delete_task",
            json!({"id": milk_id, "confirm": true}),
        )
        .await,
    );
    assert_eq!(deleted, done, "delete returns the todo as it was");
    let all = expect_ok(&call(client, "list_tasks", json!({})).await);
    assert_eq!(ids(&all), [report_id, sale_id]);

    let message = expect_error(
        &call(
            client,
            "delete_task",
            json!({"id": milk_id, "confirm": true}),
        )
        .await,
        "not_found",
    );
    assert!(message.contains(&milk_id.to_string()), "{message}");
    expect_error(
        &call(client, "complete_task", json!({"id": milk_id})).await,
        "not_found",
    );

    server.stop().await;
}

/// The fields an `invalid_input` message names, in the form `invalid arguments: f: rule; ...`.
fn named_fields(message: &str) -> BTreeSet<String> {
    let list = message
        .strip_prefix("invalid arguments: ")
        .unwrap_or_else(|| panic!("unexpected invalid_input message: {message}"));
    list.split("; ")
        .map(|problem| {
            let (field, rule) = problem
                .split_once(": ")
                .unwrap_or_else(|| panic!("a problem without a rule in: {message}"));
            assert!(!rule.is_empty(), "{message}");
            field.to_owned()
        })
        .collect()
}

#[tokio::test]
async fn invalid_input_names_every_offending_field_for_each_tool() {
    let server = Server::start().await;
    let client = &server.client;
    let todo = expect_ok(&call(client, "add_task", json!({"title": "Keep me"})).await);
    let id = todo["id"].as_i64().unwrap();

    let eleven_tags: Vec<String> = (0..11).map(|i| format!("t{i}")).collect();
    let cases: Vec<(&str, Value, &[&str])> = vec![
        (
            "add_task",
            json!({"title": "", "due": "2025-02-30", "tags": ["ok", ""], "priority": 1}),
            &["title", "due", "tags[1]", "priority"],
        ),
        (
            "add_task",
            json!({"title": 5, "due": 20250101, "tags": "home"}),
            &["title", "due", "tags"],
        ),
        ("add_task", json!({"tags": eleven_tags}), &["title", "tags"]),
        ("add_task", json!({"title": "x".repeat(201)}), &["title"]),
        ("list_tasks", json!({"filter": "open"}), &["filter"]),
        (
            "list_tasks",
            json!({
                "filter": {
                    "status": "maybe", "tag": "", "dueAfter": "2025-13-01",
                    "dueBefore": "tomorrow", "bogus": true
                },
                "limit": 1
            }),
            &[
                "filter.status",
                "filter.tag",
                "filter.dueAfter",
                "filter.dueBefore",
                "filter.bogus",
                "limit",
            ],
        ),
        ("complete_task", json!({}), &["id"]),
        (
            "complete_task",
            json!({"id": 0, "force": true}),
            &["id", "force"],
        ),
        ("complete_task", json!({"id": id.to_string()}), &["id"]),
        (
            "complete_task",
            json!({"id": 9_007_199_254_740_992_i64}),
            &["id"],
        ),
        (
            "delete_task",
            json!({"id": 1.5, "confirm": "yes"}),
            &["id", "confirm"],
        ),
        ("delete_task", json!({"id": id}), &["confirm"]),
        (
            "delete_task",
            json!({"id": id, "confirm": false}),
            &["confirm"],
        ),
        ("delete_task", json!({"confirm": true}), &["id"]),
        ("search_tasks", json!({}), &["query"]),
        (
            "search_tasks",
            json!({"query": "", "limit": 5}),
            &["query", "limit"],
        ),
        ("search_tasks", json!({"query": ["Keep"]}), &["query"]),
    ];

    for (tool, args, fields) in &cases {
        let result = call(client, tool, args.clone()).await;
        let message = expect_error(&result, "invalid_input");
        let expected: BTreeSet<String> = fields.iter().map(|f| f.to_string()).collect();
        assert_eq!(
            named_fields(&message),
            expected,
            "{tool} {args}: message was {message:?}"
        );
    }

    let all = expect_ok(&call(client, "list_tasks", json!({})).await);
    assert_eq!(all, json!([todo]), "rejected calls change nothing");
    let stopped = server.stop().await;
    let db = &stopped.db;

    let rows = audit_rows(db);
    assert_eq!(rows.len(), cases.len() + 2, "one audit row per call");
    for ((tool, args, _), row) in cases.iter().zip(&rows[1..]) {
        assert_eq!(
            (row.tool.as_str(), row.outcome.as_str()),
            (*tool, "rejected")
        );
        assert_eq!(&parse_args(&row.args), args, "audited args of {tool}");
    }
}

fn parse_args(args: &str) -> Value {
    serde_json::from_str(args).unwrap_or_else(|e| panic!("audited args are not JSON ({e}): {args}"))
}

#[tokio::test]
async fn a_top_level_proto_key_is_rejected_and_audited_verbatim() {
    let server = Server::start().await;
    let client = &server.client;
    let args = json!({"title": "Innocent", "__proto__": {"isAdmin": true}});

    let message = expect_error(
        &call(client, "add_task", args.clone()).await,
        "invalid_input",
    );
    assert_eq!(
        named_fields(&message),
        BTreeSet::from(["__proto__".to_owned()])
    );
    let all = expect_ok(&call(client, "list_tasks", json!({})).await);
    assert_eq!(all, json!([]), "nothing was created");
    let stopped = server.stop().await;
    let db = &stopped.db;

    let rows = audit_rows(db);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].tool, "add_task");
    assert_eq!(rows[0].outcome, "rejected");
    assert!(
        rows[0].args.contains(r#""__proto__":{"isAdmin":true}"#),
        "{}",
        rows[0].args
    );
    assert_eq!(parse_args(&rows[0].args), args);
}

#[tokio::test]
async fn every_known_tool_call_appends_an_audit_row_with_raw_args_and_outcome() {
    let server = Server::start().await;
    let client = &server.client;
    let first = expect_ok(&call(client, "add_task", json!({"title": "Audit me"})).await);
    let id = first["id"].as_i64().unwrap();

    let calls: Vec<(&str, Value, &str)> = vec![
        (
            "add_task",
            json!({"title": "Audit me too", "tags": ["a"]}),
            "ok",
        ),
        (
            "add_task",
            json!({"title": "Audit me", "colour": "red"}),
            "rejected",
        ),
        ("complete_task", json!({"id": 424_242}), "not_found"),
        (
            "delete_task",
            json!({"id": 424_242, "confirm": true}),
            "not_found",
        ),
        ("delete_task", json!({"id": id}), "rejected"),
        ("search_tasks", json!({"query": "audit"}), "ok"),
        ("list_tasks", json!({}), "ok"),
        ("list_tasks", json!({"filter": {"status": "done"}}), "ok"),
        ("complete_task", json!({"id": id}), "ok"),
        ("delete_task", json!({"confirm": true, "id": id}), "ok"),
    ];
    for (tool, args, _) in &calls {
        call(client, tool, args.clone()).await;
    }
    let stopped = server.stop().await;
    let db = &stopped.db;

    let rows = audit_rows(db);
    assert_eq!(rows.len(), calls.len() + 1, "one row per call: {rows:#?}");
    assert_eq!(
        (rows[0].tool.as_str(), rows[0].outcome.as_str()),
        ("add_task", "ok")
    );
    for ((tool, args, outcome), row) in calls.iter().zip(&rows[1..]) {
        assert_eq!(
            (row.tool.as_str(), row.outcome.as_str()),
            (*tool, *outcome),
            "{args}"
        );
        assert_eq!(row.args, args.to_string(), "args are stored as sent");
    }
    for pair in rows.windows(2) {
        assert!(pair[0].id < pair[1].id, "ids ascend");
        assert!(pair[0].at <= pair[1].at, "timestamps do not go back");
    }
    // A direct tool call is a one-node run: its own run id, the tool as the node.
    let mut run_ids = BTreeSet::new();
    for row in &rows {
        assert!(is_timestamp(&row.at), "{row:?}");
        assert_eq!(row.node_id.as_deref(), Some(row.tool.as_str()), "{row:?}");
        let run_id = row
            .run_id
            .as_deref()
            .unwrap_or_else(|| panic!("no run id: {row:?}"));
        assert_eq!(run_id.len(), 36, "a UUID: {row:?}");
        assert!(run_ids.insert(run_id), "one run per call: {row:?}");
    }
}

#[tokio::test]
async fn an_unknown_tool_is_a_protocol_error_and_is_not_audited() {
    let server = Server::start().await;
    let client = &server.client;
    expect_ok(&call(client, "list_tasks", json!({})).await);

    let error = try_call(client, "drop_all_tasks", json!({"confirm": true}))
        .await
        .expect_err("an unknown tool is not a tool result");
    let ServiceError::McpError(error) = error else {
        panic!("expected a JSON-RPC error, got {error:?}");
    };
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(error.code.0, -32602);
    assert!(
        error.message.contains("drop_all_tasks"),
        "{}",
        error.message
    );

    expect_ok(&call(client, "list_tasks", json!({})).await);
    let stopped = server.stop().await;
    let db = &stopped.db;
    let tools: Vec<String> = audit_rows(db).into_iter().map(|r| r.tool).collect();
    assert_eq!(tools, ["list_tasks", "list_tasks"]);
}

#[tokio::test]
async fn a_read_only_database_serves_reads_and_fails_writes_without_leaking_details() {
    let temp = TempDb::new();
    let first = Server::start_on(&temp.path).await;
    for title in ["Read me", "Read me too"] {
        expect_ok(&call(&first.client, "add_task", json!({"title": title})).await);
    }
    first.stop().await;
    let rows_before = audit_rows(&temp.path);
    assert_eq!(rows_before.len(), 2);

    let uri = format!("file:{}?mode=ro", temp.path.display());
    let server = Server::start_with_db_arg(uri.as_ref(), &temp.path).await;
    let client = &server.client;
    let all = expect_ok(&call(client, "list_tasks", json!({})).await);
    let titles: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Read me", "Read me too"]);
    let found = expect_ok(&call(client, "search_tasks", json!({"query": "too"})).await);
    assert_eq!(found.as_array().unwrap().len(), 1);

    let message = expect_error(
        &call(client, "add_task", json!({"title": "Cannot write"})).await,
        "internal_error",
    );
    let lower = message.to_lowercase();
    let dir = temp.dir.path().to_string_lossy().to_lowercase();
    for leak in [
        dir.as_str(),
        "tasks.db",
        "file:",
        "sql",
        "insert",
        "readonly",
        "read-only",
        "attempt to write",
    ] {
        assert!(!lower.contains(leak), "message leaks {leak:?}: {message}");
    }
    let stderr = server.stop().await.stderr;

    assert!(
        stderr
            .lines()
            .any(|line| line.contains("audit log write failed") && line.contains("add_task")),
        "stderr does not report the failed audit write of add_task:\n{stderr}"
    );
    assert_eq!(
        audit_rows(&temp.path),
        rows_before,
        "no audit rows were added"
    );
    assert_eq!(task_titles(&temp.path), ["Read me", "Read me too"]);
}

#[tokio::test]
async fn tasks_db_path_is_used_when_db_is_absent() {
    let cwd = tempfile::tempdir().unwrap();
    let temp = TempDb::new();
    let mut command = server_command(cwd.path());
    command.env("TASKS_DB_PATH", &temp.path);
    let server = Server::spawn(command, temp.path.clone()).await;
    expect_ok(&call(&server.client, "add_task", json!({"title": "From the env"})).await);
    server.stop().await;

    assert_eq!(task_titles(&temp.path), ["From the env"]);
    assert_eq!(audit_rows(&temp.path).len(), 1);
    assert!(
        !cwd.path().join("tasks.db").exists(),
        "the default path was not used"
    );
}

#[tokio::test]
async fn db_flag_takes_precedence_over_tasks_db_path() {
    let from_env = TempDb::new();
    let from_flag = TempDb::new();
    let mut command = server_command(from_flag.dir.path());
    command
        .env("TASKS_DB_PATH", &from_env.path)
        .arg("--db")
        .arg(&from_flag.path);
    let server = Server::spawn(command, from_flag.path.clone()).await;
    expect_ok(
        &call(
            &server.client,
            "add_task",
            json!({"title": "From the flag"}),
        )
        .await,
    );
    server.stop().await;

    assert_eq!(task_titles(&from_flag.path), ["From the flag"]);
    assert!(!from_env.path.exists(), "the env path was not used");
}

/// Runs the binary to completion with `args`, stdin closed, in `cwd`.
fn run_binary(args: &[&std::ffi::OsStr], cwd: &Path) -> Output {
    std::process::Command::new(support::BIN)
        .args(args)
        .env_remove("TASKS_DB_PATH")
        .env_remove("RUST_LOG")
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the server binary")
}

#[test]
fn a_db_in_a_missing_directory_fails_at_startup_with_a_message() {
    let temp = tempfile::tempdir().unwrap();
    let db = temp.path().join("no-such-dir").join("tasks.db");
    let output = run_binary(&["--db".as_ref(), db.as_ref()], temp.path());
    let stderr = String::from_utf8_lossy(&output.stderr);

    assert!(!output.status.success(), "exit status {}", output.status);
    assert!(
        output.stdout.is_empty(),
        "stdout must stay empty: {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(stderr.contains("cannot open database"), "{stderr}");
    assert!(stderr.contains(&db.display().to_string()), "{stderr}");
    assert!(!db.parent().unwrap().exists(), "no directory was created");
}

#[test]
fn help_describes_the_binary_and_its_options() {
    let temp = tempfile::tempdir().unwrap();
    let output = run_binary(&["--help".as_ref()], temp.path());
    let stdout = String::from_utf8_lossy(&output.stdout);

    assert!(output.status.success(), "exit status {}", output.status);
    assert!(stdout.contains("mcp-task-server"), "{stdout}");
    assert!(stdout.contains("--db"), "{stdout}");
    assert!(stdout.contains("TASKS_DB_PATH"), "{stdout}");
    assert!(
        !temp.path().join("tasks.db").exists(),
        "--help opens no database"
    );
}

#[test]
fn version_prints_the_package_version() {
    let temp = tempfile::tempdir().unwrap();
    let output = run_binary(&["--version".as_ref()], temp.path());

    assert!(output.status.success(), "exit status {}", output.status);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("mcp-task-server {}", env!("CARGO_PKG_VERSION"))
    );
}
