//! What each client must have seen of a scenario over any transport: the events its
//! script printed, checked against what the server does.

use serde_json::{Value, json};

use super::cases::Seen;
use super::clients::Ran;
use super::workflows::{
    ADR_SLUG, ADR_TITLE, adr_phase, assert_adr_planned, assert_asked_every_question, questions,
};

/// The run report inside a tool result's `structuredContent`.
pub(super) fn report(result: &Value) -> &Value {
    assert_eq!(result["structuredContent"]["ok"], true, "{result}");
    &result["structuredContent"]["data"]
}

/// What the TypeScript SDK's `task-stream` scenario must have seen, over any transport.
pub(super) fn assert_streamed_ask_task(ran: &Ran) {
    assert_eq!(ran.event("connected")["protocolVersion"], "2025-11-25");
    let tools = ran.event("tools");
    assert_eq!(
        tools["serverTasks"],
        json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } })
    );
    assert_eq!(tools["askExecution"], json!({ "taskSupport": "optional" }));

    let names = ran.names();
    let first = |name: &str| names.iter().position(|n| n == name);
    let (created, asked, result) = (
        first("taskCreated").expect("a taskCreated message"),
        first("elicitation").expect("the question reached the handler"),
        first("result").expect("a result message"),
    );
    assert!(created < asked && asked < result, "{names:?}");
    assert!(
        names[created..result].iter().any(|n| n == "taskStatus"),
        "the stream polled the task: {names:?}"
    );
    let statuses: Vec<Value> = ran
        .events()
        .iter()
        .filter(|e| e["event"] == "taskStatus")
        .map(|e| e["status"].clone())
        .collect();
    assert_eq!(
        statuses.last(),
        Some(&json!("input_required")),
        "{statuses:?}"
    );

    let task = &ran.event("taskCreated")["task"];
    let task_id = task["taskId"].as_str().unwrap();
    assert_eq!(task["status"], "working");
    assert!(
        task["statusMessage"].as_str().unwrap().starts_with("0/3"),
        "no node has finished yet: {task}"
    );

    let elicitation = ran.event("elicitation");
    assert_eq!(elicitation["message"], "Approve ts?");
    assert_eq!(elicitation["mode"], "form");
    assert_eq!(elicitation["relatedTask"], json!({ "taskId": task_id }));

    let result = &ran.event("result")["result"];
    assert_eq!(result["isError"], false);
    let report = report(result);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["nodes"]["approve"]["output"], json!({ "ok": true }));
    assert_eq!(report["nodes"]["todo"]["output"]["title"], "approved ts");

    let listed = ran.event("listTasks");
    let tasks = listed["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 4, "the run's task, then its three sub-tasks");
    assert_eq!(tasks[0]["taskId"], task_id);
    assert_eq!(tasks[0]["status"], "completed");
    assert!(
        tasks.iter().all(|t| t["status"] == "completed"),
        "{tasks:?}"
    );
    assert_eq!(listed["nextCursor"], Value::Null);

    let got = &ran.event("getTask")["task"];
    assert_eq!(got["taskId"], task_id);
    assert_eq!(got["status"], "completed");
    let nodes: Vec<&Value> = got["_meta"]["x-mcp-task-server/subTasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["node"])
        .collect();
    assert_eq!(nodes, ["pause", "approve", "todo"]);

    let heard = ran.event("notifications");
    assert_eq!(
        heard["taskStatus"].as_array().unwrap().last(),
        Some(&json!("completed")),
        "{heard}"
    );
    assert!(heard["progress"].as_u64().unwrap() > 0, "{heard}");
}

/// What the TypeScript SDK's `task-cancel` scenario must have seen, over any transport.
pub(super) fn assert_cancelled_ask_task(ran: &Ran) {
    let task_id = ran.event("taskCreated")["task"]["taskId"].clone();
    let cancelled = &ran.event("cancelled")["task"];
    assert_eq!(cancelled["taskId"], task_id);
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["statusMessage"], "cancelled by the client");

    let stream_end = ran.event("streamError");
    assert!(
        stream_end["message"]
            .as_str()
            .unwrap()
            .contains("was cancelled"),
        "the stream ends on the cancelled task: {stream_end}"
    );
    assert!(
        !ran.names().contains(&"elicitation".to_owned()),
        "a cancelled task asks nothing\n{}",
        ran.dump()
    );

    let again = ran.event("secondCancel");
    assert_eq!(again["ok"], false, "{again}");
    assert_eq!(again["code"], -32602, "{again}");

    let got = &ran.event("getTask")["task"];
    assert_eq!(got["status"], "cancelled");
}

