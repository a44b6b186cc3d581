//! Tests of the semantic checks, each problem at its location.

use super::*;
use crate::engine::loader::tests::assert_reported;
use crate::engine::loader::{parse_json, parse_toml};
use serde_json::json;

fn def(text: &str) -> WorkflowDef {
    parse_toml("wf/x.toml", "x", text).unwrap_or_else(|e| panic!("{e}"))
}

fn known(name: &str) -> bool {
    matches!(name, "add_task" | "list_tasks")
}

fn problems(text: &str) -> Vec<String> {
    match validate(&def(text), &known, Limits::FILE) {
        Ok(()) => panic!("expected problems"),
        Err(problems) => problems.0.iter().map(ToString::to_string).collect(),
    }
}

const VALID: &str = r#"
[inputs.title]
type = "string"
required = true
[inputs.count]
type = "integer"
default = 2
enum = [1, 2, 3]

[nodes.plan]
tool = "list_tasks"
args = { limit = "{{ inputs.count }}", tags = ["{{ run.id }}", "x"] }

[nodes.create]
tool = "add_task"
args = { title = "Release {{ inputs.title }} {{ nodes.plan.status }}" }
needs = ["plan"]
when = "inputs.title != ''"

[nodes.each]
render = "{{ index }}: {{ item.title }} after {{ nodes.plan.output | length }}"
needs = ["create"]
for_each = "nodes.plan.output.items"

[nodes.note]
write_file = { path = "notes/{{ inputs.title }}.md", content = "{% for t in nodes.each.output %}{{ t }}{% endfor %}" }
needs = ["each"]

[output]
todo = "nodes.create.output"
all = "[nodes.each.output, range(3), inputs]"
"#;

#[test]
fn a_consistent_workflow_passes() {
    validate(&def(VALID), &known, Limits::FILE).unwrap();
}

#[test]
fn an_unknown_tool_is_reported_at_the_tool_field() {
    let text = "\n[nodes.create]\ntool = \"add_tsk\"\n";
    let error = validate(&def(text), &known, Limits::FILE).unwrap_err();
    assert_eq!(
        error.to_string(),
        "wf/x.toml:3:8: nodes.create.tool: unknown tool `add_tsk`"
    );
}

#[test]
fn several_problems_print_one_per_line() {
    let text =
        "[nodes.a]\ntool = \"nope\"\n[nodes.b]\nrender = \"{{ inputs.x }}\"\nneeds = [\"zz\"]\n";
    let error = validate(&def(text), &known, Limits::FILE).unwrap_err();
    assert_eq!(
        error.to_string(),
        "wf/x.toml:2:8: nodes.a.tool: unknown tool `nope`\n\
         wf/x.toml:5:10: nodes.b.needs[0]: unknown node `zz`\n\
         wf/x.toml:4:10: nodes.b.render: unknown input `inputs.x`; this workflow declares no inputs"
    );
}

#[test]
fn too_many_nodes_are_refused() {
    let text = "[nodes.a]\nrender = 'a'\n[nodes.b]\nrender = 'b'\n[nodes.c]\nrender = 'c'\n";
    let limits = Limits {
        max_nodes: 2,
        ..Limits::FILE
    };
    let error = validate(&def(text), &known, limits).unwrap_err();
    assert_eq!(
        error.to_string(),
        "wf/x.toml:1:2: nodes: too many nodes: 3, at most 2 allowed"
    );
    validate(&def(text), &known, Limits::FILE).unwrap();
}

/// `count` independent plain nodes, inline.
fn inline_nodes(count: usize) -> WorkflowDef {
    let nodes: serde_json::Map<String, serde_json::Value> = (0..count)
        .map(|i| (format!("n{i}"), json!({ "render": "x" })))
        .collect();
    parse_json(&json!({ "nodes": nodes })).unwrap()
}

#[test]
fn inline_definitions_hold_at_most_1000_nodes_and_files_10000() {
    validate(&inline_nodes(1_000), &known, Limits::INLINE).unwrap();
    let error = validate(&inline_nodes(1_001), &known, Limits::INLINE).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("too many nodes: 1001, at most 1000 allowed"),
        "{error}"
    );
    validate(&inline_nodes(1_001), &known, Limits::FILE).unwrap();
    assert_eq!(Limits::FILE.max_nodes, 10_000);
}

