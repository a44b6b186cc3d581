//! `ServerHandler`: discovery and dispatch of tool calls.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CancelledNotificationParam,
    CustomNotification, CustomRequest, CustomResult, GetTaskParams, GetTaskResult, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::caller::Caller;
use super::run_tools::{self, GET_RUN, LIST_RUNS};
use super::tasks::{Era, questions};
use super::workflow_tools::{self, LIST_WORKFLOWS, RUN_WORKFLOW};
use super::{Server, envelope, results, wire};
use crate::engine::definition::{ResultForm, TaskSupport};
use crate::todos::{Effects, Tools};

const INSTRUCTIONS: &str = "A task manager and workflow engine. add_task creates todos; \
list_tasks and search_tasks read them; complete_task marks one done; delete_task removes \
one permanently and needs the user's explicit consent (confirm: true). list_workflows shows \
the multi-step workflows and run_workflow runs one. Every result is {ok, data} or \
{ok: false, error: {code, message}}.";

struct Published<'a> {
    name: &'a str,
    title: &'a str,
    description: &'a str,
    input_schema: Value,
    /// `None` for a tool that answers in plain text.
    output_schema: Option<Value>,
    effects: Effects,
    /// Whether a call may run as a task; `None` where tasks are not served.
    tasks: Option<TaskSupport>,
}

/// A workflow tool's input schema, with the idempotency key beside its inputs. The name
/// is the key's on every workflow tool, whatever inputs a workflow declares.
fn with_idempotency_key(mut schema: Value) -> Value {
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.insert(
            super::idempotency::IDEMPOTENCY_KEY.to_owned(),
            super::idempotency::key_schema(),
        );
    }
    schema
}

/// Turns a definition into the protocol's, schemas and annotations included.
fn published_tool(p: Published<'_>) -> Tool {
    let mut tool = json!({
        "name": p.name,
        "title": p.title,
        "description": p.description,
        "inputSchema": p.input_schema,
        "annotations": {
            "title": p.title,
            "readOnlyHint": p.effects.read_only,
            "destructiveHint": p.effects.destructive,
            "idempotentHint": p.effects.idempotent,
            "openWorldHint": false
        }
    });
    if let Some(schema) = p.output_schema {
        tool["outputSchema"] = schema;
    }
    if let Some(support) = p.tasks.filter(|s| *s != TaskSupport::Forbidden) {
        // The wire layer turns this into `execution.taskSupport` for 2025-11-25 clients.
        tool["_meta"] = json!({ wire::v2025_11_25::TASK_SUPPORT_META: support.as_str() });
    }
    serde_json::from_value(tool).expect("our tool definitions match the protocol's shape")
}

/// How a published tool is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    /// One of the task-manager tools, a one-node run.
    Todo,
    ListWorkflows,
    /// `run_workflow`, or a workflow published as a tool of its own.
    RunWorkflow,
    /// `list_runs` and `get_run`, with a task registry only.
    ListRuns,
    GetRun,
}

