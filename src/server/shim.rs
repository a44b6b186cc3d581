//! The 2025-11-25 task protocol in front of rmcp, which speaks only the SEP-2663 one.
//!
//! rmcp drops `params.task` from a `tools/call`, answers `tasks/get` and `tasks/cancel` as
//! SEP-2663 requests (refusing them to a client that never declared the extension), and
//! has no way to put `capabilities.tasks` into the `initialize` result or
//! `execution.taskSupport` onto a tool. So this layer works on the JSON-RPC messages
//! themselves:
//! - inbound, 2025-11-25 task traffic is renamed to methods under [`PREFIX`], which the
//!   handler answers (`server/tasks/v2025_11_25.rs`);
//! - outbound, the `initialize` result gets `capabilities.tasks` (and loses the SEP-2663
//!   extension, which `server/discover` names for 2026-07-28 clients), and `tools/list` gets
//!   `execution.taskSupport` where the handler marked a tool with [`TASK_SUPPORT_META`].
//!   The mark never reaches a client.
//!
//! Independent of framing: it takes messages, not lines, so that an HTTP transport can
//! apply the same rewrite to bodies and events.
//!
//! Invariant: only this layer makes a request under [`PREFIX`]. Each request it renames
//! carries a [`Renamed`] mark in its extensions (on HTTP, in the extensions of the HTTP
//! request, which rmcp hands the handler), which no client can put there; the handler
//! answers a [`PREFIX`] method only with the mark, so a client that sends one by its
//! internal name gets "method not found", and cannot step around the era checks.

use std::collections::HashMap;

use rmcp::RoleServer;
use rmcp::model::{
    ClientRequest, CustomRequest, GetExtensions, GetMeta, JsonRpcMessage, JsonRpcRequest, RequestId,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};

use serde_json::{Map, Value, json};

use super::listen_tasks::{self, Asked};

/// Where renamed 2025-11-25 methods live: `PREFIX` + the method's own name.
pub(crate) const PREFIX: &str = "x-mcp-task-server/2025-11-25/";

/// The internal notification, under [`PREFIX`], by which the stdio transport tells the
/// handler that the client cancelled a call (`transport/stdio/mod.rs` says why not rmcp's own).
pub(crate) const CANCELLED: &str = "notifications/cancelled";

/// The mark of a request this layer renamed, set where the handler finds it: in the
/// request's extensions, or in those of the HTTP request that carried it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Renamed;

/// Whether a request with these extensions was renamed by this layer, on either transport.
pub(crate) fn renamed_here(extensions: &rmcp::model::Extensions) -> bool {
    extensions.get::<Renamed>().is_some()
        || extensions
            .get::<http::request::Parts>()
            .is_some_and(|parts| parts.extensions.get::<Renamed>().is_some())
}

/// The `_meta` key by which the handler marks a task-capable tool in `tools/list`.
pub(crate) const TASK_SUPPORT_META: &str = "x-mcp-task-server/taskSupport";

const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// Which responses are to be patched on their way out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Patch {
    Initialize,
    ToolsList,
}

/// What the layer knows of one client's session.
#[derive(Debug)]
pub(crate) struct Session {
    /// The client opened with `initialize`: a 2025-11-25 (or older) session, whose task
    /// protocol is 2025-11-25 even if it declared the SEP-2663 extension there, which that
    /// protocol version does not define (MCP Inspector 2.12 declares it in every era).
    v2025: bool,
    pending: HashMap<RequestId, Patch>,
    /// The `subscriptions/listen` requests whose acknowledgement is yet to get the tasks
    /// they follow (`listen_tasks.rs`), by id as JSON.
    listens: Vec<(Value, Vec<String>)>,
    /// The most tasks one listen follows (`--max-subscriptions`).
    max_listened: usize,
}

impl Default for Session {
    fn default() -> Session {
        Session::new(super::DEFAULT_MAX_SUBSCRIPTIONS)
    }
}

impl Session {
    /// A session whose listens follow at most `max_listened` tasks each.
    pub(crate) fn new(max_listened: usize) -> Session {
        Session {
            v2025: false,
            pending: HashMap::new(),
            listens: Vec::new(),
            max_listened,
        }
    }

