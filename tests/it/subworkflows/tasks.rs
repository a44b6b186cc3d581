//! A child run's questions as an MCP client meets them: the parent's task asks while a
//! run below it does, its questions are named by the path of `workflow` nodes that leads
//! to them, and an answer given through the parent's task reaches the child.

use serde_json::{Value, json};

use crate::support::backends::on_both_backends;
use crate::support::wire::Wire;

const ASK: &str = include_str!("../../fixtures/ask.toml");

/// Calls `ask` as a child, then makes a todo of what it did.
const NESTED: &str = r#"
name = "nested"
expose_as_tool = true
[nodes.call]
workflow = { name = "ask", inputs = { who = "kim" } }
[nodes.after]
tool = "add_task"
args = { title = "after the child" }
needs = ["call"]
"#;

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        }
    })
}

fn with_meta(mut params: Value) -> Value {
    params["_meta"] = meta();
    params
}

on_both_backends! {
    async fn a_childs_question_is_asked_through_its_parents_task_and_answered_there(place) {
        let flows = [("ask.toml", ASK), ("nested.toml", NESTED)];
        let mut wire = Wire::start_on(place, Default::default(), &flows);
        let call = with_meta(json!({ "name": "nested", "arguments": {} }));
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["taskId"].clone();
        let get = with_meta(json!({ "taskId": task_id }));

        let asking = wire.poll_until(2, get.clone(), "input_required").await;
        let requests = asking["result"]["inputRequests"].as_object().unwrap();
        assert_eq!(
            requests.keys().collect::<Vec<_>>(),
            ["call>approve:attempt-1"],
            "the child's question, named by the node that started the child"
        );
        assert_eq!(
            requests["call>approve:attempt-1"]["params"]["message"],
            "Approve kim?"
        );

        let answer = json!({ "taskId": task_id, "inputResponses": {
            "call>approve:attempt-1": { "action": "accept", "content": { "ok": true } } } });
        let ack = wire.request(3, "tasks/update", with_meta(answer)).await;
        assert_eq!(ack["result"], json!({ "resultType": "complete" }), "{ack}");

        let done = wire.poll_until(4, get, "completed").await;
        let data = &done["result"]["result"]["structuredContent"]["data"];
        assert_eq!(data["status"], "succeeded", "{done}");
        let store = wire.registry.store();
        let mut titles: Vec<String> =
            store.list_todos(&Default::default()).unwrap().into_iter().map(|t| t.title).collect();
        titles.sort();
        assert_eq!(titles, ["after the child", "approved kim"]);
        // The answer is audited under the child run, which asked it.
        let children = store.child_runs(task_id.as_str().unwrap()).unwrap();
        let child = &children[0].id;
        let audit = store.audit_rows().unwrap();
        let answer = audit.iter().find(|row| row.tool == "answer").expect("the answer is audited");
        assert_eq!(answer.run_id.as_ref(), Some(child));
        assert_eq!(answer.outcome, "ok");
    }
}

on_both_backends! {
    async fn a_question_key_of_a_run_not_below_the_task_answers_nothing(place) {
        let flows = [("ask.toml", ASK), ("nested.toml", NESTED)];
        let mut wire = Wire::start_on(place, Default::default(), &flows);
        // Two trees; an answer sent to the first task names the second's question.
        let first = wire.request(1, "tools/call", with_meta(json!({ "name": "ask", "arguments": { "who": "one" } }))).await;
        let second = wire.request(2, "tools/call", with_meta(json!({ "name": "nested", "arguments": {} }))).await;
        let (first, second) = (first["result"]["taskId"].clone(), second["result"]["taskId"].clone());
        wire.poll_until(3, with_meta(json!({ "taskId": first })), "input_required").await;
        wire.poll_until(4, with_meta(json!({ "taskId": second })), "input_required").await;
        let answer = json!({ "taskId": first, "inputResponses": {
            "call>approve:attempt-1": { "action": "accept", "content": { "ok": true } } } });
        wire.request(5, "tasks/update", with_meta(answer)).await;
        let still = wire.request(6, "tasks/get", with_meta(json!({ "taskId": second }))).await;
        assert_eq!(still["result"]["status"], "input_required", "{still}");
        let first_still = wire.request(7, "tasks/get", with_meta(json!({ "taskId": first }))).await;
        assert_eq!(first_still["result"]["status"], "input_required", "{first_still}");
    }
}

on_both_backends! {
    async fn a_childs_nodes_are_sub_tasks_under_the_node_that_started_it(place) {
        let flows = [("ask.toml", ASK), ("nested.toml", NESTED)];
        let mut wire = Wire::start_on(place, Default::default(), &flows);
        wire.initialize(json!({ "elicitation": {} })).await;
        let call = json!({ "name": "nested", "arguments": {}, "task": { "ttl": 60000 } });
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["task"]["taskId"].as_str().unwrap().to_owned();
        let asking = wire
            .poll_until(2, json!({ "taskId": task_id }), "input_required")
            .await;
        let subs = asking["result"]["_meta"]["x-mcp-task-server/subTasks"]
            .as_array()
            .unwrap()
            .clone();
        let node = |s: &Value| s["node"].as_str().unwrap().to_owned();
        let nodes: Vec<String> = subs.iter().map(node).collect();
        assert_eq!(nodes, ["call", "after", "pause", "approve", "todo"], "{subs:#?}");
        let call_task = subs[0]["taskId"].clone();
        let parents: Vec<&Value> = subs
            .iter()
            .map(|s| &s["parentTaskId"])
            .collect();
        assert_eq!(parents[..2], [&Value::Null, &Value::Null], "the run's own units");
        assert_eq!(parents[2..], [&call_task, &call_task, &call_task], "{subs:#?}");

        // A child's unit is a task of its own, under the node's task, and a cursor.
        let approve = subs[3]["taskId"].as_str().unwrap();
        let got = wire.request(3, "tasks/get", json!({ "taskId": approve })).await;
        assert_eq!(got["result"]["status"], "input_required", "{got}");
        let listed = wire.request(4, "tasks/list", json!({})).await;
        let ids: Vec<&str> = listed["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["taskId"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 6, "the run's task and five sub-tasks: {ids:?}");
        assert_eq!(ids[0], task_id);
        let after = wire.request(5, "tasks/list", json!({ "cursor": approve })).await;
        let rest: Vec<&str> = after["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["taskId"].as_str().unwrap())
            .collect();
        assert_eq!(rest, [ids[5]], "the listing goes on after a child's unit");
    }
}
