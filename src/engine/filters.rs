//! The filters that workflows add to minijinja's own: reading a model's JSON reply,
//! making a file name out of a title, numbering files, fitting text into a limit, reading
//! Markdown (its front matter, headings and links), matching a regular expression
//! (`regex`, in `pattern.rs`), and the `today()` and `fail(message)` functions and the
//! `numbered` test (a name with a 4-digit number prefix).
//!
//! Each one is total on what it is documented to take, and fails with a message that says
//! what it got otherwise: a template error names the node it happened in.

use minijinja::value::{Rest, ValueKind};
use minijinja::{Error, ErrorKind, State, Value};

use super::budget::{self, Budget};
use super::markdown::{self, FrontMatterError};

pub(super) fn register(env: &mut minijinja::Environment<'static>) {
    guard_builtin_filters(env);
    guard_builtin_tests(env);
    env.add_filter("from_json", |text: Value| {
        budget::charge(&text, "from_json's input")?;
        from_json(text.as_str().unwrap_or_default())
    });
    env.add_filter("slug", slug);
    env.add_filter("number_prefix", number_prefix);
    env.add_filter("zero_pad", zero_pad);
    env.add_filter("shorten", shorten);
    env.add_filter("tail", |items: Value, n: usize| {
        budget::charge(&items, "tail's input")?;
        let items: Vec<Value> = items.try_iter()?.collect();
        Ok::<_, Error>(tail(items, n))
    });
    env.add_filter("front_matter", |text: Value| front_matter(&text));
    env.add_filter("headings", |text: Value| headings(&text));
    env.add_filter("links", |text: Value| links(&text));
    env.add_filter("markdown_body", |text: Value| markdown_body(&text));
    env.add_filter("regex", |text: Value, pattern: &str| {
        super::pattern::first_match(&text, pattern)
    });
    env.add_function("today", today);
    env.add_function("fail", |message: &str| super::pattern::fail(message));
    super::filters_lines::register(env);
    env.add_test("numbered", |name: &str| number_prefix(name, None).is_some());
    super::filters_text::register(env);
}

/// Registers each of minijinja's filters again behind a check: every argument is charged
/// against the evaluation's fuel and output cap before the filter runs, and an argument
/// that would make the filter build more than the cap (`indent(10**9)`, `batch(10**9)`,
/// `replace('', big)`) is refused. Without it one filter call can do unbounded work in one
/// instruction of fuel, or allocate until the process aborts.
fn guard_builtin_filters(env: &mut minijinja::Environment<'static>) {
    use minijinja::filters as f;
    macro_rules! guarded {
        ($($name:literal => $filter:path),* $(,)?) => {$(
            let filter = Value::from_function($filter);
            env.add_filter($name, move |state: &State, args: Rest<Value>| {
                check_args($name, &args)?;
                filter.call(state, &args)
            });
        )*};
    }
    guarded! {
        "safe" => f::safe, "escape" => f::escape, "e" => f::escape,
        "lower" => f::lower, "upper" => f::upper, "title" => f::title,
        "capitalize" => f::capitalize, "replace" => f::replace, "length" => f::length,
        "count" => f::length, "dictsort" => f::dictsort, "items" => f::items,
        "reverse" => f::reverse, "trim" => f::trim, "join" => f::join, "split" => f::split,
        "lines" => f::lines, "default" => f::default, "d" => f::default,
        "round" => f::round, "abs" => f::abs, "int" => f::int, "float" => f::float,
        "attr" => f::attr, "first" => f::first, "last" => f::last, "min" => f::min,
        "max" => f::max, "sort" => f::sort, "list" => f::list, "string" => f::string,
        "bool" => f::bool, "batch" => f::batch, "slice" => f::slice, "sum" => f::sum,
        "indent" => f::indent, "select" => f::select, "reject" => f::reject,
        "selectattr" => f::selectattr, "rejectattr" => f::rejectattr, "map" => f::map,
        "groupby" => f::groupby, "unique" => f::unique, "chain" => f::chain,
        "zip" => f::zip, "pprint" => f::pprint, "format" => f::format,
        "tojson" => f::tojson,
    }
}

