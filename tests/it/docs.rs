//! The documentation stays true to the code. `README.md`, `ARCHITECTURE.md` and every page
//! of `docs/` are read as a newcomer follows them: each source path they name must exist,
//! each command-line option and `TASKS_*` variable must be one the binary's `--help` lists
//! (for the very subcommand a line runs, where it runs one), each option of the binary must
//! be documented, and each relative link must land on a file and a heading that exist. A
//! file moved or an option renamed then fails here, naming the page and the line that
//! still tell the old story.
//!
//! Self-contained on purpose (nothing of `support`): it reads files and runs `--help`, nothing
//! else.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-task-server");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Options of other programs that the pages quote in their commands, with the program. An
/// option of `mcp-task-server` never needs a place here: `--help` vouches for it.
const FOREIGN_OPTIONS: &[(&str, &str)] = &[
    ("--release", "cargo run, cargo build"),
    ("--locked", "cargo test, cargo clippy"),
    ("--test", "cargo test"),
    ("--bench", "cargo bench"),
    ("--all-targets", "cargo clippy"),
    ("--all", "cargo fmt"),
    ("--check", "cargo fmt"),
    ("--cli", "the MCP Inspector"),
    ("--spec-version", "the MCP conformance suite"),
    ("--transport", "claude mcp add"),
    ("--config", "the OpenTelemetry Collector"),
];

/// `TASKS_*` variables that the test suite reads, not the server: the pages tell whoever
/// runs the tests about them, and `--help` rightly does not.
const TEST_VARIABLES: &[&str] = &[
    "TASKS_TEST_POSTGRES",
    "TASKS_REAL_CLIENTS",
    "TASKS_CLOCK_OFFSET_MS",
];

/// Where the pages' source paths are rooted, from the repository's top.
const SOURCE_ROOTS: &[&str] = &["src/", "tests/", "benches/", "fuzz/", "workflows/"];

/// Paths the pages name that running something makes, absent from a fresh clone (each is
/// ignored by git).
const MADE_BY_RUNNING: &[&str] = &[
    "fuzz/artifacts/",
    "fuzz/logs/",
    "tests/clients/node_modules",
    "tests/clients/.venv",
];

/// Folders that hold no source a page names, left out of the walk for `.rs` names.
const NOT_SOURCE: &[&str] = &[
    "target",
    "corpus",
    "regressions",
    "artifacts",
    "node_modules",
    ".venv",
];

/// The most lines the README may have: a front page, read in five minutes.
const README_MAX_LINES: usize = 200;

/// A page of the documentation: its path from the repository's top, and its text.
struct Page {
    name: String,
    text: String,
}

impl Page {
    /// Its lines, numbered from 1.
    fn lines(&self) -> impl Iterator<Item = (usize, &str)> {
        self.text.lines().enumerate().map(|(i, line)| (i + 1, line))
    }
}

/// `README.md`, `ARCHITECTURE.md` and `docs/*.md`.
fn pages() -> Vec<Page> {
    let root = Path::new(ROOT);
    let mut names = vec!["README.md".to_owned(), "ARCHITECTURE.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|name| Page {
            text: std::fs::read_to_string(root.join(&name))
                .unwrap_or_else(|e| panic!("{name}: {e}")),
            name,
        })
        .collect()
}