    /// Renames 2025-11-25 task traffic; `text` is the message as received, for what the
    /// typed message lost (`params.task`, a listen's `taskIds`). `Err` is the error reply
    /// to give instead (a listen that names tasks without declaring the extension).
    pub(crate) fn inbound(
        &mut self,
        text: &[u8],
        message: RxJsonRpcMessage<RoleServer>,
    ) -> Result<RxJsonRpcMessage<RoleServer>, Value> {
        let JsonRpcMessage::Request(request) = &message else {
            return Ok(message);
        };
        if let ClientRequest::SubscriptionsListenRequest(_) = &request.request {
            return self.listen(text, message);
        }
        Ok(self.route(text, message))
    }

    /// [`Session::inbound`] for any request but a listen.
    fn route(
        &mut self,
        text: &[u8],
        message: RxJsonRpcMessage<RoleServer>,
    ) -> RxJsonRpcMessage<RoleServer> {
        let JsonRpcMessage::Request(request) = &message else {
            return message;
        };
        // The text is parsed again only for what the typed message lost: `params.task`;
        // as the custom request it becomes if renamed, so that this parse is the last.
        let mut parsed = None;
        let has_task = || {
            // A cheap test first: only a message whose text holds the key `"task"` can.
            parsed = mentions_task(text).then(|| as_custom(text)).flatten();
            parsed.as_ref().is_some_and(|request| {
                request
                    .request
                    .params
                    .as_ref()
                    .is_some_and(|params| params["task"].is_object())
            })
        };
        let modern = declares_modern(&request.request);
        let method = request.request.method();
        match decide(method, modern, has_task, self.v2025) {
            Route::Keep => message,
            Route::Patch(patch) => {
                self.v2025 |= patch == Patch::Initialize;
                self.pending.insert(request.id.clone(), patch);
                message
            }
            // A `tasks/get` is parsed as a custom request here, once, from its text.
            Route::Rename => match parsed.or_else(|| as_custom(text)) {
                Some(request) => renamed(request),
                None => rename(message),
            },
        }
    }

    /// A listen's tasks, read from its text (the typed message lost them), marked on it
    /// for the handler and kept for its acknowledgement.
    fn listen(
        &mut self,
        text: &[u8],
        mut message: RxJsonRpcMessage<RoleServer>,
    ) -> Result<RxJsonRpcMessage<RoleServer>, Value> {
        let JsonRpcMessage::Request(request) = &mut message else {
            return Ok(message);
        };
        let asked = match listen_tasks::may_name_tasks(text) {
            true => serde_json::from_slice::<Value>(text).map_or(Asked::Nothing, |raw| {
                listen_tasks::asked(&raw, self.max_listened)
            }),
            false => Asked::Nothing,
        };
        let id = || serde_json::to_value(&request.id).unwrap_or_default();
        match asked {
            Asked::Nothing => {}
            Asked::Undeclared => return Err(listen_tasks::refusal(&id())),
            Asked::TooMuch(why) => return Err(listen_tasks::too_much(&id(), &why)),
            Asked::Tasks(tasks) => {
                let id = id();
                let mark = listen_tasks::ListenTasks(tasks.clone());
                request.request.extensions_mut().insert(mark);
                self.listens.push((id, tasks));
            }
        }
        Ok(message)
    }

    /// The message patched, when it answers `initialize` or `tools/list`, or acknowledges
    /// a listen that follows tasks; `None` when it goes out as it is.
    pub(crate) fn outbound(&mut self, message: &TxJsonRpcMessage<RoleServer>) -> Option<Value> {
        if let JsonRpcMessage::Notification(_) = message {
            return self.acknowledged(message);
        }
        let response = match message {
            JsonRpcMessage::Response(response) => response,
            // An error answers the request too: it is patched no more.
            JsonRpcMessage::Error(error) => {
                if let Some(id) = &error.id {
                    self.pending.remove(id);
                    self.forget_listen(id);
                }
                return None;
            }
            _ => return None,
        };
        self.forget_listen(&response.id);
        let patch = self.pending.remove(&response.id)?;
        let mut raw = serde_json::to_value(message).ok()?;
        patch_result(patch, self.v2025, &mut raw["result"]);
        Some(raw)
    }

