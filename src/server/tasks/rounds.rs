//! A 2026-07-28 call without the tasks extension, answered in rounds (multi round-trip
//! requests): a run that needs answers returns `resultType: "input_required"` with its
//! questions and a `requestState` naming the durable run; the client's retry, carrying
//! `inputResponses` and that state, continues the same run and never starts another.
//!
//! The state is signed with a key kept in the database (so it holds across restarts and
//! processes), bound to the tool, and expires with its round. Repeating the latest round
//! is harmless; an older round, a forged or a foreign state gets `-32602`.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, InputRequiredResult, InputResponses, RequestStateCodec, SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use rmcp::RoleServer;
use rmcp::service::RequestContext;
use tokio_util::sync::CancellationToken;

use super::{Era, NotStarted, Settled, internal, questions, v2026_07_28};
use crate::app::Caller;
use crate::engine::question::Capabilities;
use crate::runs::TaskView;
use crate::server::progress;
use crate::server::{Server, results};

/// How a call is answered in rounds: what its client can answer, and the task protocol its
/// run is recorded under.
#[derive(Clone, Copy)]
struct How {
    can: Capabilities,
    era: Era,
}

/// What a `requestState` says: which run, at which round.
#[derive(Serialize, Deserialize)]
struct RoundState {
    run: String,
    round: i64,
}

fn invalid_state(why: impl std::fmt::Display) -> McpError {
    McpError::invalid_params(format!("invalid requestState: {why}"), None)
}

impl Server {
    fn state_codec(&self) -> Result<RequestStateCodec, McpError> {
        let key = self.app.round_state_key().map_err(internal)?;
        RequestStateCodec::try_new(key.to_vec()).map_err(internal)
    }

    /// A workflow's `tools/call` from a 2026-07-28 client without tasks: the first call
    /// starts the run, a retry (`retry`: its `requestState` and answers) continues it.
    ///
    /// With `era` [`Era::V2026_07_28`] (a workflow that asks before it becomes a task, called
    /// under the extension), the run is the task's from the start, and the call becomes the
    /// task once the first round is answered, or at once if the run asks nothing first.
    pub(in crate::server) async fn call_in_rounds(
        &self,
        name: &str,
        args: Map<String, Value>,
        retry: Option<(String, Option<InputResponses>)>,
        context: &RequestContext<RoleServer>,
        caller: &Caller,
        era: Era,
    ) -> Result<CallToolResponse, McpError> {
        let how = How {
            can: questions::capabilities(context),
            era,
        };
        // The first round starts the run here, and reports its progress until it answers.
        let stop = CancellationToken::new();
        let mut forwarder = None;
        let mut observer = None;
        if retry.is_none()
            && let Some(token) = context.meta.get_progress_token()
        {
            let (reporter, task) = progress::reporter(context.peer.clone(), token, stop.clone());
            observer = Some(reporter);
            forwarder = Some(task);
        }
        let answered = self.round(name, args, retry, how, caller, observer).await;
        stop.cancel();
        if let Some(task) = forwarder {
            let _ = task.await;
        }
        answered
    }

    /// [`Server::settle`], a model-only sample the client cannot answer refused on the
    /// way ([`questions::refuse_without_model`]): a round asks only what it can answer.
    async fn settle_for(
        &self,
        run_id: &str,
        how: How,
        caller: &Caller,
    ) -> Result<Settled, McpError> {
        loop {
            match self.settle(run_id, how.era, caller).await? {
                Settled::Asking(view, open) => {
                    let rest = questions::refuse_without_model(&self.app, run_id, open, how.can)
                        .map_err(super::internal)?;
                    if !rest.is_empty() {
                        return Ok(Settled::Asking(view, rest));
                    }
                }
                finished => return Ok(finished),
            }
        }
    }

    /// One round of [`Server::call_in_rounds`].
    async fn round(
        &self,
        name: &str,
        args: Map<String, Value>,
        retry: Option<(String, Option<InputResponses>)>,
        how: How,
        caller: &Caller,
        observer: Option<std::sync::Arc<dyn crate::engine::observer::Observer>>,
    ) -> Result<CallToolResponse, McpError> {
        let codec = self.state_codec()?;
        let escalates = how.era == Era::V2026_07_28;
        let run_id = match retry {
            None => match self.start_task(name, args, how.era, caller, observer) {
                Ok(view) => view.run_id,
                Err(NotStarted::Rejected(envelope)) => {
                    return Ok(results::reply_as(
                        envelope,
                        self.app.published_tools().result_form(name),
                    )
                    .into());
                }
                Err(NotStarted::Fault(error)) => return Err(error),
            },
            Some((state, responses)) => {
                let opened: RoundState = codec
                    .open_json_with(&state, name.as_bytes())
                    .map_err(invalid_state)?;
                let view =
                    self.take_answers(&opened, responses.unwrap_or_default(), how, caller)?;
                if escalates {
                    return Ok(v2026_07_28::created(&view));
                }
                opened.run
            }
        };
        match self.settle_for(&run_id, how, caller).await? {
            Settled::Finished(_) if escalates => {
                let view = self.task_of(&run_id, how.era, caller)?;
                Ok(v2026_07_28::created(&view))
            }
            Settled::Finished(result) => Ok(result.into()),
            Settled::Asking(_, open) => {
                let round = (self.app)
                    .next_round(&run_id)
                    .map_err(internal)?
                    .ok_or_else(|| invalid_state("its run is gone"))?;
                let requests = questions::input_requests(&open, how.can).map_err(internal)?;
                let timeout = self.app.answer_timeout();
                let options = SealOptions::new()
                    .associated_data(name.as_bytes())
                    .ttl(timeout);
                let state = codec
                    .seal_json_with(&RoundState { run: run_id, round }, &options)
                    .map_err(internal)?;
                Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
            }
        }
    }

    /// Records the answers of the latest round. Answers to questions already answered (a
    /// repeated round) change nothing.
    /// Returns the run's task as it stands after them.
    fn take_answers(
        &self,
        state: &RoundState,
        responses: InputResponses,
        how: How,
        caller: &Caller,
    ) -> Result<TaskView, McpError> {
        let view = self.task_of(&state.run, how.era, caller)?;
        let latest = (self.app)
            .latest_round(&state.run)
            .map_err(internal)?
            .ok_or_else(|| invalid_state("its run is gone"))?;
        if state.round < latest {
            return Err(invalid_state(format!(
                "it is of round {} and the latest is round {latest}",
                state.round
            )));
        }
        self.app.answered_round(&state.run).map_err(internal)?;
        questions::take_responses(&self.app, &view, &responses, how.can).map_err(internal)?;
        self.task_of(&state.run, how.era, caller)
    }
}
