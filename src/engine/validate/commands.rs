//! A workflow's `command` nodes checked against a commands file, for `workflows validate`:
//! a name the file does not hold, and arguments written out (no template in them) that its
//! parameters refuse. The server itself does not refuse such a workflow at load: the file
//! may be reloaded with the command, and a node may test `command_allowed` first.

use super::super::command::Commands;
use super::super::definition::{ActionDef, Problem, WorkflowDef};
use super::super::template;

/// The problems of `def`'s command nodes against `commands`, each at its field.
pub fn command_problems(def: &WorkflowDef, commands: &Commands) -> Vec<Problem> {
    let mut problems = Vec::new();
    for node in def.nodes.values() {
        let ActionDef::Command { name, args } = &node.action else {
            continue;
        };
        let at = |field: &str| format!("nodes.{}.command.{field}", node.id);
        let Some(spec) = commands.get(name) else {
            let names: Vec<&str> = commands.names().collect();
            let known = match names.is_empty() {
                true => "it names none".to_owned(),
                false => format!("it names {}", names.join(", ")),
            };
            let message = format!(
                "unknown command `{name}`: the commands file does not name it ({known}); the \
                 node fails with `command_not_allowed` unless it is added"
            );
            problems.push(def.locations.problem(&at("name"), message));
            continue;
        };
        let Some(args) = args.as_object().filter(|_| !template::has_template(args)) else {
            continue;
        };
        if let Err(refused) = spec.argv(args) {
            for problem in refused {
                problems.push(def.locations.problem(&at("args"), problem));
            }
        }
    }
    problems
}
