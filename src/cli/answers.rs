//! `--answers FILE`: a run's answers given up front, as a JSON object keyed by node id.
//!
//! An `input` node's answer is an object of its form's fields; a `sample` node's is a
//! string (its text) or `{text, model?}`. A `for_each` node takes one answer for every
//! instance, or a list of them indexed by instance. `null`, at a node or at an instance,
//! gives no answer: the question is then asked as if the file did not name it. A question
//! of a child run (a `workflow` node's) is keyed by the path to it, each node followed by
//! `>`: `review>approve`, or `each#2>approve` for one instance of a fanned-out `workflow`
//! node (`each>approve` answers every instance).
//!
//! The file's shape is checked against the workflow before the run starts, every problem
//! at once (a child run's key only as far as its first node: the child's workflow is
//! known when it starts); whether an `input` answer fits its form is checked when the node asks, since a
//! form may be computed upstream.

use std::path::Path;

use serde_json::{Map, Value};

use crate::engine::actions;
use crate::engine::definition::ActionDef;
use crate::engine::plan::{NodeAction, Plan, PlannedNode};

/// The answers of a run, read from a file and checked against its workflow.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AnswerFile {
    /// The file, as the command line named it.
    pub path: String,
    answers: Map<String, Value>,
}

/// What kind of question a node asks, if it asks one. A `command` node asks, with a form,
/// whether its command completed when its run resumes in the middle of it.
fn question_kind(node: &PlannedNode) -> Option<&'static str> {
    match &node.action {
        NodeAction::Defined(ActionDef::Input { .. } | ActionDef::Command { .. }) => Some("input"),
        NodeAction::Defined(ActionDef::Sample { .. }) => Some("sample"),
        _ => None,
    }
}

fn action_kind(node: &PlannedNode) -> &'static str {
    match &node.action {
        NodeAction::Defined(action) => action.kind(),
        NodeAction::ToolWithRunInputs(_) => "tool",
    }
}

impl AnswerFile {
    /// Reads `path` and checks it against `plan`; `Err` names every problem.
    pub(crate) fn load(path: &Path, plan: &Plan) -> Result<AnswerFile, Vec<String>> {
        let label = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| vec![format!("{label}: cannot read the answers file: {e}")])?;
        AnswerFile::parse(&label, &text, plan)
    }

    /// The answers in `text`, checked against `plan`; `label` names the file in problems.
    pub(crate) fn parse(label: &str, text: &str, plan: &Plan) -> Result<AnswerFile, Vec<String>> {
        let answers = match serde_json::from_str(text) {
            Ok(Value::Object(answers)) => answers,
            Ok(_) => {
                let problem = "the answers file must be a JSON object keyed by node id";
                return Err(vec![format!("{label}: {problem}")]);
            }
            Err(e) => return Err(vec![format!("{label}: not valid JSON: {e}")]),
        };
        let problems: Vec<String> = answers
            .iter()
            .flat_map(|(key, value)| key_problems(plan, key, value))
            .map(|problem| format!("{label}: {problem}"))
            .collect();
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(AnswerFile {
            path: label.to_owned(),
            answers,
        })
    }

    /// The answer the file gives to the question of `node` (its `kind`, `input` or
    /// `sample`) at `instance`, as it is recorded: a sample's text becomes `{text, model}`.
    /// `node` is the node's id, after the path to its run (`review>approve`) for a
    /// child run's; a path's instance marks (`each#2>`) may be left out of the file's key.
    pub(crate) fn answer(&self, node: &str, instance: Option<usize>, kind: &str) -> Option<Value> {
        let given = (self.answers.get(node)).or_else(|| self.answers.get(&without_instances(node)));
        let value = match (given?, instance) {
            (Value::Array(items), Some(k)) => items.get(k)?,
            (Value::Array(_), None) => return None,
            (value, _) => value,
        };
        match (kind, value) {
            (_, Value::Null) => None,
            ("sample", text @ Value::String(_)) => Some(actions::sampled_by_person(text)),
            ("sample", Value::Object(reply)) if !reply.contains_key("model") => {
                let mut reply = reply.clone();
                reply.insert("model".into(), Value::from("person"));
                Some(Value::Object(reply))
            }
            (_, value) => Some(value.clone()),
        }
    }
}

/// `key` without the instance marks of its path: `each#2>approve` is `each>approve`.
fn without_instances(key: &str) -> String {
    let mut segments: Vec<&str> = key.split('>').collect();
    let last = segments.len() - 1;
    for segment in &mut segments[..last] {
        *segment = segment.split('#').next().unwrap_or(segment);
    }
    segments.join(">")
}

