//! The links inside a paragraph or a heading's text: reference definitions at the start of
//! a paragraph, then inline links and autolinks, outside code spans.
//!
//! Inline links are found as CommonMark finds them: each `[` (or `![`) is pushed on a
//! stack, each `]` takes the nearest and looks for `(target)` after it; a link found makes
//! the `[`s before it plain text (links do not nest), an image leaves them be. Every step
//! is bounded so that the whole is linear in the text: a code span's closing run is
//! looked up among precomputed runs, a target's nested parentheses stop at 32 (as cmark's
//! do), and an autolink's scan ends at the next `<`.

use std::collections::HashMap;

use super::blocks::Unit;
use super::{Line, Link};

/// Parentheses a bare target may nest.
const MAX_PARENS: usize = 32;

/// The characters a reference definition's label may have at most (CommonMark's limit).
const MAX_LABEL: usize = 999;

/// The links of the units of `text`, in the order they start.
pub(crate) fn links(text: &str, lines: &[Line], units: &[Unit]) -> Vec<Link> {
    let mut links = Vec::new();
    for unit in units {
        let mut first = unit.first;
        while unit.paragraph && first <= unit.last {
            let Some(link) = definition(lines[first].text(text), first + 1) else {
                break;
            };
            links.push(link);
            first += 1;
        }
        if first <= unit.last {
            let start = lines[first].start;
            let scan = Scan::new(&text[start..lines[unit.last].end]);
            for (offset, mut link) in scan.run() {
                link.line = line_of(lines, start + offset);
                links.push(link);
            }
        }
    }
    links
}

/// The line (counted from 1) that the byte at `offset` is on.
fn line_of(lines: &[Line], offset: usize) -> usize {
    lines.partition_point(|line| line.start <= offset)
}

/// A `[` or `![` not yet closed.
#[derive(Debug, Clone, Copy)]
struct Opener {
    /// Where the `[` or `!` is.
    at: usize,
    /// Where the text starts, after the `[`.
    text: usize,
    image: bool,
}

/// One pass over a unit's text.
struct Scan<'a> {
    text: &'a str,
    bytes: &'a [u8],
    closers: Closers,
    openers: Vec<Opener>,
    /// A `[` before this offset is plain text: a link was found after it.
    inactive_before: usize,
    /// The links found, each with the offset it starts at (its line is set later).
    found: Vec<(usize, Link)>,
}

impl<'a> Scan<'a> {
    fn new(text: &'a str) -> Scan<'a> {
        Scan {
            text,
            bytes: text.as_bytes(),
            closers: Closers::new(text.as_bytes()),
            openers: Vec::new(),
            inactive_before: 0,
            found: Vec::new(),
        }
    }

    /// The links, by the offset they start at.
    fn run(mut self) -> Vec<(usize, Link)> {
        let mut at = 0;
        while at < self.bytes.len() {
            at = self.step(at);
        }
        // A link is found at its `]`, after an autolink inside its text.
        self.found.sort_by_key(|(offset, _)| *offset);
        self.found
    }

    /// Reads what starts at `at`; the offset to go on from.
    fn step(&mut self, at: usize) -> usize {
        let bytes = self.bytes;
        match bytes[at] {
            b'\\' if escapes(bytes, at) => at + 2,
            b'`' => self.code_span(at),
            b'<' => match autolink(self.text, at) {
                Some((end, link)) => {
                    self.found.push((at, link));
                    end
                }
                None => at + 1,
            },
            b'!' if bytes.get(at + 1) == Some(&b'[') => {
                self.openers.push(Opener {
                    at,
                    text: at + 2,
                    image: true,
                });
                at + 2
            }
            b'[' => {
                self.openers.push(Opener {
                    at,
                    text: at + 1,
                    image: false,
                });
                at + 1
            }
            b']' => self.close(at),
            _ => at + 1,
        }
    }

    /// Skips the code span a run of backticks opens, or the run alone when no run of the
    /// same length closes it.
    fn code_span(&mut self, at: usize) -> usize {
        let len = self.bytes[at..].iter().take_while(|&&b| b == b'`').count();
        match self.closers.next(len, at + len) {
            Some(close) => close + len,
            None => at + len,
        }
    }

    /// A `]`: the nearest opener and a `(target)` after it make a link or an image.
    fn close(&mut self, at: usize) -> usize {
        let Some(opener) = self.openers.pop() else {
            return at + 1;
        };
        if !opener.image && opener.at < self.inactive_before {
            return at + 1;
        }
        let Some((end, target)) = destination(self.text, at + 1) else {
            return at + 1;
        };
        if !opener.image {
            let text = words(&unescape(&self.text[opener.text..at]));
            self.found.push((
                opener.at,
                Link {
                    text,
                    target,
                    line: 0,
                },
            ));
            self.inactive_before = opener.at;
        }
        end
    }
}

/// The maximal runs of backticks of a text, by length, to find a code span's closing run
/// without scanning ahead for it: each list is walked once, as the scan goes forward.
struct Closers {
    /// For each length, the offsets of the runs of exactly that length, and how many of
    /// them are behind the scan.
    by_len: HashMap<usize, (Vec<usize>, usize)>,
}

impl Closers {
    fn new(bytes: &[u8]) -> Closers {
        let mut by_len: HashMap<usize, (Vec<usize>, usize)> = HashMap::new();
        let mut at = 0;
        while at < bytes.len() {
            if bytes[at] != b'`' {
                at += 1;
                continue;
            }
            let len = bytes[at..].iter().take_while(|&&b| b == b'`').count();
            by_len.entry(len).or_default().0.push(at);
            at += len;
        }
        Closers { by_len }
    }

