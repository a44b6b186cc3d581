//! The tasks a 2026-07-28 `subscriptions/listen` follows, which rmcp 3.11 drops: its
//! `SubscriptionFilter` has no `taskIds`, so the ids are lost when a request is parsed and
//! missing from the acknowledgement it sends. Like the 2025-11-25 layer (`shim.rs`), this
//! works on the messages themselves, on both transports:
//! - inbound, the ids are read from the request's text and marked on the request
//!   ([`ListenTasks`]; on HTTP, in the HTTP request's extensions, as `shim::Renamed` is);
//! - outbound, the acknowledgement of that listen gets them as `taskIds`.
//!
//! The handler then pushes `notifications/tasks` for each (`server/subscriptions.rs`).
//! At most `max` ids are accepted (`--max-subscriptions`). A listen that names tasks
//! without declaring the tasks extension is refused with `-32021`, as the extension says,
//! before rmcp sees it.
//!
//! Here too a listen that names more resources than a session may follow, or a resource
//! URI longer than any resource's, is refused (`-32602`) before rmcp sees it: rmcp keeps
//! the filter a listen asked for as long as the listen lasts, so such a request would
//! hold its bytes for that long.

use rmcp::model::TASKS_EXTENSION_ID;
use serde_json::{Value, json};

use crate::app::resources::MAX_URI;

const METHOD: &str = "subscriptions/listen";
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
const SUBSCRIPTION_ID_META: &str = "io.modelcontextprotocol/subscriptionId";
const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";

/// The ids of the tasks a listen request follows, as accepted: where the handler finds
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListenTasks(pub(crate) Vec<String>);

/// Whether a message's text may be a listen that names tasks or resources: a scan that
/// spares every other message a parse.
pub(crate) fn may_name_tasks(text: &[u8]) -> bool {
    const NAMES: [&[u8]; 2] = [b"\"taskIds\"", b"\"resourceSubscriptions\""];
    NAMES
        .iter()
        .any(|name| text.windows(name.len()).any(|w| w == *name))
}

/// What a message asks of tasks to follow.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Nothing: it is no listen, or names no task.
    Nothing,
    /// These ids, the first `max` it names.
    Tasks(Vec<String>),
    /// It names tasks, but its client did not declare the tasks extension.
    Undeclared,
    /// It names more resources than a session follows, or a URI longer than any
    /// resource's: why.
    TooMuch(String),
}

