//! A workflow call answered when its run ends (no task): cancelled by the client's cancel
//! notification, with progress on its token and its questions put straight to the client.

use rmcp::RoleServer;
use rmcp::service::RequestContext;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::{Server, progress, results};
use crate::app::{Caller, CallerChannels};

impl Server {
    /// A workflow run for a `tools/call`: cancelled by the client's cancel notification,
    /// reporting progress on the request's token when it has one.
    pub(super) async fn run_workflow(
        &self,
        name: &str,
        args: Map<String, Value>,
        context: &RequestContext<RoleServer>,
        caller: &Caller,
    ) -> rmcp::model::CallToolResult {
        let request = context.id.to_string();
        let cancel = CancellationToken::new();
        self.runs.lock().insert(request.clone(), cancel.clone());
        let mut sync = CallerChannels {
            interaction: super::interaction::for_call(context),
            observer: None,
            cancel: Some(cancel),
        };
        let mut forwarder = None;
        if let Some(token) = context.meta.get_progress_token() {
            let stop = CancellationToken::new();
            let (observer, task) = progress::reporter(context.peer.clone(), token, stop);
            sync.observer = Some(observer);
            forwarder = Some(task);
        }
        let answer = self.app.call(name, args, caller, sync).await;
        self.runs.lock().remove(&request);
        if let Some(task) = forwarder {
            // The run and its observer are gone; wait for the last notifications.
            let _ = task.await;
        }
        let form = self.app.published_tools().result_form(name);
        results::reply_as(answer.expect("a routed tool"), form)
    }
}
