//! The HTTP connections themselves, before any request reaches the gate: how many may be
//! open, how long a client may take to send a request's head, how long a keep-alive
//! connection may sit idle, and what happens when `accept` fails.
//!
//! All of this is checked before any token is, so that a peer that never authenticates
//! cannot hold the server's file descriptors, memory or CPU:
//! - at most `max` connections are open; when one more arrives (or `accept` runs out of
//!   file descriptors), the connection that has waited longest for a request head is
//!   closed to make room, so that a flood of connections that never send a request
//!   cannot keep clients out; when every connection is serving or idle, new ones wait
//!   in the kernel's accept backlog (no descriptor, no task) until one closes;
//! - a connection must deliver a complete request head within `header_timeout` of its
//!   first byte (or of being accepted), else it is closed;
//! - a keep-alive connection with no request in progress is closed after
//!   `idle_timeout`; a response still streaming (an SSE stream) is a request in progress
//!   and is never cut;
//! - a failing `accept` (out of file descriptors, say) is retried after a pause that
//!   grows to a second, with one log line per burst of failures.
//!
//! hyper's own header-read timeout is not used: it starts counting as soon as a
//! connection turns idle, so it would close every idle keep-alive connection after the
//! header timeout, and the idle timeout could never be longer.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Body, Gate};
use crate::auth::ClientAddr;

/// The longest pause between two attempts to accept after `accept` failed.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The first pause after `accept` failed.
const FIRST_BACKOFF: Duration = Duration::from_millis(5);

/// A connection is closed to make room only once it has waited this long for a request
/// head: one just accepted has had no chance to read the request its client sent.
const EVICTABLE_AFTER: Duration = Duration::from_millis(100);

/// The limits on connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// At most this many connections are open at once.
    pub max: usize,
    /// How long a client has to send a complete request head.
    pub header_timeout: Duration,
    /// How long a keep-alive connection may wait for its next request.
    pub idle_timeout: Duration,
}

/// Accepts connections and serves each on a task of its own until `shutdown` is
/// cancelled; returns the tasks of the connections still open.
pub(super) async fn accept(
    listener: TcpListener,
    gate: Arc<Gate>,
    limits: Limits,
    shutdown: CancellationToken,
) -> JoinSet<()> {
    let slots = Arc::new(Semaphore::new(limits.max));
    let open = Open::default();
    let mut connections = JoinSet::new();
    let mut backoff = Backoff::default();
    loop {
        // Finished connections are dropped here, so that the set holds open ones only.
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) if out_of_descriptors(&error) && open.evict_oldest_waiting() => {
                // The evicted connection's task, woken, runs first and frees a descriptor.
                tokio::task::yield_now().await;
                continue;
            }
            Err(error) => {
                let pause = backoff.failed(&error);
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(pause) => continue,
                }
            }
        };
        backoff.succeeded();
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                // Full: make room if a connection idles before its request; else wait,
                // accepting nothing more meanwhile.
                open.evict_oldest_waiting();
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
                }
            }
        };
        // Responses go out in pieces (the head, then each SSE event): without this,
        // Nagle's algorithm holds each piece back until the client acknowledges the one
        // before, which a client delaying its acknowledgements makes 40 ms.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
        }
        let activity = Arc::new(Activity::new());
        open.add(&activity);
        let connection = serve(
            stream,
            peer,
            gate.clone(),
            limits,
            activity,
            shutdown.clone(),
            slot,
        );
        connections.spawn(connection);
    }
    connections
}

/// Whether `accept` failed for want of file descriptors (of the process or the system).
fn out_of_descriptors(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// The connections open, to close the one that has waited longest for a request head.
#[derive(Default)]
struct Open(Mutex<Vec<Weak<Activity>>>);

impl Open {
    fn add(&self, activity: &Arc<Activity>) {
        let mut open = self.0.lock();
        // Closed connections are forgotten whenever the list would grow.
        if open.len() == open.capacity() {
            open.retain(|connection| connection.strong_count() > 0);
        }
        open.push(Arc::downgrade(activity));
    }

    /// Closes the connection that has waited longest for a request head, if one has
    /// waited [`EVICTABLE_AFTER`]; whether one did.
    fn evict_oldest_waiting(&self) -> bool {
        let waited_since = Instant::now() - EVICTABLE_AFTER;
        let mut open = self.0.lock();
        open.retain(|connection| connection.strong_count() > 0);
        let oldest = open
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|activity| !activity.evicted.load(Ordering::Relaxed))
            .filter_map(|activity| match *activity.phase.lock() {
                Phase::Head(since) if since <= waited_since => Some((since, activity.clone())),
                Phase::Head(_) | Phase::Serving(_) | Phase::Idle(_) => None,
            })
            .min_by_key(|(since, _)| *since);
        drop(open);
        match oldest {
            Some((_, activity)) => {
                activity.evict();
                true
            }
            None => false,
        }
    }
}

/// The pauses after failed `accept`s: growing while they fail, logged once per burst.
#[derive(Default)]
struct Backoff {
    /// The failures since the last accepted connection.
    failures: u64,
    pause: Duration,
}

