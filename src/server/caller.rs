//! Who makes a request, and so which runs and tasks it may see.
//!
//! Over stdio there is one local client, which sees everything. Over HTTP:
//! - with tokens, the principal of the request's token owns the runs it starts: another
//!   principal's task is unknown to it, and listings show only its own;
//! - without tokens (loopback only), a task id is itself the capability, so any session
//!   that knows one may poll it, but listings show only what the session started (and a
//!   stateless request, in no session, what was started in none).

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use super::http::Principal;
use crate::store::{Owner, Scope};

/// The caller of one request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    /// Whether the request came over HTTP, where callers are told apart.
    http: bool,
    owner: Owner,
}

impl Caller {
    /// The caller of a request, from the HTTP request rmcp keeps in its extensions (which
    /// the gate gave the principal of its token).
    pub(crate) fn of(context: &RequestContext<RoleServer>) -> Caller {
        let Some(parts) = context.extensions.get::<http::request::Parts>() else {
            return Caller::default();
        };
        let principal = parts.extensions.get::<Principal>().map(|p| p.0.clone());
        let session = parts
            .headers
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        Caller {
            http: true,
            owner: Owner { principal, session },
        }
    }

    /// Who owns what this caller starts.
    pub(crate) fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The principal named in the audit rows of this caller's calls.
    pub(crate) fn principal(&self) -> Option<&str> {
        self.owner.principal.as_deref()
    }

    /// Whether this caller may see a run or task that `owner` owns, given its id.
    pub(crate) fn may_see(&self, owner: &Owner) -> bool {
        match &self.owner.principal {
            Some(principal) => owner.principal.as_ref() == Some(principal),
            None => true,
        }
    }

    /// What this caller's listings show.
    pub(crate) fn listing(&self) -> Scope<'_> {
        match (&self.owner.principal, &self.owner.session) {
            _ if !self.http => Scope::Everyone,
            (Some(principal), _) => Scope::Principal(principal),
            (None, Some(session)) => Scope::Session(session),
            (None, None) => Scope::Nobody,
        }
    }
}
