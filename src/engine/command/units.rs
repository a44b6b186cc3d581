//! Sizes as written in a commands file: `512`, `64KiB`, `1MiB`, `1GiB`, `200kB`, `1MB`.

/// The units, with their length in bytes: binary (`KiB`) and decimal (`kB`), as people
/// write both.
const UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("kB", 1_000),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
];

/// The number of bytes `text` says: whole digits, then optionally a unit.
pub(super) fn parse_size(text: &str) -> Result<u64, String> {
    let invalid = || {
        format!(
            "invalid size `{text}`: expected a whole number of bytes, optionally followed \
             by a unit (B, KiB, MiB, GiB, kB, MB, GB), like `64KiB` or `1MiB`"
        )
    };
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    if number.is_empty() {
        return Err(invalid());
    }
    let scale = match unit.trim_start() {
        "" => 1,
        unit => UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, scale)| *scale)
            .ok_or_else(invalid)?,
    };
    let number: u64 = number
        .parse()
        .map_err(|_| format!("size `{text}` is too large"))?;
    number
        .checked_mul(scale)
        .ok_or_else(|| format!("size `{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_binary_and_decimal_units() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("64KiB"), Ok(65_536));
        assert_eq!(parse_size("1 MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("200kB"), Ok(200_000));
        assert_eq!(parse_size("3MB"), Ok(3_000_000));
        assert_eq!(parse_size("7B"), Ok(7));
    }

    #[test]
    fn a_size_without_a_number_or_with_an_unknown_unit_is_refused() {
        for bad in ["", "MiB", "1.5MiB", "-1", "1 mib", "1TiB", "12 34"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("99999999999999999999").is_err());
        assert!(
            parse_size("99999999999GiB")
                .unwrap_err()
                .contains("too large")
        );
    }
}
