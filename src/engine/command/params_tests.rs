//! Tests of building an argv from a call's values, as a hostile workflow or model would
//! try to bend it: every value one literal element, or refused.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::params::element;
use super::{CommandSpec, Commands, Element};

const FILE: &str = r#"
[commands.echo]
argv = ["/bin/echo", "--", "{text}", "fixed", "{count}", "{flag}"]
[commands.echo.params.text]
type = "string"
maxLength = 200
[commands.echo.params.count]
type = "integer"
default = 3
[commands.echo.params.flag]
type = "boolean"
default = false

[commands.relaxed]
argv = ["/bin/echo", "{text}", "{offset}"]
[commands.relaxed.params.text]
type = "string"
allowLeadingDash = true
multiline = true
[commands.relaxed.params.offset]
type = "integer"
allowLeadingDash = true

[commands.choice]
argv = ["/bin/echo", "{level}"]
[commands.choice.params.level]
type = "string"
enum = ["low", "high"]
"#;

fn spec(name: &str) -> CommandSpec {
    Commands::parse(FILE).unwrap().get(name).unwrap().clone()
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

fn built(name: &str, value: Value) -> Result<Vec<String>, Vec<String>> {
    spec(name)
        .argv(&args(value))
        .map(|argv| argv.elements().to_vec())
}

#[test]
fn each_value_fills_its_one_element_as_is() {
    for hostile in [
        "two words",
        "a; rm -rf ~",
        "$(id)",
        "`id`",
        "'quoted' \"twice\"",
        "*",
        "a|b&&c>d<e",
        "${HOME}",
        "\\",
        "",
        " leading space",
        "tab\there",
        "é ü 日本",
    ] {
        let elements = built("echo", json!({"text": hostile})).unwrap();
        assert_eq!(
            elements,
            ["/bin/echo", "--", hostile, "fixed", "3", "false"],
            "{hostile:?}"
        );
    }
}

#[test]
fn integers_and_booleans_become_their_text() {
    let elements = built("echo", json!({"text": "t", "count": 42, "flag": true})).unwrap();
    assert_eq!(elements[4..], ["42", "true"]);
    let max = built("echo", json!({"text": "t", "count": u64::MAX})).unwrap();
    assert_eq!(max[4], u64::MAX.to_string());
    let found = built("echo", json!({"text": "t", "count": 1.5})).unwrap_err();
    assert!(
        found[0].starts_with("`count`: must be an integer"),
        "{found:?}"
    );
    let found = built("echo", json!({"text": "t", "count": "4"})).unwrap_err();
    assert!(
        found[0].starts_with("`count`: must be an integer"),
        "{found:?}"
    );
    let found = built("echo", json!({"text": 4, "flag": "true"})).unwrap_err();
    assert_eq!(found.len(), 2, "{found:?}");
}

#[test]
fn a_nul_a_leading_dash_or_a_line_break_is_refused_unless_allowed() {
    for (text, said) in [
        ("a\0b", "NUL"),
        ("-rf", "must not start with `-`"),
        ("--output=/etc/passwd", "must not start with `-`"),
        ("line\nbreak", "line break"),
        ("carriage\rreturn", "line break"),
    ] {
        let found = built("echo", json!({ "text": text })).unwrap_err();
        assert!(found[0].starts_with("`text`: "), "{found:?}");
        assert!(found[0].contains(said), "{text:?}: {found:?}");
    }
    let found = built("echo", json!({"text": "t", "count": -5})).unwrap_err();
    assert!(found[0].contains("must not start with `-`"), "{found:?}");
    // Allowed where the parameter says so, still one element each.
    let elements = built("relaxed", json!({"text": "-n\nx", "offset": -5})).unwrap();
    assert_eq!(elements, ["/bin/echo", "-n\nx", "-5"]);
    // A NUL never is.
    let found = built("relaxed", json!({"text": "-\0", "offset": 1})).unwrap_err();
    assert!(found[0].contains("NUL"), "{found:?}");
}

#[test]
fn a_value_outside_its_schema_is_refused_by_the_schema() {
    let found = built("echo", json!({"text": "x".repeat(201)})).unwrap_err();
    assert!(
        found[0].starts_with("`text`: must be at most 200"),
        "{found:?}"
    );
    assert!(built("choice", json!({"level": "high"})).is_ok());
    let found = built("choice", json!({"level": "low; reboot"})).unwrap_err();
    assert!(found[0].contains("one of"), "{found:?}");
}

#[test]
fn an_unknown_or_missing_parameter_is_refused_naming_it() {
    let found = built("echo", json!({})).unwrap_err();
    assert_eq!(found, ["`text`: is required"]);
    let found = built(
        "echo",
        json!({"text": "t", "argv": ["/bin/sh"], "shell": true}),
    )
    .unwrap_err();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0]
            .starts_with("`argv`: `echo` has no such parameter; its parameters: text, count, flag")
    );
    assert!(found[1].starts_with("`shell`: "));
    let commands = Commands::parse("[commands.bare]\nargv = [\"/bin/true\"]\n").unwrap();
    let found = (commands.get("bare").unwrap())
        .argv(&args(json!({"x": 1})))
        .unwrap_err();
    assert!(found[0].ends_with("it has none"), "{found:?}");
}

