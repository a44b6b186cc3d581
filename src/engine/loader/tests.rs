//! Tests of the loader: every structural problem, with its location.

use super::*;
use crate::engine::definition::{OnFailure, ResultForm, TaskSupport, Trigger};
use serde_json::json;

const FULL: &str = r#"
name = "release_checklist"
description = "Prepare a release"
expose_as_tool = true
max_parallel = 4
timeout = "10m"

[inputs.title]
type = "string"
description = "What to release"
required = true

[inputs.level]
type = "string"
default = "minor"
enum = ["major", "minor", "patch"]

[nodes.create]
description = "Make the task"
tool = "add_task"
args = { title = "Release {{ inputs.title }}", tags = ["release"], count = 0x10 }
timeout = "30s"
retry = { max_attempts = 3, initial_delay = "200ms", max_delay = "5s", factor = 1.5, jitter = true }

[nodes.note]
render = "Created {{ nodes.create.output }}"
needs = ["create"]
when = "inputs.title != ''"
trigger = "all_done"
on_failure = "continue"

[nodes.save]
write_file = { path = "notes/{{ inputs.title }}.md", content = "x", overwrite = true }
needs = ["note"]
for_each = "inputs.level"

[nodes.pause]
wait = "1m30s"

[nodes.ask]
input = { message = "Go?", schema = { type = "object", properties = { ok = { type = "boolean" } } }, default = { ok = true } }

[nodes.summarize]
sample = { prompt = "Summarize", system = "Be brief", max_tokens = 500 }

[output]
todo = "nodes.create.output"
"#;

fn problems(text: &str) -> Vec<String> {
    match parse_toml("wf/x.toml", "x", text) {
        Ok(def) => panic!("expected problems, decoded {def:?}"),
        Err(problems) => problems.0.iter().map(ToString::to_string).collect(),
    }
}

/// The definition `text` decodes to, which must have no problem.
fn decoded(text: &str) -> WorkflowDef {
    parse_toml("t.toml", "t", text).unwrap_or_else(|problems| panic!("{problems}"))
}

/// Asserts that each needle is part of one of the problems found.
pub(crate) fn assert_reported(problems: &[String], needles: &[&str]) {
    for needle in needles {
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "no problem contains {needle:?}:\n{}",
            problems.join("\n")
        );
    }
}

fn node(id: &str, action: ActionDef) -> NodeDef {
    NodeDef {
        id: id.to_owned(),
        description: String::new(),
        action,
        needs: vec![],
        when: None,
        trigger: Trigger::AllSuccess,
        on_failure: OnFailure::FailRun,
        timeout: None,
        for_each: None,
        retry: RetryPolicy::default(),
        repeat: None,
        phase: None,
    }
}

fn expected_nodes() -> IndexMap<String, NodeDef> {
    let args = json!({ "title": "Release {{ inputs.title }}", "tags": ["release"], "count": 16 });
    let create = NodeDef {
        description: "Make the task".into(),
        timeout: Some(Duration::from_secs(30)),
        retry: RetryPolicy {
            max_attempts: 3,
            initial_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
            factor: 1.5,
            jitter: true,
        },
        ..node(
            "create",
            ActionDef::Tool {
                name: "add_task".into(),
                args,
            },
        )
    };
    let note = NodeDef {
        needs: vec!["create".into()],
        when: Some("inputs.title != ''".into()),
        trigger: Trigger::AllDone,
        on_failure: OnFailure::Continue,
        ..node(
            "note",
            ActionDef::Render {
                template: "Created {{ nodes.create.output }}".into(),
            },
        )
    };
    let save = NodeDef {
        needs: vec!["note".into()],
        for_each: Some("inputs.level".into()),
        ..node(
            "save",
            ActionDef::WriteFile {
                path: "notes/{{ inputs.title }}.md".into(),
                content: "x".into(),
                overwrite: true,
            },
        )
    };
    [create, note, save]
        .into_iter()
        .chain(expected_interactive_nodes())
        .map(|node| (node.id.clone(), node))
        .collect()
}

