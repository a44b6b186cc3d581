//! What a broken rule says: one wording per rule, whoever checks, and the words for what a
//! schema wants, derived from the schema itself.

use std::fmt;

use serde_json::{Map, Value};

/// A rule a value broke. Each says what the value must be, read from the schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// A required property is missing.
    Required,
    /// A property the schema does not allow (`additionalProperties: false`).
    Unknown,
    /// Not of the type the schema wants: what it wants.
    Type(String),
    /// Of its type, but not one of the schema's choices (`enum`, `const`, `oneOf`,
    /// `anyOf`): what they are.
    Choice(String),
    /// A number outside its bounds: what the schema wants, and the number.
    Range(String, String),
    /// A string outside its length bounds: the bounds, and its length in UTF-16 code units.
    Length(String, usize),
    /// An array outside its item count bounds: the bounds, and its count.
    Count(String, usize),
    /// A tool's string argument holding U+0000.
    Nul,
    /// A string not of its `format`.
    Format(&'static str),
    /// A JSON field whose text is not JSON: why.
    NotJson(String),
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Required => f.write_str("is required"),
            Rule::Unknown => f.write_str("unknown property"),
            Rule::Type(wanted) | Rule::Choice(wanted) => write!(f, "must be {wanted}"),
            Rule::Range(wanted, got) => write!(f, "must be {wanted} (got {got})"),
            Rule::Length(bounds, got) => {
                let units = plural(bounds, "unit");
                write!(f, "must be {bounds} UTF-16 code {units} long (got {got})")
            }
            Rule::Count(bounds, got) => {
                write!(
                    f,
                    "must hold {bounds} {} (got {got})",
                    plural(bounds, "item")
                )
            }
            Rule::Nul => f.write_str("must not contain a NUL character (U+0000)"),
            Rule::Format(format) => f.write_str(match *format {
                "date" => "must be a real calendar date in the form YYYY-MM-DD",
                "date-time" => "must be a date and time in RFC 3339 form",
                "email" => "must be an email address",
                _ => "must be a URI",
            }),
            Rule::NotJson(error) => write!(f, "is not JSON: {error}"),
        }
    }
}

/// `unit` or `units`, as the bounds' last number asks.
fn plural(bounds: &str, noun: &str) -> String {
    match bounds.ends_with(" 1") || bounds == "1" {
        true => noun.to_owned(),
        false => format!("{noun}s"),
    }
}

/// What `schema` wants, in words: its constant, its choices, or its types with their
/// bounds (`a positive integer no larger than 100`, `an array of strings`).
pub(super) fn wanted(schema: &Map<String, Value>) -> String {
    if let Some(constant) = schema.get("const") {
        return literal(constant);
    }
    if let Some(choices) = choices(schema) {
        return one_of(&choices);
    }
    let names: Vec<&str> = match schema.get("type") {
        Some(Value::String(name)) => vec![name],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let kinds: Vec<String> = names.iter().map(|name| kind(schema, name)).collect();
    match kinds.is_empty() {
        true => "a value".to_owned(),
        false => kinds.join(" or "),
    }
}

fn kind(schema: &Map<String, Value>, name: &str) -> String {
    let text = match name {
        "string" if schema.get("format").is_some_and(|f| f == "date") => {
            "a string in the form YYYY-MM-DD"
        }
        "string" => "a string",
        "integer" | "number" => return number(schema, name),
        "array" => {
            let items = schema.get("items").and_then(|items| items.get("type"));
            match items.and_then(Value::as_str) {
                Some("string") => "an array of strings",
                _ => "an array",
            }
        }
        "object" => "an object",
        "boolean" => "a boolean",
        "null" => "null",
        other => return format!("of type {other}"),
    };
    text.to_owned()
}

fn number(schema: &Map<String, Value>, name: &str) -> String {
    let integer = name == "integer";
    let article = if integer { "an integer" } else { "a number" };
    let bound = |key: &str| schema.get(key).filter(|bound| bound.is_number());
    match (bound("minimum"), bound("maximum")) {
        (Some(min), max) if integer && min.as_f64() == Some(1.0) => match max {
            Some(max) => format!("a positive integer no larger than {max}"),
            None => "a positive integer".to_owned(),
        },
        (Some(min), Some(max)) => format!("{article} from {min} to {max}"),
        (Some(min), None) => format!("{article} no smaller than {min}"),
        (None, Some(max)) => format!("{article} no larger than {max}"),
        (None, None) => article.to_owned(),
    }
}

fn literal(constant: &Value) -> String {
    match constant {
        Value::Bool(_) => format!("the boolean literal {constant}"),
        Value::Null => "null".to_owned(),
        other => format!("exactly {other}"),
    }
}

/// The choices of a schema: its `enum`, or the constants of its `oneOf` or `anyOf`.
pub(super) fn choices(schema: &Map<String, Value>) -> Option<Vec<&Value>> {
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        return Some(options.iter().collect());
    }
    let titled = ["oneOf", "anyOf"]
        .iter()
        .find_map(|key| schema.get(*key).and_then(Value::as_array))?;
    Some(titled.iter().filter_map(|o| o.get("const")).collect())
}

fn one_of(choices: &[&Value]) -> String {
    let shown: Vec<String> = choices.iter().map(|c| c.to_string()).collect();
    format!("one of: {}", shown.join(", "))
}

/// Bounds in words: `1 to 200`, `at least 2`, `at most 10`.
pub(super) fn bounds(min: Option<u64>, max: Option<u64>) -> String {
    match (min, max) {
        (Some(min), Some(max)) => format!("{min} to {max}"),
        (Some(min), None) => format!("at least {min}"),
        (None, Some(max)) => format!("at most {max}"),
        (None, None) => "any number of".to_owned(),
    }
}
