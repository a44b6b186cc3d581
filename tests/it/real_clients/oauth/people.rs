//! Two people sign in at the issuer through the TypeScript SDK, use the tools and run a
//! workflow as a task; each then sees their own runs and tasks, never the other's.

use serde_json::{Value, json};

use super::super::checks::report;
use super::super::clients::Ran;
use super::deployment::{ALICE, BOB, Deployment, Person};
use super::{all_scopes, assert_no_token_logged, scopes};
use crate::support;

#[tokio::test]
async fn ts_sdk_signs_in_at_a_real_issuer_runs_a_task_and_each_person_sees_only_their_own_runs() {
    let Some(deployment) = Deployment::start(&[]) else {
        return;
    };
    let alice = deployment.client("work", ALICE, &[]).await;
    let alice = checked(&deployment, alice);
    assert_found_its_way_to_a_token(&deployment, &alice, ALICE);
    let alices_task = assert_worked(&alice, ALICE);

    let bob = deployment
        .client("work", BOB, &["--foreign", &alices_task])
        .await;
    let bob = checked(&deployment, bob);
    assert_found_its_way_to_a_token(&deployment, &bob, BOB);
    let bobs_task = assert_worked(&bob, BOB);
    assert_sees_only_its_own(&bob, &bobs_task, &alices_task);

    // Alice again, in a new session: her run is still hers, and Bob's is not.
    let again = deployment
        .client("lists", ALICE, &["--foreign", &bobs_task])
        .await;
    let again = checked(&deployment, again);
    assert_sees_only_its_own(&again, &alices_task, &bobs_task);

    // Every call is audited as the person who made it, by the token's subject.
    let rows = support::audit_rows(&deployment.sandbox.db);
    let mut added: Vec<(String, Option<&str>)> = rows
        .iter()
        .filter(|row| row.tool == "add_task")
        .map(|row| {
            let args: Value = serde_json::from_str(&row.args).unwrap();
            (
                args["title"].as_str().unwrap().to_owned(),
                row.principal.as_deref(),
            )
        })
        .collect();
    added.sort();
    let expected = [
        ("alice's todo", "alice"),
        ("approved alice", "alice"),
        ("approved bob", "bob"),
        ("bob's todo", "bob"),
    ];
    let expected = expected.map(|(title, who)| (title.to_owned(), Some(who)));
    assert_eq!(added, expected, "{rows:?}");
    let started: Vec<_> = rows
        .iter()
        .filter_map(|row| Some((row.run_id.clone()?, row.principal.as_deref()?)))
        .collect();
    assert!(
        started.contains(&(alices_task.clone(), "alice")),
        "{rows:?}"
    );
    assert!(started.contains(&(bobs_task.clone(), "bob")), "{rows:?}");
    assert_no_token_logged(&deployment);
}

/// `ran` if it succeeded, else a failure with both servers' logs.
fn checked(deployment: &Deployment, ran: Ran) -> Ran {
    assert!(
        ran.success,
        "the client failed\n{}\n{}",
        ran.dump(),
        deployment.logs()
    );
    ran
}