impl Server {
    /// Every published tool with its route: what `tools/list` lists. `route` answers the
    /// same for one name without building schemas; a test holds the two together.
    fn published(&self) -> Vec<(Route, Tool)> {
        let tasks = self.registry.is_some();
        let support = |support| tasks.then_some(support);
        let mut tools: Vec<(Route, Tool)> = Tools::specs()
            .iter()
            .map(|spec| {
                let tool = published_tool(Published {
                    name: spec.name,
                    title: spec.title,
                    description: spec.description,
                    input_schema: spec.input_schema.clone(),
                    output_schema: Some(envelope::schema(&spec.data_schema, envelope::TOOL_CODES)),
                    effects: spec.effects,
                    tasks: support(TaskSupport::Optional),
                });
                (Route::Todo, tool)
            })
            .collect();
        for (name, title, description, input_schema, effects) in workflow_tools::fixed_tools() {
            let route = match name {
                LIST_WORKFLOWS => Route::ListWorkflows,
                _ => Route::RunWorkflow,
            };
            let input_schema = match route {
                Route::RunWorkflow => with_idempotency_key(input_schema),
                _ => input_schema,
            };
            let tool = published_tool(Published {
                name,
                title,
                description,
                input_schema,
                output_schema: Some(match route {
                    Route::RunWorkflow => envelope::schema(&json!({}), envelope::RUN_CODES),
                    _ => envelope::schema(&json!({ "type": "array" }), envelope::TOOL_CODES),
                }),
                effects,
                tasks: support(match route {
                    Route::RunWorkflow => TaskSupport::Optional,
                    _ => TaskSupport::Forbidden,
                }),
            });
            tools.push((route, tool));
        }
        let run_tools = run_tools::definitions();
        for (name, title, description, input_schema, effects) in
            run_tools.into_iter().filter(|_| tasks)
        {
            let route = match name {
                LIST_RUNS => Route::ListRuns,
                _ => Route::GetRun,
            };
            let tool = published_tool(Published {
                name,
                title,
                description,
                input_schema,
                output_schema: Some(envelope::schema(&json!({}), envelope::TOOL_CODES)),
                effects,
                tasks: support(TaskSupport::Forbidden),
            });
            tools.push((route, tool));
        }
        for entry in self.exposed() {
            let description = format!(
                "Runs the workflow `{}`: {}",
                entry.def.name, entry.def.description
            );
            let tool = published_tool(Published {
                name: &entry.def.name,
                title: &entry.def.name,
                description: &description,
                input_schema: with_idempotency_key(workflow_tools::inputs_schema(&entry.def)),
                output_schema: match entry.def.result {
                    ResultForm::Envelope => Some(envelope::schema(&json!({}), envelope::RUN_CODES)),
                    ResultForm::Text => None,
                },
                effects: workflow_tools::RUN_EFFECTS,
                tasks: support(entry.def.task_support),
            });
            tools.push((Route::RunWorkflow, tool));
        }
        tools
    }

    /// How the tool `name` is served, without building any tool's schemas.
    pub(super) fn route(&self, name: &str) -> Option<Route> {
        if Tools::exists(name) {
            return Some(Route::Todo);
        }
        match name {
            LIST_WORKFLOWS => Some(Route::ListWorkflows),
            RUN_WORKFLOW => Some(Route::RunWorkflow),
            LIST_RUNS if self.registry.is_some() => Some(Route::ListRuns),
            GET_RUN if self.registry.is_some() => Some(Route::GetRun),
            _ => self
                .exposed()
                .any(|entry| entry.def.name == name)
                .then_some(Route::RunWorkflow),
        }
    }

    /// Whether a call of tool `name` may, must or must not run as a task.
    pub(super) fn task_support(&self, name: &str) -> TaskSupport {
        match self.route(name) {
            Some(Route::Todo) => TaskSupport::Optional,
            Some(Route::RunWorkflow) => self
                .exposed()
                .find(|entry| entry.def.name == name)
                .map_or(TaskSupport::Optional, |entry| entry.def.task_support),
            _ => TaskSupport::Forbidden,
        }
    }

    /// Whether workflow tool `name` asks its first questions before it becomes a task.
    pub(super) fn asks_before_task(&self, name: &str) -> bool {
        self.exposed()
            .any(|entry| entry.def.name == name && entry.def.ask_before_task)
    }

    /// What tool `name` answers: the envelope, or for a workflow that says so, plain text.
    pub(super) fn result_form(&self, name: &str) -> ResultForm {
        self.exposed()
            .find(|entry| entry.def.name == name)
            .map_or(ResultForm::Envelope, |entry| entry.def.result)
    }

