//! The targets of what a client names to read or follow: a resource URI, and a
//! `subscriptions/listen` request's filter.

use rmcp::model::SubscriptionFilter;
use serde_json::Value;

use crate::app::resources::{Canonical, MAX_URI, Target};
use crate::server::listen_tasks::{self, Asked};

/// `resource_uri`: a URI read into its canonical form is a fixed point of the reading (its
/// canonical form reads back to itself, naming the same thing), no longer than any
/// resource's, and a file it names is an absolute path free of `.`, `..`, empty
/// components and NUL bytes. Following takes any URI up to the cap, and nothing longer.
pub fn resource_uri(data: &[u8]) {
    let Ok(uri) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(canonical) = Canonical::parse(uri) {
        let again = Canonical::parse(&canonical.uri)
            .unwrap_or_else(|bad| panic!("{:?} does not read back: {bad}", canonical.uri));
        assert_eq!(again, canonical, "the canonical form of {uri:?}");
        assert!(canonical.uri.len() <= MAX_URI, "{:?}", canonical.uri);
        if let Target::File(path) = &canonical.target {
            assert!(path.starts_with('/'), "{path:?}");
            assert!(!path.contains('\0'), "{path:?}");
            let parts = path.split('/').skip(1);
            let bad = |part: &str| matches!(part, "" | "." | "..");
            assert!(path == "/" || !parts.clone().any(bad), "{path:?}");
        }
    }
    match Canonical::followed(uri) {
        Ok(followed) => assert!(followed.uri.len() <= MAX_URI, "{:?}", followed.uri),
        Err(_) => assert!(uri.len() > MAX_URI, "{uri:?} refused"),
    }
}

/// `subscription_filter`: a listen's request, screened and granted as the server does. A
/// listen that names more resources than a session follows, or a URI past the cap, is
/// refused before anything else; one that is not refused is granted at most `max`
/// resources, each of those it named, no two the same resource; it follows at most `max`
/// tasks.
///
/// Input: a byte for `max` (1 to 16), then the request as JSON.
pub fn subscription_filter(data: &[u8]) {
    let [max, json @ ..] = data else {
        return;
    };
    let max = usize::from(max % 16) + 1;
    let Ok(raw) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let uris: Option<Vec<String>> = raw["params"]["notifications"]["resourceSubscriptions"]
        .as_array()
        .map(|uris| {
            uris.iter()
                .filter_map(|uri| uri.as_str().map(str::to_owned))
                .collect()
        });
    let listen = raw["method"] == "subscriptions/listen";
    let too_many = uris.as_ref().is_some_and(|uris| {
        raw["params"]["notifications"]["resourceSubscriptions"]
            .as_array()
            .is_some_and(|all| all.len() > max)
            || uris.iter().any(|uri| uri.len() > MAX_URI)
    });
    match listen_tasks::asked(&raw, max) {
        Asked::TooMuch(_) => assert!(listen && too_many, "refused: {raw}"),
        Asked::Tasks(tasks) => assert!(tasks.len() <= max && !too_many, "{raw}"),
        Asked::Nothing | Asked::Undeclared => assert!(!listen || !too_many, "{raw}"),
    }
    if too_many {
        return;
    }
    let requested = SubscriptionFilter::builder()
        .resource_subscriptions(uris.clone().unwrap_or_default())
        .build();
    let granted = crate::server::accepted_subscriptions(&requested, max)
        .and_then(|filter| filter.resource_subscriptions)
        .unwrap_or_default();
    assert!(granted.len() <= max, "{granted:?}");
    let mut seen = std::collections::HashSet::new();
    for uri in &granted {
        assert!(uris.iter().flatten().any(|asked| asked == uri), "{uri:?}");
        let key = Canonical::followed(uri)
            .expect("a granted URI is followed")
            .uri;
        assert!(seen.insert(key), "{uri:?} is granted twice");
    }
}