fn expected_interactive_nodes() -> [NodeDef; 3] {
    let pause = node(
        "pause",
        ActionDef::Wait {
            duration: Duration::from_secs(90),
        },
    );
    let ask = node(
        "ask",
        ActionDef::Input {
            message: "Go?".into(),
            schema: json!({ "type": "object", "properties": { "ok": { "type": "boolean" } } }),
            default: Some(json!({ "ok": true })),
        },
    );
    let summarize = node(
        "summarize",
        ActionDef::Sample {
            prompt: "Summarize".into(),
            system: Some("Be brief".into()),
            max_tokens: Some(500),
            person: true,
        },
    );
    [pause, ask, summarize]
}

fn expected_inputs() -> IndexMap<String, InputDef> {
    let title = InputDef {
        kind: ValueType::String,
        description: "What to release".into(),
        required: true,
        default: None,
        choices: None,
    };
    let level = InputDef {
        kind: ValueType::String,
        description: String::new(),
        required: false,
        default: Some(json!("minor")),
        choices: Some(vec![json!("major"), json!("minor"), json!("patch")]),
    };
    IndexMap::from([("title".into(), title), ("level".into(), level)])
}

#[test]
fn a_full_example_decodes_to_the_expected_definition() {
    let def = parse_toml("wf/release.toml", "release", FULL).unwrap();
    assert_eq!(def.name, "release_checklist");
    assert_eq!(def.description, "Prepare a release");
    assert!(def.expose_as_tool);
    assert_eq!(def.max_parallel, 4);
    assert_eq!(def.timeout, Some(Duration::from_secs(600)));
    assert_eq!(def.inputs, expected_inputs());
    assert_eq!(def.nodes, expected_nodes());
    let output = IndexMap::from([("todo".to_owned(), "nodes.create.output".to_owned())]);
    assert_eq!(def.output, output);
    assert_eq!(&*def.locations.source, "wf/release.toml");
}

#[test]
fn every_field_location_is_recorded_by_dotted_path() {
    let def = parse_toml("wf/release.toml", "release", FULL).unwrap();
    let at = |path: &str| def.locations.by_path.get(path).copied();
    assert_eq!(at("inputs"), Some((8, 2)));
    assert_eq!(at("inputs.title"), Some((8, 9)));
    assert_eq!(at("inputs.title.type"), Some((9, 8)));
    assert_eq!(at("nodes.create"), Some((18, 8)));
    assert_eq!(at("nodes.create.tool"), Some((20, 8)));
    assert_eq!(at("nodes.create.args"), Some((21, 1)));
    assert_eq!(at("nodes.create.args.tags[0]"), Some((21, 56)));
    assert_eq!(at("nodes.create.retry.factor"), Some((23, 81)));
    assert_eq!(at("output.todo"), Some((47, 8)));
}

#[test]
fn defaults_apply_when_fields_are_absent() {
    let def = parse_toml("wf/tiny.toml", "tiny", "[nodes.a]\nrender = 'hi'\n").unwrap();
    assert_eq!(def.name, "tiny");
    assert_eq!(def.max_parallel, DEFAULT_MAX_PARALLEL);
    assert_eq!(
        (def.description.as_str(), def.expose_as_tool, def.timeout),
        ("", false, None)
    );
    assert_eq!(
        def.nodes["a"],
        node(
            "a",
            ActionDef::Render {
                template: "hi".into()
            }
        )
    );
    let def = decoded("[nodes.a]\ntool = 'list'\n");
    let empty = ActionDef::Tool {
        name: "list".into(),
        args: json!({}),
    };
    assert_eq!(def.nodes["a"].action, empty);
}

