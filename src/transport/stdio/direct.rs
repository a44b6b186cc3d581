//! The direct lane: a plain call of a task-manager tool, answered beside rmcp's service
//! loop instead of through it.
//!
//! rmcp serves each request by spawning a task for its handler, sending the result
//! through a channel back to its loop, and spawning a second task to write it; on one
//! worker thread that bookkeeping cost as much as the call's own SQLite transaction. The
//! calls clients make most, `add_task` and the other todo tools called without a task in
//! a 2025-11-25 session, need none of what it buys (no server-to-client requests, no
//! progress, nothing to cancel mid-way): the lane spawns one task that runs the call and
//! writes its reply.
//!
//! Invariant: the lane answers exactly what rmcp's path answers. It runs the handler's
//! own `Server::todo_call` and shapes the result as rmcp's handler does for a peer older
//! than 2026-07-28; anything else (a task, a 2026-07-28 `_meta`, another tool, a session
//! not yet open) goes to rmcp. A cancelled call's reply is dropped, as on rmcp's path
//! (both land their calls in the transport's table of requests in flight, `flights.rs`),
//! and the transport reports the end of its input only once every call the lane took has
//! been answered.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage, RequestId, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::io::AsyncWrite;

use super::flights::Flights;
use super::{Writer, write_line};
use crate::server::Server;
use crate::server::shim;

/// How long the end of input waits for the lane's calls in flight: rmcp's own grace for
/// its handlers' replies when a client hangs up.
const DRAIN: Duration = Duration::from_secs(5);

pub(super) struct Lane {
    /// Shared with each call's task: one reference count a call, not a clone of every
    /// handle a `Server` holds.
    server: Arc<Server>,
    /// The session's requests in flight, shared with the transport, which takes each off.
    flights: Arc<Flights>,
}

impl Lane {
    pub(super) fn new(server: Server, flights: Arc<Flights>) -> Lane {
        Lane {
            server: Arc::new(server),
            flights,
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
        let request = match message {
            JsonRpcMessage::Request(request) if session.open_before_2026() => request,
            other => return Some(other),
        };
        if !self.serves(&request.request) {
            return Some(JsonRpcMessage::Request(request));
        }
        let ClientRequest::CallToolRequest(call) = request.request else {
            unreachable!("a call, as matched above");
        };
        let id = request.id;
        self.flights.to_lane(&id);
        let server = Arc::clone(&self.server);
        let flights = Arc::clone(&self.flights);
        let writer = Arc::clone(writer);
        tokio::spawn(async move {
            let name = call.params.name;
            let args = call.params.arguments.unwrap_or_default();
            let result = server
                .todo_call(&name, args, &crate::app::Caller::default())
                .await;
            if flights.land(&id) {
                let message = reply(result, id);
                if let Err(error) = write_line(&writer, &message).await {
                    tracing::warn!(%error, "a reply could not be written");
                }
            }
        });
        None
    }

    /// Whether the lane answers this request: a todo tool's call without the 2026-07-28
    /// `_meta`, asking for nothing the handler would read beyond its name and arguments.
    /// (A 2025-11-25 `params.task` never gets here: the 2025-11-25 layer has renamed that call
    /// already.)
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
        if tokio::time::timeout(DRAIN, self.flights.lane_landed())
            .await
            .is_err()
        {
            tracing::warn!("calls still running when the client hung up were left unanswered");
        }
        let calls = self.flights.taken.load(Ordering::Relaxed);
        tracing::debug!(calls, "calls answered on the direct lane");
    }
}

/// The end of input: once the lane's calls in flight are answered, rmcp may close.
pub(super) async fn ended(lane: Option<&Lane>) {
    if let Some(lane) = lane {
        lane.drain().await;
    }
}

/// The reply to a call, shaped as rmcp's handler shapes it for a peer older than
/// 2026-07-28.
fn reply(result: rmcp::model::CallToolResult, id: RequestId) -> TxJsonRpcMessage<RoleServer> {
    let mut result = ServerResult::CallToolResult(result);
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
    JsonRpcMessage::response(result, id)
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

    /// Serves `transport` with `server` until the client hangs up.
    fn serve<R, W>(server: Server, transport: WireTransport<R, W>) -> tokio::task::JoinHandle<()>
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        tokio::spawn(async move {
            let running = server
                .serve_with_ct(transport, CancellationToken::new())
                .await
                .unwrap();
            running.waiting().await.unwrap();
        })
    }

    async fn send(client: &mut (impl AsyncWrite + Unpin), lines: &[String]) {
        for line in lines {
            client.write_all(line.as_bytes()).await.unwrap();
            client.write_all(b"\n").await.unwrap();
        }
    }

    /// Serves one session on a fresh store, with or without the lane, sends `lines`, then
    /// hangs up; returns every line the server wrote, and the calls the lane took.
    async fn session(lane: bool, lines: &[String]) -> (Vec<String>, u64) {
        let (client, server_end) = tokio::io::duplex(1 << 20);
        let (read, write) = tokio::io::split(server_end);
        let server = server();
        let mut transport =
            WireTransport::new(read, write, false, super::super::DEFAULT_WRITE_QUEUE);
        if lane {
            transport = transport.with_lane(server.clone());
        }
        let flights = transport
            .lane
            .as_ref()
            .map(|lane| Arc::clone(&lane.flights));
        let serving = serve(server, transport);
        let (client_read, mut client_write) = tokio::io::split(client);
        send(&mut client_write, lines).await;
        client_write.shutdown().await.unwrap();
        let mut replies = Vec::new();
        let mut read = BufReader::new(client_read).lines();
        while let Some(line) = read.next_line().await.unwrap() {
            replies.push(line);
        }
        serving.await.unwrap();
        let taken = flights.map_or(0, |f| f.taken.load(Ordering::Relaxed));
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
        let serving = serve(server, transport);
        let (client_read, mut client_write) = tokio::io::split(client);
        let mut lines = opening("2025-11-25");
        lines.push(call(1, "add_task", json!({"title": "first"})));
        lines.push(call(1, "add_task", json!({"title": "second"})));
        send(&mut client_write, &lines).await;
        let mut read = BufReader::new(client_read).lines();
        let mut replies: Vec<Value> = Vec::new();
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
        let serving = serve(server, transport);
        let (client_read, mut client_write) = tokio::io::split(client);
        let mut lines = opening("2025-11-25");
        lines.push(call(1, "add_task", json!({"title": "cancelled"})));
        lines.push(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 1, "reason": "changed my mind"}})
            .to_string(),
        );
        // Lines are taken in order: once the ping is answered, the cancel has been seen.
        lines.push(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string());
        send(&mut client_write, &lines).await;
        let mut read = BufReader::new(client_read).lines();
        let mut replies = Vec::new();
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
