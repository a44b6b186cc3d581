//! A person who allows a client to read only: the client reads, and a call that changes
//! something is refused with `403 insufficient_scope` naming the scope that operation
//! needs (RFC 6750 §3.1; the client adds it to what it holds when it steps up). The SDK
//! locked here steps up by refreshing its token, which brings the same scopes, and gives
//! up after one more `403`: each of its tries is refused alike, and nothing is added.

use serde_json::Value;

use super::assert_no_token_logged;
use super::deployment::{CAROL, Deployment};
use super::scopes;
use crate::support;

#[tokio::test]
async fn a_person_who_allowed_reading_only_reads_and_is_refused_a_todo_with_the_scope_it_needs() {
    let Some(deployment) = Deployment::start(&[]) else {
        return;
    };
    let ran = deployment.client("read-only", CAROL, &[]).await;
    assert!(
        ran.success,
        "the client failed\n{}\n{}",
        ran.dump(),
        deployment.logs()
    );
    let token = ran.event("token");
    assert_eq!(scopes(&token["claims"]["scope"]), ["tasks:read"], "{token}");
    let listed = ran.event("listTasks");
    assert_eq!(listed["result"]["isError"], false, "{listed}");

    let refused = ran.event("addRefused");
    assert_eq!(refused["ok"], false, "{refused}");
    let requests = refused["requests"].as_array().unwrap();
    // The calls to the server; the SDK's standalone stream (`GET /mcp`), opened in the
    // background once connected, may land in this step too, and is not a call.
    let to_server: Vec<&Value> = requests
        .iter()
        .filter(|r| r["path"] == "/mcp" && r["method"] == "POST")
        .collect();
    assert!(!to_server.is_empty(), "{refused}");
    for request in &to_server {
        assert_eq!(request["status"], 403, "{refused}");
        let challenge = request["wwwAuthenticate"].as_str().unwrap();
        assert!(
            challenge.contains("error=\"insufficient_scope\""),
            "{challenge}"
        );
        assert!(challenge.contains("scope=\"tasks:todos\""), "{challenge}");
        assert!(challenge.contains("resource_metadata=\""), "{challenge}");
    }
    // Nothing was added, by the call or its retry.
    assert_eq!(
        support::task_titles(&deployment.sandbox.db),
        Vec::<String>::new()
    );
    assert_no_token_logged(&deployment);
}
