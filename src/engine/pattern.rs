//! The `regex` filter: the first match of a regular expression in a text, with its
//! groups, for the shapes templates cannot check by hand (an ISO date, `# 7. Title`, a
//! dated file name).
//!
//! The `regex` crate matches in time linear in the text for a given pattern (no
//! backtracking), and proportional to the pattern's size besides. A pattern is compiled
//! under a size limit (a pattern such as `a{1000}{1000}` is refused, not built); each
//! compile costs [`COMPILE_FUEL`], so that one evaluation cannot spend its time compiling
//! patterns, and a match costs the text's bytes times a factor that grows with the
//! pattern's length. A pattern that does not compile is a template error naming why.

use std::cell::RefCell;
use std::collections::HashMap;

use minijinja::{Error, Value};
use regex::{Regex, RegexBuilder};

use super::budget;
use super::filters::invalid;

/// The most memory one compiled pattern may take (its program, and each of its lazy
/// DFA's caches): a pattern over it is refused.
const MAX_COMPILED: usize = 256 * 1024;

/// How deeply groups and repetitions may nest in a pattern.
const MAX_NESTING: u32 = 32;

/// The fuel a pattern's compiling costs, when it is not in the thread's cache: a hundredth
/// of the default fuel, so that an evaluation compiles at most about a hundred patterns.
const COMPILE_FUEL: u64 = 10_000;

/// A match reads the text once per this many bytes of pattern, at most: the factor its
/// bytes are charged by.
const PATTERN_BYTES_PER_PASS: usize = 32;

/// Patterns compiled on this thread, kept while there are few: a workflow applies the
/// same handful of patterns to every line of every file.
const CACHED: usize = 64;

thread_local! {
    static COMPILED: RefCell<HashMap<String, Regex>> = RefCell::new(HashMap::new());
}

/// `text | regex(pattern)`: the first match of `pattern` in `text` as a list, the whole
/// match first and then each group (`none` for a group that took no part), or `none` when
/// nothing matches. Flags go inline: `(?i)` ignores case, `(?m)` makes `^` and `$` match
/// at each line.
pub(super) fn first_match(text: &Value, pattern: &str) -> Result<Value, Error> {
    budget::charge(text, "regex's input")?;
    budget::charge(&Value::from(pattern), "regex's pattern")?;
    let Some(text) = text.as_str() else {
        let kind = text.kind();
        return Err(invalid(format!("regex: expected a text, got a {kind}")));
    };
    let passes = 1 + pattern.len() / PATTERN_BYTES_PER_PASS;
    let work = text.len().saturating_mul(passes) as u64 / 64;
    budget::charge_fuel(work, "regex's match")?;
    let regex = compiled(pattern)?;
    let Some(captures) = regex.captures(text) else {
        return Ok(Value::from(()));
    };
    let groups: Vec<Value> = captures
        .iter()
        .map(|group| group.map_or(Value::from(()), |m| Value::from(m.as_str())))
        .collect();
    Ok(Value::from(groups))
}

/// `pattern` compiled, from the thread's cache when it was compiled before.
fn compiled(pattern: &str) -> Result<Regex, Error> {
    if let Some(regex) = COMPILED.with(|cache| cache.borrow().get(pattern).cloned()) {
        return Ok(regex);
    }
    budget::charge_fuel(COMPILE_FUEL, "compiling a regex")?;
    let regex = RegexBuilder::new(pattern)
        .size_limit(MAX_COMPILED)
        .dfa_size_limit(MAX_COMPILED)
        .nest_limit(MAX_NESTING)
        .build()
        .map_err(|error| invalid(format!("regex: the pattern does not compile: {error}")))?;
    COMPILED.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= CACHED {
            cache.clear();
        }
        cache.insert(pattern.to_owned(), regex.clone());
    });
    Ok(regex)
}