#[test]
fn several_problems_are_reported_together_with_line_and_column() {
    let text =
        "name = \"Bad-Name\"\nmax_parallel = 0\n\n[nodes.a]\ntool = 5\ntrigger = \"sometimes\"\n";
    let found = problems(text);
    assert_eq!(
        found,
        [
            "wf/x.toml:1:8: name: invalid name `Bad-Name`: must match [a-z][a-z0-9_]{0,63}",
            "wf/x.toml:2:16: max_parallel: must be between 1 and 4294967295, got 0",
            "wf/x.toml:5:8: nodes.a.tool: expected a string, found an integer",
            "wf/x.toml:6:11: nodes.a.trigger: unknown value `sometimes`; expected one of \
             all_success, all_done, one_success, none_failed",
        ]
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    let text = "description = \"été\"\nbogus = 1\n[nodes.a] # é\ntool = 't'\n\
                args = { t = \"é\", u = 2026-01-01 }\n";
    let found = problems(text);
    assert_eq!(
        found,
        [
            "wf/x.toml:2:9: bogus: unknown key `bogus`; allowed keys: name, description, \
             prompt, expose_as_tool, task_support, ask_before_task, result, max_parallel, \
             timeout, inputs, nodes, output",
            "wf/x.toml:5:23: nodes.a.args.u: datetimes are not allowed; quote the value to \
             make it a string",
        ]
    );
}

#[test]
fn unknown_keys_are_reported_at_every_level_with_the_allowed_keys() {
    let text = r#"
colour = "red"
[inputs.a]
type = "string"
optional = true
[nodes.a]
tool = "t"
retries = 3
retry = { attempts = 2 }
[nodes.b]
write_file = { path = "p", content = "c", mode = "0644" }
[nodes.c]
input = { message = "m", title = "t" }
[nodes.d]
sample = { prompt = "p", temperature = 0.5 }
"#;
    let found = problems(text);
    assert_reported(
        &found,
        &[
            "wf/x.toml:2:10: colour: unknown key `colour`; allowed keys: name, description,",
            "inputs.a.optional: unknown key `optional`; allowed keys: type, description, required, default, enum",
            "nodes.a.retries: unknown key `retries`; allowed keys: description, tool, args,",
            "nodes.a.retry.attempts: unknown key `attempts`; allowed keys: max_attempts,",
            "nodes.b.write_file.mode: unknown key `mode`; allowed keys: path, content, overwrite",
            "nodes.c.input.title: unknown key `title`; allowed keys: message, schema, default",
            "nodes.d.sample.temperature: unknown key `temperature`; allowed keys: prompt, system, max_tokens, person",
        ],
    );
    assert_eq!(found.len(), 7, "{found:#?}");
}

#[test]
fn wrong_types_name_what_was_expected_and_found() {
    let text = r#"
description = 3
expose_as_tool = "yes"
max_parallel = 2.5
output = { a = 1 }
[inputs]
a = "string"
[nodes.a]
render = "x"
needs = "b"
when = true
[nodes.b]
render = "x"
needs = ["a", 2]
retry = { factor = "2", jitter = 1 }
[nodes.c]
tool = "t"
args = [1]
"#;
    let found = problems(text);
    assert_reported(
        &found,
        &[
            "description: expected a string, found an integer",
            "expose_as_tool: expected a boolean (true or false), found a string",
            "max_parallel: expected an integer, found a float",
            "output.a: expected a string, found an integer",
            "inputs.a: expected a table, found a string",
            "nodes.a.needs: expected an array of strings, found a string",
            "nodes.a.when: expected a string, found a boolean",
            "wf/x.toml:14:15: nodes.b.needs[1]: expected a string, found an integer",
            "nodes.b.retry.factor: expected a number, found a string",
            "nodes.b.retry.jitter: expected a boolean (true or false), found an integer",
            "nodes.c.args: expected a table, found an array",
        ],
    );
    assert_eq!(found.len(), 11, "{found:#?}");
}

#[test]
fn missing_required_keys_are_reported_at_their_table() {
    let text = "[inputs.a]\ndescription = 'x'\n[nodes.a]\nwrite_file = { overwrite = true }\n\
                [nodes.b]\ninput = {}\n[nodes.c]\nsample = { system = 's' }\n";
    let found = problems(text);
    assert_reported(
        &found,
        &[
            "wf/x.toml:1:9: inputs.a: missing required key `type`",
            "wf/x.toml:4:1: nodes.a.write_file: missing required key `path`",
            "nodes.a.write_file: missing required key `content`",
            "nodes.b.input: missing required key `message`",
            "nodes.c.sample: missing required key `prompt`",
        ],
    );
    assert_eq!(found.len(), 5, "{found:#?}");
    assert_reported(
        &problems("name = 'x'\n"),
        &["wf/x.toml: missing required key `nodes`"],
    );
    assert_reported(
        &problems("nodes = {}\n"),
        &["nodes: a workflow needs at least one node"],
    );
}

#[test]
fn a_node_needs_exactly_one_action() {
    let found =
        problems("[nodes.a]\nneeds = []\n[nodes.b]\ntool = 't'\nrender = 'r'\nwait = '1s'\n");
    assert_reported(
        &found,
        &[
            "wf/x.toml:1:8: nodes.a: the node has no action: give exactly one of `tool`, `render`, \
         `write_file`, `wait`, `input`, `sample`",
            "wf/x.toml:3:8: nodes.b: the node has more than one action (`tool`, `render`, `wait`): \
         give exactly one",
        ],
    );
}

#[test]
fn args_without_tool_are_refused() {
    let found = problems("[nodes.a]\nrender = 'r'\nargs = { x = 1 }\n");
    assert_eq!(
        found,
        ["wf/x.toml:3:1: nodes.a.args: `args` goes with `tool`, and this node has no `tool`"]
    );
}

#[test]
fn bad_names_and_ids_are_refused() {
    let found = problems(
        "name = '1abc'\n[inputs.'my-input']\ntype = 'string'\n[nodes.Create]\nrender = 'r'\n",
    );
    assert_reported(
        &found,
        &[
            "name: invalid name `1abc`: must match [a-z][a-z0-9_]{0,63}",
            "inputs.my-input: invalid input name `my-input`",
            "wf/x.toml:4:8: nodes.Create: invalid node id `Create`",
        ],
    );
    let long = format!("[nodes.{}]\nrender = 'r'\n", "a".repeat(65));
    assert_reported(&problems(&long), &["invalid node id"]);
    let error = parse_toml("wf/My Flow.toml", "My Flow", "[nodes.a]\nrender = 'r'\n").unwrap_err();
    assert_eq!(
        error.to_string(),
        "wf/My Flow.toml: the file name makes the workflow name `My Flow`, which does not \
         match [a-z][a-z0-9_]{0,63}; set `name`"
    );
    assert!(
        parse_toml(
            "wf/My Flow.toml",
            "My Flow",
            "name = 'ok'\n[nodes.a]\nrender = 'r'\n"
        )
        .is_ok()
    );
}

#[test]
fn bad_enum_values_list_the_allowed_ones() {
    let found =
        problems("[inputs.a]\ntype = 'text'\n[nodes.a]\nrender = 'r'\non_failure = 'ignore'\n");
    assert_reported(
        &found,
        &[
            "wf/x.toml:2:8: inputs.a.type: unknown value `text`; expected one of string, integer, \
         number, boolean, array, object",
        ],
    );
    assert_reported(
        &found,
        &["nodes.a.on_failure: unknown value `ignore`; expected one of fail_run, continue"],
    );
    assert_reported(
        &problems("[inputs.a]\ntype = 'string'\nenum = []\n[nodes.a]\nrender = 'r'\n"),
        &["inputs.a.enum: `enum` needs at least one value"],
    );
}

#[test]
fn bad_durations_say_the_accepted_form() {
    let text = "timeout = '10'\n[nodes.a]\nwait = '1x'\n[nodes.b]\nrender = 'r'\ntimeout = '0s'\n\
                retry = { initial_delay = '-1s' }\n";
    let found = problems(text);
    assert_reported(
        &found,
        &[
            "wf/x.toml:1:11: timeout: invalid duration `10`: expected a number followed by a unit",
            "nodes.a.wait: invalid duration `1x`",
            "nodes.b.timeout: a timeout must be longer than 0s",
            "nodes.b.retry.initial_delay: invalid duration `-1s`",
        ],
    );
    assert_eq!(found.len(), 4, "{found:#?}");
}

#[test]
fn out_of_range_numbers_are_refused() {
    let text = "max_parallel = -1\n[nodes.a]\nrender = 'r'\n\
                retry = { max_attempts = 101, factor = 0.5, initial_delay = '2s', max_delay = '1s' }\n\
                [nodes.b]\nsample = { prompt = 'p', max_tokens = 0 }\n[nodes.c]\nrender = 'r'\nretry = { max_attempts = 0 }\n";
    let found = problems(text);
    assert_reported(
        &found,
        &[
            "max_parallel: must be between 1 and 4294967295, got -1",
            "nodes.a.retry.max_attempts: must be between 1 and 100, got 101",
            "nodes.a.retry.factor: must be between 1.0 and 1000.0, got 0.5",
            "nodes.a.retry.max_delay: max_delay (1s) must be at least initial_delay (2s)",
            "nodes.b.sample.max_tokens: must be between 1 and 4294967295, got 0",
            "nodes.c.retry.max_attempts: must be between 1 and 100, got 0",
        ],
    );
    let big = problems("max_parallel = 18446744073709551615\n[nodes.a]\nrender = 'r'\n");
    assert_reported(&big, &["max_parallel:"]);
    let found = problems("[nodes.a]\nrender = 'r'\nretry = { initial_delay = '1m' }\n");
    assert_reported(
        &found,
        &["nodes.a.retry.max_delay: max_delay (30s) must be at least initial_delay (1m)"],
    );
}

#[test]
fn toml_datetimes_are_refused() {
    let found = problems("[nodes.a]\ntool = 't'\nargs = { due = 2026-01-02, at = 12:00:00 }\n");
    assert_eq!(
        found,
        [
            "wf/x.toml:3:16: nodes.a.args.due: datetimes are not allowed; quote the value to make it a string",
            "wf/x.toml:3:33: nodes.a.args.at: datetimes are not allowed; quote the value to make it a string",
        ]
    );
    let found = problems("timeout = 1979-05-27T07:32:00Z\n[nodes.a]\nrender = 'r'\n");
    assert_eq!(found.len(), 1, "{found:#?}");
}

#[test]
fn toml_numbers_become_json_numbers() {
    let text = "[nodes.a]\ntool = 't'\nargs = { a = 1_000, b = -5, c = 0o17, d = 2.5e3, e = 0b101, f = 1.0 }\n";
    let def = decoded(text);
    let ActionDef::Tool { args, .. } = &def.nodes["a"].action else {
        panic!("not a tool");
    };
    assert_eq!(
        args,
        &json!({ "a": 1000, "b": -5, "c": 15, "d": 2500.0, "e": 5, "f": 1.0 })
    );
    let found = problems("[nodes.a]\ntool = 't'\nargs = { x = nan, y = -inf }\n");
    assert_reported(
        &found,
        &[
            "nodes.a.args.x: only finite numbers are allowed, not nan",
            "nodes.a.args.y: only finite numbers are allowed, not -inf",
        ],
    );
}

#[test]
fn input_schemas_must_be_flat_objects() {
    let text = "[nodes.a]\ninput = { message = 'm', schema = { type = 'object', properties = { \
                who = { type = 'object' }, n = 3 } } }\n[nodes.b]\ninput = { message = 'm', schema = { type = 'string' } }\n";
    let found = problems(text);
    assert_reported(
        &found,
        &[
            "nodes.a.input.schema.properties.who: an input schema must be flat",
            "nodes.a.input.schema.properties.n: expected a table, found an integer",
            "nodes.b.input.schema.type: an input schema must have type \"object\"",
        ],
    );
    let def = decoded("[nodes.a]\ninput = { message = 'Go?' }\n");
    let ActionDef::Input {
        schema, default, ..
    } = &def.nodes["a"].action
    else {
        panic!("not an input");
    };
    assert_eq!(
        (schema, default),
        (&json!({ "type": "object", "properties": {} }), &None)
    );
}

#[test]
fn input_schemas_are_forms_a_client_can_render_and_every_fault_is_reported() {
    let good = r#"
        [nodes.a]
        input.message = "Pick"
        input.schema.type = "object"
        input.schema.required = ["choice"]
        input.schema.properties.choice = { type = "string", enum = ["a", "b"], enumNames = ["A", "B"] }
        input.schema.properties.mail = { type = "string", format = "email", maxLength = 80 }
        input.schema.properties.count = { type = "integer", minimum = 1, maximum = 9, default = 3 }
        input.schema.properties.ratio = { type = "number", default = 0.5 }
        input.schema.properties.ok = { type = "boolean", default = true, title = "OK?" }
    "#;
    decoded(good);
    let bad = r#"
        [nodes.a]
        input.message = "Pick"
        input.schema.required = ["missing"]
        input.schema.properties.tags = { type = "array", items = { type = "string" } }
        input.schema.properties.mail = { type = "string", format = "phone" }
        input.schema.properties.count = { type = "integer", default = "three" }
        input.schema.properties.pick = { type = "string", enum = [1, "b"] }
        input.schema.properties.vague = { title = "no type" }
        input.schema.properties.flag = { type = "boolean", minimum = 0 }
    "#;
    let found = problems(bad);
    assert_reported(
        &found,
        &[
            "nodes.a.input.schema.required[0]: no property `missing` to require",
            "nodes.a.input.schema.properties.tags.items: a list's `items` need an `enum` of strings",
            "nodes.a.input.schema.properties.mail.format: unknown format `phone`",
            "nodes.a.input.schema.properties.count.default: expected a default of type integer",
            "nodes.a.input.schema.properties.pick.enum[0]: expected a string, found an integer",
            "nodes.a.input.schema.properties.vague.type: a property needs a `type`",
            "nodes.a.input.schema.properties.flag.minimum: unknown key `minimum`",
        ],
    );
}

#[test]
fn a_syntax_error_is_one_problem_at_its_location() {
    let error = parse_toml("wf/x.toml", "x", "name = 'x'\n[nodes.a\nrender = 'r'\n").unwrap_err();
    assert_eq!(error.0.len(), 1, "{error}");
    let location = &error.0[0].location;
    assert_eq!((location.line, location.column), (2, 9), "{error}");
    assert!(error.0[0].message.starts_with("invalid TOML: "), "{error}");
}

#[test]
fn a_duplicate_table_is_named_at_its_second_definition() {
    let text = "[nodes.a]\nrender = 'x'\n\n[nodes.a]\nrender = 'y'\n";
    let error = parse_toml("wf/x.toml", "x", text).unwrap_err();
    assert_eq!(
        error.to_string(),
        "wf/x.toml:4:8: invalid TOML: table `[nodes.a]` is defined twice"
    );
    let error =
        parse_toml("wf/x.toml", "x", "[nodes.a]\nrender = 'x'\nrender = 'y'\n").unwrap_err();
    assert_eq!(
        error.to_string(),
        "wf/x.toml:3:1: invalid TOML: key `render` is defined twice"
    );
}

#[test]
fn inline_json_decodes_the_same_schema() {
    let value = json!({
        "inputs": { "title": { "type": "string", "required": true } },
        "nodes": {
            "create": { "tool": "add_task", "args": { "title": "{{ inputs.title }}" } },
            "note": { "render": "done", "needs": ["create"], "retry": { "max_attempts": 2, "factor": 3 } }
        },
        "output": { "todo": "nodes.create.output" }
    });
    let def = parse_json(&value).unwrap();
    assert_eq!(def.name, "inline");
    assert_eq!(&*def.locations.source, "inline");
    assert!(def.locations.by_path.is_empty());
    assert_eq!(def.nodes["note"].needs, ["create"]);
    assert_eq!(def.nodes["note"].retry.max_attempts, 2);
    assert_eq!(def.nodes["note"].retry.factor, 3.0);
    assert_eq!(def.output["todo"], "nodes.create.output");
}

#[test]
fn inline_json_problems_carry_the_dotted_path() {
    let value = json!({
        "name": "demo",
        "nodes": {
            "a": { "tool": "t", "args": "x", "timeout": "soon" },
            "b": { "render": "r", "needs": [null], "extra": 1 }
        }
    });
    let error = parse_json(&value).unwrap_err();
    let found: Vec<String> = error.0.iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        [
            "inline: nodes.a.args: expected an object, found a string",
            "inline: nodes.a.timeout: invalid duration `soon`: expected a number followed by a \
             unit (ms, s, m or h), like `200ms`, `30s`, `1.5s` or `1m30s`",
            "inline: nodes.b.extra: unknown key `extra`; allowed keys: description, tool, args, \
             render, write_file, wait, input, sample, value, list_dir, read_file, workflow, \
             command, history, phase, needs, when, trigger, on_failure, timeout, for_each, retry, \
             repeat",
            "inline: nodes.b.needs[0]: expected a string, found null",
        ]
    );
    assert!(
        error
            .0
            .iter()
            .all(|p| p.location.line == 0 && p.location.column == 0)
    );
    let error = parse_json(&json!([1])).unwrap_err();
    assert_eq!(
        error.to_string(),
        "inline: expected an object, found an array"
    );
}

