//! A model-only `sample` (`person = false`) parked in a task: no person may write its
//! reply (the dashboard's and the terminal's way of answering, by the registry's own
//! check), a bare text passed as its answer is refused, and a model's reply passed by an
//! operator (`workflows answer`) is taken. Under 2026-07-28 a client without a model is
//! never put it, as a task or in rounds: its node fails saying so, and the run goes on.

use mcp_task_server::engine::question::{Answerer, MODEL_ONLY, MODEL_SHAPE};
use mcp_task_server::runs::{AnswerError, RegistryConfig};
use serde_json::{Value, json};

use crate::support::wire::Wire;

/// A task of a client that can answer nothing, whose one node asks a model only. It is
/// never polled with `tasks/result`, so its question stays parked for other answerers.
async fn parked_review() -> (Wire, String) {
    let mut wire = Wire::start_in(RegistryConfig::default(), &[]);
    wire.initialize(json!({})).await;
    let flow = json!({ "definition": { "name": "review", "nodes": {
        "analyse": { "sample": { "prompt": "Review ADR 7.", "person": false } } } } });
    let call = json!({ "name": "run_workflow", "arguments": flow, "task": {} });
    let created = wire.request(1, "tools/call", call).await;
    let task_id = created["result"]["task"]["taskId"].as_str().unwrap();
    let task_id = task_id.to_owned();
    wire.poll_until(2, json!({ "taskId": task_id }), "input_required")
        .await;
    (wire, task_id)
}

fn invalid(result: Result<impl std::fmt::Debug, AnswerError>) -> Vec<String> {
    match result {
        Err(AnswerError::Invalid { problems }) => problems,
        other => panic!("an answer refused as invalid, not {other:?}"),
    }
}

#[tokio::test]
async fn no_person_may_answer_a_model_only_sample_and_an_operator_may_pass_a_models_reply() {
    let (mut wire, run) = parked_review().await;
    let registry = wire.registry.clone();
    let open = registry.open_questions(&run).unwrap();
    assert_eq!(open.len(), 1);
    assert!(open[0].request.model_only());

    // A person's reply, as the dashboard's form would give it: refused.
    let person = json!({ "text": "Looks fine to me.", "model": "person" });
    let refused = registry.reply_from(&run, &open[0], Answerer::Person, Ok(&person));
    assert_eq!(invalid(refused), [MODEL_ONLY]);

    // A bare text through `workflows answer`: not a model's reply.
    let bare = registry.answer_question(&run, "analyse", None, &json!("Fine."));
    assert_eq!(invalid(bare), [MODEL_SHAPE]);

    // A model's reply an operator passes: taken, and the run ends with it.
    let reply = json!({ "text": "The decision is clear.", "model": "claude" });
    registry
        .answer_question(&run, "analyse", None, &reply)
        .unwrap();
    let done = wire
        .poll_until(3, json!({ "taskId": run }), "completed")
        .await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let result = wire
        .request(4, "tasks/result", json!({ "taskId": run }))
        .await;
    let nodes = &result["result"]["structuredContent"]["data"]["nodes"];
    assert_eq!(nodes["analyse"]["output"], reply, "{result}");
    let asked: Vec<&Value> = (wire.seen.iter())
        .filter(|m| m.get("id").is_some() && m.get("method").is_some())
        .collect();
    assert_eq!(asked, Vec::<&Value>::new(), "nothing was put to the client");
}

/// A workflow whose one question is for the client's model only, and which goes on
/// without it, saying why.
const REVIEW: &str = r#"
name = "review"
description = "Asks the model only."
expose_as_tool = true

[nodes.line]
sample = { prompt = "Review ADR 7.", person = false }
on_failure = "continue"

[nodes.why]
needs = ["line"]
trigger = "all_done"
value = "nodes.line.error.message if nodes.line.status == 'failed' else 'answered'"

[output]
why = "nodes.why.output"
"#;

/// A 2026-07-28 request's `_meta` from a client that can elicit but has no model.
fn no_model_meta(tasks: bool) -> Value {
    let extensions = match tasks {
        true => json!({ "io.modelcontextprotocol/tasks": {} }),
        false => json!({}),
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": { "extensions": extensions, "elicitation": {} }
    })
}

#[tokio::test]
async fn a_2026_client_without_a_model_is_never_put_a_model_only_sample_as_a_task_or_in_rounds() {
    let mut wire = Wire::start_in(RegistryConfig::default(), &[("review.toml", REVIEW)]);
    let no_model = "the client has no model";

    // As a SEP-2663 task, polled by a client that can elicit: no form, and it ends.
    let mut call = json!({ "name": "review", "arguments": {} });
    call["_meta"] = no_model_meta(true);
    let created = wire.request(1, "tools/call", call).await;
    let mut get = json!({ "taskId": created["result"]["taskId"] });
    get["_meta"] = no_model_meta(true);
    let mut done = Value::Null;
    for id in 2..200 {
        done = wire.request(id, "tasks/get", get.clone()).await;
        let requests = done["result"]["inputRequests"].as_object();
        assert!(requests.is_none_or(|r| r.is_empty()), "{done}");
        if done["result"]["status"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let why = &done["result"]["result"]["structuredContent"]["data"]["output"]["why"];
    assert!(
        why.as_str().unwrap_or_default().contains(no_model),
        "{done}"
    );

    // In rounds of `input_required`: the call ends in its first round, asking nothing.
    let mut plain = json!({ "name": "review", "arguments": {} });
    plain["_meta"] = no_model_meta(false);
    let finished = wire.request(300, "tools/call", plain).await;
    assert_eq!(finished["result"].get("inputRequests"), None, "{finished}");
    let why = &finished["result"]["structuredContent"]["data"]["output"]["why"];
    assert!(
        why.as_str().unwrap_or_default().contains(no_model),
        "{finished}"
    );
}
