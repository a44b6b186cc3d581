//! Wall-clock timestamps as the tools report them: ISO 8601, UTC, millisecond precision.
//!
//! This host's clock: no lease is compared against it (leases run on the database's
//! clock, `store/runs.rs`). A test hook, `TASKS_CLOCK_OFFSET_MS`, shifts it by that many
//! milliseconds, so that tests can run hosts whose clocks disagree; it is not an option.

use time::OffsetDateTime;

/// Now, as `2026-11-30T10:00:00.000Z`.
pub(crate) fn now_iso() -> String {
    iso_from_ms(now_ms())
}

/// Now, in milliseconds since the Unix epoch: the unit of every stored deadline.
pub fn now_ms() -> i64 {
    // `SystemTime` rather than `OffsetDateTime`: no calendar, no 128-bit division.
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX / 1000);
    (secs * 1000 + i64::from(since.subsec_millis())).saturating_add(offset_ms())
}

/// The test hook's shift of this host's clock: `TASKS_CLOCK_OFFSET_MS` (an integer, maybe
/// negative), read once; 0 when unset or not an integer.
fn offset_ms() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::env::var("TASKS_CLOCK_OFFSET_MS")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(0)
    })
}

/// A millisecond timestamp as [`now_iso`] writes it; times before 1970 write as 1970, and
/// years past 9999 as 9999.
///
/// Formatted by hand: a durable run writes two timestamps per node, and general-purpose
/// formatting (`time`'s, or `write!`) cost a third as much as the node's row write.
pub(crate) fn iso_from_ms(ms: i64) -> String {
    let ms = ms.max(0);
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (year, month, day) = civil_from_days(days);
    let secs = in_day / 1000;
    let mut text = [0u8; 24];
    let mut put = |at: usize, value: i64, width: usize| {
        let mut value = value;
        for i in (at..at + width).rev() {
            text[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, year.min(9999), 4);
    put(5, i64::from(month), 2);
    put(8, i64::from(day), 2);
    put(11, secs / 3600, 2);
    put(14, secs / 60 % 60, 2);
    put(17, secs % 60, 2);
    put(20, in_day % 1000, 3);
    for (at, mark) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
    ] {
        text[at] = mark;
    }
    text[23] = b'Z';
    String::from_utf8_lossy(&text).into_owned()
}

/// (year, month, day) of a day counted from 1970-01-01, in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A timestamp written by [`now_iso`] or [`iso_from_ms`] (any RFC 3339 time), parsed.
pub fn from_iso(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}

/// The milliseconds of a timestamp written by [`now_iso`] or [`iso_from_ms`].
pub fn ms_from_iso(text: &str) -> Option<i64> {
    i64::try_from(from_iso(text)?.unix_timestamp_nanos() / 1_000_000).ok()
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

    #[test]
    fn timestamps_format_as_the_calendar_says() {
        use time::macros::format_description;
        let iso = format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        );
        // Leap days, century years, year ends, and a spread of ordinary times.
        let mut samples = vec![951_782_400_000, 951_868_799_999, 4_107_542_400_000];
        samples.extend((0..2000).map(|i: i64| i * 1_234_567_891_237 % 4_102_444_800_000));
        for ms in samples {
            let expected = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
                .unwrap()
                .format(iso)
                .unwrap();
            assert_eq!(iso_from_ms(ms), expected, "{ms}");
        }
    }
}