    /// The first run of exactly `len` backticks at or after `from`. Calls for one length
    /// come with `from` never decreasing.
    fn next(&mut self, len: usize, from: usize) -> Option<usize> {
        let (runs, behind) = self.by_len.get_mut(&len)?;
        while runs.get(*behind).is_some_and(|&run| run < from) {
            *behind += 1;
        }
        runs.get(*behind).copied()
    }
}

/// The target of an inline link, `(` at `at`: `(target)`, `(<target>)`, `()`, each with
/// an optional title after a space; the offset after the `)` and the target.
fn destination(text: &str, at: usize) -> Option<(usize, String)> {
    let bytes = text.as_bytes();
    if bytes.get(at) != Some(&b'(') {
        return None;
    }
    let start = skip_spaces(bytes, at + 1);
    let (after, target) = match bytes.get(start) {
        Some(b'<') => angled(text, start)?,
        Some(b')') => return Some((start + 1, String::new())),
        _ => bare(text, start)?,
    };
    let next = skip_spaces(bytes, after);
    if bytes.get(next) == Some(&b')') {
        return Some((next + 1, target));
    }
    if next == after {
        return None;
    }
    let next = skip_spaces(bytes, title_end(bytes, next)?);
    (bytes.get(next) == Some(&b')')).then(|| (next + 1, target))
}

/// Spaces, tabs and line endings from `at` on.
fn skip_spaces(bytes: &[u8], at: usize) -> usize {
    let spaces = bytes[at.min(bytes.len())..]
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .count();
    at + spaces
}

/// A target in angle brackets, `<` at `at`: no line ending and no unescaped `<` or `>`
/// inside. The offset after the `>` and the target.
fn angled(text: &str, at: usize) -> Option<(usize, String)> {
    let bytes = text.as_bytes();
    let mut end = at + 1;
    loop {
        match bytes.get(end)? {
            b'>' => return Some((end + 1, unescape(&text[at + 1..end]))),
            b'<' | b'\n' | b'\r' => return None,
            b'\\' if escapes(bytes, end) => end += 2,
            _ => end += 1,
        }
    }
}

/// A bare target from `at`: no space or control character, parentheses balanced (at most
/// [`MAX_PARENS`] deep). The offset after it and the target.
fn bare(text: &str, at: usize) -> Option<(usize, String)> {
    let bytes = text.as_bytes();
    let (mut end, mut depth) = (at, 0usize);
    while let Some(&byte) = bytes.get(end) {
        match byte {
            b'\\' if escapes(bytes, end) => end += 1,
            b'(' if depth == MAX_PARENS => return None,
            b'(' => depth += 1,
            b')' if depth == 0 => break,
            b')' => depth -= 1,
            _ if byte <= b' ' || byte == 0x7f => break,
            _ => {}
        }
        end += 1;
    }
    (end > at && depth == 0).then(|| (end, unescape(&text[at..end])))
}

/// Whether the backslash at `at` escapes the character after it (ASCII punctuation).
fn escapes(bytes: &[u8], at: usize) -> bool {
    bytes.get(at + 1).is_some_and(u8::is_ascii_punctuation)
}

/// The offset after a link title starting at `at`: `"…"`, `'…'` or `(…)`, escapes allowed
/// inside (and no unescaped `(` inside the last kind).
fn title_end(bytes: &[u8], at: usize) -> Option<usize> {
    let close = match bytes.get(at)? {
        b'"' => b'"',
        b'\'' => b'\'',
        b'(' => b')',
        _ => return None,
    };
    let mut end = at + 1;
    loop {
        match *bytes.get(end)? {
            b'\\' if escapes(bytes, end) => end += 2,
            byte if byte == close => return Some(end + 1),
            b'(' if close == b')' => return None,
            _ => end += 1,
        }
    }
}

/// An autolink, `<` at `at`: `<scheme:address>` (text and target alike) or an e-mail
/// address `<name@example.com>` (its target a `mailto:`). The offset after the `>`.
fn autolink(text: &str, at: usize) -> Option<(usize, Link)> {
    let bytes = text.as_bytes();
    let inside = at + 1;
    let end = inside
        + bytes[inside..]
            .iter()
            .position(|&b| b == b'>' || b == b'<' || b <= b' ' || b == 0x7f)?;
    if bytes[end] != b'>' {
        return None;
    }
    let address = &text[inside..end];
    let target = match (is_uri(address), is_email(address)) {
        (true, _) => address.to_owned(),
        (false, true) => format!("mailto:{address}"),
        (false, false) => return None,
    };
    let link = Link {
        text: address.to_owned(),
        target,
        line: 0,
    };
    Some((end + 1, link))
}

/// A scheme (a letter, then 1 to 31 letters, digits, `+`, `.` or `-`), a `:` and the rest.
fn is_uri(address: &str) -> bool {
    let Some((scheme, _)) = address.split_once(':') else {
        return false;
    };
    let mut bytes = scheme.bytes();
    let first = bytes.next().is_some_and(|b| b.is_ascii_alphabetic());
    first
        && (2..=32).contains(&scheme.len())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-'))
}

/// An e-mail address as CommonMark's autolinks take it.
fn is_email(address: &str) -> bool {
    let Some((name, domain)) = address.split_once('@') else {
        return false;
    };
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".!#$%&'*+/=?^_`{|}~-".contains(&b));
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        (1..=63).contains(&bytes.len())
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
            && bytes[0] != b'-'
            && bytes[bytes.len() - 1] != b'-'
    };
    name_ok && domain.split('.').all(label_ok)
}

