//! The wire in front of rmcp: our own stdio transport, which reads JSON-RPC lines, screens
//! each one (`screen.rs`), and hands rmcp only the messages it can serve.
//!
//! Why not rmcp's `AsyncRwTransport`: it drops a line that is not JSON, nested too deep or
//! too long, without a reply, and the client waits forever for one. Lines are read as
//! rmcp reads them (bounded, cancellation-safe) and written whole, never interleaved:
//! lines that are ready while another is being written go out together in the next write
//! (`Writer`), so that a burst of replies costs a few system calls, not one each.

mod direct;
pub(crate) mod fast;
pub(crate) mod legacy;
pub(crate) mod screen;

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use legacy::Session;
use screen::{INVALID_REQUEST, Screened, error_reply, screen, top_level_id};

/// The longest line read: rmcp's own cap (`DEFAULT_MAX_LINE_LENGTH`, 16 MiB).
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

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

pub(crate) struct WireTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Set while the rest of an oversized line is skipped; lives here, not in `read_line`,
    /// because rmcp polls `receive` in a `select!` and may drop it mid-line.
    skipping: Option<Option<Value>>,
    write: Arc<Writer<W>>,
    session: Session,
    /// Answers plain todo calls beside rmcp (`direct.rs`); none in tests that measure
    /// rmcp's own path against it.
    lane: Option<direct::Lane>,
}

/// The write side: lines queue in `pending`; whoever finds no write in progress writes
/// everything queued, and goes on until nothing is.
pub(crate) struct Writer<W> {
    pending: std::sync::Mutex<Pending>,
    out: Mutex<W>,
}

#[derive(Default)]
struct Pending {
    lines: Vec<u8>,
    writing: bool,
}

impl<W> Writer<W> {
    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Ends a write turn even when its future is dropped mid-write, so that the next line
/// starts a turn of its own instead of waiting behind one that will never come.
struct Turn<'w, W>(&'w Writer<W>);

impl<W> Drop for Turn<'_, W> {
    fn drop(&mut self) {
        self.0.lock_pending().writing = false;
    }
}

impl<R, W> WireTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// `tasks`: whether the server serves tasks, and so advertises them to 2025-11-25
    /// clients.
    pub(crate) fn new(read: R, write: W, tasks: bool) -> Self {
        WireTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: None,
            write: Arc::new(Writer {
                pending: std::sync::Mutex::default(),
                out: Mutex::new(write),
            }),
            session: Session::new(tasks),
            lane: None,
        }
    }

    /// Plain calls of `server`'s todo tools are answered on the direct lane.
    pub(crate) fn with_lane(mut self, server: crate::server::Server) -> Self {
        self.lane = Some(direct::Lane::new(server));
        self
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
                return Line::Eof;
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
    {
        let mut pending = writer.lock_pending();
        if pending.writing {
            pending.lines.extend_from_slice(&line);
            return Ok(());
        }
        pending.writing = true;
        if !pending.lines.is_empty() {
            pending.lines.extend_from_slice(&line);
            line = std::mem::take(&mut pending.lines);
        }
    }
    let turn = Turn(writer);
    let mut out = writer.out.lock().await;
    let mut chunk = line;
    loop {
        out.write_all(&chunk).await?;
        out.flush().await?;
        chunk.clear();
        let mut pending = writer.lock_pending();
        if pending.lines.is_empty() {
            pending.writing = false;
            std::mem::forget(turn);
            return Ok(());
        }
        // The queued lines go next; the written buffer takes their place, its capacity
        // kept for the lines that come after.
        std::mem::swap(&mut chunk, &mut pending.lines);
    }
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
        async move {
            match patched {
                None => write_line(&write, &item).await,
                Some(message) => write_line(&write, &message).await,
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Line::Whole => {}
                Line::Oversized(id) => {
                    tracing::warn!(max = MAX_LINE, "an incoming line was too long and dropped");
                    let message = format!("invalid request: longer than {MAX_LINE} bytes");
                    self.reply(error_reply(id, INVALID_REQUEST, &message));
                    continue;
                }
                Line::Eof => {
                    direct::ended(self.lane.as_ref()).await;
                    return None;
                }
                Line::Io(error) => {
                    tracing::error!(%error, "reading the client's messages failed");
                    direct::ended(self.lane.as_ref()).await;
                    return None;
                }
            }
            let message = match screen(&self.line) {
                Screened::Message(message) => Some(self.session.inbound(&self.line, *message)),
                Screened::Reply(reply) => {
                    self.reply(reply);
                    None
                }
                Screened::Skip => None,
            };
            self.line.clear();
            let message = match &self.lane {
                Some(lane) => message.and_then(|m| lane.take(m, &self.session, &self.write)),
                None => message,
            };
            if message.is_some() {
                return message;
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.out.lock().await.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_written_at_once_all_go_out_whole() {
        let (write, mut read) = tokio::io::duplex(256);
        let writer = Arc::new(Writer {
            pending: std::sync::Mutex::default(),
            out: Mutex::new(write),
        });
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
