//! `ServerHandler`: discovery and dispatch of tool calls, prompts, resources and
//! completions.

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams,
    CancelledNotificationParam, CompleteRequestParams, CompleteResult, CustomNotification,
    CustomRequest, CustomResult, GetPromptRequestParams, GetPromptResponse, GetTaskParams,
    GetTaskResult, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::json;

use super::caller::caller_of;
use super::tasks::{Era, questions};
use super::{Server, is_stateless, prompts, resources, results, shim, subscriptions};
use crate::app::{CallerChannels, Route, ToolDef};
use crate::engine::definition::TaskSupport;

const INSTRUCTIONS: &str = "A task manager and workflow engine. add_task creates todos; \
list_tasks and search_tasks read them; complete_task marks one done; delete_task removes \
one permanently and needs the user's explicit consent (confirm: true). list_workflows shows \
the multi-step workflows and run_workflow runs one. Every result is {ok, data} or \
{ok: false, error: {code, message}}.";

/// How long a 2026-07-28 client may keep the lists that are the same for every caller
/// and do not change while the server runs (tools, prompts, resource templates): a
/// minute, after which a restart with other workflows shows.
const STABLE_MS: u64 = 60_000;

/// A published tool as the protocol lists it, schemas and annotations included.
fn published_tool(def: &ToolDef) -> Tool {
    let mut tool = json!({
        "name": def.name,
        "title": def.title,
        "description": def.description,
        "inputSchema": def.input_schema,
        "annotations": {
            "title": def.title,
            "readOnlyHint": def.effects.read_only,
            "destructiveHint": def.effects.destructive,
            "idempotentHint": def.effects.idempotent,
            "openWorldHint": false
        }
    });
    if let Some(schema) = &def.output_schema {
        tool["outputSchema"] = schema.clone();
    }
    if def.tasks != TaskSupport::Forbidden {
        // The 2025-11-25 shim turns this into `execution.taskSupport` for 2025-11-25 clients.
        tool["_meta"] = json!({ shim::TASK_SUPPORT_META: def.tasks.as_str() });
    }
    serde_json::from_value(tool).expect("our tool definitions match the protocol's shape")
}

