//! Attempts of one node: per-attempt timeout, retries with backoff, cooperative cancel.
//!
//! Jitter is seeded from the run id, node id and instance, so a resumed run sleeps the
//! same delays as the run it resumes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio_util::sync::CancellationToken;

use super::definition::RetryPolicy;
use super::observer::{Event, Observer};
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

/// How a unit (a node, or one `for_each` instance) ended.
#[derive(Debug)]
pub enum Outcome {
    Succeeded(serde_json::Value),
    Failed(NodeError),
    Cancelled,
}

/// Who is attempting, for events and the jitter seed.
pub struct AttemptScope<'a> {
    pub run_id: &'a str,
    pub node_id: &'a str,
    pub instance: Option<usize>,
    pub policy: RetryPolicy,
    pub timeout: Option<Duration>,
    pub stop: &'a CancellationToken,
    pub observer: Option<&'a Arc<dyn Observer>>,
}

/// Runs `attempt` until it succeeds, fails for good, or the run stops. Returns the outcome
/// and the number of attempts made. `first`, when given, is the error of a first attempt
/// already made elsewhere (synchronously, by the scheduler): the loop carries on from it.
pub async fn run_attempts<F, Fut>(
    scope: AttemptScope<'_>,
    mut first: Option<NodeError>,
    mut attempt: F,
) -> (Outcome, u32)
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<serde_json::Value, NodeError>>,
{
    // Built at the first failure: most attempts succeed and never need it.
    let mut delays = None;
    let mut number = 0;
    loop {
        number += 1;
        let result = match first.take() {
            Some(error) => Err(error),
            None => tokio::select! {
                biased;
                _ = scope.stop.cancelled() => return (Outcome::Cancelled, number),
                result = with_timeout(scope.timeout, attempt(number)) => result,
            },
        };
        let error = match result {
            Ok(value) => return (Outcome::Succeeded(value), number),
            Err(error) => error,
        };
        let retry_in = match error.is_retryable() {
            true => delays
                .get_or_insert_with(|| {
                    let seed = jitter_seed(scope.run_id, scope.node_id, scope.instance);
                    backoff_delays(&scope.policy, seed)
                })
                .next(),
            false => None,
        };
        report_failure(&scope, number, &error, retry_in);
        let Some(delay) = retry_in else {
            return (Outcome::Failed(error), number);
        };
        tokio::select! {
            biased;
            _ = scope.stop.cancelled() => return (Outcome::Cancelled, number),
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// Tells the observer that attempt `number` failed, and when the next one comes.
pub fn report_failure(
    scope: &AttemptScope<'_>,
    number: u32,
    error: &NodeError,
    retry_in: Option<Duration>,
) {
    if let Some(observer) = scope.observer {
        observer.event(&Event::AttemptFailed {
            run_id: scope.run_id,
            node: scope.node_id,
            attempt: number,
            error,
            retry_in,
        });
    }
}

async fn with_timeout<Fut>(
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
            .unwrap_or_else(|_| {
                Err(NodeError::new(
                    NodeErrorKind::Timeout,
                    format!(
                        "attempt timed out after {}",
                        super::duration::format_duration(limit)
                    ),
                ))
            }),
    }
}