#[test]
fn write_file_is_refused_inline_only() {
    let value = json!({ "nodes": { "w": { "write_file": { "path": "a", "content": "b" } } } });
    let inline = parse_json(&value).unwrap();
    let error = validate(&inline, &known, Limits::INLINE).unwrap_err();
    assert_eq!(
        error.to_string(),
        "inline: nodes.w.write_file: write_file is not allowed in inline definitions: they \
         never touch the host's files (run an installed workflow instead)"
    );
    validate(&inline, &known, Limits::FILE).unwrap();
}

#[test]
fn inline_reads_of_the_hosts_files_are_refused_every_node_named() {
    let value = json!({ "nodes": {
        "env": { "read_file": ".env" },
        "tokens": { "read_file": { "path": "tokens.txt", "max_bytes": 100 } },
        "fine": { "render": "x" },
        "look": { "list_dir": "." },
        "fan": { "for_each": "[1, 2]", "read_file": "{{ item }}.txt" },
        "later": { "needs": ["fine"], "list_dir": "secrets" },
    } });
    let inline = parse_json(&value).unwrap();
    let error = validate(&inline, &known, Limits::INLINE).unwrap_err();
    let mut paths: Vec<&str> = error.0.iter().map(|p| p.location.path.as_str()).collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        [
            "nodes.env.read_file",
            "nodes.fan.read_file",
            "nodes.later.list_dir",
            "nodes.look.list_dir",
            "nodes.tokens.read_file",
        ],
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("nodes.env.read_file: read_file is not allowed in inline definitions"),
        "{error}"
    );
    // The operator's own workflows keep every action.
    validate(&inline, &known, Limits::FILE).unwrap();
}

#[test]
fn inline_command_nodes_are_refused_every_one_named_with_command_allowed() {
    let value = json!({ "nodes": {
        "build": { "command": { "name": "build", "args": { "target": "x; rm -rf ~" } } },
        "fine": { "render": "x" },
        "fan": { "for_each": "[1, 2]", "command": { "name": "lint", "args": { "n": "{{ item }}" } } },
        "probe": { "value": "command_allowed('deploy')" },
    } });
    let inline = parse_json(&value).unwrap();
    let error = validate(&inline, &known, Limits::INLINE).unwrap_err();
    let mut paths: Vec<&str> = error.0.iter().map(|p| p.location.path.as_str()).collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        [
            "nodes.build.command",
            "nodes.fan.command",
            "nodes.probe.value"
        ],
        "{error}"
    );
    let text = error.to_string();
    assert!(
        text.contains(
            "nodes.build.command: command (`build`) is not allowed in inline definitions: \
             a client never runs a program"
        ),
        "{text}"
    );
    assert!(
        text.contains("`command_allowed` is not available in inline definitions"),
        "{text}"
    );
    // The operator's own workflows run commands, and may ask which are allowed.
    validate(&inline, &known, Limits::FILE).unwrap();
}

#[test]
fn a_command_nodes_args_are_templates_checked_like_a_tools() {
    let found = problems(
        r#"
[nodes.build]
command = { name = "build", args = { target = "{{ inputs.nope }}", n = "{{ nodes.later.output }}" } }
[nodes.later]
render = "x"
needs = ["build"]
"#,
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].contains("nodes.build.command.args.target: unknown input"),
        "{found:?}"
    );
    assert!(
        found[1].contains("nodes.build.command.args.n:"),
        "{found:?}"
    );
}

#[test]
fn command_problems_name_unknown_commands_and_refused_written_out_args() {
    let commands = crate::engine::command::Commands::parse(
        r#"
[commands.build]
argv = ["/bin/echo", "{target}"]
[commands.build.params.target]
type = "string"
"#,
    )
    .unwrap();
    let def = def(r#"
[inputs.t]
type = "string"
[nodes.ok]
command = { name = "build", args = { target = "a b" } }
[nodes.templated]
command = { name = "build", args = { target = "{{ inputs.t }}" } }
[nodes.dash]
command = { name = "build", args = { target = "-rf" } }
[nodes.other]
command = { name = "deploy" }
"#);
    let found: Vec<String> = (command_problems(&def, &commands).iter())
        .map(ToString::to_string)
        .collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].contains("nodes.dash.command.args: `target`: must not start with `-`"),
        "{found:?}"
    );
    assert!(
        found[1].contains(
            "nodes.other.command.name: unknown command `deploy`: the commands \
                           file does not name it (it names build)"
        ),
        "{found:?}"
    );
}