/// Fails with every problem, one a line, when there are any.
fn assert_none(problems: Vec<String>, what: &str) {
    assert!(
        problems.is_empty(),
        "{what}:\n{}",
        problems
            .iter()
            .map(|problem| format!("  {problem}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A character that continues a path (or a word joined to one: `--workflows`, `tasks://`).
fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_-./:~".contains(c)
}

/// Whether `line[at..]` starts a token: nothing path-like right before it.
fn at_boundary(line: &str, at: usize) -> bool {
    line[..at]
        .chars()
        .next_back()
        .is_none_or(|c| !is_path_char(c))
}

// ---------------------------------------------------------------------------------------
// What the binary says of itself

/// One command of the binary, as its `--help` lists it.
#[derive(Default)]
struct Help {
    subcommands: BTreeSet<String>,
    options: BTreeSet<String>,
    variables: BTreeSet<String>,
}

/// Every command of the binary, by its path of subcommand words (`[]` is the top level,
/// `["workflows", "run"]` is `workflows run`), each as its own `--help` describes it.
fn commands() -> BTreeMap<Vec<String>, Help> {
    let mut found = BTreeMap::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let help = help(&path);
        for sub in &help.subcommands {
            let mut next = path.clone();
            next.push(sub.clone());
            todo.push(next);
        }
        found.insert(path, help);
    }
    found
}

/// Runs `mcp-task-server PATH... --help` and reads its commands, options and variables.
fn help(path: &[String]) -> Help {
    let output = Command::new(BIN)
        .args(path)
        .arg("--help")
        .output()
        .expect("the binary runs");
    assert!(
        output.status.success(),
        "mcp-task-server {} --help failed",
        path.join(" ")
    );
    let text = String::from_utf8(output.stdout).expect("help is UTF-8");
    let mut help = Help::default();
    let mut in_commands = false;
    for line in text.lines() {
        if line == "Commands:" {
            in_commands = true;
            continue;
        }
        if in_commands {
            match line.split_whitespace().next() {
                Some("help") => {}
                Some(word) if line.starts_with("  ") => {
                    help.subcommands.insert(word.to_owned());
                }
                _ => in_commands = false,
            }
            continue;
        }
        // An option is defined where its line starts with it (`--db <DB>`, `-h, --help`);
        // a mention in another option's description does not define one.
        let head = line.trim_start();
        let head = head
            .strip_prefix('-')
            .and_then(|rest| rest.split_once(", "))
            .map_or(head, |(_, after)| after);
        if head.starts_with("--") {
            help.options.extend(options_in(head).into_iter().take(1));
        }
        let mut rest = line;
        while let Some(at) = rest.find("[env: ") {
            rest = &rest[at + "[env: ".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            help.variables.insert(name);
        }
    }
    help
}

/// The `--options` a text names, in order.
fn options_in(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("--").map(|i| from + i) {
        from = at + 2;
        let name: String = text[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let starts_with_letter = name.starts_with(|c: char| c.is_ascii_lowercase());
        let after_dash = text[..at].ends_with('-');
        if starts_with_letter && !after_dash && at_boundary(text, at) {
            from = at + 2 + name.len();
            found.push(format!("--{name}"));
        }
    }
    found
}

/// The `TASKS_*` variables a text names.
fn variables_in(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("TASKS_").map(|i| from + i) {
        let name: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        from = at + name.len();
        // `TASKS_*` names the family, not a variable.
        let family = name == "TASKS_";
        let joined = text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !joined && !family {
            found.push(name);
        }
    }
    found
}

/// The lines of a page with their continuations (a line ending in `\`) joined on, each
/// numbered by its first line.
fn joined_lines(page: &Page) -> Vec<(usize, String)> {
    let mut joined: Vec<(usize, String)> = Vec::new();
    let mut continues = false;
    for (number, line) in page.lines() {
        let text = line
            .trim_end()
            .strip_suffix('\\')
            .unwrap_or(line.trim_end());
        if continues {
            let last = joined.last_mut().unwrap();
            last.1.push(' ');
            last.1.push_str(text.trim_start());
        } else {
            joined.push((number, text.to_owned()));
        }
        continues = line.trim_end().ends_with('\\');
    }
    joined
}

/// Each place a line runs `mcp-task-server`: the subcommand it runs and the text of its
/// arguments (up to the end of the code span it sits in, or of the command before a `#`
/// comment).
fn invocations<'a>(
    line: &'a str,
    commands: &BTreeMap<Vec<String>, Help>,
) -> Vec<(Vec<String>, &'a str)> {
    const NAME: &str = "mcp-task-server ";
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = line[from..].find(NAME).map(|i| from + i) {
        from = at + NAME.len();
        if !at_boundary(line, at) {
            continue;
        }
        let rest = &line[at + NAME.len()..];
        let rest = if line[..at].ends_with('`') {
            rest.split('`').next().unwrap()
        } else {
            rest.split(" #").next().unwrap()
        };
        let mut path = Vec::new();
        let mut args = rest;
        loop {
            let trimmed = args.trim_start();
            let word = trimmed.split_whitespace().next().unwrap_or("");
            match commands.get(&path) {
                Some(help) if help.subcommands.contains(word) => {
                    path.push(word.to_owned());
                    args = &trimmed[word.len()..];
                }
                _ => break,
            }
        }
        found.push((path, args));
    }
    found
}

#[test]
fn every_option_and_variable_the_docs_name_is_one_the_binary_has() {
    let commands = commands();
    let options: BTreeSet<&String> = commands.values().flat_map(|h| &h.options).collect();
    let variables: BTreeSet<&String> = commands.values().flat_map(|h| &h.variables).collect();
    let foreign: BTreeMap<&str, &str> = FOREIGN_OPTIONS.iter().copied().collect();
    let mut problems = Vec::new();
    for page in pages() {
        for (number, line) in page.lines() {
            for option in options_in(line) {
                if !options.contains(&option) && !foreign.contains_key(option.as_str()) {
                    problems.push(format!(
                        "{}:{number}: `{option}` is no option of mcp-task-server (its --help \
                         and every subcommand's list none such) nor of a program in \
                         FOREIGN_OPTIONS",
                        page.name
                    ));
                }
            }
            for variable in variables_in(line) {
                if !variables.contains(&variable) && !TEST_VARIABLES.contains(&variable.as_str()) {
                    problems.push(format!(
                        "{}:{number}: `{variable}` is no variable mcp-task-server reads (its \
                         --help lists none such) nor one of TEST_VARIABLES",
                        page.name
                    ));
                }
            }
        }
        for (number, line) in joined_lines(&page) {
            for (path, args) in invocations(&line, &commands) {
                let help = &commands[&path];
                for option in options_in(args) {
                    if !help.options.contains(&option) {
                        let command = ["mcp-task-server"]
                            .into_iter()
                            .chain(path.iter().map(String::as_str))
                            .collect::<Vec<_>>()
                            .join(" ");
                        problems.push(format!(
                            "{}:{number}: `{command} … {option}`: `{command} --help` lists no \
                             `{option}`",
                            page.name
                        ));
                    }
                }
            }
        }
    }
    assert_none(
        problems,
        "the docs name options or variables the binary does not have",
    );
}

#[test]
fn every_option_of_the_binary_is_documented_and_every_global_one_in_the_configuration_page() {
    let commands = commands();
    let pages = pages();
    let configuration = pages
        .iter()
        .find(|page| page.name == "docs/configuration.md")
        .expect("docs/configuration.md exists");
    let everywhere: String = pages.iter().map(|page| page.text.as_str()).collect();
    let mut problems = Vec::new();
    for (path, help) in &commands {
        for option in &help.options {
            if option == "--help" || option == "--version" {
                continue;
            }
            let global = commands[&Vec::new()].options.contains(option);
            let command = path.join(" ");
            if global && path.is_empty() && !configuration.text.contains(&format!("`{option}")) {
                problems.push(format!(
                    "`{option}` (mcp-task-server --help) has no row in docs/configuration.md"
                ));
            } else if !global && !everywhere.contains(option.as_str()) {
                problems.push(format!(
                    "`{option}` (mcp-task-server {command} --help) is in no page of the docs"
                ));
            }
        }
    }
    assert_none(problems, "options of the binary that no page documents");
}

// ---------------------------------------------------------------------------------------
// Paths

/// Every file under the source folders, as a path from the repository's top.
fn source_files() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let name = entry.file_name();
            if entry.file_type().unwrap().is_dir() {
                if !NOT_SOURCE.contains(&name.to_string_lossy().as_ref()) {
                    walk(&path, root, found);
                }
            } else {
                let relative = path.strip_prefix(root).unwrap();
                found.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    let root = Path::new(ROOT);
    let mut found = Vec::new();
    for folder in SOURCE_ROOTS {
        walk(&root.join(folder), root, &mut found);
    }
    found
}

/// The paths from the repository's top that a line names (`src/engine/files.rs`,
/// `tests/http/`), each cut to its folder where a placeholder follows
/// (`fuzz/corpus/<target>/` names `fuzz/corpus/`).
fn rooted_paths(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in line.char_indices() {
        if !at_boundary(line, at) || !SOURCE_ROOTS.iter().any(|r| line[at..].starts_with(r)) {
            continue;
        }
        let token: String = line[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "_-./".contains(*c))
            .collect();
        let next = line[at + token.len()..].chars().next();
        let placeholder = matches!(next, Some('<' | '*' | '{' | '…' | '['));
        let token = if placeholder {
            token[..=token.rfind('/').unwrap()].to_owned()
        } else {
            token.trim_end_matches('.').to_owned()
        };
        found.push(token);
    }
    found
}

/// The code spans of a text outside fenced blocks, each with the line it starts on: the
/// text between a run of backticks and the next run of as many, within a paragraph.
fn code_spans(text: &str) -> Vec<(usize, String)> {
    let mut spans = Vec::new();
    let mut prose = String::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            prose.push('\n');
            continue;
        }
        if !in_fence {
            prose.push_str(line);
        }
        prose.push('\n');
    }
    let bytes = prose.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'`' {
            at += 1;
            continue;
        }
        let run = bytes[at..].iter().take_while(|b| **b == b'`').count();
        let open_end = at + run;
        let paragraph_end = prose[open_end..]
            .find("\n\n")
            .map_or(prose.len(), |i| open_end + i);
        let mut close = None;
        let mut look = open_end;
        while look < paragraph_end {
            if bytes[look] == b'`' {
                let n = bytes[look..].iter().take_while(|b| **b == b'`').count();
                if n == run {
                    close = Some(look);
                    break;
                }
                look += n;
            } else {
                look += 1;
            }
        }
        match close {
            Some(close) => {
                let line = prose[..at].matches('\n').count() + 1;
                let content = prose[open_end..close].replace('\n', " ");
                spans.push((line, content.trim().to_owned()));
                at = close + run;
            }
            None => at = open_end,
        }
    }
    spans
}

