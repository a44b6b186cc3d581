//! The issuer rotates its signing key while a client is connected: the client's next
//! token, signed with the new key, is taken in the same session; the old token still opens
//! the server while its key is published, and no longer once the issuer has dropped it.

use serde_json::{Value, json};

use super::super::clients::Ran;
use super::assert_no_token_logged;
use super::deployment::{ALICE, Deployment};

/// How long the server keeps the issuer's keys before fetching them again, so that a
/// dropped key stops opening it soon after; and the least time between two fetches, short
/// so that the first token of the new key fetches them at once, whenever it comes.
const SERVER_ARGS: [&str; 4] = [
    "--oauth-jwks-max-age",
    "1s",
    "--oauth-jwks-min-refresh",
    "1ms",
];

#[tokio::test]
async fn a_key_rotated_in_at_the_issuer_is_taken_at_once_and_a_dropped_key_no_longer_opens_the_server()
 {
    let Some(deployment) = Deployment::start(&SERVER_ARGS) else {
        return;
    };
    let admin = deployment.issuer.admin.clone();
    let ran = deployment
        .client("rotation", ALICE, &["--admin", &admin])
        .await;
    assert!(
        ran.success,
        "the client failed\n{}\n{}",
        ran.dump(),
        deployment.logs()
    );
    let first = deployment.issuer.first_kid.as_str();
    assert_eq!(ran.event("token")["header"]["kid"], first);
    assert_ok(&ran, "before");

    let rotated = ran.event("rotate");
    let new = rotated["current"].as_str().unwrap();
    assert_ne!(new, first);
    assert_eq!(rotated["published"], json!([new, first]));
    let refreshed = ran.event("refreshed");
    assert_eq!(refreshed["result"], "AUTHORIZED", "{refreshed}");
    assert_eq!(refreshed["kid"], new, "{refreshed}");
    // The refresh went to the issuer's token endpoint, not through a new sign-in.
    assert_eq!(paths(&refreshed["requests"]), [("POST", "/token", 200)]);

    // The new token opens the same session at once: no 401, no new sign-in.
    let after = assert_ok(&ran, "afterRotate");
    assert_eq!(
        paths(&after["requests"]),
        [("POST", "/mcp", 200)],
        "{after}"
    );

    let published = ran.event("oldWhilePublished");
    assert_eq!(published["status"], 200, "{published}");

    let dropped = ran.event("drop");
    assert_eq!(dropped["published"], json!([new]));
    let refused = ran.event("oldAfterDrop");
    let challenge = &refused["refused"];
    assert_eq!(
        challenge["status"], 401,
        "the old key stayed trusted: {refused}"
    );
    let header = challenge["wwwAuthenticate"].as_str().unwrap();
    assert!(header.contains("error=\"invalid_token\""), "{header}");
    assert!(header.contains("resource_metadata=\""), "{header}");

    let still = assert_ok(&ran, "newAfterDrop");
    assert_eq!(still["session"]["status"], 200, "{still}");
    assert_eq!(
        paths(&still["requests"]),
        [("POST", "/mcp", 200)],
        "{still}"
    );
    assert_no_token_logged(&deployment);
}

/// The event `name`, whose call succeeded.
fn assert_ok(ran: &Ran, name: &str) -> Value {
    let event = ran.event(name);
    assert_eq!(event["result"]["isError"], false, "{name}: {event}");
    event
}

/// The method, path and status of each request of a step, but for the standalone stream
/// opened: the SDK opens it (`GET /mcp`) in the background once connected, so its answer
/// lands in whichever step is under way, and says nothing of that step.
fn paths(requests: &Value) -> Vec<(&str, &str, u64)> {
    requests
        .as_array()
        .unwrap_or_else(|| panic!("{requests}"))
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap(),
                r["path"].as_str().unwrap(),
                r["status"].as_u64().unwrap(),
            )
        })
        .filter(|&request| request != ("GET", "/mcp", 200))
        .collect()
}