#[test]
fn a_workflow_says_how_its_tool_runs_and_answers() {
    let text = r#"
task_support = "forbidden"
result = "text"
[nodes.hi]
render = "Hello, {{ inputs.name }}!"
[inputs.name]
type = "string"
[output]
text = "nodes.hi.output"
"#;
    let def = parse_toml("wf/greet.toml", "greet", text).unwrap();
    assert_eq!(def.task_support, TaskSupport::Forbidden);
    assert!(!def.ask_before_task);
    assert_eq!(def.result, ResultForm::Text);
    let plain = decoded("[nodes.a]\nrender = 'hi'\n");
    assert_eq!(
        (plain.task_support, plain.result),
        (TaskSupport::Optional, ResultForm::Envelope)
    );

    let found =
        problems("task_support = \"sometimes\"\nresult = \"xml\"\n[nodes.a]\nrender = 'x'\n");
    assert_reported(
        &found,
        &[
            "task_support: unknown value `sometimes`; expected one of",
            "result: unknown value `xml`; expected one of",
        ],
    );
}

#[test]
fn a_wait_given_by_a_template_is_read_when_its_node_runs() {
    let text = "[inputs.seconds]\ntype = \"number\"\n[nodes.a]\nwait = \"{{ inputs.seconds }}s\"\n";
    let def = parse_toml("wf/slow.toml", "slow", text).unwrap();
    assert_eq!(
        def.nodes["a"].action,
        ActionDef::WaitFor {
            duration: "{{ inputs.seconds }}s".into()
        }
    );
}

