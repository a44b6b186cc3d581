//! Failed sign-ins, counted by the address they come from: a bearer token refused at
//! `/mcp`, a token refused on the sign-in page, a sign-in link refused. An address may fail
//! `free` times; then each further try waits a delay that doubles with every failure,
//! from one second up to a minute, and is answered `429` with `Retry-After` until it has
//! passed, without the token being looked at. A quarter of an hour without a failure
//! clears its count; a success does not (another host behind the same address could clear
//! a guesser's count by signing in). A wrong token names no principal, so the
//! address is what failures are counted by; an IPv6 address counts with the other
//! addresses of its /64, which one host may hold all of.
//!
//! Invariant: an address that failed more than `free` times is never told whether a token
//! is right sooner than its delay allows; the table of addresses never holds more than
//! [`MAX_ADDRESSES`] entries.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The failures an address may make before its tries are delayed, unless told otherwise.
pub const DEFAULT_FREE_FAILURES: u32 = 5;

/// The longest delay between two tries of an address.
const MAX_DELAY: Duration = Duration::from_secs(60);

/// How long after its last failure an address is forgotten.
const FORGOTTEN_AFTER: Duration = Duration::from_secs(15 * 60);

/// The most addresses kept at once; past it, those whose delay has passed go first.
const MAX_ADDRESSES: usize = 65_536;

/// The address of the peer a request came from, put in its extensions by the accept loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientAddr(pub(crate) IpAddr);

/// The failed sign-ins of one server.
#[derive(Debug)]
pub(crate) struct Throttle {
    free: u32,
    by_address: Mutex<HashMap<IpAddr, Failures>>,
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

impl Failures {
    /// When the next try may be made.
    fn next_try(&self, free: u32) -> Instant {
        if self.count < free {
            return self.last;
        }
        let doublings = (self.count - free).min(16);
        self.last + Duration::from_secs(1u64 << doublings).min(MAX_DELAY)
    }
}

impl Throttle {
    /// A throttle that lets each address fail `free` times before it delays its tries.
    pub(crate) fn new(free: u32) -> Throttle {
        Throttle {
            free,
            by_address: Mutex::default(),
        }
    }

    /// `Err` with how long to wait when `addr` may not try now.
    pub(crate) fn check(&self, addr: Option<ClientAddr>) -> Result<(), Duration> {
        let Some(key) = addr.map(counted_as) else {
            return Ok(());
        };
        let now = Instant::now();
        let table = self.by_address.lock();
        match table.get(&key) {
            Some(failures) if failures.next_try(self.free) > now => {
                Err(failures.next_try(self.free) - now)
            }
            _ => Ok(()),
        }
    }

    /// Counts a failed sign-in of `addr`.
    pub(crate) fn failed(&self, addr: Option<ClientAddr>) {
        let Some(key) = addr.map(counted_as) else {
            return;
        };
        let now = Instant::now();
        let mut table = self.by_address.lock();
        if table.len() >= MAX_ADDRESSES && !table.contains_key(&key) {
            let free = self.free;
            table.retain(|_, failures| failures.next_try(free) > now);
            if table.len() >= MAX_ADDRESSES
                && let Some(oldest) = table.iter().min_by_key(|(_, f)| f.last).map(|(k, _)| *k)
            {
                table.remove(&oldest);
            }
        }
        let failures = table.entry(key).or_insert(Failures {
            count: 0,
            last: now,
        });
        if now.duration_since(failures.last) > FORGOTTEN_AFTER {
            failures.count = 0;
        }
        failures.count += 1;
        failures.last = now;
    }
}

/// What an address is counted under: itself, or for IPv6 its /64.
pub(crate) fn counted_as(addr: ClientAddr) -> IpAddr {
    match addr.0 {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(bits.into())
            }
        },
    }
}

/// The `Retry-After` value of a wait: whole seconds, at least one.
pub(crate) fn retry_after(wait: Duration) -> String {
    wait.as_secs().max(1).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Option<ClientAddr> {
        Some(ClientAddr(text.parse().unwrap()))
    }

    #[test]
    fn an_address_fails_freely_a_few_times_then_waits_longer_each_time() {
        let throttle = Throttle::new(3);
        let bob = at("192.0.2.7");
        for _ in 0..3 {
            assert!(throttle.check(bob).is_ok());
            throttle.failed(bob);
        }
        let first = throttle.check(bob).unwrap_err();
        assert!(
            first <= Duration::from_secs(1) && first > Duration::ZERO,
            "{first:?}"
        );
        throttle.failed(bob);
        let second = throttle.check(bob).unwrap_err();
        assert!(second > Duration::from_secs(1), "{second:?}");
        // Another address is not held back, nor is one without an address.
        assert!(throttle.check(at("192.0.2.8")).is_ok());
        assert!(throttle.check(None).is_ok());
    }

    #[test]
    fn the_delay_stops_growing_at_a_minute() {
        let throttle = Throttle::new(0);
        let bob = at("192.0.2.7");
        for _ in 0..40 {
            throttle.failed(bob);
        }
        assert!(throttle.check(bob).unwrap_err() <= MAX_DELAY);
    }

    #[test]
    fn the_addresses_of_one_ipv6_64_count_as_one() {
        let throttle = Throttle::new(1);
        throttle.failed(at("2001:db8:1:2::1"));
        throttle.failed(at("2001:db8:1:2:ffff::9"));
        assert!(throttle.check(at("2001:db8:1:2::77")).is_err());
        assert!(throttle.check(at("2001:db8:1:3::1")).is_ok());
        throttle.failed(at("::ffff:192.0.2.1"));
        throttle.failed(at("192.0.2.1"));
        assert!(throttle.check(at("192.0.2.1")).is_err());
    }

    #[test]
    fn the_table_of_addresses_stays_bounded() {
        let throttle = Throttle::new(1);
        for n in 0..(MAX_ADDRESSES as u32 + 10) {
            throttle.failed(Some(ClientAddr(IpAddr::V4(n.into()))));
        }
        assert!(throttle.by_address.lock().len() <= MAX_ADDRESSES);
    }
}
