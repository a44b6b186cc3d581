//! Tests that skip because what they need is missing (a real MCP client, Chromium,
//! PostgreSQL): the note that says so, or, under CI, the failure instead.
//!
//! The note goes through [`note_skipped`], which writes to the process's own stderr: a
//! note printed with `eprintln!` is captured by libtest and shown only for a test that
//! fails, so a skip would pass unseen.

use mcp_task_server::store::note_skipped;

/// The variable that turns a missing real client, browser or PostgreSQL install from a
/// skip into a failure; `.ci/run` sets it to `required`.
pub(crate) const REAL_CLIENTS: &str = "TASKS_REAL_CLIENTS";

/// The variable naming the PostgreSQL server of the tests; `required` (as `.ci/run` sets
/// it) also turns a missing PostgreSQL install into a failure.
pub(crate) use mcp_task_server::store::TEST_POSTGRES;

/// Chromium, at `$CHROMIUM` or Debian's path; else what is missing.
pub(crate) fn chromium() -> Result<std::path::PathBuf, String> {
    let chromium = std::env::var_os("CHROMIUM").map_or_else(
        || std::path::PathBuf::from("/usr/bin/chromium"),
        std::path::PathBuf::from,
    );
    if !chromium.exists() {
        return Err(format!(
            "no Chromium at {} (apt-get install chromium)",
            chromium.display()
        ));
    }
    Ok(chromium)
}

/// The name of the running test (libtest names its thread after it).
pub(crate) fn test_name() -> String {
    std::thread::current().name().unwrap_or("a test").to_owned()
}

/// Whether `var` is set to `required`.
pub(crate) fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "required")
}

/// `found`, or, when it is `Err(missing)`: a failure where one of `required_by` is set to
/// `required`, else `None` after a note naming what is missing and `how` to install it.
pub(crate) fn or_skip<T>(found: Result<T, String>, how: &str, required_by: &[&str]) -> Option<T> {
    let missing = match found {
        Ok(found) => return Some(found),
        Err(missing) => missing,
    };
    let test = test_name();
    if let Some(var) = required_by.iter().find(|var| required(var)) {
        panic!("{test}: {missing}; {var}=required, so it fails instead of skipping. {how}.");
    }
    let vars = required_by.join(" or ");
    note_skipped(
        &test,
        &format!("{missing}. {how}, then rerun; set {vars}=required to fail instead of skipping."),
    );
    None
}
