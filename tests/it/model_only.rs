//! A model-only `sample` (`person = false`) parked in a task: no person may write its
//! reply (the dashboard's and the terminal's way of answering, by the registry's own
//! check), a bare text passed as its answer is refused, and a model's reply passed by an
//! operator (`workflows answer`) is taken.

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
