//! The client's requests in flight on one stdio session: taken off when read, landed when
//! answered, whichever path answers them (rmcp's or the direct lane).
//!
//! Why here and not in rmcp: rmcp keys its requests by the client's id, so a second
//! request under an id still in flight takes the first one's place, and the first one's
//! reply then answers the second. JSON-RPC asks clients for ids unique among their
//! requests in flight; this table makes that a rule, refusing a request whose id is in
//! flight, so that a reply and a cancel always name one call.
//!
//! Invariant: an id is in flight from the moment its request is read until its reply is
//! written or, for a cancelled call, dropped; the reply of a cancelled call is dropped
//! here, on either path, and nowhere else.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::RequestId;
use tokio::sync::Notify;

#[derive(Default)]
pub(super) struct Flights {
    table: std::sync::Mutex<Table>,
    /// Notified when the last call on the direct lane lands.
    lane_idle: Notify,
    /// How many calls the lane has taken, for the log at the end of the session.
    pub(super) taken: AtomicU64,
}

#[derive(Default)]
struct Table {
    calls: HashMap<RequestId, Flight>,
    /// How many of `calls` the direct lane answers.
    on_lane: usize,
}

#[derive(Clone, Copy, Default)]
struct Flight {
    cancelled: bool,
    on_lane: bool,
}

/// Where a cancelled call was, if it was in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cancelled {
    /// On rmcp's path: the handler is told, so that it stops the call's work.
    Handler,
    /// On the direct lane, whose calls have nothing to stop.
    Lane,
    /// Not in flight: nothing to cancel.
    Unknown,
}

impl Flights {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a request off; `false` if its id is already in flight, when the request
    /// must be refused.
    pub(super) fn take_off(&self, id: &RequestId) -> bool {
        let mut table = self.lock();
        if table.calls.contains_key(id) {
            return false;
        }
        table.calls.insert(id.clone(), Flight::default());
        true
    }

    /// The request `id`, in flight, is answered on the direct lane.
    pub(super) fn to_lane(&self, id: &RequestId) {
        let mut table = self.lock();
        if let Some(flight) = table.calls.get_mut(id)
            && !flight.on_lane
        {
            flight.on_lane = true;
            table.on_lane += 1;
        }
        self.taken.fetch_add(1, Ordering::Relaxed);
    }

    /// Marks a call in flight as cancelled: its reply will be dropped.
    pub(super) fn cancel(&self, id: &RequestId) -> Cancelled {
        match self.lock().calls.get_mut(id) {
            Some(flight) => {
                flight.cancelled = true;
                match flight.on_lane {
                    true => Cancelled::Lane,
                    false => Cancelled::Handler,
                }
            }
            None => Cancelled::Unknown,
        }
    }

    /// Ends a call as its reply goes out; whether the reply is still wanted. A reply to an
    /// id not in flight (one the wire refused, say) goes out.
    pub(super) fn land(&self, id: &RequestId) -> bool {
        let mut table = self.lock();
        let Some(flight) = table.calls.remove(id) else {
            return true;
        };
        if flight.on_lane {
            table.on_lane -= 1;
            if table.on_lane == 0 {
                self.lane_idle.notify_waiters();
            }
        }
        !flight.cancelled
    }

    /// Returns once no call is in flight on the direct lane.
    pub(super) async fn lane_landed(&self) {
        loop {
            let idle = self.lane_idle.notified();
            if self.lock().on_lane == 0 {
                return;
            }
            idle.await;
        }
    }

    #[cfg(test)]
    pub(super) fn in_flight(&self) -> usize {
        self.lock().calls.len()
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
        flights.to_lane(&one);
        assert_eq!(flights.cancel(&one), Cancelled::Lane);
        assert_eq!(flights.cancel(&two), Cancelled::Handler);
        assert_eq!(flights.cancel(&RequestId::Number(3)), Cancelled::Unknown);
        assert!(!flights.land(&one), "a cancelled call's reply is dropped");
        assert!(!flights.land(&two));
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
        flights.to_lane(&id);
        // The refused request's error reply lands nothing: the first call is still there.
        assert!(flights.land(&RequestId::Number(8)));
        assert_eq!(flights.in_flight(), 1);
        assert!(flights.land(&id));
        assert!(flights.take_off(&id));
    }
}