    /// Workflows published as tools of their own (never shadowing a fixed tool).
    fn exposed(&self) -> impl Iterator<Item = &crate::engine::catalog::Entry> {
        self.catalog.entries().filter(|entry| {
            let name = entry.def.name.as_str();
            entry.def.expose_as_tool
                && !Tools::exists(name)
                && ![LIST_WORKFLOWS, RUN_WORKFLOW, LIST_RUNS, GET_RUN].contains(&name)
        })
    }
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
        let caller = Caller::of(&context);
        // The extension is a 2026-07-28 one: a request of that protocol that declares it in
        // its `_meta`. A 2025-11-25 session that declared it at `initialize` speaks the
        // 2025-11-25 task protocol (`params.task`), which the wire layer routes.
        let route = self.route(name);
        let support = self.task_support(name);
        if route == Some(Route::RunWorkflow)
            && self.registry.is_some()
            && super::is_stateless(&context)
        {
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
                    if self.asks_before_task(name) =>
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
            Some(Route::Todo) => self.todo_call(name, args, caller.owner().clone()).await,
            Some(Route::ListWorkflows) => results::reply(workflow_tools::list_workflows(
                &self.catalog,
                self.engine.tools(),
                &args,
                caller.principal(),
            )),
            Some(Route::RunWorkflow)
                if support == TaskSupport::Required && self.registry.is_some() =>
            {
                return Err(results::task_required_2025(name));
            }
            Some(Route::RunWorkflow) => self.run_workflow(name, args, &context, &caller).await,
            Some(Route::ListRuns) => {
                let registry = self.registry()?;
                let tools = self.engine.tools();
                results::reply(run_tools::list_runs(registry, tools, &args, &caller))
            }
            Some(Route::GetRun) => {
                let registry = self.registry()?;
                let tools = self.engine.tools();
                results::reply(run_tools::get_run(registry, tools, &args, &caller))
            }
        };
        Ok(reply.into())
    }
}

impl Server {
    /// Whether `name` is a task-manager tool.
    pub(super) fn is_todo(&self, name: &str) -> bool {
        self.route(name) == Some(Route::Todo)
    }

    /// A task-manager tool's call, a one-node run: the whole answer to a `tools/call` of
    /// it that asks for no task, whoever routed it here (this handler, or the wire's
    /// direct lane).
    pub(super) async fn todo_call(
        &self,
        name: &str,
        args: rmcp::model::JsonObject,
        owner: crate::store::Owner,
    ) -> rmcp::model::CallToolResult {
        let result = self.engine.call_tool_for(name, args, owner).await;
        results::tool_result(result.expect("the engine runs every registered tool"))
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities = match self.registry {
            Some(_) => ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
            None => ServerCapabilities::builder().enable_tools().build(),
        };
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
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.published().into_iter().map(|(_, tool)| tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
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
        self.get_extension_task(&request.task_id, can, &Caller::of(&context))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let (can, caller) = (questions::capabilities(&context), Caller::of(&context));
        self.update_extension_task(&request.task_id, &request.input_responses, can, &caller)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = Caller::of(&context);
        self.cancel_extension_task(&request.task_id, &caller).await
    }

    /// The 2025-11-25 task requests, renamed by the wire layer. Any other custom method,
    /// `tasks/result` and `tasks/list` of the SEP-2663 protocol included, is unknown.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        // A client that names an internal method itself gets "method not found": only the
        // wire layer's rename, which marks what it renames, reaches the 2025-11-25 handler.
        let v2025 = request
            .method
            .strip_prefix(wire::v2025_11_25::PREFIX)
            .filter(|_| wire::v2025_11_25::renamed_here(&context.extensions))
            .map(str::to_owned);
        match v2025 {
            // Boxed for the reason `call_tool` is: a blocking `tasks/result` waits on a run.
            Some(method) if self.registry.is_some() => {
                Box::pin(self.request_2025(&method, request, context))
                    .await
                    .map(CustomResult)
            }
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

    /// The stdio transport's cancel of a call (`wire/mod.rs`), obeyed only with the mark
    /// that shows the transport made it.
    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleServer>,
    ) {
        let internal = notification.method.strip_prefix(wire::v2025_11_25::PREFIX);
        if internal != Some(wire::v2025_11_25::CANCELLED)
            || !wire::v2025_11_25::renamed_here(&context.extensions)
        {
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
        if let Some(cancel) = self.lock_runs().get(&id.to_string()) {
            cancel.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::engine::catalog::Catalog;
    use crate::store::Store;

    #[test]
    fn every_listed_tool_is_dispatched_by_the_route_it_is_listed_with() {
        let tools = Tools::new(Store::open_in_memory().unwrap());
        let (catalog, _) = Catalog::load(None);
        let server = Server::new(Engine::new(tools, &std::env::temp_dir()), catalog);
        let published = server.published();
        // The five todo tools, the two workflow tools, and the workflows exposed as tools.
        assert_eq!(published.len(), 7 + server.exposed().count());
        for (route, tool) in &published {
            assert_eq!(server.route(&tool.name), Some(*route), "{}", tool.name);
        }
        assert_eq!(server.route("no_such_tool"), None);
    }
}
