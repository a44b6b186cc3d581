//! The wire in front of rmcp: our own stdio transport, which reads JSON-RPC lines, screens
//! each one (`screen.rs`), and hands rmcp only the messages it can serve.
//!
//! Why not rmcp's `AsyncRwTransport`: it drops a line that is not JSON, nested too deep or
//! too long, without a reply, and the client waits forever for one. Lines are read as
//! rmcp reads them (bounded, cancellation-safe) and written whole, never interleaved:
//! lines that are ready while another is being written go out together in the next write
//! (`Writer`), so that a burst of replies costs a few system calls, not one each.
//!
//! Invariant: the lines waiting to be written never hold more than the queue's bound
//! (`--stdio-write-queue`; one line longer than the bound goes alone). A line that does
//! not fit waits for room, and the reader reads the next request only once there is room:
//! a client that stops reading slows the server down instead of growing its memory. A
//! write error (the client is gone) ends the queue, so that nothing waits on it for ever.

mod flights;
pub(crate) mod screen;
#[cfg(test)]
mod session_tests;

use std::sync::Arc;

use anyhow::Context;
use rmcp::model::{
    ClientNotification, CustomNotification, JsonRpcMessage, JsonRpcNotification, RequestId,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServiceExt};
use serde_json::Value;
use tokio::io::DuplexStream;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::server::Server;
use crate::server::shim::{self, Session};
use flights::Flights;
use screen::{INVALID_REQUEST, Screened, error_reply, screen, top_level_id};

/// Serves MCP on this process's stdin and stdout until the client hangs up. A session's
/// replies waiting for the client to read them are bounded by `write_queue` bytes: past
/// it, the server waits for the client before it reads the next request.
pub async fn serve_stdio(server: Server, write_queue: u32) -> anyhow::Result<()> {
    // `stdio_pipes` keeps reads and writes on the IO reactor when the client gave us
    // pipes, saving a blocking-pool hand-off per message.
    let (read, write) = rmcp::transport::stdio_pipes();
    serve(server, (read, write), write_queue, CancellationToken::new()).await
}

/// Serves MCP on one end of an in-memory byte stream, and returns the other end: the
/// server as `serve` runs it, in this process, until the client hangs up or `shutdown`
/// is cancelled.
pub fn serve_in_memory(
    server: Server,
    shutdown: CancellationToken,
) -> (DuplexStream, JoinHandle<anyhow::Result<()>>) {
    let (client, ours) = tokio::io::duplex(1 << 20);
    let pair = tokio::io::split(ours);
    let serving = tokio::spawn(serve(server, pair, DEFAULT_WRITE_QUEUE, shutdown));
    (client, serving)
}

/// Serves MCP on any byte stream pair (stdio, a socket, an in-process `duplex`) until
/// the client hangs up or `shutdown` is cancelled.
async fn serve<R, W>(
    server: Server,
    (read, write): (R, W),
    write_queue: u32,
    shutdown: CancellationToken,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let opened = std::time::Instant::now();
    let mut transport = WireTransport::new(read, write, write_queue.max(1));
    transport.session = Session::new(server.max_subscriptions());
    let running = server
        .observed()
        .serve_with_ct(transport, shutdown)
        .await
        .context("MCP session failed to start")?;
    let ended = running.waiting().await;
    crate::telemetry::metrics::session(opened.elapsed(), "pipe");
    ended.context("MCP session ended abnormally")?;
    Ok(())
}

/// The longest line read: rmcp's own cap (`DEFAULT_MAX_LINE_LENGTH`, 16 MiB).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// The default bound of the write queue, in bytes: `--stdio-write-queue`.
pub const DEFAULT_WRITE_QUEUE: u32 = 8 * 1024 * 1024;

/// How long closing waits for a write in progress: a client that stopped reading must
/// not keep the server from ending.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How much of an oversized line is searched for its id.
const ID_SCAN: usize = 64 * 1024;

/// Outcome of reading one line.
enum Line {
    Whole,
    /// Longer than [`MAX_LINE`]: dropped, with the id its start named, if any.
    Oversized(Option<Value>),
    Eof,
    Io(std::io::Error),
}

struct WireTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Set while the rest of an oversized line is skipped; lives here, not in `read_line`,
    /// because rmcp polls `receive` in a `select!` and may drop it mid-line.
    skipping: Option<Option<Value>>,
    write: Arc<Writer<W>>,
    session: Session,
    /// The client's requests in flight, by id.
    flights: Flights,
}

