//! Screening one incoming JSON-RPC message before rmcp sees it: a message rmcp can serve
//! passes, and one it would drop without a word gets its error reply here.
//!
//! Independent of framing: it takes the text of one message, whether a stdio line or an
//! HTTP body.
//!
//! Invariant: every message that carries an id gets exactly one reply. rmcp drops input
//! that is not JSON (and so does input nested too deep for its parser, or holding a lone
//! surrogate escape), and answers a known method whose parameters do not fit it with
//! "method not found"; this module answers those itself.

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::service::RxJsonRpcMessage;
use serde_json::{Value, json};

/// How deep a message may nest: serde_json refuses more.
const MAX_DEPTH: usize = 128;

const PARSE_ERROR: i64 = -32700;
pub(super) const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// What to do with one incoming message.
pub(crate) enum Screened {
    /// Hand it to rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Answer it with this error response, and hand rmcp nothing.
    Reply(Value),
    /// Nothing to do: a blank line, or a notification nobody needs to answer.
    Skip,
}

/// A JSON-RPC error response.
pub(super) fn error_reply(id: Option<Value>, code: i64, message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": { "code": code, "message": message },
    })
}

pub(crate) fn screen(text: &[u8]) -> Screened {
    let text = trim(text);
    if text.is_empty() {
        return Screened::Skip;
    }
    match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(text) {
        Ok(message) => match misfit(&message) {
            Some(reply) => Screened::Reply(reply),
            None => Screened::Message(Box::new(message)),
        },
        Err(error) => diagnose(text, &error),
    }
}

fn trim(text: &[u8]) -> &[u8] {
    text.strip_prefix(b"\xef\xbb\xbf")
        .unwrap_or(text)
        .trim_ascii()
}

/// A request rmcp parsed but cannot serve as asked: a standard method whose parameters do
/// not fit (rmcp then takes it for a custom method, and answers "method not found").
fn misfit(message: &RxJsonRpcMessage<RoleServer>) -> Option<Value> {
    let JsonRpcMessage::Request(request) = message else {
        return None;
    };
    let ClientRequest::CustomRequest(custom) = &request.request else {
        return None;
    };
    if !crate::server::is_standard_method(&custom.method) {
        return None;
    }
    let id = serde_json::to_value(&request.id).ok();
    let detail = match (custom.method.as_str(), &custom.params) {
        ("tools/call", Some(params)) if params.get("arguments").is_some_and(|a| !a.is_object()) => {
            "invalid params: `arguments` must be an object".to_owned()
        }
        (method, _) => format!("invalid params for `{method}`"),
    };
    Some(error_reply(id, INVALID_PARAMS, &detail))
}

/// The reply to a message that did not parse.
fn diagnose(text: &[u8], error: &serde_json::Error) -> Screened {
    let id = top_level_id(text);
    if nesting_depth(text) > MAX_DEPTH {
        let message = format!("invalid params: nested deeper than {MAX_DEPTH} levels");
        return Screened::Reply(error_reply(id, INVALID_PARAMS, &message));
    }
    if has_lone_surrogate(text) {
        let message = "invalid params: a string holds a lone UTF-16 surrogate escape";
        return Screened::Reply(error_reply(id, INVALID_PARAMS, message));
    }
    tracing::debug!(%error, "an incoming message does not parse");
    match serde_json::from_slice::<Value>(text) {
        // JSON but for bytes that are not UTF-8: its id can be trusted, and gets the error.
        Err(_) if std::str::from_utf8(text).is_err() => {
            let id = utf8_lossy_id(text);
            let message = "parse error: not valid UTF-8";
            Screened::Reply(error_reply(id, PARSE_ERROR, message))
        }
        // Not JSON at all: there is no id to answer to.
        Err(_) => Screened::Reply(error_reply(None, PARSE_ERROR, "parse error: not JSON")),
        // MCP has no batches since 2025-06-18: one error, whose id is null as JSON-RPC
        // has it for a batch refused whole, and none of its requests is served.
        Ok(Value::Array(_)) => Screened::Reply(error_reply(
            None,
            INVALID_REQUEST,
            "invalid request: batches are not supported (MCP removed them in 2025-06-18)",
        )),
        // JSON, but no JSON-RPC message. A notification (no id) gets no reply.
        Ok(value) => match value.get("id") {
            None if value.get("method").is_some() => Screened::Skip,
            _ => Screened::Reply(error_reply(
                id,
                INVALID_REQUEST,
                "invalid request: not a JSON-RPC 2.0 message",
            )),
        },
    }
}

/// The id of a message that would be JSON once its invalid UTF-8 is replaced: only then
/// is the whole message's shape known, and its id the one the client meant.
fn utf8_lossy_id(text: &[u8]) -> Option<Value> {
    let lossy = String::from_utf8_lossy(text);
    let value: Value = serde_json::from_str(&lossy).ok()?;
    let id = value.get("id")?;
    (id.is_number() || id.is_string()).then(|| id.clone())
}

