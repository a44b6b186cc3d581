//! The client's requests in flight on one stdio session: taken off when read, landed when
//! answered.
//!
//! Why here and not in rmcp: rmcp keys its requests by the client's id, so a second
//! request under an id still in flight takes the first one's place, and the first one's
//! reply then answers the second. JSON-RPC asks clients for ids unique among their
//! requests in flight; this table makes that a rule, refusing a request whose id is in
//! flight, so that a reply and a cancel always name one call.
//!
//! Invariant: an id is in flight from the moment its request is read until its reply is
//! written or, for a cancelled call, dropped; the reply of a cancelled call is dropped
//! here and nowhere else.

use std::collections::HashMap;

use rmcp::model::RequestId;

/// Each request in flight, by id: whether the client cancelled it.
#[derive(Default)]
pub(super) struct Flights {
    calls: std::sync::Mutex<HashMap<RequestId, bool>>,
}

impl Flights {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, bool>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a request off; `false` if its id is already in flight, when the request
    /// must be refused.
    pub(super) fn take_off(&self, id: &RequestId) -> bool {
        let mut calls = self.lock();
        if calls.contains_key(id) {
            return false;
        }
        calls.insert(id.clone(), false);
        true
    }

    /// Marks a call in flight as cancelled, its reply to be dropped; `false` if no call
    /// is in flight under `id`, when there is nothing to cancel.
    pub(super) fn cancel(&self, id: &RequestId) -> bool {
        match self.lock().get_mut(id) {
            Some(cancelled) => {
                *cancelled = true;
                true
            }
            None => false,
        }
    }

    /// Ends a call as its reply goes out; whether the reply is still wanted. A reply to an
    /// id not in flight (one the wire refused, say) goes out.
    pub(super) fn land(&self, id: &RequestId) -> bool {
        self.lock().remove(id).is_none_or(|cancelled| !cancelled)
    }

    #[cfg(test)]
    pub(super) fn in_flight(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_call_lands_without_its_reply_and_others_are_untouched() {
        let flights = Flights::default();
        let (one, two) = (RequestId::Number(1), RequestId::String("two".into()));
        assert!(flights.take_off(&one));
        assert!(flights.take_off(&two));
        assert!(flights.cancel(&one));
        assert!(!flights.cancel(&RequestId::Number(3)), "nothing to cancel");
        assert!(!flights.land(&one), "a cancelled call's reply is dropped");
        assert!(flights.land(&two), "a call not cancelled keeps its reply");
        // An id used again after its call landed starts clean.
        assert!(flights.take_off(&one));
        assert!(flights.land(&one));
        assert_eq!(flights.in_flight(), 0);
    }

    #[test]
    fn an_id_in_flight_is_refused_until_its_call_lands() {
        let flights = Flights::default();
        let id = RequestId::Number(7);
        assert!(flights.take_off(&id));
        assert!(
            !flights.take_off(&id),
            "a second request under id 7 is refused"
        );
        // The refused request's error reply lands nothing: the first call is still there.
        assert!(flights.land(&RequestId::Number(8)));
        assert_eq!(flights.in_flight(), 1);
        assert!(flights.land(&id));
        assert!(flights.take_off(&id));
    }
}
