//! A schema read once into a typed tree, so that checking a value looks nothing up by name:
//! a tool's published input schema is compiled when first used, and each call walks the
//! tree (`check.rs`).

use serde_json::{Map, Value};

use super::FORMATS;
use super::rules;

/// The JSON types a schema's `type` names, as bits.
pub(super) mod kind {
    pub(crate) const OBJECT: u8 = 1;
    pub(crate) const ARRAY: u8 = 2;
    pub(crate) const STRING: u8 = 4;
    pub(crate) const NUMBER: u8 = 8;
    pub const INTEGER: u8 = 16;
    pub(crate) const BOOLEAN: u8 = 32;
    pub const NULL: u8 = 64;
}

/// A schema of the subset, read from its JSON.
#[derive(Debug, Clone, Default)]
pub(crate) struct Schema {
    /// The types allowed (`None`: any). A name outside the subset allows nothing.
    pub(super) types: Option<u8>,
    /// What the schema wants, in words, for a misfit's rule.
    pub(super) wanted: String,
    pub(super) constant: Option<Value>,
    pub(super) choices: Option<Vec<Value>>,
    pub(super) properties: Vec<(String, Schema)>,
    pub(super) required: Vec<String>,
    /// `additionalProperties: false`.
    pub(super) closed: bool,
    pub(super) items: Option<Box<Schema>>,
    pub(super) min_items: Option<u64>,
    pub(super) max_items: Option<u64>,
    pub(super) min_length: Option<u64>,
    pub(super) max_length: Option<u64>,
    pub(super) format: Option<&'static str>,
    /// The `contentSchema` of a JSON text (`contentMediaType = "application/json"`).
    pub(super) content: Option<Box<Schema>>,
    pub(super) minimum: Option<f64>,
    pub(super) maximum: Option<f64>,
}

impl Schema {
    /// Reads `schema`; a keyword with a value of the wrong shape is left out, as
    /// `accept.rs` refuses it where a schema comes from a user.
    pub(crate) fn compile(schema: &Value) -> Schema {
        match schema {
            Value::Object(map) => Schema::of(map),
            _ => Schema::default(),
        }
    }

    fn of(map: &Map<String, Value>) -> Schema {
        let count = |key: &str| map.get(key).and_then(Value::as_u64);
        let bound = |key: &str| map.get(key).and_then(Value::as_f64);
        let sub = |key: &str| map.get(key).map(|s| Box::new(Schema::compile(s)));
        let json = map
            .get("contentMediaType")
            .is_some_and(|m| m == "application/json");
        let format = map.get("format").and_then(Value::as_str);
        Schema {
            types: map.get("type").map(types),
            wanted: rules::wanted(map),
            constant: map.get("const").cloned(),
            choices: rules::choices(map).map(|c| c.into_iter().cloned().collect()),
            properties: match map.get("properties") {
                Some(Value::Object(properties)) => properties
                    .iter()
                    .map(|(name, s)| (name.clone(), Schema::compile(s)))
                    .collect(),
                _ => Vec::new(),
            },
            required: match map.get("required") {
                Some(Value::Array(names)) => names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                _ => Vec::new(),
            },
            closed: map.get("additionalProperties") == Some(&Value::Bool(false)),
            items: sub("items"),
            min_items: count("minItems"),
            max_items: count("maxItems"),
            min_length: count("minLength"),
            max_length: count("maxLength"),
            format: format.and_then(|f| FORMATS.iter().find(|known| **known == f).copied()),
            content: sub("contentSchema").filter(|_| json),
            minimum: bound("minimum"),
            maximum: bound("maximum"),
        }
    }
}

fn types(kind: &Value) -> u8 {
    let bit = |name: &str| match name {
        "object" => kind::OBJECT,
        "array" => kind::ARRAY,
        "string" => kind::STRING,
        "number" => kind::NUMBER,
        "integer" => kind::INTEGER,
        "boolean" => kind::BOOLEAN,
        "null" => kind::NULL,
        _ => 0,
    };
    match kind {
        Value::String(name) => bit(name),
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .fold(0, |bits, name| bits | bit(name)),
        _ => u8::MAX,
    }
}
