//! Two filters over a text's lines: `numbered_lines`, each line with its number (only
//! those holding one of some words, only the prose of a Markdown text, when asked), so a
//! workflow can cite where a sentence of an ADR is; and `shell_comment`, a text made into
//! shell comment lines that nothing in it can end, so that text read from a file can be
//! shown in a generated script without ever being run.

use minijinja::value::Kwargs;
use minijinja::{Error, Value};
use serde::Serialize;

use super::budget;
use super::filters::invalid;
use super::markdown;

pub(super) fn register(env: &mut minijinja::Environment<'static>) {
    env.add_filter("numbered_lines", numbered_lines);
    env.add_filter("shell_comment", shell_comment);
}

/// A line and its number, counted from 1.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub(crate) struct NumberedLine<'a> {
    pub line: usize,
    pub text: &'a str,
}

/// `text | numbered_lines(words=[...], prose=false)`: `[{line, text}]`. With `words`, only
/// the lines holding one of them as a whole word, in any case; with `prose = true`, only
/// the lines of Markdown prose (not the front matter, code or HTML comments).
fn numbered_lines(text: Value, options: Kwargs) -> Result<Value, Error> {
    budget::charge(&text, "numbered_lines' input")?;
    let text = text.as_str().ok_or_else(|| {
        let kind = text.kind();
        invalid(format!("numbered_lines: expected a text, got a {kind}"))
    })?;
    let words: Option<Vec<String>> = options.get("words")?;
    let prose: Option<bool> = options.get("prose")?;
    options.assert_all_used()?;
    if let Some(words) = &words {
        budget::charge(&Value::from_serialize(words), "numbered_lines' words")?;
        if words
            .iter()
            .any(|w| !w.chars().all(is_word_char) || w.is_empty())
        {
            let message = "numbered_lines: each of `words` must be letters, digits or `_`";
            return Err(invalid(message.to_owned()));
        }
    }
    let found = select_lines(text, words.as_deref(), prose.unwrap_or(false));
    let value = Value::from_serialize(&found);
    budget::charge(&value, "numbered_lines' result")?;
    Ok(value)
}

/// The lines of `text` (Markdown prose only, with `prose`) that hold one of `words`.
pub(crate) fn select_lines<'a>(
    text: &'a str,
    words: Option<&[String]>,
    prose: bool,
) -> Vec<NumberedLine<'a>> {
    let lines: Vec<(usize, &str)> = match prose {
        true => markdown::prose_lines(text),
        false => (markdown::lines(text).into_iter().enumerate())
            .map(|(i, line)| (i + 1, line.text(text)))
            .collect(),
    };
    let lowered: Option<Vec<String>> =
        words.map(|words| words.iter().map(|w| w.to_lowercase()).collect());
    lines
        .into_iter()
        .filter(|(_, line)| match &lowered {
            Some(words) => holds_a_word(line, words),
            None => true,
        })
        .map(|(line, text)| NumberedLine { line, text })
        .collect()
}

fn is_word_char(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

/// Whether `line` holds one of `words` (lowercase) as a whole word, in any case.
fn holds_a_word(line: &str, words: &[String]) -> bool {
    line.split(|ch: char| !is_word_char(ch))
        .any(|word| !word.is_empty() && words.iter().any(|w| *w == word.to_lowercase()))
}

/// `text | shell_comment`: each line of `text` as a shell comment, `# ` then the line,
/// every control character in it (a carriage return, a tab, an escape, a Unicode line or
/// paragraph separator, a bidirectional override) written as a visible escape, `\x1b` or
/// `\u{2028}`. Whatever the text holds, the result is comment lines only, and shows what
/// the text says rather than what a terminal would make of it.
fn shell_comment(text: Value) -> Result<String, Error> {
    budget::charge(&text, "shell_comment's input")?;
    let text = match text.as_str() {
        Some(text) => text.to_owned(),
        None => text.to_string(),
    };
    let comment = comment_lines(&text);
    budget::check_size(comment.len(), "shell_comment's result")?;
    Ok(comment)
}

/// The comment lines of [`shell_comment`], joined by `\n`.
pub(crate) fn comment_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push('#');
        let line = line.strip_suffix('\r').unwrap_or(line);
        if !line.is_empty() {
            out.push(' ');
        }
        for ch in line.chars() {
            push_visible(&mut out, ch);
        }
    }
    out
}

