//! The blocks of a Markdown text, line by line: which lines are headings (ATX and setext),
//! which are code (fenced or indented) or HTML comments, and which make up paragraphs,
//! the units inside which links are read.
//!
//! One pass over the lines, each looked at once: a setext heading is found at its
//! underline, from the paragraph open above it.

use super::Line;

/// A heading as found: its level and title, and the indices of its first and last lines
/// (the same for an ATX heading; the underline for a setext one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawHeading {
    pub level: u8,
    pub title: String,
    pub first: usize,
    pub last: usize,
}

/// Consecutive lines whose inline text is read for links, by line index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unit {
    pub first: usize,
    pub last: usize,
    /// A paragraph may start with reference definitions; a heading's text may not.
    pub paragraph: bool,
}

/// What the pass found: the headings in order, and the units of inline text.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    pub headings: Vec<RawHeading>,
    pub units: Vec<Unit>,
}

/// A fenced code block's opening fence: its character and length.
#[derive(Debug, Clone, Copy)]
struct CodeFence {
    mark: u8,
    len: usize,
}

/// A paragraph open above the line being read.
#[derive(Debug, Clone, Copy)]
struct Paragraph {
    first: usize,
    /// Whether an underline would make it a heading: not when it starts a list item or a
    /// block quote, whose paragraphs are no headings of the document.
    setext: bool,
}

/// Where the pass is.
#[derive(Debug, Clone, Copy)]
enum State {
    Flow,
    Code(CodeFence),
    Comment,
}

/// Reads the lines of `text` from index `from` (after the front matter).
pub(crate) fn blocks(text: &str, lines: &[Line], from: usize) -> Blocks {
    let mut found = Blocks::default();
    let mut state = State::Flow;
    let mut paragraph: Option<Paragraph> = None;
    for (at, line) in lines.iter().enumerate().skip(from) {
        let content = line.text(text);
        state = match state {
            State::Code(fence) => match closes(content, fence) {
                true => State::Flow,
                false => State::Code(fence),
            },
            State::Comment => match content.contains("-->") {
                true => State::Flow,
                false => State::Comment,
            },
            State::Flow => flow(text, lines, at, &mut paragraph, &mut found),
        };
    }
    if let Some(open) = paragraph {
        found.close(open, lines.len());
    }
    found
}

/// Reads one line outside code and comments, the paragraph above it open or not; the
/// state the next line is read in.
fn flow(
    text: &str,
    lines: &[Line],
    at: usize,
    paragraph: &mut Option<Paragraph>,
    found: &mut Blocks,
) -> State {
    let content = lines[at].text(text);
    if content.trim().is_empty() {
        found.close_open(paragraph, at);
        return State::Flow;
    }
    let (indent, rest) = indent(content);
    if indent >= 4 {
        // A paragraph's continuation, or indented code.
        return State::Flow;
    }
    if let (Some(open), Some(level)) = (*paragraph, underline(rest))
        && open.setext
    {
        found.setext(text, lines, open, at, level);
        *paragraph = None;
        return State::Flow;
    }
    if let Some(fence) = opening_fence(rest) {
        found.close_open(paragraph, at);
        return State::Code(fence);
    }
    if let Some((level, title)) = atx(rest) {
        found.close_open(paragraph, at);
        found.headings.push(RawHeading {
            level,
            title: without_comments(title),
            first: at,
            last: at,
        });
        found.units.push(Unit {
            first: at,
            last: at,
            paragraph: false,
        });
        return State::Flow;
    }
    if let Some(comment) = rest.strip_prefix("<!--") {
        found.close_open(paragraph, at);
        return match comment.contains("-->") {
            true => State::Flow,
            false => State::Comment,
        };
    }
    if is_thematic_break(rest) {
        found.close_open(paragraph, at);
        return State::Flow;
    }
    match paragraph {
        // A list item or a block quote inside a paragraph makes it no heading's text.
        Some(open) => open.setext &= !starts_container(rest),
        None => {
            *paragraph = Some(Paragraph {
                first: at,
                setext: !starts_container(rest),
            })
        }
    }
    State::Flow
}

