//! Templates and expressions (minijinja) over `inputs`, `nodes.<id>.output|status`,
//! `run.id`, and `item`/`index` inside a `for_each` node.
//!
//! Undefined references are errors, never empty strings: a typo must fail loudly.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use minijinja::{Environment, ErrorKind, UndefinedBehavior};
use serde_json::Value;

use super::budget::{self, Capped, Counter};
pub use super::budget::{Budget, TemplateLimits};

/// The environment that only compiles (references, syntax): it evaluates nothing.
static COMPILER: LazyLock<Environment<'static>> = LazyLock::new(environment);

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    // A value written out is charged and measured first: minijinja writes a list item by
    // item and keeps iterating after the writer refused more, so a lazily repeated list
    // must be refused before it is written.
    env.set_formatter(|out, state, value| {
        super::budget::charge(value, "a value written out")?;
        minijinja::escape_formatter(out, state, value)
    });
    super::filters::register(&mut env);
    // No commands file, no command: what `command_allowed` answers until the engine is
    // given the commands in force (`Templates::with_commands`).
    env.add_function("command_allowed", |_: &str| false);
    // A filter with a bug, to show that a panic stays in its evaluation.
    #[cfg(test)]
    env.add_filter("panics", |_: minijinja::Value| -> String {
        panic!("a filter's bug")
    });
    env
}

/// The variables a template or expression may name at its root.
pub(crate) const ROOTS: &[&str] = &["inputs", "nodes", "run", "item", "index"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The template is malformed, names something undefined, or a filter refused its input.
    #[error("{0}")]
    Failed(String),
    /// The evaluation exhausted one of its budgets.
    #[error("the {} budget ({limit}) is exhausted", budget.name())]
    Budget { budget: Budget, limit: u64 },
    /// The evaluation panicked (a filter's bug): contained here, reported as an error.
    #[error("the evaluation panicked: {0}")]
    Panicked(String),
}

/// Runs one evaluation, a panic in it (a filter's, minijinja's) made an error: the node
/// fails and the run goes on, instead of the task that drives it unwinding.
fn contained<T>(evaluation: impl FnOnce() -> Result<T, TemplateError>) -> Result<T, TemplateError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(evaluation)).unwrap_or_else(|panic| {
        let message = (panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(TemplateError::Panicked(message))
    })
}

impl TemplateError {
    fn budget(budget: Budget, limits: &TemplateLimits) -> TemplateError {
        let limit = match budget {
            Budget::Fuel => limits.fuel,
            Budget::Output => limits.max_output as u64,
        };
        TemplateError::Budget { budget, limit }
    }
}

impl From<minijinja::Error> for TemplateError {
    fn from(error: minijinja::Error) -> TemplateError {
        // The detail line says what was undefined or malformed; the kind alone does not.
        let mut message = error.kind().to_string();
        if let Some(detail) = error.detail() {
            message = format!("{message}: {detail}");
        }
        TemplateError::Failed(message)
    }
}

/// Templates and expressions evaluated under budgets: each evaluation (one template
/// rendered, one expression evaluated) gets the whole fuel and output cap of `limits`.
pub struct Templates {
    env: Environment<'static>,
    limits: TemplateLimits,
}

impl Default for Templates {
    fn default() -> Templates {
        Templates::new(TemplateLimits::default())
    }
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("limits", &self.limits)
            .finish()
    }
}

impl Templates {
    pub fn new(limits: TemplateLimits) -> Templates {
        let mut env = environment();
        env.set_fuel(Some(limits.fuel.max(1)));
        Templates { env, limits }
    }

    pub fn limits(&self) -> TemplateLimits {
        self.limits
    }

    /// These templates with `command_allowed("name")` answering whether `commands` lets a
    /// node run that command now (reloads included).
    pub fn with_commands(mut self, commands: super::command::CommandSet) -> Templates {
        self.env
            .add_function("command_allowed", move |name: &str| commands.allowed(name));
        self
    }

    /// The error of a failed evaluation: an exhausted budget is told from the rest.
    fn error(&self, armed: &budget::Armed, error: minijinja::Error) -> TemplateError {
        if error.kind() == ErrorKind::OutOfFuel {
            return TemplateError::budget(Budget::Fuel, &self.limits);
        }
        match armed.exhausted() {
            Some(budget) => TemplateError::budget(budget, &self.limits),
            None => error.into(),
        }
    }

    /// Renders a template to text, at most the output cap of it.
    pub fn render(&self, source: &str, ctx: &minijinja::Value) -> Result<String, TemplateError> {
        contained(|| self.render_text(source, ctx))
    }