impl Server {
    /// A `tools/call`, by the route of its tool and the protocol of its request.
    async fn dispatch_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let CallToolRequestParams {
            name,
            arguments,
            input_responses,
            request_state,
            ..
        } = request;
        let args = arguments.unwrap_or_default();
        let name = name.as_ref();
        let caller = caller_of(&context);
        // The extension is a 2026-07-28 one: a request of that protocol that declares it in
        // its `_meta`. A 2025-11-25 session that declared it at `initialize` speaks the
        // 2025-11-25 task protocol (`params.task`), which the 2025-11-25 shim routes.
        let tools = self.app.published_tools();
        let route = tools.route(name);
        let support = tools.task_support(name);
        if route == Some(Route::RunWorkflow) && super::is_stateless(&context) {
            let declared_tasks = context
                .client_capabilities()
                .is_some_and(|caps| caps.supports_tasks());
            // Under the extension the server decides: a workflow runs as a task unless it
            // says it never does, and a quick todo call answers at once.
            let retry = request_state.map(|state| (state, input_responses));
            let era = match (declared_tasks, support) {
                // A workflow that asks first answers its first questions in rounds of the
                // call, and then becomes a task.
                (true, TaskSupport::Optional | TaskSupport::Required)
                    if tools.get(name).is_some_and(|tool| tool.asks_before_task) =>
                {
                    Era::V2026_07_28
                }
                (true, TaskSupport::Optional | TaskSupport::Required) => {
                    return self.create_extension_task(name, args, &caller);
                }
                (false, TaskSupport::Required) => return Err(results::task_required(name)),
                // A 2026-07-28 call without tasks has no server requests: its questions
                // go back as rounds of `input_required` results.
                _ => Era::Rounds,
            };
            return self
                .call_in_rounds(name, args, retry, &context, &caller, era)
                .await;
        }
        let reply = match route {
            None => return Err(results::unknown_tool(name)),
            Some(Route::RunWorkflow) if support == TaskSupport::Required => {
                return Err(results::task_required_2025(name));
            }
            Some(Route::RunWorkflow) => self.run_workflow(name, args, &context, &caller).await,
            Some(Route::Todo) => self.todo_call(name, args, &caller).await,
            Some(_) => {
                let answer = self
                    .app
                    .call(name, args, &caller, CallerChannels::default())
                    .await;
                results::reply(answer.expect("a routed tool"))
            }
        };
        Ok(reply.into())
    }

    /// A todo tool's call, a one-node run: the whole answer to a `tools/call` of
    /// it that asks for no task.
    async fn todo_call(
        &self,
        name: &str,
        args: rmcp::model::JsonObject,
        caller: &crate::app::Caller,
    ) -> rmcp::model::CallToolResult {
        results::tool_result(self.app.call_todo(name, args, caller).await)
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_completions()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                env!("CARGO_PKG_NAME"),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self
            .app
            .published_tools()
            .all()
            .iter()
            .map(published_tool)
            .collect();
        let listed = ListToolsResult::with_all_items(tools);
        Ok(match is_stateless(&context) {
            true => listed
                .with_ttl_ms(STABLE_MS)
                .with_cache_scope(CacheScope::Public),
            false => listed,
        })
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let listed = ListPromptsResult::with_all_items(prompts::listed(&self.app));
        Ok(match is_stateless(&context) {
            true => listed
                .with_ttl_ms(STABLE_MS)
                .with_cache_scope(CacheScope::Public),
            false => listed,
        })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        prompts::given(&self.app, &request).map(GetPromptResponse::from)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        Ok(prompts::completed(
            &self.app,
            &request,
            &caller_of(&context),
        ))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let listed = resources::listed(&self.app, request.as_ref(), &caller_of(&context))?;
        // The files of the caller's own runs, which change with every run.
        Ok(match is_stateless(&context) {
            true => listed.with_ttl_ms(0).with_cache_scope(CacheScope::Private),
            false => listed,
        })
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(match is_stateless(&context) {
            true => resources::templates()
                .with_ttl_ms(STABLE_MS)
                .with_cache_scope(CacheScope::Public),
            false => resources::templates(),
        })
    }

    #[allow(deprecated)] // the 2025-11-25 method, which rmcp keeps for that era
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = caller_of(&context);
        let caps = &self.subscriptions;
        (self.watches).subscribe(&self.app, request.uri, caller, context.peer, caps)
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.watches.unsubscribe(&request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        subscriptions::accepted(requested, self.subscriptions.per_session)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let caller = caller_of(context.request_context());
        subscriptions::listen(self, &caller, &context).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        resources::read(&self.app, &request, &caller_of(&context)).map(ReadResourceResponse::from)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // Boxed: rmcp spawns a task per request and moves its future in and out of the
        // task's cell. Unboxed, that future would be as large as the largest state of a
        // workflow run, and kilobytes would be copied for every request, however small.
        Box::pin(self.dispatch_call(request, context)).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let can = questions::capabilities(&context);
        self.get_extension_task(&request.task_id, can, &caller_of(&context))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let (can, caller) = (questions::capabilities(&context), caller_of(&context));
        self.update_extension_task(&request.task_id, &request.input_responses, can, &caller)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = caller_of(&context);
        self.cancel_extension_task(&request.task_id, &caller).await
    }

    /// The 2025-11-25 task requests, renamed by the 2025-11-25 shim. Any other custom method,
    /// `tasks/result` and `tasks/list` of the SEP-2663 protocol included, is unknown.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        // A client that names an internal method itself gets "method not found": only the
        // 2025-11-25 shim.s rename, which marks what it renames, reaches the 2025-11-25 handler.
        let v2025 = request
            .method
            .strip_prefix(shim::PREFIX)
            .filter(|_| shim::renamed_here(&context.extensions))
            .map(str::to_owned);
        match v2025 {
            // Boxed for the reason `call_tool` is: a blocking `tasks/result` waits on a run.
            Some(method) => Box::pin(self.request_2025(&method, request, context))
                .await
                .map(CustomResult),
            // A method of the protocol's own reaches here only when its parameters do not
            // fit its type: the caller's parameters are wrong, not the method.
            None if super::is_standard_method(&request.method) => Err(McpError::invalid_params(
                format!("invalid params for `{}`", request.method),
                None,
            )),
            _ => Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: {}", request.method),
                None,
            )),
        }
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        if let Some(request) = notification.request_id {
            self.cancel_run_of(&request);
        }
    }

    /// The stdio transport's cancel of a call (`transport/stdio/mod.rs`), obeyed only with the mark
    /// that shows the transport made it.
    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleServer>,
    ) {
        let internal = notification.method.strip_prefix(shim::PREFIX);
        if internal != Some(shim::CANCELLED) || !shim::renamed_here(&context.extensions) {
            return;
        }
        let cancelled = notification
            .params
            .and_then(|params| serde_json::from_value::<CancelledNotificationParam>(params).ok());
        if let Some(request) = cancelled.and_then(|c| c.request_id) {
            self.cancel_run_of(&request);
        }
    }
}

impl Server {
    /// Stops the run a `tools/call` waits on, if request `id` is one.
    fn cancel_run_of(&self, id: &rmcp::model::RequestId) {
        if let Some(cancel) = self.runs.lock().get(&id.to_string()) {
            cancel.cancel();
        }
    }
}
