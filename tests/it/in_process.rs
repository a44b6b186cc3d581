//! The server in this process, over `tokio::io::duplex`: the same application and server
//! as `serve` opens, on an in-memory byte stream, with a shutdown signal.

use std::time::Duration;

use mcp_task_server::app::{App, Config};
use mcp_task_server::server::Server;
use mcp_task_server::transport::stdio::serve_in_memory;
use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::support;

/// The server `serve` runs, on a database of its own in `dir`, its workspace the folder
/// `workspace` beside it.
fn server(dir: &std::path::Path) -> Server {
    let db = dir.join("tasks.db").display().to_string();
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let app = App::open(&Config::new(db, workspace)).expect("the application opens");
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
    let added = support::call(&client, "add_task", json!({ "title": "in process" })).await;
    let envelope = support::envelope(&added);
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

/// The text of a resource read, or the error's message.
async fn read(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    uri: &str,
) -> Result<(String, Option<String>), String> {
    let request = rmcp::model::ReadResourceRequestParams::new(uri);
    match client.read_resource(request).await {
        Ok(read) => match &read.contents[0] {
            rmcp::model::ResourceContents::TextResourceContents {
                text, mime_type, ..
            } => Ok((text.clone(), mime_type.clone())),
            other => Err(format!("not text: {other:?}")),
        },
        Err(error) => Err(error.to_string()),
    }
}

#[tokio::test]
async fn a_client_reads_the_file_a_run_wrote_and_the_runs_and_workflows_as_resources() {
    let dir = tempfile::tempdir().unwrap();
    let (client_end, _serving) = serve_in_memory(server(dir.path()), CancellationToken::new());
    let client = ().serve(client_end).await.expect("the client connects");
    let inputs = json!({"version": "1.0", "checks": ["tests"],
                        "results": [{"check": "tests", "passed": true}]});
    let ran = support::call(&client, "deployment_readiness", inputs).await;
    let wire = serde_json::to_value(&ran).unwrap();
    let run_id = wire["structuredContent"]["data"]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let link = wire["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "resource_link")
        .expect("the result links the report it wrote");
    let uri = link["uri"].as_str().unwrap().to_owned();

    let (text, mime) = read(&client, &uri).await.unwrap();
    assert!(text.contains("1.0"), "{text}");
    assert_eq!(mime.as_deref(), Some("text/markdown"));
    let listed = client.list_all_resources().await.unwrap();
    assert!(listed.iter().any(|r| r.uri == uri), "{listed:?}");
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates.len(), 4);

    let (report, _) = read(&client, &format!("tasks://runs/{run_id}/report.json"))
        .await
        .unwrap();
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["status"], "succeeded");
    let (summary, _) = read(&client, &format!("tasks://runs/{run_id}/summary.md"))
        .await
        .unwrap();
    assert!(
        summary.starts_with("# Run of `deployment_readiness`: succeeded"),
        "{summary}"
    );
    let source = "tasks://workflows/interactive_adr_planning/source.toml";
    let (toml, _) = read(&client, source).await.unwrap();
    assert!(toml.contains("name = \"interactive_adr_planning\""));
    let diagram = "tasks://workflows/interactive_adr_planning/diagram.mmd";
    let (mermaid, _) = read(&client, diagram).await.unwrap();
    assert!(
        mermaid.contains("subgraph phase_problem_definition"),
        "{mermaid}"
    );

    use rmcp::model::{ArgumentInfo, CompleteRequestParams, Reference, ResourceTemplateReference};
    let template = Reference::Resource(ResourceTemplateReference::new(
        "tasks://runs/{run_id}/summary.md",
    ));
    let typed = ArgumentInfo::new("run_id", &run_id[..4]);
    let completed = client
        .complete(CompleteRequestParams::new(template, typed))
        .await
        .unwrap();
    assert_eq!(completed.completion.values, [run_id]);
}

#[tokio::test]
async fn a_read_that_leads_outside_the_workspace_is_refused_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("workspace")).unwrap();
    let workspace = std::fs::canonicalize(dir.path().join("workspace")).unwrap();
    std::fs::write(workspace.join("inside.txt"), "fine").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("secret.txt"),
        "the-content-of-the-secret",
    )
    .unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        workspace.join("link.txt"),
    )
    .unwrap();
    let (client_end, _serving) = serve_in_memory(server(dir.path()), CancellationToken::new());
    let client = ().serve(client_end).await.expect("the client connects");

    let ws = workspace.display().to_string();
    assert_eq!(
        read(&client, &format!("file://{ws}/inside.txt"))
            .await
            .unwrap()
            .0,
        "fine"
    );
    // A file that is not text comes back as a blob, in base64.
    std::fs::write(workspace.join("inside.bin"), [0xff_u8, 0xfe, 0x00, 0x01]).unwrap();
    let request = rmcp::model::ReadResourceRequestParams::new(format!("file://{ws}/inside.bin"));
    let blob = client.read_resource(request).await.unwrap();
    let blob = serde_json::to_value(&blob.contents[0]).unwrap();
    assert_eq!(blob["blob"], "//4AAQ==", "{blob}");
    assert_eq!(blob["mimeType"], "application/octet-stream");
    for uri in [
        format!("file://{}", outside.path().join("secret.txt").display()),
        format!(
            "file://{ws}/../{}/secret.txt",
            outside.path().file_name().unwrap().to_str().unwrap()
        ),
        format!("file://{ws}/link.txt"),
        "file:///etc/passwd".to_owned(),
        "https://example.com/x".to_owned(),
    ] {
        let refused = read(&client, &uri).await;
        assert!(refused.is_err(), "{uri}: {refused:?}");
        assert!(
            !format!("{refused:?}").contains("the-content"),
            "{uri}: {refused:?}"
        );
    }
    let outcomes: Vec<String> = support::audit_rows(&dir.path().join("tasks.db"))
        .into_iter()
        .filter(|row| row.tool == "read_resource")
        .map(|row| row.outcome)
        .collect();
    // Outside the workspace or through a link is a file that is not there; a URI with
    // `..` or of another scheme names no resource of this server at all.
    assert_eq!(
        outcomes,
        [
            "ok",
            "ok",
            "not_found",
            "rejected",
            "not_found",
            "not_found",
            "rejected"
        ]
    );
}
