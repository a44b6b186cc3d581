//! The requests clients send over and over (`tools/call` and the task methods), parsed in
//! one pass straight into rmcp's types.
//!
//! rmcp's general parse tries the variants of `ClientRequest` in turn, building an error
//! for each that does not fit, and its request types flatten their parameters, which
//! makes serde buffer the whole message once more before it reads it: together that was
//! a third of a small call. Here a plain frame takes the method and leaves the parameters
//! unparsed, and the parameters are then read as the one type the method names.
//!
//! Invariant: this path takes only what the general path takes, and gives the same
//! message for it; anything else (a notification, a response, a misfit, an unknown key
//! in the frame or in the parameters) returns `None` and goes the general way, which
//! parses and reports it exactly as before. A key rmcp ignores is still read whole by the
//! general path, which refuses what no JSON value holds (a number beyond `f64`, say):
//! so no key is skipped here unread.

use std::borrow::Cow;
use std::fmt;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelTaskParams, CancelTaskRequest, ClientRequest,
    GetTaskParams, GetTaskRequest, InputResponses, JsonObject, JsonRpcMessage, JsonRpcRequest,
    JsonRpcVersion2_0, MetaObject, Request, RequestId, RequestMetaObject, UpdateTaskParams,
    UpdateTaskRequest,
};
use rmcp::service::RxJsonRpcMessage;
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A request's frame, its parameters left as text.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Frame<'a> {
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: &'a RawValue,
}

/// `tools/call`'s parameters. rmcp ignores a 2025-11-25 `task` (the 2025-11-25 layer reads
/// it from the text), so it is read here and dropped; any other key rmcp does not know
/// is left to the general path.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CallParams {
    name: String,
    arguments: Option<JsonObject>,
    input_responses: Option<InputResponses>,
    request_state: Option<String>,
    #[serde(rename = "_meta")]
    meta: Option<JsonObject>,
    #[serde(rename = "task")]
    _task: Option<Whole>,
}

/// A JSON value read whole, as the general path reads every value (each number converted,
/// each string decoded), and kept nowhere.
struct Whole;

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Whole, D::Error> {
        deserializer.deserialize_any(Whole)
    }
}

