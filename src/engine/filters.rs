//! The filters that workflows add to minijinja's own: reading a model's JSON reply,
//! making a file name out of a title, numbering files, fitting text into a limit, and
//! the `today()` function and the `numbered` test (a name with a 4-digit number prefix).
//!
//! Each one is total on what it is documented to take, and fails with a message that says
//! what it got otherwise: a template error names the node it happened in.

use minijinja::{Error, ErrorKind, Value};

pub(super) fn register(env: &mut minijinja::Environment<'static>) {
    env.add_filter("from_json", from_json);
    env.add_filter("slug", slug);
    env.add_filter("number_prefix", number_prefix);
    env.add_filter("zero_pad", zero_pad);
    env.add_filter("shorten", shorten);
    env.add_filter("tail", tail);
    env.add_function("today", today);
    env.add_test("numbered", |name: &str| number_prefix(name, None).is_some());
}

/// Today's date in UTC, `YYYY-MM-DD`. A node that reads the clock should be a `value`
/// node of its own, so that its output is stored and a resumed run keeps the same date.
pub fn today() -> String {
    crate::clock::now_iso()[..10].to_owned()
}

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

/// The JSON a text holds, as a model writes it: bare, inside a Markdown code fence, or
/// after a line of prose. The text from the first `{` or `[` to the last `}` or `]` is
/// read when the whole is not JSON.
pub fn from_json(text: &str) -> Result<Value, Error> {
    match json_in(text) {
        Ok(value) => Ok(Value::from_serialize(&value)),
        Err(error) => Err(invalid(format!("from_json: not JSON ({error})"))),
    }
}

/// The JSON in `text`, read as [`from_json`] reads it.
pub fn json_in(text: &str) -> Result<serde_json::Value, serde_json::Error> {
    let trimmed = text.trim();
    serde_json::from_str::<serde_json::Value>(trimmed).or_else(|first| {
        let start = trimmed.find(['{', '[']);
        let end = trimmed.rfind(['}', ']']);
        match (start, end) {
            (Some(start), Some(end)) if start < end => {
                serde_json::from_str(&trimmed[start..=end]).map_err(|_| first)
            }
            _ => Err(first),
        }
    })
}

/// A file-name-safe slug of `text`: lowercase ASCII letters and digits (common Latin
/// accents folded), runs of anything else made one `-`, at most `max` characters (default
/// 60), never empty: `fallback` (default `untitled`) when nothing is left.
pub fn slug(text: &str, max: Option<usize>, fallback: Option<&str>) -> String {
    let max = max.unwrap_or(60).max(1);
    let mut slug = String::new();
    let mut gap = false;
    for ch in text.chars().flat_map(fold) {
        if ch.is_ascii_alphanumeric() {
            if gap && !slug.is_empty() {
                slug.push('-');
            }
            gap = false;
            slug.push(ch.to_ascii_lowercase());
        } else {
            gap = true;
        }
        if slug.len() >= max {
            break;
        }
    }
    slug.truncate(max);
    let cleaned = slug.trim_end_matches('-').to_owned();
    match (cleaned.is_empty(), fallback) {
        (false, _) => cleaned,
        // The fallback is cleaned the same way; an empty one ends as `untitled`.
        (true, Some(fallback)) => self::slug(fallback, Some(max), None),
        (true, None) => "untitled".to_owned(),
    }
}

/// A Latin letter with an accent as its plain letters; anything else as it is.
fn fold(ch: char) -> Vec<char> {
    let plain = match ch {
        'à'..='å' | 'À'..='Å' => "a",
        'ç' | 'Ç' => "c",
        'è'..='ë' | 'È'..='Ë' => "e",
        'ì'..='ï' | 'Ì'..='Ï' => "i",
        'ñ' | 'Ñ' => "n",
        'ò'..='ö' | 'ø' | 'Ò'..='Ö' | 'Ø' => "o",
        'ù'..='ü' | 'Ù'..='Ü' => "u",
        'ý' | 'ÿ' | 'Ý' => "y",
        'ß' => "ss",
        'æ' | 'Æ' => "ae",
        'œ' | 'Œ' => "oe",
        other => return vec![other],
    };
    plain.chars().collect()
}