#[test]
fn the_argv_names_the_command_it_was_built_for() {
    let argv = spec("choice").argv(&args(json!({"level": "low"}))).unwrap();
    assert_eq!(argv.command(), "choice");
}

proptest! {
    #[test]
    fn a_string_value_is_exactly_one_element_or_refused(text in "\\PC*|[ -~\\n\\r\\t\\x00-]{0,40}") {
        let spec = spec("echo");
        let template_len = spec.template.len();
        match spec.argv(&args(json!({ "text": text }))) {
            Ok(argv) => {
                prop_assert_eq!(argv.elements().len(), template_len);
                prop_assert_eq!(&argv.elements()[2], &text);
                prop_assert!(!text.contains('\0') && !text.contains(['\n', '\r']));
                prop_assert!(!text.starts_with('-'));
            }
            Err(problems) => {
                let refused = text.contains('\0')
                    || text.contains(['\n', '\r'])
                    || text.starts_with('-')
                    || text.encode_utf16().count() > 200;
                prop_assert!(refused, "{:?}: {:?}", text, problems);
            }
        }
    }

    #[test]
    fn a_relaxed_value_is_one_element_whatever_it_holds(text in "[^\\x00]{0,60}") {
        let argv = spec("relaxed")
            .argv(&args(json!({ "text": text, "offset": 0 })))
            .unwrap();
        prop_assert_eq!(argv.elements(), [
            "/bin/echo".to_owned(), text.clone(), "0".to_owned()
        ]);
    }

    #[test]
    fn an_argv_item_is_a_placeholder_only_when_it_is_one_whole(
        item in "[{}a-z_ 0-9=-]{0,12}|\\{[a-z_][a-z0-9_]{0,8}\\}"
    ) {
        let inner = item.strip_prefix('{').and_then(|rest| rest.strip_suffix('}'));
        let whole = inner.filter(|name| {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
        match (element(&item), whole) {
            (Ok(Element::Param(name)), Some(whole)) => prop_assert_eq!(name, whole),
            (Ok(Element::Fixed(text)), None) => {
                // Fixed text holds no `{name}` of a parameter a value could fill.
                prop_assert_eq!(&text, &item);
                let embedded = (0..text.len()).filter(|&at| text[at..].starts_with('{')).any(|at| {
                    text[at + 1..].find('}').is_some_and(|end| {
                        let name = &text[at + 1..at + 1 + end];
                        !name.is_empty()
                            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    })
                });
                prop_assert!(!embedded, "{:?}", text);
            }
            (Err(_), None) => {
                let braced = item.contains('{') && item.contains('}');
                prop_assert!(braced, "{:?}", item);
            }
            (found, whole) => prop_assert!(false, "{:?}: {:?} for {:?}", item, found, whole),
        }
    }

    #[test]
    fn a_value_for_no_parameter_is_always_refused_naming_it(
        key in "[a-z_]{1,12}",
        value in prop_oneof![Just(json!("v")), Just(json!(1)), Just(json!(true))],
    ) {
        prop_assume!(!["text", "count", "flag"].contains(&key.as_str()));
        let mut given = args(json!({ "text": "t" }));
        given.insert(key.clone(), value);
        let problems = spec("echo").argv(&given).unwrap_err();
        let named = format!("`{key}`: `echo` has no such parameter");
        prop_assert!(problems.iter().any(|p| p.starts_with(&named)), "{:?}", problems);
    }

    #[test]
    fn an_integer_is_its_decimal_text(n in any::<i64>()) {
        match spec("relaxed").argv(&args(json!({ "text": "t", "offset": n }))) {
            Ok(argv) => prop_assert_eq!(&argv.elements()[2], &n.to_string()),
            Err(problems) => prop_assert!(false, "{}: {:?}", n, problems),
        }
    }
}