/// The way from the first `401` to a token for this server alone.
fn assert_found_its_way_to_a_token(deployment: &Deployment, ran: &Ran, person: Person) {
    let (server, issuer) = (&deployment.server, &deployment.issuer);
    let requests = ran.event("challenged")["requests"].clone();
    let seen: Vec<(String, String, u64)> = requests
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let at = format!(
                "{}{}",
                r["origin"].as_str().unwrap(),
                r["path"].as_str().unwrap()
            );
            (
                r["method"].as_str().unwrap().to_owned(),
                at,
                r["status"].as_u64().unwrap(),
            )
        })
        .collect();
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", server.base);
    let expected = [
        ("POST", server.url.clone(), 401),
        ("GET", metadata.clone(), 200),
        (
            "GET",
            format!("{}/.well-known/oauth-authorization-server", issuer.url),
            200,
        ),
        ("POST", format!("{}/reg", issuer.url), 201),
    ]
    .map(|(method, at, status)| (method.to_owned(), at, status));
    assert_eq!(seen, expected, "{requests}");
    let challenge = requests[0]["wwwAuthenticate"].as_str().unwrap();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata}\"")),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\""), "{challenge}");

    let registered = ran.event("registered");
    assert_eq!(registered["issuer"], issuer.url);
    assert_eq!(
        registered["authMethod"], "none",
        "a public client: {registered}"
    );

    let authorize = ran.event("authorize");
    assert_eq!(authorize["endpoint"], format!("{}/auth", issuer.url));
    assert_eq!(authorize["responseType"], "code");
    assert_eq!(authorize["codeChallengeMethod"], "S256");
    assert_eq!(authorize["hasCodeChallenge"], true);
    assert_eq!(authorize["resource"], json!([server.url]), "{authorize}");
    assert_eq!(scopes(&authorize["scope"]), all_scopes(), "{authorize}");

    let redirected = ran.event("redirected");
    assert_eq!(redirected["pages"], json!(["login", "consent"]));
    assert_eq!(redirected["hasCode"], true);
    assert_eq!(redirected["iss"], issuer.url, "RFC 9207: {redirected}");
    assert_eq!(redirected["issMatches"], true);

    let token = ran.event("token");
    assert_eq!(token["header"]["typ"], "at+jwt", "{token}");
    assert_eq!(token["header"]["alg"], "RS256");
    assert_eq!(token["header"]["kid"], issuer.first_kid);
    let claims = &token["claims"];
    assert_eq!(claims["iss"], issuer.url, "{claims}");
    assert_eq!(claims["aud"], server.url, "bound to this server: {claims}");
    assert_eq!(claims["sub"], person.name);
    assert_eq!(scopes(&claims["scope"]), all_scopes(), "{claims}");

    let exchanged = &ran.event("exchanged")["requests"];
    assert_eq!(exchanged[0]["path"], "/token", "{exchanged}");
    assert_eq!(exchanged[0]["status"], 200, "{exchanged}");
    let connected = &ran.event("connected")["requests"];
    let statuses: Vec<&Value> = connected
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["status"])
        .collect();
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 202),
        "initialize and initialized pass with the token: {connected}"
    );
}

/// The tools, a todo, and `ask` run as a task whose question the client answered;
/// returns the task's id.
fn assert_worked(ran: &Ran, person: Person) -> String {
    let tools = &ran.event("tools")["names"];
    for tool in ["add_task", "list_runs", "ask"] {
        assert!(tools.as_array().unwrap().contains(&json!(tool)), "{tools}");
    }
    let added = &ran.event("added")["result"];
    assert_eq!(added["isError"], false, "{added}");
    let title = format!("{}'s todo", person.name);
    assert_eq!(added["structured"]["data"]["title"], title, "{added}");

    let task = &ran.event("taskCreated")["task"];
    let task_id = task["taskId"].as_str().expect("a task id").to_owned();
    let result = ran.event("result");
    assert_eq!(
        result["asked"],
        json!([format!("Approve {}?", person.name)]),
        "the run's question reached the client: {result}"
    );
    let outcome = &result["result"];
    assert_eq!(outcome["isError"], false, "{outcome}");
    let report = report(outcome);
    assert_eq!(report["status"], "succeeded", "{report}");
    let made = format!("approved {}", person.name);
    assert_eq!(report["nodes"]["todo"]["output"]["title"], made);
    task_id
}

/// The person's lists hold `own` and not `other`, which they cannot read either.
fn assert_sees_only_its_own(ran: &Ran, own: &str, other: &str) {
    let runs = ran.event("listRuns");
    let ids: Vec<&str> = runs["result"]["structured"]["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{runs}"))
        .iter()
        .map(|run| run["runId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [own], "list_runs: {runs}");

    let tasks = ran.event("tasksList");
    let task_ids = tasks["taskIds"].as_array().unwrap();
    assert_eq!(task_ids[0], own, "the run's task first: {tasks}");
    assert_eq!(task_ids.len(), 4, "then its three sub-tasks: {tasks}");
    assert!(!task_ids.contains(&json!(other)), "tasks/list: {tasks}");

    let foreign = ran.event("foreignTask");
    assert_eq!(
        foreign["ok"], false,
        "tasks/get of another's task: {foreign}"
    );
    let run = &ran.event("foreignRun")["result"];
    assert_eq!(run["isError"], true, "{run}");
    assert_eq!(run["structured"]["error"]["code"], "not_found", "{run}");

    // The todos are one list, everyone's (docs/security.md).
    let todos = ran.event("listTasks");
    assert_eq!(todos["result"]["isError"], false, "{todos}");
}
