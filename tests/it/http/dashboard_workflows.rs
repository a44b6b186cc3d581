//! The built-in workflows of the ADR tooling and of troubleshooting followed and steered
//! from the dashboard by a principal signed in: `adr_validation`'s phases and its child
//! run per ADR, linked both ways; `bootstrap_validation_loop` waiting for the person,
//! answered from its page and cancelled with its iteration; `troubleshoot_outcome` rated
//! from its page, with the session's report it wrote to. On both backends.

use serde_json::{Value, json};

use super::*;
use crate::bootstrap::{DB, checks, printed, write_adrs};
use crate::support::backends::{Place, on_both_backends};
use crate::support::wait_until;

fn with_tokens(place: &Place) -> HttpServer {
    HttpServer::start_on(place, &["--http-tokens", "{tokens}"])
}

/// Whether `body` shows `text` as the whole text of an element (a label, a cell, a
/// heading before its state), not merely inside something longer such as the
/// definition's JSON.
fn shows(body: &str, text: &str) -> bool {
    body.contains(&format!(">{text}<")) || body.contains(&format!(">{text} <"))
}

/// The ids of the runs `body` links to, in order, each once.
fn linked_runs(body: &str) -> Vec<String> {
    let mut runs: Vec<String> = Vec::new();
    for after in body.split("href=\"/runs/").skip(1) {
        let id = after.split(['"', '?', '#', '/']).next().unwrap_or_default();
        if !id.is_empty() && !runs.iter().any(|r| r == id) {
            runs.push(id.to_owned());
        }
    }
    runs
}

/// The part of a run's page about node `node`: its row and its details, up to the next
/// node's.
fn node_part<'a>(body: &'a str, node: &str) -> &'a str {
    let start = body
        .find(&format!("id=\"node-{node}\""))
        .unwrap_or_else(|| panic!("no node {node} on the page: {body}"));
    let rest = &body[start..];
    let end = rest[1..].find("id=\"node-").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

/// The state a run's page shows in its heading.
fn badge(state: &str) -> String {
    format!(r#"<span class="badge {state}">{state}</span>"#)
}

/// Run `run`'s page, once `ready` holds of it.
fn page_when(
    server: &HttpServer,
    cookie: &str,
    run: &str,
    what: &str,
    ready: impl Fn(&str) -> bool,
) -> String {
    let path = format!("/runs/{run}");
    let mut last = String::new();
    wait_until(what, || {
        let page = server.page(&path, Some(cookie));
        assert_eq!(page.status, 200, "{}", page.body);
        last = page.body;
        ready(&last)
    });
    last
}

/// Starts `tool` with `arguments` as a task of `session`; the run's id.
fn start_task(server: &HttpServer, session: &[String], tool: &str, arguments: Value) -> String {
    let params = json!({ "name": tool, "task": { "ttl": 600000 }, "arguments": arguments });
    let created = server.post(session, &request(3, "tools/call", params));
    let created = created.response(3);
    created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task in {created}"))
        .to_owned()
}

/// Copies the fixture ADRs of `corpus` into the server's workspace, under docs/adrs.
fn with_adrs(server: &HttpServer, corpus: &str) -> Vec<String> {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/adrs");
    let to = server.db.dir.path().join("workspace/docs/adrs");
    std::fs::create_dir_all(&to).unwrap();
    let mut adrs = Vec::new();
    for entry in std::fs::read_dir(fixtures.join(corpus)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name != "README.md" {
            adrs.push(name);
        }
    }
    adrs.sort();
    adrs
}

on_both_backends! {
    fn adr_validation_shows_its_phases_and_a_child_run_per_adr_linked_both_ways(place) {
        let server = with_tokens(&place);
        let adrs = with_adrs(&server, "clean");
        let alice = open_session(&server, ALICE);
        let reply = server.post(&alice, &call(10, "adr_validation", json!({ "folder": "docs/adrs" })));
        let envelope = &reply.response(10)["result"]["structuredContent"];
        assert_eq!(envelope["ok"], true, "{envelope}");
        let run = envelope["data"]["run_id"].as_str().unwrap().to_owned();

        let cookie = server.sign_in(ALICE);
        let list = server.page("/", Some(&cookie));
        assert!(linked_runs(&list.body).contains(&run), "{}", list.body);
        assert!(shows(&list.body, "adr_validation"), "{}", list.body);

        let page = server.page(&format!("/runs/{run}"), Some(&cookie));
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(page.body.contains(&badge("succeeded")), "{}", page.body);
        for phase in ["discovery", "adrs", "corpus", "ratchet", "analysis", "report"] {
            assert!(shows(&page.body, phase), "phase {phase}: {}", page.body);
        }
        // One child run per ADR, linked from the `check` node, each an `adr_check` that
        // succeeded and names its parent.
        let check = node_part(&page.body, "check");
        let children = linked_runs(check);
        assert_eq!(children.len(), adrs.len(), "{adrs:?}: {check}");
        assert_eq!(check.matches(&badge("succeeded")).count(), adrs.len() + 1, "{check}");
        let mut checked = Vec::new();
        for child in &children {
            let page = server.page(&format!("/runs/{child}"), Some(&cookie));
            assert_eq!(page.status, 200, "{}", page.body);
            assert!(shows(&page.body, "adr_check"), "{}", page.body);
            assert!(page.body.contains("Started by"), "{}", page.body);
            assert!(linked_runs(&page.body).contains(&run), "{}", page.body);
            // Its inputs name its ADR.
            let inputs = page.body.replace("&quot;", "\"");
            let file = adrs.iter().find(|adr| inputs.contains(&format!("\"file\": \"{adr}\"")));
            checked.push(file.unwrap_or_else(|| panic!("no ADR named: {}", page.body)).clone());
        }
        checked.sort();
        assert_eq!(checked, adrs, "each ADR checked once");
        // The report it wrote is there to open.
        let report = format!("/runs/{run}/files/write_report");
        assert!(page.body.contains(&format!("href=\"{report}\"")), "{}", page.body);
        let opened = server.page(&report, Some(&cookie));
        assert_eq!(opened.status, 200, "{}", opened.body);
        assert!(opened.body.contains("0002-store-data-in-postgresql.md"), "{}", opened.body);
    }
}

/// Where the form that answers `node`'s question on `body` posts.
fn answer_path<'a>(body: &'a str, node: &str) -> &'a str {
    let field = format!(r#"name="node" value="{node}""#);
    let at = body
        .find(&field)
        .unwrap_or_else(|| panic!("no form of {node}: {body}"));
    let form = body[..at].rfind("<form").unwrap();
    let action = &body[form..at];
    let start = action.find("action=\"").unwrap() + "action=\"".len();
    let end = start + action[start..].find('"').unwrap();
    &action[start..end]
}

