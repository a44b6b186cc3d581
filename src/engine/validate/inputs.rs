//! A workflow's inputs: the JSON Schema they publish, and the inputs given to a run checked
//! against it by the one validator (`engine/schema`), defaults filled in.

use serde_json::{Map, Value, json};

use crate::engine::definition::{Problems, WorkflowDef};
use crate::schema::{self, Dialect, Rule};

/// The JSON Schema of a workflow's inputs: what `list_workflows` and an exposed workflow's
/// tool publish, and what a run's inputs are checked against.
pub fn inputs_schema(def: &WorkflowDef) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, input) in &def.inputs {
        let mut schema = json!({ "type": input.kind.name() });
        if !input.description.is_empty() {
            schema["description"] = json!(input.description);
        }
        if let Some(default) = &input.default {
            schema["default"] = default.clone();
        }
        if let Some(choices) = &input.choices {
            schema["enum"] = json!(choices);
        }
        if input.required {
            required.push(name.clone());
        }
        properties.insert(name.clone(), schema);
    }
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

/// Checks the inputs given to a run against [`inputs_schema`] and fills in defaults.
///
/// The result names every declared input; an optional input without a default that was
/// not given is `null`, so templates can test for it. A given `null` counts as absent.
pub fn check_inputs(
    def: &WorkflowDef,
    given: &Map<String, Value>,
) -> Result<Map<String, Value>, Problems> {
    let given: Map<String, Value> = given
        .iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let found = schema::problems(
        &inputs_schema(def),
        &Value::Object(given.clone()),
        Dialect::Data,
    );
    if !found.is_empty() {
        let problems = found
            .into_iter()
            .map(|problem| {
                let message = message(def, &problem.path, &problem.rule, given.get(&problem.path));
                def.locations
                    .problem(&format!("inputs.{}", problem.path), message)
            })
            .collect();
        return Err(Problems(problems));
    }
    let mut complete = Map::new();
    for (name, input) in &def.inputs {
        let value = given
            .get(name)
            .or(input.default.as_ref())
            .cloned()
            .unwrap_or(Value::Null);
        complete.insert(name.clone(), value);
    }
    Ok(complete)
}

/// A problem of the given inputs, said of the input: `name` is its path in the inputs.
fn message(def: &WorkflowDef, name: &str, rule: &Rule, value: Option<&Value>) -> String {
    let declared: Vec<&str> = def.inputs.keys().map(String::as_str).collect();
    let input = def.inputs.get(name);
    let shown = value.map(Value::to_string).unwrap_or_default();
    match (rule, input) {
        (Rule::Unknown, _) if declared.is_empty() => {
            format!("unknown input `{name}`; this workflow takes no inputs")
        }
        (Rule::Unknown, _) => format!(
            "unknown input `{name}`; declared inputs: {}",
            declared.join(", ")
        ),
        (Rule::Required, _) => format!("the required input `{name}` is missing"),
        (Rule::Type(_), Some(input)) => format!(
            "input `{name}` must be of type {}, got {shown}",
            input.kind.name()
        ),
        (Rule::Choice(_), Some(input)) => format!(
            "input `{name}` must be one of {}, got {shown}",
            show(input.choices.as_deref().unwrap_or_default())
        ),
        (rule, _) => format!("input `{name}` {rule}"),
    }
}

pub(super) fn show(values: &[Value]) -> String {
    let shown: Vec<String> = values.iter().map(Value::to_string).collect();
    shown.join(", ")
}
