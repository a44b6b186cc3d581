//! Durations as written in workflow files: `200ms`, `30s`, `10m`, `1h`, `1.5s`, `1m30s`.

use std::time::Duration;

/// The units, largest first, with their length in nanoseconds.
const UNITS: &[(&str, u128)] = &[
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
];

const FORM: &str = "expected a number followed by a unit (ms, s, m or h), \
                    like `200ms`, `30s`, `1.5s` or `1m30s`";

/// Parses a duration: one or more `<number><unit>` parts, units from largest to smallest.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = |why: &str| format!("invalid duration `{text}`: {why}");
    if text.is_empty() {
        return Err(invalid(FORM));
    }
    let mut rest = text;
    let mut total: u128 = 0;
    let mut last_unit = None;
    while !rest.is_empty() {
        let (number, after) = split_number(rest).ok_or_else(|| invalid(FORM))?;
        let (unit, unit_index, after) = split_unit(after).ok_or_else(|| invalid(FORM))?;
        if last_unit.is_some_and(|last| unit_index <= last) {
            return Err(invalid(
                "units must go from largest to smallest, each at most once",
            ));
        }
        last_unit = Some(unit_index);
        let nanos = part_nanos(number, unit).ok_or_else(|| invalid("too long"))?;
        total = total
            .checked_add(nanos)
            .ok_or_else(|| invalid("too long"))?;
        rest = after;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| invalid("too long"))?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// Splits a leading `digits[.digits]` off `text`.
fn split_number(text: &str) -> Option<(&str, &str)> {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let number = &text[..end];
    let (whole, fraction) = number.split_once('.').unwrap_or((number, "0"));
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    (digits(whole) && digits(fraction)).then_some((number, &text[end..]))
}

/// Splits a leading unit off `text`, with its length and its rank (0 = largest).
fn split_unit(text: &str) -> Option<(u128, usize, &str)> {
    let end = text
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let unit = &text[..end];
    let index = UNITS.iter().position(|(name, _)| *name == unit)?;
    Some((UNITS[index].1, index, &text[end..]))
}

/// `number` units in nanoseconds; digits past nanosecond precision are dropped.
fn part_nanos(number: &str, unit: u128) -> Option<u128> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let whole: u128 = whole.parse().ok()?;
    let mut nanos = whole.checked_mul(unit)?;
    let mut scale = unit;
    for digit in fraction.bytes().take(18) {
        scale /= 10;
        nanos += u128::from(digit - b'0') * scale;
    }
    Some(nanos)
}

/// Formats a duration the way `parse_duration` reads it: `1m30s`, `200ms`, `0s`.
pub(crate) fn format_duration(duration: Duration) -> String {
    if duration.is_zero() {
        return "0s".to_owned();
    }
    let secs = duration.as_secs();
    let (hours, minutes, seconds) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    for (value, unit) in [(hours, "h"), (minutes, "m"), (seconds, "s")] {
        if value > 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    let nanos = duration.subsec_nanos();
    if nanos > 0 {
        let millis = nanos / 1_000_000;
        let rest = nanos % 1_000_000;
        if rest == 0 {
            out.push_str(&format!("{millis}ms"));
        } else {
            let fraction = format!("{rest:06}");
            out.push_str(&format!("{millis}.{}ms", fraction.trim_end_matches('0')));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Duration {
        parse_duration(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn accepts_each_unit_fractions_and_compound_durations() {
        for (text, duration) in [
            ("200ms", Duration::from_millis(200)),
            ("30s", Duration::from_secs(30)),
            ("10m", Duration::from_secs(600)),
            ("1h", Duration::from_secs(3600)),
            ("0s", Duration::ZERO),
            ("1.5s", Duration::from_millis(1500)),
            ("1m30s", Duration::from_secs(90)),
            ("1h2m3s4ms", Duration::from_millis(3_723_004)),
            ("0.25ms", Duration::from_micros(250)),
        ] {
            assert_eq!(ok(text), duration, "{text}");
        }
    }

    #[test]
    fn rejects_malformed_text_and_names_the_accepted_form() {
        for text in [
            "", "10", "-1s", "1x", "s", "1.s", ".5s", "1 s", "1s ", "1.2.3s", "1S",
        ] {
            let error = parse_duration(text).unwrap_err();
            assert!(error.contains(&format!("`{text}`")), "{error}");
            assert!(error.contains("ms, s, m or h"), "{text}: {error}");
        }
    }

    #[test]
    fn rejects_units_out_of_order_or_repeated() {
        assert!(
            parse_duration("30s1m")
                .unwrap_err()
                .contains("largest to smallest")
        );
        assert!(
            parse_duration("1s1s")
                .unwrap_err()
                .contains("largest to smallest")
        );
    }

    #[test]
    fn rejects_overflow() {
        let huge = format!("{}h", u64::MAX);
        assert!(parse_duration(&huge).unwrap_err().contains("too long"));
        let digits = "9".repeat(60) + "s";
        assert!(parse_duration(&digits).is_err());
    }

    #[test]
    fn formats_compactly() {
        for (duration, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(200), "200ms"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3600), "1h"),
            (Duration::from_millis(1500), "1s500ms"),
            (Duration::from_micros(250), "0.25ms"),
        ] {
            assert_eq!(format_duration(duration), text);
        }
    }

    #[test]
    fn formatted_durations_parse_back() {
        for millis in [1, 999, 1000, 61_001, 3_723_004, 86_400_000] {
            let duration = Duration::from_millis(millis);
            assert_eq!(ok(&format_duration(duration)), duration);
        }
        let odd = Duration::new(5, 123_456_789);
        assert_eq!(ok(&format_duration(odd)), odd);
    }
}
