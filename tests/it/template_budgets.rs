//! Property tests of the template budgets: any template built from loops, repeated
//! strings, padding, joins and recursion, however large its numbers, ends under its fuel
//! with a text no longer than the output cap, a template error or a budget error; and a
//! loop of more iterations than the fuel allows always ends in the fuel budget.

use mcp_task_server::engine::template::{Budget, TemplateError, TemplateLimits, Templates};
use proptest::prelude::*;
use serde_json::json;

/// Numbers from the small to the absurd.
fn number() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..10, 10u64..100_000, 100_000u64..10_000_000_000]
}

/// A piece of template that may burn fuel or produce output without bound.
fn piece() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("x".to_owned()),
        Just("{{ inputs.title }}".to_owned()),
        number().prop_map(|n| format!("{{{{ 'ab' * {n} }}}}")),
        number().prop_map(|n| format!("{{{{ 1 | zero_pad({n}) }}}}")),
        number().prop_map(|n| format!("{{{{ range({n}) | join(',') }}}}")),
        number().prop_map(|n| format!("{{{{ ('x' * {n}) | replace('x', 'yy') | length }}}}")),
        Just("{% macro f(k) %}{{ f(k) }}{% endmacro %}{{ f(1) }}".to_owned()),
        (number(), number(), number())
            .prop_map(|(a, b, c)| format!("{{{{ [] * {a} * {b} * {c} }}}}")),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            (number(), inner.clone())
                .prop_map(|(n, body)| format!("{{% for i in range({n}) %}}{body}{{% endfor %}}")),
            prop::collection::vec(inner, 1..3).prop_map(|parts| parts.concat()),
        ]
    })
}

fn limits() -> impl Strategy<Value = TemplateLimits> {
    (1u64..50_000, 0usize..10_000)
        .prop_map(|(fuel, max_output)| TemplateLimits { fuel, max_output })
}

fn ctx() -> minijinja::Value {
    minijinja::Value::from_serialize(json!({ "inputs": { "title": "Ship" } }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_template_ends_within_its_budgets(template in piece(), limits in limits()) {
        match Templates::new(limits).render(&template, &ctx()) {
            Ok(text) => prop_assert!(text.len() <= limits.max_output, "{} bytes", text.len()),
            Err(TemplateError::Budget { .. } | TemplateError::Failed(_)) => {}
            Err(TemplateError::Panicked(why)) => prop_assert!(false, "it panicked: {why}"),
        }
    }

    #[test]
    fn a_loop_longer_than_its_fuel_exhausts_the_fuel(
        fuel in 1u64..20_000,
        // minijinja refuses a `range` of more than 100 000 numbers on its own.
        extra in 0u64..80_000,
        nested in any::<bool>(),
    ) {
        let limits = TemplateLimits { fuel, max_output: usize::MAX };
        let iterations = fuel + extra;
        let template = match nested {
            // Each iteration takes at least one instruction.
            false => format!("{{% for i in range({iterations}) %}}{{% endfor %}}"),
            true => format!(
                "{{% for i in range({iterations}) %}}{{% for j in range({iterations}) %}}\
                 {{% endfor %}}{{% endfor %}}"
            ),
        };
        let result = Templates::new(limits).render(&template, &ctx());
        prop_assert!(
            matches!(result, Err(TemplateError::Budget { budget: Budget::Fuel, .. })),
            "{result:?}"
        );
    }

    #[test]
    fn an_expression_ends_within_its_budgets(n in number(), m in number(), limits in limits()) {
        let templates = Templates::new(limits);
        for expr in [
            format!("range({n}) | list"),
            format!("'ab' * {n}"),
            format!("[1, 2] * {n}"),
            format!("range({n}) | map('string') | join('') | length > {m}"),
        ] {
            match templates.eval(&expr, &ctx()) {
                Ok(value) => {
                    let size = serde_json::to_string(&value).unwrap().len();
                    prop_assert!(size <= limits.max_output, "{expr}: {size} bytes");
                }
                Err(TemplateError::Budget { .. } | TemplateError::Failed(_)) => {}
                Err(TemplateError::Panicked(why)) => prop_assert!(false, "{expr}: it panicked: {why}"),
            }
        }
    }
}

/// A list repeated to no item is an empty list, whatever the counts: `[] * n` and `x * 0`
/// print as `[]` and have no length.
#[test]
fn a_list_repeated_to_no_item_is_an_empty_list() {
    let templates = Templates::new(TemplateLimits::default());
    for (template, expected) in [
        ("{{ [1, 2] * 0 }}", "[]"),
        ("{{ [] * 3 }}", "[]"),
        ("{{ ([] * 30 * 2222220 * 6893) | length }}", "0"),
        ("{{ [1, 2] * 2 }}", "[1, 2, 1, 2]"),
    ] {
        let text = templates.render(template, &ctx());
        assert_eq!(text.as_deref().ok(), Some(expected), "{template}: {text:?}");
    }
}
