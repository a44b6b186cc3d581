//! Templates and expressions (minijinja) over `inputs`, `nodes.<id>.output|status`,
//! `run.id`, and `item`/`index` inside a `for_each` node.
//!
//! Undefined references are errors, never empty strings: a typo must fail loudly.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use minijinja::{Environment, UndefinedBehavior};
use serde_json::Value;

static ENV: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    super::filters::register(&mut env);
    env
});

/// The variables a template or expression may name at its root.
pub const ROOTS: &[&str] = &["inputs", "nodes", "run", "item", "index"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

impl From<minijinja::Error> for TemplateError {
    fn from(error: minijinja::Error) -> TemplateError {
        // The detail line says what was undefined or malformed; the kind alone does not.
        let mut message = error.kind().to_string();
        if let Some(detail) = error.detail() {
            message = format!("{message}: {detail}");
        }
        TemplateError(message)
    }
}

/// An expression compiled, once it is known not to close a variable block (`}}`) that it
/// never opened.
///
/// minijinja 2.24 lexes a standalone expression as the inside of a `{{ … }}`: a `}}`
/// there (outside brackets and strings) ends that block, and any input after it makes
/// the lexer panic on its empty stack. Such a `}}` is never valid in an expression, so it
/// is refused here, before the lexer sees it.
fn compile_expression(expr: &str) -> Result<minijinja::Expression<'_, '_>, TemplateError> {
    if let Some(at) = closes_a_block(expr) {
        return Err(TemplateError(format!(
            "syntax error: unexpected `}}}}` at byte {at} of the expression"
        )));
    }
    Ok(ENV.compile_expression(expr)?)
}

/// Where `expr` holds a `}}` that minijinja's lexer would take for the end of a variable
/// block: outside string literals, with every bracket opened before it closed. The scan
/// follows the lexer: brackets of the three kinds count alike, and a string runs to the
/// next unescaped quote of its kind.
fn closes_a_block(expr: &str) -> Option<usize> {
    let bytes = expr.as_bytes();
    let (mut at, mut balance) = (0, 0isize);
    while at < bytes.len() {
        match bytes[at] {
            quote @ (b'\'' | b'"') => {
                at += 1;
                while at < bytes.len() && bytes[at] != quote {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
            }
            b'}' if balance == 0 && bytes.get(at + 1) == Some(&b'}') => return Some(at),
            b'(' | b'[' | b'{' => balance += 1,
            b')' | b']' | b'}' => balance -= 1,
            _ => {}
        }
        at += 1;
    }
    None
}

/// Whether `text` uses template syntax at all; plain strings are taken literally.
pub fn is_template(text: &str) -> bool {
    text.contains("{{") || text.contains("{%") || text.contains("{#")
}

/// The expression of a string that is exactly one `{{ expr }}`, if it is one.
fn sole_expression(text: &str) -> Option<&str> {
    let inner = text.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}") && !inner.contains("{%")).then_some(inner)
}

/// Renders a template to text.
pub fn render(source: &str, ctx: &minijinja::Value) -> Result<String, TemplateError> {
    Ok(ENV.render_str(source, ctx)?)
}

/// Evaluates an expression to a JSON value.
pub fn eval(expr: &str, ctx: &minijinja::Value) -> Result<Value, TemplateError> {
    let value = compile_expression(expr)?.eval(ctx)?;
    to_json(&value)
}

/// Evaluates an expression for its truth (`when`).
pub fn eval_bool(expr: &str, ctx: &minijinja::Value) -> Result<bool, TemplateError> {
    Ok(compile_expression(expr)?.eval(ctx)?.is_true())
}

fn to_json(value: &minijinja::Value) -> Result<Value, TemplateError> {
    if value.is_undefined() {
        return Err(TemplateError("the expression is undefined".into()));
    }
    serde_json::to_value(value).map_err(|e| TemplateError(e.to_string()))
}

/// Whether a string anywhere in `value` is a template (what [`expand`] expands).
pub fn has_template(value: &Value) -> bool {
    match value {
        Value::String(text) => is_template(text),
        Value::Array(items) => items.iter().any(has_template),
        Value::Object(map) => map.values().any(has_template),
        _ => false,
    }
}

/// Expands every string in `value`: a string that is exactly one `{{ expr }}` keeps the
/// JSON type of its value; other templates render to text; plain strings stay as they are.
pub fn expand(value: &Value, ctx: &minijinja::Value) -> Result<Value, TemplateError> {
    Ok(match value {
        Value::String(text) if is_template(text) => match sole_expression(text) {
            Some(expr) => eval(expr, ctx)?,
            None => Value::String(render(text, ctx)?),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| expand(item, ctx))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), expand(v, ctx)?)))
                .collect::<Result<_, TemplateError>>()?,
        ),
        other => other.clone(),
    })
}