impl Blocks {
    /// Ends the paragraph open, if any, before line `at`.
    fn close_open(&mut self, paragraph: &mut Option<Paragraph>, at: usize) {
        if let Some(open) = paragraph.take() {
            self.close(open, at);
        }
    }

    /// A paragraph of the lines from its first to the one before `at`.
    fn close(&mut self, open: Paragraph, at: usize) {
        self.units.push(Unit {
            first: open.first,
            last: at - 1,
            paragraph: true,
        });
    }

    /// The paragraph `open`, underlined at line `at`, as a heading.
    fn setext(&mut self, text: &str, lines: &[Line], open: Paragraph, at: usize, level: u8) {
        let words: Vec<&str> = lines[open.first..at]
            .iter()
            .map(|line| line.text(text).trim())
            .collect();
        self.headings.push(RawHeading {
            level,
            title: without_comments(&words.join(" ")),
            first: open.first,
            last: at,
        });
        self.units.push(Unit {
            first: open.first,
            last: at - 1,
            paragraph: false,
        });
    }
}

/// A title without the HTML comments in it (`## Decision Drivers <!-- optional -->`, as
/// templates of ADRs write them), trimmed; an unclosed `<!--` stays.
fn without_comments(title: &str) -> String {
    let mut kept = String::with_capacity(title.len());
    let mut rest = title;
    while let Some(open) = rest.find("<!--") {
        let Some(close) = rest[open + 4..].find("-->") else {
            break;
        };
        kept.push_str(&rest[..open]);
        rest = &rest[open + 4 + close + 3..];
    }
    kept.push_str(rest);
    kept.trim().to_owned()
}

/// The columns a line is indented by (a tab to the next multiple of 4), and the rest.
fn indent(line: &str) -> (usize, &str) {
    let mut columns = 0;
    for (at, byte) in line.bytes().enumerate() {
        match byte {
            b' ' => columns += 1,
            b'\t' => columns += 4 - columns % 4,
            _ => return (columns, &line[at..]),
        }
    }
    (columns, "")
}

/// The level of a setext underline (`===` 1, `---` 2): one character repeated, then
/// only spaces or tabs.
fn underline(rest: &str) -> Option<u8> {
    let marks = rest.trim_end_matches([' ', '\t']);
    let level = match marks.as_bytes().first()? {
        b'=' => 1,
        b'-' => 2,
        _ => return None,
    };
    let mark = marks.as_bytes()[0];
    marks.bytes().all(|b| b == mark).then_some(level)
}

/// The fence a line opens: three or more backticks (with no backtick after them) or
/// tildes.
fn opening_fence(rest: &str) -> Option<CodeFence> {
    let mark = *rest.as_bytes().first()?;
    if mark != b'`' && mark != b'~' {
        return None;
    }
    let len = rest.bytes().take_while(|&b| b == mark).count();
    let info = &rest[len..];
    (len >= 3 && !(mark == b'`' && info.contains('`'))).then_some(CodeFence { mark, len })
}

/// Whether `content` closes `fence`: indented less than 4 columns, at least as many of
/// the same character, then only spaces or tabs.
fn closes(content: &str, fence: CodeFence) -> bool {
    let (indent, rest) = indent(content);
    let len = rest.bytes().take_while(|&b| b == fence.mark).count();
    indent < 4 && len >= fence.len && rest[len..].trim_matches([' ', '\t']).is_empty()
}

