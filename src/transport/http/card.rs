//! The server card (SEP-2127): what a client reads before it connects, at the location
//! MCP reserves for it, `GET <streamable-http-url>/server-card`: the server's name,
//! version and description, and its one remote, with the bearer token it needs (with
//! OAuth, no header: a client discovers the issuer from the `401` and the protected-
//! resource metadata) and the protocol versions it speaks. Served without a token: it
//! names no tool, run or principal, only what any client is told on connecting.

use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use serde_json::json;

use super::Body;

/// Where the card is served.
pub(super) const PATH: &str = "/mcp/server-card";

/// The card, for a request that reached the server under `host` (a host it is served
/// under, which the gate checked), with `tokens` whether every request needs a bearer
/// token.
pub(super) fn card(host: &str, tokens: bool) -> Response<Body> {
    let mut remote = json!({
        "type": "streamable-http",
        "url": format!("http://{host}/mcp"),
        "supportedProtocolVersions": ["2025-11-25", "2026-07-28"],
    });
    if tokens {
        remote["headers"] = json!([{
            "name": "Authorization",
            "description": "Bearer and a token of the server: one of its tokens file, or the one it printed at start.",
            "isRequired": true,
            "isSecret": true,
        }]);
    }
    let card = json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json",
        "name": "mcp-task-server/tasks",
        "title": "mcp-task-server",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "A task manager and a DAG workflow engine: todos, and multi-phase workflows run as MCP tasks, durable in SQLite or PostgreSQL.",
        "remotes": [remote],
    });
    let mut reply = Response::new(Full::new(card.to_string().into()).boxed());
    *reply.status_mut() = StatusCode::OK;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        "application/mcp-server-card+json"
            .parse()
            .expect("a header value"),
    );
    reply
}