#[test]
fn needs_must_name_other_existing_nodes_once() {
    let text =
        "[nodes.a]\nrender = 'a'\n[nodes.b]\nrender = 'b'\nneeds = ['a', 'b', 'ghost', 'a']\n";
    let found = problems(text);
    assert_eq!(
        found,
        [
            "wf/x.toml:5:15: nodes.b.needs[1]: `b` cannot need itself",
            "wf/x.toml:5:20: nodes.b.needs[2]: unknown node `ghost`",
            "wf/x.toml:5:29: nodes.b.needs[3]: `a` is listed twice in needs",
        ]
    );
}

#[test]
fn a_cycle_is_named_by_its_path() {
    let text = "[nodes.a]\nrender = 'a'\nneeds = ['c']\n[nodes.b]\nrender = 'b'\nneeds = ['a']\n\
                [nodes.c]\nrender = 'c'\nneeds = ['b']\n[nodes.d]\nrender = 'd'\nneeds = ['a']\n";
    let found = problems(text);
    assert_eq!(
        found,
        [
            "wf/x.toml:3:9: nodes.a.needs: needs form a cycle: a -> b -> c -> a \
          (each node needs the one before it)"
        ]
    );
}

#[test]
fn each_cycle_is_reported_with_a_shortest_path() {
    let text = "[nodes.x]\nrender = 'x'\nneeds = ['y']\n[nodes.y]\nrender = 'y'\nneeds = ['x']\n\
                [nodes.p]\nrender = 'p'\nneeds = ['r', 'q']\n[nodes.q]\nrender = 'q'\nneeds = ['p']\n\
                [nodes.r]\nrender = 'r'\nneeds = ['q']\n";
    let found = problems(text);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_reported(
        &found,
        &[
            "nodes.x.needs: needs form a cycle: x -> y -> x",
            "nodes.p.needs: needs form a cycle: p -> q -> p",
        ],
    );
}

#[test]
fn syntax_errors_in_templates_and_expressions_are_reported() {
    let text = "[nodes.a]\ntool = 'add_task'\nargs = { t = ['{{ inputs. }}'] }\nwhen = 'a ==== b'\n\
                [output]\nx = '{{ nodes.a.output }}'\n";
    let found = problems(text);
    assert_reported(
        &found,
        &[
            "wf/x.toml:3:15: nodes.a.args.t[0]: template syntax error: syntax error",
            "wf/x.toml:4:8: nodes.a.when: expression syntax error: syntax error",
            "output.x: expression syntax error",
        ],
    );
    assert_eq!(found.len(), 3, "{found:#?}");
}

#[test]
fn references_must_name_declared_inputs_and_existing_nodes() {
    let text = "[inputs.title]\ntype = 'string'\n[nodes.a]\n\
                sample = { prompt = '{{ inputs.titel }}', system = '{{ nodes.ghost.output }}' }\n\
                [output]\nr = 'nodes.nobody.status'\n";
    let found = problems(text);
    assert_reported(
        &found,
        &[
            "nodes.a.sample.prompt: unknown input `inputs.titel`; declared inputs: title",
            "nodes.a.sample.system: unknown node `nodes.ghost`",
            "output.r: unknown node `nodes.nobody`",
        ],
    );
    assert_eq!(found.len(), 3, "{found:#?}");
}

#[test]
fn a_referenced_node_must_be_upstream() {
    let text = "[nodes.a]\nrender = 'a'\n[nodes.b]\nrender = 'b'\nneeds = ['a']\n\
                [nodes.c]\ninput = { message = '{{ nodes.a.output }} {{ nodes.d.output }}' }\nneeds = ['b']\n\
                [nodes.d]\nrender = '{{ nodes.d.status }}'\n[output]\nall = 'nodes.d.output'\n";
    let found = problems(text);
    assert_eq!(
        found,
        [
            "wf/x.toml:7:21: nodes.c.input.message: `nodes.d` is not upstream of `c`: add it to needs",
            "wf/x.toml:10:10: nodes.d.render: `d` cannot refer to itself",
        ]
    );
}

#[test]
fn upstream_checks_still_work_when_needs_have_a_cycle() {
    let text = "[nodes.a]\nrender = 'a'\nneeds = ['b']\n[nodes.b]\nrender = 'b'\nneeds = ['a']\n\
                [nodes.c]\nrender = '{{ nodes.a.output }}'\nneeds = ['b']\n\
                [nodes.d]\nrender = '{{ nodes.c.output }}'\n";
    let found = problems(text);
    assert_eq!(
        found,
        [
            "wf/x.toml:3:9: nodes.a.needs: needs form a cycle: a -> b -> a (each node needs \
             the one before it)",
            "wf/x.toml:11:10: nodes.d.render: `nodes.c` is not upstream of `d`: add it to needs",
        ]
    );
}

