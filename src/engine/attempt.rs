//! Attempts of one node: per-attempt timeout and the backoff between retries.
//!
//! Jitter is seeded from the run id, node id and instance, so a resumed run sleeps the
//! same delays as the run it resumes.

use std::future::Future;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

use super::definition::RetryPolicy;
use super::observer::Event;
use super::report::{NodeError, NodeErrorKind};

/// The delays between attempts: `max_attempts - 1` of them. The base delay grows by
/// `factor` from `initial_delay`; jitter adds up to 100 % of it; `max_delay` caps the result.
/// Delays are whole milliseconds: the `f32` arithmetic leaves noise (100ms × 2 =
/// 200.000003ms) that timers, which round up to the millisecond, would turn into 201ms.
pub fn backoff_delays(policy: &RetryPolicy, seed: u64) -> impl Iterator<Item = Duration> + use<> {
    let mut builder = ExponentialBuilder::default()
        .with_min_delay(policy.initial_delay)
        .with_max_delay(policy.max_delay)
        .with_factor(policy.factor)
        .with_max_times(policy.max_attempts.saturating_sub(1) as usize);
    if policy.jitter {
        builder = builder.with_jitter().with_jitter_seed(seed);
    }
    let cap = policy.max_delay;
    builder
        .build()
        .map(move |delay| whole_millis(delay).min(cap))
}

fn whole_millis(delay: Duration) -> Duration {
    let millis = (delay.as_nanos() + 500_000) / 1_000_000;
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// A stable 64-bit seed (FNV-1a): the same across processes and builds, unlike `std`'s hasher.
pub fn jitter_seed(run_id: &str, node_id: &str, instance: Option<usize>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let instance = instance.map(|i| i.to_string()).unwrap_or_default();
    for part in [run_id, "/", node_id, "/", &instance] {
        for byte in part.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// How a unit (a node, or one `for_each` instance) ended, or how one attempt of it did.
#[derive(Debug)]
pub(crate) enum Outcome {
    Succeeded(serde_json::Value),
    Failed(NodeError),
    Cancelled,
}

impl From<Result<serde_json::Value, NodeError>> for Outcome {
    fn from(result: Result<serde_json::Value, NodeError>) -> Outcome {
        match result {
            Ok(value) => Outcome::Succeeded(value),
            Err(error) => Outcome::Failed(error),
        }
    }
}

/// The delay before attempt `finished + 1`, after `finished` attempts failed; `None` when
/// no attempt is left. The same seed gives the same delay in any process.
pub(crate) fn retry_delay(policy: &RetryPolicy, seed: u64, finished: u32) -> Option<Duration> {
    let index = usize::try_from(finished.checked_sub(1)?).ok()?;
    backoff_delays(policy, seed).nth(index)
}

/// The event of a failed attempt, and when the next one comes.
pub(crate) fn failure_event<'a>(
    run_id: &'a str,
    node: &'a str,
    attempt: u32,
    error: &'a NodeError,
    retry_in: Option<Duration>,
) -> Event<'a> {
    Event::AttemptFailed {
        run_id,
        node,
        attempt,
        error,
        retry_in,
    }
}

/// Bounds an attempt by the node's per-attempt timeout.
pub(crate) async fn with_timeout<Fut>(
    timeout: Option<Duration>,
    attempt: Fut,
) -> Result<serde_json::Value, NodeError>
where
    Fut: Future<Output = Result<serde_json::Value, NodeError>>,
{
    match timeout {
        None => attempt.await,
        Some(limit) => tokio::time::timeout(limit, attempt)
            .await
            .unwrap_or_else(|_| Err(timed_out(limit))),
    }
}

/// The failure of an attempt that ran out of its timeout, `limit`.
pub(crate) fn timed_out(limit: Duration) -> NodeError {
    NodeError::new(
        NodeErrorKind::Timeout,
        format!(
            "attempt timed out after {}",
            super::duration::format_duration(limit)
        ),
    )
}
