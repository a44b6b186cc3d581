//! The commands in force: the set the operator's file gave at start, replaced whole by each
//! reload that succeeds, and the runner that runs them. Without a commands file the set is
//! empty and no command runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{CommandSpec, Commands, LoadError, Runner};

/// The commands in force and their runner: cheap to clone, shared by every run. A reload
/// replaces the commands for the attempts that start after it; an attempt under way keeps
/// the spec it started with.
#[derive(Debug, Clone, Default)]
pub struct CommandSet {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The commands file; `None` when the operator gave none.
    path: Option<PathBuf>,
    commands: parking_lot::RwLock<Arc<Commands>>,
    runner: Runner,
}

impl CommandSet {
    /// No commands file: no command runs.
    pub fn none() -> CommandSet {
        CommandSet::default()
    }

    /// The commands of the file at `path`, refused with every problem of it (its
    /// permissions' and its content's), run by `runner`.
    pub fn load(path: &Path, runner: Runner) -> Result<CommandSet, LoadError> {
        let commands = Commands::load(path)?;
        Ok(CommandSet {
            inner: Arc::new(Inner {
                path: Some(path.to_owned()),
                commands: parking_lot::RwLock::new(Arc::new(commands)),
                runner,
            }),
        })
    }

    /// The commands of `toml`, as a file would give them, run by `runner`: for tests.
    #[cfg(any(test, feature = "testing"))]
    pub fn parse(toml: &str, runner: Runner) -> Result<CommandSet, Vec<String>> {
        Ok(CommandSet {
            inner: Arc::new(Inner {
                path: None,
                commands: parking_lot::RwLock::new(Arc::new(Commands::parse(toml)?)),
                runner,
            }),
        })
    }

    /// Reads the commands file again. On success its commands replace the ones in force
    /// and their count is returned; on failure the ones in force stay, and the error says
    /// why. `None` without a commands file.
    pub fn reload(&self) -> Option<Result<usize, LoadError>> {
        let path = self.inner.path.as_deref()?;
        Some(Commands::load(path).map(|commands| {
            let count = commands.len();
            *self.inner.commands.write() = Arc::new(commands);
            count
        }))
    }

    /// The commands file, when there is one.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// The commands in force now.
    pub fn current(&self) -> Arc<Commands> {
        Arc::clone(&self.inner.commands.read())
    }

    /// The command named `name` in force now.
    pub fn get(&self, name: &str) -> Option<CommandSpec> {
        self.inner.commands.read().get(name).cloned()
    }

    /// Whether a node may run the command `name` now: the file names it, and this kernel
    /// confines it as it asks (or the operator let it run unconfined). What a workflow's
    /// `command_allowed("name")` answers.
    pub fn allowed(&self, name: &str) -> bool {
        let commands = self.inner.commands.read();
        commands.get(name).is_some_and(|spec| {
            spec.unconfined || self.inner.runner.confinement().lacks(spec).is_none()
        })
    }

    /// What runs the commands.
    pub fn runner(&self) -> &Runner {
        &self.inner.runner
    }
}
