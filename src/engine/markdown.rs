//! Markdown read the way ADRs and runbooks are written: the YAML front matter, the
//! headings with the text of their sections, and the links.
//!
//! Pure functions over `&str`, for the filters of the same names (`filters.rs` charges
//! their input and converts). Each is total: any text gives a value, or for a malformed
//! front matter an error naming its line, in time linear in the text. The reading follows
//! CommonMark where an ADR or a runbook can tell the difference (fenced code, setext
//! headings, thematic breaks, code spans, nested brackets, escapes), and reads container
//! blocks (lists, block quotes) as plain paragraphs: a heading inside a block quote is
//! not one of the document's.

mod blocks;
mod inline;
mod yaml;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

use serde::Serialize;
use serde_json::{Map, Value};

pub(crate) use yaml::FrontMatterError;

/// A heading and the text of its section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Heading<'a> {
    /// 1 to 6: the number of `#`s, or 1 for a `===` underline and 2 for `---`.
    pub level: u8,
    /// The heading's text, trimmed, without its `#`s (a setext heading's lines joined by
    /// a space).
    pub title: String,
    /// The heading's first line, counted from 1.
    pub line: usize,
    /// The text from the line after the heading to the next heading of the same or a
    /// higher level (subsections included), without surrounding blank lines, its line
    /// endings as the text has them.
    pub body: &'a str,
}

/// A link: inline (`[text](target "title")`), an autolink (`<https://…>`) or a reference
/// definition (`[label]: target`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Link {
    /// The link's text (an autolink's address, a definition's label), escapes resolved and
    /// each run of whitespace made one space.
    pub text: String,
    /// Where it points, without a title or angle brackets, escapes resolved.
    pub target: String,
    /// The line its `[` or `<` is on, counted from 1.
    pub line: usize,
}

/// The YAML front matter of `text` as a map: an empty one when the text has none (its
/// first line is not `---`). Its value, aliases expanded, may be at most `max_size` bytes
/// (by the measure of the evaluation's budget).
pub(crate) fn front_matter(
    text: &str,
    max_size: usize,
) -> Result<Map<String, Value>, FrontMatterError> {
    let lines = lines(text);
    match fence(text, &lines) {
        Fence::Absent => yaml::empty(max_size),
        Fence::Unclosed => Err(FrontMatterError::unclosed()),
        Fence::Closed { close } => {
            let yaml = &text[lines[1].start..lines[close].start];
            // The YAML's first line is the text's second.
            yaml::mapping(yaml, 1, max_size)
        }
    }
}

/// The headings of `text` in order, outside fenced code, HTML comments and the front
/// matter.
pub(crate) fn headings(text: &str) -> Vec<Heading<'_>> {
    let lines = lines(text);
    let found = blocks::blocks(text, &lines, fence(text, &lines).body_start());
    let ends = section_ends(&found.headings, lines.len());
    let mut headings = Vec::with_capacity(found.headings.len());
    for (heading, end) in found.headings.into_iter().zip(ends) {
        headings.push(Heading {
            level: heading.level,
            line: heading.first + 1,
            body: body(text, &lines[heading.last + 1..end]),
            title: heading.title,
        });
    }
    headings
}

/// The links of `text` in the order they start, outside code (fenced, indented or in a
/// span), HTML comments and the front matter; images are not links.
pub(crate) fn links(text: &str) -> Vec<Link> {
    let lines = lines(text);
    let found = blocks::blocks(text, &lines, fence(text, &lines).body_start());
    inline::links(text, &lines, &found.units)
}

/// `text` without its front matter: all of it when it has none (or one never closed).
pub(crate) fn markdown_body(text: &str) -> &str {
    let lines = lines(text);
    match fence(text, &lines) {
        Fence::Closed { close } => &text[lines[close].next..],
        Fence::Absent | Fence::Unclosed => text,
    }
}

/// One line of a text, by byte offsets: its content is `start..end` (without `\n` or
/// `\r\n`), and the next line starts at `next`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line {
    pub start: usize,
    pub end: usize,
    pub next: usize,
}

