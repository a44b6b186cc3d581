//! A workflow as a Mermaid flowchart.

use std::fmt::Write;

use crate::engine::definition::{OnFailure, Trigger, WorkflowDef};

pub(super) fn render(def: &WorkflowDef) -> String {
    let mut out = String::from("flowchart TD\n");
    for node in def.nodes.values() {
        let mut label = format!("{}<br/>{}", node.id, node.action.kind());
        if node.for_each.is_some() {
            label.push_str(" ×each");
        }
        if node.when.is_some() {
            label.push_str(" ?when");
        }
        if node.retry.max_attempts > 1 {
            let _ = write!(label, " ↻{}", node.retry.max_attempts);
        }
        let _ = writeln!(out, "    {}[\"{}\"]", node.id, label.replace('"', "'"));
    }
    for node in def.nodes.values() {
        let rule = match node.trigger {
            Trigger::AllSuccess => None,
            Trigger::AllDone => Some("all_done"),
            Trigger::OneSuccess => Some("one_success"),
            Trigger::NoneFailed => Some("none_failed"),
        };
        for upstream in &node.needs {
            match rule {
                Some(rule) => {
                    let _ = writeln!(out, "    {upstream} -->|{rule}| {}", node.id);
                }
                None => {
                    let _ = writeln!(out, "    {upstream} --> {}", node.id);
                }
            }
        }
        if node.on_failure == OnFailure::Continue {
            let _ = writeln!(out, "    style {} stroke-dasharray: 5 5", node.id);
        }
    }
    out
}
