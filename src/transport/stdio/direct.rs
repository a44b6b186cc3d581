//! The direct lane: a plain call of a task-manager tool, answered beside rmcp's service
//! loop instead of through it.
//!
//! rmcp serves each request by spawning a task for its handler, sending the result
//! through a channel back to its loop, and spawning a second task to write it; on one
//! worker thread that bookkeeping cost about a sixth of an `add_task` (`benches/HISTORY.md`,
//! 2026-12-05). The calls clients make most, `add_task` and the other todo tools called
//! without a task in a 2025-11-25 session, need none of what it buys (no server-to-client
//! requests, no progress, nothing to stop mid-way): the lane spawns one task that runs
//! rmcp's own request handling (`Service::handle_request`, the dispatch and the shaping
//! of the result for the client's protocol version that rmcp's loop runs) and writes
//! its reply.
//!
//! Invariant: the lane answers exactly what rmcp's path answers, by rmcp's own function;
//! it takes only a todo call without a task, a 2026-07-28 `_meta`, input responses or
//! request state, in a session that is open (`initialized` seen, rmcp's peer known);
//! anything else goes to rmcp. Its calls are in the transport's one table of requests in
//! flight (`flights.rs`) as rmcp's are, taken off, cancelled and landed the same way; and
//! the transport reports the end of its input only once every call the lane took has
//! been answered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::{ClientRequest, GetExtensions, GetMeta, JsonRpcMessage};
use rmcp::service::{Peer, RequestContext, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::{RoleServer, Service};
use tokio::io::AsyncWrite;
use tokio::sync::Notify;

use super::flights::Flights;
use super::{Writer, write_line};
use crate::server::Server;
use crate::server::shim;

/// How long the end of input waits for the lane's calls in flight: rmcp's own grace for
/// its handlers' replies when a client hangs up.
const DRAIN: Duration = Duration::from_secs(5);

/// rmcp's handle on the session, which its request handling reads (the client's
/// protocol version, for one): set once the session is open.
pub(crate) type PeerSlot = Arc<OnceLock<Peer<RoleServer>>>;

pub(super) struct Lane {
    /// Shared with each call's task: one reference count a call, not a clone of every
    /// handle a `Server` holds.
    server: Arc<Server>,
    peer: PeerSlot,
    /// The session's requests in flight, shared with the transport, which takes each off.
    flights: Arc<Flights>,
    /// The lane's calls not yet answered, for the end of input to wait on.
    running: Arc<Running>,
}

#[derive(Default)]
struct Running {
    calls: std::sync::Mutex<usize>,
    idle: Notify,
    /// How many calls the lane has taken, for the log at the end of the session.
    taken: AtomicU64,
}

impl Running {
    fn count(&self) -> std::sync::MutexGuard<'_, usize> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn done(&self) {
        let mut calls = self.count();
        *calls -= 1;
        if *calls == 0 {
            self.idle.notify_waiters();
        }
    }

    async fn idle(&self) {
        loop {
            let idle = self.idle.notified();
            if *self.count() == 0 {
                return;
            }
            idle.await;
        }
    }
}

impl Lane {
    pub(super) fn new(server: Server, peer: PeerSlot, flights: Arc<Flights>) -> Lane {
        Lane {
            server: Arc::new(server),
            peer,
            flights,
            running: Arc::default(),
        }
    }