    fn render_text(&self, source: &str, ctx: &minijinja::Value) -> Result<String, TemplateError> {
        let armed = budget::arm(self.limits);
        let template = self.env.template_from_str(source)?;
        let mut out = Capped::new(self.limits.max_output);
        if let Err(error) = template.render_captured_to(ctx, &mut out) {
            if out.overflowed {
                return Err(TemplateError::budget(Budget::Output, &self.limits));
            }
            return Err(self.error(&armed, error));
        }
        String::from_utf8(out.bytes).map_err(|e| TemplateError::Failed(e.to_string()))
    }

    /// Evaluates an expression to a JSON value.
    pub fn eval(&self, expr: &str, ctx: &minijinja::Value) -> Result<Value, TemplateError> {
        contained(|| {
            let armed = budget::arm(self.limits);
            let value = self.evaluate(&armed, expr, ctx)?;
            self.to_json(&value)
        })
    }

    /// Evaluates an expression for its truth (`when`).
    pub(crate) fn eval_bool(
        &self,
        expr: &str,
        ctx: &minijinja::Value,
    ) -> Result<bool, TemplateError> {
        contained(|| {
            let armed = budget::arm(self.limits);
            Ok(self.evaluate(&armed, expr, ctx)?.is_true())
        })
    }

    fn evaluate(
        &self,
        armed: &budget::Armed,
        expr: &str,
        ctx: &minijinja::Value,
    ) -> Result<minijinja::Value, TemplateError> {
        let expression = compile_expression(&self.env, expr)?;
        expression.eval(ctx).map_err(|e| self.error(armed, e))
    }

    /// The JSON of a value, measured first without building it: a lazily repeated list
    /// is refused at the cap, not expanded.
    fn to_json(&self, value: &minijinja::Value) -> Result<Value, TemplateError> {
        if value.is_undefined() {
            return Err(TemplateError::Failed("the expression is undefined".into()));
        }
        // Measured first the cheap way: serialising a long string scans all of it.
        if !budget::fits(value, self.limits.max_output) {
            return Err(TemplateError::budget(Budget::Output, &self.limits));
        }
        let mut counter = Counter::new(self.limits.max_output);
        if let Err(error) = serde_json::to_writer(&mut counter, value) {
            return Err(match error.is_io() {
                true => TemplateError::budget(Budget::Output, &self.limits),
                false => TemplateError::Failed(error.to_string()),
            });
        }
        serde_json::to_value(value).map_err(|e| TemplateError::Failed(e.to_string()))
    }

    /// Expands every string in `value`: a string that is exactly one `{{ expr }}` keeps
    /// the JSON type of its value; other templates render to text; plain strings stay as
    /// they are. The output cap holds for the whole value, not only for each string.
    pub fn expand(&self, value: &Value, ctx: &minijinja::Value) -> Result<Value, TemplateError> {
        let mut left = self.limits.max_output;
        self.expand_within(value, ctx, &mut left)
    }

    fn expand_within(
        &self,
        value: &Value,
        ctx: &minijinja::Value,
        left: &mut usize,
    ) -> Result<Value, TemplateError> {
        let expanded = match value {
            Value::String(text) if is_template(text) => match sole_expression(text) {
                Some(expr) => self.eval(expr, ctx)?,
                None => Value::String(self.render(text, ctx)?),
            },
            Value::Array(items) => {
                let items = items.iter().map(|item| self.expand_within(item, ctx, left));
                return Ok(Value::Array(items.collect::<Result<_, _>>()?));
            }
            Value::Object(map) => {
                let entries =
                    (map.iter()).map(|(k, v)| Ok((k.clone(), self.expand_within(v, ctx, left)?)));
                return Ok(Value::Object(
                    entries.collect::<Result<_, TemplateError>>()?,
                ));
            }
            other => return Ok(other.clone()),
        };
        let size = match &expanded {
            Value::String(text) => text.len(),
            other => serde_json::to_string(other).map_or(0, |text| text.len()),
        };
        match left.checked_sub(size) {
            Some(rest) => *left = rest,
            None => return Err(TemplateError::budget(Budget::Output, &self.limits)),
        }
        Ok(expanded)
    }
}