    /// Forgets the listen `id`, answered without an acknowledgement (refused, say), so
    /// that the listens kept are those in flight only.
    fn forget_listen(&mut self, id: &RequestId) {
        if self.listens.is_empty() {
            return;
        }
        let id = serde_json::to_value(id).unwrap_or_default();
        self.listens.retain(|(listen, _)| *listen != id);
    }

    /// A listen's acknowledgement with the tasks it follows.
    fn acknowledged(&mut self, message: &TxJsonRpcMessage<RoleServer>) -> Option<Value> {
        if self.listens.is_empty() {
            return None;
        }
        let mut raw = serde_json::to_value(message).ok()?;
        let at = self
            .listens
            .iter()
            .position(|(id, tasks)| listen_tasks::acknowledge(&mut raw, id, tasks))?;
        self.listens.swap_remove(at);
        Some(raw)
    }
}

/// What a transport that sees a request's JSON text (HTTP) does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// It goes to rmcp as it is, and so does its reply.
    Keep,
    /// Its method is renamed under [`PREFIX`]; the handler answers it in 2025-11-25 shapes.
    Rename,
    /// It goes as it is, and its result is patched on the way out.
    Patch(Patch),
}

/// The route of one request given as JSON, by the rules [`Session::inbound`] applies to
/// typed requests: `v2025`, whether the request belongs to a session opened with
/// `initialize`.
pub(crate) fn route(raw: &Value, v2025: bool) -> Route {
    let Some(method) = raw["method"].as_str() else {
        return Route::Keep;
    };
    let params = &raw["params"];
    let modern = params["_meta"].get(PROTOCOL_VERSION_META).is_some();
    decide(method, modern, || params["task"].is_object(), v2025)
}

/// The one place the layer's rules live. `modern`: the request carries the 2026-07-28
/// `_meta`; `has_task`: whether it carries `params.task` (asked only of a `tools/call`).
fn decide(method: &str, modern: bool, has_task: impl FnOnce() -> bool, v2025: bool) -> Route {
    match method {
        "initialize" => Route::Patch(Patch::Initialize),
        "tools/list" => Route::Patch(Patch::ToolsList),
        // A SEP-2663 request's `task` is ignored, as that protocol says.
        "tools/call" if !modern && has_task() => Route::Rename,
        "tasks/get" | "tasks/cancel" | "tasks/result" | "tasks/list" if v2025 && !modern => {
            Route::Rename
        }
        _ => Route::Keep,
    }
}

/// Renames a request routed [`Route::Rename`].
pub(crate) fn rename_json(raw: &mut Value) {
    if let Some(method) = raw["method"].as_str() {
        raw["method"] = json!(format!("{PREFIX}{method}"));
    }
}

/// Patches the `result` of a reply to `initialize` or `tools/list`.
pub(crate) fn patch_result(patch: Patch, v2025: bool, result: &mut Value) {
    match patch {
        Patch::Initialize => {
            // Indexing a JSON value that is no object panics on assignment: a result of
            // another shape is left as it is.
            let Some(result) = result.as_object_mut() else {
                return;
            };
            let capabilities = result.entry("capabilities").or_insert(Value::Null);
            if capabilities.is_null() {
                *capabilities = json!({});
            }
            let Some(capabilities) = capabilities.as_object_mut() else {
                return;
            };
            capabilities.insert(
                "tasks".into(),
                json!({
                    "list": {},
                    "cancel": {},
                    "requests": { "tools": { "call": {} } }
                }),
            );
            // The extension is for 2026-07-28 requests; `server/discover` names it.
            if let Some(Value::Object(extensions)) = capabilities.get_mut("extensions") {
                extensions.remove(rmcp::model::TASKS_EXTENSION_ID);
                if extensions.is_empty() {
                    capabilities.remove("extensions");
                }
            }
        }
        Patch::ToolsList => {
            if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
                for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
                    mark_task_support(tool, v2025);
                }
            }
        }
    }
}

