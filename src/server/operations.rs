//! Which kinds of operation an MCP message is, for the scopes of an OAuth access token
//! (`auth/oauth`): reading, keeping todos, running workflows, or answering questions.
//! The HTTP gate asks before the message reaches rmcp, and refuses with `403` a token
//! whose scopes do not cover every kind the message needs.
//!
//! Invariant: fail closed. A method not named here, a tool not published, a message that
//! does not parse, an empty batch: each needs every kind. A batch needs what each of its
//! members needs.

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::app::{App, Route};
use crate::auth::oauth::{Kind, Needs};

/// The methods that only read (or open, or follow), whatever their parameters.
const READS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "notifications/initialized",
    "notifications/roots/list_changed",
    // A cancel of a call reaches only the caller's own calls in its own session, each of
    // which passed its own check; it stops, and starts nothing.
    "notifications/cancelled",
];

/// The kinds of operation of the application's tools.
#[derive(Clone)]
pub(crate) struct Operations {
    app: App,
}

/// One JSON-RPC message, as far as its kind of operation goes.
#[derive(Deserialize)]
struct Message {
    method: Option<String>,
    params: Option<Params>,
    result: Option<IgnoredAny>,
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Params {
    name: Option<IgnoredOrName>,
    #[serde(rename = "inputResponses")]
    input_responses: Option<IgnoredAny>,
    #[serde(rename = "requestState")]
    request_state: Option<IgnoredAny>,
}

/// A `name` parameter: a tool's name, or something else (a prompt's name is a string too;
/// only a `tools/call`'s is looked at).
#[derive(Deserialize)]
#[serde(untagged)]
enum IgnoredOrName {
    Name(String),
    Other(IgnoredAny),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Body {
    One(Message),
    Batch(Vec<Message>),
}

impl Operations {
    pub(crate) fn new(app: App) -> Operations {
        Operations { app }
    }

    /// The kinds of operation the JSON-RPC body `text` needs.
    pub(crate) fn needs(&self, text: &[u8]) -> Needs {
        match serde_json::from_slice::<Body>(text) {
            Ok(Body::One(message)) => self.message_needs(&message),
            Ok(Body::Batch(messages)) if !messages.is_empty() => {
                messages.iter().fold(Needs::default(), |needs, m| {
                    needs.union(self.message_needs(m))
                })
            }
            _ => Needs::ALL,
        }
    }

    fn message_needs(&self, message: &Message) -> Needs {
        let Some(method) = &message.method else {
            // A client's response to the server's request: an elicitation's or a
            // sampling's answer, which answers a run's question.
            return match message.result.is_some() || message.error.is_some() {
                true => Needs::of(Kind::Answer),
                false => Needs::ALL,
            };
        };
        match method.as_str() {
            method if READS.contains(&method) => Needs::of(Kind::Read),
            "tasks/cancel" => Needs::of(Kind::Run),
            // SEP-2663: a task's answers to its questions.
            "tasks/update" => Needs::of(Kind::Answer),
            "tools/call" => self.call_needs(message.params.as_ref()),
            _ => Needs::ALL,
        }
    }

    /// A `tools/call`: by its tool's route; one that carries answers (a 2026-07-28 retry
    /// with `inputResponses` or a `requestState`) needs the answering kind too.
    fn call_needs(&self, params: Option<&Params>) -> Needs {
        let Some(params) = params else {
            return Needs::ALL;
        };
        let Some(IgnoredOrName::Name(name)) = &params.name else {
            return Needs::ALL;
        };
        let tools = self.app.published_tools();
        let needs = match tools.route(name) {
            Some(Route::Todo) if tools.get(name).is_some_and(|t| t.effects.read_only) => {
                Needs::of(Kind::Read)
            }
            Some(Route::Todo) => Needs::of(Kind::Todos),
            Some(Route::RunWorkflow) => Needs::of(Kind::Run),
            Some(Route::ListWorkflows | Route::ListRuns | Route::GetRun) => Needs::of(Kind::Read),
            None => return Needs::ALL,
        };
        match params.input_responses.is_some() || params.request_state.is_some() {
            true => needs.with(Kind::Answer),
            false => needs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn needs(message: serde_json::Value) -> Vec<Kind> {
        let app = App::in_memory();
        let operations = Operations::new(app);
        operations
            .needs(message.to_string().as_bytes())
            .kinds()
            .collect()
    }

    fn call(name: &str) -> serde_json::Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": name, "arguments": {}}})
    }

    #[test]
    fn each_tool_needs_the_kind_of_what_it_does() {
        assert_eq!(needs(call("list_tasks")), [Kind::Read]);
        assert_eq!(needs(call("search_tasks")), [Kind::Read]);
        assert_eq!(needs(call("add_task")), [Kind::Todos]);
        assert_eq!(needs(call("complete_task")), [Kind::Todos]);
        assert_eq!(needs(call("delete_task")), [Kind::Todos]);
        assert_eq!(needs(call("run_workflow")), [Kind::Run]);
        assert_eq!(needs(call("list_runs")), [Kind::Read]);
        assert_eq!(needs(call("get_run")), [Kind::Read]);
        assert_eq!(needs(call("list_workflows")), [Kind::Read]);
        let retry = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "run_workflow", "arguments": {}, "inputResponses": {}, "requestState": "s"}});
        assert_eq!(needs(retry), [Kind::Run, Kind::Answer]);
    }

    #[test]
    fn methods_need_their_kind_and_anything_unknown_needs_every_kind() {
        let request = |method: &str| json!({"jsonrpc": "2.0", "id": 1, "method": method});
        assert_eq!(needs(request("initialize")), [Kind::Read]);
        assert_eq!(needs(request("tasks/get")), [Kind::Read]);
        assert_eq!(needs(request("tasks/cancel")), [Kind::Run]);
        assert_eq!(needs(request("tasks/update")), [Kind::Answer]);
        let answer = json!({"jsonrpc": "2.0", "id": 4, "result": {"action": "accept"}});
        assert_eq!(needs(answer), [Kind::Answer]);
        let every = Kind::ALL.to_vec();
        assert_eq!(
            needs(request("x-mcp-task-server/2025-11-25/tasks/cancel")),
            every
        );
        assert_eq!(needs(request("sampling/createMessage")), every);
        assert_eq!(needs(call("no_such_tool")), every);
        assert_eq!(
            needs(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"})),
            every
        );
        assert_eq!(needs(json!({"jsonrpc": "2.0", "id": 1})), every);
        assert_eq!(needs(json!([])), every);
        assert_eq!(needs(json!("text")), every);
    }

    #[test]
    fn a_batch_needs_what_each_member_needs() {
        let batch = json!([call("list_tasks"), call("add_task"),
                           {"jsonrpc": "2.0", "id": 9, "method": "tasks/update"}]);
        assert_eq!(needs(batch), [Kind::Read, Kind::Todos, Kind::Answer]);
    }
}
