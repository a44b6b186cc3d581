//! The 2025-11-25 task layer over HTTP: the rewrite core of `server/shim.rs`, applied to
//! request bodies and to the JSON or SSE responses that answer them; and the tasks a
//! 2026-07-28 `subscriptions/listen` follows (`server/listen_tasks.rs`), marked on its
//! request and added to its acknowledgement.
//!
//! Why here and not in the handler: rmcp's HTTP service parses a body into a typed
//! message before any hook runs, and the typed message has lost `params.task`. So a POST
//! is read whole (under the same cap rmcp applies), routed from its JSON, renamed where
//! the 2025-11-25 protocol needs it, and handed on as bytes.
//!
//! Which protocol a request speaks follows rmcp's own routing: a request in a session
//! (`Mcp-Session-Id`) or opening one (`initialize`) belongs to a session opened with
//! `initialize`, whose task protocol is 2025-11-25; any other request is a stateless
//! 2026-07-28 one.

use std::convert::Infallible;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::Value;

use super::{Body, plain_owned};
use crate::server::listen_tasks::{self, Asked};
use crate::server::shim::{self, Patch, Route};

/// The largest request body read: rmcp's own default, which it is also told.
pub(super) const MAX_BODY: usize = 4 * 1024 * 1024;

/// What the answer to a request needs on its way out.
pub(crate) struct Outbound {
    pub(crate) id: Value,
    pub(crate) awaited: Awaited,
    pub(crate) v2025: bool,
}

/// The message a request's stream carries that is patched.
pub(crate) enum Awaited {
    /// The request's result.
    Result(Patch),
    /// The acknowledgement of a listen, which gets the tasks it follows.
    Acknowledgement(Vec<String>),
}

/// A request as rmcp is handed it, and what its answer needs on its way out.
pub(super) type Rewritten = (Request<Full<Bytes>>, Option<Outbound>);

/// Reads a POST's body whole, up to [`MAX_BODY`]. `Err` is the reply to give instead (the
/// body is too long or cannot be read).
pub(super) async fn read(
    request: Request<Incoming>,
) -> Result<(http::request::Parts, Bytes), Response<Body>> {
    let (parts, body) = request.into_parts();
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => Ok((parts, collected.to_bytes())),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => {
            let message = format!("Payload Too Large: request body exceeds {MAX_BODY} bytes");
            Err(plain_owned(StatusCode::PAYLOAD_TOO_LARGE, message))
        }
        Err(error) => {
            let message = format!("the request body could not be read: {error}");
            Err(plain_owned(StatusCode::BAD_REQUEST, message))
        }
    }
}

/// Applies the 2025-11-25 layer to a POST's body (read by [`read`]), and marks the tasks
/// a listen follows, at most `max_listened`. `Err` is the reply to give instead.
pub(super) fn inbound(
    mut parts: http::request::Parts,
    body: Bytes,
    max_listened: usize,
) -> Result<Rewritten, Box<Response<Body>>> {
    // Most bodies (any `tools/call` of a todo tool) concern the layer not at all, and a
    // scan for the names it routes on spares them a second parse.
    let parsed = match may_route(&body) {
        true => serde_json::from_slice::<Value>(&body).ok(),
        false => None,
    };
    // Anything else, including what is not one JSON-RPC request, goes on for rmcp.
    let Some(mut raw) = parsed else {
        return Ok((Request::from_parts(parts, Full::new(body)), None));
    };
    let v2025 = parts.headers.contains_key("mcp-session-id") || raw["method"] == "initialize";
    match listen_tasks::asked(&raw, max_listened) {
        Asked::Nothing => {}
        Asked::Undeclared => {
            let reply = serde_json::to_vec(&listen_tasks::refusal(&raw["id"]))
                .expect("a JSON value serialises");
            return Err(Box::new(json_reply(reply)));
        }
        Asked::TooMuch(why) => {
            let reply = serde_json::to_vec(&listen_tasks::too_much(&raw["id"], &why))
                .expect("a JSON value serialises");
            return Err(Box::new(json_reply(reply)));
        }
        Asked::Tasks(tasks) => {
            parts
                .extensions
                .insert(listen_tasks::ListenTasks(tasks.clone()));
            let id = raw["id"].clone();
            let awaited = Awaited::Acknowledgement(tasks);
            let outbound = Outbound { id, awaited, v2025 };
            return Ok((Request::from_parts(parts, Full::new(body)), Some(outbound)));
        }
    }
    let (body, outbound) = match shim::route(&raw, v2025) {
        Route::Keep => (body, None),
        Route::Patch(patch) => {
            let id = raw["id"].clone();
            let awaited = Awaited::Result(patch);
            let outbound = Outbound { id, awaited, v2025 };
            (body, Some(outbound))
        }
        Route::Rename => {
            shim::rename_json(&mut raw);
            parts.extensions.insert(shim::Renamed);
            if parts.headers.contains_key("mcp-method")
                && let Some(method) = raw["method"].as_str()
                && let Ok(value) = HeaderValue::from_str(method)
            {
                parts.headers.insert("mcp-method", value);
            }
            let text = serde_json::to_vec(&raw).expect("a JSON value serialises");
            parts.headers.remove(header::CONTENT_LENGTH);
            (Bytes::from(text), None)
        }
    };
    Ok((Request::from_parts(parts, Full::new(body)), outbound))
}

/// Whether a body names anything the layer routes on: a method it patches or renames, a
/// `task` key, or tasks to follow.
fn may_route(body: &[u8]) -> bool {
    const NAMES: [&[u8]; 4] = [
        b"\"initialize\"",
        b"\"tools/list\"",
        b"\"task\"",
        b"\"tasks/",
    ];
    NAMES.iter().any(|name| find(body, name).is_some()) || listen_tasks::may_name_tasks(body)
}