impl Backoff {
    /// How long to wait after `error`.
    fn failed(&mut self, error: &io::Error) -> Duration {
        if self.failures == 0 {
            tracing::warn!(
                %error,
                "cannot accept connections; retrying with pauses of up to {MAX_BACKOFF:?} \
                 (if out of file descriptors, raise `ulimit -n` or lower \
                 --http-max-connections)"
            );
        }
        self.failures += 1;
        self.pause = (self.pause * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
        self.pause
    }

    fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::info!(failures = self.failures, "accepting connections again");
        }
        *self = Backoff::default();
    }
}

/// Serves one connection until it ends, times out, or shutdown has let it finish.
async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    gate: Arc<Gate>,
    limits: Limits,
    activity: Arc<Activity>,
    shutdown: CancellationToken,
    _slot: OwnedSemaphorePermit,
) {
    let io = TokioIo::new(Watched {
        stream,
        activity: activity.clone(),
    });
    let served = activity.clone();
    let service = hyper::service::service_fn(move |mut request: http::Request<_>| {
        request.extensions_mut().insert(ClientAddr(peer.ip()));
        let busy = served.begin();
        let handled = gate.clone().handle(request);
        async move {
            let response = handled.await?;
            Ok::<_, std::convert::Infallible>(busy.until_sent(response))
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, service);
    tokio::pin!(connection);
    let served = tokio::select! {
        served = connection.as_mut() => served,
        expired = activity.expired(limits) => {
            tracing::debug!(%peer, "closing the HTTP connection: {expired}");
            return;
        }
        _ = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = served {
        tracing::debug!(%peer, %error, "HTTP connection ended with an error");
    }
}

/// What a connection is doing, which decides the timeout that applies to it.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for a request's head, since this instant.
    Head(Instant),
    /// This many requests are being served (their responses not yet all sent).
    Serving(usize),
    /// Waiting for the next request since this instant, with no byte of it yet.
    Idle(Instant),
}

/// A connection's phase, shared by its reads, its requests and its watchdog.
struct Activity {
    phase: Mutex<Phase>,
    /// Set to close the connection now, to make room for another.
    evicted: AtomicBool,
    changed: Notify,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            phase: Mutex::new(Phase::Head(Instant::now())),
            evicted: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::Relaxed);
        self.changed.notify_waiters();
    }

    fn set(&self, phase: Phase) {
        *self.phase.lock() = phase;
        self.changed.notify_waiters();
    }

    /// Bytes arrived: an idle connection now owes a request head.
    fn received(&self) {
        let mut phase = self.phase.lock();
        if let Phase::Idle(_) = *phase {
            *phase = Phase::Head(Instant::now());
            drop(phase);
            self.changed.notify_waiters();
        }
    }

    /// A request's head was read: the connection serves it until its response is sent.
    fn begin(self: &Arc<Self>) -> Busy {
        let serving = match *self.phase.lock() {
            Phase::Serving(n) => n + 1,
            Phase::Head(_) | Phase::Idle(_) => 1,
        };
        self.set(Phase::Serving(serving));
        Busy(self.clone())
    }

    /// Resolves when the connection has overstayed its phase, saying which way.
    async fn expired(&self, limits: Limits) -> &'static str {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the phase is read, so that no change is missed.
            changed.as_mut().enable();
            if self.evicted.load(Ordering::Relaxed) {
                return "closed to make room for another, having sent no request head";
            }
            let deadline = match *self.phase.lock() {
                Phase::Head(since) => Some((since + limits.header_timeout, "no request head")),
                Phase::Idle(since) => Some((since + limits.idle_timeout, "idle")),
                Phase::Serving(_) => None,
            };
            match deadline {
                None => changed.await,
                Some((at, why)) => tokio::select! {
                    _ = changed => {}
                    _ = tokio::time::sleep_until(at) => return why,
                },
            }
        }
    }
}

/// A request being served; when dropped, the connection is idle unless it serves others.
struct Busy(Arc<Activity>);

impl Busy {
    /// The response, holding this until its body has been sent or dropped.
    fn until_sent(self, response: http::Response<Body>) -> http::Response<Body> {
        use http_body_util::BodyExt;
        response.map(|body| Holding { body, _busy: self }.boxed())
    }
}

/// A response body that keeps its request counted as in progress while it lasts; its
/// size, when known, still goes out as `Content-Length`.
struct Holding {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for Holding {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let next = match *self.0.phase.lock() {
            Phase::Serving(n) if n > 1 => Phase::Serving(n - 1),
            _ => Phase::Idle(Instant::now()),
        };
        self.0.set(next);
    }
}

/// A TCP stream that tells its connection's [`Activity`] when bytes arrive.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.received();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_after_failed_accepts_grow_to_a_second_and_start_over_after_a_success() {
        let mut backoff = Backoff::default();
        let error = io::Error::from_raw_os_error(libc::EMFILE);
        let pauses: Vec<Duration> = (0..12).map(|_| backoff.failed(&error)).collect();
        assert_eq!(pauses[0], FIRST_BACKOFF);
        assert!(pauses.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(pauses[11], MAX_BACKOFF);
        backoff.succeeded();
        assert_eq!(backoff.failed(&error), FIRST_BACKOFF);
    }
}
