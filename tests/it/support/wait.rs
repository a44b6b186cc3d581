//! Waiting for what another process or thread does: a check polled until it holds, the
//! test failing once a limit has passed.

use std::time::{Duration, Instant};

/// How often a check is polled: often enough that a test waits little past the moment it
/// holds, seldom enough that polling a store costs little.
const POLL: Duration = Duration::from_millis(10);

/// How long [`wait_until`] waits: what a child process does within a second or two, with
/// room for a machine busy with other tests.
const PATIENCE: Duration = Duration::from_secs(20);

/// Polls `check` until it holds; fails the test, naming `what` it waited for, after 20 s.
pub(crate) fn wait_until(what: &str, check: impl FnMut() -> bool) {
    wait_until_within(what, PATIENCE, check);
}

/// [`wait_until`], failing the test after `limit`.
pub(crate) fn wait_until_within(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let limit = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < limit, "timed out waiting until {what}");
        std::thread::sleep(POLL);
    }
}