/// The response with the answer to the request patched, whether it comes as one JSON
/// body or as an event on an SSE stream.
pub(super) fn outbound(response: Response<Body>, outbound: Outbound) -> Response<Body> {
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
    let (mut parts, body) = response.into_parts();
    if sse {
        let mut events = Events::new(outbound);
        let stream = body.into_data_stream().map(move |chunk| {
            let Ok(chunk) = chunk;
            Ok::<_, Infallible>(Frame::data(events.feed(chunk)))
        });
        return Response::from_parts(parts, BodyExt::boxed(StreamBody::new(stream)));
    }
    let json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
    if !json {
        return Response::from_parts(parts, body);
    }
    let body = async move {
        let Ok(collected) = body.collect().await;
        let text = collected.to_bytes();
        Ok::<_, Infallible>(Frame::data(patched(&text, &outbound).unwrap_or(text)))
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(
        parts,
        BodyExt::boxed(StreamBody::new(futures::stream::once(body))),
    )
}

/// The JSON text of a message patched, when it is the message awaited.
fn patched(text: &[u8], outbound: &Outbound) -> Option<Bytes> {
    let mut raw: Value = serde_json::from_slice(text).ok()?;
    match &outbound.awaited {
        Awaited::Result(patch) => {
            if raw["id"] != outbound.id || raw.get("result").is_none() {
                return None;
            }
            shim::patch_result(*patch, outbound.v2025, &mut raw["result"]);
        }
        Awaited::Acknowledgement(tasks) => {
            if !listen_tasks::acknowledge(&mut raw, &outbound.id, tasks) {
                return None;
            }
        }
    }
    Some(Bytes::from(serde_json::to_vec(&raw).ok()?))
}

/// An SSE stream read event by event until the awaited answer has passed; the rest
/// streams through untouched.
pub(crate) struct Events {
    awaited: Option<Outbound>,
    pending: BytesMut,
}

impl Events {
    pub(crate) fn new(outbound: Outbound) -> Events {
        Events {
            awaited: Some(outbound),
            pending: BytesMut::new(),
        }
    }

    /// The bytes to send for a chunk received: whole events, the awaited one patched.
    pub(crate) fn feed(&mut self, chunk: Bytes) -> Bytes {
        let Some(outbound) = &self.awaited else {
            return chunk;
        };
        self.pending.extend_from_slice(&chunk);
        let mut out = BytesMut::new();
        while let Some(end) = find(&self.pending, b"\n\n") {
            let event = self.pending.split_to(end + 2);
            match patched_event(&event, outbound) {
                Some(event) => {
                    out.extend_from_slice(&event);
                    out.extend_from_slice(&self.pending);
                    self.pending.clear();
                    self.awaited = None;
                    break;
                }
                None => out.extend_from_slice(&event),
            }
        }
        out.freeze()
    }
}

/// An event whose one `data:` line is the awaited answer, patched; its other fields
/// (`id:`, `event:`) as they were.
fn patched_event(event: &[u8], outbound: &Outbound) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(event).ok()?;
    let mut data = text.lines().filter(|line| line.starts_with("data:"));
    let line = data.next()?;
    if data.next().is_some() {
        return None;
    }
    let json = patched(line["data:".len()..].trim_start().as_bytes(), outbound)?;
    let json = std::str::from_utf8(&json).ok()?;
    Some(
        text.replacen(line, &format!("data: {json}"), 1)
            .into_bytes(),
    )
}

/// A JSON-RPC reply given in place of rmcp's, as rmcp gives one: 200, `application/json`.
fn json_reply(body: Vec<u8>) -> Response<Body> {
    super::reply_of(StatusCode::OK, "application/json", Bytes::from(body))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn awaiting(id: Value) -> Outbound {
        Outbound {
            id,
            awaited: Awaited::Result(Patch::Initialize),
            v2025: true,
        }
    }

    #[test]
    fn the_awaited_answer_is_patched_across_chunks_and_the_rest_passes_untouched() {
        let answer = json!({"jsonrpc": "2.0", "id": 7, "result": {"capabilities": {}}});
        let stream = format!(
            "id: 0\nretry: 3000\ndata: \n\n\
             data: {}\nid: 1\n\n\
             data: {answer}\nid: 2\n\n\
             data: {{\"later\":true}}\n\n",
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
        );
        let mut events = Events::new(awaiting(json!(7)));
        let mut out = Vec::new();
        for chunk in stream.as_bytes().chunks(5) {
            out.extend_from_slice(&events.feed(Bytes::copy_from_slice(chunk)));
        }
        let out = String::from_utf8(out).unwrap();
        let patched_line = out
            .lines()
            .find(|line| line.contains("\"id\":7"))
            .expect("the answer is sent");
        let patched: Value = serde_json::from_str(&patched_line["data: ".len()..]).unwrap();
        assert_eq!(
            patched["result"]["capabilities"]["tasks"]["requests"],
            json!({"tools": {"call": {}}})
        );
        // Every other byte is as it came, in order.
        let unpatched = stream.replace(&answer.to_string(), &patched.to_string());
        assert_eq!(out, unpatched);
    }

    #[test]
    fn an_answer_to_another_request_is_not_patched() {
        let other = json!({"jsonrpc": "2.0", "id": 8, "result": {"capabilities": {}}});
        let mut events = Events::new(awaiting(json!(7)));
        let text = format!("data: {other}\n\n");
        let out = events.feed(Bytes::from(text.clone()));
        assert_eq!(out, Bytes::from(text));
    }
}