/// Turns the handler's mark into `execution.taskSupport` for a 2025-11-25 client, and
/// removes it for every client.
fn mark_task_support(tool: &mut Map<String, Value>, v2025: bool) {
    let Some(Value::Object(meta)) = tool.get_mut("_meta") else {
        return;
    };
    let support = meta.remove(TASK_SUPPORT_META);
    if meta.is_empty() {
        tool.remove("_meta");
    }
    if let (true, Some(support)) = (v2025, support) {
        tool.insert("execution".into(), json!({ "taskSupport": support }));
    }
}

/// Whether a message's text holds the key `"task"` somewhere, as one with `params.task`
/// does.
fn mentions_task(text: &[u8]) -> bool {
    text.windows(6).any(|w| w == b"\"task\"")
}

/// Whether a request carries the per-request `_meta` of the 2026-07-28 protocol. rmcp
/// moves `_meta` out of the typed parameters into the request's extensions, where it is
/// read here without parsing the text again.
pub(crate) fn declares_modern(request: &ClientRequest) -> bool {
    request.get_meta().contains_key(PROTOCOL_VERSION_META)
}

/// The request of `text` parsed as a custom request, whatever its method: rmcp's own
/// type, which keeps `params` (`task` among them) as the text has them.
fn as_custom(text: &[u8]) -> Option<JsonRpcRequest<CustomRequest>> {
    serde_json::from_slice(text).ok()
}

/// A custom request under its 2025-11-25 name, with the mark of this layer.
fn renamed(mut request: JsonRpcRequest<CustomRequest>) -> RxJsonRpcMessage<RoleServer> {
    request.request.method.insert_str(0, PREFIX);
    request.request.extensions.insert(Renamed);
    JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc: request.jsonrpc,
        id: request.id,
        request: ClientRequest::CustomRequest(request.request),
    })
}

/// The request under its 2025-11-25 name, from its typed form: for a text that does not
/// parse as it is (a byte-order mark before it).
fn rename(message: RxJsonRpcMessage<RoleServer>) -> RxJsonRpcMessage<RoleServer> {
    let Ok(mut raw) = serde_json::to_value(&message) else {
        return message;
    };
    rename_json(&mut raw);
    custom(raw).unwrap_or(message)
}

