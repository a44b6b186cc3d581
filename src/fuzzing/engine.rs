//! The targets of the workflow engine: inline definitions through validation to a plan,
//! form answers against their schemas, and templates under their budgets.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::parts;
use crate::engine::definition::{ActionDef, Problems, WorkflowDef};
use crate::engine::plan::Plan;
use crate::engine::template::{self, TemplateError, TemplateLimits, Templates};
use crate::engine::validate::{self, Limits};
use crate::engine::{form, loader};
use crate::schema;
use crate::todos::Tools;

/// `inline_definition`: a definition passed inline is decoded and validated as
/// `run_workflow` does it, without a panic. The inline limits find what the file limits
/// find, and besides exactly this: every node that would touch the host's files
/// (`read_file`, `list_dir`, `write_file`) or run a command (`command`), each named, a
/// count of nodes over the inline cap, and each use of `command_allowed`; so what the
/// inline limits accept, the file limits accept too. One that
/// validates (as a file, and so inline too) always plans, its plan is acyclic with every
/// index in range, and its snapshot reads back as the same plan.
///
/// Input: the definition as JSON.
pub fn inline_definition(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let checked = loader::parse_json_checked(&value, &|def| {
        let inline = validate::validate(def, &Tools::exists, Limits::INLINE);
        let file = validate::validate(def, &Tools::exists, Limits::FILE);
        inline_refusals_are_the_files_and_the_host_files(def, &inline, &file);
        file
    });
    let Ok(def) = checked else {
        return;
    };
    let _ = validate::check_inputs(&def, &Map::new());
    let count = def.nodes.len();
    let plan = Plan::new(Arc::new(def));
    assert_eq!(plan.nodes.len(), count);
    assert!(plan.steps() <= count.max(1));
    for node in &plan.nodes {
        let indices = node
            .upstream
            .iter()
            .chain(&node.downstream)
            .chain(&node.reads);
        assert!(indices.clone().all(|&i| i < count), "an index out of range");
    }
    assert!(plan.output_reads.iter().all(|&i| i < count));
    assert!(topological(&plan), "a validated plan has a cycle");
    let snapshot = plan.snapshot();
    let restored = Plan::from_snapshot(&snapshot.text).expect("a snapshot reads back");
    let again = serde_json::to_string(&restored).expect("a plan serialises");
    assert_eq!(again, snapshot.text, "a snapshot read back is another plan");
}

/// The problems `inline` finds are those `file` finds, one for each node with a file or
/// command action (at `nodes.<id>.<action>`, saying it is not allowed inline), one for a
/// count of nodes over the inline cap, and those refusing `command_allowed` (the operator's
/// alone): compared as lists of paths, sorted.
fn inline_refusals_are_the_files_and_the_host_files(
    def: &WorkflowDef,
    inline: &Result<(), Problems>,
    file: &Result<(), Problems>,
) {
    let paths = |result: &Result<(), Problems>| -> Vec<String> {
        let problems = result.as_ref().err().map_or(&[][..], |p| &p.0[..]);
        (problems.iter())
            .filter(|p| {
                !p.message
                    .contains("`command_allowed` is not available in inline")
            })
            .map(|p| p.location.path.clone())
            .collect()
    };
    let touching: Vec<String> = def
        .nodes
        .values()
        .filter(|node| {
            matches!(
                node.action,
                ActionDef::ReadFile { .. }
                    | ActionDef::ListDir { .. }
                    | ActionDef::WriteFile { .. }
                    | ActionDef::Command { .. }
            )
        })
        .map(|node| format!("nodes.{}.{}", node.id, node.action.kind()))
        .collect();
    let over = |limits: Limits| (def.nodes.len() > limits.max_nodes).then(|| "nodes".to_owned());
    let mut found = paths(inline);
    found.extend(over(Limits::FILE));
    let mut expected = paths(file);
    expected.extend(touching.iter().cloned());
    expected.extend(over(Limits::INLINE));
    found.sort_unstable();
    expected.sort_unstable();
    assert_eq!(found, expected, "inline: {inline:?}\nas a file: {file:?}");
    let problems = inline.as_ref().err().map_or(&[][..], |p| &p.0[..]);
    for path in &touching {
        assert!(
            problems.iter().any(|p| &p.location.path == path
                && p.message.contains("is not allowed in inline definitions")),
            "{path} is not refused as a file action: {problems:?}"
        );
    }
}

/// Whether every node can be taken after all its upstream nodes (Kahn's algorithm).
fn topological(plan: &Plan) -> bool {
    let mut waiting: Vec<usize> = plan.nodes.iter().map(|n| n.upstream.len()).collect();
    let mut ready: Vec<usize> = (0..waiting.len()).filter(|&i| waiting[i] == 0).collect();
    let mut taken = 0;
    while let Some(node) = ready.pop() {
        taken += 1;
        for &next in &plan.nodes[node].downstream {
            waiting[next] -= 1;
            if waiting[next] == 0 {
                ready.push(next);
            }
        }
    }
    taken == plan.nodes.len()
}