#[test]
fn item_and_index_exist_only_inside_a_for_each_node() {
    let text = "[nodes.a]\nrender = '{{ item }}'\nwhen = 'index > 0'\n\
                [nodes.b]\nrender = '{{ item.x }} {{ index }}'\nwhen = 'item.ok'\nfor_each = 'item.list'\n\
                [output]\nx = 'item'\n";
    let found = problems(text);
    assert_eq!(
        found,
        [
            "wf/x.toml:2:10: nodes.a.render: `item` is only available in a node with `for_each`",
            "wf/x.toml:3:8: nodes.a.when: `index` is only available in a node with `for_each`",
            "wf/x.toml:6:8: nodes.b.when: `item` is not available in `when` or `for_each`, which are evaluated once for the node",
            "wf/x.toml:7:12: nodes.b.for_each: `item` is not available in `when` or `for_each`, which are evaluated once for the node",
            "wf/x.toml:9:5: output.x: `item` is not available in `output`",
        ]
    );
}

#[test]
fn unknown_roots_and_node_fields_are_refused() {
    let text = "[nodes.a]\nrender = 'a'\n[nodes.b]\nneeds = ['a']\n\
                render = '{{ input.title }} {{ nodes.a.result }} {{ run.id }} {{ dict(x=1) }}'\n";
    let found = problems(text);
    assert_eq!(
        found,
        [
            "wf/x.toml:5:10: nodes.b.render: unknown field `nodes.a.result`; a node has `output`, `status` and `error`",
            "wf/x.toml:5:10: nodes.b.render: unknown variable `input`; templates can use inputs, nodes, run, item, index",
        ]
    );
}

#[test]
fn input_defaults_and_enums_must_match_the_type() {
    let text = "[inputs.n]\ntype = 'integer'\ndefault = 1.5\n[inputs.level]\ntype = 'string'\n\
                enum = ['low', 3]\ndefault = 'high'\n[nodes.a]\nrender = 'a'\n";
    let found = problems(text);
    assert_eq!(
        found,
        [
            "wf/x.toml:3:11: inputs.n.default: the default 1.5 is not of type integer",
            "wf/x.toml:6:16: inputs.level.enum[1]: enum value 3 is not of type string",
            "wf/x.toml:7:11: inputs.level.default: the default \"high\" is not one of \"low\", 3",
        ]
    );
}

#[test]
fn given_inputs_are_checked_and_completed() {
    let def = def(VALID);
    let given = json!({ "title": "v1" });
    let complete = check_inputs(&def, given.as_object().unwrap()).unwrap();
    assert_eq!(
        Value::Object(complete),
        json!({ "title": "v1", "count": 2 })
    );
    let given = json!({ "title": "v1", "count": 3 });
    let complete = check_inputs(&def, given.as_object().unwrap()).unwrap();
    assert_eq!(
        Value::Object(complete),
        json!({ "title": "v1", "count": 3 })
    );
}

#[test]
fn given_inputs_report_every_problem() {
    let def = def(VALID);
    let given = json!({ "count": 2.0, "extra": true });
    let error = check_inputs(&def, given.as_object().unwrap()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "wf/x.toml:2:2: inputs.extra: unknown input `extra`; declared inputs: title, count\n\
         wf/x.toml:2:9: inputs.title: the required input `title` is missing\n\
         wf/x.toml:5:9: inputs.count: input `count` must be of type integer, got 2.0"
    );
    let given = json!({ "title": 5, "count": 7 });
    let error = check_inputs(&def, given.as_object().unwrap()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "wf/x.toml:2:9: inputs.title: input `title` must be of type string, got 5\n\
         wf/x.toml:5:9: inputs.count: input `count` must be one of 1, 2, 3, got 7"
    );
}

#[test]
fn absent_optional_inputs_are_null_and_given_null_counts_as_absent() {
    let value = json!({
        "inputs": { "note": { "type": "string" }, "must": { "type": "boolean", "required": true } },
        "nodes": { "a": { "render": "{{ inputs.note }}" } }
    });
    let def = parse_json(&value).unwrap();
    let given = json!({ "must": false, "note": null });
    let complete = check_inputs(&def, given.as_object().unwrap()).unwrap();
    assert_eq!(
        Value::Object(complete),
        json!({ "note": null, "must": false })
    );
    let error = check_inputs(&def, json!({ "must": null }).as_object().unwrap()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "inline: inputs.must: the required input `must` is missing"
    );
    let error =
        check_inputs(&def, json!({ "must": true, "x": 1 }).as_object().unwrap()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "inline: inputs.x: unknown input `x`; declared inputs: note, must"
    );
}

