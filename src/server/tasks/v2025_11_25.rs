//! The 2025-11-25 task protocol: the client asks for a task with `params.task`, polls
//! `tasks/get`, waits in `tasks/result` (while which the run's questions go to it as
//! `elicitation/create` and `sampling/createMessage` requests), lists with `tasks/list`,
//! and cancels with `tasks/cancel`, which ends the task before it answers.
//!
//! The 2025-11-25 shim (`server/shim.rs`) renames these requests; `on_custom_request` brings
//! them here.

use rmcp::model::{CustomNotification, CustomRequest, ServerNotification, ServerRequest};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use serde_json::{Map, Value, json};

use super::{Era, NotStarted, Settled, internal, questions};
use crate::app::{Caller, PageError};
use crate::runs::{OpenQuestion, TaskView};
use crate::server::tasks::v2026_07_28::SUB_TASKS_META;
use crate::server::{Server, results};
use crate::slots::{Full, Slot};

const RELATED_TASK_META: &str = "io.modelcontextprotocol/related-task";

/// The `_meta` key under which `tasks/list` names a sub-task's parent. Not the
/// related-task key: the specification reserves that one, and says it should not be used
/// on `tasks/list`.
pub(crate) const PARENT_TASK_META: &str = "x-mcp-task-server/parentTaskId";

/// Tasks per `tasks/list` page.
const PAGE: usize = 100;

/// A task in this protocol's shape.
pub(crate) fn wire_task(view: &TaskView) -> Value {
    let mut task = json!({
        "taskId": view.task_id,
        "status": view.status,
        "createdAt": view.created_at,
        "lastUpdatedAt": view.last_updated_at,
        "ttl": view.ttl_ms,
        "pollInterval": view.poll_interval_ms,
    });
    if let Some(message) = &view.status_message {
        task["statusMessage"] = json!(message);
    }
    task
}

fn params_of(request: CustomRequest) -> Map<String, Value> {
    match request.params {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    }
}

fn task_id_of(params: &Map<String, Value>) -> Result<&str, McpError> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| McpError::invalid_params("`taskId` must be a string", None))
}