/// The dotted variable paths a template names (`inputs.title`, `nodes.plan.output`).
pub fn template_references(source: &str) -> Result<BTreeSet<String>, TemplateError> {
    let template = ENV.template_from_str(source)?;
    Ok(template.undeclared_variables(true).into_iter().collect())
}

/// The dotted variable paths an expression names.
pub fn expression_references(expr: &str) -> Result<BTreeSet<String>, TemplateError> {
    let expression = compile_expression(expr)?;
    Ok(expression.undeclared_variables(true).into_iter().collect())
}

/// The references of every template string inside a JSON value (tool `args`).
pub fn value_references(value: &Value) -> Result<BTreeSet<String>, TemplateError> {
    let mut found = BTreeSet::new();
    collect_value_references(value, &mut found)?;
    Ok(found)
}

fn collect_value_references(
    value: &Value,
    found: &mut BTreeSet<String>,
) -> Result<(), TemplateError> {
    match value {
        Value::String(text) if is_template(text) => {
            found.extend(template_references(text)?);
        }
        Value::Array(items) => {
            for item in items {
                collect_value_references(item, found)?;
            }
        }
        Value::Object(map) => {
            for item in map.values() {
                collect_value_references(item, found)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> minijinja::Value {
        minijinja::Value::from_serialize(json!({
            "inputs": { "title": "Ship", "count": 3, "items": ["a", "b"] },
            "nodes": { "plan": { "output": { "n": 2 }, "status": "succeeded" } },
            "run": { "id": "r1" }
        }))
    }

    #[test]
    fn a_sole_expression_keeps_its_json_type() {
        let out = expand(
            &json!({ "n": "{{ inputs.count }}", "l": "{{ inputs.items }}" }),
            &ctx(),
        )
        .unwrap();
        assert_eq!(out, json!({ "n": 3, "l": ["a", "b"] }));
    }

    #[test]
    fn a_mixed_template_renders_to_text() {
        let out = expand(
            &json!("Release {{ inputs.title }} ({{ inputs.count }})"),
            &ctx(),
        )
        .unwrap();
        assert_eq!(out, json!("Release Ship (3)"));
    }

    #[test]
    fn plain_strings_are_taken_literally() {
        assert_eq!(
            expand(&json!("50% done"), &ctx()).unwrap(),
            json!("50% done")
        );
    }

    #[test]
    fn a_missing_reference_is_an_error_not_an_empty_string() {
        let error = expand(&json!("Hi {{ inputs.nope }}"), &ctx()).unwrap_err();
        assert!(error.0.contains("undefined"), "{error}");
        assert!(eval("nodes.missing.output", &ctx()).is_err());
    }

    #[test]
    fn references_are_reported_as_dotted_paths() {
        let refs = template_references("{{ inputs.title }} {{ nodes.plan.output.n }}").unwrap();
        assert!(refs.contains("inputs.title"), "{refs:?}");
        assert!(refs.iter().any(|r| r.starts_with("nodes.plan")), "{refs:?}");
        let refs = expression_references("inputs.count > 2 and run.id").unwrap();
        assert!(
            refs.contains("inputs.count") && refs.contains("run.id"),
            "{refs:?}"
        );
    }

    #[test]
    fn an_expression_that_closes_a_block_it_never_opened_is_a_syntax_error() {
        // Each of these made minijinja's lexer panic.
        for expr in ["inputs.x }}.\n", "a }} b", "(1) }}}}", "x -}} y", "{} }} {"] {
            let error = expression_references(expr).unwrap_err();
            assert!(error.0.contains("unexpected `}}`"), "{expr}: {error}");
            assert!(eval(expr, &ctx()).is_err(), "{expr}");
            assert!(eval_bool(expr, &ctx()).is_err(), "{expr}");
        }
        // A `}}` in a string or closing nested brackets is no block's end.
        assert_eq!(eval("'}}' ~ 'x }} y'", &ctx()).unwrap(), json!("}}x }} y"));
        assert_eq!(eval("{'a': {'b': 1}}.a.b", &ctx()).unwrap(), json!(1));
        assert_eq!(eval("[{'a': '\\'}}'}]", &ctx()).unwrap(), json!([{"a": "'}}"}]));
    }

    #[test]
    fn conditions_use_truthiness() {
        assert!(eval_bool("inputs.title != ''", &ctx()).unwrap());
        assert!(!eval_bool("inputs.count > 5", &ctx()).unwrap());
    }
}
