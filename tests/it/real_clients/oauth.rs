//! OAuth with a real authorization server: oidc-provider (`tests/clients/issuer.mjs`),
//! started by each test beside the server binary (`serve --http --oauth-issuer`), and the
//! TypeScript SDK's OAuth client (`tests/clients/ts_oauth.mjs`) signing in as one of three
//! people. What a person depends on: that an OAuth-only client finds its way from the
//! first `401` to a token for this server alone (RFC 9728 discovery, dynamic registration,
//! PKCE, the `resource` parameter, the `iss` of the redirect), then uses the tools and runs
//! a workflow as a task; that each person sees their own runs and tasks and not the
//! other's; that a person who allows a client to read only is refused anything more, with
//! the scope it would need; that a key the issuer rotates in is taken at once and a key it
//! drops stops opening the server, while a client stays connected; that the dashboard
//! signs a person in through the same issuer; and that no token reaches a log.
//!
//! Where Node.js, oidc-provider or the TypeScript SDK is missing each test says it skipped;
//! under `TASKS_REAL_CLIENTS=required` it fails instead.

mod consent;
mod dashboard;
mod deployment;
mod people;
mod rotation;

use serde_json::Value;

use deployment::{Deployment, SCOPES};

/// A JWT in compact form, whatever it holds: a header that is base64url of `{"…`, then
/// at least a payload, each part ending in a dot. The dots matter: the issuer's random
/// interaction ids are base64url too, and one in a few thousand holds `eyJ`.
const JWT: &str = r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.";

/// What neither the server nor the issuer may have logged: a token (or anything that
/// looks like one).
fn assert_no_token_logged(deployment: &Deployment) {
    let jwt = regex::Regex::new(JWT).unwrap();
    let server = deployment.server.log.text();
    assert!(
        !jwt.is_match(&server),
        "the server logged a token:\n{server}"
    );
    let issuer = deployment.issuer.log.text();
    assert!(
        !jwt.is_match(&issuer),
        "the issuer logged a token:\n{issuer}"
    );
}

/// The scopes of a space-separated list, sorted.
fn scopes(list: &Value) -> Vec<String> {
    let mut scopes: Vec<String> = list
        .as_str()
        .unwrap_or_else(|| panic!("not a scope list: {list}"))
        .split(' ')
        .map(str::to_owned)
        .collect();
    scopes.sort();
    scopes
}

/// Every scope the server asks for, sorted.
fn all_scopes() -> Vec<String> {
    let mut all: Vec<String> = SCOPES.iter().map(|s| s.to_string()).collect();
    all.sort();
    all
}