/// The write side: lines queue in `pending`; whoever finds no write in progress writes
/// everything queued, and goes on until nothing is.
struct Writer<W> {
    pending: std::sync::Mutex<Pending>,
    out: Mutex<W>,
    /// One permit per byte queued or being written, `bound` in all: a line takes its
    /// bytes' worth (at most `bound`) before it queues, and gets them back once written.
    room: Semaphore,
    bound: u32,
    /// How many times the reader waited for room, for the log at the end of the session.
    stalls: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Pending {
    lines: Vec<u8>,
    /// The permits `lines` holds.
    held: u32,
    writing: bool,
}

impl<W> Writer<W> {
    fn new(out: W, bound: u32) -> Writer<W> {
        Writer {
            pending: std::sync::Mutex::default(),
            out: Mutex::new(out),
            room: Semaphore::new(bound as usize),
            bound,
            stalls: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Returns once the queue has room for another line, or has ended.
    async fn has_room(&self) {
        // A read of the count, without taking a permit and giving it back: this runs
        // before every request read.
        if self.room.available_permits() > 0 {
            return;
        }
        self.stalls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = self.room.acquire().await;
    }

    /// The client cannot be written to: what is queued is dropped, and every line waiting
    /// for room, now or later, fails at once.
    fn end(&self) {
        self.room.close();
        let mut pending = self.lock_pending();
        pending.lines = Vec::new();
        pending.held = 0;
    }

    /// Bytes queued or being written.
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.bound as usize - self.room.available_permits()
    }
}

/// Ends a write turn even when its future is dropped mid-write, so that the next line
/// starts a turn of its own instead of waiting behind one that will never come, and gives
/// back the room its lines held.
struct Turn<'w, W> {
    writer: &'w Writer<W>,
    held: u32,
}

impl<W> Drop for Turn<'_, W> {
    fn drop(&mut self) {
        self.writer.lock_pending().writing = false;
        self.writer.room.add_permits(self.held as usize);
    }
}

impl<R, W> WireTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// `write_queue`: the bound of the write queue, in bytes.
    fn new(read: R, write: W, write_queue: u32) -> Self {
        WireTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: None,
            write: Arc::new(Writer::new(write, write_queue.max(1))),
            session: Session::default(),
            flights: Flights::default(),
        }
    }

    /// Reads one line into `self.line`, never letting it grow past [`MAX_LINE`]. A dropped
    /// read leaves the partial line in place for the next call.
    async fn read_line(&mut self) -> Line {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(error) => return Line::Io(error),
            };
            if available.is_empty() {
                // A last line without its newline is a line all the same; the next call
                // finds the end again.
                return match self.skipping.take() {
                    Some(id) => Line::Oversized(id),
                    None if !self.line.is_empty() => Line::Whole,
                    None => Line::Eof,
                };
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            if self.skipping.is_none() && self.line.len() + take > MAX_LINE + 1 {
                let start = &self.line[..self.line.len().min(ID_SCAN)];
                self.skipping = Some(top_level_id(start));
                self.line.clear();
            }
            if self.skipping.is_none() {
                self.line.extend_from_slice(&available[..take]);
            }
            self.read.consume(take);
            if newline.is_some() {
                return match self.skipping.take() {
                    Some(id) => Line::Oversized(id),
                    None => Line::Whole,
                };
            }
        }
    }

    /// Takes a request off, or refuses it if its id is in flight; turns a cancel of a call
    /// on rmcp's path into the marked notification the handler acts on. `None`: nothing
    /// more to do.
    fn admit(&self, message: RxJsonRpcMessage<RoleServer>) -> Option<RxJsonRpcMessage<RoleServer>> {
        match &message {
            JsonRpcMessage::Request(request) if !self.flights.take_off(&request.id) => {
                tracing::warn!(id = %request.id, "a request reused the id of one in flight");
                let id = serde_json::to_value(&request.id).ok();
                let text = format!("invalid request: id {} is already in flight", request.id);
                self.reply(error_reply(id, INVALID_REQUEST, &text));
                None
            }
            JsonRpcMessage::Notification(notification) => match &notification.notification {
                ClientNotification::CancelledNotification(cancelled) => {
                    let id = cancelled.params.request_id.as_ref()?;
                    self.flights
                        .cancel(id)
                        .then(|| cancel_in_handler(id, &cancelled.params))
                }
                _ => Some(message),
            },
            _ => Some(message),
        }
    }

    /// Writes a reply of our own. Spawned, so that a `receive` dropped by rmcp's `select!`
    /// never leaves half a line on the wire.
    fn reply(&self, reply: Value) {
        let write = Arc::clone(&self.write);
        tokio::spawn(async move {
            if let Err(error) = write_line(&write, &reply).await {
                tracing::warn!(%error, "an error reply could not be written");
            }
        });
    }
}

