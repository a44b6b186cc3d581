//! The server as the transports serve it: each MCP request under a span of its own, as the
//! MCP semantic conventions name it, and timed into `mcp.server.operation.duration`.
//!
//! rmcp serves a `ServerHandler`, whose every request method this wraps around
//! [`Server`]'s own: the span is started from what the request says (its method, tool or
//! prompt, id, `_meta`), made current while the request is handled, and ended with how it
//! was answered. Its parent is the trace context in the request's `params._meta`
//! (`traceparent`, `tracestate`, `baggage`); over HTTP it also links the HTTP request's
//! span, which the gate starts (MCP and HTTP contexts are independent).
//!
//! Invariant: the span of a request is `opentelemetry::Context::current()` on the task
//! that handles it, for as long as it is handled: a run a `tools/call` starts takes it
//! from `telemetry::current_context()` there.
//! Invariant: with telemetry off, a request pays two loads and branches here, nothing else.
//! Invariant: what a client sends reaches a span's attributes cut to [`MAX_TEXT`] bytes,
//! and a metric's attributes only when it names a published tool.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use opentelemetry::propagation::Extractor;
use opentelemetry::trace::{Link, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
#[allow(deprecated)] // `SetLevelRequestParams`, of the 2025-11-25 era
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CancelledNotificationParam,
    CompleteRequestParams, CompleteResult, CustomNotification, CustomRequest, CustomResult,
    DiscoverResult, ErrorCode, GetPromptRequestParams, GetPromptResponse, GetTaskParams,
    GetTaskResult, InitializeRequestParams, InitializeResult, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{MaybeSendFuture, NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use super::{Server, shim};
use crate::telemetry::{self, HttpSpan, metrics};

/// The most bytes of a client's text (a tool's name, a URI, a request id) a span keeps.
const MAX_TEXT: usize = 256;

/// [`Server`] with each request observed: what rmcp serves, on both transports.
#[derive(Clone)]
pub struct Observed(Server);

impl Server {
    /// This server with each request under its span and timed (`observed.rs`).
    pub fn observed(self) -> Observed {
        Observed(self)
    }
}

/// What a request asks, for its span and its metric.
struct What<'a> {
    method: &'static str,
    tool: Option<&'a str>,
    prompt: Option<&'a str>,
    uri: Option<&'a str>,
    /// The `_meta` of a request rmcp did not read it from (a custom request's params).
    meta: Option<&'a JsonObject>,
}

impl<'a> What<'a> {
    fn method(method: &'static str) -> What<'a> {
        What {
            method,
            tool: None,
            prompt: None,
            uri: None,
            meta: None,
        }
    }
}

/// A request being observed: when it began, its span's context (when spans are
/// exported), and what its metric names.
struct Begun {
    started: Instant,
    span: Option<Context>,
    method: &'static str,
    tool: Option<&'static str>,
    transport: &'static str,
    /// 2026-07-28 and later: rmcp answers a missing resource as "invalid params".
    stateless: bool,
}

/// How a request was answered.
enum Answer<'a> {
    Ok,
    /// A tool's result with `isError`.
    ToolError,
    Error(&'a McpError),
}

impl Observed {
    /// Starts observing a request, or `None` with telemetry off.
    fn begin(&self, context: &RequestContext<RoleServer>, what: &What<'_>) -> Option<Begun> {
        let spans = telemetry::tracing_on();
        if !spans && !metrics::on() {
            return None;
        }
        let parts = context.extensions.get::<http::request::Parts>();
        let transport = if parts.is_some() { "tcp" } else { "pipe" };
        // A metric names a tool only if it is published: its values stay the server's.
        let tool = what
            .tool
            .filter(|name| self.0.app.published_tools().route(name).is_some());
        Some(Begun {
            started: Instant::now(),
            span: spans.then(|| start_span(context, what, parts, transport)),
            method: what.method,
            tool: tool.map(metrics::name),
            transport,
            stateless: super::is_stateless(context),
        })
    }
}

pin_project_lite::pin_project! {
    /// `inner`, a request's handling, run under `begun`'s span; when it is done, the span
    /// ends and the metric is recorded with its answer (`tool_error` tells a tool's
    /// result with `isError`). A future of its own rather than an `async` block: it holds
    /// `inner` once, where an `async fn` taking it would hold it twice, and a request's
    /// future, which rmcp moves several times, would double in size.
    struct Observing<F, T> {
        begun: Option<Begun>,
        #[pin]
        inner: F,
        tool_error: fn(&T) -> bool,
    }
}

fn observe<F, T>(begun: Option<Begun>, inner: F, tool_error: fn(&T) -> bool) -> Observing<F, T> {
    Observing {
        begun,
        inner,
        tool_error,
    }
}

impl<F, T> Future for Observing<F, T>
where
    F: Future<Output = Result<T, McpError>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Some(begun) = this.begun.as_ref() else {
            return this.inner.poll(cx);
        };
        // The request's span is current while it is handled, and for its last log line.
        let _current = begun.span.as_ref().map(|span| span.clone().attach());
        let Poll::Ready(result) = this.inner.poll(cx) else {
            return Poll::Pending;
        };
        let code = result.as_ref().err().map(|error| error.code.0);
        tracing::debug!(method = begun.method, code, "MCP request answered");
        let answer = match &result {
            Ok(value) if (this.tool_error)(value) => Answer::ToolError,
            Ok(_) => Answer::Ok,
            Err(error) => Answer::Error(error),
        };
        if let Some(begun) = this.begun.take() {
            begun.end(&answer);
        }
        Poll::Ready(result)
    }
}

