//! The Markdown readers on ADRs of the three common formats, on the corners of the syntax,
//! and on malformed and hostile input (the properties over generated documents are in
//! `properties.rs`).

use serde_json::json;

use super::*;

/// A size no test's front matter comes near.
const ROOMY: usize = 1 << 20;

/// The (level, title, line) of each heading.
fn outline(text: &str) -> Vec<(u8, String, usize)> {
    headings(text)
        .into_iter()
        .map(|h| (h.level, h.title, h.line))
        .collect()
}

/// The (text, target, line) of each link.
fn targets(text: &str) -> Vec<(String, String, usize)> {
    links(text)
        .into_iter()
        .map(|l| (l.text, l.target, l.line))
        .collect()
}

fn owned(items: &[(u8, &str, usize)]) -> Vec<(u8, String, usize)> {
    items
        .iter()
        .map(|&(l, t, n)| (l, t.to_owned(), n))
        .collect()
}

fn link(text: &str, target: &str, line: usize) -> (String, String, usize) {
    (text.to_owned(), target.to_owned(), line)
}

fn body_of<'a>(text: &'a str, title: &str) -> &'a str {
    let found = headings(text).into_iter().find(|h| h.title == title);
    found.unwrap_or_else(|| panic!("no heading {title}")).body
}

/// An ADR as adr-tools writes it (Michael Nygard's format).
const NYGARD: &str = "\
# 3. Use PostgreSQL

Date: 2026-01-05

## Status

Accepted

Supersedes [2. Use SQLite](0002-use-sqlite.md)

## Context

Several servers write todos at once; SQLite serialises its writers.

## Decision

We will use PostgreSQL 16.

## Consequences

Operators run a database server: see <https://www.postgresql.org/docs/16/>.
";

#[test]
fn an_adr_tools_record_has_its_numbered_title_and_four_sections() {
    assert_eq!(
        outline(NYGARD),
        owned(&[
            (1, "3. Use PostgreSQL", 1),
            (2, "Status", 5),
            (2, "Context", 11),
            (2, "Decision", 15),
            (2, "Consequences", 19),
        ])
    );
    assert_eq!(
        body_of(NYGARD, "Status"),
        "Accepted\n\nSupersedes [2. Use SQLite](0002-use-sqlite.md)"
    );
    assert_eq!(body_of(NYGARD, "Decision"), "We will use PostgreSQL 16.");
    // The title's section holds the whole record.
    assert!(body_of(NYGARD, "3. Use PostgreSQL").starts_with("Date: 2026-01-05\n\n## Status"));
    assert!(body_of(NYGARD, "3. Use PostgreSQL").ends_with("docs/16/>."));
    assert_eq!(
        targets(NYGARD),
        [
            link("2. Use SQLite", "0002-use-sqlite.md", 9),
            link(
                "https://www.postgresql.org/docs/16/",
                "https://www.postgresql.org/docs/16/",
                21
            ),
        ]
    );
    assert_eq!(front_matter(NYGARD, ROOMY).unwrap(), Map::new());
    assert_eq!(markdown_body(NYGARD), NYGARD);
}

/// An ADR in MADR 4's template, its metadata in the front matter.
const MADR: &str = "\
---
status: accepted
date: 2026-01-05
decision-makers: [Alice Martin, Bob Chen]
consulted:
  - Carol
informed: everyone # the whole team
---

# Use PostgreSQL for the todo store

## Context and Problem Statement

Several servers write todos at once. Which store lets them?

## Considered Options