/// Whether `body` holds a form that answers `node`'s question.
fn asks(body: &str, node: &str) -> bool {
    body.contains(&format!(r#"name="node" value="{node}""#))
}

/// The state a run's page gives the run, in its heading.
fn state(body: &str) -> &str {
    let marker = r#"<span class="badge "#;
    let start = body.find(marker).expect("a state") + marker.len();
    let end = start + body[start..].find('"').unwrap();
    &body[start..end]
}

on_both_backends! {
    fn a_waiting_bootstrap_loop_is_answered_and_cancelled_from_its_page(place) {
        let server = with_tokens(&place);
        write_adrs(&server.db.dir.path().join("workspace"), false);
        let alice = open_session(&server, ALICE);
        let arguments = json!({ "checks": checks(), "max_iterations": 2 });
        let run = start_task(&server, &alice, "bootstrap_validation_loop", arguments);
        let cookie = server.sign_in(ALICE);

        // The list marks the loop as waiting for its person.
        wait_until("the loop is marked waiting", || {
            let list = server.page("/", Some(&cookie)).body;
            list.split("<tr").any(|row| row.contains(&run) && row.contains("waiting for an answer"))
        });
        // Its page shows the question its iteration asks, and links that iteration.
        let asking = "this server may not run the checks";
        let page = page_when(&server, &cookie, &run, "the iteration starts", |body| {
            !linked_runs(node_part(body, "iterate")).is_empty()
        });
        let child = linked_runs(node_part(&page, "iterate"))[0].clone();
        assert!(page.contains(asking), "the loop's page shows the question: {page}");
        let to = answer_path(&page, "ask_output");
        assert_eq!(to, format!("/runs/{child}/answer"), "{page}");
        let own = server.page(&format!("/runs/{child}"), Some(&cookie)).body;
        assert_eq!(answer_path(&own, "ask_output"), to, "{own}");
        assert!(linked_runs(&own).contains(&run), "{own}");

        // The person pastes what the script printed: one check failed.
        let printed = printed(&[DB]);
        let body: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("node", "ask_output")
            .append_pair("f.output", printed["output"].as_str().unwrap())
            .append_pair("f.exit_code", "1")
            .finish();
        let posted = server.form(to, Some(&cookie), Some(&server.origin()), &body);
        assert_eq!(posted.status, 303, "{}", posted.body);
        // The run goes on to the learning of that failure, which the loop's page asks next.
        let learning = format!("the check `{DB}` failed");
        let page = page_when(&server, &cookie, &run, "the learning is asked", |body| body.contains(&learning));
        assert!(!asks(&page, "ask_output"), "answered: {page}");
        let own = server.page(&format!("/runs/{child}"), Some(&cookie)).body;
        let answered = node_part(&own, "ask_output");
        assert!(answered.contains("Questions answered"), "{answered}");
        assert!(answered.contains(&format!("FAIL {DB} no database yet")), "{answered}");

        // Cancelled from its page, the loop ends cancelled, and so does its iteration.
        let cancelled = server.form(&format!("/runs/{run}/cancel"), Some(&cookie), Some(&server.origin()), "");
        assert_eq!(cancelled.status, 303, "{}", cancelled.body);
        let page = page_when(&server, &cookie, &run, "the loop is cancelled", |body| state(body) == "cancelled");
        let own = page_when(&server, &cookie, &child, "the iteration is cancelled", |body| state(body) == "cancelled");
        assert!(node_part(&page, "iterate").contains(&badge("cancelled")), "{page}");
        for body in [&page, &own] {
            assert!(!body.contains("Cancel the run"), "{body}");
        }
        // Its question takes no answer any more: the form of the page before is refused,
        // and nothing is recorded.
        let answers = || {
            (place.store().audit_rows().unwrap().into_iter())
                .filter(|row| row.run_id.as_deref() == Some(child.as_str()) && row.tool == "answer")
                .count()
        };
        let before = answers();
        let late = "node=learning_drafts&instance=0&f.text=%7B%7D";
        let late = server.form(&format!("/runs/{child}/answer"), Some(&cookie), Some(&server.origin()), late);
        assert_ne!(late.status, 303, "{}", late.body);
        assert!(late.body.contains(&format!("run {child} already cancelled")), "{}", late.body);
        assert_eq!(answers(), before, "no answer recorded");
        for body in [&page, &own, &late.body] {
            assert!(!body.contains("Waiting for an answer"), "nothing is asked any more: {body}");
        }
    }
}

/// Answers `node`'s question on run `run`'s page with `fields`, as its form posts them;
/// the reply.
fn answer(
    server: &HttpServer,
    cookie: &str,
    page: &str,
    node: &str,
    fields: &[(&str, &str)],
) -> Reply {
    let mut body = form_urlencoded::Serializer::new(String::new());
    body.append_pair("node", node);
    for (name, value) in fields {
        body.append_pair(&format!("f.{name}"), value);
    }
    let to = answer_path(page, node);
    server.form(to, Some(cookie), Some(&server.origin()), &body.finish())
}

/// The link to the file node `node` of run `run` wrote, and the text it shows.
fn file_link<'a>(body: &'a str, run: &str, node: &str) -> &'a str {
    let href = format!("href=\"/runs/{run}/files/{node}\">");
    let start = body
        .find(&href)
        .unwrap_or_else(|| panic!("no link to {href}: {body}"))
        + href.len();
    &body[start..start + body[start..].find('<').unwrap()]
}

