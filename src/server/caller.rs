//! Who makes a request: the application's [`Caller`] of an MCP request, from the HTTP
//! request rmcp keeps in its extensions (which the gate gave the principal of its token).
//! A request that came over stdio is the one local user's.

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use crate::app::Caller;
use crate::auth::Principal;

/// The caller of an MCP request.
pub(crate) fn caller_of(context: &RequestContext<RoleServer>) -> Caller {
    let Some(parts) = context.extensions.get::<http::request::Parts>() else {
        return Caller::default();
    };
    let principal = parts.extensions.get::<Principal>().map(|p| p.0.clone());
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    Caller::remote(principal, session)
}