/// A reference definition filling a line: `[label]: target` or `[label]: <target>`, an
/// optional title after it, indented at most 3 spaces. `line` is its line number.
/// A footnote (`[^1]: …`) is not one.
fn definition(line: &str, number: usize) -> Option<Link> {
    let rest = line.trim_start_matches(' ');
    if line.len() - rest.len() > 3 || !rest.starts_with('[') || rest.starts_with("[^") {
        return None;
    }
    let bytes = rest.as_bytes();
    let close = label_end(bytes)?;
    let label = &rest[1..close];
    if bytes.get(close + 1) != Some(&b':') || label.trim().is_empty() {
        return None;
    }
    let after_colon = &rest[close + 2..];
    let spaces = after_colon.len() - after_colon.trim_start_matches([' ', '\t']).len();
    let start = close + 2 + spaces;
    let (after, target) = match bytes.get(start)? {
        b'<' => angled(rest, start)?,
        _ => bare(rest, start)?,
    };
    let tail = &rest[after..];
    let title = tail.trim_start_matches([' ', '\t']);
    let fits = title.is_empty()
        || (title.len() < tail.len()
            && title_end(title.as_bytes(), 0)
                .is_some_and(|end| title[end..].trim_matches([' ', '\t']).is_empty()));
    fits.then(|| Link {
        text: words(&unescape(label)),
        target,
        line: number,
    })
}

/// The offset of the `]` that closes a label opened at 0: no unescaped `[` inside, at
/// most [`MAX_LABEL`] characters.
fn label_end(bytes: &[u8]) -> Option<usize> {
    let mut at = 1;
    while at <= MAX_LABEL + 1 {
        match *bytes.get(at)? {
            b'\\' if escapes(bytes, at) => at += 2,
            b']' => return Some(at),
            b'[' => return None,
            _ => at += 1,
        }
    }
    None
}

/// `text` with each backslash escape (a backslash before ASCII punctuation) resolved.
fn unescape(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '\\'
            && let Some(&next) = chars.peek()
            && next.is_ascii_punctuation()
        {
            plain.push(next);
            chars.next();
            continue;
        }
        plain.push(ch);
    }
    plain
}

/// `text` trimmed, each run of whitespace in it (line endings too) made one space.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
