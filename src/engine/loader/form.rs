//! The form an `input` node asks with: the restricted JSON Schema that MCP elicitation
//! allows, and that clients can render as a form.
//!
//! A form is an object of primitive properties: strings (optionally one of an `enum` of
//! strings, titled by `enumNames` or given as a `oneOf` of `const` and `title`, or of a
//! format), numbers, integers and booleans, each with a title, a description and a
//! default of its type; and multi-select lists, arrays whose `items` are such a string
//! `enum` or an `anyOf` of `const` and `title` (SEP-1330). Nothing else nests: no objects,
//! no arrays of anything else.
//!
//! Strings in a form may be templates; an `enum` (or `enumNames`) may be one template
//! that expands to the list, so that a question offers choices computed upstream. What a
//! template expands to is checked when the node asks (`actions::resolve`).

use super::*;
use crate::schema::FORMATS;

const FORM_KEYS: &[&str] = &["type", "properties", "required", "title", "description"];
const STRING_KEYS: &[&str] = &[
    "type",
    "title",
    "description",
    "default",
    "minLength",
    "maxLength",
    "format",
    "enum",
    "enumNames",
    "oneOf",
    "contentMediaType",
    "contentSchema",
];
const ARRAY_KEYS: &[&str] = &[
    "type",
    "title",
    "description",
    "default",
    "minItems",
    "maxItems",
    "items",
];
const NUMBER_KEYS: &[&str] = &[
    "type",
    "title",
    "description",
    "default",
    "minimum",
    "maximum",
];
const BOOLEAN_KEYS: &[&str] = &["type", "title", "description", "default"];

impl Decoder {
    /// A form schema; every problem in it is reported.
    pub(super) fn schema(&mut self, path: &str, value: &Value) -> Option<Value> {
        let map = self.fields(path, value, FORM_KEYS)?;
        if map.get("type").is_some_and(|kind| kind != "object") {
            self.report(
                &join(path, "type"),
                "an input schema must have type \"object\"",
            );
        }
        for key in ["title", "description"] {
            self.opt(map, path, key, Self::string);
        }
        let at = join(path, "properties");
        let properties = match map.get("properties") {
            Some(properties) => self.table(&at, properties),
            None => None,
        };
        for (name, property) in properties.into_iter().flatten() {
            self.property(&join(&at, name), property);
        }
        if let Some(required) = map.get("required") {
            self.required(&join(path, "required"), required, properties);
        }
        Some(value.clone())
    }

    fn property(&mut self, path: &str, value: &Value) {
        let Some(map) = self.table(path, value) else {
            return;
        };
        let kind = map.get("type").and_then(Value::as_str);
        let keys = match kind {
            Some("string") => STRING_KEYS,
            Some("number" | "integer") => NUMBER_KEYS,
            Some("boolean") => BOOLEAN_KEYS,
            Some("array") => ARRAY_KEYS,
            Some("object") => {
                let message = "an input schema must be flat: a property is a string, a number, \
                     an integer, a boolean or a multi-select list, not an object";
                return self.report(path, message);
            }
            _ => {
                let message = "a property needs a `type`: string, number, integer or boolean";
                return self.report(&join(path, "type"), message);
            }
        };
        self.fields(path, value, keys);
        for key in ["title", "description"] {
            self.opt(map, path, key, Self::string);
        }
        let default = map.get("default");
        match kind {
            Some("string") => self.string_property(path, map),
            Some("array") => self.multi_select(path, map),
            Some("boolean") => {
                if let Some(default) = default.filter(|d| !d.is_boolean()) {
                    self.wrong_type::<()>(&join(path, "default"), "a boolean", default);
                }
            }
            Some(number) => {
                for key in ["minimum", "maximum"] {
                    self.opt(map, path, key, Self::finite_number);
                }
                let fits = |d: &Value| match number {
                    "integer" => d.is_i64() || d.is_u64(),
                    _ => d.is_number(),
                };
                if let Some(default) = default.filter(|d| !fits(d)) {
                    let expected = format!("a default of type {number}");
                    self.wrong_type::<()>(&join(path, "default"), &expected, default);
                }
            }
            None => {}
        }
    }

    /// A multi-select list: `items` is a string `enum` or an `anyOf` of titled constants.
    fn multi_select(&mut self, path: &str, map: &Map<String, Value>) {
        for key in ["minItems", "maxItems"] {
            self.opt(map, path, key, |d, p, v| {
                d.integer(p, v, 0, i64::from(u32::MAX))
            });
        }
        let at = join(path, "items");
        let choices = match map.get("items").and_then(Value::as_object) {
            Some(items) if items.contains_key("anyOf") => {
                self.fields(&at, &map["items"], &["anyOf"]);
                self.titled_constants(&join(&at, "anyOf"), &items["anyOf"])
            }
            Some(items) => {
                self.fields(&at, &map["items"], &["type", "enum"]);
                if items.get("type").is_some_and(|t| t != "string") {
                    self.report(&join(&at, "type"), "the items of a list are strings");
                }
                match items.get("enum") {
                    Some(options @ Value::Array(items)) if !items.is_empty() => self
                        .strings(&join(&at, "enum"), options)
                        .unwrap_or_default(),
                    _ => {
                        let message = "a list's `items` need an `enum` of strings or an `anyOf` \
                             of `const` and `title`";
                        self.report(&at, message);
                        Vec::new()
                    }
                }
            }
            None => {
                let message = "a list needs `items`: an `enum` of strings or an `anyOf` of \
                     `const` and `title`";
                self.report(&at, message);
                Vec::new()
            }
        };
        if let Some(default) = map.get("default") {
            let at = join(path, "default");
            match default.as_array() {
                Some(picked) => {
                    for (k, item) in picked.iter().enumerate() {
                        if !item
                            .as_str()
                            .is_some_and(|s| choices.iter().any(|c| c == s))
                        {
                            self.report(&format!("{at}[{k}]"), format!("{item} is not a choice"));
                        }
                    }
                }
                None => {
                    self.wrong_type::<()>(&at, "an array of choices", default);
                }
            }
        }
    }

