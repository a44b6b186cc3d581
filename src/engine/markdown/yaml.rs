//! A front matter's YAML as JSON-like values: maps with string keys, lists, strings,
//! integers, floats, booleans and null.
//!
//! The value is built from yaml-rust2's events, not from its loader: the loader expands an
//! alias by copying the anchored value, so a "billion laughs" (each anchor a list of ten
//! aliases of the one before) makes gigabytes out of a few lines. Here every value built,
//! each copy an alias makes and each copy an anchor keeps, is counted as it is made
//! against the size the front matter may have, and nesting stops at [`MAX_DEPTH`]; the
//! parser itself keeps its nesting on a heap stack, so a deep input cannot overflow the
//! thread's.

use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Lists and maps a front matter may nest.
pub(crate) const MAX_DEPTH: usize = 64;

/// Why a front matter gives no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FrontMatterError {
    /// It is malformed: the line of the Markdown text (from 1) and what is wrong.
    Malformed { line: usize, message: String },
    /// Its value, aliases expanded, is larger than it may be.
    TooLarge,
}

impl FrontMatterError {
    fn at(line: usize, message: impl Into<String>) -> FrontMatterError {
        FrontMatterError::Malformed {
            line,
            message: message.into(),
        }
    }

    /// The error of a first line `---` that no line closes.
    pub(crate) fn unclosed() -> FrontMatterError {
        FrontMatterError::at(
            1,
            "the `---` that opens it is never closed (by a line `---` or `...`)",
        )
    }
}

impl fmt::Display for FrontMatterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrontMatterError::Malformed { line, message } => {
                write!(f, "front matter: line {line}: {message}")
            }
            FrontMatterError::TooLarge => write!(f, "front matter: too large once expanded"),
        }
    }
}

impl std::error::Error for FrontMatterError {}

/// The mapping `yaml` holds: an empty one for no document (only comments, or nothing)
/// or a null one. `offset` is the number of the Markdown line before the YAML's first.
pub(crate) fn mapping(
    yaml: &str,
    offset: usize,
    max_size: usize,
) -> Result<Map<String, Value>, FrontMatterError> {
    let mut builder = Builder {
        lines: markdown_lines(yaml, offset),
        max_size,
        ..Builder::default()
    };
    let mut parser = Parser::new_from_str(yaml);
    loop {
        let (event, mark) = parser.next_token().map_err(|error| {
            let line = builder.line(error.marker());
            FrontMatterError::at(line, error.info())
        })?;
        if event == Event::StreamEnd {
            break;
        }
        builder.event(event, mark)?;
    }
    match builder.root {
        None => empty(max_size),
        Some((Node { value, .. }, line)) => match value {
            Value::Object(map) => Ok(map),
            Value::Null => empty(max_size),
            other => Err(FrontMatterError::at(
                line,
                format!("it is {}, not a mapping of keys to values", kind(&other)),
            )),
        },
    }
}

/// The mapping of a front matter that holds nothing: even empty, a map takes one unit of
/// the evaluation's measure, as every value does.
pub(crate) fn empty(max_size: usize) -> Result<Map<String, Value>, FrontMatterError> {
    match max_size {
        0 => Err(FrontMatterError::TooLarge),
        _ => Ok(Map::new()),
    }
}

/// What a value is, as an error names it.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "a list",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null | Value::Object(_) => "a mapping",
    }
}

/// A value built, with what an alias of it needs.
#[derive(Debug, Clone)]
struct Node {
    value: Value,
    /// A scalar's text, its key when it is one.
    text: Option<String>,
    /// Its size by the measure of the budget: a string's bytes and 2, a scalar's text,
    /// 2 for a list or a map and 1 for each item besides its size, a key's bytes and 3.
    size: usize,
    /// The lists and maps it nests: 0 for a scalar.
    height: usize,
}

/// A list or a map being built.
#[derive(Debug)]
struct Frame {
    items: Items,
    anchor: usize,
    size: usize,
    height: usize,
}

#[derive(Debug)]
enum Items {
    List(Vec<Value>),
    /// A map, and the key read whose value comes next.
    Map(Map<String, Value>, Option<String>),
}

