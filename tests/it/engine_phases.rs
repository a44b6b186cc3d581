//! Phased workflows and the node kinds phased workflows are built from: progress that
//! counts phases, `value` nodes checked against a schema, and the read-only file nodes.

use std::sync::{Arc, Mutex};

use mcp_task_server::engine::RunOptions;
use mcp_task_server::engine::observer::Event;
use mcp_task_server::engine::report::{NodeStatus, RunStatus};
use serde_json::json;

use crate::support;
use crate::support::engine::{Harness, assert_problem, problems};

/// Four nodes in three phases; the second phase has two.
const PHASED: &str = r#"
name = "phased"
[nodes.a]
phase = "first"
value = "1"
[nodes.b]
phase = "second"
needs = ["a"]
value = "2"
[nodes.c]
phase = "second"
needs = ["b"]
value = "3"
[nodes.d]
phase = "third"
needs = ["c"]
value = "nodes.a.output + nodes.b.output + nodes.c.output"
"#;

#[tokio::test]
async fn a_phased_workflow_counts_progress_in_phases_however_many_nodes_each_holds() {
    let harness = Harness::new();
    let plan = support::engine::plan(PHASED);
    let seen: Arc<Mutex<Vec<(usize, usize)>>> = Arc::default();
    let record = Arc::clone(&seen);
    let options = RunOptions {
        observer: Some(Arc::new(move |event: &Event<'_>| {
            if let Event::NodeChanged {
                status, progress, ..
            } = event
                && status.is_terminal()
            {
                record.lock().unwrap().push((progress.done, progress.total));
            }
        })),
        ..RunOptions::default()
    };
    let report = harness
        .engine
        .run(plan, serde_json::Map::new(), options)
        .await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(report.nodes["d"].output, Some(json!(6)));
    // `b` ends half of the second phase, which is not done until `c` is.
    assert_eq!(*seen.lock().unwrap(), [(1, 3), (1, 3), (2, 3), (3, 3)]);
}

#[test]
fn phases_are_given_to_every_node_or_to_none() {
    let found = problems(
        r#"
        [nodes.a]
        phase = "first"
        value = "1"
        [nodes.b]
        value = "2"
        "#,
    );
    assert_problem(
        &found,
        "nodes.b: this node has no `phase`, and others have one",
    );
    let found = problems("[nodes.a]\nphase = \"not a name\"\nvalue = \"1\"\n");
    assert_problem(&found, "invalid phase `not a name`");
}

#[tokio::test]
async fn a_value_that_misfits_its_schema_fails_its_node_naming_every_problem() {
    let harness = Harness::new();
    let plan = support::engine::plan(
        r#"
        [inputs.items]
        type = "array"
        [nodes.checked]
        value = { expr = "inputs.items", schema = { type = "array", items = { type = "object", required = ["name"], properties = { name = { type = "string" }, size = { type = "integer", maximum = 9 } } } } }
        "#,
    );
    let run = harness
        .run(&plan, json!({ "items": [{ "name": "a", "size": 3 }] }))
        .await;
    assert_eq!(run.status("checked"), NodeStatus::Succeeded);
    let run = harness
        .run(&plan, json!({ "items": [{ "size": 12 }, { "name": 5 }] }))
        .await;
    assert_eq!(run.status("checked"), NodeStatus::Failed);
    assert_eq!(run.error_code("checked"), "invalid_value");
    let message = run.error_message("checked");
    for problem in [
        "`[0].name`: is required",
        "`[0].size`: must be an integer no larger than 9 (got 12)",
        "`[1].name`: must be a string",
    ] {
        assert!(message.contains(problem), "{problem} in {message}");
    }
}

#[test]
fn a_value_schema_with_a_keyword_nothing_checks_is_refused_at_load() {
    let found = problems(
        r#"
        [nodes.a]
        value = { expr = "1", schema = { type = "integer", multipleOf = 2 } }
        "#,
    );
    assert_problem(&found, "`multipleOf` is not supported");
}

#[tokio::test]
async fn read_only_file_nodes_see_the_workspace_and_nothing_outside_it() {
    let harness = Harness::new();
    let root = harness.workspace.path();
    std::fs::create_dir_all(root.join("docs/adrs")).unwrap();
    std::fs::write(root.join("docs/adrs/0001-first.md"), "# First decision\n").unwrap();
    let plan = support::engine::plan(
        r#"
        [nodes.listed]
        list_dir = "docs/adrs"
        [nodes.first]
        needs = ["listed"]
        read_file = { path = "docs/adrs/{{ nodes.listed.output.entries[0].name }}", max_bytes = 7 }
        [nodes.outside]
        read_file = "../secret"
        on_failure = "continue"
        "#,
    );
    let run = harness.run(&plan, json!({})).await;
    assert_eq!(
        run.output("listed")["entries"],
        json!([{ "name": "0001-first.md", "kind": "file", "bytes": 17 }])
    );
    assert_eq!(run.output("first")["content"], "# First");
    assert_eq!(run.output("first")["truncated"], true);
    assert_eq!(run.status("outside"), NodeStatus::Failed);
    assert!(run.error_message("outside").contains("contains `..`"));
}