#[test]
fn a_form_may_offer_titled_and_multiple_choices_and_every_fault_is_reported() {
    let good = r#"
        [nodes.a]
        input.message = "Pick"
        input.schema.properties.one = { type = "string", oneOf = [{ const = "a", title = "A" }] }
        input.schema.properties.many = { type = "array", items = { type = "string", enum = ["x", "y"] }, default = ["y"], maxItems = 2 }
        input.schema.properties.titled = { type = "array", items = { anyOf = [{ const = "v", title = "V" }] } }
    "#;
    decoded(good);
    let bad = r#"
        [nodes.a]
        input.message = "Pick"
        input.schema.properties.one = { type = "string", oneOf = [{ title = "no const" }] }
        input.schema.properties.numbers = { type = "array", items = { type = "number", enum = ["1"] } }
        input.schema.properties.bare = { type = "array" }
        input.schema.properties.wrong = { type = "array", items = { enum = ["x"] }, default = ["z"] }
        input.schema.properties.nested = { type = "object" }
    "#;
    let found = problems(bad);
    assert_reported(
        &found,
        &[
            "nodes.a.input.schema.properties.one.oneOf[0].const: a choice needs a string `const`",
            "nodes.a.input.schema.properties.numbers.items.type: the items of a list are strings",
            "nodes.a.input.schema.properties.bare.items: a list needs `items`",
            "nodes.a.input.schema.properties.wrong.default[0]: \"z\" is not a choice",
            "nodes.a.input.schema.properties.nested: an input schema must be flat",
        ],
    );
}