/// What the message `raw` asks of tasks, at most `max` of them.
pub(crate) fn asked(raw: &Value, max: usize) -> Asked {
    if raw["method"] != METHOD {
        return Asked::Nothing;
    }
    let params = &raw["params"];
    if let Some(uris) = params["notifications"]["resourceSubscriptions"].as_array() {
        if uris.len() > max {
            return Asked::TooMuch(format!(
                "subscriptions/listen names {} resources; a session follows at most {max} \
                 (--max-subscriptions)",
                uris.len()
            ));
        }
        let longest = uris.iter().filter_map(Value::as_str).map(str::len).max();
        if longest.is_some_and(|longest| longest > MAX_URI) {
            return Asked::TooMuch(format!(
                "subscriptions/listen names a URI longer than {MAX_URI} bytes, which no \
                 resource's is"
            ));
        }
    }
    let ids: Vec<String> = params["notifications"]["taskIds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .take(max)
        .map(str::to_owned)
        .collect();
    let declared = params["_meta"][CLIENT_CAPABILITIES_META]["extensions"]
        .get(TASKS_EXTENSION_ID)
        .is_some();
    match (ids.is_empty(), declared) {
        (true, _) => Asked::Nothing,
        (false, true) => Asked::Tasks(ids),
        (false, false) => Asked::Undeclared,
    }
}

/// The answer to a listen that names tasks without declaring the extension: `-32021`,
/// the error a call of a task-only tool gets too.
pub(crate) fn refusal(id: &Value) -> Value {
    let error = super::results::tasks_extension_required(format!(
        "subscriptions/listen names taskIds; declare the {TASKS_EXTENSION_ID} extension to \
         follow tasks"
    ));
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

/// The answer to a listen that asks too much: "invalid params", saying why.
pub(crate) fn too_much(id: &Value, why: &str) -> Value {
    let error = rmcp::ErrorData::invalid_params(why.to_owned(), None);
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

/// Adds `tasks` to `raw` when it is the acknowledgement of the listen request `id`; says
/// whether it was.
pub(crate) fn acknowledge(raw: &mut Value, id: &Value, tasks: &[String]) -> bool {
    if raw["method"] != ACKNOWLEDGED || raw["params"]["_meta"][SUBSCRIPTION_ID_META] != *id {
        return false;
    }
    let Some(notifications) = raw["params"]
        .get_mut("notifications")
        .and_then(Value::as_object_mut)
    else {
        return false;
    };
    notifications.insert("taskIds".into(), Value::from(tasks.to_vec()));
    true
}

/// The tasks a request's listen follows: marked on the request itself (stdio) or on the
/// HTTP request that carried it.
pub(crate) fn of(extensions: &rmcp::model::Extensions) -> Vec<String> {
    extensions
        .get::<ListenTasks>()
        .or_else(|| {
            extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<ListenTasks>())
        })
        .map(|tasks| tasks.0.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listen(meta: Value, ids: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen",
               "params": {"_meta": meta, "notifications": {"taskIds": ids}}})
    }

    fn declaring() -> Value {
        json!({ CLIENT_CAPABILITIES_META: {"extensions": { TASKS_EXTENSION_ID: {} }} })
    }

    #[test]
    fn a_listen_follows_its_tasks_only_when_its_client_declares_the_extension() {
        let three = listen(declaring(), json!(["a", "b", "c"]));
        assert!(may_name_tasks(three.to_string().as_bytes()));
        assert_eq!(asked(&three, 2), Asked::Tasks(vec!["a".into(), "b".into()]));
        assert_eq!(
            asked(&listen(json!({}), json!(["a"])), 8),
            Asked::Undeclared
        );
        assert_eq!(asked(&listen(json!({}), json!([])), 8), Asked::Nothing);
        assert_eq!(asked(&listen(declaring(), json!([])), 8), Asked::Nothing);
        let other = json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/get",
                           "params": {"_meta": declaring(), "notifications": {"taskIds": ["a"]}}});
        assert_eq!(asked(&other, 8), Asked::Nothing);
        let many = json!({"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen",
            "params": {"notifications": {"resourceSubscriptions": ["file:///a", "file:///b"]}}});
        assert!(may_name_tasks(many.to_string().as_bytes()));
        assert!(matches!(asked(&many, 1), Asked::TooMuch(why) if why.contains("at most 1")));
        assert_eq!(asked(&many, 2), Asked::Nothing);
        let long = format!("file:///{}", "a".repeat(MAX_URI));
        let long = json!({"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen",
            "params": {"notifications": {"resourceSubscriptions": [long]}}});
        assert!(matches!(asked(&long, 8), Asked::TooMuch(why) if why.contains("longer than")));
        let refused = refusal(&json!(4));
        assert_eq!(refused["error"]["code"], -32021);
        let required = &refused["error"]["data"]["requiredCapabilities"]["extensions"];
        assert_eq!(required, &json!({ TASKS_EXTENSION_ID: {} }));
    }

    #[test]
    fn only_the_acknowledgement_of_that_listen_gets_the_tasks() {
        let ack = |id: Value| {
            json!({"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": {
                "_meta": { SUBSCRIPTION_ID_META: id }, "notifications": {}}})
        };
        let tasks = ["t1".to_owned()];
        let mut mine = ack(json!(4));
        assert!(acknowledge(&mut mine, &json!(4), &tasks));
        assert_eq!(mine["params"]["notifications"], json!({"taskIds": ["t1"]}));
        let mut another = ack(json!(5));
        assert!(!acknowledge(&mut another, &json!(4), &tasks));
        assert_eq!(another, ack(json!(5)));
        let mut progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                  "params": {"_meta": { SUBSCRIPTION_ID_META: 4 }}});
        assert!(!acknowledge(&mut progress, &json!(4), &tasks));
    }
}
