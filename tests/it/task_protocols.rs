//! Runs as MCP tasks in both task protocols, as exact JSON exchanges with the server in
//! this process: 2025-11-25 (`params.task`, `tasks/get|result|list|cancel`) and the
//! SEP-2663 extension (`server/discover`, flat `CreateTaskResult`, `tasks/update`).
//! Task ids and times vary from run to run and are compared as `<id>` and `<time>`.

use std::time::Duration;

use mcp_task_server::runs::RegistryConfig;
use mcp_task_server::store::Scope;
use serde_json::{Value, json};

use crate::support::backends::{Place, on_both_backends};
use crate::support::wire::Wire;

/// A workflow that waits, asks the user, then makes a todo.
const ASK: &str = include_str!("../fixtures/ask.toml");

/// A workflow that asks two questions, one after the other.
const TWICE: &str = r#"
name = "twice"
description = "Asks for a name, then for a colour."
expose_as_tool = true

[nodes.name]
input = { message = "Your name?", schema = { type = "object", properties = { name = { type = "string" } }, required = ["name"] } }

[nodes.colour]
needs = ["name"]
input = { message = "Your colour, {{ nodes.name.output.name }}?", schema = { type = "object", properties = { colour = { type = "string" } }, required = ["colour"] } }

[nodes.said]
needs = ["colour"]
render = "{{ nodes.name.output.name }} likes {{ nodes.colour.output.colour }}"

[output]
said = "nodes.said.output"
"#;

/// Two branches: a slow one with a node after it, and a quick one that makes a todo.
const BRANCHES: &str = r#"
name = "branches"
description = "A slow branch and a quick one."
expose_as_tool = true

[nodes.slow]
wait = "30s"

[nodes.after_slow]
needs = ["slow"]
render = "after"

[nodes.quick]
wait = "300ms"

[nodes.todo]
needs = ["quick"]
tool = "add_task"
args = { title = "quick branch done" }
"#;

/// A workflow that asks the client's model for a draft.
const DRAFT: &str = r#"
name = "draft"
description = "Asks the model for a line."
expose_as_tool = true

[nodes.line]
sample = { prompt = "Write one line about queues." }
"#;

/// A quick workflow that never runs as a task and answers in plain text.
const GREET: &str = r#"
name = "greet"
description = "Says hello."
expose_as_tool = true
task_support = "forbidden"
result = "text"

[inputs.name]
type = "string"
default = "World"

[nodes.hello]
render = "Hello, {{ inputs.name }}!"

[output]
text = "nodes.hello.output"
"#;

/// A workflow that runs only as a task.
const BACKGROUND: &str = r#"
name = "background"
description = "Runs only as a task."
expose_as_tool = true
task_support = "required"

[nodes.work]
render = "worked"
"#;

/// A workflow that asks for a name in rounds of the call, then works as a task.
const ASK_FIRST: &str = r#"
name = "ask_first"
description = "Asks a name first, then works as a task."
expose_as_tool = true
ask_before_task = true
result = "text"

[nodes.user]
input = { message = "Your name?", schema = { type = "object", properties = { name = { type = "string" } }, required = ["name"] } }

[nodes.greeting]
needs = ["user"]
render = "Hello, {{ nodes.user.output.name }}!"

[output]
text = "nodes.greeting.output"
"#;

fn start(place: Place) -> Wire {
    start_with(place, RegistryConfig::default())
}

fn start_with(place: Place, config: RegistryConfig) -> Wire {
    let flows = [
        ("ask.toml", ASK),
        ("twice.toml", TWICE),
        ("branches.toml", BRANCHES),
        ("draft.toml", DRAFT),
        ("greet.toml", GREET),
        ("background.toml", BACKGROUND),
        ("ask_first.toml", ASK_FIRST),
    ];
    Wire::start_on(place, config, &flows)
}

/// The reply with its varying values (task ids, times) replaced by placeholders.
fn normal(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, item) in map.iter_mut() {
                    match key.as_str() {
                        "taskId" | "x-mcp-task-server/parentTaskId" => *item = json!("<id>"),
                        "createdAt" | "lastUpdatedAt" => *item = json!("<time>"),
                        _ => walk(item),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

fn ok(id: i64, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

fn error(id: i64, code: i64) -> (Value, Value) {
    (json!(id), json!(code))
}

fn code_of(reply: &Value) -> (Value, Value) {
    (reply["id"].clone(), reply["error"]["code"].clone())
}

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

// ---------------------------------------------------------------------------------------
// 2025-11-25

on_both_backends! {
    async fn a_2025_client_is_told_of_task_support_in_initialize_and_on_each_task_capable_tool(place) {
        let mut wire = start(place);
        let init = wire.initialize(json!({ "elicitation": {} })).await;
        assert_eq!(
            init["result"]["capabilities"]["tasks"],
            json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } })
        );
        let tools = wire.request(1, "tools/list", json!({})).await;
        let support: Vec<(String, Value)> = tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_owned(),
                    t["execution"].clone(),
                )
            })
            .collect();
        for (name, execution) in &support {
            let expected = match name.as_str() {
                "list_workflows" | "list_runs" | "get_run" | "greet" => Value::Null,
                "background" => json!({ "taskSupport": "required" }),
                _ => json!({ "taskSupport": "optional" }),
            };
            assert_eq!(execution, &expected, "{name}");
        }
        assert!(support.iter().any(|(name, _)| name == "ask"));
        assert!(
            !tools.to_string().contains("x-mcp-task-server/taskSupport"),
            "the handler's mark never reaches a client"
        );
    }
}

on_both_backends! {
    async fn a_2025_session_that_declares_the_extension_at_initialize_still_speaks_2025_tasks(place) {
        let mut wire = start(place);
        let capabilities =
            json!({ "elicitation": {}, "extensions": { "io.modelcontextprotocol/tasks": {} } });
        let init = wire.initialize(capabilities).await;
        let capabilities = &init["result"]["capabilities"];
        assert_eq!(
            capabilities["tasks"]["requests"],
            json!({ "tools": { "call": {} } })
        );
        assert_eq!(capabilities.get("extensions"), None);
        let tools = wire.request(1, "tools/list", json!({})).await;
        assert_eq!(
            tools["result"]["tools"][0]["execution"],
            json!({ "taskSupport": "optional" })
        );
        // A plain call runs to the end; `params.task` makes a 2025-11-25 task.
        let flow = json!({ "definition": { "name": "quick", "nodes": { "hi": { "render": "hi" } } } });
        let plain = json!({ "name": "run_workflow", "arguments": flow });
        let reply = wire.request(2, "tools/call", plain).await;
        assert_eq!(reply["result"]["structuredContent"]["ok"], true, "{reply}");
        assert_eq!(reply["result"].get("taskId"), None);
        let tasked = json!({ "name": "run_workflow", "arguments": flow, "task": {} });
        let created = wire.request(3, "tools/call", tasked).await;
        let task_id = created["result"]["task"]["taskId"].clone();
        assert!(task_id.is_string(), "{created}");
        let got = wire
            .poll_until(4, json!({ "taskId": task_id }), "completed")
            .await;
        assert_eq!(got["result"]["ttl"], DAY_MS, "2025-11-25 shapes: {got}");
    }
}

