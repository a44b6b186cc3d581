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
use crate::engine::actions::{Asked, Asking, BoxFuture, Interaction};
use crate::engine::question::{
    ASKED_AT_MOST, Capabilities, Decision, Question, first_asking, next_asking,
};
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
    /// Puts `question` to whom the client puts it, until a reply fits or the policy gives
    /// up ([`Question::decide`]), each reply judged and its audit row kept for the run;
    /// fails the node if the client cannot reach them.
    fn put_question(&self, asking: Asking, question: Question) -> BoxFuture<Asked> {
        let Some(answerer) = self.can.asks(&question) else {
            let message = match question {
                Question::Input { .. } => {
                    "this node needs the client's elicitation, which it did not declare"
                }
                Question::Sample { person: false, .. } => crate::engine::question::NO_MODEL,
                Question::Sample { .. } => {
                    "this node needs the client's sampling, which it did not declare"
                }
            };
            let error = NodeError::new(NodeErrorKind::Unsupported, message);
            let asked = Asked {
                result: Err(error),
                replies: Vec::new(),
            };
            return Box::pin(async move { asked });
        };
        let peer = self.peer.clone();
        Box::pin(async move {
            let (method, params) = questions::as_request(&question, answerer);
            let mut replies = Vec::new();
            let mut key = asking.key;
            let result = loop {
                let message =
                    ServerRequest::CustomRequest(CustomRequest::new(method, Some(params.clone())));
                let reply = match peer.send_request(message).await {
                    Ok(reply) => serde_json::to_value(reply).unwrap_or_default(),
                    Err(error) => {
                        let message = format!("the client did not answer: {error}");
                        break Err(NodeError::new(NodeErrorKind::Unsupported, message));
                    }
                };
                let read = match questions::read_reply(answerer, &reply) {
                    Ok(Reply::Answer(answer)) => Ok(answer),
                    Ok(Reply::Refused(refusal)) => Err(refusal),
                    Err(problem) => {
                        // Unreadable: no answer to judge, but an asking all the same.
                        tracing::info!(problem, "an unreadable reply; asking again");
                        if asking_count(&key) >= ASKED_AT_MOST {
                            break Err(too_many_misfits());
                        }
                        key = next_asking(&key);
                        continue;
                    }
                };
                let judged = question.decide(
                    &key,
                    asking.instance,
                    answerer,
                    read.as_ref().map_err(|r| *r),
                );
                replies.push((judged.audit, judged.outcome));
                match judged.decision {
                    Decision::Take(taken) => break Ok(taken),
                    Decision::Refuse(refusal) => {
                        let message =
                            format!("the user chose to {} the question", refusal.as_str());
                        break Err(NodeError::new(NodeErrorKind::Refused, message));
                    }
                    Decision::AskAgain { problems, next_key } => {
                        tracing::info!(?problems, "an answer does not fit its form");
                        key = next_key;
                    }
                    Decision::GiveUp(_) => break Err(too_many_misfits()),
                }
            };
            Asked { result, replies }
        })
    }
}

/// How many times the question under `key` has been asked.
fn asking_count(key: &str) -> u32 {
    crate::engine::question::asking(key).1
}

fn too_many_misfits() -> NodeError {
    NodeError::new(
        NodeErrorKind::Refused,
        format!("{ASKED_AT_MOST} answers did not fit the question's form"),
    )
}

impl Interaction for PeerInteraction {
    fn ask(&self, message: String, schema: Value) -> BoxFuture<Result<Value, NodeError>> {
        let asking = Asking {
            key: first_asking(1),
            instance: None,
        };
        let asked = self.put_question(asking, Question::Input { message, schema });
        Box::pin(async move { asked.await.result })
    }

    fn sample(
        &self,
        prompt: String,
        system: Option<String>,
        max_tokens: u32,
    ) -> BoxFuture<Result<Value, NodeError>> {
        let asking = Asking {
            key: first_asking(1),
            instance: None,
        };
        let question = Question::Sample {
            prompt,
            system,
            max_tokens,
            person: true,
        };
        let asked = self.put_question(asking, question);
        Box::pin(async move { asked.await.result })
    }

    fn put(&self, asking: Asking, question: Question) -> BoxFuture<Asked> {
        self.put_question(asking, question)
    }
}
