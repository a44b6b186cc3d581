//! A run's DAG as a picture: the nodes of its plan laid out in layers from left to right
//! (Sugiyama's method, by `rust-sugiyama`: layers, fewer crossings, then coordinates),
//! each coloured by its state and linked to its details, inside a box for its phase.
//!
//! A plan of more than [`MAX_DRAWN`] nodes is shown in summary form instead: its nodes
//! counted by phase and state. Ten thousand boxes help nobody, and laying them out would
//! cost the page seconds.

use std::collections::HashMap;
use std::fmt::Write as _;

use maud::{Markup, PreEscaped, html};

use crate::engine::plan::Plan;

/// The most nodes drawn one by one.
pub(super) const MAX_DRAWN: usize = 300;

const BOX_W: f64 = 168.0;
const BOX_H: f64 = 40.0;
/// Between two layers.
const LAYER_GAP: f64 = 64.0;
/// Between two nodes of a layer.
const NODE_GAP: f64 = 18.0;
/// Around the nodes of a phase, and above them for its name.
const PAD: f64 = 14.0;
const PHASE_LABEL: f64 = 18.0;
/// The most characters of a node's id its box shows; its title shows the whole.
const LABEL_CHARS: usize = 20;

/// A box: its left, top, width and height.
type Rect = (f64, f64, f64, f64);

/// A node's place in the picture: its top-left corner.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Place {
    x: f64,
    y: f64,
}

/// The picture of `plan`'s DAG, each node in the state `status_of` gives it (`pending`
/// when it gives none); or, for a large plan, its summary.
pub(super) fn picture(plan: &Plan, status_of: &dyn Fn(&str) -> Option<String>) -> Markup {
    if plan.nodes.len() > MAX_DRAWN {
        return summary(plan, status_of);
    }
    let places = layout(plan);
    let width = places.iter().map(|p| p.x + BOX_W).fold(0.0, f64::max) + PAD;
    let height = places.iter().map(|p| p.y + BOX_H).fold(0.0, f64::max) + PAD;
    let mut edges = String::new();
    for (child, node) in plan.nodes.iter().enumerate() {
        for &parent in &node.upstream {
            let (from, to) = (places[parent], places[child]);
            let (x1, y1) = (from.x + BOX_W, from.y + BOX_H / 2.0);
            let (x2, y2) = (to.x, to.y + BOX_H / 2.0);
            let bend = (x2 - x1) / 2.0;
            let _ = write!(
                edges,
                "<path d=\"M{x1:.1} {y1:.1} C{:.1} {y1:.1} {:.1} {y2:.1} {x2:.1} {y2:.1}\"></path>",
                x1 + bend,
                x2 - bend
            );
        }
    }
    html! {
        svg.dag role="img" aria-label="The run's nodes and what each waits on"
            viewBox=(format!("0 0 {width:.0} {height:.0}")) width=(format!("{width:.0}"))
            height=(format!("{height:.0}")) xmlns="http://www.w3.org/2000/svg" {
            @for (phase, (x, y, w, h)) in phase_boxes(plan, &places) {
                g.phase {
                    rect x=(x) y=(y) width=(w) height=(h) rx="8" {}
                    text x=(x + 8.0) y=(y + 14.0) { (phase) }
                }
            }
            g.edges { (PreEscaped(edges)) }
            @for (node, place) in plan.nodes.iter().zip(&places) {
                @let status = status_of(node.id.as_ref()).unwrap_or_else(|| "pending".to_owned());
                a href=(format!("#node-{}", node.id)) {
                    g class=(format!("node {status}")) data-node=(node.id.as_ref()) {
                        title { (node.id.as_ref()) ": " (status) }
                        rect x=(place.x) y=(place.y) width=(BOX_W) height=(BOX_H) rx="6" {}
                        text x=(place.x + 10.0) y=(place.y + 17.0) { (short(node.id.as_ref())) }
                        text.state x=(place.x + 10.0) y=(place.y + 32.0) { (status) }
                    }
                }
            }
        }
    }
}