/// Registers minijinja's comparing tests again behind the same charge: `is eq`, `is in`
/// and the rest walk whole sequences (a lazily repeated one too) in one instruction, and
/// `is in` would take a refused operation for `false`.
fn guard_builtin_tests(env: &mut minijinja::Environment<'static>) {
    use minijinja::tests as t;
    macro_rules! guarded {
        ($($name:literal => $test:path),* $(,)?) => {$(
            let test = Value::from_function($test);
            env.add_test($name, move |state: &State, args: Rest<Value>| {
                let what = format!("the operand of `is {}`", $name);
                for arg in args.iter() {
                    budget::charge(arg, &what)?;
                }
                Ok::<_, Error>(test.call(state, &args)?.is_true())
            });
        )*};
    }
    guarded! {
        "eq" => t::is_eq, "equalto" => t::is_eq, "==" => t::is_eq,
        "ne" => t::is_ne, "!=" => t::is_ne,
        "lt" => t::is_lt, "lessthan" => t::is_lt, "<" => t::is_lt,
        "le" => t::is_le, "<=" => t::is_le,
        "gt" => t::is_gt, "greaterthan" => t::is_gt, ">" => t::is_gt,
        "ge" => t::is_ge, ">=" => t::is_ge,
        "in" => t::is_in, "startingwith" => t::is_startingwith,
        "endingwith" => t::is_endingwith,
    }
}

/// The check of a builtin filter's arguments (the first is its input).
fn check_args(name: &str, args: &[Value]) -> Result<(), Error> {
    let what = format!("the input of `{name}`");
    for arg in args {
        budget::charge(arg, &what)?;
    }
    let limits = budget::limits();
    let input = args.first().cloned().unwrap_or_default();
    let numbers = || args.iter().skip(1).flat_map(numbers_in);
    match name {
        // The builders of lists with a count: the count is what they allocate.
        "batch" | "slice" if numbers().any(|n| n > limits.max_items() as u64) => {
            let what = format!("`{name}`'s count");
            return Err(budget::exceeded(Budget::Output, &what));
        }
        // Each line gets `width` spaces.
        "indent" => {
            let text = input.as_str().unwrap_or_default();
            let lines = text.bytes().filter(|&b| b == b'\n').count() as u64 + 1;
            let widest = numbers().max().unwrap_or(0);
            let size = lines
                .saturating_mul(widest)
                .saturating_add(text.len() as u64);
            budget::check_size(
                usize::try_from(size).unwrap_or(usize::MAX),
                "`indent`'s result",
            )?;
        }
        "tojson" | "pprint" if numbers().any(|n| n > MAX_JSON_INDENT) => {
            let message = format!("{name}: an indent over {MAX_JSON_INDENT} is not allowed");
            return Err(invalid(message));
        }
        "replace" => check_replace(args)?,
        "join" => {
            let separator = args.get(1).and_then(Value::as_str).map_or(0, str::len);
            let items = input.len().unwrap_or(0);
            let size = items.saturating_mul(separator);
            budget::check_size(size, "`join`'s result")?;
        }
        "format" => check_format(input.as_str().unwrap_or_default())?,
        _ => {}
    }
    Ok(())
}

/// The widest indent `tojson` and `pprint` take.
const MAX_JSON_INDENT: u64 = 16;

/// The numbers among a filter's arguments, keyword arguments included.
fn numbers_in(arg: &Value) -> Vec<u64> {
    match arg.kind() {
        ValueKind::Number => arg.as_i64().map(|n| n.max(0) as u64).into_iter().collect(),
        ValueKind::Map => arg
            .try_iter()
            .into_iter()
            .flatten()
            .filter_map(|key| arg.get_item(&key).ok())
            .filter_map(|value| value.as_i64())
            .map(|n| n.max(0) as u64)
            .collect(),
        _ => Vec::new(),
    }
}

/// `replace` writes its replacement once per match, and between every character when
/// the pattern is empty: the result must fit the output cap.
fn check_replace(args: &[Value]) -> Result<(), Error> {
    let text = args.first().and_then(Value::as_str).unwrap_or_default();
    let from = args.get(1).and_then(Value::as_str).unwrap_or_default();
    let to = args.get(2).and_then(Value::as_str).unwrap_or_default();
    let matches = match from.is_empty() {
        true => text.chars().count() + 1,
        false => text.matches(from).count(),
    };
    let size = text.len().saturating_add(matches.saturating_mul(to.len()));
    budget::check_size(size, "`replace`'s result")
}

/// The widest field a `format` string may ask for: minijinja pads with that many
/// characters, and Rust panics on a precision above 65 535.
const MAX_FORMAT_WIDTH: u64 = 1024;

