//! The end of a run as a person at a terminal reads it: its status, a line per node, its
//! output and the files it wrote. Scripts get the JSON report instead (`--json`, or a
//! stdout that is not a terminal).

use serde_json::Value;

use crate::engine::definition::ActionDef;
use crate::engine::plan::{NodeAction, Plan};
use crate::engine::report::{NodeReport, RunReport};

/// The output is cut after this many lines of pretty JSON...
const OUTPUT_LINES: usize = 40;
/// ...and each of its lines, and each node's error, after this many characters.
const LINE_CHARS: usize = 160;

/// The summary of `report`, a run of `plan`.
pub(crate) fn render(report: &RunReport, plan: &Plan) -> String {
    let mut out = format!(
        "run {} of `{}`: {}\n",
        report.run_id,
        report.workflow,
        report.status.as_str()
    );
    if let Some(error) = &report.error {
        out.push_str(&format!("error: {}\n", short(error)));
    }
    let width = report.nodes.keys().map(|id| id.len()).max().unwrap_or(0);
    for (id, node) in &report.nodes {
        out.push_str(&format!("  {id:<width$}  {}\n", node_line(node)));
    }
    let empty = report.output.as_object().is_some_and(|o| o.is_empty());
    if !report.output.is_null() && !empty {
        out.push_str("output:\n");
        out.push_str(&output(&report.output, &report.run_id));
    }
    let files = files_written(report, plan);
    if !files.is_empty() {
        out.push_str("files written:\n");
        for file in files {
            out.push_str(&format!("  {file}\n"));
        }
    }
    out
}

/// A node's status, its attempts when it took more than one, and why it failed or was
/// skipped or cancelled.
fn node_line(node: &NodeReport) -> String {
    let mut line = node.status.as_str().to_owned();
    if node.attempts > 1 {
        line.push_str(&format!(" after {} attempts", node.attempts));
    }
    if let Some(error) = &node.error {
        line.push_str(&format!(": {} ({})", short(&error.message), error.code));
    } else if let Some(reason) = &node.reason {
        line.push_str(&format!(": {}", short(reason)));
    }
    line
}

/// The first line of `text`, cut to [`LINE_CHARS`].
fn short(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    cut(first, LINE_CHARS, first.len() < text.len())
}

fn cut(text: &str, chars: usize, more: bool) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None if more => format!("{text} …"),
        None => text.to_owned(),
    }
}

/// The run's output as indented, pretty JSON, cut to [`OUTPUT_LINES`] lines.
fn output(value: &Value, run_id: &str) -> String {
    let pretty = serde_json::to_string_pretty(value).expect("a JSON value serialises");
    let lines: Vec<&str> = pretty.lines().collect();
    let mut out = String::new();
    for line in lines.iter().take(OUTPUT_LINES) {
        out.push_str(&format!("  {}\n", cut(line, LINE_CHARS, false)));
    }
    if lines.len() > OUTPUT_LINES {
        out.push_str(&format!(
            "  … {} more lines (`workflows status {run_id}` shows them all)\n",
            lines.len() - OUTPUT_LINES
        ));
    }
    out
}

/// The files the run's `write_file` nodes wrote: the `{path, bytes}` output of each node,
/// or of each of its instances.
fn files_written(report: &RunReport, plan: &Plan) -> Vec<String> {
    let writes = plan.nodes.iter().filter(|node| {
        matches!(
            node.action,
            NodeAction::Defined(ActionDef::WriteFile { .. })
        )
    });
    let mut files = Vec::new();
    for node in writes {
        let Some(done) = report.nodes.get(&node.id) else {
            continue;
        };
        let outputs = match &done.output {
            Some(Value::Array(items)) => items.iter().collect(),
            Some(one) => vec![one],
            None => Vec::new(),
        };
        for written in outputs {
            if let Some(path) = written["path"].as_str() {
                let bytes = written["bytes"].as_u64().unwrap_or_default();
                files.push(format!("{path} ({bytes} bytes)"));
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::report::{NodeError, NodeErrorKind, NodeReports, NodeStatus, RunStatus};
    use serde_json::json;
    use std::sync::Arc;

    const FLOW: &str = r#"
name = "notes"
[nodes.draft]
render = "text"
[nodes.save]
write_file = { path = "notes.md", content = "{{ nodes.draft.output }}" }
needs = ["draft"]
[nodes.ping]
tool = "add_task"
args = { title = "t" }
[nodes.later]
render = "x"
needs = ["ping"]
"#;

    fn plan() -> Plan {
        let def = crate::engine::installed::load_text("notes.toml", FLOW).expect("valid");
        Plan::new(Arc::new(def))
    }

    fn report(output: Value) -> RunReport {
        let node = |status, attempts, output: Option<Value>| NodeReport {
            status,
            attempts,
            output,
            ..NodeReport::default()
        };
        let mut nodes = NodeReports::default();
        nodes.insert(
            "draft".into(),
            node(NodeStatus::Succeeded, 1, Some(json!("text"))),
        );
        let written = json!({ "path": "notes.md", "bytes": 4 });
        nodes.insert("save".into(), node(NodeStatus::Succeeded, 1, Some(written)));
        let mut ping = node(NodeStatus::Failed, 3, None);
        let message = "the database is locked\nand more detail";
        ping.error = Some(NodeError::new(NodeErrorKind::Timeout, message));
        nodes.insert("ping".into(), ping);
        let mut later = node(NodeStatus::Skipped, 0, None);
        later.reason = Some("upstream failed".into());
        nodes.insert("later".into(), later);
        RunReport {
            run_id: "r-1".into(),
            workflow: "notes".into(),
            status: RunStatus::Failed,
            output,
            error: Some("node `ping` failed".into()),
            nodes,
        }
    }

    #[test]
    fn a_summary_has_the_status_a_line_per_node_and_the_files_written() {
        let text = render(&report(json!({ "saved": true })), &plan());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "run r-1 of `notes`: failed",
                "error: node `ping` failed",
                "  draft  succeeded",
                "  save   succeeded",
                "  ping   failed after 3 attempts: the database is locked … (timeout)",
                "  later  skipped: upstream failed",
                "output:",
                "  {",
                "    \"saved\": true",
                "  }",
                "files written:",
                "  notes.md (4 bytes)",
            ]
        );
    }

    #[test]
    fn a_huge_output_is_cut_with_a_pointer_to_the_whole() {
        let long: Vec<u32> = (0..100).collect();
        let text = render(&report(json!(long)), &plan());
        let output_lines = text
            .lines()
            .skip_while(|l| *l != "output:")
            .take_while(|l| *l != "files written:")
            .count();
        assert_eq!(output_lines, 1 + OUTPUT_LINES + 1, "{text}");
        assert!(
            text.contains("… 62 more lines (`workflows status r-1` shows them all)"),
            "{text}"
        );
        let wide = "x".repeat(500);
        let text = render(&report(json!(wide)), &plan());
        assert!(
            text.lines().all(|l| l.chars().count() < LINE_CHARS + 10),
            "{text}"
        );
    }
}