/// The level and title of an ATX heading: 1 to 6 `#`s, then a space, a tab or nothing;
/// the title without a closing run of `#`s (one after a space, or the whole text).
fn atx(rest: &str) -> Option<(u8, &str)> {
    let level = rest.bytes().take_while(|&b| b == b'#').count();
    let after = &rest[level..];
    let separated = after.is_empty() || after.starts_with([' ', '\t']);
    if !(1..=6).contains(&level) || !separated {
        return None;
    }
    let title = after.trim_end_matches([' ', '\t']);
    let unclosed = title.trim_end_matches('#');
    let title = match unclosed.is_empty() || unclosed.ends_with([' ', '\t']) {
        true => unclosed,
        false => title,
    };
    Some((level as u8, title.trim()))
}

/// Whether a line is a thematic break: three or more `-`, `*` or `_`, the same one,
/// spaces and tabs between them allowed.
fn is_thematic_break(rest: &str) -> bool {
    let mut marks = rest.bytes().filter(|&b| b != b' ' && b != b'\t');
    let Some(mark) = marks.next() else {
        return false;
    };
    let mut count = 1;
    for byte in marks {
        if byte != mark {
            return false;
        }
        count += 1;
    }
    matches!(mark, b'-' | b'*' | b'_') && count >= 3
}

/// Whether a line starts a block quote or a list item (`>`, `-`, `+`, `*` or `1.`/`1)`
/// followed by a space, a tab or nothing).
fn starts_container(rest: &str) -> bool {
    let bytes = rest.as_bytes();
    let marker = match bytes.first() {
        Some(b'>') => return true,
        Some(b'-' | b'+' | b'*') => 1,
        Some(b'0'..=b'9') => {
            let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
            match bytes.get(digits) {
                Some(b'.' | b')') if digits <= 9 => digits + 1,
                _ => return false,
            }
        }
        _ => return false,
    };
    matches!(bytes.get(marker), None | Some(b' ' | b'\t'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atx_heading_has_a_space_after_its_hashes_and_loses_a_closing_run() {
        assert_eq!(atx("# Title"), Some((1, "Title")));
        assert_eq!(atx("###### Six"), Some((6, "Six")));
        assert_eq!(atx("####### Seven"), None);
        assert_eq!(atx("#hashtag"), None);
        assert_eq!(atx("#"), Some((1, "")));
        assert_eq!(atx("## Title ##"), Some((2, "Title")));
        assert_eq!(atx("## Title#"), Some((2, "Title#")));
        assert_eq!(atx("### ###"), Some((3, "")));
        assert_eq!(atx("#\tTabbed  "), Some((1, "Tabbed")));
        assert_eq!(atx("# C# and F# #"), Some((1, "C# and F#")));
    }

    #[test]
    fn fences_close_with_as_many_of_the_same_character() {
        let fence = opening_fence("````rust").unwrap();
        assert!(!closes("```", fence));
        assert!(!closes("~~~~", fence));
        assert!(closes("`````  ", fence));
        assert!(!closes("    ````", fence));
        assert!(opening_fence("``` a`b").is_none());
        assert!(opening_fence("~~~ a`b").is_some());
        assert!(opening_fence("``").is_none());
    }

    #[test]
    fn thematic_breaks_and_underlines_are_told_apart() {
        assert!(is_thematic_break("- - -"));
        assert!(is_thematic_break("***"));
        assert!(is_thematic_break("___  "));
        assert!(!is_thematic_break("--"));
        assert!(!is_thematic_break("-*-"));
        assert_eq!(underline("==="), Some(1));
        assert_eq!(underline("-- "), Some(2));
        assert_eq!(underline("- -"), None);
        assert_eq!(underline("=-"), None);
    }

    #[test]
    fn list_items_and_block_quotes_are_containers() {
        for line in [
            "> quote",
            "- item",
            "* item",
            "+ item",
            "1. one",
            "12) twelve",
            "-",
        ] {
            assert!(starts_container(line), "{line}");
        }
        for line in ["-item", "1.5 percent", "Text", "1234567890. big"] {
            assert!(!starts_container(line), "{line}");
        }
    }
}