/// The number a name starts with when it starts with exactly `digits` digits (default 4)
/// followed by anything but a digit, as `0007-title.md` does; none otherwise.
pub fn number_prefix(name: &str, digits: Option<usize>) -> Option<u64> {
    let digits = digits.unwrap_or(4);
    let bytes = name.as_bytes();
    let leading = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    (leading == digits && digits > 0).then(|| name[..digits].parse().ok())?
}

/// The last `n` items of a list (all of them when it has fewer).
pub fn tail(items: Vec<Value>, n: usize) -> Vec<Value> {
    let skip = items.len().saturating_sub(n);
    items.into_iter().skip(skip).collect()
}

/// `n` written with at least `width` digits, zeros in front: `7 | zero_pad(4)` is `0007`.
pub fn zero_pad(n: i64, width: usize) -> Result<String, Error> {
    if n < 0 {
        return Err(invalid(format!("zero_pad: {n} is negative")));
    }
    Ok(format!("{n:0width$}"))
}

/// `text` cut to at most `max` UTF-16 code units (the unit tool limits count in), with a
/// visible `…` at the end when it was cut.
pub fn shorten(text: &str, max: usize) -> String {
    let units: usize = text.chars().map(char::len_utf16).sum();
    if units <= max {
        return text.to_owned();
    }
    let mut kept = String::new();
    let mut used = 0;
    for ch in text.chars() {
        // One unit is kept for the marker.
        if used + ch.len_utf16() + 1 > max {
            break;
        }
        used += ch.len_utf16();
        kept.push(ch);
    }
    kept.truncate(kept.trim_end().len());
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_read_bare_fenced_or_after_prose() {
        let bare = from_json(r#"{"a": [1, 2]}"#).unwrap();
        assert_eq!(bare.get_attr("a").unwrap().len(), Some(2));
        let fenced = from_json("```json\n[{\"name\": \"x\"}]\n```").unwrap();
        assert_eq!(fenced.len(), Some(1));
        let prose = from_json("Here it is:\n{\"ok\": true}\nHope that helps.").unwrap();
        assert!(prose.get_attr("ok").unwrap().is_true());
        let error = from_json("no json here").unwrap_err();
        assert!(error.to_string().contains("from_json: not JSON"), "{error}");
    }

    #[test]
    fn a_slug_is_safe_whatever_the_title_holds() {
        assert_eq!(
            slug("Use PostgreSQL for Storage", None, None),
            "use-postgresql-for-storage"
        );
        assert_eq!(slug("../../etc/passwd", None, None), "etc-passwd");
        assert_eq!(slug("a/b\\c", None, None), "a-b-c");
        assert_eq!(
            slug("Décision über Çache", None, None),
            "decision-uber-cache"
        );
        assert_eq!(slug("日本語 🚀", None, None), "untitled");
        assert_eq!(slug("   ", None, Some("adr")), "adr");
        assert_eq!(slug("---", None, Some("")), "untitled");
        let long = slug(&"word ".repeat(40), Some(20), None);
        assert!(long.len() <= 20 && !long.ends_with('-'), "{long}");
    }

    #[test]
    fn a_number_prefix_has_exactly_its_digits() {
        assert_eq!(number_prefix("0007-title.md", None), Some(7));
        assert_eq!(number_prefix("0012", None), Some(12));
        assert_eq!(number_prefix("00123-x.md", None), None);
        assert_eq!(number_prefix("007-x.md", None), None);
        assert_eq!(number_prefix("README.md", None), None);
        assert_eq!(zero_pad(7, 4).unwrap(), "0007");
        let items: Vec<Value> = (1..=7).map(Value::from).collect();
        assert_eq!(tail(items.clone(), 2), [Value::from(6), Value::from(7)]);
        assert_eq!(tail(items, 10).len(), 7);
        assert_eq!(zero_pad(12345, 4).unwrap(), "12345");
        assert!(zero_pad(-1, 4).is_err());
    }

    #[test]
    fn shortened_text_fits_its_limit_in_utf16_units_with_a_marker() {
        assert_eq!(shorten("short", 10), "short");
        let cut = shorten("Migrate the billing service to the new queue", 20);
        assert_eq!(cut, "Migrate the billing…");
        let emoji = shorten(&"🚀".repeat(10), 7);
        assert_eq!(emoji.chars().map(char::len_utf16).sum::<usize>(), 7);
        assert!(emoji.ends_with('…'));
    }
}