    /// A non-empty `oneOf` or `anyOf` of `{const, title}` strings; the constants found.
    fn titled_constants(&mut self, path: &str, value: &Value) -> Vec<String> {
        let Some(options) = value.as_array().filter(|options| !options.is_empty()) else {
            self.wrong_type::<()>(path, "a non-empty array of {const, title}", value);
            return Vec::new();
        };
        let mut found = Vec::new();
        for (k, option) in options.iter().enumerate() {
            let at = format!("{path}[{k}]");
            let Some(map) = self.fields(&at, option, &["const", "title"]) else {
                continue;
            };
            match map.get("const").and_then(Value::as_str) {
                Some(constant) => found.push(constant.to_owned()),
                None => self.report(&join(&at, "const"), "a choice needs a string `const`"),
            }
            self.opt(map, &at, "title", Self::string);
        }
        found
    }

    fn finite_number(&mut self, path: &str, value: &Value) -> Option<f64> {
        match value.as_f64() {
            Some(n) if n.is_finite() => Some(n),
            _ => self.wrong_type(path, "a number", value),
        }
    }

    fn string_property(&mut self, path: &str, map: &Map<String, Value>) {
        for key in ["minLength", "maxLength"] {
            self.opt(map, path, key, |d, p, v| {
                d.integer(p, v, 0, i64::from(u32::MAX))
            });
        }
        if let Some(format) = self.opt(map, path, "format", Self::string)
            && !FORMATS.contains(&format.as_str())
        {
            let message = format!("unknown format `{format}`; formats: {}", list(FORMATS));
            self.report(&join(path, "format"), message);
        }
        self.json_content(path, map);
        if let Some(default) = map.get("default")
            && !default.is_string()
        {
            self.wrong_type::<()>(&join(path, "default"), "a string", default);
        }
        if let Some(options) = map.get("oneOf") {
            self.titled_constants(&join(path, "oneOf"), options);
        }
        for key in ["enum", "enumNames"] {
            let at = join(path, key);
            match map.get(key) {
                None => {}
                // Choices computed upstream, checked once the template is expanded.
                Some(Value::String(text)) if crate::engine::template::is_template(text) => {}
                Some(Value::Array(items)) if !items.is_empty() => {
                    for (k, item) in items.iter().enumerate() {
                        if !item.is_string() {
                            self.wrong_type::<()>(&format!("{at}[{k}]"), "a string", item);
                        }
                    }
                }
                Some(other) => {
                    self.wrong_type::<()>(&at, "a non-empty array of strings", other);
                }
            }
        }
    }

    /// A text field that holds JSON: `contentMediaType = "application/json"` with a
    /// `contentSchema` the answer's JSON must fit. The field stays a string for the client;
    /// structured data such as a list of objects cannot be a flat form's field otherwise.
    fn json_content(&mut self, path: &str, map: &Map<String, Value>) {
        let media = map.get("contentMediaType");
        let schema = map.get("contentSchema");
        if let Some(media) = media
            && media != "application/json"
        {
            let at = join(path, "contentMediaType");
            self.report(&at, format!("must be \"application/json\", not {media}"));
        }
        match (media, schema) {
            (Some(_), Some(schema)) => {
                self.data_schema(&join(path, "contentSchema"), schema);
            }
            (None, Some(_)) => self.report(
                &join(path, "contentSchema"),
                "`contentSchema` goes with contentMediaType = \"application/json\"",
            ),
            _ => {}
        }
    }

    fn required(&mut self, path: &str, value: &Value, properties: Option<&Map<String, Value>>) {
        let Value::Array(names) = value else {
            self.wrong_type::<()>(path, "an array of property names", value);
            return;
        };
        for (k, name) in names.iter().enumerate() {
            let at = format!("{path}[{k}]");
            match name.as_str() {
                Some(name) if properties.is_some_and(|p| p.contains_key(name)) => {}
                Some(name) => self.report(&at, format!("no property `{name}` to require")),
                None => {
                    self.wrong_type::<()>(&at, "a property name", name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_keyword_a_form_may_have_is_one_the_validator_checks() {
        let keys = [
            FORM_KEYS,
            STRING_KEYS,
            ARRAY_KEYS,
            NUMBER_KEYS,
            BOOLEAN_KEYS,
        ];
        for key in keys.concat() {
            assert!(
                crate::schema::KEYWORDS.contains(&key),
                "{key} is not a keyword of engine/schema"
            );
        }
    }
}
