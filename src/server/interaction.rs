//! Questions of a synchronous `tools/call` put straight to the client: a run's `input`
//! and `sample` nodes become `elicitation/create` and `sampling/createMessage` requests
//! during the call, for a client that declared those capabilities in a session that
//! allows server requests (2025-11-25 and older; 2026-07-28 has none).

use std::sync::Arc;

use rmcp::model::{CustomRequest, ServerRequest};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde_json::Value;

use super::tasks::questions::{self, Reply};
use crate::engine::actions::{BoxFuture, Interaction};
use crate::engine::question::{ASKED_AT_MOST, Capabilities, Question, Verdict};
use crate::engine::report::{NodeError, NodeErrorKind};

struct PeerInteraction {
    peer: Peer<RoleServer>,
    can: Capabilities,
}

/// The channel for the call's questions, if its client can answer any.
pub(super) fn for_call(context: &RequestContext<RoleServer>) -> Option<Arc<dyn Interaction>> {
    let modern = super::is_stateless(context);
    let can = questions::declared(&context.peer.peer_info()?.capabilities);
    if modern || !(can.elicitation || can.sampling) {
        return None;
    }
    Some(Arc::new(PeerInteraction {
        peer: context.peer.clone(),
        can,
    }))
}

impl PeerInteraction {
    /// Puts `question` to whom the client puts it, until the reply fits, at most
    /// [`ASKED_AT_MOST`] times; fails the node if the client cannot reach them.
    fn put(&self, question: Question) -> BoxFuture<Result<Value, NodeError>> {
        let Some(answerer) = self.can.asks(&question) else {
            let what = match question {
                Question::Input { .. } => "elicitation",
                Question::Sample { .. } => "sampling",
            };
            let error = NodeError::new(
                NodeErrorKind::Unsupported,
                format!("this node needs the client's {what}, which it did not declare"),
            );
            return Box::pin(async move { Err(error) });
        };
        let peer = self.peer.clone();
        Box::pin(async move {
            let (method, params) = questions::as_request(&question, answerer);
            for asked in 1..=ASKED_AT_MOST {
                let message =
                    ServerRequest::CustomRequest(CustomRequest::new(method, Some(params.clone())));
                let reply = peer.send_request(message).await.map_err(|error| {
                    NodeError::new(
                        NodeErrorKind::Unsupported,
                        format!("the client did not answer: {error}"),
                    )
                })?;
                let reply = serde_json::to_value(reply).unwrap_or_default();
                match questions::read_reply(answerer, &reply) {
                    Ok(Reply::Answer(answer)) => match question.judge(answerer, &answer, asked) {
                        Verdict::Take(taken) => return Ok(taken),
                        Verdict::AskAgain(problems) | Verdict::GiveUp(problems) => {
                            tracing::info!(?problems, "an answer does not fit its form");
                        }
                    },
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
        self.put(Question::Input { message, schema })
    }

    fn sample(
        &self,
        prompt: String,
        system: Option<String>,
        max_tokens: u32,
    ) -> BoxFuture<Result<Value, NodeError>> {
        self.put(Question::Sample {
            prompt,
            system,
            max_tokens,
        })
    }
}
