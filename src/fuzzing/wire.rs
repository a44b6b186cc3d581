//! The targets at the edges of the transports: the stdio screen, the HTTP event rewrite,
//! and the tokens file.

use bytes::Bytes;
use serde_json::json;

use crate::auth::{Tokens, digest};
use crate::server::shim::Patch;
use crate::transport::http::rewrite::{Awaited, Events, Outbound};
use crate::transport::stdio::screen::{Screened, screen, top_level_id};

/// `stdio_screen`: every line the screen takes gets at most one answer, and a line that
/// names an id is never dropped without one.
///
/// A line the screen skips carries no id that would await a reply; a line that is not
/// UTF-8 but would be a JSON object naming an id once its bad bytes are replaced gets its
/// error under that id; an error reply is a JSON-RPC error response.
pub fn stdio_screen(data: &[u8]) {
    let screened = screen(data);
    if let Some(id) = lossy_id(data) {
        let Screened::Reply(reply) = &screened else {
            panic!("a line that is not UTF-8 screens as {}", kind(&screened));
        };
        assert_eq!(reply["id"], id, "the error of a line that is not UTF-8");
    }
    match &screened {
        Screened::Message(_) => {}
        Screened::Reply(reply) => {
            assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
            assert!(reply["error"]["code"].is_i64(), "{reply}");
        }
        Screened::Skip => {
            let text = data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data);
            let id = top_level_id(text.trim_ascii());
            assert!(
                id.is_none(),
                "a message with id {id:?} is skipped unanswered"
            );
        }
    }
}

/// The id a line that is not UTF-8 names, read as JSON once its bad bytes are replaced:
/// `None` for a line that is UTF-8, is no JSON object even so, or names no number or
/// string as its id.
fn lossy_id(data: &[u8]) -> Option<serde_json::Value> {
    let text = data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data);
    if std::str::from_utf8(text).is_ok() {
        return None;
    }
    let lossy = String::from_utf8_lossy(text);
    let value: serde_json::Value = serde_json::from_str(&lossy).ok()?;
    let id = value.get("id")?;
    (id.is_number() || id.is_string()).then(|| id.clone())
}

fn kind(screened: &Screened) -> &'static str {
    match screened {
        Screened::Message(_) => "a message",
        Screened::Reply(_) => "a reply",
        Screened::Skip => "nothing",
    }
}

/// `http_rewrite`: an SSE stream fed to the rewrite in any chunking gives the bytes it
/// gives fed whole; and while no event was patched, what comes out is what went in.
///
/// Input: a byte of flags (two bits for what is awaited: an `initialize` or `tools/list`
/// result or a listen's acknowledgement; v2025; the awaited id in the high bits), a byte
/// that shapes the chunking, then the stream.
pub fn http_rewrite(data: &[u8]) {
    let [flags, step, stream @ ..] = data else {
        return;
    };
    let outbound = || Outbound {
        id: json!(flags >> 3),
        awaited: match flags & 3 {
            0 => Awaited::Result(Patch::Initialize),
            1 => Awaited::Result(Patch::ToolsList),
            _ => Awaited::Acknowledgement(vec!["task".to_owned()]),
        },
        v2025: flags & 4 != 0,
    };
    let whole = feed(Events::new(outbound()), [stream]);
    let bytewise = feed(Events::new(outbound()), stream.chunks(1));
    assert_eq!(whole, bytewise, "fed byte by byte");
    let chunked = feed(Events::new(outbound()), chunks(stream, *step));
    assert_eq!(whole, chunked, "fed in chunks shaped by {step}");
    if whole.len() < stream.len() && stream.starts_with(&whole) {
        // Nothing patched: every whole event came out, and no part of one.
        assert!(
            whole.is_empty() || whole.ends_with(b"\n\n"),
            "part of an event let through"
        );
        let held = &stream[whole.len()..];
        assert!(
            !held.windows(2).any(|w| w == b"\n\n"),
            "a whole event held back"
        );
    }
}

fn feed<'a>(mut events: Events, chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend_from_slice(&events.feed(Bytes::copy_from_slice(chunk)));
    }
    out
}

/// `stream` cut into chunks of sizes 1 to 32, in a sequence set by `step`, so that the
/// cuts fall inside `\n\n` and inside `data:` lines as well as between events.
fn chunks(stream: &[u8], step: u8) -> Vec<&[u8]> {
    let mut chunks = Vec::new();
    let (mut at, mut state) = (0, u32::from(step) | 1);
    while at < stream.len() {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let size = 1 + (state >> 16) as usize % 32;
        let end = (at + size).min(stream.len());
        chunks.push(&stream[at..end]);
        at = end;
    }
    chunks
}

/// `tokens_file`: a file that parses maps each of its tokens to its name, and nothing
/// else to anyone; a file that does not never shows a token in its problems.
pub fn tokens_file(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    // The `name token` lines, by line number as the problems count them.
    let pairs: Vec<(usize, &str, &str)> = text
        .lines()
        .enumerate()
        .filter_map(|(index, line)| {
            let line = line.trim();
            if line.starts_with('#') {
                return None;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields[..] {
                [name, token] => Some((index + 1, name, token)),
                _ => None,
            }
        })
        .collect();
    match Tokens::parse(&text) {
        Ok(tokens) => {
            assert!(!pairs.is_empty(), "a file with no token is accepted");
            for (_, name, token) in &pairs {
                let principal = tokens
                    .principal(&digest(token.as_bytes()))
                    .map(|p| p.0.as_str());
                assert_eq!(principal, Some(*name), "the token of `{name}`");
                let mut longer = token.as_bytes().to_vec();
                longer.push(b'!');
                if !pairs.iter().any(|(_, _, t)| t.as_bytes() == longer) {
                    assert_eq!(
                        tokens.principal(&digest(&longer)),
                        None,
                        "a longer token is taken"
                    );
                }
            }
            assert_eq!(tokens.principal(&digest(b"")), None);
        }
        Err(problems) => {
            assert!(!problems.is_empty());
            for problem in &problems {
                // A problem shows the name of its line, and a token may be written inside
                // that name, or span it and its quotes: what is left without it is checked.
                let line = problem
                    .strip_prefix("line ")
                    .and_then(|rest| rest.split_once(':'))
                    .and_then(|(number, _)| number.parse::<usize>().ok());
                let shown = pairs.iter().find(|(number, _, _)| Some(*number) == line);
                let rest = match shown {
                    Some((_, name, _)) => problem.replace(name, "\n"),
                    None => problem.clone(),
                };
                for (_, _, token) in pairs.iter().filter(|(_, _, token)| token.len() >= 16) {
                    assert!(!rest.contains(token), "a problem shows a token: {problem}");
                }
            }
        }
    }
}
