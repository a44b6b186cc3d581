//! The dashboard's sign-in attempts between their start and the issuer's callback, kept
//! by the digest of their `state`. Starting one needs no credential, so the table is
//! bounded (`--oauth-sign-ins-pending`), and when it is full the attempt that goes is the
//! oldest of the address holding the most: a flood from one address (an IPv6 /64 counts
//! as one) pushes out its own attempts, not other people's.
//!
//! Invariant: the table never holds more than its bound, nor an attempt older than
//! [`ATTEMPT_LIFETIME`] once another is kept.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::auth::{ClientAddr, TokenDigest, counted_as};

/// How long an attempt may take, from the start to the callback.
const ATTEMPT_LIFETIME: Duration = Duration::from_secs(10 * 60);

/// The attempts pending at once unless told otherwise.
pub const DEFAULT_SIGN_INS_PENDING: usize = 4096;

/// One attempt: what its callback must match, and what its exchange needs.
pub(super) struct Attempt {
    pub(super) binding: TokenDigest,
    pub(super) verifier: String,
    started: Instant,
    /// What the address it came from counts as; `None` when it was not known.
    pub(super) from: Option<IpAddr>,
}

impl Attempt {
    pub(super) fn new(binding: TokenDigest, verifier: String, from: Option<ClientAddr>) -> Self {
        Attempt {
            binding,
            verifier,
            started: Instant::now(),
            from: from.map(counted_as),
        }
    }

    fn live(&self) -> bool {
        self.started.elapsed() < ATTEMPT_LIFETIME
    }
}

/// The pending attempts.
pub(super) struct Pending {
    max: usize,
    attempts: Mutex<HashMap<TokenDigest, Attempt>>,
}

impl Pending {
    pub(super) fn new(max: usize) -> Pending {
        Pending {
            max: max.max(1),
            attempts: Mutex::default(),
        }
    }

    /// Keeps `attempt` under `state`, making room as the module says.
    pub(super) fn keep(&self, state: TokenDigest, attempt: Attempt) {
        let mut attempts = self.attempts.lock();
        attempts.retain(|_, a| a.live());
        while attempts.len() >= self.max {
            let Some(gone) = evicted(&attempts) else {
                break;
            };
            attempts.remove(&gone);
        }
        attempts.insert(state, attempt);
    }

    /// The live attempt of `state`, spent: it is no longer kept.
    pub(super) fn take(&self, state: TokenDigest) -> Option<Attempt> {
        self.attempts.lock().remove(&state).filter(Attempt::live)
    }
}

/// The oldest attempt of the address holding the most.
fn evicted(attempts: &HashMap<TokenDigest, Attempt>) -> Option<TokenDigest> {
    let mut held: HashMap<Option<IpAddr>, usize> = HashMap::new();
    for attempt in attempts.values() {
        *held.entry(attempt.from).or_default() += 1;
    }
    let (&most, _) = held.iter().max_by_key(|(_, n)| **n)?;
    attempts
        .iter()
        .filter(|(_, a)| a.from == most)
        .min_by_key(|(_, a)| a.started)
        .map(|(state, _)| *state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::digest;

    fn attempt(from: &str) -> Attempt {
        let addr = ClientAddr(from.parse().unwrap());
        Attempt::new(digest(b"binding"), "verifier".into(), Some(addr))
    }

    fn state(n: usize) -> TokenDigest {
        digest(format!("state {n}").as_bytes())
    }

    #[test]
    fn a_flood_from_one_address_pushes_out_its_own_attempts_and_not_anothers() {
        let pending = Pending::new(8);
        pending.keep(state(0), attempt("192.0.2.7"));
        for n in 1..1000 {
            pending.keep(state(n), attempt("198.51.100.1"));
        }
        assert!(
            pending.take(state(0)).is_some(),
            "the person's attempt went"
        );
        assert!(pending.take(state(999)).is_some());
        assert!(pending.take(state(991)).is_none(), "the bound was passed");
        assert!(pending.attempts.lock().len() <= 8);
    }

    #[test]
    fn the_addresses_of_one_ipv6_64_flood_as_one() {
        let pending = Pending::new(4);
        pending.keep(state(0), attempt("2001:db8:1::1"));
        for n in 1..100 {
            pending.keep(state(n), attempt(&format!("2001:db8:2::{n:x}")));
        }
        assert!(pending.take(state(0)).is_some());
        assert_eq!(pending.attempts.lock().len(), 3);
    }

    #[test]
    fn an_attempt_is_spent_once() {
        let pending = Pending::new(4);
        pending.keep(state(1), attempt("192.0.2.7"));
        assert!(pending.take(state(1)).is_some());
        assert!(pending.take(state(1)).is_none());
    }
}
