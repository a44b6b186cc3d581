//! Whole stdio sessions on an in-memory pipe: the replies a client gets to calls in
//! flight when it hangs up, reuses an id, or cancels a call.

use std::time::Duration;

use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::{DEFAULT_WRITE_QUEUE, WireTransport};
use crate::server::Server;
use crate::store::{Held, TodoFilter};

fn server() -> Server {
    Server::new(crate::app::App::in_memory())
}

fn opening() -> Vec<String> {
    vec![
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "session", "version": "1"}}})
        .to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
    ]
}

fn call(id: u64, name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
    .to_string()
}

/// A client half: what the server writes, and where the client writes.
type Client = (
    tokio::io::ReadHalf<tokio::io::DuplexStream>,
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
);

/// Serves `server` on an in-memory pipe of `buffer` bytes until the client hangs up;
/// returns the serving task and the client's end.
fn serve(server: Server, buffer: usize) -> (tokio::task::JoinHandle<()>, Client) {
    let (client, server_end) = tokio::io::duplex(buffer);
    let (read, write) = tokio::io::split(server_end);
    let transport = WireTransport::new(read, write, DEFAULT_WRITE_QUEUE);
    let serving = tokio::spawn(async move {
        let running = server
            .serve_with_ct(transport, CancellationToken::new())
            .await
            .unwrap();
        running.waiting().await.unwrap();
    });
    (serving, tokio::io::split(client))
}

async fn send(client: &mut (impl AsyncWrite + Unpin), lines: &[String]) {
    for line in lines {
        client.write_all(line.as_bytes()).await.unwrap();
        client.write_all(b"\n").await.unwrap();
    }
}

#[tokio::test]
async fn a_client_that_hangs_up_gets_the_replies_of_its_calls_in_flight() {
    let (serving, (client_read, mut client_write)) = serve(server(), 1 << 20);
    let mut lines = opening();
    lines.extend((1..=64).map(|i| call(i, "add_task", json!({"title": format!("t{i}")}))));
    send(&mut client_write, &lines).await;
    client_write.shutdown().await.unwrap();
    let mut replies = Vec::new();
    let mut read = BufReader::new(client_read).lines();
    while let Some(line) = read.next_line().await.unwrap() {
        replies.push(line);
    }
    serving.await.unwrap();
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
    let (serving, (client_read, mut client_write)) = serve(server, 1 << 16);
    let mut lines = opening();
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
    // Another writer holds the connection, so that the call is still in flight when the
    // client cancels it.
    let held = Held::connection_of(&store);

    let (serving, (client_read, mut client_write)) = serve(server, 1 << 16);
    let mut lines = opening();
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
    // The call's effect stands: it was made, only its reply is not wanted. (Read once the
    // session has ended: the later `list_tasks` may reach the store before it.)
    let todos = store.list_todos(&TodoFilter::default()).unwrap();
    let titles: Vec<&str> = todos.iter().map(|todo| todo.title.as_str()).collect();
    assert_eq!(titles, ["cancelled"]);
}