/// An expression compiled, once it is known not to close a variable block (`}}`) that it
/// never opened.
///
/// minijinja 2.24 lexes a standalone expression as the inside of a `{{ … }}`: a `}}`
/// there (outside brackets and strings) ends that block, and any input after it makes
/// the lexer panic on its empty stack. Such a `}}` is never valid in an expression, so it
/// is refused here, before the lexer sees it.
fn compile_expression<'e, 's>(
    env: &'e Environment<'static>,
    expr: &'s str,
) -> Result<minijinja::Expression<'e, 's>, TemplateError> {
    if let Some(at) = closes_a_block(expr) {
        return Err(TemplateError::Failed(format!(
            "syntax error: unexpected `}}}}` at byte {at} of the expression"
        )));
    }
    Ok(env.compile_expression(expr)?)
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
pub(crate) fn is_template(text: &str) -> bool {
    text.contains("{{") || text.contains("{%") || text.contains("{#")
}

/// The expression of a string that is exactly one `{{ expr }}`, if it is one.
fn sole_expression(text: &str) -> Option<&str> {
    let inner = text.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}") && !inner.contains("{%")).then_some(inner)
}

/// Whether a string anywhere in `value` is a template (what [`expand`] expands).
pub(crate) fn has_template(value: &Value) -> bool {
    match value {
        Value::String(text) => is_template(text),
        Value::Array(items) => items.iter().any(has_template),
        Value::Object(map) => map.values().any(has_template),
        _ => false,
    }
}

/// The dotted variable paths a template names (`inputs.title`, `nodes.plan.output`).
pub(crate) fn template_references(source: &str) -> Result<BTreeSet<String>, TemplateError> {
    // Compiling folds constant operations (`'x' * 10**8 ~ …`): they are checked too.
    let _armed = budget::arm(TemplateLimits::default());
    let template = COMPILER.template_from_str(source)?;
    Ok(template.undeclared_variables(true).into_iter().collect())
}

/// The dotted variable paths an expression names.
pub(crate) fn expression_references(expr: &str) -> Result<BTreeSet<String>, TemplateError> {
    let _armed = budget::arm(TemplateLimits::default());
    let expression = compile_expression(&COMPILER, expr)?;
    Ok(expression.undeclared_variables(true).into_iter().collect())
}

/// The references of every template string inside a JSON value (tool `args`).
pub(crate) fn value_references(value: &Value) -> Result<BTreeSet<String>, TemplateError> {
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
        let out = Templates::default()
            .expand(
                &json!({ "n": "{{ inputs.count }}", "l": "{{ inputs.items }}" }),
                &ctx(),
            )
            .unwrap();
        assert_eq!(out, json!({ "n": 3, "l": ["a", "b"] }));
    }

    #[test]
    fn a_mixed_template_renders_to_text() {
        let out = Templates::default()
            .expand(
                &json!("Release {{ inputs.title }} ({{ inputs.count }})"),
                &ctx(),
            )
            .unwrap();
        assert_eq!(out, json!("Release Ship (3)"));
    }

    #[test]
    fn plain_strings_are_taken_literally() {
        assert_eq!(
            Templates::default()
                .expand(&json!("50% done"), &ctx())
                .unwrap(),
            json!("50% done")
        );
    }

    #[test]
    fn a_missing_reference_is_an_error_not_an_empty_string() {
        let templates = Templates::default();
        let error = (templates.expand(&json!("Hi {{ inputs.nope }}"), &ctx())).unwrap_err();
        assert!(error.to_string().contains("undefined"), "{error}");
        assert!(templates.eval("nodes.missing.output", &ctx()).is_err());
    }

    #[test]
    fn a_slice_references_the_value_it_is_taken_of() {
        let refs = template_references("{{ nodes.plan.output[1:n] | join(',') }}").unwrap();
        assert!(refs.contains("nodes.plan.output"), "{refs:?}");
        assert!(refs.contains("n"), "{refs:?}");
        let refs = expression_references("(nodes.plan.output | from_json)[:2]").unwrap();
        assert!(refs.contains("nodes.plan.output"), "{refs:?}");
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
        let templates = Templates::default();
        // Each of these made minijinja's lexer panic.
        for expr in ["inputs.x }}.\n", "a }} b", "(1) }}}}", "x -}} y", "{} }} {"] {
            let error = expression_references(expr).unwrap_err();
            assert!(
                error.to_string().contains("unexpected `}}`"),
                "{expr}: {error}"
            );
            assert!(templates.eval(expr, &ctx()).is_err(), "{expr}");
            assert!(templates.eval_bool(expr, &ctx()).is_err(), "{expr}");
        }
        // A `}}` in a string or closing nested brackets is no block's end.
        let eval = |expr: &str| templates.eval(expr, &ctx()).unwrap();
        assert_eq!(eval("'}}' ~ 'x }} y'"), json!("}}x }} y"));
        assert_eq!(eval("{'a': {'b': 1}}.a.b"), json!(1));
        assert_eq!(eval("[{'a': '\\'}}'}]"), json!([{"a": "'}}"}]));
    }

    #[test]
    fn conditions_use_truthiness() {
        assert!(
            Templates::default()
                .eval_bool("inputs.title != ''", &ctx())
                .unwrap()
        );
        assert!(
            !Templates::default()
                .eval_bool("inputs.count > 5", &ctx())
                .unwrap()
        );
    }

    fn budget_of(result: Result<impl std::fmt::Debug, TemplateError>) -> Budget {
        match result {
            Err(TemplateError::Budget { budget, .. }) => budget,
            other => panic!("expected an exhausted budget, got {other:?}"),
        }
    }

    #[test]
    fn a_nested_loop_runs_out_of_fuel() {
        let templates = Templates::default();
        let bomb =
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
        assert_eq!(budget_of(templates.render(bomb, &ctx())), Budget::Fuel);
        let expr = "range(100000) | map('string') | list | length";
        // One filter call over a long list is within the fuel; a loop of them is not.
        assert!(templates.eval(expr, &ctx()).is_ok());
        let bomb = "{% for i in range(100000) %}{{ (range(100000) * 40) | join }}{% endfor %}";
        assert!(matches!(
            templates.render(bomb, &ctx()),
            Err(TemplateError::Budget { .. })
        ));
    }

    #[test]
    fn a_huge_string_is_over_the_output_cap() {
        let templates = Templates::default();
        let bomb = "{{ 'x' * 100000000 }}";
        assert_eq!(
            budget_of(templates.render(&format!("a{bomb}"), &ctx())),
            Budget::Output
        );
        assert_eq!(
            budget_of(templates.eval("'x' * 100000000", &ctx())),
            Budget::Output
        );
        let error = templates.eval("'x' * 100000000", &ctx()).unwrap_err();
        assert!(error.to_string().contains("template-max-output"), "{error}");
    }

    #[test]
    fn a_lazily_repeated_list_is_refused_at_the_cap_not_built() {
        let templates = Templates::default();
        let bomb = "range(100000) * 100000";
        assert_eq!(budget_of(templates.eval(bomb, &ctx())), Budget::Output);
        assert_eq!(
            budget_of(templates.eval(&format!("({bomb}) | join"), &ctx())),
            Budget::Output
        );
        let render = templates.render(&format!("{{{{ {bomb} }}}}"), &ctx());
        assert_eq!(budget_of(render), Budget::Output);
    }

    /// Templates whose operators build or walk, in one instruction each, far more than
    /// the output cap: each is refused before the work, at the output cap.
    fn operator_bombs() -> Vec<String> {
        // A string doubled by `~`, then by `+`: 2**12 MB in a dozen instructions.
        let doubled = |op: &str| {
            let double = format!("{{% set a = a {op} a %}}").repeat(12);
            format!("{{% set a = 'x' * 1000000 %}}{double}{{{{ a | length }}}}")
        };
        let mut bombs = vec![doubled("~"), doubled("+")];
        bombs.extend(OPERATOR_BOMBS.iter().map(|bomb| bomb.to_string()));
        bombs
    }

    const OPERATOR_BOMBS: &[&str] = &[
        // A lazily repeated list of 10**10 items, formatted, compared, searched, sliced,
        // indexed, unpacked.
        "{{ ((range(100000) * 100000) ~ '') | length }}",
        "{{ ([range(100000) * 100000] ~ '') | length }}",
        "{{ (range(100000) * 100000) == (range(100000) * 100000) }}",
        "{{ (range(100000) * 100000) < (range(100000) * 100000) }}",
        "{{ ((range(100000) * 100000) + [1]) != ((range(100000) * 100000) + [1]) }}",
        "{{ -1 in range(100000) * 100000 }}",
        "{{ (range(100000) * 100000) in 'abc' }}",
        "{{ (range(100000) * 100000) is eq(range(100000) * 100000) }}",
        "{{ -1 is in(range(100000) * 100000) }}",
        "{{ ((range(100000) * 100000)[::-1]) | first }}",
        "{{ (range(100000) * 100000)[9999999999] }}",
        "{% set a, b = range(100000) * 100000 %}",
    ];

    #[test]
    fn operators_that_build_or_walk_past_the_cap_are_refused_before_the_work() {
        let templates = Templates::default();
        let bombs = operator_bombs();
        for bomb in &bombs {
            let result = templates.render(bomb, &ctx());
            assert!(
                matches!(result, Err(TemplateError::Budget { .. })),
                "{bomb}: {result:?}"
            );
        }
        let error = templates.render(&bombs[0], &ctx()).unwrap_err();
        assert!(error.to_string().contains("template-max-output"), "{error}");
        // The same operators on what fits still work.
        let fits = "{% set a = 'ab' %}{% set a = a ~ a + a %}{{ a }} {{ [1, 2] ~ '' }} \
                    {{ [1] + [2] == [1, 2] }} {{ 2 in range(3) * 2 }} {{ (range(3) * 2)[4] }}";
        assert_eq!(
            templates.render(fits, &ctx()).unwrap(),
            "ababab [1, 2] True True 1"
        );
    }

    #[test]
    fn operators_walking_long_lists_in_a_loop_run_out_of_fuel() {
        let templates = Templates::default();
        let bomb = "{% set l = range(100000) * 10 %}{% for i in range(100000) %}\
                    {% if l == l + [] %}{% endif %}{% endfor %}";
        assert_eq!(budget_of(templates.render(bomb, &ctx())), Budget::Fuel);
    }

    #[test]
    fn folding_constants_at_validation_is_checked_too() {
        // Compiling folds `'x' * 10**8 ~ …`; refused, it is left to the evaluation.
        let refs = template_references("{{ ('x' * 100000000) ~ ('x' * 100000000) }}").unwrap();
        assert!(refs.is_empty(), "{refs:?}");
    }

    #[test]
    fn expanded_args_fit_the_output_cap_as_a_whole() {
        let templates = Templates::new(TemplateLimits {
            fuel: 10_000,
            max_output: 1000,
        });
        let one = json!("{{ 'x' * 600 }}");
        assert!(templates.expand(&one, &ctx()).is_ok());
        let two = json!({ "a": "{{ 'x' * 600 }}", "b": "{{ 'x' * 600 }}" });
        assert_eq!(budget_of(templates.expand(&two, &ctx())), Budget::Output);
    }

    #[test]
    fn a_wide_zero_pad_is_an_error_not_a_panic() {
        let templates = Templates::default();
        let padded = templates.eval("1 | zero_pad(70000)", &ctx()).unwrap();
        assert_eq!(padded.as_str().map(str::len), Some(70000));
        let error = templates.eval("1 | zero_pad(100000000)", &ctx());
        assert_eq!(budget_of(error), Budget::Output);
    }

    #[test]
    fn amplifying_filter_arguments_are_refused_before_they_allocate() {
        let templates = Templates::default();
        for bomb in [
            "'a\nb' | indent(100000000000)",
            "[1] | batch(1000000000000)",
            "[1] | slice(1000000000000)",
            "('x' * 100000) | replace('', 'y' * 1000)",
            "(range(100000) | list) | join('y' * 1000)",
        ] {
            assert_eq!(
                budget_of(templates.eval(bomb, &ctx())),
                Budget::Output,
                "{bomb}"
            );
        }
        for refused in [
            "'%999999999999d' | format(1)",
            "'%.70000f' | format(1.5)",
            "1 | tojson(1000000000)",
        ] {
            let error = templates.eval(refused, &ctx()).unwrap_err();
            assert!(
                matches!(error, TemplateError::Failed(_)),
                "{refused}: {error:?}"
            );
        }
        // What they are for still works.
        assert_eq!(
            templates.eval("'%05d' | format(7)", &ctx()).unwrap(),
            json!("00007")
        );
        assert_eq!(
            templates
                .eval("'a\nb' | indent(2, first=true)", &ctx())
                .unwrap(),
            json!("  a\n  b")
        );
        assert_eq!(
            templates
                .eval("[1, 2, 3] | batch(2) | list", &ctx())
                .unwrap(),
            json!([[1, 2], [3]])
        );
    }

    #[test]
    fn a_recursive_macro_is_stopped() {
        let templates = Templates::default();
        let bomb = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
        let error = templates.render(bomb, &ctx()).unwrap_err();
        assert!(error.to_string().contains("recursion"), "{error}");
        let wide = "{% macro f(n) %}{% if n < 30 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) }}";
        assert_eq!(budget_of(templates.render(wide, &ctx())), Budget::Fuel);
    }

    #[test]
    fn a_panicking_filter_is_an_error_of_its_evaluation_not_an_unwinding_task() {
        let templates = Templates::default();
        let error = templates.render("{{ 1 | panics }}", &ctx()).unwrap_err();
        assert!(matches!(&error, TemplateError::Panicked(m) if m.contains("a filter's bug")));
        let node = crate::engine::actions::template_error("render", error);
        assert_eq!(node.code, "internal_error");
        assert!(!node.is_retryable());
        assert!(matches!(
            templates.eval_bool("1 | panics", &ctx()),
            Err(TemplateError::Panicked(_))
        ));
    }
}
