//! How values read on a page: states as badges, progress, timestamps and durations,
//! JSON; and the page of an operation that failed.

use http::{Response, StatusCode};
use maud::{Markup, html};
use serde_json::Value;

use super::Body;
use super::page::{frame, html as page};
use crate::app::RunError;

/// The page of an operation that failed.
pub(super) fn failed(error: &RunError) -> Response<Body> {
    let (status, title) = match error {
        RunError::NotFound(_) => (StatusCode::NOT_FOUND, "Not found"),
        RunError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "The store failed"),
        RunError::TooManyRuns { .. } => (StatusCode::TOO_MANY_REQUESTS, "Too many runs"),
        _ => (StatusCode::CONFLICT, "Not done"),
    };
    let message = match error {
        RunError::Store(_) => {
            "The database could not be read or written; the server's log says why.".to_owned()
        }
        error => error.to_string(),
    };
    page(
        status,
        frame(
            title,
            html! {
                h1 { (title) }
                p.problem { (message) }
                p { a href="/" { "Back to the runs" } }
            },
        ),
    )
}

pub(super) fn badge(status: &str) -> Markup {
    html! { span class=(format!("badge {status}")) { (status) } }
}

pub(super) fn progress(percent: i64) -> Markup {
    html! { progress max="100" value=(percent) { (percent) "%" } " " (percent) "%" }
}

pub(super) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// A stored timestamp as a person reads it: date and time to the second, in UTC.
pub(super) fn time(stamp: &str) -> String {
    match parse(stamp) {
        Some(at) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
            at.year(),
            u8::from(at.month()),
            at.day(),
            at.hour(),
            at.minute(),
            at.second()
        ),
        None => stamp.to_owned(),
    }
}

/// How long from `start` to `end`, or to now while it runs.
pub(super) fn took(start: &str, end: Option<&str>) -> String {
    let Some(start) = parse(start) else {
        return String::new();
    };
    let end = end
        .and_then(parse)
        .unwrap_or_else(time::OffsetDateTime::now_utc);
    let seconds = (end - start).as_seconds_f64().max(0.0);
    match seconds {
        s if s < 1.0 => format!("{:.0} ms", s * 1000.0),
        s if s < 60.0 => format!("{s:.1} s"),
        s if s < 3600.0 => format!("{}m {:02}s", (s / 60.0) as u64, (s % 60.0) as u64),
        s => format!(
            "{}h {:02}m",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        ),
    }
}

pub(super) fn parse(stamp: &str) -> Option<time::OffsetDateTime> {
    crate::clock::from_iso(stamp)
}
