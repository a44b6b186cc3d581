//! A workflow call answered when its run ends (no task): cancelled by the client's cancel
//! notification, with progress on its token and its questions put straight to the client;
//! with an idempotency key, the run an earlier call with it started.

use rmcp::RoleServer;
use rmcp::service::RequestContext;
use serde_json::Value;

use super::{Server, progress, results, workflow_tools};
use crate::engine::RunOptions;
use crate::engine::journal::RunOrigin;

impl Server {
    /// A workflow run for a `tools/call`: cancelled by the client's cancel notification,
    /// reporting progress on the request's token when it has one. A call with an
    /// idempotency key that an earlier call used waits for that call's run instead.
    pub(super) async fn run_workflow(
        &self,
        name: &str,
        mut args: serde_json::Map<String, Value>,
        context: &RequestContext<RoleServer>,
        caller: &super::caller::Caller,
    ) -> rmcp::model::CallToolResult {
        let retryable = match self.take_idempotency_key(name, &mut args, caller.principal()) {
            Ok(retryable) => retryable,
            Err(rejected) => return results::reply(rejected),
        };
        // A call with a key checks the quota once it knows the key starts a new run: a
        // retry of a run already started is answered even at the cap.
        if retryable.is_none()
            && let Err(refused) = self.run_quota(caller, name, &args)
        {
            return results::reply_as(refused, self.result_form(name));
        }
        let request = context.id.to_string();
        let mut options = RunOptions {
            origin: RunOrigin::Mcp,
            interaction: super::interaction::for_call(context),
            owner: caller.owner().clone(),
            ..RunOptions::default()
        };
        self.lock_runs()
            .insert(request.clone(), options.cancel.clone());
        let mut forwarder = None;
        if let Some(token) = context.meta.get_progress_token() {
            let stop = tokio_util::sync::CancellationToken::new();
            let (observer, task) = progress::reporter(context.peer.clone(), token, stop);
            options.observer = Some(observer);
            forwarder = Some(task);
        }
        let reply = match retryable {
            None => {
                workflow_tools::run_workflow(
                    &self.engine,
                    &self.catalog,
                    self.inline,
                    name,
                    &args,
                    options,
                )
                .await
            }
            Some(retryable) => self.run_once(name, &args, retryable, options, caller).await,
        };
        self.lock_runs().remove(&request);
        if let Some(task) = forwarder {
            // The run and its observer are gone; wait for the last notifications.
            let _ = task.await;
        }
        results::reply_as(reply, self.result_form(name))
    }

    /// A synchronous call that carries an idempotency key: the run an earlier call with
    /// it started, awaited, or a new run recorded under it.
    async fn run_once(
        &self,
        name: &str,
        args: &serde_json::Map<String, Value>,
        retryable: super::idempotency::Retryable,
        mut options: RunOptions,
        caller: &super::caller::Caller,
    ) -> super::envelope::Envelope {
        let handle = {
            let _starting = self.lock_starting();
            match self.earlier_run(name, args, &retryable) {
                Err(rejected) => return rejected,
                Ok(Some(run_id)) => {
                    drop(_starting);
                    return self.await_earlier(&run_id).await;
                }
                Ok(None) => {}
            }
            let principal = retryable.principal.as_deref();
            if let Err(refused) = self.run_quota(caller, name, args) {
                return refused;
            }
            let request = match workflow_tools::prepare_run(
                &self.engine,
                &self.catalog,
                self.inline,
                name,
                args,
                principal,
            ) {
                Ok(request) => request,
                Err(rejected) => return rejected,
            };
            options.idempotency = Some((retryable.key.clone(), retryable.call.clone()));
            self.engine.start(request.plan, request.inputs, options)
        };
        let recorded = self.registry.as_ref().is_none_or(|registry| {
            registry
                .store()
                .run_head(&handle.run_id)
                .is_ok_and(|head| head.is_some())
        });
        if !recorded {
            // Another process started a run under the same key first: its run is this one.
            if let Ok(Some(run_id)) = self.earlier_run(name, args, &retryable) {
                return self.await_earlier(&run_id).await;
            }
        }
        // Dropping the call cancels its run, as for a call without a key.
        let _cancel_on_drop = handle.cancel.clone().drop_guard();
        let report = match handle.join.await {
            Ok(report) => report,
            Err(_) => return super::envelope::failed("internal_error", "the run failed", None),
        };
        let outcome = match report.status {
            crate::engine::report::RunStatus::Succeeded => crate::store::AuditOutcome::Ok,
            _ => crate::store::AuditOutcome::Error,
        };
        let origin = crate::todos::Origin {
            run_id: Some(&report.run_id),
            node_id: None,
            principal: retryable.principal.as_deref(),
        };
        self.engine.tools().audit(name, args, outcome, origin);
        workflow_tools::run_reply(&report, self.engine.workspace())
    }

    /// Waits for an earlier call's run to end and answers with its report.
    async fn await_earlier(&self, run_id: &str) -> super::envelope::Envelope {
        loop {
            let report = self.registry.as_ref().map(|r| r.report(run_id));
            match report {
                Some(Ok(Some(report))) => {
                    return workflow_tools::run_reply(&report, self.engine.workspace());
                }
                Some(Ok(None)) => self.task_changed().await,
                _ => {
                    return super::envelope::failed(
                        "internal_error",
                        "the run cannot be read",
                        None,
                    );
                }
            }
        }
    }
}