/// What is wrong with the key of a child run's question, `first>…`: its first node must
/// start a child run. What the child asks is checked when it asks.
fn child_key_problems(plan: &Plan, key: &str) -> Vec<String> {
    let (first, rest) = key.split_once('>').unwrap_or((key, ""));
    let first = first.split('#').next().unwrap_or(first);
    if rest.split('>').any(str::is_empty) {
        return vec![format!(
            "`{key}`: a child run's question is keyed by its path, each node followed by \
             `>`, then the node that asks (`review>approve`)"
        )];
    }
    match plan.nodes.iter().find(|node| &*node.id == first) {
        Some(node) if matches!(node.action, NodeAction::Defined(ActionDef::Workflow { .. })) => {
            Vec::new()
        }
        Some(node) => vec![format!(
            "`{key}`: `{first}` is a {} node, not a `workflow` node; only a `workflow` node's \
             child run has questions of its own",
            action_kind(node)
        )],
        None => vec![format!(
            "`{key}`: `{first}` names no node of workflow `{}`",
            plan.name
        )],
    }
}

/// What is wrong with the answer the file gives under `key`.
fn key_problems(plan: &Plan, key: &str, value: &Value) -> Vec<String> {
    if key.contains('>') {
        return child_key_problems(plan, key);
    }
    let Some(node) = plan.nodes.iter().find(|node| &*node.id == key) else {
        let asking: Vec<String> = plan
            .nodes
            .iter()
            .filter(|node| question_kind(node).is_some())
            .map(|node| format!("`{}`", node.id))
            .collect();
        let known = match asking.is_empty() {
            true => "it asks no questions".to_owned(),
            false => format!("the nodes that ask are {}", asking.join(", ")),
        };
        return vec![format!(
            "`{key}` names no node of workflow `{}` ({known})",
            plan.name
        )];
    };
    let Some(kind) = question_kind(node) else {
        return vec![format!(
            "`{key}` is a {} node; only input, sample and command nodes take answers",
            action_kind(node)
        )];
    };
    if let Some(problem) = model_only_problem(node, value) {
        return vec![format!("`{key}`: {problem}")];
    }
    match value {
        Value::Array(_) if node.for_each.is_none() => vec![format!(
            "`{key}` does not fan out (it has no `for_each`), so its answer is one value, \
             not a list"
        )],
        Value::Array(items) => items
            .iter()
            .enumerate()
            .filter_map(|(k, item)| shape_problem(kind, item).map(|p| format!("`{key}`[{k}]: {p}")))
            .collect(),
        value => shape_problem(kind, value)
            .map(|p| format!("`{key}`: {p}"))
            .into_iter()
            .collect(),
    }
}

/// Why `value` cannot answer a model-only sample (`person = false`): its answers are the
/// model's replies, `{text, model}`, never a person's text.
fn model_only_problem(node: &PlannedNode, value: &Value) -> Option<&'static str> {
    let NodeAction::Defined(ActionDef::Sample { person: false, .. }) = &node.action else {
        return None;
    };
    let a_reply = |value: &Value| match value {
        Value::Null => true,
        Value::Object(reply) => reply.get("model").is_some_and(Value::is_string),
        _ => false,
    };
    let fits = match value {
        Value::Array(items) => items.iter().all(a_reply),
        value => a_reply(value),
    };
    (!fits).then_some(
        "only the client's model answers it (`person = false`): its answer is the model's \
         reply, `{\"text\": ..., \"model\": ...}`, not a person's text",
    )
}