on_both_backends! {
    async fn a_2025_task_is_created_polled_asked_through_tasks_result_and_listed(place) {
        let mut wire = start(place);
        wire.initialize(json!({ "elicitation": {} })).await;
        let call = json!({ "name": "ask", "arguments": { "who": "ann" }, "task": { "ttl": 60000 },
            "_meta": { "progressToken": "p-ann" } });
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["task"]["taskId"]
            .as_str()
            .unwrap()
            .to_owned();
        let created_at = created["result"]["task"]["createdAt"].clone();
        assert_eq!(
            normal(created),
            ok(
                1,
                json!({ "task": {
                "taskId": "<id>", "status": "working", "statusMessage": "0/3",
                "createdAt": "<time>", "lastUpdatedAt": "<time>",
                "ttl": DAY_MS, "pollInterval": 1000
            } })
            )
        );

        let asking = wire
            .poll_until(2, json!({ "taskId": task_id }), "input_required")
            .await;
        // The creation time the call replied with is the one the store keeps.
        assert_eq!(asking["result"]["createdAt"], created_at);
        let subs = &asking["result"]["_meta"]["x-mcp-task-server/subTasks"];
        let nodes: Vec<(&str, &str)> = subs
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["node"].as_str().unwrap(), s["status"].as_str().unwrap()))
            .collect();
        assert_eq!(
            nodes,
            [
                ("pause", "completed"),
                ("approve", "input_required"),
                ("todo", "working")
            ]
        );

        let approve = |_: &Value| json!({ "action": "accept", "content": { "ok": true } });
        let result = wire
            .request_answering(3, "tasks/result", json!({ "taskId": task_id }), &approve)
            .await;
        let asked = wire
            .seen
            .iter()
            .find(|m| m["method"] == "elicitation/create")
            .expect("the question went to the client")
            .clone();
        assert_eq!(asked["params"]["mode"], "form");
        assert_eq!(asked["params"]["message"], "Approve ann?");
        assert_eq!(
            asked["params"]["requestedSchema"],
            json!({ "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] })
        );
        assert_eq!(
            asked["params"]["_meta"]["io.modelcontextprotocol/related-task"],
            json!({ "taskId": task_id })
        );
        let result = &result["result"];
        assert_eq!(result["isError"], false);
        assert_eq!(result.get("resultType"), None);
        assert_eq!(
            result["_meta"]["io.modelcontextprotocol/related-task"],
            json!({ "taskId": task_id })
        );
        let report = &result["structuredContent"]["data"];
        assert_eq!(report["status"], "succeeded");
        assert_eq!(report["nodes"]["approve"]["output"], json!({ "ok": true }));
        assert_eq!(report["nodes"]["todo"]["output"]["title"], "approved ann");

        let listed = wire.request(4, "tasks/list", json!({})).await;
        let tasks = listed["result"]["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 4, "the run's task, then its three sub-tasks");
        assert_eq!(tasks[0]["taskId"], json!(task_id));
        assert_eq!(tasks[0]["status"], "completed");
        for sub in &tasks[1..] {
            assert_eq!(
                sub["_meta"]["x-mcp-task-server/parentTaskId"],
                json!(task_id)
            );
            assert_eq!(sub["status"], "completed");
        }
        assert_eq!(listed["result"].get("nextCursor"), None);
        // The client hears the task complete, and its progress reach 100, on its token.
        wire.await_seen(|m| {
            m["method"] == "notifications/tasks/status" && m["params"]["status"] == "completed"
        })
        .await;
        wire.await_seen(|m| {
            m["method"] == "notifications/progress" && m["params"]["progress"] == 100.0
        })
        .await;
        let progress: Vec<&Value> = wire
            .seen
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert!(!progress.is_empty(), "progress goes on the call's token");
        assert!(
            progress
                .iter()
                .all(|m| m["params"]["progressToken"] == "p-ann")
        );
        assert_eq!(progress.last().unwrap()["params"]["progress"], 100.0);
    }
}

on_both_backends! {
    async fn a_2025_cancel_ends_a_running_task_before_its_reply_and_refuses_a_finished_one(place) {
        let mut wire = start(place);
        wire.initialize(json!({})).await;
        let call = json!({ "name": "ask", "arguments": {}, "task": {} });
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["task"]["taskId"].clone();

        let cancelled = wire
            .request(2, "tasks/cancel", json!({ "taskId": task_id }))
            .await;
        assert_eq!(cancelled["result"]["status"], "cancelled");
        assert_eq!(
            cancelled["result"]["statusMessage"],
            "cancelled by the client"
        );
        let again = wire
            .request(3, "tasks/cancel", json!({ "taskId": task_id }))
            .await;
        assert_eq!(code_of(&again), error(3, -32602));
        // It stays cancelled once its run has stopped, and its result says so.
        let result = wire
            .request(4, "tasks/result", json!({ "taskId": task_id }))
            .await;
        assert_eq!(result["result"]["isError"], true);
        assert_eq!(
            result["result"]["structuredContent"]["error"]["code"],
            "run_cancelled"
        );
        let got = wire
            .request(5, "tasks/get", json!({ "taskId": task_id }))
            .await;
        assert_eq!(got["result"]["status"], "cancelled");
    }
}

on_both_backends! {
    async fn a_2025_unknown_task_id_is_invalid_params_for_every_task_method(place) {
        let mut wire = start(place);
        wire.initialize(json!({})).await;
        let unknown = json!({ "taskId": "00000000-0000-4000-8000-000000000000" });
        for (id, method) in [(1, "tasks/get"), (2, "tasks/result"), (3, "tasks/cancel")] {
            let reply = wire.request(id, method, unknown.clone()).await;
            assert_eq!(code_of(&reply), error(id, -32602), "{method}");
        }
        let reply = wire
            .request(4, "tasks/list", json!({ "cursor": "no-such-task" }))
            .await;
        assert_eq!(code_of(&reply), error(4, -32602));
    }
}

on_both_backends! {
    async fn a_todo_tool_is_a_task_only_when_asked_and_its_error_makes_the_task_failed(place) {
        let mut wire = start(place);
        wire.initialize(json!({})).await;
        let plain = wire
            .request(
                1,
                "tools/call",
                json!({ "name": "add_task", "arguments": { "title": "now" } }),
            )
            .await;
        assert_eq!(plain["result"]["structuredContent"]["data"]["title"], "now");

        let call = json!({ "name": "add_task", "arguments": { "title": "" }, "task": {} });
        let created = wire.request(2, "tools/call", call).await;
        let task_id = created["result"]["task"]["taskId"].clone();
        let failed = wire
            .poll_until(3, json!({ "taskId": task_id }), "failed")
            .await;
        assert_eq!(failed["result"]["status"], "failed");
        let result = wire
            .request(4, "tasks/result", json!({ "taskId": task_id }))
            .await;
        assert_eq!(result["result"]["isError"], true);
        assert_eq!(
            result["result"]["structuredContent"]["error"]["code"],
            "invalid_input"
        );

        // A tool that never runs as a task is asked for one: -32601, as 2025-11-25 says.
        let forbidden = json!({ "name": "list_workflows", "arguments": {}, "task": {} });
        let reply = wire.request(5, "tools/call", forbidden).await;
        assert_eq!(code_of(&reply), error(5, -32601));
    }
}

on_both_backends! {
    async fn a_2025_call_without_a_task_asks_its_question_directly_and_runs_to_the_end(place) {
        let mut wire = start(place);
        wire.initialize(json!({ "elicitation": {} })).await;
        let approve = |_: &Value| json!({ "action": "accept", "content": { "ok": true } });
        let call = json!({ "name": "ask", "arguments": { "who": "cy" } });
        let reply = wire
            .request_answering(1, "tools/call", call, &approve)
            .await;
        let asked = wire
            .seen
            .iter()
            .find(|m| m["method"] == "elicitation/create")
            .expect("the question went to the client during the call");
        assert_eq!(asked["params"]["message"], "Approve cy?");
        assert_eq!(
            asked["params"]
                .get("_meta")
                .and_then(|m| m.get("io.modelcontextprotocol/related-task")),
            None
        );
        let report = &reply["result"]["structuredContent"]["data"];
        assert_eq!(report["status"], "succeeded");
        assert_eq!(report["nodes"]["todo"]["output"]["title"], "approved cy");
        let audit = wire.registry.store().audit_rows().unwrap();
        let answers: Vec<_> = audit.iter().filter(|row| row.tool == "answer").collect();
        assert_eq!(answers.len(), 1, "the direct answer is in the audit log");
        assert_eq!(answers[0].node_id.as_deref(), Some("approve"));
    }
}

on_both_backends! {
    async fn a_2025_call_from_a_client_that_cannot_answer_fails_the_node_naming_what_is_missing(place) {
        let mut wire = start(place);
        wire.initialize(json!({ "sampling": {} })).await;
        let call = json!({ "name": "ask", "arguments": {} });
        let reply = wire.request(1, "tools/call", call).await;
        assert_eq!(reply["result"]["isError"], true);
        let error = &reply["result"]["structuredContent"]["data"]["nodes"]["approve"]["error"];
        assert_eq!(error["code"], "unsupported");
        assert!(
            error["message"].as_str().unwrap().contains("elicitation"),
            "{error}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// SEP-2663, 2026-07-28

fn meta(declared: bool) -> Value {
    let extensions = if declared {
        json!({ "io.modelcontextprotocol/tasks": {} })
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": { "extensions": extensions }
    })
}

fn with_meta(mut params: Value, declared: bool) -> Value {
    params["_meta"] = meta(declared);
    params
}

on_both_backends! {
    async fn the_extension_is_discovered_and_a_workflow_call_returns_a_flat_task(place) {
        let mut wire = start(place);
        let discovered = wire
            .request(1, "server/discover", with_meta(json!({}), true))
            .await;
        let capabilities = &discovered["result"]["capabilities"];
        assert_eq!(
            capabilities["extensions"]["io.modelcontextprotocol/tasks"],
            json!({})
        );
        assert_eq!(capabilities.get("tasks"), None);

        let call = with_meta(json!({ "name": "ask", "arguments": {} }), true);
        let created = wire.request(2, "tools/call", call).await;
        assert_eq!(
            normal(created),
            ok(
                2,
                json!({
                    "resultType": "task", "taskId": "<id>", "status": "working",
                    "statusMessage": "0/3", "createdAt": "<time>", "lastUpdatedAt": "<time>",
                    "ttlMs": DAY_MS, "pollIntervalMs": 1000
                })
            )
        );
    }
}

on_both_backends! {
    async fn an_extension_task_inlines_its_question_takes_the_answer_by_update_and_inlines_its_result(place) {
        let mut wire = start(place);
        let call = with_meta(json!({ "name": "ask", "arguments": { "who": "bo" } }), true);
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["taskId"].clone();
        let get = with_meta(json!({ "taskId": task_id }), true);

        let asking = wire.poll_until(2, get.clone(), "input_required").await;
        let requests = asking["result"]["inputRequests"].as_object().unwrap();
        assert_eq!(
            requests.keys().collect::<Vec<_>>(),
            ["approve:attempt-1"],
            "one question, under a key that names its node"
        );
        assert_eq!(
            requests["approve:attempt-1"],
            json!({ "method": "elicitation/create", "params": {
                "mode": "form", "message": "Approve bo?",
                "requestedSchema": { "type": "object", "properties": { "ok": { "type": "boolean" } }, "required": ["ok"] }
            } })
        );

        let answer = json!({ "taskId": task_id, "inputResponses": {
            "approve:attempt-1": { "action": "accept", "content": { "ok": true } } } });
        let ack = wire
            .request(3, "tasks/update", with_meta(answer, true))
            .await;
        assert_eq!(ack, ok(3, json!({ "resultType": "complete" })));

        let done = wire.poll_until(4, get.clone(), "completed").await;
        let result = &done["result"]["result"];
        assert_eq!(result["isError"], false);
        assert_eq!(result.get("resultType"), None);
        assert_eq!(
            result.get("_meta"),
            None,
            "no related-task meta on an inlined result"
        );
        assert_eq!(
            result["structuredContent"]["data"]["nodes"]["todo"]["output"]["title"],
            "approved bo"
        );
        assert!(done["result"].get("inputRequests").is_none());

        let audit = wire.registry.store().audit_rows().unwrap();
        let started = audit
            .iter()
            .find(|row| row.tool == "ask")
            .expect("the call that started the task is audited");
        assert_eq!(started.outcome, "ok");
        assert_eq!(started.run_id.as_deref(), task_id.as_str());
        let answer = audit
            .iter()
            .find(|row| row.tool == "answer")
            .expect("the answer is in the audit log");
        assert_eq!(answer.outcome, "ok");
        assert_eq!(answer.node_id.as_deref(), Some("approve"));
        assert!(answer.args.contains("\"ok\":true"), "{}", answer.args);

        let ack = wire.request(5, "tasks/cancel", get.clone()).await;
        assert_eq!(
            ack,
            ok(5, json!({ "resultType": "complete" })),
            "cancel of a finished task is acknowledged"
        );
    }
}

on_both_backends! {
    async fn an_extension_run_that_fails_is_completed_with_an_error_result(place) {
        let mut wire = start(place);
        let call = with_meta(json!({ "name": "ask", "arguments": {} }), true);
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["taskId"].clone();
        let get = with_meta(json!({ "taskId": task_id }), true);
        wire.poll_until(2, get.clone(), "input_required").await;
        let decline = json!({ "taskId": task_id, "inputResponses": {
            "approve:attempt-1": { "action": "decline" } } });
        wire.request(3, "tasks/update", with_meta(decline, true))
            .await;

        let done = wire.poll_until(4, get, "completed").await;
        let result = &done["result"]["result"];
        assert_eq!(result["isError"], true);
        let report = &result["structuredContent"]["data"];
        assert_eq!(report["nodes"]["approve"]["error"]["code"], "refused");
        assert_eq!(report["nodes"]["todo"]["status"], "skipped");
    }
}

on_both_backends! {
    async fn extension_task_methods_need_the_extension_and_the_removed_ones_are_not_found(place) {
        let mut wire = start(place);
        let call = with_meta(json!({ "name": "ask", "arguments": {} }), true);
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["taskId"].clone();

        let undeclared = with_meta(json!({ "taskId": task_id }), false);
        for (id, method) in [(2, "tasks/get"), (3, "tasks/cancel")] {
            let reply = wire.request(id, method, undeclared.clone()).await;
            assert_eq!(code_of(&reply), error(id, -32021), "{method}");
        }
        let declared = with_meta(json!({ "taskId": task_id }), true);
        for (id, method) in [(4, "tasks/result"), (5, "tasks/list")] {
            let reply = wire.request(id, method, declared.clone()).await;
            assert_eq!(code_of(&reply), error(id, -32601), "{method}");
        }
        let unknown = with_meta(json!({ "taskId": "nope" }), true);
        let reply = wire.request(6, "tasks/get", unknown).await;
        assert_eq!(code_of(&reply), error(6, -32602));

        // A call that did not declare the extension runs to the end and answers at once;
        // a todo call answers at once even when it did.
        let plain = with_meta(
            json!({ "name": "add_task", "arguments": { "title": "t" } }),
            true,
        );
        let reply = wire.request(7, "tools/call", plain).await;
        assert_eq!(reply["result"]["resultType"], "complete");
        assert_eq!(reply["result"]["structuredContent"]["data"]["title"], "t");
        let flow = with_meta(
            json!({ "name": "run_workflow", "arguments": {
            "definition": { "name": "quick", "nodes": { "hi": { "render": "hi" } } } } }),
            false,
        );
        let reply = wire.request(8, "tools/call", flow).await;
        assert_eq!(reply["result"]["resultType"], "complete");
        assert_eq!(reply["result"]["structuredContent"]["ok"], true);
    }
}

on_both_backends! {
    async fn a_task_of_one_protocol_is_unknown_to_the_other(place) {
        let mut wire = start(place);
        wire.initialize(json!({})).await;
        let call = with_meta(json!({ "name": "ask", "arguments": {} }), true);
        let created = wire.request(1, "tools/call", call).await;
        let modern_id = created["result"]["taskId"].clone();
        let reply = wire
            .request(2, "tasks/get", json!({ "taskId": modern_id }))
            .await;
        assert_eq!(code_of(&reply), error(2, -32602));

        let legacy = json!({ "name": "ask", "arguments": {}, "task": {} });
        let created = wire.request(3, "tools/call", legacy).await;
        let id_2025 = created["result"]["task"]["taskId"].clone();
        let reply = wire
            .request(
                4,
                "tasks/get",
                with_meta(json!({ "taskId": id_2025 }), true),
            )
            .await;
        assert_eq!(code_of(&reply), error(4, -32602));
    }
}

// ---------------------------------------------------------------------------------------
// 2026-07-28 without the extension: rounds of `input_required`

fn no_tasks_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} }
    })
}

