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
    pub(crate) fn remote(principal: Option<String>, session: Option<String>) -> Caller {
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
    pub(crate) fn may_see(&self, owner: &Owner) -> bool {
        match &self.owner.principal {
            Some(principal) => owner.principal.as_ref() == Some(principal),
            None => true,
        }
    }

    /// Whether this caller sees every run and every file: the local user (stdio, the
    /// terminal, `ui` without tokens), who owns the machine.
    pub(crate) fn sees_everything(&self) -> bool {
        !self.http
    }

    /// Whether what `owner` owns is this caller's own: what its listings show.
    pub(crate) fn owns(&self, owner: &Owner) -> bool {
        match self.listing() {
            Scope::Everyone => true,
            Scope::Principal(principal) => owner.principal.as_deref() == Some(principal),
            Scope::Session(session) => owner.session.as_deref() == Some(session),
            Scope::Nobody => owner.principal.is_none() && owner.session.is_none(),
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
