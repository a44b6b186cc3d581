//! Wall-clock timestamps as the tools report them: ISO 8601, UTC, millisecond precision.

use time::OffsetDateTime;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;

/// `2026-11-30T10:00:00.000Z`.
const ISO: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// Now, as `2026-11-30T10:00:00.000Z`.
pub fn now_iso() -> String {
    OffsetDateTime::now_utc()
        .format(ISO)
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
    let nanos = i128::from(ms) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
        .format(ISO)
        .expect("a UTC timestamp always formats")
}

/// The milliseconds of a timestamp written by [`now_iso`] or [`iso_from_ms`].
pub fn ms_from_iso(text: &str) -> Option<i64> {
    let parsed =
        OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(parsed.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_time_reads_back_to_the_millisecond() {
        let now = now_ms();
        assert_eq!(ms_from_iso(&iso_from_ms(now)), Some(now));
        assert_eq!(iso_from_ms(0), "1970-01-01T00:00:00.000Z");
        assert!(ms_from_iso(&now_iso()).is_some_and(|ms| (ms - now).abs() < 60_000));
    }
}