#[test]
fn every_source_path_the_docs_name_exists() {
    let root = Path::new(ROOT);
    let files = source_files();
    let mut problems = Vec::new();
    for page in pages() {
        for (number, line) in page.lines() {
            for path in rooted_paths(line) {
                let made = MADE_BY_RUNNING.iter().any(|m| path.starts_with(m));
                let exists = if path.ends_with('/') {
                    root.join(&path).is_dir()
                } else {
                    root.join(&path).exists()
                };
                if !exists && !made {
                    problems.push(format!("{}:{number}: `{path}` does not exist", page.name));
                }
            }
        }
        // A bare `.rs` name (`server/handler.rs`, `mod.rs` beside its folder) must end the
        // path of some source file.
        for (number, span) in code_spans(&page.text) {
            let bare = span.ends_with(".rs")
                && !span.starts_with('.')
                && !span.contains(char::is_whitespace)
                && !SOURCE_ROOTS.iter().any(|r| span.starts_with(r));
            if bare && !files.iter().any(|file| file.ends_with(&format!("/{span}"))) {
                problems.push(format!(
                    "{}:{number}: `{span}` is no file under {}",
                    page.name,
                    SOURCE_ROOTS.join(", ")
                ));
            }
        }
    }
    assert_none(problems, "the docs name source files that do not exist");
}