impl Line {
    pub(crate) fn text(self, text: &str) -> &str {
        &text[self.start..self.end]
    }
}

/// The lines of `text`: a final line ending adds no empty line, so `a\n` has one line and
/// the empty text none. Only `\n` and `\r\n` end a line; a lone `\r` is text.
pub(crate) fn lines(text: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (at, _) in text.match_indices('\n') {
        let end = match text[start..at].ends_with('\r') {
            true => at - 1,
            false => at,
        };
        lines.push(Line {
            start,
            end,
            next: at + 1,
        });
        start = at + 1;
    }
    if start < text.len() {
        lines.push(Line {
            start,
            end: text.len(),
            next: text.len(),
        });
    }
    lines
}

/// Where the front matter is: its closing line's index, if it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fence {
    /// The text does not start with a `---` line.
    Absent,
    /// It does, and no later line is `---` or `...`.
    Unclosed,
    /// The front matter runs from the second line to the one before `close`.
    Closed { close: usize },
}

impl Fence {
    /// The index of the first line after the front matter: an unclosed one is no front
    /// matter to the headings and links, its `---` a thematic break.
    fn body_start(self) -> usize {
        match self {
            Fence::Closed { close } => close + 1,
            Fence::Absent | Fence::Unclosed => 0,
        }
    }
}

/// The front matter's fence: a first line `---` (after a byte order mark, if any), closed
/// by a line `---` or `...`. Trailing spaces and tabs on either are allowed, as editors
/// leave them.
fn fence(text: &str, lines: &[Line]) -> Fence {
    let Some(first) = lines.first() else {
        return Fence::Absent;
    };
    let opening = first.text(text).trim_start_matches('\u{feff}');
    if !is_delimiter(opening, false) {
        return Fence::Absent;
    }
    let close = lines
        .iter()
        .skip(1)
        .position(|line| is_delimiter(line.text(text), true));
    match close {
        Some(at) => Fence::Closed { close: at + 1 },
        None => Fence::Unclosed,
    }
}

/// Whether a line is `---` (or `...` when it may close the front matter).
fn is_delimiter(line: &str, closing: bool) -> bool {
    let line = line.trim_end_matches([' ', '\t']);
    line == "---" || (closing && line == "...")
}

/// The text of `lines` without the blank lines around it and trailing whitespace.
fn body<'a>(text: &'a str, lines: &[Line]) -> &'a str {
    let blank = |line: &&Line| line.text(text).trim().is_empty();
    let first = lines.iter().find(|line| !blank(line));
    let last = lines.iter().rev().find(|line| !blank(line));
    match (first, last) {
        (Some(first), Some(last)) => text[first.start..last.end].trim_end(),
        _ => "",
    }
}

/// For each heading, the index of the line its section ends before: the first line of
/// the next heading of the same or a higher level, or the end of the text. One pass from
/// the end, keeping the nearest heading of each level.
fn section_ends(headings: &[blocks::RawHeading], end: usize) -> Vec<usize> {
    let mut nearest = [end; 7];
    let mut ends = vec![end; headings.len()];
    for (at, heading) in headings.iter().enumerate().rev() {
        let level = usize::from(heading.level);
        ends[at] = nearest[1..=level].iter().copied().min().unwrap_or(end);
        nearest[level] = heading.first;
    }
    ends
}

/// The lines of `text` that hold prose (a paragraph, a list item, a heading), outside the
/// front matter, code (fenced or indented) and HTML comments: (number from 1, text).
pub(crate) fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let lines = lines(text);
    let found = blocks::blocks(text, &lines, fence(text, &lines).body_start());
    let mut at: Vec<usize> = (found.units.iter())
        .flat_map(|unit| unit.first..=unit.last)
        .collect();
    at.sort_unstable();
    at.dedup();
    at.into_iter()
        .map(|i| (i + 1, lines[i].text(text)))
        .collect()
}