#[derive(Debug, Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    /// The document's value, and the line it starts on.
    root: Option<(Node, usize)>,
    /// The line the document's value starts on, once known.
    root_line: Option<usize>,
    /// The bytes built so far, copies included.
    built: usize,
    max_size: usize,
    /// The Markdown line of each YAML line, YAML's first at index 0.
    lines: Vec<usize>,
}

impl Builder {
    /// The Markdown line of a place in the YAML. A mark past the last line (yaml-rust2
    /// moves to a new line at the end of a stream whose last line is not ended) is on it.
    fn line(&self, mark: &Marker) -> usize {
        let at = mark.line().max(1) - 1;
        self.lines[at.min(self.lines.len() - 1)]
    }

    fn event(&mut self, event: Event, mark: Marker) -> Result<(), FrontMatterError> {
        let line = self.line(&mark);
        match event {
            Event::DocumentStart if self.root.is_some() => Err(FrontMatterError::at(
                line,
                "a second YAML document starts here",
            )),
            Event::SequenceStart(anchor, _) => self.open(Items::List(Vec::new()), anchor, line),
            Event::MappingStart(anchor, _) => self.open(Items::Map(Map::new(), None), anchor, line),
            Event::SequenceEnd | Event::MappingEnd => self.close(line),
            Event::Scalar(text, style, anchor, tag) => {
                self.root_line.get_or_insert(line);
                let node =
                    scalar(text, style, tag.as_ref()).map_err(|m| FrontMatterError::at(line, m))?;
                self.charge(node.size)?;
                self.complete(node, anchor, line)
            }
            Event::Alias(anchor) => self.alias(anchor, line),
            _ => Ok(()),
        }
    }

    /// Counts `size` more bytes built.
    fn charge(&mut self, size: usize) -> Result<(), FrontMatterError> {
        self.built = self.built.saturating_add(size);
        match self.built <= self.max_size {
            true => Ok(()),
            false => Err(FrontMatterError::TooLarge),
        }
    }

    fn open(&mut self, items: Items, anchor: usize, line: usize) -> Result<(), FrontMatterError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(too_deep(line));
        }
        self.root_line.get_or_insert(line);
        self.charge(2)?;
        self.stack.push(Frame {
            items,
            anchor,
            size: 2,
            height: 1,
        });
        Ok(())
    }

    fn close(&mut self, line: usize) -> Result<(), FrontMatterError> {
        let Some(frame) = self.stack.pop() else {
            return Ok(());
        };
        let value = match frame.items {
            Items::List(items) => Value::Array(items),
            Items::Map(map, _) => Value::Object(map),
        };
        let node = Node {
            value,
            text: None,
            size: frame.size,
            height: frame.height,
        };
        self.complete(node, frame.anchor, line)
    }

    /// A copy of the value anchored as `anchor`, counted before it is made.
    fn alias(&mut self, anchor: usize, line: usize) -> Result<(), FrontMatterError> {
        self.root_line.get_or_insert(line);
        let Some(node) = self.anchors.get(&anchor) else {
            return Err(FrontMatterError::at(line, "an alias of no anchor"));
        };
        if self.stack.len() + node.height > MAX_DEPTH {
            return Err(too_deep(line));
        }
        let size = node.size;
        self.charge(size)?;
        let node = self.anchors[&anchor].clone();
        self.complete(node, 0, line)
    }

    /// Puts a finished value where it belongs: the list or map open, or the root.
    fn complete(&mut self, node: Node, anchor: usize, line: usize) -> Result<(), FrontMatterError> {
        if anchor > 0 {
            self.charge(node.size)?;
            self.anchors.insert(anchor, node.clone());
        }
        let Some(frame) = self.stack.last_mut() else {
            let start = self.root_line.unwrap_or(line);
            self.root = Some((node, start));
            return Ok(());
        };
        frame.height = frame.height.max(node.height + 1);
        match &mut frame.items {
            Items::List(items) => {
                items.push(node.value);
                frame.size += node.size + 1;
            }
            Items::Map(map, pending @ None) => {
                let key = key_text(node);
                if map.contains_key(&key) {
                    let message = format!("the key `{key}` appears twice");
                    return Err(FrontMatterError::at(line, message));
                }
                frame.size += key.len() + 3;
                *pending = Some(key);
            }
            Items::Map(map, pending @ Some(_)) => {
                let key = pending.take().unwrap_or_default();
                map.insert(key, node.value);
                frame.size += node.size + 1;
            }
        }
        self.charge(1)
    }
}