/// What the TypeScript SDK's `direct-elicit` scenario must have seen, over any transport.
pub(super) fn assert_directly_asked_ask(ran: &Ran) {
    let elicitation = ran.event("elicitation");
    assert_eq!(elicitation["message"], "Approve direct?");
    assert_eq!(
        elicitation["relatedTask"],
        Value::Null,
        "a question of a plain call belongs to no task"
    );
    let result = &ran.event("result")["result"];
    assert_eq!(result["isError"], false);
    let report = report(result);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(
        report["nodes"]["todo"]["output"]["title"],
        "approved direct"
    );
}

/// What the TypeScript SDK's `surface` scenario must have seen, over any transport.
pub(super) fn assert_used_the_surface(ran: &Ran) {
    let names = ran.event("prompts")["names"].clone();
    assert!(
        names
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "interactive_adr_planning"),
        "{names}"
    );
    let prompt = ran.event("prompt")["text"].as_str().unwrap().to_owned();
    assert!(prompt.contains("`title`: \"Pick a queue\""), "{prompt}");
    let read = ran.event("read");
    assert!(
        read["uri"].as_str().unwrap().starts_with("file:///"),
        "{read}"
    );
    assert_eq!(read["contents"][0]["mimeType"], "text/markdown", "{read}");
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("1.0"),
        "{read}"
    );
    let followed = ran.event("followed");
    assert!(followed["updates"].as_u64().unwrap() >= 1, "{followed}");
    assert!(
        followed["summary"]
            .as_str()
            .unwrap()
            .contains(": succeeded"),
        "{followed}"
    );
}

/// What the Python SDK's `auto-surface` scenario must have seen, over any transport.
pub(super) fn assert_py_used_the_surface(ran: &Ran) {
    let prompts = ran.event("prompts");
    assert!(
        prompts["names"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "interactive_adr_planning")
    );
    assert_eq!(
        prompts["ttlMs"], 60_000,
        "a 2026-07-28 list says how long to keep it"
    );
    let text = ran.event("prompt")["text"].as_str().unwrap().to_owned();
    assert!(text.contains("`title`: \"Pick a queue\""), "{text}");
    assert_eq!(ran.event("completed")["values"], json!(["Accepted"]));
    let read = ran.event("read");
    assert!(
        read["uri"].as_str().unwrap().starts_with("file:///"),
        "{read}"
    );
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("1.0"),
        "{read}"
    );
}

/// Every answer of the ADR planner, so that it asks nothing.
pub(super) fn adr_answers_up_front() -> Value {
    json!({
        "title": ADR_TITLE,
        "problem": "Billing events are lost when billing restarts.",
        "findings": adr_phase("findings"),
        "options": adr_phase("options"),
        "decision": { "name": "Queue", "rationale": "Durability matters most",
                      "tradeoffs": ["more to operate", "slower deploys"] },
        "impacts": adr_phase("impacts"),
        "plan": adr_phase("plan"),
    })
}

