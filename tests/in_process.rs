//! The server in this process, over `tokio::io::duplex`: the same application and server
//! as `serve` opens, on an in-memory byte stream, with a shutdown signal.

mod common;

use std::time::Duration;

use mcp_task_server::app::{App, Config};
use mcp_task_server::server::Server;
use mcp_task_server::transport::stdio::serve_in_memory;
use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

/// The server `serve` runs, on a database of its own in `dir`.
fn server(dir: &std::path::Path) -> Server {
    let db = dir.join("tasks.db").display().to_string();
    let app = App::open(&Config::new(db, dir)).expect("the application opens");
    Server::new(app)
}

const DEADLINE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_client_lists_and_calls_tools_in_process_until_the_server_is_shut_down() {
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let (client_end, serving) = serve_in_memory(server(dir.path()), shutdown.clone());

    let client = ().serve(client_end).await.expect("the client connects");
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "add_task"));
    let added = common::call(&client, "add_task", json!({ "title": "in process" })).await;
    let envelope = common::envelope(&added);
    assert_eq!(envelope["ok"], true);
    assert_eq!(envelope["data"]["title"], "in process");

    shutdown.cancel();
    let ended = tokio::time::timeout(DEADLINE, serving).await;
    ended
        .expect("the server stops when told to")
        .unwrap()
        .expect("and ends cleanly");
}

#[tokio::test]
async fn a_line_that_is_not_json_is_answered_in_process_too() {
    let dir = tempfile::tempdir().unwrap();
    let (client_end, serving) = serve_in_memory(server(dir.path()), CancellationToken::new());
    let (client_read, mut client_write) = tokio::io::split(client_end);
    let mut lines = BufReader::new(client_read).lines();

    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": { "name": "raw", "version": "1" } } });
    client_write
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let reply = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .unwrap();
    let reply: Value = serde_json::from_str(&reply.unwrap().unwrap()).unwrap();
    assert_eq!(reply["id"], 1);

    client_write.write_all(b"{oops\n").await.unwrap();
    let reply = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .unwrap();
    let reply: Value = serde_json::from_str(&reply.unwrap().unwrap()).unwrap();
    assert_eq!(
        (reply["id"].clone(), reply["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );

    // Closing the stream ends the session.
    drop(client_write);
    drop(lines);
    let ended = tokio::time::timeout(DEADLINE, serving).await;
    assert!(
        ended
            .expect("the server stops when the client hangs up")
            .is_ok()
    );
}

#[tokio::test]
async fn a_client_starts_a_workflow_as_a_prompt_and_completes_its_arguments() {
    use rmcp::model::{
        ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, PromptReference, Reference,
    };
    let dir = tempfile::tempdir().unwrap();
    let (client_end, _serving) = serve_in_memory(server(dir.path()), CancellationToken::new());
    let client = ().serve(client_end).await.expect("the client connects");
    let info = client.peer_info().expect("the server's info");
    assert!(info.capabilities.prompts.is_some() && info.capabilities.completions.is_some());

    let prompts = client.list_all_prompts().await.unwrap();
    let adr = prompts
        .iter()
        .find(|p| p.name == "interactive_adr_planning")
        .expect("the ADR planner is a prompt");
    let arguments = adr.arguments.as_ref().unwrap();
    let title = arguments.iter().find(|a| a.name == "title").unwrap();
    assert_eq!(title.required, Some(true));

    let mut args = serde_json::Map::new();
    args.insert("title".to_owned(), json!("Pick a queue"));
    let mut request = GetPromptRequestParams::new("interactive_adr_planning");
    request.arguments = Some(args);
    let prompt = client.get_prompt(request).await.unwrap();
    let text = serde_json::to_value(&prompt.messages[0].content).unwrap()["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("`title`: \"Pick a queue\""), "{text}");
    assert!(text.contains("It goes in 7 phases"), "{text}");

    // A required argument left out is the caller's mistake, named.
    let missing = client
        .get_prompt(GetPromptRequestParams::new("interactive_adr_planning"))
        .await
        .unwrap_err();
    assert!(
        missing.to_string().contains("`title`: required"),
        "{missing}"
    );

    let reference = Reference::Prompt(PromptReference::new("interactive_adr_planning"));
    let typed = ArgumentInfo::new("status", "Acc");
    let completed = client
        .complete(CompleteRequestParams::new(reference, typed))
        .await
        .unwrap();
    assert_eq!(completed.completion.values, ["Accepted"]);
}