* PostgreSQL
* SQLite with [WAL](https://sqlite.org/wal.html)

## Decision Outcome

Chosen option: \"PostgreSQL\", because it takes concurrent writers.

<!-- This is an optional element. Feel free to remove. -->
### Consequences

* Good, because writers no longer queue.
* Bad, because operators run a database server.

<!-- This is an optional element. Feel free to remove. -->
### Confirmation

The integration tests run against PostgreSQL 16.

## More Information

Decided with [the storage review][review].

[review]: https://example.com/reviews/12 \"Storage review\"
";

#[test]
fn a_madr_record_has_its_metadata_in_the_front_matter_and_nested_sections() {
    let meta = front_matter(MADR, ROOMY).unwrap();
    assert_eq!(
        Value::Object(meta),
        json!({
            "status": "accepted",
            "date": "2026-01-05",
            "decision-makers": ["Alice Martin", "Bob Chen"],
            "consulted": ["Carol"],
            "informed": "everyone",
        })
    );
    assert_eq!(
        outline(MADR),
        owned(&[
            (1, "Use PostgreSQL for the todo store", 10),
            (2, "Context and Problem Statement", 12),
            (2, "Considered Options", 16),
            (2, "Decision Outcome", 21),
            (3, "Consequences", 26),
            (3, "Confirmation", 32),
            (2, "More Information", 36),
        ])
    );
    let outcome = body_of(MADR, "Decision Outcome");
    assert!(
        outcome.starts_with("Chosen option: \"PostgreSQL\""),
        "{outcome}"
    );
    assert!(outcome.ends_with("against PostgreSQL 16."), "{outcome}");
    assert_eq!(
        body_of(MADR, "Confirmation"),
        "The integration tests run against PostgreSQL 16."
    );
    assert_eq!(
        targets(MADR),
        [
            link("WAL", "https://sqlite.org/wal.html", 19),
            link("review", "https://example.com/reviews/12", 40),
        ]
    );
    assert!(markdown_body(MADR).starts_with("\n# Use PostgreSQL for the todo store\n"));
}

/// An ADR as log4brains writes it, in `docs/adr/20260105-use-postgresql.md`: MADR 2's
/// template, its metadata a list, optional sections marked in HTML comments.
const LOG4BRAINS: &str = "\
# Use PostgreSQL

- Status: accepted
- Deciders: Alice Martin, Bob Chen
- Date: 2026-01-05
- Tags: storage, operations

Technical Story: [#42](https://example.com/issues/42)

## Context and Problem Statement

Several servers write todos at once.

## Decision Drivers <!-- optional -->

- concurrent writers

## Considered Options

- PostgreSQL
- SQLite

## Decision Outcome

Chosen option: \"PostgreSQL\".

### Positive Consequences <!-- optional -->

- writers no longer queue

### Negative Consequences <!-- optional -->

- a database server to run

## Links <!-- optional -->

- Refines [ADR-20251201](20251201-choose-a-store.md)
";

#[test]
fn a_log4brains_record_loses_the_optional_markers_of_its_titles() {
    assert_eq!(
        outline(LOG4BRAINS),
        owned(&[
            (1, "Use PostgreSQL", 1),
            (2, "Context and Problem Statement", 10),
            (2, "Decision Drivers", 14),
            (2, "Considered Options", 18),
            (2, "Decision Outcome", 23),
            (3, "Positive Consequences", 27),
            (3, "Negative Consequences", 31),
            (2, "Links", 35),
        ])
    );
    let metadata = body_of(LOG4BRAINS, "Use PostgreSQL");
    assert!(metadata.starts_with("- Status: accepted\n"), "{metadata}");
    assert_eq!(
        targets(LOG4BRAINS),
        [
            link("#42", "https://example.com/issues/42", 8),
            link("ADR-20251201", "20251201-choose-a-store.md", 37),
        ]
    );
    assert_eq!(front_matter(LOG4BRAINS, ROOMY).unwrap(), Map::new());
}

fn malformed(text: &str) -> (usize, String) {
    match front_matter(text, ROOMY) {
        Err(FrontMatterError::Malformed { line, message }) => (line, message),
        other => panic!("expected a malformed front matter, got {other:?}"),
    }
}

#[test]
fn malformed_front_matter_is_an_error_naming_its_markdown_line() {
    let (line, message) = malformed("---\ntitle: x\nstatus: [a, b\ndate: 2026\n---\n# T\n");
    assert!(line == 4 || line == 5, "{line}: {message}");
    let (line, _) = malformed("---\na: 1\nb: 2\n  c: 3\n---\n");
    assert_eq!(line, 4);
    let (line, message) = malformed("---\n- a\n- b\n---\n");
    assert_eq!(
        (line, message.as_str()),
        (2, "it is a list, not a mapping of keys to values")
    );
    let (line, message) = malformed("---\njust text\n---\n");
    assert_eq!(
        (line, message.as_str()),
        (2, "it is a string, not a mapping of keys to values")
    );
    let (line, message) = malformed("---\nstatus: accepted\nstatus: rejected\n---\n");
    assert_eq!(
        (line, message.as_str()),
        (3, "the key `status` appears twice")
    );
    let (line, message) = malformed("---\ntitle: x\n\n# Heading\n");
    assert_eq!(line, 1);
    assert!(message.contains("never closed"), "{message}");
    let (line, message) = malformed("---\nn: !!int twelve\n---\n");
    assert_eq!(
        (line, message.as_str()),
        (2, "`twelve` is not a valid !!int")
    );
    let (line, _) = malformed("---\na: 1\n--- b\n...\n");
    assert_eq!(line, 3);
    let error = front_matter("---\na: [\n---\n", ROOMY).unwrap_err();
    assert!(
        error.to_string().starts_with("front matter: line "),
        "{error}"
    );
}

/// YAML ends a line at a lone `\r`, the Markdown text only at `\n`: the error is on the
/// text's line all the same, not on a line past its end.
#[test]
fn a_lone_carriage_return_in_a_front_matter_leaves_errors_on_the_texts_lines() {
    let (line, message) = malformed("---\n\r\r-\n---");
    assert_eq!(
        (line, message.as_str()),
        (2, "it is a list, not a mapping of keys to values")
    );
    let (line, message) = malformed("---\na: 1\ra: 2\nb: 3\r\rb: 4\n---\n# T\n");
    assert_eq!((line, message.as_str()), (2, "the key `a` appears twice"));
    let (line, message) = malformed("---\na: 1\rb: 2\nc: 3\r\rc: 4\n---\n# T\n");
    assert_eq!((line, message.as_str()), (3, "the key `c` appears twice"));
    // Without an error, a lone `\r` ends a YAML line like any other.
    let value = Value::Object(front_matter("---\na: 1\rb: 2\n---\n", ROOMY).unwrap());
    assert_eq!(value, json!({"a": 1, "b": 2}));
}

#[test]
fn a_front_matter_is_read_as_json_like_values() {
    let text = "\u{feff}---  \n\
                int: 12\nneg: -3\nhex: 0x1F\nfloat: 1.5\ninf: .inf\nbig: 1e999\n\
                yes: true\nno: FALSE\nnothing: ~\nempty:\ndate: 2026-01-05\n\
                quoted: \"12\"\nstr: !!str 12\nversion: 1.10\n1: one\ntrue: yes\n\
                ? [a, b]\n: pair\nblock: |\n  line one\n  line two\n\
                nested: {a: {b: [1, {c: d}]}}\n...\n";
    let value = Value::Object(front_matter(text, ROOMY).unwrap());
    assert_eq!(
        value,
        json!({
            "int": 12, "neg": -3, "hex": 31, "float": 1.5, "inf": ".inf", "big": "1e999",
            "yes": true, "no": false, "nothing": null, "empty": null, "date": "2026-01-05",
            "quoted": "12", "str": "12", "version": 1.1, "1": "one", "true": "yes",
            "[\"a\",\"b\"]": "pair", "block": "line one\nline two\n",
            "nested": {"a": {"b": [1, {"c": "d"}]}},
        })
    );
    for empty in [
        "",
        "# No front matter\n",
        "---\n---\n",
        "---\n# a comment\n...\n",
        "---\n~\n---\n",
    ] {
        assert_eq!(front_matter(empty, ROOMY).unwrap(), Map::new(), "{empty:?}");
    }
}

/// Nine anchors each a list of nine aliases of the one before: 9^9 strings once expanded.
fn billion_laughs() -> String {
    let mut yaml = String::from("---\na: &a [\"lol\"]\n");
    for (name, previous) in ["b", "c", "d", "e", "f", "g", "h", "i"]
        .iter()
        .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
    {
        let aliases = vec![format!("*{previous}"); 9].join(", ");
        yaml.push_str(&format!("{name}: &{name} [{aliases}]\n"));
    }
    yaml.push_str("---\n# Laughs\n");
    yaml
}

#[test]
fn a_billion_laughs_is_refused_within_the_budget() {
    // Each copy is counted before it is made, so a refusal within 1 MiB stopped the
    // reading at the cap, gigabytes short of the expansion. No clock is asked: a loaded
    // machine is slow, and the check holds however long the reading took.
    assert_eq!(
        front_matter(&billion_laughs(), ROOMY),
        Err(FrontMatterError::TooLarge)
    );
    // A few aliases that fit are expanded.
    let text = "---\nbase: &base {owner: ops, tier: 1}\napi: *base\nweb: *base\n---\n";
    let value = Value::Object(front_matter(text, ROOMY).unwrap());
    assert_eq!(value["web"], json!({"owner": "ops", "tier": 1}));
    assert_eq!(front_matter(text, 40), Err(FrontMatterError::TooLarge));
}

#[test]
fn nesting_deeper_than_the_limit_is_refused_not_overflowed() {
    let deep = |n: usize| format!("---\na: {}{}\n---\n", "[".repeat(n), "]".repeat(n));
    assert!(front_matter(&deep(yaml::MAX_DEPTH - 1), ROOMY).is_ok());
    let (line, message) = malformed(&deep(yaml::MAX_DEPTH));
    assert_eq!(line, 2);
    assert!(message.contains("deeper than 64"), "{message}");
    assert!(front_matter(&deep(100_000), 1 << 30).is_err());
    // An alias does not take a value deeper than the limit either.
    let nested = format!("{}{}", "[".repeat(40), "]".repeat(40));
    let text = format!(
        "---\na: &a {nested}\nb: [[[[[[[[[[[[[[[[[[[[[[[[[[*a]]]]]]]]]]]]]]]]]]]]]]]]]]\n---\n"
    );
    assert!(malformed(&text).1.contains("deeper than 64"));
}

#[test]
fn a_heading_inside_a_code_fence_is_code() {
    let text = "\
# Runbook

```sh
# not a heading
```

~~~~
```
## still code
~~~
~~~~

    # indented code

## Rollback
";
    assert_eq!(
        outline(text),
        owned(&[(1, "Runbook", 1), (2, "Rollback", 15)])
    );
    assert!(body_of(text, "Runbook").contains("# not a heading"));
    // An unclosed fence runs to the end.
    assert_eq!(outline("# A\n```\n# B\n"), owned(&[(1, "A", 1)]));
    // An HTML comment hides its lines.
    assert_eq!(
        outline("<!--\n# hidden\n-->\n# Shown\n"),
        owned(&[(1, "Shown", 4)])
    );
}

#[test]
fn setext_headings_are_underlined_paragraphs_and_a_lone_rule_is_none() {
    let text = "\
Title
=====

Intro.

Section
---

Text.

---

* * *
Two line
heading
-------
- item
---
> quote
---
";
    assert_eq!(
        outline(text),
        owned(&[
            (1, "Title", 1),
            (2, "Section", 6),
            (2, "Two line heading", 14)
        ])
    );
    assert_eq!(body_of(text, "Section"), "Text.\n\n---\n\n* * *");
    // The front matter's fences are not underlines, and an unclosed one is a rule.
    let text = "---\ntitle: x\n---\nAbove\n---\n";
    assert_eq!(outline(text), owned(&[(2, "Above", 4)]));
    assert_eq!(outline("---\nNot front matter\n"), owned(&[]));
    assert_eq!(outline("Text\n    ---\n"), owned(&[]));
}

#[test]
fn titles_lose_their_hashes_and_bodies_their_blank_lines() {
    let text = "#   Spaced   #####\n\n\n  body  \n\n\n## Empty ##\n#no\n####### seven\n";
    let found = headings(text);
    assert_eq!(found[0].title, "Spaced");
    assert_eq!(
        found[0].body,
        "  body  \n\n\n## Empty ##\n#no\n####### seven"
    );
    assert_eq!(
        (found[1].title.as_str(), found[1].body),
        ("Empty", "#no\n####### seven")
    );
    assert_eq!(found.len(), 2);
    // Line endings are the text's own.
    let crlf = "# A\r\n\r\none\r\ntwo\r\n\r\n# B\r\n";
    let found = headings(crlf);
    assert_eq!(found[0].body, "one\r\ntwo");
    assert_eq!((found[1].title.as_str(), found[1].line), ("B", 6));
}

#[test]
fn links_of_every_kind_are_found_and_images_and_code_are_not() {
    let text = "\
See [the *guide*](https://example.com/guide \"Guide\") and [spaced](<a b.md>).
An image ![diagram](diagram.png) and a badge [![build](badge.svg)](https://ci.example.com).
Autolinks: <https://example.com/x?y=1>, <mailto:ops@example.com>, <ops@example.com>.
Code: `[not](a-link)` and ``[nor `this`](one)``; \\[escaped](x) and [a \\] bracket](b.md).
[nested [brackets]](nested.md) [outer [inner](inner.md)](outer.md) [empty]()

```
[in](fence)
```

[ref]: <https://example.com/ref> 'Title'
[other label]: other.md
[^1]: A footnote
";
    assert_eq!(
        targets(text),
        [
            link("the *guide*", "https://example.com/guide", 1),
            link("spaced", "a b.md", 1),
            link("![build](badge.svg)", "https://ci.example.com", 2),
            link("https://example.com/x?y=1", "https://example.com/x?y=1", 3),
            link("mailto:ops@example.com", "mailto:ops@example.com", 3),
            link("ops@example.com", "mailto:ops@example.com", 3),
            link("a ] bracket", "b.md", 4),
            link("nested [brackets]", "nested.md", 5),
            link("inner", "inner.md", 5),
            link("empty", "", 5),
            link("ref", "https://example.com/ref", 11),
            link("other label", "other.md", 12),
        ]
    );
}

#[test]
fn a_link_may_span_lines_and_its_target_may_hold_parentheses_and_escapes() {
    let text = "A [long\nlink text](https://en.wikipedia.org/wiki/Rust_(language))\n\
                and [esc](a\\)b.md) and [t](x.md\n'title')\n";
    assert_eq!(
        targets(text),
        [
            link(
                "long link text",
                "https://en.wikipedia.org/wiki/Rust_(language)",
                1
            ),
            link("esc", "a)b.md", 3),
            link("t", "x.md", 3),
        ]
    );
    // Not links: a space in a bare target, an unclosed target, text after a title.
    assert!(targets("[a](b c) [d](e [f](g \"t\"x)").is_empty());
}

#[test]
fn a_definition_is_only_at_the_start_of_a_paragraph() {
    let text = "Text first\n[a]: a.md\n\n[b]: b.md \"t\"\n[c]: c.md\nthen text\n[d]: d.md\n";
    assert_eq!(targets(text), [link("b", "b.md", 4), link("c", "c.md", 5)]);
    assert!(targets("[a]: a.md trailing words\n").is_empty());
    assert!(targets("    [a]: indented.md\n").is_empty());
}

/// Inputs that a careless reader would take quadratic time or unbounded stack on.
fn pathological() -> Vec<String> {
    let n = 200_000;
    let mut ticks = String::new();
    for len in 1..600 {
        ticks.push_str(&"`".repeat(len));
        ticks.push('x');
    }
    vec![
        "[".repeat(n),
        "]".repeat(n),
        "![".repeat(n),
        "[](".repeat(n),
        "[](<".repeat(n),
        format!("{}{}", "[".repeat(n), "](x)".repeat(n)),
        format!("[]({}", "(".repeat(n)),
        "<a:".repeat(n),
        "<a@".repeat(n),
        "`".repeat(n),
        ticks,
        "[a]: <".repeat(n),
        "# \n".repeat(n),
        "a\n".repeat(n) + "---\n",
        "```\n".repeat(n),
        "<!--\n".repeat(n),
        "> - 1. ".repeat(n),
        format!("---\n{}\n---\n", "- ".repeat(n)),
        format!("---\na: {}\n---\n", "{".repeat(n)),
        format!("---\n{}", "a: &a [*a]\n".repeat(1000)),
        "\\".repeat(n),
        "#".repeat(n),
        "######\n=\n".repeat(n / 4),
    ]
}

#[test]
fn pathological_inputs_are_read_in_linear_time() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for input in pathological() {
            let _ = front_matter(&input, ROOMY);
            let _ = headings(&input);
            let _ = links(&input);
            let _ = markdown_body(&input);
        }
        let _ = done.send(());
    });
    match finished.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("a reading did not end"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("a reading panicked"),
    }
}

#[test]
fn lines_end_at_newlines_only() {
    fn spans(text: &str) -> Vec<&str> {
        lines(text).iter().map(|l| l.text(text)).collect()
    }
    assert_eq!(spans(""), Vec::<&str>::new());
    assert_eq!(spans("a"), ["a"]);
    assert_eq!(spans("a\n"), ["a"]);
    assert_eq!(spans("a\r\nb\rc\n\n"), ["a", "b\rc", ""]);
}

#[test]
fn an_empty_front_matter_within_no_room_at_all_is_too_large_as_its_map_would_not_fit() {
    // An empty map takes one unit of the measure `budget::fits` applies.
    assert_eq!(
        front_matter("---\n---\n", 0),
        Err(FrontMatterError::TooLarge)
    );
    assert_eq!(
        front_matter("# No front matter\n", 0),
        Err(FrontMatterError::TooLarge)
    );
    assert_eq!(front_matter("---\n---\n", 1), Ok(Map::new()));
}
