//! Properties of the Markdown readers over generated input: headings and links found as
//! they were written, a generated front matter read back as the values it was written
//! from, `\r\n` read as `\n`, and any string at all read without a panic into results
//! that lie within the text.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::*;

/// A size no generated front matter comes near.
const ROOMY: usize = 1 << 20;

/// The (text, target, line) of each link.
fn targets(text: &str) -> Vec<(String, String, usize)> {
    links(text)
        .into_iter()
        .map(|l| (l.text, l.target, l.line))
        .collect()
}

/// A heading's title: words of letters and digits.
fn title() -> impl Strategy<Value = String> {
    "[A-Za-z0-9]{1,8}( [A-Za-z0-9]{1,8}){0,3}"
}

/// A line of a section's body: prose that is no heading, rule, fence or container.
fn prose() -> impl Strategy<Value = String> {
    "[a-z][a-z ,.]{0,30}"
}

/// A section: its level, whether it is written with an underline (levels 1 and 2), its
/// title and its body's lines.
fn section() -> impl Strategy<Value = (u8, bool, String, Vec<String>)> {
    (
        1u8..=6,
        any::<bool>(),
        title(),
        prop::collection::vec(prose(), 0..4),
    )
}

/// The lines of a section as written.
fn written(level: u8, setext: bool, title: &str, body: &[String]) -> Vec<String> {
    let mut lines = match (setext, level) {
        (true, 1) => vec![title.to_owned(), "===".to_owned()],
        (true, 2) => vec![title.to_owned(), "---".to_owned()],
        _ => vec![format!("{} {title}", "#".repeat(usize::from(level)))],
    };
    lines.push(String::new());
    lines.extend(body.iter().cloned());
    lines.push(String::new());
    lines
}

/// A link as written, with its text and target escaped where they need it.
fn link_written(text: &str, target: &str, kind: u8) -> String {
    let escaped: String = text
        .chars()
        .flat_map(|c| match c.is_ascii_punctuation() {
            true => vec!['\\', c],
            false => vec![c],
        })
        .collect();
    match kind % 3 {
        0 => format!("[{escaped}]({target})"),
        1 => format!("[{escaped}](<{target}> \"a title\")"),
        _ => format!("<{target}>"),
    }
}

proptest! {
    #[test]
    fn headings_of_generated_sections_are_those_sections_with_their_lines(
        sections in prop::collection::vec(section(), 0..8),
        preamble in prop::collection::vec(prose(), 0..3),
    ) {
        let mut lines: Vec<String> = preamble.clone();
        if !preamble.is_empty() {
            lines.push(String::new());
        }
        let mut expected = Vec::new();
        for (level, setext, title, body) in &sections {
            expected.push((*level, title.clone(), lines.len() + 1));
            lines.extend(written(*level, *setext, title, body));
        }
        let text = lines.join("\n");
        let found = headings(&text);
        let got: Vec<_> = found.iter().map(|h| (h.level, h.title.clone(), h.line)).collect();
        prop_assert_eq!(got, expected);
        // A section's body is its own lines, then its subsections up to the next heading
        // of its level or higher.
        for (at, heading) in found.iter().enumerate() {
            let end = found[at + 1..]
                .iter()
                .find(|next| next.level <= heading.level)
                .map_or(lines.len(), |next| next.line - 1);
            let first = match sections[at].1 && sections[at].0 <= 2 { true => heading.line + 1, false => heading.line };
            let expected = lines[first..end].join("\n");
            prop_assert_eq!(heading.body, expected.trim_matches('\n').trim_end());
        }
    }

    #[test]
    fn links_round_trip(
        items in prop::collection::vec(
            ("[ -~]{1,20}", "[a-z]{2,6}:[a-z0-9./?=&-]{1,20}", 0u8..3, prose()),
            0..6,
        ),
    ) {
        let mut text = String::new();
        let mut expected = Vec::new();
        for (line, (label, target, kind, words)) in items.iter().enumerate() {
            let shown = label.split_whitespace().collect::<Vec<_>>().join(" ");
            prop_assume!(!shown.is_empty());
            let written = link_written(label, target, *kind);
            text.push_str(&format!("{words} {written} {words}\n"));
            let text_of = if kind % 3 == 2 { target.clone() } else { shown };
            expected.push((text_of, target.clone(), line + 1));
        }
        prop_assert_eq!(targets(&text), expected);
    }

    #[test]
    fn crlf_line_endings_read_as_lf_ones(text in "[-#=`~>*_ \\[\\]()<>!:a-z\"'\\\\\n]{0,200}") {
        let crlf = text.replace('\n', "\r\n");
        let strip = |body: &str| body.replace('\r', "");
        let lf_headings: Vec<_> = headings(&text).into_iter().map(|h| (h.level, h.title, h.line, strip(h.body))).collect();
        let crlf_headings: Vec<_> = headings(&crlf).into_iter().map(|h| (h.level, h.title, h.line, strip(h.body))).collect();
        prop_assert_eq!(lf_headings, crlf_headings);
        prop_assert_eq!(links(&text), links(&crlf));
        prop_assert_eq!(front_matter(&text, ROOMY), front_matter(&crlf, ROOMY));
        prop_assert_eq!(markdown_body(&text), strip(markdown_body(&crlf)));
    }
}

/// A mapping key as front matters write them: a plain word.
fn key() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,8}"
}

/// A scalar a front matter may hold: any integer, a boolean, null, a finite float, and
/// strings of words (written plain) or of any characters (written quoted).
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
        prop::num::f64::NORMAL.prop_map(Value::from),
        "[a-z]{1,8}( [a-z]{1,8}){0,2}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ]
}