fn round_call(name: &str, state: Option<&Value>, responses: Value) -> Value {
    let mut params = json!({ "name": name, "arguments": {}, "_meta": no_tasks_meta() });
    if let Some(state) = state {
        params["requestState"] = state.clone();
        params["inputResponses"] = responses;
    }
    params
}

on_both_backends! {
    async fn a_call_without_tasks_asks_in_rounds_and_each_retry_continues_the_same_run(place) {
        let mut wire = start(place);
        let first = wire
            .request(1, "tools/call", round_call("twice", None, json!({})))
            .await;
        let result = &first["result"];
        assert_eq!(result["resultType"], "input_required");
        assert_eq!(
            result["inputRequests"],
            json!({ "name:attempt-1": { "method": "elicitation/create", "params": {
                "mode": "form", "message": "Your name?",
                "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } }, "required": ["name"] }
            } } })
        );
        let state1 = result["requestState"].clone();
        assert!(state1.is_string());

        let answer1 = json!({ "name:attempt-1": { "action": "accept", "content": { "name": "Ada" } } });
        let second = wire
            .request(
                2,
                "tools/call",
                round_call("twice", Some(&state1), answer1.clone()),
            )
            .await;
        let result = &second["result"];
        assert_eq!(result["resultType"], "input_required");
        assert_eq!(
            result["inputRequests"]["colour:attempt-1"]["params"]["message"],
            "Your colour, Ada?"
        );
        let state2 = result["requestState"].clone();
        assert_ne!(state1, state2);

        // An older round is refused; the latest, repeated, is harmless.
        let older = wire
            .request(3, "tools/call", round_call("twice", Some(&state1), answer1))
            .await;
        assert_eq!(code_of(&older), error(3, -32602));
        let repeated = wire
            .request(
                4,
                "tools/call",
                round_call("twice", Some(&state2), json!({})),
            )
            .await;
        assert_eq!(repeated["result"]["resultType"], "input_required");
        let state3 = repeated["result"]["requestState"].clone();

        let answer2 =
            json!({ "colour:attempt-1": { "action": "accept", "content": { "colour": "teal" } } });
        let done = wire
            .request(5, "tools/call", round_call("twice", Some(&state3), answer2))
            .await;
        let result = &done["result"];
        assert_eq!(result["resultType"], "complete");
        let report = &result["structuredContent"]["data"];
        assert_eq!(report["output"], json!({ "said": "Ada likes teal" }));
        let runs = wire.registry.runs(None, Scope::Everyone, 10).unwrap();
        assert_eq!(runs.len(), 1, "every round continued the one run");
    }
}