/// Where each node of `plan` goes, by index.
fn layout(plan: &Plan) -> Vec<Place> {
    let count = plan.nodes.len();
    let vertices: Vec<(u32, (f64, f64))> = (0..count)
        // Laid out top to bottom and then turned: a layer's nodes stand one above another.
        .map(|i| (i as u32, (BOX_H, BOX_W)))
        .collect();
    let edges: Vec<(u32, u32)> = plan
        .nodes
        .iter()
        .enumerate()
        .flat_map(|(child, node)| node.upstream.iter().map(move |&p| (p as u32, child as u32)))
        .collect();
    let config = rust_sugiyama::configure::Config {
        vertex_spacing: NODE_GAP,
        ..Default::default()
    };
    let components = rust_sugiyama::from_vertices_and_edges(&vertices, &edges, &config);
    let mut places = vec![Place { x: PAD, y: PAD }; count];
    // Components stand one below another.
    let mut top = PAD;
    for (component, _, _) in components {
        let component: Vec<(usize, (f64, f64))> =
            component.into_iter().filter(|(i, _)| *i < count).collect();
        if component.is_empty() {
            continue;
        }
        let mut layers: Vec<f64> = component.iter().map(|(_, (_, y))| *y).collect();
        layers.sort_by(f64::total_cmp);
        layers.dedup();
        let across_min = component
            .iter()
            .map(|(_, (x, _))| *x)
            .fold(f64::MAX, f64::min);
        let mut bottom = top;
        for (index, (across, along)) in component {
            let layer = layers.iter().position(|y| *y == along).unwrap_or(0);
            let y = top + PHASE_LABEL + (across - across_min);
            places[index] = Place {
                x: PAD + layer as f64 * (BOX_W + LAYER_GAP),
                y,
            };
            bottom = bottom.max(y + BOX_H);
        }
        top = bottom + NODE_GAP + PAD + PHASE_LABEL;
    }
    places
}

/// The box of each phase around its nodes, in the order the phases first appear.
fn phase_boxes<'a>(plan: &'a Plan, places: &[Place]) -> Vec<(&'a str, Rect)> {
    let mut boxes: Vec<(&str, Rect)> = Vec::new();
    for (node, place) in plan.nodes.iter().zip(places) {
        let Some(phase) = node.phase.and_then(|i| plan.phases.get(i)) else {
            continue;
        };
        let phase = phase.as_str();
        let (x0, y0) = (place.x - PAD / 2.0, place.y - PAD / 2.0 - PHASE_LABEL);
        let (x1, y1) = (place.x + BOX_W + PAD / 2.0, place.y + BOX_H + PAD / 2.0);
        match boxes.iter_mut().find(|(name, _)| *name == phase) {
            Some((_, (x, y, w, h))) => {
                let (right, bottom) = (*x + *w, *y + *h);
                *x = x.min(x0);
                *y = y.min(y0);
                *w = right.max(x1) - *x;
                *h = bottom.max(y1) - *y;
            }
            None => boxes.push((phase, (x0, y0, x1 - x0, y1 - y0))),
        }
    }
    boxes
}

/// A large plan's nodes counted by phase and state.
fn summary(plan: &Plan, status_of: &dyn Fn(&str) -> Option<String>) -> Markup {
    let mut counts: Vec<(String, HashMap<String, usize>)> = Vec::new();
    for node in &plan.nodes {
        let phase = node
            .phase
            .and_then(|i| plan.phases.get(i).cloned())
            .unwrap_or_else(|| "(no phase)".to_owned());
        let status = status_of(node.id.as_ref()).unwrap_or_else(|| "pending".to_owned());
        let at = match counts.iter().position(|(name, _)| *name == phase) {
            Some(at) => at,
            None => {
                counts.push((phase, HashMap::new()));
                counts.len() - 1
            }
        };
        *counts[at].1.entry(status).or_default() += 1;
    }
    const STATES: [&str; 6] = [
        "pending",
        "running",
        "succeeded",
        "failed",
        "skipped",
        "cancelled",
    ];
    html! {
        p { "This run has " (plan.nodes.len()) " nodes, too many to draw one by one: here they are counted by phase and state." }
        table.summary {
            thead { tr { th scope="col" { "Phase" } @for state in STATES { th scope="col" { (state) } } } }
            tbody {
                @for (phase, by_state) in &counts {
                    tr {
                        th scope="row" { (phase) }
                        @for state in STATES {
                            td class=(state) { (by_state.get(state).copied().unwrap_or(0)) }
                        }
                    }
                }
            }
        }
    }
}

