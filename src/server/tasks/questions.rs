//! A run's questions as protocol requests (`elicitation/create`,
//! `sampling/createMessage`), and the client's replies back as answers. Who is asked a
//! question is the engine's decision ([`Question::answerer`]); this holds the shapes.
//!
//! A question's key on the wire names its unit and its key there
//! (`node:attempt-1`, or `node#3:attempt-1` for a `for_each` instance), after the path of
//! `workflow` nodes to the child run that asks it (`check>node:attempt-1`), so it is
//! unique for the task's lifetime and any process can find the question it names.

use serde_json::{Value, json};

use crate::app::App;
use crate::engine::question::{Answerer, Capabilities, Question};
use crate::runs::{AnswerError, OpenQuestion, Refusal};

/// The question's key on the wire.
pub(super) fn wire_key(question: &OpenQuestion) -> String {
    let path = &question.path;
    match question.instance {
        Some(k) => format!("{path}{}#{k}:{}", question.node_id, question.key),
        None => format!("{path}{}:{}", question.node_id, question.key),
    }
}

/// The protocol request that puts `question` to `answerer`: its method and params. A
/// model is sampled; a person is shown the form they fill in.
pub(in crate::server) fn as_request(
    question: &Question,
    answerer: Answerer,
) -> (&'static str, Value) {
    if let (
        Question::Sample {
            prompt,
            system,
            max_tokens,
            ..
        },
        Answerer::Model,
    ) = (question, answerer)
    {
        let mut params = json!({
            "messages": [{
                "role": "user",
                "content": { "type": "text", "text": prompt }
            }],
            "maxTokens": max_tokens,
        });
        if let Some(system) = system {
            params["systemPrompt"] = json!(system);
        }
        return ("sampling/createMessage", params);
    }
    let form = question.form(answerer).unwrap_or_default();
    let params = json!({
        "mode": "form",
        "message": question.message(),
        "requestedSchema": crate::engine::form::for_client(&form),
    });
    ("elicitation/create", params)
}

/// What the client declared it can answer. A 2026-07-28 request declares its
/// capabilities in its own `_meta`; a 2025-11-25 one did at `initialize`.
pub(in crate::server) fn capabilities(
    context: &rmcp::service::RequestContext<rmcp::RoleServer>,
) -> Capabilities {
    context
        .client_capabilities()
        .map_or_else(Capabilities::default, |caps| declared(&caps))
}

/// What a client's declared capabilities let it answer.
pub(in crate::server) fn declared(caps: &rmcp::model::ClientCapabilities) -> Capabilities {
    Capabilities {
        elicitation: caps.elicitation.is_some(),
        sampling: caps.sampling.is_some(),
    }
}

/// What a reply to a question amounts to.
#[derive(Debug)]
pub(in crate::server) enum Reply {
    Answer(Value),
    Refused(Refusal),
}

/// Reads `answerer`'s reply to a question: a person's `ElicitResult`, or a model's
/// `CreateMessageResult`, which becomes `{text, model}`.
pub(in crate::server) fn read_reply(answerer: Answerer, reply: &Value) -> Result<Reply, String> {
    if answerer == Answerer::Model {
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

/// Records a client's reply to `question`, which was put to `answerer`. An answer that
/// does not fit is refused, and the question asked again, by the registry.
pub(super) fn answer(
    app: &App,
    run_id: &str,
    question: &OpenQuestion,
    answerer: Answerer,
    reply: &Value,
) -> Result<(), AnswerError> {
    let reply = read_reply(answerer, reply).map_err(|problem| AnswerError::Invalid {
        problems: vec![problem],
    })?;
    match reply {
        Reply::Answer(answer) => app.reply_to(run_id, question, answerer, Ok(&answer)),
        Reply::Refused(refusal) => app.reply_to(run_id, question, answerer, Err(refusal)),
    }
}

/// Refuses each model-only sample of `open` when the client (which can do what `can`
/// says) has no model: nobody may answer it in the model's place, so its node fails as
/// unsupported now rather than wait. Returns the other questions.
///
/// A question answered meanwhile needs no refusal. Any other failure to record one is an
/// error: the caller would otherwise find the same question open again at once, and ask
/// to refuse it again, in a loop.
pub(super) fn refuse_without_model(
    app: &App,
    run_id: &str,
    open: Vec<OpenQuestion>,
    can: Capabilities,
) -> Result<Vec<OpenQuestion>, AnswerError> {
    if can.sampling {
        return Ok(open);
    }
    let (refused, rest) = open
        .into_iter()
        .partition::<Vec<_>, _>(|q| q.request.model_only());
    for question in &refused {
        let refusal = Err(Refusal::NoModel);
        match app.reply_to(run_id, question, Answerer::Model, refusal) {
            Ok(()) | Err(AnswerError::NoQuestion { .. }) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(rest)
}

/// Open questions as the `inputRequests` of a task or of an `input_required` round, by
/// their keys on the wire, each put to whom a client that can do what `can` says would
/// put it.
pub(super) fn input_requests(
    open: &[OpenQuestion],
    can: Capabilities,
) -> Result<rmcp::model::InputRequests, serde_json::Error> {
    let mut requests = rmcp::model::InputRequests::new();
    for question in open {
        let (method, params) = as_request(&question.request, question.request.answerer(can));
        let request = serde_json::from_value(json!({ "method": method, "params": params }))?;
        requests.insert(wire_key(question), request);
    }
    Ok(requests)
}

/// Records the replies of `responses` to the open questions of `task`, by wire key, from
/// a client that can do what `can` says. Keys that name no open question are ignored; an
/// answer that does not fit is refused, and its question is asked again under a new key.
pub(super) fn take_responses(
    app: &App,
    task: &crate::runs::TaskView,
    responses: &std::collections::BTreeMap<String, Value>,
    can: Capabilities,
) -> Result<(), AnswerError> {
    for question in &app.open_questions_of(task)? {
        let Some(reply) = responses.get(&wire_key(question)) else {
            continue;
        };
        let answerer = question.request.answerer(can);
        if let Err(error) = answer(app, &task.run_id, question, answerer, reply) {
            tracing::info!(task_id = %task.task_id, %error, "an answer was not taken");
        }
    }
    Ok(())
}