/// `form_answers`: for any form the loader accepts and any answer, checking the answer
/// does not panic; every problem names a field of the answer or of the form's `required`;
/// an answer that fits still fits without any field the form does not require; and the
/// form shown to clients is one the loader accepts. The JSON-value schemas
/// (`engine/schema/`, a field's `contentSchema`) are exercised on the same inputs.
///
/// Input: the form's schema as JSON, a NUL byte, the answer as JSON.
pub fn form_answers(data: &[u8]) {
    let [schema_text, answer_text] = parts(data, 2)[..] else {
        return;
    };
    let (Ok(schema), Ok(answer)) = (
        serde_json::from_slice::<Value>(schema_text),
        serde_json::from_slice::<Value>(answer_text),
    ) else {
        return;
    };
    if schema::schema_problems(&schema).is_empty() {
        let _ = schema::value_problems(&schema, &answer);
    }
    if !is_form(&schema) {
        return;
    }
    assert!(
        is_form(&form::for_client(&schema)),
        "the form shown is refused"
    );
    let problems = form::answer_problems(&schema, &answer);
    let Value::Object(fields) = &answer else {
        assert_eq!(problems.len(), 1, "{problems:?}");
        return;
    };
    let required = form::required_fields(&schema);
    for problem in &problems {
        let named = fields
            .keys()
            .map(String::as_str)
            .chain(required.iter().copied());
        let mut named = named;
        // A field's own problem is `name`'s; one inside a JSON field's content is at a
        // path below it (`name[0].key`).
        let names = |name: &str| {
            ["`: ", "[", "."]
                .iter()
                .any(|next| problem.starts_with(&format!("`{name}{next}")))
        };
        assert!(named.any(names), "a problem names no field: {problem}");
    }
    if problems.is_empty() {
        for name in fields
            .keys()
            .filter(|name| !required.contains(&name.as_str()))
        {
            let mut fewer = fields.clone();
            fewer.shift_remove(name);
            let left = form::answer_problems(&schema, &Value::Object(fewer));
            assert!(left.is_empty(), "without `{name}`: {left:?}");
        }
    }
}

/// Whether the loader accepts `schema` as the form of an `input` node.
fn is_form(schema: &Value) -> bool {
    let def = json!({
        "name": "form",
        "nodes": { "ask": { "input": { "message": "?", "schema": schema } } }
    });
    loader::parse_json(&def).is_ok()
}

/// `template`: any template or expression evaluated under the budgets ends, with a value,
/// a template error or a budget error, and never panics (not even in a way the server
/// contains); what it produces never exceeds
/// the output cap (for a JSON value, its size as JSON; for an expanded value, the sum over
/// its expanded strings, as `Templates::expand` counts it). That it ends is the fuzzer's to
/// check: an input that runs past its timeout is a finding.
///
/// Input: a byte choosing how the text is evaluated (rendered, evaluated as an expression
/// or as a condition, or expanded inside a JSON value) and the budgets, then the text. The
/// budgets are small, so that an input that would run away exhausts them at once.
pub fn template(data: &[u8]) {
    let [mode, source @ ..] = data else {
        return;
    };
    let Ok(source) = std::str::from_utf8(source) else {
        return;
    };
    let limits = TemplateLimits {
        fuel: [1_000, 20_000, 200_000, 1][usize::from(mode >> 2 & 3)],
        max_output: [64 * 1024, 1024, 16, 0][usize::from(mode >> 4 & 3)],
    };
    let templates = Templates::new(limits);
    let ctx = minijinja::Value::from_serialize(json!({
        "inputs": { "title": "Ship", "count": 3, "items": ["a", "b"], "text": "x{{y}}" },
        "nodes": { "plan": { "output": { "n": 2, "list": [1, 2, 3] }, "status": "succeeded" } },
        "run": { "id": "r1" },
        "item": { "k": "v" },
        "index": 0,
    }));
    let produced = match mode & 3 {
        0 => templates.render(source, &ctx).map(|text| text.len()),
        1 => templates.eval(source, &ctx).map(|value| json_size(&value)),
        2 => templates.eval_bool(source, &ctx).map(|_| 0),
        _ => {
            let value = json!({ "a": source, "b": [source, { "c": source }] });
            templates.expand(&value, &ctx).map(|expanded| {
                let leaves = [&expanded["a"], &expanded["b"][0], &expanded["b"][1]["c"]];
                match template::is_template(source) {
                    true => leaves.into_iter().map(expanded_size).sum(),
                    false => 0,
                }
            })
        }
    };
    // The server contains a panic of an evaluation as an error of its node; here it is
    // still a finding (and in the fuzz build the panic aborts before it is caught).
    if let Err(TemplateError::Panicked(message)) = &produced {
        panic!("the evaluation panicked: {message}");
    }
    if let Ok(size) = produced {
        assert!(
            size <= limits.max_output,
            "{size} bytes over a cap of {}",
            limits.max_output
        );
    }
}

fn json_size(value: &Value) -> usize {
    serde_json::to_string(value).map_or(0, |text| text.len())
}

/// The size `Templates::expand` counts for one expanded string.
fn expanded_size(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len(),
        other => json_size(other),
    }
}