/// What FastMCP's client must have seen, over any transport.
pub(super) fn assert_fastmcp_read_the_adr(ran: &Ran) {
    let names = ran.event("prompts")["names"].clone();
    assert!(
        names
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "interactive_adr_planning"),
        "{names}"
    );
    let prompt = ran.event("prompt")["text"].as_str().unwrap().to_owned();
    assert!(
        prompt.contains("seven phases") || prompt.contains("7 phases"),
        "{prompt}"
    );
    let read = ran.event("read");
    assert!(
        read["uri"]
            .as_str()
            .unwrap()
            .ends_with(&format!("0001-{ADR_SLUG}.md")),
        "{read}"
    );
    assert_eq!(read["mimeType"], "text/markdown");
    let adr = read["text"].as_str().unwrap();
    assert!(adr.contains(ADR_TITLE) && adr.contains("Queue"), "{adr}");
}

/// What the TypeScript SDK's `stream:interactive_adr_planning` scenario must have seen:
/// a task, every question asked for it, and the ADR planned.
pub(super) fn assert_ts_streamed_the_adr_planner(seen: &Seen) {
    let (sandbox, ran) = (&seen.sandbox, &seen.ran);
    assert_eq!(ran.event("connected")["protocolVersion"], "2025-11-25");
    assert_eq!(
        ran.event("tools")["execution"],
        json!({ "taskSupport": "optional" })
    );
    let task_id = ran.event("taskCreated")["task"]["taskId"].clone();
    assert!(task_id.is_string());

    assert_asked_every_question(&questions(ran));
    // Every question, the model's too, is asked for the task.
    for question in ran.events().iter().filter(|e| e["event"] == "question") {
        assert_eq!(
            question["relatedTask"],
            json!({ "taskId": task_id }),
            "{question}"
        );
    }
    let draft = ran
        .events()
        .into_iter()
        .find(|e| e["event"] == "question" && e["asks"] == "draft findings")
        .unwrap();
    assert_eq!(
        draft["systemPrompt"],
        "You help engineers write Architecture Decision Records. Answer with JSON only."
    );
    assert_eq!(draft["maxTokens"], 2000);

    let names = ran.names();
    let first = |name: &str| names.iter().position(|n| n == name).unwrap();
    assert!(first("taskCreated") < first("question"), "{names:?}");
    assert!(first("question") < first("result"), "{names:?}");
    assert!(!names.contains(&"streamError".to_owned()), "{}", ran.dump());

    let result = &ran.event("result")["result"];
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
    assert_adr_planned(sandbox, result, 1);
}

/// What the TypeScript SDK's `direct:interactive_adr_planning` scenario must have seen:
/// every question asked for no task, and the ADR planned.
pub(super) fn assert_ts_planned_an_adr_directly(seen: &Seen) {
    let (sandbox, ran) = (&seen.sandbox, &seen.ran);
    assert_eq!(ran.event("connected")["protocolVersion"], "2025-11-25");
    assert_asked_every_question(&questions(ran));
    for question in ran.events().iter().filter(|e| e["event"] == "question") {
        assert_eq!(
            question["relatedTask"],
            Value::Null,
            "a plain call's questions belong to no task: {question}"
        );
    }
    assert_adr_planned(sandbox, &ran.event("result")["result"], 1);
}

/// What the Python SDK's `legacy-elicit` scenario must have seen: a 2025-11-25 session
/// whose call of `ask` its elicitation callback answered.
pub(super) fn assert_py_legacy_session_was_asked_by_elicitation(seen: &Seen) {
    let ran = &seen.ran;
    let initialized = ran.event("initialized");
    assert_eq!(initialized["protocolVersion"], "2025-11-25");
    assert_eq!(
        initialized["serverTasks"],
        json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } })
    );
    let elicitation = ran.event("elicitation");
    assert_eq!(elicitation["message"], "Approve py?");
    assert_eq!(elicitation["mode"], "form");
    let result = &ran.event("result")["result"];
    assert_eq!(result["isError"], false);
    let report = report(result);
    assert_eq!(report["status"], "succeeded");
    assert_eq!(report["nodes"]["todo"]["output"]["title"], "approved py");
}