on_both_backends! {
    fn a_troubleshooting_session_and_its_outcome_are_rated_from_their_pages(place) {
        let server = with_tokens(&place);
        let alice = open_session(&server, ALICE);
        let cookie = server.sign_in(ALICE);
        // A session with every phase given but its outcome: its page asks for the rating,
        // and the person leaves it for later.
        let session = start_task(&server, &alice, "troubleshoot", json!({
            "failure": "The billing service crashes on start", "component": "billing",
            "hypotheses": [{ "cause": "Out of memory", "likelihood": "high", "evidence": "137" }],
            "plan": [{ "step": "Read the pod's events", "expected": "OOMKilled" }] }));
        let page = page_when(&server, &cookie, &session, "the session asks for its outcome", |body| asks(body, "outcome_ask"));
        assert!(page.contains(&format!("troubleshoot_outcome and run id {session}")), "{page}");
        let posted = answer(&server, &cookie, &page, "outcome_ask", &[("rating", "later")]);
        assert_eq!(posted.status, 303, "{}", posted.body);
        let page = page_when(&server, &cookie, &session, "the session ends", |body| state(body) == "succeeded");
        let report = file_link(&page, &session, "write_report").to_owned();
        assert!(report.starts_with("docs/troubleshooting/"), "{report}");

        // Its outcome, rated from the outcome run's page.
        let outcome = start_task(&server, &alice, "troubleshoot_outcome", json!({ "run_id": session }));
        let page = page_when(&server, &cookie, &outcome, "the rating is asked", |body| asks(body, "rating_ask"));
        let message = "Did the fix for &quot;The billing service crashes on start&quot; work?";
        assert!(page.contains(message), "{page}");
        let fields = [("rating", "fixed"), ("cause", "Out of memory"), ("note", "raised the memory limit")];
        let posted = answer(&server, &cookie, &page, "rating_ask", &fields);
        assert_eq!(posted.status, 303, "{}", posted.body);
        let page = page_when(&server, &cookie, &outcome, "the outcome is recorded", |body| state(body) == "succeeded");
        let shown = page.replace("&quot;", "\"");
        assert!(shown.contains("\"rating\": \"fixed\""), "{page}");
        assert!(shown.contains(&format!("\"report\": \"{report}\"")), "{page}");
        // The session's report is linked from the outcome's page, with the rating in it.
        assert_eq!(file_link(&page, &outcome, "write_report"), report);
        let opened = server.page(&format!("/runs/{outcome}/files/write_report"), Some(&cookie));
        assert_eq!(opened.status, 200, "{}", opened.body);
        assert!(opened.body.contains(&format!("Planned by run {session}.")), "{}", opened.body);
        assert!(opened.body.contains("- Fix: fixed\n- Cause that proved true: Out of memory\n- Note: raised the memory limit\n"), "{}", opened.body);
        assert!(opened.body.contains(&format!("- Rated by run {outcome}")), "{}", opened.body);
    }
}
