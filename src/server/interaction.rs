//! Questions of a synchronous `tools/call` put straight to the client: a run's `input`
//! and `sample` nodes become `elicitation/create` and `sampling/createMessage` requests
//! during the call, for a client that declared those capabilities in a session that
//! allows server requests (2025-11-25 and older; 2026-07-28 has none).

use std::sync::Arc;

use rmcp::model::{CustomRequest, ServerRequest};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};

use super::tasks::questions::{self, Reply};
use crate::engine::actions::{BoxFuture, Interaction};
use crate::engine::form;
use crate::engine::report::{NodeError, NodeErrorKind};
use crate::runs::ASKED_AT_MOST;

struct PeerInteraction {
    peer: Peer<RoleServer>,
    elicitation: bool,
    sampling: bool,
}

/// The channel for the call's questions, if its client can answer any.
pub(super) fn for_call(context: &RequestContext<RoleServer>) -> Option<Arc<dyn Interaction>> {
    let modern = super::is_stateless(context);
    let caps = context.peer.peer_info()?.capabilities.clone();
    let (elicitation, sampling) = (caps.elicitation.is_some(), caps.sampling.is_some());
    if modern || !(elicitation || sampling) {
        return None;
    }
    Some(Arc::new(PeerInteraction {
        peer: context.peer.clone(),
        elicitation,
        sampling,
    }))
}

fn missing(what: &str) -> NodeError {
    NodeError::new(
        NodeErrorKind::Unsupported,
        format!("this node needs the client's {what}, which it did not declare"),
    )
}

impl PeerInteraction {
    /// Puts `request` to the client until its reply fits, at most [`ASKED_AT_MOST`] times.
    fn put(&self, request: Value) -> BoxFuture<Result<Value, NodeError>> {
        let peer = self.peer.clone();
        Box::pin(async move {
            let (method, params) = questions::as_request(&request);
            for _ in 0..ASKED_AT_MOST {
                let message =
                    ServerRequest::CustomRequest(CustomRequest::new(method, Some(params.clone())));
                let reply = peer.send_request(message).await.map_err(|error| {
                    NodeError::new(
                        NodeErrorKind::Unsupported,
                        format!("the client did not answer: {error}"),
                    )
                })?;
                let reply = serde_json::to_value(reply).unwrap_or_default();
                match questions::read_reply(&request, &reply) {
                    Ok(Reply::Answer(answer)) => {
                        let problems = match request["kind"] == "input" {
                            true => form::answer_problems(&request["schema"], &answer),
                            false => Vec::new(),
                        };
                        if problems.is_empty() {
                            return Ok(questions::as_answer(&request, answer));
                        }
                        tracing::info!(?problems, "an answer does not fit its form; asking again");
                    }
                    Ok(Reply::Refused(refusal)) => {
                        let message =
                            format!("the user chose to {} the question", refusal.as_str());
                        return Err(NodeError::new(NodeErrorKind::Refused, message));
                    }
                    Err(problem) => tracing::info!(problem, "an unreadable reply; asking again"),
                }
            }
            Err(NodeError::new(
                NodeErrorKind::Refused,
                format!("{ASKED_AT_MOST} answers did not fit the question's form"),
            ))
        })
    }
}

impl Interaction for PeerInteraction {
    fn ask(&self, message: String, schema: Value) -> BoxFuture<Result<Value, NodeError>> {
        if !self.elicitation {
            let error = missing("elicitation");
            return Box::pin(async move { Err(error) });
        }
        self.put(json!({ "kind": "input", "message": message, "schema": schema }))
    }

    fn sample(
        &self,
        prompt: String,
        system: Option<String>,
        max_tokens: u32,
    ) -> BoxFuture<Result<Value, NodeError>> {
        let request = json!({ "kind": "sample", "prompt": prompt, "system": system, "maxTokens": max_tokens });
        match (self.sampling, self.elicitation) {
            (true, _) => self.put(request),
            // No model to ask: the person writes the reply.
            (false, true) => self.put(questions::for_person(&request)),
            (false, false) => {
                let error = missing("sampling");
                Box::pin(async move { Err(error) })
            }
        }
    }
}
