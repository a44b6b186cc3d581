//! Who owns each open 2025-11-25 session: the principal whose token opened it. The gate
//! serves a request naming a session only to its owner; to anyone else the session is as
//! unknown as one that never was (404), so that no other principal can post into it,
//! read or resume its streams, receive or answer its questions, or close it.
//!
//! Each principal holds at most `--http-max-sessions-per-principal` sessions: a slot is
//! taken before the session is opened and given back when it closes, however it closes
//! (DELETE, idling out, its token removed, shutdown), since every close passes through
//! the session manager, which tells this table (`sessions.rs`).
//!
//! Invariant: a session is recorded before the response that names it leaves the gate,
//! so its owner's next request always finds it.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::transport::streamable_http_server::SessionId;

use crate::auth::{Principal, TokenDigest};
use crate::slots::{Full, Slot, Slots};

/// The owner of each open session.
#[derive(Debug)]
pub(super) struct Owners {
    sessions: Mutex<HashMap<SessionId, Owner>>,
    /// A slot per session, capped per principal.
    slots: Arc<Slots>,
}

#[derive(Debug)]
struct Owner {
    principal: String,
    /// The digest of the token that opened it: the session ends when that token is removed.
    token: TokenDigest,
    _slot: Slot,
}

/// A session being opened by a principal, which holds one of its slots meanwhile.
#[derive(Debug)]
pub(super) struct Opening {
    principal: String,
    token: TokenDigest,
    slot: Slot,
}

impl Opening {
    /// The digest of the token opening the session.
    pub(super) fn token(&self) -> TokenDigest {
        self.token
    }
}

impl Owners {
    /// Each principal may hold `per_principal` sessions (the total is the session
    /// manager's to cap).
    pub(super) fn new(per_principal: usize) -> Owners {
        Owners {
            sessions: Mutex::default(),
            slots: Slots::new(usize::MAX, per_principal),
        }
    }

    /// A slot for a session `principal` opens with the token of digest `token`; `None`
    /// when it holds as many sessions as each principal may.
    pub(super) fn reserve(&self, principal: &Principal, token: TokenDigest) -> Option<Opening> {
        match self.slots.take(Some(&principal.0)) {
            Ok(slot) => Some(Opening {
                principal: principal.0.clone(),
                token,
                slot,
            }),
            Err(Full::All | Full::Principal) => None,
        }
    }

    /// Records that `opening` opened session `id`.
    pub(super) fn record(&self, id: SessionId, opening: Opening) {
        let owner = Owner {
            principal: opening.principal,
            token: opening.token,
            _slot: opening.slot,
        };
        self.sessions.lock().insert(id, owner);
    }

    /// Whether `principal` opened session `id`, which is still open.
    pub(super) fn owns(&self, id: &str, principal: &Principal) -> bool {
        self.sessions
            .lock()
            .get(id)
            .is_some_and(|owner| owner.principal == principal.0)
    }

    /// Forgets session `id`, which closed; its slot is given back.
    pub(super) fn forget(&self, id: &SessionId) {
        let owner = self.sessions.lock().remove(id);
        drop(owner);
    }

    /// The sessions opened with a token for which `kept` is false.
    pub(super) fn opened_without(&self, kept: impl Fn(&TokenDigest) -> bool) -> Vec<SessionId> {
        let sessions = self.sessions.lock();
        sessions
            .iter()
            .filter(|(_, owner)| !kept(&owner.token))
            .map(|(id, _)| id.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(name: &str) -> Principal {
        Principal(name.to_owned())
    }

    #[test]
    fn a_session_is_its_openers_alone_and_its_slot_returns_when_it_closes() {
        let owners = Owners::new(1);
        let alice = principal("alice");
        let opening = owners.reserve(&alice, [1; 32]).unwrap();
        assert!(owners.reserve(&alice, [1; 32]).is_none(), "at her cap");
        assert!(owners.reserve(&principal("bob"), [2; 32]).is_some());
        let id: SessionId = "s-1".into();
        owners.record(id.clone(), opening);
        assert!(owners.owns("s-1", &alice));
        assert!(!owners.owns("s-1", &principal("bob")));
        assert!(!owners.owns("s-2", &alice));
        assert_eq!(
            owners.opened_without(|token| *token != [1; 32]),
            std::slice::from_ref(&id)
        );
        owners.forget(&id);
        assert!(!owners.owns("s-1", &alice));
        assert!(owners.reserve(&alice, [1; 32]).is_some());
    }
}