    /// Takes `message` and answers it on `writer` if it is a call the lane serves in
    /// `session`; otherwise gives it back for rmcp. The transport has taken it off.
    pub(super) fn take<W>(
        &self,
        message: RxJsonRpcMessage<RoleServer>,
        session: &shim::Session,
        writer: &Arc<Writer<W>>,
    ) -> Option<RxJsonRpcMessage<RoleServer>>
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (mut request, peer) = match (message, self.peer.get()) {
            (JsonRpcMessage::Request(request), Some(peer))
                if session.open_before_2026() && self.serves(&request.request) =>
            {
                (request, peer.clone())
            }
            (other, _) => return Some(other),
        };
        // The context rmcp's loop gives a request's handler.
        let mut context = RequestContext::new(request.id.clone(), peer);
        std::mem::swap(&mut context.meta, request.request.get_meta_mut());
        std::mem::swap(&mut context.extensions, request.request.extensions_mut());
        *self.running.count() += 1;
        self.running.taken.fetch_add(1, Ordering::Relaxed);
        let server = Arc::clone(&self.server);
        let flights = Arc::clone(&self.flights);
        let running = Arc::clone(&self.running);
        let writer = Arc::clone(writer);
        tokio::spawn(async move {
            let id = request.id;
            let handled = Service::<RoleServer>::handle_request(&*server, request.request, context);
            let reply: TxJsonRpcMessage<RoleServer> = match handled.await {
                Ok(result) => JsonRpcMessage::response(result, id.clone()),
                Err(error) => JsonRpcMessage::error(error, Some(id.clone())),
            };
            if flights.land(&id)
                && let Err(error) = write_line(&writer, &reply).await
            {
                tracing::warn!(%error, "a reply could not be written");
            }
            running.done();
        });
        None
    }

    /// Whether the lane answers this request: a todo tool's call without the 2026-07-28
    /// `_meta`, asking for nothing beyond its name and arguments. (A 2025-11-25
    /// `params.task` never gets here: the 2025-11-25 layer has renamed that call already.)
    fn serves(&self, request: &ClientRequest) -> bool {
        let ClientRequest::CallToolRequest(call) = request else {
            return false;
        };
        self.server.app().tools().route(&call.params.name) == Some(crate::app::Route::Todo)
            && call.params.input_responses.is_none()
            && call.params.request_state.is_none()
            && !shim::declares_modern(request)
    }

    /// Waits until every call the lane took has landed, for at most [`DRAIN`].
    async fn drain(&self) {
        if tokio::time::timeout(DRAIN, self.running.idle()).await.is_err() {
            tracing::warn!("calls still running when the client hung up were left unanswered");
        }
        let calls = self.running.taken.load(Ordering::Relaxed);
        tracing::debug!(calls, "calls answered on the direct lane");
    }

    /// rmcp's handle on the session, for whoever serves the transport to set.
    pub(super) fn peer(&self) -> PeerSlot {
        Arc::clone(&self.peer)
    }
}

