//! The operator's commands (`--commands`): loaded when the application opens, said what
//! this kernel can confine of them, and reloaded when the operator asks (SIGHUP), the
//! commands in force kept when the file is refused.

use std::path::Path;

use super::App;
use crate::engine::command::{CommandSet, LoadError, Runner};
use crate::engine::installed::Installed;
use crate::engine::validate::command_problems;

/// The commands of the file at `path` (or none without one), with what this kernel can
/// enforce on them logged, and each command it cannot confine as asked named.
pub(super) fn open(path: Option<&Path>) -> Result<CommandSet, LoadError> {
    let Some(path) = path else {
        return Ok(CommandSet::none());
    };
    let set = CommandSet::load(path, Runner::new())?;
    let confinement = set.runner().confinement();
    let commands = set.current();
    tracing::info!(
        file = %path.display(),
        commands = commands.len(),
        landlock_abi = confinement.abi(),
        "commands file loaded; confinement: {confinement}"
    );
    log_unconfinable(&set);
    Ok(set)
}

/// Warns of each command this kernel cannot confine as it asks: it is refused when a node
/// runs it, unless it says `unconfined = true` (then it runs unconfined, which is said too).
fn log_unconfinable(set: &CommandSet) {
    let confinement = set.runner().confinement();
    let commands = set.current();
    for name in commands.names() {
        let Some(spec) = commands.get(name) else {
            continue;
        };
        if let Some(lack) = confinement.lacks(spec) {
            match spec.unconfined {
                true => tracing::warn!(command = name, "runs unconfined: {lack}"),
                false => tracing::warn!(command = name, "is refused on this host: {lack}"),
            }
        }
    }
}

/// Warns of each `command` node of the installed workflows whose command the file does
/// not name, or whose written-out arguments its parameters refuse: such a node fails
/// when it runs, unless the file is reloaded with what it needs.
pub(super) fn log_unknown(workflows: &Installed, set: &CommandSet) {
    let commands = set.current();
    for entry in workflows.entries() {
        for problem in command_problems(&entry.def, &commands) {
            tracing::warn!(workflow = %entry.def.name, "{problem}");
        }
    }
}

impl App {
    /// Reads the commands file again: its commands replace those in force, or, when it is
    /// refused, those in force stay and the log says why. Nothing without a commands file.
    pub fn reload_commands(&self) {
        let set = self.engine.commands();
        match set.reload() {
            None => {}
            Some(Ok(count)) => {
                let file = set.path().map(Path::display);
                tracing::info!(file = %file.expect("a reload reads a file"), commands = count, "commands file reloaded");
                log_unconfinable(set);
                log_unknown(&self.workflows, set);
            }
            Some(Err(error)) => {
                tracing::error!("{error}\nthe commands in force stay as they were");
            }
        }
    }
}
