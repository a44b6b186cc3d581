//! A run's open questions as protocol requests (`elicitation/create`,
//! `sampling/createMessage`), and the client's replies back as answers.
//!
//! A question's key on the wire names its unit and its key there
//! (`node:attempt-1`, or `node#3:attempt-1` for a `for_each` instance), so it is unique
//! for the task's lifetime and any process can find the question it names.

use serde_json::{Value, json};

use crate::runs::{AnswerError, OpenQuestion, Refusal, Registry};

/// The question's key on the wire.
pub(super) fn wire_key(question: &OpenQuestion) -> String {
    match question.instance {
        Some(k) => format!("{}#{k}:{}", question.node_id, question.key),
        None => format!("{}:{}", question.node_id, question.key),
    }
}

/// The protocol request that puts a question to the client: its method and params.
/// `request` is the question as a run records it (`{kind: "input", message, schema}` or
/// `{kind: "sample", prompt, system, maxTokens}`).
pub(in crate::server) fn as_request(request: &Value) -> (&'static str, Value) {
    if request["kind"] == "sample" {
        let mut params = json!({
            "messages": [{
                "role": "user",
                "content": { "type": "text", "text": request["prompt"] }
            }],
            "maxTokens": request["maxTokens"],
        });
        if let Some(system) = request["system"].as_str() {
            params["systemPrompt"] = json!(system);
        }
        return ("sampling/createMessage", params);
    }
    let params = json!({
        "mode": "form",
        "message": request["message"],
        "requestedSchema": crate::engine::form::for_client(&request["schema"]),
    });
    ("elicitation/create", params)
}

/// A `sample` question put to the person instead, for a client that can elicit but has no
/// model to sample: the prompt, and one text field for the reply they write themselves.
pub(in crate::server) fn for_person(sample: &Value) -> Value {
    json!({
        "kind": "input",
        "message": sample["prompt"],
        "schema": {
            "type": "object",
            "properties": { "text": {
                "type": "string",
                "title": "Your reply",
                "description": "There is no model to ask: write the reply yourself."
            } },
            "required": ["text"]
        },
        "forSample": true,
    })
}

/// The answer as the question's node takes it: a person's reply to a `sample` question
/// ([`for_person`]) reads as a model's, `{text, model: "person"}`.
pub(in crate::server) fn as_answer(sent: &Value, answer: Value) -> Value {
    match sent["forSample"] == true {
        true => crate::engine::actions::sampled_by_person(&answer["text"]),
        false => answer,
    }
}

/// Whether answering a question needs the client's elicitation (else its sampling).
pub(in crate::server) fn is_elicitation(request: &Value) -> bool {
    request["kind"] != "sample"
}

/// What a reply to a question amounts to.
#[derive(Debug)]
pub(in crate::server) enum Reply {
    Answer(Value),
    Refused(Refusal),
}

/// Reads the client's reply to a question: an `ElicitResult` or a `CreateMessageResult`.
/// A sampling reply becomes `{text, model}`.
pub(in crate::server) fn read_reply(request: &Value, reply: &Value) -> Result<Reply, String> {
    if !is_elicitation(request) {
        let text = reply["content"]["text"]
            .as_str()
            .ok_or("a sampling reply must carry text content")?;
        return Ok(Reply::Answer(
            json!({ "text": text, "model": reply["model"] }),
        ));
    }
    match reply["action"].as_str() {
        Some("accept") => Ok(Reply::Answer(
            reply.get("content").cloned().unwrap_or_else(|| json!({})),
        )),
        Some("decline") => Ok(Reply::Refused(Refusal::Decline)),
        Some("cancel") => Ok(Reply::Refused(Refusal::Cancel)),
        _ => Err("an elicitation reply must have action accept, decline or cancel".into()),
    }
}

/// Records a client's reply to `question`, which was put to it as `sent` (its own request,
/// or [`for_person`] of it).
pub(super) fn answer(
    registry: &Registry,
    run_id: &str,
    question: &OpenQuestion,
    sent: &Value,
    reply: &Value,
) -> Result<(), AnswerError> {
    let reply = read_reply(sent, reply).map_err(|problem| AnswerError::Invalid {
        problems: vec![problem],
    })?;
    match reply {
        Reply::Answer(answer) if sent["forSample"] == true => {
            let problems = crate::engine::form::answer_problems(&sent["schema"], &answer);
            if !problems.is_empty() {
                return Err(AnswerError::Invalid { problems });
            }
            registry.reply(run_id, question, Ok(&as_answer(sent, answer)))
        }
        Reply::Answer(answer) => registry.reply(run_id, question, Ok(&answer)),
        Reply::Refused(refusal) => registry.reply(run_id, question, Err(refusal)),
    }
}

/// Whether the requesting client can elicit but has no model to sample: its `sample`
/// questions then go to its person ([`for_person`]). A 2026-07-28 request declares its
/// capabilities in its own `_meta`; a 2025-11-25 one did at `initialize`.
pub(in crate::server) fn samples_by_person(
    context: &rmcp::service::RequestContext<rmcp::RoleServer>,
) -> bool {
    context
        .client_capabilities()
        .is_some_and(|caps| caps.elicitation.is_some() && caps.sampling.is_none())
}

/// Open questions as the `inputRequests` of a task or of an `input_required` round, by
/// their keys on the wire; with `by_person`, a `sample` question is a form for the person.
pub(super) fn input_requests(
    open: &[OpenQuestion],
    by_person: bool,
) -> Result<rmcp::model::InputRequests, serde_json::Error> {
    let mut requests = rmcp::model::InputRequests::new();
    for question in open {
        let sent = match by_person && !is_elicitation(&question.request) {
            true => for_person(&question.request),
            false => question.request.clone(),
        };
        let (method, params) = as_request(&sent);
        let request = serde_json::from_value(json!({ "method": method, "params": params }))?;
        requests.insert(wire_key(question), request);
    }
    Ok(requests)
}

/// Records the replies of `responses` to the open questions of `task`, by wire key. Keys
/// that name no open question are ignored; an answer that does not fit is refused, and
/// its question is asked again under a new key.
pub(super) fn take_responses(
    registry: &Registry,
    task: &crate::runs::TaskView,
    responses: &std::collections::BTreeMap<String, Value>,
) -> Result<(), AnswerError> {
    for question in &of_task(registry, task)? {
        let Some(reply) = responses.get(&wire_key(question)) else {
            continue;
        };
        // A `sample` question answered with a form's result was put to the person.
        let sent = match !is_elicitation(&question.request) && reply.get("action").is_some() {
            true => for_person(&question.request),
            false => question.request.clone(),
        };
        if let Err(error) = answer(registry, &task.run_id, question, &sent, reply) {
            tracing::info!(task_id = %task.task_id, %error, "an answer was not taken");
        }
    }
    Ok(())
}

/// The open questions that belong to `task`: all of a run's, or one unit's.
pub(super) fn of_task(
    registry: &Registry,
    task: &crate::runs::TaskView,
) -> Result<Vec<OpenQuestion>, AnswerError> {
    let questions = registry.open_questions(&task.run_id)?;
    Ok(match &task.node_id {
        None => questions,
        Some(node) => questions
            .into_iter()
            .filter(|q| &q.node_id == node && q.instance.map(|k| k as i64) == task.instance)
            .collect(),
    })
}