/// A value: scalars in lists and maps, nested a few levels.
fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A front matter's mapping.
fn mapping() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(key(), value(), 0..6).prop_map(|map| map.into_iter().collect())
}

/// `map` as YAML in block style: a map's entries one a line, indented under their key; a
/// list's items one a line after `- `; each item of a list, and each empty list or map,
/// in flow style.
fn yaml_block(map: &Map<String, Value>, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    for (key, value) in map {
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                out.push_str(&format!("{pad}{key}:\n"));
                yaml_block(inner, indent + 2, out);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push_str(&format!("{pad}{key}:\n"));
                for item in items {
                    out.push_str(&format!("{pad}  - {}\n", yaml_flow(item)));
                }
            }
            other => out.push_str(&format!("{pad}{key}: {}\n", yaml_flow(other))),
        }
    }
}

/// `value` as YAML in flow style.
fn yaml_flow(value: &Value) -> String {
    match value {
        Value::Null => "~".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            // `{:?}` writes a float the way it reads back (`1e300`, `5.0`), never as an
            // integer.
            Some(f) if n.is_f64() => format!("{f:?}"),
            _ => n.to_string(),
        },
        Value::String(text) => yaml_string(text),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(yaml_flow).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(key, value)| format!("{key}: {}", yaml_flow(value)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
    }
}

/// A string as YAML: plain when it is words that the core schema reads as a string,
/// else double-quoted, with every character YAML may not hold raw escaped.
fn yaml_string(text: &str) -> String {
    let words = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_lowercase() || b == b' ')
        && text.trim() == text
        && !["null", "true", "false"].contains(&text);
    if words {
        return text.to_owned();
    }
    let mut quoted = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() || matches!(c, '\u{feff}' | '\u{fffe}' | '\u{ffff}') => {
                quoted.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Markdown-ish text: the characters the syntax turns on, line endings of both kinds.
const MARKDOWN_ISH: &str = "[-#=`~>*_ \\[\\]()<>!:.&|{}@a-z0-9\"'\\\\\t\r\n\u{feff}]{0,300}";

/// The properties every reading of `text` has, whatever it is: each heading and link on
/// a line of the text, headings in order, a front matter's error on a line of the text,
/// and the body a suffix of it.
fn check_readings(text: &str) -> Result<(), TestCaseError> {
    let count = lines(text).len();
    let mut previous = 0;
    for heading in headings(text) {
        prop_assert!((1..=6).contains(&heading.level));
        prop_assert!(heading.line > previous && heading.line <= count);
        previous = heading.line;
    }
    for link in links(text) {
        prop_assert!((1..=count).contains(&link.line), "{link:?} of {count}");
    }
    match front_matter(text, ROOMY) {
        Err(FrontMatterError::Malformed { line, message }) => {
            prop_assert!((1..=count).contains(&line), "{line} of {count}: {message}");
        }
        Ok(_) | Err(FrontMatterError::TooLarge) => {}
    }
    prop_assert!(text.ends_with(markdown_body(text)));
    Ok(())
}

proptest! {
    #[test]
    fn a_generated_front_matter_reads_back_as_the_mapping_it_was_written_from(
        map in mapping(),
        bom in any::<bool>(),
        dots in any::<bool>(),
        crlf in any::<bool>(),
        sections in prop::collection::vec(section(), 0..4),
    ) {
        let mut yaml = String::new();
        yaml_block(&map, 0, &mut yaml);
        let close = if dots { "..." } else { "---" };
        let mut lines: Vec<String> = vec![format!("{}---", if bom { "\u{feff}" } else { "" })];
        lines.extend(yaml.lines().map(str::to_owned));
        lines.push(close.to_owned());
        let fence = lines.len();
        let mut expected = Vec::new();
        for (level, setext, title, body) in &sections {
            expected.push((*level, title.clone(), lines.len() + 1));
            lines.extend(written(*level, *setext, title, body));
        }
        let ending = if crlf { "\r\n" } else { "\n" };
        let text = lines.join(ending);
        prop_assert_eq!(front_matter(&text, ROOMY), Ok(map), "{}", text);
        // The body starts on the line after the fence, and its headings keep the text's
        // lines.
        let body = lines[fence..].join(ending);
        prop_assert_eq!(markdown_body(&text), body.as_str());
        let found: Vec<_> = headings(&text)
            .into_iter()
            .map(|h| (h.level, h.title, h.line))
            .collect();
        prop_assert_eq!(found, expected);
    }

    #[test]
    fn a_front_matter_read_within_a_size_fits_it_and_reads_the_same_within_more(
        map in mapping(),
        size in 0usize..600,
        more in 0usize..600,
    ) {
        let mut yaml = String::new();
        yaml_block(&map, 0, &mut yaml);
        let text = format!("---\n{yaml}---\n");
        match front_matter(&text, size) {
            Ok(read) => {
                let value = minijinja::Value::from_serialize(&read);
                prop_assert!(crate::engine::budget::fits(&value, size));
                prop_assert_eq!(front_matter(&text, size + more), Ok(read));
            }
            // Well-formed, it can only be too large.
            Err(error) => prop_assert_eq!(error, FrontMatterError::TooLarge),
        }
    }

    #[test]
    fn any_string_reads_without_a_panic_into_results_within_the_text(text in any::<String>()) {
        check_readings(&text)?;
        check_readings(&format!("---\n{text}"))?;
    }

    #[test]
    fn markdown_ish_text_reads_without_a_panic_into_results_within_the_text(
        text in MARKDOWN_ISH,
        front in "(---\n([a-z]{1,4}: [-a-z0-9\\[\\]{},&*!|> ]{0,12}\r?\n){0,4}(---|\\.\\.\\.)?\n)?",
    ) {
        check_readings(&text)?;
        check_readings(&format!("{front}{text}"))?;
    }
}
