//! Who makes a request, and so which runs and tasks it may see.
//!
//! Over stdio there is one local client, which sees everything. Over HTTP:
//! - with tokens, the principal of the request's token owns the runs it starts: another
//!   principal's task is unknown to it, and listings show only its own;
//! - without tokens (loopback only), a task id is itself the capability, so any session
//!   that knows one may poll it, but listings show only what the session started (and a
//!   stateless request, in no session, what was started in none).

use crate::store::{Owner, Scope};

/// The caller of one request.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// Whether the request came over HTTP, where callers are told apart.
    http: bool,
    owner: Owner,
}

impl Caller {
    /// A caller over HTTP: the principal of its token, if the server checks tokens, and
    /// its session, if it has one.
    pub fn remote(principal: Option<String>, session: Option<String>) -> Caller {
        Caller {
            http: true,
            owner: Owner { principal, session },
        }
    }

    /// Who owns what this caller starts.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The principal named in the audit rows of this caller's calls.
    pub fn principal(&self) -> Option<&str> {
        self.owner.principal.as_deref()
    }

    /// Whether this caller may see a run or task that `owner` owns, given its id.
    pub fn may_see(&self, owner: &Owner) -> bool {
        match &self.owner.principal {
            Some(principal) => owner.principal.as_ref() == Some(principal),
            None => true,
        }
    }

    /// What this caller's listings show.
    pub fn listing(&self) -> Scope<'_> {
        match (&self.owner.principal, &self.owner.session) {
            _ if !self.http => Scope::Everyone,
            (Some(principal), _) => Scope::Principal(principal),
            (None, Some(session)) => Scope::Session(session),
            (None, None) => Scope::Nobody,
        }
    }
}