impl<'de> Visitor<'de> for Whole {
    type Value = Whole;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Whole, E> {
        Ok(Whole)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Whole, E> {
        Ok(Whole)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Whole, E> {
        Ok(Whole)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Whole, E> {
        Ok(Whole)
    }

    fn visit_str<E>(self, _: &str) -> Result<Whole, E> {
        Ok(Whole)
    }

    fn visit_unit<E>(self) -> Result<Whole, E> {
        Ok(Whole)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Whole, A::Error> {
        while items.next_element::<Whole>()?.is_some() {}
        Ok(Whole)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Whole, A::Error> {
        while entries.next_key::<Whole>()?.is_some() {
            entries.next_value::<Whole>()?;
        }
        Ok(Whole)
    }
}

/// The parameters of `tasks/get` and `tasks/cancel`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskParams {
    task_id: String,
    #[serde(rename = "_meta")]
    meta: Option<JsonObject>,
}

/// `tasks/update`'s parameters.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UpdateParams {
    task_id: String,
    input_responses: InputResponses,
    #[serde(rename = "_meta")]
    meta: Option<JsonObject>,
}

/// The request of a frequent method, or `None` for the general path to parse.
pub(crate) fn frequent_request(text: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    let frame: Frame<'_> = serde_json::from_slice(text).ok()?;
    let params = frame.params.get();
    let request = match frame.method.as_ref() {
        "tools/call" => ClientRequest::CallToolRequest(call_tool(params)?),
        "tasks/get" => {
            let p: TaskParams = serde_json::from_str(params).ok()?;
            let request: GetTaskRequest = with_meta(GetTaskParams::new(p.task_id), p.meta);
            ClientRequest::GetTaskRequest(request)
        }
        "tasks/cancel" => {
            let p: TaskParams = serde_json::from_str(params).ok()?;
            let request: CancelTaskRequest = with_meta(CancelTaskParams::new(p.task_id), p.meta);
            ClientRequest::CancelTaskRequest(request)
        }
        "tasks/update" => {
            let p: UpdateParams = serde_json::from_str(params).ok()?;
            let params = UpdateTaskParams::new(p.task_id, p.input_responses);
            let request: UpdateTaskRequest = with_meta(params, p.meta);
            ClientRequest::UpdateTaskRequest(request)
        }
        _ => return None,
    };
    Some(JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc: frame.jsonrpc,
        id: frame.id,
        request,
    }))
}

fn call_tool(params: &str) -> Option<CallToolRequest> {
    let p: CallParams = serde_json::from_str(params).ok()?;
    let mut call = CallToolRequestParams::new(p.name);
    if let Some(arguments) = p.arguments {
        call = call.with_arguments(arguments);
    }
    if let Some(responses) = p.input_responses {
        call = call.with_input_responses(responses);
    }
    if let Some(state) = p.request_state {
        call = call.with_request_state(state);
    }
    Some(with_meta(call, p.meta))
}

/// A request with these parameters, its `_meta` kept where rmcp keeps it: in the
/// request's extensions, not in the parameters.
fn with_meta<M: Default, P>(params: P, meta: Option<JsonObject>) -> Request<M, P> {
    let mut request = Request::new(params);
    if let Some(meta) = meta {
        request
            .extensions
            .insert(RequestMetaObject(MetaObject(meta)));
    }
    request
}

/// A request parsed as one type of client request, as the message rmcp handles.
pub(crate) fn as_message<T>(
    request: JsonRpcRequest<T>,
    variant: fn(T) -> ClientRequest,
) -> RxJsonRpcMessage<RoleServer> {
    JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc: request.jsonrpc,
        id: request.id,
        request: variant(request.request),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::stdio::screen::{Screened, screen};

    #[test]
    fn a_frequent_request_parses_as_the_general_path_parses_it() {
        let meta =
            r#""_meta":{"progressToken":3,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#;
        let lines = [
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"add_task","arguments":{{"title":"t"}},{meta}}}}}"#),
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","task":{"ttl":5}}}"#.to_owned(),
            format!(r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{{"taskId":"t-1",{meta}}}}}"#),
            r#"{"jsonrpc":"2.0","id":3,"method":"tasks/update","params":{"taskId":"t","inputResponses":{"k":{"action":"accept","content":{}}}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":4,"method":"tasks/cancel","params":{"taskId":"t"}}"#.to_owned(),
            format!(r#"{{"params":{{{meta},"taskId":"t"}},"method":"tasks/cancel","id":"c","jsonrpc":"2.0"}}"#),
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"w","arguments":null,"requestState":"s","inputResponses":{"q":{"action":"decline"}}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"w","_meta":null,"task":{"ttl":[1e3,"\u00e9",null,true]}}}"#.to_owned(),
        ];
        for line in &lines {
            let fast = frequent_request(line.as_bytes()).expect(line);
            let general: RxJsonRpcMessage<RoleServer> = serde_json::from_str(line).unwrap();
            assert_eq!(
                serde_json::to_value(&fast).unwrap(),
                serde_json::to_value(&general).unwrap(),
                "{line}"
            );
            assert_eq!(format!("{fast:?}"), format!("{general:?}"), "{line}");
        }
    }

    #[test]
    fn a_request_the_fast_path_cannot_parse_is_left_to_the_general_path() {
        let lines = [
            // Arguments that are no object: the general path answers -32602.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
            // No id: a notification, not a request.
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
            // A response that names a method.
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            // Parameters that are no object, or missing.
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":["t"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tasks/get","params":{"taskId":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"\ud800"}}"#,
            // A key rmcp ignores, but reads whole: this number fits no f64.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","extra":{"a":1e400}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t","extra":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{"ttl":1e400}}}"#,
        ];
        for line in lines {
            assert!(frequent_request(line.as_bytes()).is_none(), "{line}");
        }
        let Screened::Reply(reply) = screen(lines[0].as_bytes()) else {
            panic!("array arguments must get an error reply");
        };
        assert_eq!(reply["error"]["code"], -32602);
    }
}
