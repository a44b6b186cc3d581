//! A workflow as a Mermaid flowchart.

use std::fmt::Write;

use super::definition::{NodeDef, OnFailure, Trigger, WorkflowDef};

/// The flowchart of `def`: a phased workflow's nodes in one subgraph per phase, in the
/// order the phases first appear; nodes without a phase outside them.
pub(crate) fn render(def: &WorkflowDef) -> String {
    let mut out = String::from("flowchart TD\n");
    let mut phases: Vec<&str> = Vec::new();
    for phase in def.nodes.values().filter_map(|node| node.phase.as_deref()) {
        if !phases.contains(&phase) {
            phases.push(phase);
        }
    }
    for phase in &phases {
        let _ = writeln!(out, "    subgraph phase_{phase}[\"{phase}\"]");
        for node in def
            .nodes
            .values()
            .filter(|n| n.phase.as_deref() == Some(phase))
        {
            let _ = writeln!(out, "        {}", box_of(node));
        }
        out.push_str("    end\n");
    }
    for node in def.nodes.values().filter(|node| node.phase.is_none()) {
        let _ = writeln!(out, "    {}", box_of(node));
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

/// A node's box: its id, its action, and marks for `for_each`, `when`, retries and
/// repetition (`⟳≤N`, for at most N iterations).
fn box_of(node: &NodeDef) -> String {
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
    if let Some(repeat) = &node.repeat {
        let _ = write!(label, " ⟳≤{}", repeat.max);
    }
    let label = label.replace('"', "'");
    match &node.action {
        // A subroutine's box, naming the workflow it runs.
        super::definition::ActionDef::Workflow { name, .. } => {
            let label = label.replacen("workflow", &format!("workflow {name}"), 1);
            format!("{}[[\"{label}\"]]", node.id)
        }
        _ => format!("{}[\"{label}\"]", node.id),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_node_is_marked_with_its_retries_and_its_repetition() {
        let text = r#"
            [nodes.poll]
            value = "1"
            retry = { max_attempts = 3 }
            repeat = { until = "output == 1", max = 7 }
            [nodes.plain]
            value = "2"
            needs = ["poll"]
        "#;
        let def = crate::engine::loader::parse_toml("t.toml", "t", text).unwrap();
        let chart = super::render(&def);
        assert!(
            chart.contains(r#"poll["poll<br/>value ↻3 ⟳≤7"]"#),
            "{chart}"
        );
        assert!(chart.contains(r#"plain["plain<br/>value"]"#), "{chart}");
        assert!(chart.contains("poll --> plain"), "{chart}");
    }

    #[test]
    fn a_workflow_node_is_a_subroutine_naming_its_workflow() {
        let text = r#"
            [nodes.checks]
            workflow = { name = "bootstrap", inputs = { dir = "docs" } }
            repeat = { until = "output.ok", max = 3 }
        "#;
        let def = crate::engine::loader::parse_toml("t.toml", "t", text).unwrap();
        let chart = super::render(&def);
        assert!(
            chart.contains(r#"checks[["checks<br/>workflow bootstrap ⟳≤3"]]"#),
            "{chart}"
        );
    }
}
