//! The target of the Markdown filters: the front matter, the headings, the links and the
//! body of any text, read directly and through the filters of a template.

use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::engine::budget;
use crate::engine::markdown::{self, FrontMatterError, Heading, Link};
use crate::engine::template::{TemplateError, TemplateLimits, Templates};

/// The size a front matter may have here, and the output cap of the filters: small, so
/// that aliases reach it and a text's sections outgrow it.
const MAX_SIZE: usize = 16 * 1024;

/// The filters' evaluations, their output cap the front matter's size. Built once: an
/// environment per input would take longer than the reading.
static TEMPLATES: LazyLock<Templates> = LazyLock::new(|| {
    Templates::new(TemplateLimits {
        fuel: budget::DEFAULT_FUEL,
        max_output: MAX_SIZE,
    })
});

/// `markdown`: every reading of any text ends with a value, or for the front matter an
/// error, never a panic; and:
/// - headings' lines strictly increase and lie within the text's lines, each level is 1
///   to 6, each title is trimmed, and each body is a trimmed part of the text after its
///   heading's line;
/// - links' lines never decrease and lie within the text's lines, each text is trimmed
///   with single spaces, and no target holds a line ending;
/// - the front matter is a map whose value fits the size it was given, or an error
///   naming a line of the text (or saying it was too large);
/// - the text without its front matter is a suffix of the text;
/// - all of it reads the same with `\r\n` line endings as with `\n` (bodies aside,
///   which keep the text's own);
/// - each filter (`front_matter`, `headings`, `links`, `markdown_body`) gives what the
///   reading gives, within the output cap, or a budget error, or for a malformed front
///   matter the reading's error; never another error, nor a panic it contains.
///
/// That it ends in time linear in the text is the fuzzer's to check: an input that runs
/// past its timeout is a finding.
///
/// Input: the Markdown text.
pub fn markdown(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    read(text);
    filtered(text);
    // The same text with `\n` line endings only, then with `\r\n` ones.
    let lf = text.replace('\r', "");
    let crlf = lf.replace('\n', "\r\n");
    let (lf_read, crlf_read) = (read(&lf), read(&crlf));
    assert_eq!(lf_read, crlf_read, "\\r\\n reads otherwise than \\n");
}

/// What the readers found, line endings in bodies aside, to compare two texts by.
#[derive(Debug, PartialEq)]
struct Read {
    headings: Vec<(u8, String, usize, String)>,
    links: Vec<Link>,
    front_matter: Result<serde_json::Map<String, Value>, FrontMatterError>,
    body: String,
}

/// Reads `text` every way, checking each reading's properties.
fn read(text: &str) -> Read {
    let count = markdown::lines(text).len();
    let headings = markdown::headings(text);
    check_headings(text, &headings, count);
    let links = markdown::links(text);
    check_links(&links, count);
    let front_matter = markdown::front_matter(text, MAX_SIZE);
    match &front_matter {
        Ok(map) => {
            let value = minijinja::Value::from_serialize(map);
            assert!(
                budget::fits(&value, MAX_SIZE),
                "a front matter over its size"
            );
        }
        Err(FrontMatterError::Malformed { line, message }) => {
            assert!(
                (1..=count).contains(line),
                "line {line} of {count}: {message}"
            );
        }
        Err(FrontMatterError::TooLarge) => {}
    }
    let body = markdown::markdown_body(text);
    assert!(text.ends_with(body), "the body is no suffix of the text");
    Read {
        headings: headings
            .into_iter()
            .map(|h| (h.level, h.title, h.line, h.body.replace('\r', "")))
            .collect(),
        links,
        front_matter,
        body: body.replace('\r', ""),
    }
}

fn check_headings(text: &str, headings: &[Heading<'_>], count: usize) {
    let mut previous = 0;
    for heading in headings {
        let Heading {
            level,
            title,
            line,
            body,
        } = heading;
        assert!((1..=6).contains(level), "level {level}");
        assert!(
            *line > previous && *line <= count,
            "line {line} after {previous} of {count}"
        );
        previous = *line;
        assert_eq!(title.trim(), title, "an untrimmed title");
        assert_eq!(body.trim_end(), *body, "a body with trailing whitespace");
        let first = body.split('\n').next().unwrap_or_default();
        assert!(
            body.is_empty() || !first.trim().is_empty(),
            "a body after a blank line"
        );
        if !body.is_empty() {
            // The body is a part of the text, after the heading's line.
            let offset = body.as_ptr() as usize - text.as_ptr() as usize;
            assert!(offset + body.len() <= text.len(), "a body outside the text");
            let body_line = text[..offset].matches('\n').count() + 1;
            assert!(
                body_line > *line,
                "a body on line {body_line}, its heading on {line}"
            );
        }
    }
}

fn check_links(links: &[Link], count: usize) {
    let mut previous = 1;
    for link in links {
        assert!(
            link.line >= previous && link.line <= count,
            "a link on line {} of {count}",
            link.line
        );
        previous = link.line;
        let words = link.text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(words, link.text, "a link's text with stray whitespace");
        assert!(
            !link.target.contains(['\n', '\r']),
            "a target over lines: {link:?}"
        );
    }
}

/// Evaluates each filter on `text` and checks it against the reading.
fn filtered(text: &str) {
    let ctx = minijinja::Value::from_serialize(json!({ "inputs": { "text": text } }));
    let front_matter = markdown::front_matter(text, MAX_SIZE);
    let expected = [
        ("front_matter", front_matter.clone().map(Value::Object)),
        ("headings", Ok(json!(markdown::headings(text)))),
        ("links", Ok(json!(markdown::links(text)))),
        ("markdown_body", Ok(json!(markdown::markdown_body(text)))),
    ];
    for (filter, expected) in expected {
        let got = TEMPLATES.eval(&format!("inputs.text | {filter}"), &ctx);
        match (got, expected) {
            // The input or the result outgrew the budgets: the filter refuses it whole.
            (Err(TemplateError::Budget { .. }), _) => {}
            (Ok(value), Ok(expected)) => {
                assert_eq!(value, expected, "{filter} gives otherwise than its reading");
                let size = serde_json::to_string(&value).map_or(0, |json| json.len());
                assert!(size <= MAX_SIZE, "{filter}: {size} bytes over the cap");
            }
            (
                Err(TemplateError::Failed(message)),
                Err(error @ FrontMatterError::Malformed { .. }),
            ) => {
                let error = error.to_string();
                assert!(message.contains(&error), "{filter}: {message}, not {error}");
            }
            (got, expected) => panic!("{filter}: {got:?} where the reading is {expected:?}"),
        }
    }
}