/// Why `value` cannot be an answer to a question of `kind` at all, whatever it asks.
fn shape_problem(kind: &str, value: &Value) -> Option<&'static str> {
    let fits = match (kind, value) {
        (_, Value::Null) => true,
        ("sample", Value::String(_)) => true,
        ("sample", Value::Object(reply)) => {
            reply["text"].is_string()
                && reply.get("model").is_none_or(Value::is_string)
                && reply.keys().all(|k| k == "text" || k == "model")
        }
        ("sample", _) => false,
        (_, Value::Array(_)) => {
            return Some("a list of answers is one per instance; it cannot be nested");
        }
        _ => true,
    };
    match fits {
        true => None,
        false => {
            Some("a sample's answer is its text, or an object `{\"text\": ..., \"model\": ...}`")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FLOW: &str = r#"
name = "flow"
[nodes.name]
input = { message = "Name?", schema = { type = "object", properties = { name = { type = "string" } } } }
[nodes.draft]
sample = { prompt = "Write notes" }
[nodes.check]
for_each = "['a', 'b', 'c']"
input = { message = "Check {{ item }}?", schema = { type = "object", properties = { ok = { type = "boolean" } } } }
[nodes.greet]
render = "hello"
"#;

    fn plan() -> Plan {
        let def = crate::engine::installed::load_text("flow.toml", FLOW).expect("a valid workflow");
        Plan::new(std::sync::Arc::new(def))
    }

    #[test]
    fn answers_are_found_by_node_and_a_list_by_instance() {
        let text = r#"{"name": {"name": "1.4"}, "draft": "Notes", "check": [{"ok": true}, null]}"#;
        let file = AnswerFile::parse("a.json", text, &plan()).expect("a good file");
        assert_eq!(
            file.answer("name", None, "input"),
            Some(json!({ "name": "1.4" }))
        );
        assert_eq!(
            file.answer("draft", None, "sample"),
            Some(json!({ "text": "Notes", "model": "person" }))
        );
        assert_eq!(
            file.answer("check", Some(0), "input"),
            Some(json!({ "ok": true }))
        );
        assert_eq!(
            file.answer("check", Some(1), "input"),
            None,
            "null gives no answer"
        );
        assert_eq!(
            file.answer("check", Some(2), "input"),
            None,
            "past the list"
        );
        assert_eq!(file.answer("greet", None, "input"), None);
    }

    #[test]
    fn one_answer_answers_every_instance_of_a_fan_out() {
        let text = r#"{"check": {"ok": false}, "draft": {"text": "T", "model": "m"}}"#;
        let file = AnswerFile::parse("a.json", text, &plan()).expect("a good file");
        for k in 0..3 {
            assert_eq!(
                file.answer("check", Some(k), "input"),
                Some(json!({ "ok": false }))
            );
        }
        assert_eq!(
            file.answer("draft", None, "sample"),
            Some(json!({ "text": "T", "model": "m" }))
        );
    }

    #[test]
    fn a_model_only_sample_takes_a_models_reply_from_the_file_and_never_a_persons_text() {
        let flow =
            format!("{FLOW}[nodes.review]\nsample = {{ prompt = \"Review\", person = false }}\n");
        let def = crate::engine::installed::load_text("flow.toml", &flow).unwrap();
        let plan = Plan::new(std::sync::Arc::new(def));
        let given = r#"{"review": {"text": "Clear.", "model": "claude"}}"#;
        let file = AnswerFile::parse("a.json", given, &plan).expect("a model's reply");
        assert_eq!(
            file.answer("review", None, "sample"),
            Some(json!({ "text": "Clear.", "model": "claude" }))
        );
        for persons in [
            r#"{"review": "Clear."}"#,
            r#"{"review": {"text": "Clear."}}"#,
        ] {
            let problems = AnswerFile::parse("a.json", persons, &plan).unwrap_err();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].starts_with("a.json: `review`: only the client's model answers it"),
                "{problems:?}"
            );
        }
    }

    #[test]
    fn a_command_node_takes_the_answer_to_its_resume_question() {
        let flow = format!("{FLOW}[nodes.deploy]\ncommand = {{ name = \"deploy\" }}\n");
        let def = crate::engine::installed::load_text("flow.toml", &flow).unwrap();
        let plan = Plan::new(std::sync::Arc::new(def));
        let text = r#"{"deploy": {"outcome": "rerun"}}"#;
        let file = AnswerFile::parse("a.json", text, &plan).expect("a good file");
        assert_eq!(
            file.answer("deploy", None, "input"),
            Some(json!({ "outcome": "rerun" }))
        );
    }

    #[test]
    fn a_bad_answers_file_names_every_problem_at_once() {
        let text = r#"{"nme": {}, "greet": "x", "name": [{}], "draft": 3, "check": [{}, [1]]}"#;
        let problems = AnswerFile::parse("a.json", text, &plan()).expect_err("a bad file");
        assert_eq!(
            problems,
            [
                "a.json: `nme` names no node of workflow `flow` (the nodes that ask are `name`, \
                 `draft`, `check`)",
                "a.json: `greet` is a render node; only input, sample and command nodes take answers",
                "a.json: `name` does not fan out (it has no `for_each`), so its answer is one \
                 value, not a list",
                "a.json: `draft`: a sample's answer is its text, or an object \
                 `{\"text\": ..., \"model\": ...}`",
                "a.json: `check`[1]: a list of answers is one per instance; it cannot be nested",
            ]
        );
    }

    #[test]
    fn an_answers_file_that_is_not_a_json_object_is_refused() {
        let not_json = AnswerFile::parse("a.json", "{name: 1", &plan()).expect_err("not JSON");
        assert_eq!(not_json.len(), 1);
        assert!(
            not_json[0].starts_with("a.json: not valid JSON: "),
            "{not_json:?}"
        );
        let list = AnswerFile::parse("a.json", "[1]", &plan()).expect_err("not an object");
        assert_eq!(
            list,
            ["a.json: the answers file must be a JSON object keyed by node id"]
        );
    }
}