/// A renamed request, parsed as the custom request it now is. rmcp's general parse would
/// get there too, but only after trying, and failing, every standard request type first.
fn custom(raw: Value) -> Option<RxJsonRpcMessage<RoleServer>> {
    let mut request: JsonRpcRequest<CustomRequest> = serde_json::from_value(raw).ok()?;
    request.request.extensions.insert(Renamed);
    Some(JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc: request.jsonrpc,
        id: request.id,
        request: ClientRequest::CustomRequest(request.request),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renamed_request_parses_as_the_general_path_parses_it() {
        let requests = [
            json!({"jsonrpc": "2.0", "id": 1, "method": format!("{PREFIX}tools/call"),
                   "params": {"name": "run_workflow", "arguments": {"workflow": "w"},
                              "task": {"ttl": 60000}, "_meta": {"progressToken": "p-1"}}}),
            json!({"jsonrpc": "2.0", "id": "g", "method": format!("{PREFIX}tasks/get"),
                   "params": {"taskId": "t-1"}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": format!("{PREFIX}tasks/list"),
                   "params": {"cursor": "c"}}),
        ];
        for raw in requests {
            let general: RxJsonRpcMessage<RoleServer> =
                serde_json::from_value(raw.clone()).unwrap();
            let direct = custom(raw.clone()).expect("a renamed request parses");
            assert_eq!(format!("{direct:?}"), format!("{general:?}"), "{raw}");
            // Serialised, `_meta` comes back from the request's extensions.
            assert_eq!(serde_json::to_value(&direct).unwrap(), raw);
            // Renamed from the text the client sent, it is the same request.
            let mut sent = raw.clone();
            let method = raw["method"].as_str().unwrap();
            sent["method"] = json!(method.strip_prefix(PREFIX).unwrap());
            let from_text = renamed(as_custom(sent.to_string().as_bytes()).unwrap());
            assert_eq!(format!("{from_text:?}"), format!("{general:?}"), "{raw}");
            assert_eq!(serde_json::to_value(&from_text).unwrap(), raw);
        }
    }

    /// What the layer makes of `raw` as it comes in on `session`.
    fn receive(session: &mut Session, raw: &Value) -> RxJsonRpcMessage<RoleServer> {
        let text = raw.to_string();
        let message = serde_json::from_str(&text).unwrap();
        session
            .inbound(text.as_bytes(), message)
            .expect("not refused")
    }

    /// A session whose client sent `initialize` under request id `id`.
    fn initialized(id: i64) -> Session {
        let mut session = Session::default();
        let init = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}});
        receive(&mut session, &init);
        session
    }

    /// The method a request has after the layer, in a session that opened with
    /// `initialize`.
    fn method_after(raw: Value) -> String {
        let message = receive(&mut initialized(0), &raw);
        serde_json::to_value(&message).unwrap()["method"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn requests_given_as_json_are_routed_as_the_typed_layer_routes_them() {
        let modern = json!({PROTOCOL_VERSION_META: "2026-07-28"});
        let requests = [
            json!({"method": "tools/call", "params": {"name": "add_task", "arguments": {}}}),
            json!({"method": "tools/call", "params": {"name": "w", "task": {"ttl": 1}}}),
            json!({"method": "tools/call",
                   "params": {"name": "w", "task": {}, "_meta": modern.clone()}}),
            json!({"method": "tasks/get", "params": {"taskId": "t"}}),
            json!({"method": "tasks/result", "params": {"taskId": "t"}}),
            json!({"method": "tasks/list", "params": {}}),
            json!({"method": "tasks/cancel", "params": {"taskId": "t", "_meta": modern}}),
            json!({"method": "ping"}),
        ];
        for mut raw in requests {
            raw["jsonrpc"] = json!("2.0");
            raw["id"] = json!(1);
            let renamed = method_after(raw.clone()).starts_with(PREFIX);
            assert_eq!(route(&raw, true) == Route::Rename, renamed, "{raw}");
        }
    }

    #[test]
    fn an_error_reply_ends_the_patch_its_request_asked_for() {
        // `initialize` fails: a later request under the same id must not have its result
        // patched as an `initialize` result.
        let mut session = initialized(1);
        let failed: TxJsonRpcMessage<RoleServer> = serde_json::from_value(json!({
            "jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "no"}}))
        .unwrap();
        assert!(session.outbound(&failed).is_none());
        receive(
            &mut session,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        );
        let pong: TxJsonRpcMessage<RoleServer> =
            serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "result": {}})).unwrap();
        assert!(
            session.outbound(&pong).is_none(),
            "the ping's reply goes out as it is"
        );
        assert!(session.pending.is_empty());
    }

    #[test]
    fn a_listen_answered_without_an_acknowledgement_is_forgotten() {
        let mut session = Session::default();
        let listen = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": ["t1"]}, "_meta": {
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {
                    rmcp::model::TASKS_EXTENSION_ID: {}}}}}});
        receive(&mut session, &listen);
        assert_eq!(session.listens.len(), 1);
        let refused: TxJsonRpcMessage<RoleServer> = serde_json::from_value(json!({
            "jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "no"}}))
        .unwrap();
        assert!(session.outbound(&refused).is_none());
        assert!(session.listens.is_empty());
    }

    #[test]
    fn a_task_request_is_renamed_unless_it_carries_the_modern_meta() {
        let modern = json!({PROTOCOL_VERSION_META: "2026-07-28"});
        for method in ["tasks/get", "tasks/cancel", "tasks/result", "tasks/list"] {
            let params = json!({"taskId": "t-1"});
            let v2025 = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
            assert_eq!(method_after(v2025), format!("{PREFIX}{method}"));
            let mut params = params;
            params["_meta"] = modern.clone();
            let sep = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
            assert_eq!(method_after(sep), method);
        }
    }
}
