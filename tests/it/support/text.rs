//! Checks on the text a run wrote: a report, an ADR.

/// Fails the test unless `text` contains every one of `parts`, naming the first missing.
pub(crate) fn assert_contains_all(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} in:\n{text}");
    }
}