#[test]
fn a_workflows_prompt_is_its_own_text_and_nothing_else() {
    let def = decoded("name = \"w\"\nprompt = \"Plan it with me.\"\n[nodes.a]\nrender = \"a\"\n");
    assert_eq!(def.prompt.as_deref(), Some("Plan it with me."));
    let refused = parse_toml(
        "w.toml",
        "w",
        "name = \"w\"\nprompt = 3\n[nodes.a]\nrender = \"a\"\n",
    );
    let problems = refused.unwrap_err().to_string();
    assert!(problems.contains("prompt"), "{problems}");
}

#[test]
fn a_command_node_decodes_its_name_and_args_and_refuses_anything_else() {
    let def = decoded(
        r#"
[nodes.build]
command = { name = "build", args = { target = "{{ inputs.t }}", n = 3 } }
[nodes.bare]
command = { name = "lint" }
"#,
    );
    assert_eq!(
        def.nodes["build"].action,
        ActionDef::Command {
            name: "build".into(),
            args: json!({ "target": "{{ inputs.t }}", "n": 3 }),
        }
    );
    assert_eq!(def.nodes["bare"].action.kind(), "command");
    let found = problems(
        r#"
[nodes.a]
command = { args = { x = 1 } }
[nodes.b]
command = { name = "Build Now", argv = ["/bin/sh", "-c", "id"] }
[nodes.c]
command = "build"
"#,
    );
    assert_reported(
        &found,
        &[
            "nodes.a.command: missing required key `name`",
            "nodes.b.command.name: invalid command name `Build Now`",
            "nodes.b.command.argv: unknown key `argv`; allowed keys: name, args",
            "nodes.c.command: expected a table",
        ],
    );
}