/// For each line of `yaml` as YAML counts them, the number of the Markdown line it is on,
/// the YAML's first being `offset + 1`. YAML ends a line at a lone `\r` too, where the
/// Markdown text does not: a front matter holding one has more lines to yaml-rust2 than
/// to the text, and its marks' lines cannot just be added to `offset`. Never empty.
fn markdown_lines(yaml: &str, offset: usize) -> Vec<usize> {
    let mut line = offset + 1;
    let mut lines = vec![line];
    let mut bytes = yaml.bytes().peekable();
    while let Some(byte) = bytes.next() {
        match byte {
            b'\n' => {
                line += 1;
                lines.push(line);
            }
            b'\r' if bytes.peek() != Some(&b'\n') => lines.push(line),
            _ => {}
        }
    }
    lines
}

fn too_deep(line: usize) -> FrontMatterError {
    let message = format!("lists and maps nest deeper than {MAX_DEPTH} levels");
    FrontMatterError::at(line, message)
}

/// A key as text: a scalar's own text (`1`, `true`, `~` as written), a list's or a map's
/// JSON.
fn key_text(node: Node) -> String {
    match (node.text, node.value) {
        (Some(text), _) => text,
        (None, value) => value.to_string(),
    }
}

/// The prefix yaml-rust2 resolves `!!` to: YAML's core types.
const CORE: &str = "tag:yaml.org,2002:";

/// A scalar's value: quoted and block scalars are strings; a plain one is resolved by
/// YAML 1.2's core schema (`2026-01-05` stays a string); `!!str`, `!!int`, `!!float`,
/// `!!bool` and `!!null` decide it, and any other tag is ignored.
fn scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> Result<Node, String> {
    let value = match (style, tag) {
        (TScalarStyle::Plain, Some(tag)) if tag.handle == CORE => tagged(&text, &tag.suffix)?,
        (TScalarStyle::Plain, _) => plain(&text),
        _ => Value::String(text.clone()),
    };
    let size = match &value {
        Value::String(string) => string.len() + 2,
        _ => text.len().max(1),
    };
    Ok(Node {
        value,
        text: Some(text),
        size,
        height: 0,
    })
}

/// A plain scalar's value by the core schema.
fn plain(text: &str) -> Value {
    match yaml_rust2::Yaml::from_str(text) {
        yaml_rust2::Yaml::Integer(n) => Value::from(n),
        yaml_rust2::Yaml::Boolean(b) => Value::Bool(b),
        yaml_rust2::Yaml::Null => Value::Null,
        yaml_rust2::Yaml::Real(real) => float(&real),
        _ => Value::String(text.to_owned()),
    }
}

/// A float, or its text when JSON has no number for it (`.inf`, `.nan`, `1e999`).
fn float(text: &str) -> Value {
    let number = text.parse::<f64>().ok().and_then(Number::from_f64);
    match number {
        Some(number) if text.bytes().any(|b| b.is_ascii_digit()) => Value::Number(number),
        _ => Value::String(text.to_owned()),
    }
}

/// A scalar with a core tag: the tag's type, or an error when the text is not one.
fn tagged(text: &str, suffix: &str) -> Result<Value, String> {
    let value = match suffix {
        "str" => Some(Value::String(text.to_owned())),
        "int" => text.parse::<i64>().ok().map(Value::from),
        "float" => match yaml_rust2::Yaml::from_str(text) {
            yaml_rust2::Yaml::Real(_) | yaml_rust2::Yaml::Integer(_) => Some(float(text)),
            _ => None,
        },
        "bool" => match text {
            "true" | "True" | "TRUE" => Some(Value::Bool(true)),
            "false" | "False" | "FALSE" => Some(Value::Bool(false)),
            _ => None,
        },
        "null" => matches!(text, "" | "~" | "null" | "Null" | "NULL").then_some(Value::Null),
        _ => Some(plain(text)),
    };
    value.ok_or_else(|| format!("`{text}` is not a valid !!{suffix}"))
}