fn never<T>(_: &T) -> bool {
    false
}

/// Whether a tool's answer is a result with `isError`.
fn tool_error(response: &CallToolResponse) -> bool {
    matches!(response, CallToolResponse::Complete(result) if result.is_error == Some(true))
}

impl Begun {
    fn end(self, answer: &Answer<'_>) {
        let code = match answer {
            Answer::Error(error)
                if self.stateless && error.code == ErrorCode::RESOURCE_NOT_FOUND =>
            {
                Some(ErrorCode::INVALID_PARAMS.0)
            }
            Answer::Error(error) => Some(error.code.0),
            _ => None,
        };
        let error = match (answer, code) {
            (Answer::ToolError, _) => Some("tool_error"),
            (_, Some(code)) => Some(code_name(code)),
            _ => None,
        };
        if let Some(cx) = &self.span {
            let span = cx.span();
            if let Some(code) = code {
                span.set_attribute(KeyValue::new("rpc.response.status_code", code_name(code)));
            }
            if let Some(error) = error {
                span.set_attribute(KeyValue::new("error.type", error));
                let message = match answer {
                    Answer::Error(e) => cut(&e.message).into_owned(),
                    _ => "the tool's result is an error".to_owned(),
                };
                span.set_status(Status::error(message));
            }
            span.end();
        }
        let operation = metrics::Operation {
            method: self.method,
            tool: self.tool,
            error,
            transport: self.transport,
        };
        metrics::operation(self.started.elapsed(), &operation);
    }
}

/// A JSON-RPC error code as text, each once for the process.
fn code_name(code: i32) -> &'static str {
    match code {
        -32700 => "-32700",
        -32600 => "-32600",
        -32601 => "-32601",
        -32602 => "-32602",
        -32603 => "-32603",
        -32002 => "-32002",
        other => metrics::name(&other.to_string()),
    }
}

/// `text` cut to at most [`MAX_TEXT`] bytes, on a character's boundary.
fn cut(text: &str) -> Cow<'_, str> {
    if text.len() <= MAX_TEXT {
        return Cow::Borrowed(text);
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &text[..end]))
}

/// The `_meta` fields the W3C propagators read.
struct Meta<'a>(&'a JsonObject);