#[test]
fn a_text_result_needs_exactly_one_output() {
    let found = problems("result = \"text\"\n[nodes.a]\nrender = 'x'\n");
    assert_reported(
        &found,
        &["answers with the one value of `output`, which has 0"],
    );
    let one =
        def("result = \"text\"\n[nodes.a]\nrender = 'x'\n[output]\ntext = 'nodes.a.output'\n");
    assert!(validate(&one, &known, Limits::FILE).is_ok());
}

#[test]
fn a_wait_template_is_checked_like_any_other() {
    let found = problems("[nodes.a]\nwait = \"{{ nodes.zz.output }}s\"\n");
    assert_reported(&found, &["nodes.a.wait"]);
}

const HISTORY: &str = r#"
[inputs.env]
type = "string"
[inputs.n]
type = "integer"
[nodes.first]
render = "x"
[nodes.past]
needs = ["first"]
history = { workflow = "{{ inputs.env }}_deploy", limit = "{{ inputs.n }}", where = "past.inputs.env == inputs.env and past.status != nodes.first.output and run.id != past.run_id" }
"#;

#[test]
fn a_history_nodes_where_sees_the_earlier_run_as_past_beside_the_usual_context() {
    validate(&def(HISTORY), &known, Limits::FILE).unwrap();
    // Inline definitions may read history: it is no file of the host's.
    let inline = parse_json(&json!({
        "nodes": { "past": { "history": { "workflow": "w", "where": "past.output.ok" } } }
    }))
    .unwrap();
    validate(&inline, &known, Limits::INLINE).unwrap();
}

#[test]
fn past_is_only_in_a_where_and_has_only_a_runs_fields() {
    let text = r#"
[nodes.a]
render = "{{ past.run_id }}"
[nodes.b]
history = { workflow = "w", where = "past.inputz.env == 1 and nodes.a.output and nodes.zz.output and inputs.x" }
[nodes.c]
history = { workflow = "{{ past.workflow }}", where = "past.run_id ==" }
[output]
last = "past.output"
"#;
    let found = problems(text);
    assert_reported(
        &found,
        &[
            "nodes.a.render: `past` is only available in a history node's `where`",
            "nodes.b.history.where: unknown field `past.inputz`; a past run has run_id, \
             workflow, status, created_at, finished_at, inputs, output, error",
            "nodes.b.history.where: `nodes.a` is not upstream of `b`: add it to needs",
            "nodes.b.history.where: unknown node `nodes.zz`",
            "nodes.b.history.where: unknown input `inputs.x`",
            "nodes.c.history.workflow: `past` is only available in a history node's `where`",
            "nodes.c.history.where: expression syntax error",
            "output.last: `past` is only available in a history node's `where`",
        ],
    );
    assert_eq!(found.len(), 8, "{found:#?}");
}

#[test]
fn a_written_history_limit_over_the_operators_cap_is_a_problem_and_a_templated_one_is_not() {
    let text = "[nodes.a]\nhistory = { workflow = \"w\", limit = 101 }\n";
    let error = validate(&def(text), &known, Limits::FILE).unwrap_err();
    assert_eq!(
        error.to_string(),
        "wf/x.toml:2:37: nodes.a.history.limit: limit 101 is over the most runs a history node \
         may read (100, --max-history-rows)"
    );
    let raised = Limits::FILE.with_history_rows(500);
    validate(&def(text), &known, raised).unwrap();
    let lowered = Limits::INLINE.with_history_rows(10);
    let inline = parse_json(&json!({
        "nodes": { "a": { "history": { "workflow": "w", "limit": 11 } } }
    }))
    .unwrap();
    let error = validate(&inline, &known, lowered).unwrap_err();
    assert!(error.to_string().contains("limit 11 is over"), "{error}");
    // A limit a template gives is known only when the node runs; an unsaid one is the
    // default, or the cap when it is lower.
    validate(&def(HISTORY), &known, lowered).unwrap();
    let unsaid = "[nodes.a]\nhistory = { workflow = \"w\" }\n";
    validate(&def(unsaid), &known, Limits::FILE.with_history_rows(1)).unwrap();
}