#[test]
fn a_history_node_reads_a_workflow_with_a_limit_statuses_and_a_where() {
    let text = r#"
        [nodes.past]
        history = { workflow = "deployment_readiness", limit = 5, status = ["failed", "cancelled"], where = "past.inputs.env == 'prod'" }
        [nodes.short]
        history = { workflow = "{{ inputs.flow }}", limit = "{{ inputs.n }}", status = "succeeded" }
        [nodes.plain]
        history.workflow = "release_checklist"
    "#;
    let def = decoded(text);
    assert_eq!(
        def.nodes["past"].action,
        ActionDef::History {
            workflow: "deployment_readiness".into(),
            limit: HistoryLimit::Fixed(5),
            status: vec![RunStatus::Failed, RunStatus::Cancelled],
            filter: Some("past.inputs.env == 'prod'".into()),
        }
    );
    assert_eq!(
        def.nodes["short"].action,
        ActionDef::History {
            workflow: "{{ inputs.flow }}".into(),
            limit: HistoryLimit::Template("{{ inputs.n }}".into()),
            status: vec![RunStatus::Succeeded],
            filter: None,
        }
    );
    assert_eq!(
        def.nodes["plain"].action,
        ActionDef::History {
            workflow: "release_checklist".into(),
            limit: HistoryLimit::Default,
            status: Vec::new(),
            filter: None,
        }
    );
    assert_eq!(def.nodes["plain"].action.kind(), "history");
    // The same in inline JSON.
    let inline = parse_json(&json!({
        "nodes": { "past": { "history": { "workflow": "w", "limit": 2, "where": "true" } } }
    }))
    .unwrap();
    assert!(matches!(
        inline.nodes["past"].action,
        ActionDef::History {
            limit: HistoryLimit::Fixed(2),
            ..
        }
    ));
}

