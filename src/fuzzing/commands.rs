//! The target of the operator's commands: a commands file read, and argvs built from it.

use serde_json::{Map, Value};

use super::parts;
use crate::engine::command::{Commands, Element};

/// How many commands of a file, and how many sets of values for each, are tried: enough
/// to reach every rule, few enough to keep an execution short.
const COMMANDS_TRIED: usize = 8;
const VALUE_SETS: usize = 8;

/// `commands_file`: reading any file never panics, and a refusal names a line for every
/// problem. A file that loads has only commands whose program is a fixed absolute path,
/// whose placeholders are whole elements naming declared parameters, each parameter used,
/// and no element a NUL. Building an argv from any values either refuses or gives one
/// element per element of the template: the fixed ones as written, each placeholder the
/// value's text exactly, never with a NUL, never a leading `-` or a line break the
/// parameter does not allow.
///
/// Input: the file, then a NUL, then candidate values, one a line (each tried as a string,
/// and as an integer or a boolean where it reads as one).
pub fn commands_file(data: &[u8]) {
    let parts = parts(data, 2);
    let text = String::from_utf8_lossy(parts[0]);
    let commands = match Commands::parse(&text) {
        Ok(commands) => commands,
        Err(problems) => {
            assert!(!problems.is_empty());
            for problem in &problems {
                assert!(problem.starts_with("line "), "no line: {problem}");
            }
            return;
        }
    };
    let lines = String::from_utf8_lossy(parts[1]);
    let mut candidates: Vec<Value> = Vec::new();
    for line in lines.split('\n') {
        candidates.push(Value::String(line.to_owned()));
        if let Ok(n) = line.parse::<i64>() {
            candidates.push(n.into());
        }
        if let Ok(flag) = line.parse::<bool>() {
            candidates.push(flag.into());
        }
    }
    candidates.extend(["", "-x", "a\0b", "a\nb"].map(Value::from));
    for name in commands.names().take(COMMANDS_TRIED) {
        let spec = commands.get(name).expect("a name it gives");
        check_template(spec);
        for set in 0..VALUE_SETS {
            let mut args = Map::new();
            for (index, param) in spec.param_names().enumerate() {
                // Each set gives each parameter another candidate; the last leaves it out.
                if set + 1 < VALUE_SETS {
                    let pick = (set * 7 + index * 3) % candidates.len();
                    args.insert(param.to_owned(), candidates[pick].clone());
                }
            }
            check_argv(spec, &args);
        }
    }
}

/// The template of a loaded command: a fixed absolute program, whole placeholders of
/// declared parameters, every parameter used, no NUL.
fn check_template(spec: &crate::engine::command::CommandSpec) {
    let template = &spec.template;
    match template.first() {
        Some(Element::Fixed(program)) => assert!(program.starts_with('/'), "{program}"),
        other => panic!("the program is {other:?}"),
    }
    for element in template {
        match element {
            Element::Fixed(text) => {
                assert!(!text.contains('\0'));
                let inner = text.find('{').and_then(|at| {
                    let end = text[at..].find('}')?;
                    let name = &text[at + 1..at + end];
                    let named = !name.is_empty()
                        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                    named.then_some(name)
                });
                assert_eq!(inner, None, "a placeholder inside {text:?}");
            }
            Element::Param(name) => assert!(spec.params.contains_key(name), "{name}"),
        }
    }
    for name in spec.params.keys() {
        assert!(
            template.contains(&Element::Param(name.clone())),
            "{name} unused"
        );
    }
}

/// An argv built from `args`: refused, or each element the template's or a value's text.
fn check_argv(spec: &crate::engine::command::CommandSpec, args: &Map<String, Value>) {
    let Ok(argv) = spec.argv(args) else {
        return;
    };
    assert_eq!(argv.command(), spec.name());
    let elements = argv.elements();
    assert_eq!(elements.len(), spec.template.len());
    for (element, built) in spec.template.iter().zip(elements) {
        assert!(!built.contains('\0'), "a NUL in {built:?}");
        let Element::Param(name) = element else {
            assert_eq!(Element::Fixed(built.clone()), *element);
            continue;
        };
        let param = &spec.params[name];
        let value = args.get(name).or(param.default.as_ref()).expect("a value");
        let text = match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        assert_eq!(*built, text, "the value of {name}");
        assert!(
            param.allow_leading_dash || !built.starts_with('-'),
            "{built:?}"
        );
        assert!(
            param.multiline || !built.contains(['\n', '\r']),
            "{built:?}"
        );
    }
}