/// Whether a string in `text` holds a `\u` escape of half a UTF-16 surrogate pair without
/// its other half, which no JSON parser can turn into text (JavaScript strings can hold
/// one, and `JSON.stringify` writes it so).
fn has_lone_surrogate(text: &[u8]) -> bool {
    let hex = |at: usize| -> Option<u16> {
        let digits = std::str::from_utf8(text.get(at..at + 4)?).ok()?;
        u16::from_str_radix(digits, 16).ok()
    };
    let mut at = 0;
    while at < text.len() {
        if text[at] != b'\\' {
            at += 1;
            continue;
        }
        if text.get(at + 1) != Some(&b'u') {
            at += 2;
            continue;
        }
        match hex(at + 2) {
            Some(0xD800..=0xDBFF) => {
                let paired = text.get(at + 6..at + 8) == Some(b"\\u")
                    && matches!(hex(at + 8), Some(0xDC00..=0xDFFF));
                if !paired {
                    return true;
                }
                at += 12;
            }
            Some(0xDC00..=0xDFFF) => return true,
            _ => at += 6,
        }
    }
    false
}

/// How deeply arrays and objects nest in `text`, strings skipped.
fn nesting_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut at) = (0usize, 0usize, 0);
    while at < text.len() {
        match text[at] {
            b'"' => match string_end(text, at) {
                Some(end) => {
                    at = end;
                    continue;
                }
                None => break,
            },
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    deepest
}

/// The id of a message, found by walking the members of its top-level object without
/// parsing their values: it works on text that does not parse, and on the start of a line
/// too long to read whole. Only a number or a string is an id.
pub(crate) fn top_level_id(text: &[u8]) -> Option<Value> {
    let mut at = skip_space(text, 0);
    if text.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        at = skip_space(text, at);
        if text.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(text, at)?;
        let key = &text[at + 1..key_end - 1];
        at = skip_space(text, key_end);
        if text.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(text, at + 1);
        let value_end = value_end(text, at)?;
        if key == b"id" {
            let value: Value = serde_json::from_slice(&text[at..value_end]).ok()?;
            return (value.is_number() || value.is_string()).then_some(value);
        }
        at = skip_space(text, value_end);
        match text.get(at) {
            Some(b',') => at += 1,
            _ => return None,
        }
    }
}

fn skip_space(text: &[u8], mut at: usize) -> usize {
    while text.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The end (exclusive) of the string that starts at `at`.
fn string_end(text: &[u8], at: usize) -> Option<usize> {
    let mut escaped = false;
    for (offset, &byte) in text.get(at + 1..)?.iter().enumerate() {
        match (escaped, byte) {
            (true, _) => escaped = false,
            (false, b'\\') => escaped = true,
            (false, b'"') => return Some(at + 1 + offset + 1),
            _ => {}
        }
    }
    None
}

/// The end (exclusive) of the value that starts at `at`.
fn value_end(text: &[u8], at: usize) -> Option<usize> {
    match text.get(at)? {
        b'"' => string_end(text, at),
        b'[' | b'{' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < text.len() {
                match text[i] {
                    b'"' => {
                        i = string_end(text, i)?;
                        continue;
                    }
                    b'[' | b'{' => depth += 1,
                    b']' | b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = text[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())
                .unwrap_or(text.len() - at);
            Some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_found_wherever_it_sits_in_the_top_level_object() {
        let cases: [(&[u8], Option<Value>); 7] = [
            (br#"{"jsonrpc":"2.0","id":7,"method":"x"}"#, Some(json!(7))),
            (
                br#"{"method":"x","params":{"id":1,"a":[{"id":2}]},"id":"r-9"}"#,
                Some(json!("r-9")),
            ),
            (br#" { "id" : 12 , "#, Some(json!(12))),
            (br#"{"params":{"s":"\"id\":3"},"id":4}"#, Some(json!(4))),
            (br#"{"id":null,"method":"x"}"#, None),
            (br#"{"params":[[[[[["#, None),
            (b"not json", None),
        ];
        for (text, id) in cases {
            assert_eq!(top_level_id(text), id, "{}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn nesting_is_counted_outside_strings_only() {
        assert_eq!(nesting_depth(br#"{"a":[1,{"b":2}]}"#), 3);
        assert_eq!(nesting_depth(br#"{"a":"[[[[{{{{"}"#), 1);
        assert_eq!(nesting_depth(br#"{"a":"\"[["}"#), 1);
    }

    #[test]
    fn lone_surrogate_escapes_are_told_from_pairs_and_escaped_backslashes() {
        assert!(has_lone_surrogate(br#"{"t":"\ud800"}"#));
        assert!(has_lone_surrogate(br#"{"t":"a\udfffb"}"#));
        assert!(has_lone_surrogate(br#"{"t":"\ud800\u0041"}"#));
        assert!(!has_lone_surrogate(br#"{"t":"\ud83d\ude00"}"#));
        assert!(!has_lone_surrogate(br#"{"t":"\\ud800"}"#));
        assert!(!has_lone_surrogate(br#"{"t":"\u00e9"}"#));
    }
}