/// Queues a message's line and, unless a write is in progress (which will take it along),
/// writes what is queued.
async fn write_line<W, T>(writer: &Writer<W>, message: &T) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
    T: serde::Serialize,
{
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let cost = u32::try_from(line.len())
        .unwrap_or(u32::MAX)
        .min(writer.bound);
    // Room is there nearly always: taken without building the future that waits for it.
    let taken = match writer.room.try_acquire_many(cost) {
        Err(tokio::sync::TryAcquireError::NoPermits) => writer.room.acquire_many(cost).await,
        Ok(permit) => Ok(permit),
        Err(tokio::sync::TryAcquireError::Closed) => {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
    };
    match taken {
        Ok(permit) => permit.forget(),
        Err(_) => return Err(std::io::ErrorKind::BrokenPipe.into()),
    }
    let held = {
        let mut pending = writer.lock_pending();
        if pending.writing {
            pending.lines.extend_from_slice(&line);
            pending.held += cost;
            return Ok(());
        }
        pending.writing = true;
        if !pending.lines.is_empty() {
            pending.lines.extend_from_slice(&line);
            line = std::mem::take(&mut pending.lines);
        }
        cost + std::mem::take(&mut pending.held)
    };
    let mut turn = Turn { writer, held };
    let mut out = writer.out.lock().await;
    let mut chunk = line;
    loop {
        let written = match out.write_all(&chunk).await {
            Ok(()) => out.flush().await,
            Err(error) => Err(error),
        };
        if let Err(error) = written {
            writer.end();
            return Err(error);
        }
        chunk.clear();
        writer
            .room
            .add_permits(std::mem::take(&mut turn.held) as usize);
        let mut pending = writer.lock_pending();
        if pending.lines.is_empty() {
            pending.writing = false;
            drop(pending);
            std::mem::forget(turn);
            return Ok(());
        }
        // The queued lines go next; the written buffer takes their place, its capacity
        // kept for the lines that come after.
        std::mem::swap(&mut chunk, &mut pending.lines);
        turn.held = std::mem::take(&mut pending.held);
    }
}

/// The notification by which the handler stops the work of a cancelled call on rmcp's
/// path. Not rmcp's own: rmcp would forget the call at once, and drop its reply where the
/// wire never sees it, so that its id would stay in flight for ever; this way the reply
/// comes back to the transport, which lands the call and drops the reply.
fn cancel_in_handler(
    id: &RequestId,
    params: &rmcp::model::CancelledNotificationParam,
) -> RxJsonRpcMessage<RoleServer> {
    let mut notification = CustomNotification::new(
        format!("{}{}", shim::PREFIX, shim::CANCELLED),
        Some(serde_json::json!({ "requestId": id, "reason": params.reason })),
    );
    notification.extensions.insert(shim::Renamed);
    JsonRpcMessage::Notification(JsonRpcNotification {
        jsonrpc: rmcp::model::JsonRpcVersion2_0,
        notification: ClientNotification::CustomNotification(notification),
    })
}

impl<R, W> Transport<RoleServer> for WireTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = Arc::clone(&self.write);
        let patched = self.session.outbound(&item);
        let wanted = match &item {
            JsonRpcMessage::Response(response) => self.flights.land(&response.id),
            JsonRpcMessage::Error(error) => {
                error.id.as_ref().is_none_or(|id| self.flights.land(id))
            }
            _ => true,
        };
        async move {
            match (wanted, patched) {
                // The client cancelled the call: its reply is not wanted.
                (false, _) => Ok(()),
                (true, None) => write_line(&write, &item).await,
                (true, Some(message)) => write_line(&write, &message).await,
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // Backpressure: the next request waits while the replies wait for the client.
            self.write.has_room().await;
            match self.read_line().await {
                Line::Whole => {}
                Line::Oversized(id) => {
                    tracing::warn!(max = MAX_LINE, "an incoming line was too long and dropped");
                    let message = format!("invalid request: longer than {MAX_LINE} bytes");
                    self.reply(error_reply(id, INVALID_REQUEST, &message));
                    continue;
                }
                Line::Eof => return None,
                Line::Io(error) => {
                    tracing::error!(%error, "reading the client's messages failed");
                    return None;
                }
            }
            let message = match screen(&self.line) {
                Screened::Message(message) => match self.session.inbound(&self.line, *message) {
                    Ok(message) => Some(message),
                    Err(reply) => {
                        self.reply(reply);
                        None
                    }
                },
                Screened::Reply(reply) => {
                    self.reply(reply);
                    None
                }
                Screened::Skip => None,
            };
            self.line.clear();
            let message = message.and_then(|m| self.admit(m));
            if message.is_some() {
                return message;
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let stalls = self.write.stalls.load(std::sync::atomic::Ordering::Relaxed);
        if stalls > 0 {
            tracing::info!(
                stalls,
                "the reader waited for the client to read its replies"
            );
        }
        let shutdown = async { self.write.out.lock().await.shutdown().await };
        match tokio::time::timeout(CLOSE_GRACE, shutdown).await {
            Ok(closed) => closed,
            Err(_) => {
                tracing::warn!("the client stopped reading; replies still queued were dropped");
                self.write.end();
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn ping(id: u64) -> String {
        format!(
            "{}\n",
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_stops_reading_holds_the_server_at_the_queue_bound_until_it_goes() {
        use rmcp::ServiceExt;
        use std::time::{Duration, Instant};
        use tokio::io::AsyncBufReadExt;

        const BOUND: u32 = 4096;
        let (client, server_end) = tokio::io::duplex(1024);
        let (read, write) = tokio::io::split(server_end);
        let server = crate::server::Server::new(crate::app::App::in_memory());
        let transport = WireTransport::new(read, write, BOUND);
        let writer = Arc::clone(&transport.write);
        let serving = tokio::spawn(async move {
            let running = server
                .serve_with_ct(transport, tokio_util::sync::CancellationToken::new())
                .await
                .unwrap();
            let _ = running.waiting().await;
        });
        let (client_read, mut client_write) = tokio::io::split(client);
        let mut replies = tokio::io::BufReader::new(client_read).lines();
        let opening = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "slow", "version": "1"}}});
        client_write
            .write_all(format!("{opening}\n").as_bytes())
            .await
            .unwrap();
        assert!(replies.next_line().await.unwrap().is_some());
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        client_write
            .write_all(format!("{initialized}\n").as_bytes())
            .await
            .unwrap();

        // 200 KB of pings, whose replies nobody reads.
        let flood = tokio::spawn(async move {
            for id in 1..=5_000 {
                client_write.write_all(ping(id).as_bytes()).await.unwrap();
            }
            client_write
        });
        let started = Instant::now();
        while writer.stalls.load(std::sync::atomic::Ordering::Relaxed) == 0 && !flood.is_finished()
        {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "neither stalled nor read all"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The server stopped reading: the client cannot send the rest, and what waits to be
        // written stays within the bound.
        assert!(
            !flood.is_finished(),
            "the server read every request of a client that reads nothing"
        );
        assert!(
            writer.queued() <= BOUND as usize,
            "{} bytes queued",
            writer.queued()
        );
        assert!(writer.lock_pending().lines.len() <= BOUND as usize);

        // The client goes: the session ends, the writes that waited for it failing.
        flood.abort();
        let _ = flood.await;
        drop(replies);
        tokio::time::timeout(Duration::from_secs(30), serving)
            .await
            .expect("the session ends once the client is gone")
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_written_at_once_all_go_out_whole() {
        let (write, mut read) = tokio::io::duplex(256);
        let writer = Arc::new(Writer::new(write, DEFAULT_WRITE_QUEUE));
        let senders: Vec<_> = (0..200)
            .map(|i| {
                let writer = Arc::clone(&writer);
                tokio::spawn(async move {
                    let message = serde_json::json!({ "id": i, "pad": "x".repeat(i % 50) });
                    write_line(&writer, &message).await
                })
            })
            .collect();
        let reader = tokio::spawn(async move {
            let mut text = String::new();
            // Whole lines only: `lines()` would count a last line still being written.
            while text.matches('\n').count() < 200 {
                let mut chunk = [0u8; 1024];
                let n = read.read(&mut chunk).await.unwrap();
                text.push_str(std::str::from_utf8(&chunk[..n]).unwrap());
            }
            text
        });
        for sender in senders {
            sender.await.unwrap().unwrap();
        }
        let text = reader.await.unwrap();
        let mut ids: Vec<u64> = text
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).expect("a whole line")["id"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..200).collect::<Vec<_>>());
    }
}