impl Extractor for Meta<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.as_str())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The request's span, started under the context its `_meta` names, linking the HTTP
/// request's span when it came over HTTP.
fn start_span(
    context: &RequestContext<RoleServer>,
    what: &What<'_>,
    parts: Option<&http::request::Parts>,
    transport: &'static str,
) -> Context {
    let meta: &JsonObject = &context.meta;
    let meta = match what.meta {
        Some(params) if !meta.contains_key("traceparent") => params,
        _ => meta,
    };
    let parent = telemetry::extract(&Meta(meta));
    let target = what.tool.or(what.prompt).map(cut);
    let name = match &target {
        Some(target) => format!("{} {target}", what.method),
        None => what.method.to_owned(),
    };
    let mut attributes = vec![
        KeyValue::new("mcp.method.name", what.method),
        KeyValue::new(
            "jsonrpc.request.id",
            cut(&context.id.to_string()).into_owned(),
        ),
        KeyValue::new("network.transport", transport),
    ];
    if let Some(tool) = what.tool {
        attributes.push(KeyValue::new("gen_ai.tool.name", cut(tool).into_owned()));
        attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
    }
    if let Some(prompt) = what.prompt {
        attributes.push(KeyValue::new(
            "gen_ai.prompt.name",
            cut(prompt).into_owned(),
        ));
    }
    if let Some(uri) = what.uri {
        attributes.push(KeyValue::new("mcp.resource.uri", cut(uri).into_owned()));
    }
    if let Some(version) = context.protocol_version() {
        let version = cut(version.as_str()).into_owned();
        attributes.push(KeyValue::new("mcp.protocol.version", version));
    }
    let session = parts.and_then(|parts| parts.headers.get("mcp-session-id"));
    if let Some(session) = session.and_then(|id| id.to_str().ok()) {
        attributes.push(KeyValue::new("mcp.session.id", cut(session).into_owned()));
    }
    let links = parts
        .and_then(|parts| parts.extensions.get::<HttpSpan>())
        .map(|http| vec![Link::with_context(http.0.clone())])
        .unwrap_or_default();
    let tracer = telemetry::tracer();
    let span = tracer
        .span_builder(name)
        .with_kind(SpanKind::Server)
        .with_attributes(attributes)
        .with_links(links)
        .start_with_context(&tracer, &parent);
    parent.with_span(span)
}

/// The methods a custom request may name that a span and a metric name as they are: the
/// protocol's own (reaching here with parameters that do not fit) and the 2025-11-25 task
/// methods the shim renames. Any other is `_OTHER`.
fn known_method(method: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "initialize",
        "ping",
        "server/discover",
        "prompts/get",
        "prompts/list",
        "resources/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "resources/templates/list",
        "tools/call",
        "tools/list",
        "completion/complete",
        "logging/setLevel",
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "tasks/update",
        "subscriptions/listen",
    ];
    KNOWN
        .iter()
        .find(|known| **known == method)
        .copied()
        .unwrap_or("_OTHER")
}

/// What a custom request asks: a 2025-11-25 task request by the method it was renamed from.
fn custom_what<'a>(request: &'a CustomRequest, context: &RequestContext<RoleServer>) -> What<'a> {
    let renamed = request
        .method
        .strip_prefix(shim::PREFIX)
        .filter(|_| shim::renamed_here(&context.extensions));
    let method = known_method(renamed.unwrap_or(&request.method));
    let params = request.params.as_ref().and_then(|p| p.as_object());
    let tool = params
        .filter(|_| method == "tools/call")
        .and_then(|p| p.get("name")?.as_str());
    What {
        tool,
        meta: params.and_then(|p| p.get("_meta")?.as_object()),
        ..What::method(method)
    }
}

impl ServerHandler for Observed {
    fn get_info(&self) -> ServerConfig {
        ServerHandler::get_info(&self.0)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        ServerHandler::supported_protocol_versions(&self.0)
    }

    fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<InitializeResult, McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &What::method("initialize"));
        observe(
            begun,
            ServerHandler::initialize(&self.0, request, context),
            never,
        )
    }

    fn ping(
        &self,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<(), McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &What::method("ping"));
        observe(begun, ServerHandler::ping(&self.0, context), never)
    }

    fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<DiscoverResult, McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &What::method("server/discover"));
        observe(begun, ServerHandler::discover(&self.0, context), never)
    }

    #[allow(deprecated)] // the 2025-11-25 method, which rmcp keeps for that era
    fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<(), McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &What::method("logging/setLevel"));
        observe(
            begun,
            ServerHandler::set_level(&self.0, request, context),
            never,
        )
    }

    fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &What::method("tools/list"));
        observe(
            begun,
            ServerHandler::list_tools(&self.0, request, context),
            never,
        )
    }

    fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListPromptsResult, McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &What::method("prompts/list"));
        observe(
            begun,
            ServerHandler::list_prompts(&self.0, request, context),
            never,
        )
    }

    fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<GetPromptResponse, McpError>> + MaybeSendFuture + '_ {
        let what = What {
            prompt: Some(&request.name),
            ..What::method("prompts/get")
        };
        let begun = self.begin(&context, &what);
        observe(
            begun,
            ServerHandler::get_prompt(&self.0, request, context),
            never,
        )
    }

    fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CompleteResult, McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &What::method("completion/complete"));
        observe(
            begun,
            ServerHandler::complete(&self.0, request, context),
            never,
        )
    }

    fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListResourcesResult, McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &What::method("resources/list"));
        observe(
            begun,
            ServerHandler::list_resources(&self.0, request, context),
            never,
        )
    }

    fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListResourceTemplatesResult, McpError>> + MaybeSendFuture + '_
    {
        let begun = self.begin(&context, &What::method("resources/templates/list"));
        observe(
            begun,
            ServerHandler::list_resource_templates(&self.0, request, context),
            never,
        )
    }

    #[allow(deprecated)] // the 2025-11-25 method, which rmcp keeps for that era
    fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<(), McpError>> + MaybeSendFuture + '_ {
        let what = What {
            uri: Some(&request.uri),
            ..What::method("resources/subscribe")
        };
        let begun = self.begin(&context, &what);
        observe(
            begun,
            ServerHandler::subscribe(&self.0, request, context),
            never,
        )
    }

    #[allow(deprecated)]
    fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<(), McpError>> + MaybeSendFuture + '_ {
        let what = What {
            uri: Some(&request.uri),
            ..What::method("resources/unsubscribe")
        };
        let begun = self.begin(&context, &what);
        observe(
            begun,
            ServerHandler::unsubscribe(&self.0, request, context),
            never,
        )
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        ServerHandler::accepted_subscription_filter(&self.0, requested)
    }

    fn listen(
        &self,
        context: SubscriptionContext,
    ) -> impl Future<Output = Result<(), McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(
            context.request_context(),
            &What::method("subscriptions/listen"),
        );
        observe(begun, ServerHandler::listen(&self.0, context), never)
    }

    fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ReadResourceResponse, McpError>> + MaybeSendFuture + '_ {
        let what = What {
            uri: Some(&request.uri),
            ..What::method("resources/read")
        };
        let begun = self.begin(&context, &what);
        observe(
            begun,
            ServerHandler::read_resource(&self.0, request, context),
            never,
        )
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, McpError>> + MaybeSendFuture + '_ {
        let what = What {
            tool: Some(&request.name),
            ..What::method("tools/call")
        };
        let begun = self.begin(&context, &what);
        observe(
            begun,
            ServerHandler::call_tool(&self.0, request, context),
            tool_error,
        )
    }

    fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<GetTaskResult, McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &What::method("tasks/get"));
        observe(
            begun,
            ServerHandler::get_task(&self.0, request, context),
            never,
        )
    }

    fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<(), McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &What::method("tasks/update"));
        observe(
            begun,
            ServerHandler::update_task(&self.0, request, context),
            never,
        )
    }

    fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<(), McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &What::method("tasks/cancel"));
        observe(
            begun,
            ServerHandler::cancel_task(&self.0, request, context),
            never,
        )
    }

    fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CustomResult, McpError>> + MaybeSendFuture + '_ {
        let begun = self.begin(&context, &custom_what(&request, &context));
        observe(
            begun,
            ServerHandler::on_custom_request(&self.0, request, context),
            never,
        )
    }

    fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        ServerHandler::on_cancelled(&self.0, notification, context)
    }

    fn on_progress(
        &self,
        notification: ProgressNotificationParam,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        ServerHandler::on_progress(&self.0, notification, context)
    }

    fn on_initialized(
        &self,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        ServerHandler::on_initialized(&self.0, context)
    }

    fn on_roots_list_changed(
        &self,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        ServerHandler::on_roots_list_changed(&self.0, context)
    }

    fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        ServerHandler::on_custom_notification(&self.0, notification, context)
    }
}
