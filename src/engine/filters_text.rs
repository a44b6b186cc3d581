//! The `words` filter: a text as the set of its telling words, lowercase, in the order
//! they first appear, without stop words ("the", "after", "with", ...) and one-character
//! leftovers ("s" of "pod's"), each once. Two texts are alike by the words they share: a
//! workflow compares an earlier run's failure with the current one as
//! `a | select('in', b) | list | length`, shared words over all words for a Jaccard score.
//!
//! Charged like every filter: the text against the evaluation's fuel before it is read,
//! the list against the output cap after it is built.

use std::collections::HashSet;

use minijinja::{Error, ErrorKind, Value};

use super::budget;

pub(super) fn register(env: &mut minijinja::Environment<'static>) {
    env.add_filter("words", |text: Value| {
        budget::charge(&text, "words' input")?;
        let Some(text) = text.as_str() else {
            let kind = text.kind();
            let message = format!("words: expected a text, got a {kind}");
            return Err(Error::new(ErrorKind::InvalidOperation, message));
        };
        let list = Value::from_serialize(words(text));
        budget::charge(&list, "words' result")?;
        Ok(list)
    });
}

/// Words too common to tell two failures apart: English function words, and the verbs
/// and nouns every failure report uses.
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "as", "at", "be", "been", "before", "being", "below", "between", "both", "but", "by",
    "can", "cannot", "could", "did", "do", "does", "doing", "don", "down", "during", "each", "few",
    "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more",
    "most", "my", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other",
    "our", "ours", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through",
    "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where",
    "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
];

/// The telling words of `text`: runs of letters and digits, lowercased, stop words and
/// single characters dropped, each once, in the order they first appear.
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().nth(1).is_some())
        .map(str::to_lowercase)
        .filter(|word| !STOP_WORDS.contains(&word.as_str()))
        .filter(|word| seen.insert(word.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::words;
    use crate::engine::template::{Budget, TemplateError, TemplateLimits, Templates};

    #[test]
    fn words_are_lowercase_each_once_without_stop_words_or_punctuation() {
        assert_eq!(
            words(
                "The billing service crashes on start after the 2.3 upgrade; it exits with code 137."
            ),
            [
                "billing", "service", "crashes", "start", "upgrade", "exits", "code", "137"
            ]
        );
        assert_eq!(words("Billing: BILLING billing"), ["billing"]);
        assert_eq!(words("the pod's events"), ["pod", "events"]);
        assert_eq!(words("Über-Größe café"), ["über", "größe", "café"]);
        assert!(words("a I of the").is_empty());
        assert!(words("").is_empty());
    }

    #[test]
    fn shared_words_score_two_texts_as_a_template_reads_them() {
        let templates = Templates::default();
        let ctx = minijinja::Value::from_serialize(json!({
            "a": "Login fails with a 502 after the proxy change",
            "b": "The login page fails with 502 errors",
        }));
        let shared = "a | words | select('in', b | words) | list";
        assert_eq!(
            templates.eval(shared, &ctx).unwrap(),
            json!(["login", "fails", "502"])
        );
        let error = templates.eval("3 | words", &ctx).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("words: expected a text, got a number"),
            "{error}"
        );
    }

    #[test]
    fn the_words_filter_is_held_to_the_budgets() {
        // One word many times: its list is one item, so only the text's charge can refuse.
        let long = "word ".repeat(2_000);
        let ctx = minijinja::Value::from_serialize(json!({ "text": long }));
        let small = Templates::new(TemplateLimits {
            fuel: 1_000_000,
            max_output: 4_000,
        });
        let result = small.eval("text | words | length", &ctx);
        assert!(
            matches!(
                result,
                Err(TemplateError::Budget {
                    budget: Budget::Output,
                    ..
                })
            ),
            "{result:?}"
        );
        let starved = Templates::new(TemplateLimits {
            fuel: 100,
            max_output: 4_000_000,
        });
        let result = starved.eval("text | words | length", &ctx);
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
        let fed = Templates::new(TemplateLimits {
            fuel: 1_000,
            max_output: 4_000_000,
        });
        assert_eq!(fed.eval("text | words | length", &ctx).unwrap(), json!(1));
    }
}