/// A node id cut to what its box shows.
fn short(id: &str) -> String {
    if id.chars().count() <= LABEL_CHARS {
        return id.to_owned();
    }
    let mut cut: String = id.chars().take(LABEL_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::engine::loader::parse_toml;

    fn plan(toml: &str) -> Plan {
        let def = parse_toml("test.toml", "test", toml).expect("a valid workflow");
        Plan::new(Arc::new(def))
    }

    const DIAMOND: &str = r#"
        name = "diamond"
        [nodes.start]
        phase = "one"
        render = "a"
        [nodes.left]
        needs = ["start"]
        phase = "two"
        render = "b"
        [nodes.right]
        needs = ["start"]
        phase = "two"
        render = "c"
        [nodes.a_node_whose_id_is_long]
        needs = ["left", "right"]
        render = "d"
    "#;

    #[test]
    fn each_node_stands_right_of_every_node_it_needs() {
        let plan = plan(DIAMOND);
        let places = layout(&plan);
        for (child, node) in plan.nodes.iter().enumerate() {
            for &parent in &node.upstream {
                assert!(places[parent].x + BOX_W < places[child].x, "{places:?}");
            }
        }
        let (left, right) = (places[1], places[2]);
        assert_eq!(left.x, right.x, "two nodes of one layer share a column");
        assert!(
            (left.y - right.y).abs() >= BOX_H,
            "and do not overlap: {places:?}"
        );
    }

    #[test]
    fn a_node_is_drawn_in_its_state_inside_its_phase_and_links_to_its_details() {
        let plan = plan(DIAMOND);
        let states = |id: &str| (id == "left").then(|| "failed".to_owned());
        let svg = picture(&plan, &states).into_string();
        assert!(
            svg.contains(r#"class="node failed" data-node="left""#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"class="node pending" data-node="right""#),
            "{svg}"
        );
        assert!(svg.contains(r##"href="#node-left""##), "{svg}");
        assert!(svg.contains(">two</text>"), "the phase is named: {svg}");
        assert!(
            svg.contains(">a_node_whose_id_is_…</text>"),
            "a long id is cut: {svg}"
        );
        assert_eq!(svg.matches("<path ").count(), 4, "one curve an edge: {svg}");
    }

    #[test]
    fn a_plan_too_large_to_draw_is_counted_by_phase_and_state() {
        let mut toml = String::from("name = \"wide\"\n");
        for i in 0..=MAX_DRAWN {
            let phase = if i % 2 == 0 { "even" } else { "odd" };
            let _ = write!(toml, "[nodes.n{i}]\nphase = \"{phase}\"\nrender = \"x\"\n");
        }
        let plan = plan(&toml);
        let states = |id: &str| (id == "n0").then(|| "succeeded".to_owned());
        let page = picture(&plan, &states).into_string();
        assert!(!page.contains("<svg"), "no picture of every node");
        assert!(
            page.contains(&format!("has {} nodes", MAX_DRAWN + 1)),
            "{page}"
        );
        let even = page.split("<th scope=\"row\">even</th>").nth(1).unwrap();
        let counts =
            r#"<td class="pending">150</td><td class="running">0</td><td class="succeeded">1</td>"#;
        assert!(even.starts_with(counts), "{even}");
    }
}