// ---------------------------------------------------------------------------------------
// Links

/// A heading's anchor as GitHub makes it: lower case, spaces to dashes, punctuation gone.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown text's headings (a repeated heading's get `-1`, `-2`).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut found = BTreeSet::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        if in_fence {
            continue;
        }
        let base = slug(heading.trim_start_matches('#'));
        let count = seen.entry(base.clone()).or_default();
        found.insert(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    found
}

/// The relative link targets of a line (`[text](target)`, images too).
fn link_targets(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = line[from..].find("](").map(|i| from + i) {
        let rest = &line[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        let external = ["http://", "https://", "mailto:"]
            .iter()
            .any(|scheme| target.starts_with(scheme));
        if !external && !target.is_empty() {
            found.push(target.to_owned());
        }
        from = at + 2 + end;
    }
    found
}

#[test]
fn every_relative_link_lands_on_a_file_and_a_heading_that_exist() {
    let root = Path::new(ROOT);
    let mut problems = Vec::new();
    for page in pages() {
        let folder = Path::new(&page.name).parent().unwrap_or(Path::new(""));
        for (number, line) in page.lines() {
            for target in link_targets(line) {
                let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
                let path: PathBuf = if file.is_empty() {
                    PathBuf::from(&page.name)
                } else {
                    folder.join(file)
                };
                let Ok(text) = std::fs::read(root.join(&path)) else {
                    problems.push(format!(
                        "{}:{number}: `{target}`: {} does not exist",
                        page.name,
                        path.display()
                    ));
                    continue;
                };
                if !anchor.is_empty() && path.extension().is_some_and(|e| e == "md") {
                    let text = String::from_utf8_lossy(&text);
                    if !anchors(&text).contains(anchor) {
                        problems.push(format!(
                            "{}:{number}: `{target}`: {} has no heading #{anchor}",
                            page.name,
                            path.display()
                        ));
                    }
                }
            }
        }
    }
    assert_none(problems, "links that land nowhere");
}

// ---------------------------------------------------------------------------------------
// The README as a front page

#[test]
fn the_readme_is_a_short_front_page_linking_every_page_of_docs() {
    let pages = pages();
    let readme = &pages[0];
    let mut problems = Vec::new();
    let lines = readme.text.lines().count();
    if lines > README_MAX_LINES {
        problems.push(format!(
            "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail to docs/"
        ));
    }
    for page in pages.iter().filter(|page| page.name.starts_with("docs/")) {
        if !readme.text.contains(&format!("]({})", page.name))
            && !readme.text.contains(&format!("]({}#", page.name))
        {
            problems.push(format!("README.md links no {}", page.name));
        }
        let mut lines = page.text.lines().filter(|line| !line.trim().is_empty());
        let title = lines.next().unwrap_or("");
        let statement = lines.next().unwrap_or("");
        let prose = !statement.is_empty() && !statement.starts_with(['#', '|', '`', '-', '!']);
        if !title.starts_with("# ") || !prose {
            problems.push(format!(
                "{} does not open with a title and a statement of what it covers",
                page.name
            ));
        }
    }
    assert_none(problems, "the README is no front page to the docs");
}

#[test]
fn the_readme_gives_the_test_command_ci_runs() {
    let ci = std::fs::read_to_string(Path::new(ROOT).join(".ci/run")).expect(".ci/run");
    let command = ci
        .lines()
        .rfind(|line| line.starts_with("cargo test"))
        .expect(".ci/run runs cargo test")
        .trim();
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let given = readme
        .lines()
        .any(|line| line.split('#').next().unwrap().trim() == command);
    assert!(
        given,
        "README.md gives no line `{command}`, the test command .ci/run runs"
    );
}