#[test]
fn every_fault_of_a_history_node_is_reported_at_its_field() {
    let text = r#"
[nodes.a]
history = { limit = 0, status = ["failed", "done", "failed"], where = 3, since = "1d" }
[nodes.b]
history = { workflow = "Not A Name", limit = "ten", status = [] }
[nodes.c]
history = { workflow = "w", limit = 1.5, status = 7 }
[nodes.d]
history = "w"
"#;
    let found = problems(text);
    assert_reported(
        &found,
        &[
            "wf/x.toml:3:1: nodes.a.history: missing required key `workflow`",
            "wf/x.toml:3:21: nodes.a.history.limit: must be between 1 and 4294967295, got 0",
            "nodes.a.history.status[1]: unknown value `done`; expected one of succeeded, \
             failed, cancelled",
            "nodes.a.history.status[2]: `failed` is listed twice",
            "nodes.a.history.where: expected a string, found an integer",
            "nodes.a.history.since: unknown key `since`; allowed keys: workflow, limit, status, \
             where",
            "nodes.b.history.workflow: invalid workflow name `Not A Name`: must match",
            "nodes.b.history.limit: expected an integer, or a template, found a string",
            "nodes.b.history.status: `status` needs at least one of succeeded, failed, \
             cancelled; leave it out for runs of any status",
            "nodes.c.history.limit: expected an integer, found a float",
            "nodes.c.history.status: expected a string or an array of strings, found an integer",
            "nodes.d.history: expected a table, found a string",
        ],
    );
    assert_eq!(found.len(), 12, "{found:#?}");
}

#[test]
fn a_sample_lets_a_person_answer_unless_it_says_person_false() {
    let text = "name = \"t\"\n[nodes.a]\nsample = { prompt = \"p\" }\n\
                [nodes.b]\nsample = { prompt = \"p\", person = false }\n";
    let def = decoded(text);
    let person = |id: &str| match &def.nodes[id].action {
        ActionDef::Sample { person, .. } => *person,
        other => panic!("a sample, not {other:?}"),
    };
    assert!(person("a"), "a person may answer by default");
    assert!(!person("b"));
    let found = problems("name = \"t\"\n[nodes.a]\nsample = { prompt = \"p\", person = \"no\" }\n");
    assert_reported(
        &found,
        &["nodes.a.sample.person: expected a boolean (true or false), found a string"],
    );
}