/// What the Python SDK's `auto-todos` scenario must have seen: 2026-07-28 with the tasks
/// extension, a todo added and listed.
pub(super) fn assert_py_discovered_and_added_todos(seen: &Seen) {
    let ran = &seen.ran;
    let connected = ran.event("connected");
    assert_eq!(connected["protocolVersion"], "2026-07-28");
    assert_eq!(
        connected["extensions"],
        json!(["io.modelcontextprotocol/tasks"])
    );
    let added = &ran.event("added")["result"];
    assert_eq!(added["isError"], false);
    let todo = report(added);
    assert_eq!(todo["title"], "from python");
    assert_eq!(todo["tags"], json!(["py"]));
    let listed = &ran.event("listed")["result"];
    let todos = report(listed).as_array().unwrap();
    assert_eq!(todos.len(), 1);
    assert_eq!(todos[0]["id"], todo["id"]);
}

/// What the Python SDK's `auto-rounds` scenario must have seen: `ask`'s question answered
/// in an `input_required` round.
pub(super) fn assert_py_answered_ask_in_a_round(seen: &Seen) {
    let ran = &seen.ran;
    assert_eq!(ran.event("connected")["protocolVersion"], "2026-07-28");
    let asked = ran.event("elicitation");
    assert_eq!(asked["message"], "Approve rounds?");
    let result = &ran.event("result")["result"];
    assert_eq!(result["isError"], false, "{result}");
    let run = report(result);
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["nodes"]["approve"]["output"], json!({ "ok": true }));
    assert_eq!(run["nodes"]["todo"]["output"]["title"], "approved rounds");
}

/// What the Python SDK's `auto:interactive_adr_planning` scenario must have seen: every
/// question, and the ADR planned.
pub(super) fn assert_py_planned_an_adr_in_rounds(seen: &Seen) {
    let (sandbox, ran) = (&seen.sandbox, &seen.ran);
    assert_eq!(ran.event("connected")["protocolVersion"], "2026-07-28");
    assert_asked_every_question(&questions(ran));
    assert_adr_planned(sandbox, &ran.event("result")["result"], 1);
}

/// What the TypeScript SDK's `callToolStream` of a built-in workflow must have seen: a
/// task, every question asked for it, and the result carried for it.
pub(super) fn assert_streamed_as_a_task(ran: &Ran) {
    assert_eq!(ran.event("connected")["protocolVersion"], "2025-11-25");
    assert_eq!(
        ran.event("tools")["execution"],
        json!({ "taskSupport": "optional" })
    );
    let task_id = ran.event("taskCreated")["task"]["taskId"].clone();
    assert!(task_id.is_string());
    for question in ran.events().iter().filter(|e| e["event"] == "question") {
        assert_eq!(
            question["relatedTask"],
            json!({ "taskId": task_id }),
            "{question}"
        );
    }
    assert!(
        !ran.names().contains(&"streamError".to_owned()),
        "{}",
        ran.dump()
    );
    let result = &ran.event("result")["result"];
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
}

/// What the Python SDK in `auto` mode must have seen of a built-in workflow: 2026-07-28,
/// each question in round `rounds[i]`, and `total` rounds in all.
pub(super) fn assert_rounds(ran: &Ran, expected_rounds: &[u64], expected_total: u64) {
    assert_eq!(ran.event("connected")["protocolVersion"], "2026-07-28");
    let rounds: Vec<u64> = ran
        .events()
        .iter()
        .filter(|e| e["event"] == "question")
        .map(|e| e["round"].as_u64().expect("a round"))
        .collect();
    let total = ran.event("result")["rounds"].as_u64().expect("rounds");
    assert_eq!((rounds, total), (expected_rounds.to_vec(), expected_total));
}

/// The tool's result a client printed last.
pub(super) fn result(ran: &Ran) -> Value {
    ran.event("result")["result"].clone()
}