on_both_backends! {
    async fn a_forged_or_foreign_request_state_is_refused(place) {
        let mut wire = start(place);
        let first = wire
            .request(1, "tools/call", round_call("twice", None, json!({})))
            .await;
        let state = first["result"]["requestState"].as_str().unwrap().to_owned();
        let mut forged = state.clone();
        forged.pop();
        forged.push(if state.ends_with('A') { 'B' } else { 'A' });
        let reply = wire
            .request(
                2,
                "tools/call",
                round_call("twice", Some(&json!(forged)), json!({})),
            )
            .await;
        assert_eq!(code_of(&reply), error(2, -32602));
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("requestState")
        );
        // A state is bound to the tool it was issued for.
        let reply = wire
            .request(
                3,
                "tools/call",
                round_call("ask", Some(&json!(state)), json!({})),
            )
            .await;
        assert_eq!(code_of(&reply), error(3, -32602));
    }
}

on_both_backends! {
    async fn a_round_left_unanswered_past_its_timeout_cancels_its_run(place) {
        let config = RegistryConfig {
            answer_timeout: Duration::from_millis(50),
            ..RegistryConfig::default()
        };
        let mut wire = start_with(place, config);
        let first = wire
            .request(1, "tools/call", round_call("twice", None, json!({})))
            .await;
        assert_eq!(first["result"]["resultType"], "input_required");
        tokio::time::sleep(Duration::from_millis(120)).await;
        let chores = mcp_task_server::runs::housekeeping::Chores {
            take_over: true,
            purge: false,
        };
        mcp_task_server::runs::housekeeping::round(&wire.engine, &wire.registry, chores);
        let mut status = String::new();
        for _ in 0..200 {
            status = wire.registry.runs(None, Scope::Everyone, 1).unwrap()[0]
                .status
                .clone();
            if status == "cancelled" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(status, "cancelled");
        let state = first["result"]["requestState"].clone();
        let late = wire
            .request(
                2,
                "tools/call",
                round_call("twice", Some(&state), json!({})),
            )
            .await;
        assert_eq!(
            code_of(&late),
            error(2, -32602),
            "the state expired with its round"
        );
    }
}

on_both_backends! {
    async fn runs_are_found_again_with_list_runs_and_get_run(place) {
        let mut wire = start(place);
        let call = with_meta(json!({ "name": "ask", "arguments": { "who": "lu" } }), true);
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["taskId"].clone();

        let listed = wire
            .request(
                2,
                "tools/call",
                with_meta(json!({ "name": "list_runs", "arguments": {} }), true),
            )
            .await;
        let runs = &listed["result"]["structuredContent"]["data"];
        assert_eq!(runs.as_array().unwrap().len(), 1);
        assert_eq!(runs[0]["taskId"], task_id);
        assert_eq!(runs[0]["workflow"], "ask");
        assert_eq!(
            listed["result"]["resultType"], "complete",
            "a read answers at once"
        );

        let args = json!({ "name": "get_run", "arguments": { "run_id": task_id } });
        let got = wire.request(3, "tools/call", with_meta(args, true)).await;
        let run = &got["result"]["structuredContent"]["data"];
        assert_eq!(run["workflow"], "ask");
        assert_eq!(run["inputs"], json!({ "who": "lu" }));
        assert!(run["nodes"]["approve"]["task_id"].is_string());

        let args = json!({ "name": "get_run", "arguments": { "run_id": "nope" } });
        let missing = wire.request(4, "tools/call", with_meta(args, true)).await;
        assert_eq!(
            missing["result"]["structuredContent"]["error"]["code"],
            "not_found"
        );
        let args = json!({ "name": "list_runs", "arguments": { "status": "lost", "limit": 0 } });
        let bad = wire.request(5, "tools/call", with_meta(args, true)).await;
        let message = bad["result"]["structuredContent"]["error"]["message"]
            .as_str()
            .unwrap();
        assert!(
            message.contains("status") && message.contains("limit"),
            "{message}"
        );
    }
}

on_both_backends! {
    async fn a_retried_start_with_the_same_key_and_arguments_gets_the_same_run(place) {
        let mut wire = start(place);
        wire.initialize(json!({})).await;
        let call = |who: &str| json!({ "name": "ask", "arguments": { "who": who, "idempotency_key": "k-1" }, "task": {} });
        let first = wire.request(1, "tools/call", call("dee")).await;
        let again = wire.request(2, "tools/call", call("dee")).await;
        assert_eq!(
            first["result"]["task"]["taskId"],
            again["result"]["task"]["taskId"]
        );
        let other = wire.request(3, "tools/call", call("eve")).await;
        assert_eq!(code_of(&other), error(3, -32602));
        assert!(
            other["error"]["message"]
                .as_str()
                .unwrap()
                .contains("other arguments"),
            "{other}"
        );
        assert_eq!(
            wire.registry.runs(None, Scope::Everyone, 10).unwrap().len(),
            1
        );

        // A synchronous call with a key of its own runs once, and its retry gets its report.
        let flow = json!({ "name": "run_workflow", "arguments": { "idempotency_key": "k-2",
            "definition": { "name": "once", "nodes": { "todo": { "tool": "add_task",
                "args": { "title": "made once" } } } } } });
        let one = wire.request(4, "tools/call", flow.clone()).await;
        let two = wire.request(5, "tools/call", flow).await;
        let run = |reply: &Value| reply["result"]["structuredContent"]["data"]["run_id"].clone();
        assert_eq!(one["result"]["structuredContent"]["ok"], true);
        assert_eq!(run(&one), run(&two));
        let todos = wire
            .request(
                6,
                "tools/call",
                json!({ "name": "search_tasks", "arguments": { "query": "made once" } }),
            )
            .await;
        let found = todos["result"]["structuredContent"]["data"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(found, 1, "the todo was made once");
    }
}

on_both_backends! {
    async fn cancelling_a_sub_task_cancels_its_node_and_the_trigger_rules_decide_the_rest(place) {
        let mut wire = start(place);
        wire.initialize(json!({})).await;
        let call = json!({ "name": "branches", "arguments": {}, "task": {} });
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["task"]["taskId"].clone();
        let got = wire
            .request(2, "tasks/get", json!({ "taskId": task_id }))
            .await;
        let subs = got["result"]["_meta"]["x-mcp-task-server/subTasks"].clone();
        let sub = |node: &str| {
            subs.as_array()
                .unwrap()
                .iter()
                .find(|s| s["node"] == node)
                .unwrap()["taskId"]
                .clone()
        };

        let cancelled = wire
            .request(3, "tasks/cancel", json!({ "taskId": sub("slow") }))
            .await;
        assert_eq!(cancelled["result"]["status"], "cancelled");
        assert_eq!(
            cancelled["result"]["statusMessage"],
            "cancelled by the client"
        );
        let again = wire
            .request(4, "tasks/cancel", json!({ "taskId": sub("slow") }))
            .await;
        assert_eq!(code_of(&again), error(4, -32602));

        // A node not started yet can be cancelled too; the quick branch goes on.
        let result = wire
            .request(5, "tasks/result", json!({ "taskId": task_id }))
            .await;
        let report = &result["result"]["structuredContent"]["data"];
        assert_eq!(report["status"], "succeeded", "{report}");
        assert_eq!(report["nodes"]["slow"]["status"], "cancelled");
        assert_eq!(report["nodes"]["after_slow"]["status"], "skipped");
        assert_eq!(report["nodes"]["after_slow"]["reason"], "upstream failed");
        assert_eq!(
            report["nodes"]["todo"]["output"]["title"],
            "quick branch done"
        );
    }
}

on_both_backends! {
    async fn cancelling_a_sub_task_that_has_not_started_ends_it_before_it_runs(place) {
        let mut wire = start(place);
        let call = with_meta(json!({ "name": "branches", "arguments": {} }), true);
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["taskId"].clone();
        let get = with_meta(json!({ "taskId": task_id }), true);
        let got = wire.request(2, "tasks/get", get.clone()).await;
        let todo = got["result"]["_meta"]["x-mcp-task-server/subTasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["node"] == "todo")
            .unwrap()["taskId"]
            .clone();
        let ack = wire
            .request(
                3,
                "tasks/cancel",
                with_meta(json!({ "taskId": todo }), true),
            )
            .await;
        assert_eq!(ack, ok(3, json!({ "resultType": "complete" })));
        let sub = wire
            .request(4, "tasks/get", with_meta(json!({ "taskId": todo }), true))
            .await;
        assert_eq!(sub["result"]["status"], "cancelled");
        // The slow branch still runs; cancel the whole run now.
        wire.request(5, "tasks/cancel", get.clone()).await;
        let done = wire.poll_until(6, get, "cancelled").await;
        assert_eq!(done["result"]["status"], "cancelled");
        let todos = wire
            .request(
                7,
                "tools/call",
                with_meta(json!({ "name": "list_tasks", "arguments": {} }), true),
            )
            .await;
        let made = todos["result"]["structuredContent"]["data"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(made, 0, "the cancelled node made no todo");
    }
}

on_both_backends! {
    async fn an_answer_that_does_not_fit_is_asked_again_under_a_new_key_at_most_three_times(place) {
        let mut wire = start(place);
        let call = with_meta(json!({ "name": "ask", "arguments": {} }), true);
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["taskId"].clone();
        let get = with_meta(json!({ "taskId": task_id }), true);
        let bad = json!({ "action": "accept", "content": { "ok": "yes" } });
        let mut keys = Vec::new();
        for round in 0..3 {
            let asking = wire
                .poll_until(10 + round, get.clone(), "input_required")
                .await;
            let requests = asking["result"]["inputRequests"].as_object().unwrap();
            assert_eq!(requests.len(), 1, "{asking}");
            let key = requests.keys().next().unwrap().clone();
            assert!(!keys.contains(&key), "a key is never reused: {key}");
            keys.push(key.clone());
            let update = json!({ "taskId": task_id, "inputResponses": { key: bad.clone() } });
            wire.request(20 + round, "tasks/update", with_meta(update, true))
                .await;
            // The next asking (or the failure) shows once the driver has taken it in.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            keys,
            [
                "approve:attempt-1",
                "approve:attempt-1.r2",
                "approve:attempt-1.r3"
            ]
        );
        let done = wire.poll_until(30, get, "completed").await;
        let report = &done["result"]["result"]["structuredContent"]["data"];
        assert_eq!(report["nodes"]["approve"]["status"], "failed");
        assert_eq!(report["nodes"]["approve"]["error"]["code"], "refused");
    }
}

on_both_backends! {
    async fn a_question_offers_choices_computed_upstream(place) {
        let mut wire = start(place);
        let definition = json!({
            "name": "pick",
            "inputs": { "options": { "type": "array", "default": ["red", "blue"] } },
            "nodes": {
                "choose": { "input": {
                    "message": "Pick one",
                    "schema": { "type": "object", "required": ["colour"], "properties": {
                        "colour": { "type": "string", "enum": "{{ inputs.options }}" } } } } },
                "broken": { "needs": ["choose"], "input": {
                    "message": "Pick again",
                    "schema": { "type": "object", "properties": {
                        "colour": { "type": "string", "enum": "{{ inputs.options | length }}" } } } } }
            }
        });
        let call = with_meta(
            json!({ "name": "run_workflow", "arguments": { "definition": definition } }),
            true,
        );
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["taskId"].clone();
        assert!(task_id.is_string(), "{created}");
        let get = with_meta(json!({ "taskId": task_id }), true);
        let asking = wire.poll_until(2, get.clone(), "input_required").await;
        let question = &asking["result"]["inputRequests"]["choose:attempt-1"]["params"];
        assert_eq!(
            question["requestedSchema"]["properties"]["colour"]["enum"],
            json!(["red", "blue"])
        );
        let pick = |colour: &str, key: &str| {
            with_meta(
                json!({ "taskId": task_id, "inputResponses": {
                key: { "action": "accept", "content": { "colour": colour } } } }),
                true,
            )
        };
        wire.request(3, "tasks/update", pick("green", "choose:attempt-1"))
            .await;
        let again = wire.poll_until(4, get.clone(), "input_required").await;
        assert!(
            again["result"]["inputRequests"]["choose:attempt-1.r2"].is_object(),
            "a choice not on offer is asked again: {again}"
        );
        wire.request(5, "tasks/update", pick("red", "choose:attempt-1.r2"))
            .await;
        let done = wire.poll_until(6, get, "completed").await;
        let report = &done["result"]["result"]["structuredContent"]["data"];
        assert_eq!(
            report["nodes"]["choose"]["output"],
            json!({ "colour": "red" })
        );
        let broken = &report["nodes"]["broken"]["error"];
        assert_eq!(broken["code"], "template_error");
        assert!(
            broken["message"]
                .as_str()
                .unwrap()
                .contains("non-empty list of strings"),
            "{broken}"
        );
    }
}

on_both_backends! {
    async fn a_start_whose_idempotency_key_another_start_recorded_first_does_not_run(place) {
        use mcp_task_server::engine::RunOptions;
        use mcp_task_server::engine::report::RunStatus;
        // Two processes racing on one key both miss the lookup; the store's unique index lets
        // one record its run, and the other must not run unrecorded.
        let wire = start(place);
        let options = || RunOptions {
            record: true,
            idempotency: Some(("same-key".to_owned(), "the call".to_owned())),
            ..RunOptions::default()
        };
        let args = json!({ "title": "made once" }).as_object().unwrap().clone();
        let first = wire
            .engine
            .start_tool("add_task", args.clone(), options())
            .unwrap();
        let first = first.join.await.unwrap();
        let second = wire.engine.start_tool("add_task", args, options()).unwrap();
        let second = second.join.await.unwrap();
        assert_eq!(first.status, RunStatus::Succeeded);
        assert_eq!(second.status, RunStatus::Failed);
        assert!(
            second
                .error
                .as_deref()
                .unwrap()
                .contains("could not be recorded"),
            "{second:?}"
        );
        let todos = wire
            .registry
            .store()
            .list_todos(&Default::default())
            .unwrap();
        assert_eq!(todos.len(), 1, "the refused start made nothing");
    }
}

on_both_backends! {
    async fn a_2026_request_that_also_carries_params_task_gets_the_extension_shapes(place) {
        let mut wire = start(place);
        // SEP-2663: a `task` parameter on a 2026-07-28 request is ignored.
        let call = with_meta(json!({ "name": "ask", "arguments": {}, "task": {} }), true);
        let created = wire.request(1, "tools/call", call).await;
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        assert_eq!(created["result"].get("task"), None);
    }
}

/// A 2026-07-28 request's `_meta` from a client that can elicit but has no model.
fn person_meta(tasks: bool) -> Value {
    let mut meta = meta(tasks);
    meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = json!({});
    meta
}

on_both_backends! {
    async fn a_client_without_a_model_gets_a_sample_question_as_a_form_for_its_person_in_both_2026_forms(place) {
        let mut wire = start(place);
        // As a SEP-2663 task: the question is a form in `inputRequests`, answered by update.
        let mut call = json!({ "name": "draft", "arguments": {} });
        call["_meta"] = person_meta(true);
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["taskId"].clone();
        let mut get = json!({ "taskId": task_id });
        get["_meta"] = person_meta(true);
        let asking = wire.poll_until(2, get.clone(), "input_required").await;
        let request = &asking["result"]["inputRequests"]["line:attempt-1"];
        assert_eq!(request["method"], "elicitation/create");
        assert_eq!(request["params"]["message"], "Write one line about queues.");
        assert_eq!(
            request["params"]["requestedSchema"]["required"],
            json!(["text"])
        );
        let mut update = json!({ "taskId": task_id, "inputResponses": {
            "line:attempt-1": { "action": "accept", "content": { "text": "Queues decouple." } } } });
        update["_meta"] = person_meta(true);
        wire.request(3, "tasks/update", update).await;
        let done = wire.poll_until(4, get, "completed").await;
        let output = &done["result"]["result"]["structuredContent"]["data"]["nodes"]["line"]["output"];
        assert_eq!(
            *output,
            json!({ "text": "Queues decouple.", "model": "person" })
        );

        // In rounds of `input_required`: the same form, and the retry's answer is taken.
        let mut first = json!({ "name": "draft", "arguments": {} });
        first["_meta"] = person_meta(false);
        let round = wire.request(5, "tools/call", first).await;
        let request = &round["result"]["inputRequests"]["line:attempt-1"];
        assert_eq!(request["method"], "elicitation/create", "{round}");
        let mut retry = json!({ "name": "draft", "arguments": {},
            "inputResponses": { "line:attempt-1": {
                "action": "accept", "content": { "text": "Queues buffer." } } },
            "requestState": round["result"]["requestState"] });
        retry["_meta"] = person_meta(false);
        let finished = wire.request(6, "tools/call", retry).await;
        let output = &finished["result"]["structuredContent"]["data"]["nodes"]["line"]["output"];
        assert_eq!(
            *output,
            json!({ "text": "Queues buffer.", "model": "person" }),
            "{finished}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// What a workflow file says of its tool: task support and a plain-text result

on_both_backends! {
    async fn a_workflow_says_whether_its_tool_runs_as_a_task_and_answers_in_text(place) {
        let mut wire = start(place);
        wire.initialize(json!({})).await;
        let tools = wire.request(1, "tools/list", json!({})).await;
        let tool = |name: &str| {
            tools["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|tool| tool["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("{name} is listed"))
        };
        let greet = tool("greet");
        assert_eq!(greet.get("execution"), None, "{greet}");
        assert_eq!(
            greet.get("outputSchema"),
            None,
            "a text result has no schema"
        );
        assert_eq!(tool("background")["execution"]["taskSupport"], "required");

        let hello = json!({ "name": "greet", "arguments": { "name": "Ada" } });
        let reply = wire.request(2, "tools/call", hello.clone()).await;
        assert_eq!(
            reply["result"]["content"],
            json!([{ "type": "text", "text": "Hello, Ada!" }])
        );
        assert_eq!(reply["result"]["isError"], false);
        assert_eq!(reply["result"].get("structuredContent"), None);
        let mut as_task = hello.clone();
        as_task["task"] = json!({});
        let reply = wire.request(3, "tools/call", as_task).await;
        assert_eq!(code_of(&reply), error(3, -32601));
        let reply = wire
            .request(
                4,
                "tools/call",
                json!({ "name": "background", "arguments": {} }),
            )
            .await;
        assert_eq!(
            code_of(&reply),
            error(4, -32601),
            "required needs params.task"
        );

        // Under the extension, a forbidden tool answers at once, and a required one is
        // refused to a call that did not declare the extension.
        let reply = wire.request(5, "tools/call", with_meta(hello, true)).await;
        assert_eq!(reply["result"]["resultType"], "complete");
        assert_eq!(reply["result"]["content"][0]["text"], "Hello, Ada!");
        let background = json!({ "name": "background", "arguments": {} });
        let reply = wire
            .request(6, "tools/call", with_meta(background.clone(), false))
            .await;
        assert_eq!(code_of(&reply), error(6, -32021));
        assert_eq!(
            reply["error"]["data"]["requiredCapabilities"]["extensions"],
            json!({ "io.modelcontextprotocol/tasks": {} })
        );
        let reply = wire
            .request(7, "tools/call", with_meta(background, true))
            .await;
        assert_eq!(reply["result"]["resultType"], "task");
    }
}

on_both_backends! {
    async fn a_workflow_that_asks_first_gathers_its_answers_in_rounds_then_becomes_a_task(place) {
        let mut wire = start(place);
        let call = with_meta(json!({ "name": "ask_first", "arguments": {} }), true);
        let round = wire.request(1, "tools/call", call.clone()).await;
        let result = &round["result"];
        assert_eq!(result["resultType"], "input_required", "{round}");
        assert!(result.get("taskId").is_none(), "no task before the answers");
        let key = result["inputRequests"]
            .as_object()
            .and_then(|requests| requests.keys().next().cloned())
            .expect("one question");

        let mut retry = call;
        retry["requestState"] = result["requestState"].clone();
        retry["inputResponses"] = json!({ key: { "action": "accept", "content": { "name": "Ada" } } });
        let created = wire.request(2, "tools/call", retry).await;
        let created = &created["result"];
        assert_eq!(created["resultType"], "task", "{created}");
        assert!(created.get("requestState").is_none());
        let get = with_meta(json!({ "taskId": created["taskId"] }), true);
        let done = wire.poll_until(3, get, "completed").await;
        assert_eq!(
            done["result"]["result"]["content"][0]["text"], "Hello, Ada!",
            "{done}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Answers checked the one way, in memory during a call and durably in a task

on_both_backends! {
    async fn an_answer_that_does_not_fit_its_form_is_asked_again_during_the_call_and_the_next_taken(place) {
        let mut wire = start(place);
        wire.initialize(json!({ "elicitation": {} })).await;
        let asked = std::cell::Cell::new(0);
        let answer = |_: &Value| {
            asked.set(asked.get() + 1);
            match asked.get() {
                1 => json!({ "action": "accept", "content": { "ok": "yes" } }),
                _ => json!({ "action": "accept", "content": { "ok": true } }),
            }
        };
        let call = json!({ "name": "ask", "arguments": { "who": "di" } });
        let reply = wire.request_answering(1, "tools/call", call, &answer).await;
        let report = &reply["result"]["structuredContent"]["data"];
        assert_eq!(report["status"], "succeeded", "{reply}");
        assert_eq!(report["nodes"]["approve"]["output"], json!({ "ok": true }));
        let elicited = wire
            .seen
            .iter()
            .filter(|m| m["method"] == "elicitation/create")
            .count();
        assert_eq!(elicited, 2, "asked again after the answer that did not fit");
        // Each reply is audited, as on the durable path: the one that did not fit as
        // rejected under its asking's key, the one taken under the next.
        let audit = wire.registry.store().audit_rows().unwrap();
        let answers: Vec<_> = audit.iter().filter(|row| row.tool == "answer").collect();
        assert_eq!(answers.len(), 2, "every reply is audited: {answers:#?}");
        let args = |n: usize| serde_json::from_str::<Value>(&answers[n].args).unwrap();
        assert_eq!(answers[0].outcome, "rejected");
        assert_eq!(args(0)["answer"], json!({ "ok": "yes" }));
        assert_eq!(args(0)["key"], "attempt-1");
        assert_eq!(answers[1].outcome, "ok");
        assert_eq!(args(1)["kind"], "input");
        assert_eq!(args(1)["answer"], json!({ "ok": true }));
        assert_eq!(args(1)["key"], "attempt-1.r2");
    }
}

on_both_backends! {
    async fn a_persons_reply_to_a_sample_that_does_not_fit_is_refused_with_its_problems_and_asked_again(place) {
        let mut wire = start(place);
        let mut call = json!({ "name": "draft", "arguments": {} });
        call["_meta"] = person_meta(true);
        let created = wire.request(1, "tools/call", call).await;
        let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
        let mut get = json!({ "taskId": task_id });
        get["_meta"] = person_meta(true);
        wire.poll_until(2, get.clone(), "input_required").await;

        let open = wire.registry.open_questions(&task_id).unwrap();
        let misfit = wire.registry.reply_from(
            &task_id,
            &open[0],
            mcp_task_server::engine::question::Answerer::Person,
            Ok(&json!({ "words": "Queues decouple." })),
        );
        let Err(mcp_task_server::runs::AnswerError::Invalid { problems }) = misfit else {
            panic!("a reply without its text is refused: {misfit:?}");
        };
        assert_eq!(
            problems,
            ["`words`: unknown property", "`text`: is required"]
        );
        let asking = wire.poll_until(3, get.clone(), "input_required").await;
        let request = &asking["result"]["inputRequests"]["line:attempt-1.r2"];
        assert_eq!(request["method"], "elicitation/create", "{asking}");
        let audit = wire.registry.store().audit_rows().unwrap();
        let rejected: Vec<_> = audit
            .into_iter()
            .filter(|row| row.tool == "answer" && row.outcome == "rejected")
            .collect();
        assert_eq!(rejected.len(), 1, "the reply that did not fit is audited");
        let args: Value = serde_json::from_str(&rejected[0].args).unwrap();
        assert_eq!(args["kind"], "sample");
        assert_eq!(args["answer"], json!({ "words": "Queues decouple." }));

        let mut update = json!({ "taskId": task_id, "inputResponses": {
            "line:attempt-1.r2": { "action": "accept", "content": { "text": "Queues buffer." } } } });
        update["_meta"] = person_meta(true);
        wire.request(4, "tasks/update", update).await;
        let done = wire.poll_until(5, get, "completed").await;
        let output = &done["result"]["result"]["structuredContent"]["data"]["nodes"]["line"]["output"];
        assert_eq!(*output, json!({ "text": "Queues buffer.", "model": "person" }));
    }
}

on_both_backends! {
    async fn a_2025_client_without_a_model_writes_a_samples_reply_itself_during_a_call_and_in_tasks_result(place) {
        let mut wire = start(place);
        wire.initialize(json!({ "elicitation": {} })).await;
        let write = |request: &Value| {
            assert_eq!(request["method"], "elicitation/create", "{request}");
            assert_eq!(request["params"]["requestedSchema"]["required"], json!(["text"]));
            json!({ "action": "accept", "content": { "text": "Queues decouple." } })
        };
        let person = json!({ "text": "Queues decouple.", "model": "person" });
        let call = json!({ "name": "draft", "arguments": {} });
        let reply = wire.request_answering(1, "tools/call", call, &write).await;
        let output = &reply["result"]["structuredContent"]["data"]["nodes"]["line"]["output"];
        assert_eq!(*output, person, "{reply}");

        let call = json!({ "name": "draft", "arguments": {}, "task": {} });
        let created = wire.request(2, "tools/call", call).await;
        let task_id = created["result"]["task"]["taskId"].clone();
        let result = wire
            .request_answering(3, "tasks/result", json!({ "taskId": task_id }), &write)
            .await;
        let output = &result["result"]["structuredContent"]["data"]["nodes"]["line"]["output"];
        assert_eq!(*output, person, "{result}");
    }
}