/// `fail(message)`: stops the evaluation with `message` as its error, so that a
/// workflow can fail a node saying why (`fail('no ADR in ' ~ folder) if not files`).
pub(super) fn fail(message: &str) -> Result<Value, Error> {
    Err(invalid(message.to_owned()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::engine::template::{Budget, TemplateError, TemplateLimits, Templates};

    use crate::engine::filters::eval_text as eval;

    #[test]
    fn a_match_gives_the_whole_match_then_each_group() {
        let templates = Templates::default();
        let read = |expr: &str, text: &str| eval(&templates, expr, text).unwrap();
        assert_eq!(
            read(
                r"inputs.text | regex('^# (\\d+)\\. (.+)$')",
                "# 12. Use a queue"
            ),
            json!(["# 12. Use a queue", "12", "Use a queue"])
        );
        assert_eq!(
            read(
                r"inputs.text | regex('^\\d{4}-\\d{2}-\\d{2}$')",
                "2026-1-05"
            ),
            json!(null)
        );
        // A group that takes no part is none; flags go inline.
        assert_eq!(
            read(
                r"inputs.text | regex('(?i)^superseded by (adr-)?(\\d+)')",
                "Superseded by 7"
            ),
            json!(["Superseded by 7", null, "7"])
        );
        assert_eq!(
            read(
                r"inputs.text | regex('(?m)^Date: (.*)$')",
                "# T\nDate: 2026-01-05\n"
            ),
            json!(["Date: 2026-01-05", "2026-01-05"])
        );
        assert_eq!(read("inputs.text | regex('x') is none", "abc"), json!(true));
    }

    #[test]
    fn a_bad_pattern_or_input_is_a_template_error_never_a_panic() {
        let templates = Templates::default();
        let error = eval(&templates, "inputs.text | regex('(unclosed')", "x").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("regex: the pattern does not compile"),
            "{error}"
        );
        let error = eval(&templates, "3 | regex('x')", "").unwrap_err();
        assert!(
            error.to_string().contains("expected a text, got a number"),
            "{error}"
        );
        // A pattern that would compile to more than the size limit is refused.
        let error = eval(&templates, "inputs.text | regex('(\\\\w{100}){100}')", "x").unwrap_err();
        assert!(error.to_string().contains("does not compile"), "{error}");
        let error = eval(&templates, "fail('no ADR in docs/adrs')", "").unwrap_err();
        assert!(error.to_string().contains("no ADR in docs/adrs"), "{error}");
    }

    #[test]
    fn compiling_patterns_is_charged_so_that_one_evaluation_cannot_spend_its_time_on_it() {
        let templates = Templates::default();
        // Distinct patterns, each compiled: the fuel runs out after about a hundred.
        let many =
            "{% for i in range(1000) %}{{ 'x' | regex('(a{' ~ (100 + i) ~ '}){10}') }}{% endfor %}";
        let ctx = minijinja::Value::from_serialize(json!({}));
        let result = templates.render(many, &ctx);
        assert!(
            matches!(
                result,
                Err(TemplateError::Budget {
                    budget: Budget::Fuel,
                    ..
                })
            ),
            "{result:?}"
        );
        // The same pattern again and again is compiled once.
        let same = "{% for i in range(1000) %}{{ 'x' | regex('(a{100}){10}') }}{% endfor %}";
        assert!(templates.render(same, &ctx).is_ok());
    }

    #[test]
    fn the_text_a_regex_reads_is_charged_against_the_fuel() {
        let small = Templates::new(TemplateLimits {
            fuel: 20_000,
            max_output: 4 << 20,
        });
        // Read once as the filter's input and once more by the match: past the fuel.
        let text = "a".repeat(1_000_000);
        let result = eval(&small, "inputs.text | regex('b')", &text);
        assert!(
            matches!(
                result,
                Err(TemplateError::Budget {
                    budget: Budget::Fuel,
                    ..
                })
            ),
            "{result:?}"
        );
        assert_eq!(
            eval(&small, "inputs.text | regex('b')", "abc").unwrap(),
            json!(["b"])
        );
    }
}