impl Server {
    /// Answers one renamed 2025-11-25 request; `method` is its own name.
    pub(in crate::server) async fn request_2025(
        &self,
        method: &str,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let params = params_of(request);
        let caller = crate::server::caller::caller_of(&context);
        match method {
            "tools/call" => self.call_2025(params, &context, &caller),
            "tasks/get" => self.reading(|| {
                let view = self.task_of(task_id_of(&params)?, Era::V2025_11_25, &caller)?;
                self.task_2025_with_subs(&view)
            }),
            "tasks/result" => {
                let view = self.task_of(task_id_of(&params)?, Era::V2025_11_25, &caller)?;
                let _waiting = self.result_wait(&caller)?;
                self.result_2025(view, &context.peer, &caller).await
            }
            "tasks/list" => self.list_2025(params.get("cursor"), &caller),
            "tasks/cancel" => self.cancel_2025(task_id_of(&params)?, &caller).await,
            _ => Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: {method}"),
                None,
            )),
        }
    }

    fn call_2025(
        &self,
        mut params: Map<String, Value>,
        context: &RequestContext<RoleServer>,
        caller: &Caller,
    ) -> Result<Value, McpError> {
        let name_error = || McpError::invalid_params("`name` must be a string", None);
        if !params.get("name").is_some_and(Value::is_string) {
            return Err(name_error());
        }
        // Taken out of the request, which is not needed after, instead of copied.
        let args = match params.remove("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(args)) => args,
            Some(_) => {
                return Err(McpError::invalid_params(
                    "invalid params: `arguments` must be an object",
                    None,
                ));
            }
        };
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(name_error)?;
        if self.app.published_tools().route(name).is_none() {
            return Err(crate::server::results::unknown_tool(name));
        }
        if self.app.published_tools().task_support(name)
            == crate::engine::definition::TaskSupport::Forbidden
        {
            return Err(crate::server::results::task_forbidden(name));
        }
        let view = match self.start_task(name, args, Era::V2025_11_25, caller, None) {
            Ok(view) => view,
            Err(NotStarted::Rejected(envelope)) => {
                let message = envelope.body["error"]["message"]
                    .as_str()
                    .unwrap_or("the call was rejected")
                    .to_owned();
                return Err(McpError::invalid_params(message, Some(envelope.body)));
            }
            Err(NotStarted::Fault(error)) => return Err(error),
        };
        let token = context.meta.get_progress_token();
        let watched = (view.task_id.clone(), caller.clone());
        self.watch_2025_task(watched, context.peer.clone(), token);
        Ok(json!({ "task": wire_task(&view) }))
    }

    /// A run's task lists its sub-tasks under a `_meta` key of our own.
    fn task_2025_with_subs(&self, view: &TaskView) -> Result<Value, McpError> {
        let mut task = wire_task(view);
        if view.parent_task_id.is_none() {
            task["_meta"] = json!({ SUB_TASKS_META: self.sub_task_list(view)? });
        }
        Ok(task)
    }

    /// A slot for one more waiting `tasks/result`, or the error that refuses it when as
    /// many wait as the server allows, in all or for the caller's principal.
    fn result_wait(&self, caller: &Caller) -> Result<Option<Slot>, McpError> {
        let Some(waits) = &self.result_waits else {
            return Ok(None);
        };
        let message = match waits.take(caller.principal()) {
            Ok(slot) => return Ok(Some(slot)),
            Err(Full::All) => "as many tasks/result requests wait as this server allows \
                               (--http-max-result-waits); poll with tasks/get, or retry later"
                .to_owned(),
            Err(Full::Principal) => format!(
                "{} has as many tasks/result requests waiting as this server allows each \
                 caller (--http-max-result-waits-per-principal); poll with tasks/get, or \
                 retry later",
                caller.principal().unwrap_or_default()
            ),
        };
        // Shaped as a refused call (`too_many_runs`) is.
        let envelope = crate::app::envelope::failed(
            crate::todos::ErrorCode::TooManyResultWaits,
            &message,
            None,
        );
        Err(McpError::invalid_params(message, Some(envelope.body)))
    }

    /// Blocks until the task finishes, putting its questions to the client meanwhile,
    /// and answers what the call would have returned.
    async fn result_2025(
        &self,
        view: TaskView,
        peer: &Peer<RoleServer>,
        caller: &Caller,
    ) -> Result<Value, McpError> {
        loop {
            match self.settle(&view.task_id, Era::V2025_11_25, caller).await? {
                Settled::Finished(result) => {
                    let mut result = results::task_result(result)?;
                    let related = json!({ RELATED_TASK_META: { "taskId": view.task_id } });
                    result.insert("_meta".into(), related);
                    return Ok(Value::Object(result));
                }
                Settled::Asking(view, open) => {
                    self.ask_client(&view, open, peer).await?;
                }
            }
        }
    }

    /// Puts one of the task's open questions to the client and records its reply. A
    /// question the client cannot answer (it declared no such capability) waits for an
    /// answer given another way, but a model-only sample is refused when the client has
    /// no model ([`questions::refuse_without_model`]).
    async fn ask_client(
        &self,
        view: &TaskView,
        open: Vec<OpenQuestion>,
        peer: &Peer<RoleServer>,
    ) -> Result<(), McpError> {
        let can = peer.peer_info().map_or_else(Default::default, |info| {
            questions::declared(&info.capabilities)
        });
        let open = questions::refuse_without_model(&self.app, &view.run_id, open, can)
            .map_err(super::internal)?;
        let asked = open
            .into_iter()
            .find_map(|q| can.asks(&q.request).map(|answerer| (q, answerer)));
        let Some((question, answerer)) = asked else {
            self.app.changed().await;
            return Ok(());
        };
        let (method, mut params) = questions::as_request(&question.request, answerer);
        params["_meta"] = json!({ RELATED_TASK_META: { "taskId": view.task_id } });
        let request = ServerRequest::CustomRequest(CustomRequest::new(method, Some(params)));
        let reply = match peer.send_request(request).await {
            Ok(reply) => serde_json::to_value(reply).unwrap_or_default(),
            Err(error) => {
                tracing::info!(%error, "the client did not answer a question");
                self.app.changed().await;
                return Ok(());
            }
        };
        // An answer that does not fit is asked again, under a new key, by the registry.
        if let Err(error) = questions::answer(&self.app, &view.run_id, &question, answerer, &reply)
        {
            tracing::info!(%error, "an answer was not taken");
        }
        Ok(())
    }

    /// `tasks/list`: runs' tasks newest first, each followed by its sub-tasks, which name
    /// their parent. The cursor is the last task listed.
    fn list_2025(&self, cursor: Option<&Value>, caller: &Caller) -> Result<Value, McpError> {
        let bad_cursor = || McpError::invalid_params("invalid cursor", None);
        let cursor = match cursor {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.as_str()),
            Some(_) => return Err(bad_cursor()),
        };
        let protocol = Era::V2025_11_25.as_str();
        let page = match self.app.task_page(protocol, caller, cursor, PAGE) {
            Ok(page) => page,
            Err(PageError::BadCursor) => return Err(bad_cursor()),
            Err(PageError::Store(error)) => return Err(internal(error)),
        };
        let tasks: Vec<Value> = page
            .tasks
            .iter()
            .map(|view| {
                let mut task = wire_task(view);
                if let Some(parent) = &view.parent_task_id {
                    task["_meta"] = json!({ PARENT_TASK_META: parent });
                }
                task
            })
            .collect();
        let mut listed = json!({ "tasks": tasks });
        if let Some(cursor) = page.next {
            listed["nextCursor"] = json!(cursor);
        }
        Ok(listed)
    }

    /// `tasks/cancel`: the task is `cancelled` before the reply, for good; a finished one
    /// gives `-32602`.
    async fn cancel_2025(&self, task_id: &str, caller: &Caller) -> Result<Value, McpError> {
        let view = self.task_of(task_id, Era::V2025_11_25, caller)?;
        if !self.cancel_task(&view, caller).await? {
            return Err(McpError::invalid_params(
                format!(
                    "cannot cancel task {task_id}: it is already {}",
                    view.status
                ),
                None,
            ));
        }
        let view = self.task_of(task_id, Era::V2025_11_25, caller)?;
        Ok(wire_task(&view))
    }

    /// Tells the client of the task's progress (on its progress token) and of each change
    /// of its status, until it finishes or the client goes away.
    fn watch_2025_task(
        &self,
        (task_id, caller): (String, Caller),
        peer: Peer<RoleServer>,
        token: Option<rmcp::model::ProgressToken>,
    ) {
        let server = self.clone();
        tokio::spawn(async move {
            let mut seen: Option<(String, i64)> = None;
            loop {
                let Ok(view) = server.task_of(&task_id, Era::V2025_11_25, &caller) else {
                    return;
                };
                let now = (view.status.clone(), view.progress);
                if seen.as_ref() != Some(&now) {
                    if let Some(token) = &token
                        && seen.as_ref().is_none_or(|(_, p)| *p != view.progress)
                    {
                        let param = rmcp::model::ProgressNotificationParam::new(
                            token.clone(),
                            view.progress as f64,
                        )
                        .with_total(100.0)
                        .with_message(view.status_message.clone().unwrap_or_default());
                        if peer.notify_progress(param).await.is_err() {
                            return;
                        }
                    }
                    if seen.as_ref().is_none_or(|(s, _)| *s != view.status) {
                        let status = CustomNotification::new(
                            "notifications/tasks/status",
                            Some(wire_task(&view)),
                        );
                        let notification = ServerNotification::CustomNotification(status);
                        if peer.send_notification(notification).await.is_err() {
                            return;
                        }
                    }
                    seen = Some(now);
                }
                if view.status().is_terminal() {
                    return;
                }
                server.app.changed().await;
            }
        });
    }
}
