//! Wall-clock timestamps as the tools report them: ISO 8601, UTC, millisecond precision.

use time::OffsetDateTime;
use time::macros::format_description;

/// Now, as `2026-11-30T10:00:00.000Z`.
pub fn now_iso() -> String {
    let format =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    OffsetDateTime::now_utc()
        .format(&format)
        .expect("a UTC timestamp always formats")
}

/// Now, in milliseconds since the Unix epoch: the unit of every stored deadline.
pub fn now_ms() -> i64 {
    // `SystemTime` rather than `OffsetDateTime`: no calendar, no 128-bit division.
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX / 1000);
    secs * 1000 + i64::from(since.subsec_millis())
}

/// A millisecond timestamp as [`now_iso`] writes it.
pub fn iso_from_ms(ms: i64) -> String {
    let format =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    let nanos = i128::from(ms) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
        .format(&format)
        .expect("a UTC timestamp always formats")
}

/// The milliseconds of a timestamp written by [`now_iso`] or [`iso_from_ms`].
pub fn ms_from_iso(text: &str) -> Option<i64> {
    let parsed =
        OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(parsed.unix_timestamp_nanos() / 1_000_000).ok()
}
