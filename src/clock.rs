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