/// `ch`, or its escape where a terminal or a shell could take it for more than a letter.
fn push_visible(out: &mut String, ch: char) {
    let hidden = ch.is_control()
        || matches!(
            ch,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{feff}'
        )
        || ('\u{202a}'..='\u{202e}').contains(&ch)
        || ('\u{2066}'..='\u{2069}').contains(&ch);
    match (hidden, u32::from(ch)) {
        (false, _) => out.push(ch),
        (true, code) if code < 0x80 => out.push_str(&format!("\\x{code:02x}")),
        (true, code) => out.push_str(&format!("\\u{{{code:04x}}}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::template::{Budget, TemplateError, TemplateLimits, Templates};

    use crate::engine::filters::eval_text as eval;

    const ADR: &str = "---\nstatus: accepted\nnote: must not count\n---\n# 1. Use PostgreSQL\n\nThe service MUST use PostgreSQL.\nMustard is no requirement.\n\n```sh\n# you must not read this\n```\n\n- Backups should run nightly;\n<!-- shall be hidden -->\nIt shall-not be cut.\n";

    #[test]
    fn requirement_lines_are_found_by_whole_word_in_any_case_with_their_numbers() {
        let words = ["must", "should", "shall"].map(String::from);
        let found = select_lines(ADR, Some(&words), true);
        let got: Vec<(usize, &str)> = found.iter().map(|l| (l.line, l.text)).collect();
        assert_eq!(
            got,
            [
                (7, "The service MUST use PostgreSQL."),
                (14, "- Backups should run nightly;"),
                (16, "It shall-not be cut."),
            ]
        );
        // Without `prose`, the front matter and the code count too.
        let all = select_lines(ADR, Some(&words), false);
        let lines: Vec<usize> = all.iter().map(|l| l.line).collect();
        assert_eq!(lines, [3, 7, 11, 14, 15, 16]);
        assert_eq!(select_lines("a\r\nb\n", None, false).len(), 2);
        assert_eq!(select_lines("", None, false), []);
    }

    #[test]
    fn numbered_lines_is_a_filter_held_to_the_budgets() {
        let templates = Templates::default();
        let got = eval(
            &templates,
            "inputs.text | numbered_lines(words=['must'], prose=true)",
            ADR,
        );
        assert_eq!(
            got.unwrap(),
            json!([{ "line": 7, "text": "The service MUST use PostgreSQL." }])
        );
        assert_eq!(
            eval(&templates, "inputs.text | numbered_lines | length", ADR).unwrap(),
            json!(16)
        );
        let bad = eval(
            &templates,
            "inputs.text | numbered_lines(words=['a b'])",
            ADR,
        );
        assert!(bad.unwrap_err().to_string().contains("letters, digits"));
        let bad = eval(&templates, "inputs.text | numbered_lines(colour=1)", ADR);
        assert!(bad.is_err());
        let small = Templates::new(TemplateLimits {
            fuel: 1_000_000,
            max_output: 2_000,
        });
        // Each line costs its number and its keys besides its text.
        let text = "x\n".repeat(400);
        let result = eval(&small, "inputs.text | numbered_lines | length", &text);
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
    }

    #[test]
    fn a_shell_comment_is_comment_lines_whatever_the_text_holds() {
        let hostile = "run $(rm -rf ~) and `id`\n\"; echo pwned\r\nend\x1b[2J\u{2028}x\u{202e}y";
        let comment = comment_lines(hostile);
        assert_eq!(
            comment,
            "# run $(rm -rf ~) and `id`\n# \"; echo pwned\n# end\\x1b[2J\\u{2028}x\\u{202e}y"
        );
        assert!(comment.lines().all(|line| line.starts_with('#')));
        assert_eq!(comment_lines(""), "#");
        assert_eq!(comment_lines("a\n\nb"), "# a\n#\n# b");
        assert_eq!(comment_lines("tab\there\rcr"), "# tab\\x09here\\x0dcr");
        let templates = Templates::default();
        let got = eval(&templates, "inputs.text | shell_comment", "a\nb").unwrap();
        assert_eq!(got, json!("# a\n# b"));
        let small = Templates::new(TemplateLimits {
            fuel: 1_000_000,
            max_output: 1_000,
        });
        let result = eval(&small, "inputs.text | shell_comment", &"\x01".repeat(600));
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
    }
}