/// The end of input: once the lane's calls in flight are answered, rmcp may close.
pub(super) async fn ended(lane: Option<&Lane>) {
    if let Some(lane) = lane {
        lane.drain().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Held, TodoFilter};
    use crate::transport::stdio::WireTransport;
    use rmcp::ServiceExt;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio_util::sync::CancellationToken;

    fn server() -> Server {
        Server::new(crate::app::App::in_memory())
    }

    fn opening(version: &str) -> Vec<String> {
        vec![
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": {"name": "lane", "version": "1"}}})
            .to_string(),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        ]
    }

    fn call(id: u64, name: &str, arguments: Value) -> String {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}})
        .to_string()
    }

    /// Serves `transport` with `server` until the client hangs up, as `stdio::serve` does.
    fn serve<R, W>(server: Server, transport: WireTransport<R, W>) -> tokio::task::JoinHandle<()>
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let peer = transport.lane.as_ref().map(Lane::peer);
        tokio::spawn(async move {
            let running = server
                .serve_with_ct(transport, CancellationToken::new())
                .await
                .unwrap();
            if let Some(peer) = peer {
                let _ = peer.set(running.peer().clone());
            }
            running.waiting().await.unwrap();
        })
    }

    /// Sends the opening and waits until the lane can serve: the answer to `initialize`
    /// read, and rmcp's handle on the session set. (Calls sent before it go to rmcp.)
    async fn open<R, W>(
        client: &mut W,
        replies: &mut tokio::io::Lines<BufReader<R>>,
        peer: Option<PeerSlot>,
    ) -> String
    where
        R: tokio::io::AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        send(client, &opening("2025-11-25")).await;
        let initialized = replies.next_line().await.unwrap().expect("an answer");
        let started = std::time::Instant::now();
        while peer.as_ref().is_some_and(|peer| peer.get().is_none()) {
            assert!(started.elapsed() < Duration::from_secs(10), "the session opens");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        initialized
    }

    async fn send(client: &mut (impl AsyncWrite + Unpin), lines: &[String]) {
        for line in lines {
            client.write_all(line.as_bytes()).await.unwrap();
            client.write_all(b"\n").await.unwrap();
        }
    }

    /// Serves one session on a fresh store, with or without the lane, sends `lines`, then
    /// hangs up; returns every line the server wrote, and the calls the lane took. Lines
    /// that start with the opening wait, after it, until the lane can serve.
    async fn session(lane: bool, lines: &[String]) -> (Vec<String>, u64) {
        let (client, server_end) = tokio::io::duplex(1 << 20);
        let (read, write) = tokio::io::split(server_end);
        let server = server();
        let mut transport =
            WireTransport::new(read, write, false, super::super::DEFAULT_WRITE_QUEUE);
        if lane {
            transport = transport.with_lane(server.clone());
        }
        let running = transport
            .lane
            .as_ref()
            .map(|lane| Arc::clone(&lane.running));
        let peer = transport.lane.as_ref().map(Lane::peer);
        let serving = serve(server, transport);
        let (client_read, mut client_write) = tokio::io::split(client);
        let mut replies = Vec::new();
        let mut read = BufReader::new(client_read).lines();
        let opening = opening("2025-11-25");
        let rest = match lines.strip_prefix(opening.as_slice()) {
            Some(rest) => {
                replies.push(open(&mut client_write, &mut read, peer).await);
                rest
            }
            None => lines,
        };
        send(&mut client_write, rest).await;
        client_write.shutdown().await.unwrap();
        while let Some(line) = read.next_line().await.unwrap() {
            replies.push(line);
        }
        serving.await.unwrap();
        let taken = running.map_or(0, |r| r.taken.load(Ordering::Relaxed));
        (replies, taken)
    }

    /// A reply with its timestamps blanked, in the structured content and in the text, key
    /// order kept: two sessions on two stores differ in nothing else.
    fn timeless(line: &str) -> String {
        fn blank(value: &mut Value) {
            match value {
                Value::Object(map) => {
                    for (key, value) in map.iter_mut() {
                        if key == "createdAt" || key == "completedAt" {
                            if value.is_string() {
                                *value = json!("<time>");
                            }
                        } else {
                            blank(value);
                        }
                    }
                }
                Value::Array(items) => items.iter_mut().for_each(blank),
                _ => {}
            }
        }
        let mut reply: Value = serde_json::from_str(line).unwrap();
        blank(&mut reply);
        if let Some(text) = reply["result"]["content"][0]["text"].as_str() {
            let mut inner: Value = serde_json::from_str(text).unwrap();
            blank(&mut inner);
            reply["result"]["content"][0]["text"] = json!(inner.to_string());
        }
        reply.to_string()
    }

    #[tokio::test]
    async fn the_lane_answers_every_todo_call_as_rmcp_answers_it() {
        let mut lines = opening("2025-11-25");
        lines.extend([
            call(
                1,
                "add_task",
                json!({"title": "first", "tags": ["a"], "due": "2030-01-02"}),
            ),
            call(2, "add_task", json!({"title": "", "extra": 1})),
            call(3, "list_tasks", json!({})),
            call(4, "complete_task", json!({"id": 1})),
            call(5, "complete_task", json!({"id": 99})),
            call(6, "search_tasks", json!({"query": "fir"})),
            call(7, "delete_task", json!({"id": 1})),
            call(8, "delete_task", json!({"id": 1, "confirm": true})),
            call(9, "list_tasks", json!({"status": "done"})),
        ]);
        let (rmcp, none) = session(false, &lines).await;
        let (lane, taken) = session(true, &lines).await;
        assert_eq!((none, taken), (0, 9), "the lane took every todo call");
        // Replies to calls in flight together may come in any order.
        let mut rmcp: Vec<String> = rmcp.iter().map(|l| timeless(l)).collect();
        let mut lane: Vec<String> = lane.iter().map(|l| timeless(l)).collect();
        rmcp.sort();
        lane.sort();
        assert_eq!(
            rmcp.len(),
            10,
            "initialize and nine calls answered: {rmcp:?}"
        );
        assert_eq!(lane, rmcp);
    }

    #[tokio::test]
    async fn calls_the_lane_does_not_serve_go_to_rmcp() {
        let modern = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
        let mut lines = opening("2025-11-25");
        lines.extend([
            call(1, "list_workflows", json!({})),
            call(2, "no_such_tool", json!({})),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params":
                   {"name": "list_tasks", "arguments": {}, "_meta": modern}})
            .to_string(),
            call(4, "list_tasks", json!({})),
        ]);
        let (replies, taken) = session(true, &lines).await;
        assert_eq!(taken, 1, "only the plain todo call: {replies:?}");
        assert_eq!(replies.len(), 5, "{replies:?}");
    }

    #[tokio::test]
    async fn stateless_2026_07_28_requests_are_not_served_by_the_lane() {
        // No `initialize`: every request carries the 2026-07-28 `_meta`, and its result the
        // `resultType` that version defines.
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "lane", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}
        });
        let lines = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params":
                            {"name": "list_tasks", "arguments": {}, "_meta": meta}})
            .to_string(),
        ];
        let (replies, taken) = session(true, &lines).await;
        assert_eq!(taken, 0, "{replies:?}");
        let reply: Value = serde_json::from_str(&replies[0]).unwrap();
        assert_eq!(reply["result"]["resultType"], "complete", "{reply}");
    }

    #[tokio::test]
    async fn a_client_that_hangs_up_gets_the_replies_of_its_calls_in_flight() {
        let mut lines = opening("2025-11-25");
        lines.extend((1..=64).map(|i| call(i, "add_task", json!({"title": format!("t{i}")}))));
        let (replies, taken) = session(true, &lines).await;
        assert_eq!(taken, 64);
        let mut ids: Vec<u64> = replies
            .iter()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|reply| reply["result"]["structuredContent"]["ok"] == true)
            .filter_map(|reply| reply["id"].as_u64())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, (1..=64).collect::<Vec<_>>());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_second_call_under_an_id_in_flight_is_refused_and_the_first_still_answered() {
        let server = server();
        let store = server.app().registry().store().clone();
        // The first call waits for the store while the second arrives.
        let held = Held::connection_of(&store);
        let (client, server_end) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server_end);
        let transport = WireTransport::new(read, write, false, super::super::DEFAULT_WRITE_QUEUE)
            .with_lane(server.clone());
        let peer = transport.lane.as_ref().map(Lane::peer);
        let serving = serve(server, transport);
        let (client_read, mut client_write) = tokio::io::split(client);
        let mut read = BufReader::new(client_read).lines();
        let opened = open(&mut client_write, &mut read, peer).await;
        let lines = [
            call(1, "add_task", json!({"title": "first"})),
            call(1, "add_task", json!({"title": "second"})),
        ];
        send(&mut client_write, &lines).await;
        let mut replies: Vec<Value> = vec![serde_json::from_str(&opened).unwrap()];
        while !replies.iter().any(|r| r["error"].is_object()) {
            let line = tokio::time::timeout(Duration::from_secs(10), read.next_line())
                .await
                .expect("the second call is answered while the first waits")
                .unwrap()
                .expect("the server is up");
            replies.push(serde_json::from_str(&line).unwrap());
        }
        // The client hangs up at once: the session waits for the first call all the same.
        client_write.shutdown().await.unwrap();
        held.release();
        while let Some(line) = read.next_line().await.unwrap() {
            replies.push(serde_json::from_str(&line).unwrap());
        }
        serving.await.unwrap();
        let ids: Vec<&Value> = replies.iter().map(|r| &r["id"]).collect();
        assert_eq!(ids, [&json!(0), &json!(1), &json!(1)], "{replies:?}");
        assert_eq!(replies[1]["error"]["code"], -32600, "{replies:?}");
        let first = &replies[2]["result"]["structuredContent"];
        assert_eq!(first["data"]["title"], "first", "{replies:?}");
        let todos = store.list_todos(&TodoFilter::default()).unwrap();
        let titles: Vec<&str> = todos.iter().map(|todo| todo.title.as_str()).collect();
        assert_eq!(titles, ["first"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_cancelled_while_it_waits_for_the_store_gets_no_reply_and_others_do() {
        let server = server();
        let store = server.app().registry().store().clone();
        // Another writer holds the connection, so that the call is still in flight when
        // the client cancels it.
        let held = Held::connection_of(&store);

        let (client, server_end) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server_end);
        let transport = WireTransport::new(read, write, false, super::super::DEFAULT_WRITE_QUEUE)
            .with_lane(server.clone());
        let peer = transport.lane.as_ref().map(Lane::peer);
        let serving = serve(server, transport);
        let (client_read, mut client_write) = tokio::io::split(client);
        let mut read = BufReader::new(client_read).lines();
        let opened = open(&mut client_write, &mut read, peer).await;
        let lines = [
            call(1, "add_task", json!({"title": "cancelled"})),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 1, "reason": "changed my mind"}})
            .to_string(),
            // Lines are taken in order: once the ping is answered, the cancel has been seen.
            json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string(),
        ];
        send(&mut client_write, &lines).await;
        let mut replies = vec![serde_json::from_str::<Value>(&opened).unwrap()];
        while !replies.iter().any(|r: &Value| r["id"] == 2) {
            let line = read.next_line().await.unwrap().expect("the server is up");
            replies.push(serde_json::from_str(&line).unwrap());
        }
        held.release();
        send(&mut client_write, &[call(3, "list_tasks", json!({}))]).await;
        client_write.shutdown().await.unwrap();
        while let Some(line) = read.next_line().await.unwrap() {
            replies.push(serde_json::from_str(&line).unwrap());
        }
        serving.await.unwrap();

        let ids: Vec<&Value> = replies.iter().map(|r| &r["id"]).collect();
        assert_eq!(ids, [&json!(0), &json!(2), &json!(3)], "{replies:?}");
        assert_eq!(replies[2]["result"]["structuredContent"]["ok"], true);
        // The call's effect stands: it was made, only its reply is not wanted. (Read once
        // the session has ended, which waits for the lane's calls: the later `list_tasks`
        // may reach the store before it.)
        let todos = store.list_todos(&TodoFilter::default()).unwrap();
        let titles: Vec<&str> = todos.iter().map(|todo| todo.title.as_str()).collect();
        assert_eq!(titles, ["cancelled"]);
    }
}