/// Refuses a `format` string whose widths or precisions are over [`MAX_FORMAT_WIDTH`].
fn check_format(format: &str) -> Result<(), Error> {
    for spec in format.split('%').skip(1) {
        // `%(name)10s` names its argument before the flags.
        let spec = match spec.strip_prefix('(') {
            Some(named) => named.split_once(')').map_or("", |(_, rest)| rest),
            None => spec,
        };
        let flags = spec
            .split(|c: char| !(c.is_ascii_digit() || "-+ #.,".contains(c)))
            .next()
            .unwrap_or_default();
        let too_wide = flags
            .split(|c: char| !c.is_ascii_digit())
            .filter(|number| !number.is_empty())
            .any(|number| number.parse::<u64>().map_or(true, |n| n > MAX_FORMAT_WIDTH));
        if too_wide {
            let message = format!("format: a width over {MAX_FORMAT_WIDTH} is not allowed");
            return Err(invalid(message));
        }
    }
    Ok(())
}

/// Today's date in UTC, `YYYY-MM-DD`. A node that reads the clock should be a `value`
/// node of its own, so that its output is stored and a resumed run keeps the same date.
pub fn today() -> String {
    crate::clock::now_iso()[..10].to_owned()
}

/// A filter's refusal of what it was given, as a template error that names the node.
pub(super) fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

/// The JSON a text holds, as a model writes it: bare, inside a Markdown code fence, or
/// after a line of prose. The text from the first `{` or `[` to the last `}` or `]` is
/// read when the whole is not JSON.
pub(crate) fn from_json(text: &str) -> Result<Value, Error> {
    match crate::schema::json_in(text) {
        Ok(value) => Ok(Value::from_serialize(&value)),
        Err(error) => Err(invalid(format!("from_json: not JSON ({error})"))),
    }
}

/// The Markdown text a filter reads, charged first: a string, or an error naming the
/// filter and what it was given instead.
fn markdown_text<'v>(text: &'v Value, filter: &str) -> Result<&'v str, Error> {
    budget::charge(text, &format!("{filter}'s input"))?;
    text.as_str().ok_or_else(|| {
        let kind = text.kind();
        invalid(format!("{filter}: expected a Markdown text, got a {kind}"))
    })
}

/// A filter's result, charged like an input: a list of sections can hold the text
/// several times over (a section's body holds its subsections').
fn measured(value: Value, what: &str) -> Result<Value, Error> {
    budget::charge(&value, what)?;
    Ok(value)
}

/// The YAML front matter of a Markdown text as a map, `{}` when it has none; its value,
/// aliases expanded, within the output cap.
fn front_matter(text: &Value) -> Result<Value, Error> {
    let text = markdown_text(text, "front_matter")?;
    match markdown::front_matter(text, budget::limits().max_output) {
        Ok(map) => measured(Value::from_serialize(&map), "front_matter's result"),
        Err(FrontMatterError::TooLarge) => {
            Err(budget::exceeded(Budget::Output, "front_matter's result"))
        }
        Err(error) => Err(invalid(error.to_string())),
    }
}

/// The headings of a Markdown text: `{level, title, line, body}` each.
fn headings(text: &Value) -> Result<Value, Error> {
    let text = markdown_text(text, "headings")?;
    let headings = Value::from_serialize(markdown::headings(text));
    measured(headings, "headings' result")
}

/// The links of a Markdown text: `{text, target, line}` each.
fn links(text: &Value) -> Result<Value, Error> {
    let text = markdown_text(text, "links")?;
    measured(
        Value::from_serialize(markdown::links(text)),
        "links' result",
    )
}

/// A Markdown text without its front matter.
fn markdown_body(text: &Value) -> Result<Value, Error> {
    let text = markdown_text(text, "markdown_body")?;
    Ok(Value::from(markdown::markdown_body(text)))
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
pub(crate) fn number_prefix(name: &str, digits: Option<usize>) -> Option<u64> {
    let digits = digits.unwrap_or(4);
    let bytes = name.as_bytes();
    let leading = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    (leading == digits && digits > 0).then(|| name[..digits].parse().ok())?
}

/// The last `n` items of a list (all of them when it has fewer).
pub(crate) fn tail(items: Vec<Value>, n: usize) -> Vec<Value> {
    let skip = items.len().saturating_sub(n);
    items.into_iter().skip(skip).collect()
}

/// `n` written with at least `width` digits, zeros in front: `7 | zero_pad(4)` is `0007`.
/// The padding is built here, not by a format width, which panics above 65 535; a width
/// over the output cap is refused.
pub fn zero_pad(n: i64, width: usize) -> Result<String, Error> {
    if n < 0 {
        return Err(invalid(format!("zero_pad: {n} is negative")));
    }
    let digits = n.to_string();
    budget::check_size(width, "zero_pad's width")?;
    let mut padded = "0".repeat(width.saturating_sub(digits.len()));
    padded.push_str(&digits);
    Ok(padded)
}

/// `text` cut to at most `max` UTF-16 code units (the unit tool limits count in), with a
/// visible `…` at the end when it was cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
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

#[cfg(test)]
mod markdown_tests {
    use serde_json::json;

    use crate::engine::template::{Budget, TemplateError, TemplateLimits, Templates};

    use super::eval_text as eval;

    #[test]
    fn the_markdown_filters_read_an_adr() {
        let adr = "---\nstatus: accepted\ndate: 2026-01-05\n---\n# 3. Use PostgreSQL\n\n## Status\n\nAccepted, see [ADR 2](0002-x.md).\n";
        let templates = Templates::default();
        let read = |expr: &str| eval(&templates, expr, adr).unwrap();
        assert_eq!(
            read("(inputs.text | front_matter).status"),
            json!("accepted")
        );
        assert_eq!(read("inputs.text | front_matter | length"), json!(2));
        assert_eq!(
            read("inputs.text | headings | map(attribute='title') | list"),
            json!(["3. Use PostgreSQL", "Status"])
        );
        assert_eq!(
            read("(inputs.text | headings | selectattr('title', 'eq', 'Status') | first).body"),
            json!("Accepted, see [ADR 2](0002-x.md).")
        );
        assert_eq!(
            read("inputs.text | links"),
            json!([{ "text": "ADR 2", "target": "0002-x.md", "line": 9 }])
        );
        assert!(
            read("inputs.text | markdown_body")
                .as_str()
                .unwrap()
                .starts_with("# 3.")
        );
        assert_eq!(read("'no front matter' | front_matter"), json!({}));
    }

    #[test]
    fn a_malformed_front_matter_is_a_template_error_naming_its_line() {
        let text = "---\nstatus: accepted\ndate: 2026-01-05\ndeciders: [a, b\n---\n# T\n";
        let error = eval(&Templates::default(), "inputs.text | front_matter", text).unwrap_err();
        assert!(matches!(error, TemplateError::Failed(_)), "{error:?}");
        assert!(
            error.to_string().contains("front matter: line 5: "),
            "{error}"
        );
        let error = eval(&Templates::default(), "3 | headings", "").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("headings: expected a Markdown text, got a number"),
            "{error}"
        );
    }

    #[test]
    fn the_markdown_filters_are_held_to_the_budgets() {
        let mut laughs = String::from("---\na: &a [\"lol\"]\n");
        for (name, before) in ["b", "c", "d", "e", "f", "g", "h", "i"]
            .iter()
            .zip("abcdefgh".chars())
        {
            let aliases = vec![format!("*{before}"); 9].join(", ");
            laughs.push_str(&format!("{name}: &{name} [{aliases}]\n"));
        }
        laughs.push_str("---\n");
        let templates = Templates::default();
        let result = eval(&templates, "inputs.text | front_matter", &laughs);
        assert!(
            matches!(
                result,
                Err(TemplateError::Budget {
                    budget: Budget::Output,
                    ..
                })
            ),
            "{result:?}"
        );
        // Each section holds its subsections: six levels hold the text six times over.
        let small = Templates::new(TemplateLimits {
            fuel: 1_000_000,
            max_output: 4_000,
        });
        let nested: String = (1..=6)
            .map(|level| format!("{} L{level}\n", "#".repeat(level)))
            .collect();
        let text = format!("{nested}{}", "x".repeat(700));
        let result = eval(&small, "inputs.text | headings | length", &text);
        assert!(
            matches!(
                result,
                Err(TemplateError::Budget {
                    budget: Budget::Output,
                    ..
                })
            ),
            "{result:?}"
        );
        let result = eval(&small, "inputs.text | headings | length", &nested);
        assert_eq!(result.unwrap(), json!(6));
    }
}

/// Evaluates `expr` with `inputs.text` bound to `text`: how the filters' tests read a text.
#[cfg(test)]
pub(super) fn eval_text(
    templates: &super::template::Templates,
    expr: &str,
    text: &str,
) -> Result<serde_json::Value, super::template::TemplateError> {
    let ctx = Value::from_serialize(serde_json::json!({ "inputs": { "text": text } }));
    templates.eval(expr, &ctx)
}
