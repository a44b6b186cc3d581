//! An operator's commands: programs a workflow may run by name, only if the operator named
//! them in a commands file given at start (`--commands FILE`), each in a sandbox.
//!
//! A workflow never says what to run: it names a command of the file and gives values for
//! its parameters. The file fixes the program and every other element of its argv; a value
//! fills one whole element, as is, never split and never read by a shell.
//!
//! # The API
//! - [`Commands::load`] reads the file, refusing it with every problem named by line
//!   ([`LoadError`]). It holds no global state: a reload (on SIGHUP) calls it again and
//!   keeps the old [`Commands`] in force when it fails.
//! - [`Commands::get`] and [`Commands::names`]: the commands by name.
//! - [`CommandSpec::argv`] checks a call's values against the parameters' schemas and builds
//!   the [`Argv`]; [`CommandSpec::on_resume`] says what a run resumed after a crash in the
//!   middle of this command does ([`OnResume`]).
//! - [`confinement_available`]: what the kernel can enforce ([`Confinement`]), to be said
//!   once at start.
//! - [`Runner`]: the server's environment (a snapshot taken at start, from which a command's
//!   allow-listed variables are copied) and the confinement; [`Runner::run`] runs an argv in
//!   a workspace until it ends, times out or is cancelled, and gives a [`Ran`]. Dropping the
//!   future kills the command too.
//! - [`Ran::ok`] says whether the node succeeds (an exit the operator lists as fine);
//!   [`Ran::audit`] gives the fields of the command's audit row: its name, final argv, exit,
//!   duration and the SHA-256 of its output.
//! - [`CommandSet`]: the commands in force (replaced whole by each reload that succeeds)
//!   and their runner, shared by every run; what `command_allowed("name")` asks.
//! - `node`: what a `command` node makes of all this (its output, its errors, its audit
//!   rows, the mark a started command leaves in its unit's record, and the question a run
//!   resumed in the middle of it puts); the scheduler's `commands.rs` drives it.
//!
//! # The commands file
//! TOML, one table per command:
//!
//! ```toml
//! [commands.validate_bootstrap]
//! description = "Checks a bootstrap target"   # optional
//! argv = ["/bin/bash", "scripts/bootstrap/validate_bootstrap.sh", "{target}"]
//! timeout = "5m"               # wall time; default 5m, at most 24h
//! max_output = "1MiB"          # kept per stream; the rest is read and discarded; default 1MiB
//! max_memory = "1GiB"          # address space (RLIMIT_AS); default 1GiB
//! max_processes = 64           # RLIMIT_NPROC; default 64 (see below)
//! max_file_size = "64MiB"      # the largest file it may write (RLIMIT_FSIZE); default 64MiB
//! env = ["PATH", "HOME", "LANG"]   # copied from the server's environment; nothing else is
//! writable = ["scripts/bootstrap", "out"]  # folders of the workspace it may write
//! network = false              # false: TCP bind and connect are denied; default false
//! ok_exit_codes = [0, 1]       # exits that do not fail the node; default [0]
//! on_resume = "ask"            # after a crash in the middle of it: "ask", "rerun" or "fail"
//! unconfined = false           # true: run it even where the kernel cannot confine it
//!
//! [commands.validate_bootstrap.params.target]
//! type = "string"              # "string", "integer" or "boolean"
//! maxLength = 64               # any keyword of the project's schema subset (`crate::schema`)
//! allowLeadingDash = false     # true: a value may start with `-`
//! multiline = false            # true: a string value may hold line breaks
//! ```
//!
//! - `argv[0]` is an absolute path. An element that is exactly `{name}` is a placeholder,
//!   filled by the value of parameter `name`; a placeholder inside a larger element
//!   (`--out={dir}`) is refused, as are a placeholder naming no parameter and a parameter
//!   no placeholder uses. Relative paths in other elements are read from the workspace, the
//!   command's working directory: a script kept there is only as trusted as whatever may
//!   write the workspace (a `write_file` node, a command with that folder writable).
//! - A value fills its element as is. Always refused: a NUL; a value (of any type) whose
//!   text starts with `-` unless the parameter says `allowLeadingDash = true`, so that no
//!   value is taken for an option; a line break unless it says `multiline = true`. Integers
//!   and booleans become their decimal text and `true` or `false`. A parameter without a
//!   value takes its schema's `default`, else is required; a value for no parameter is
//!   refused.
//! - Sizes are a whole number of bytes, or one with a unit: `B`, `KiB`, `MiB`, `GiB`, or
//!   `kB`, `MB`, `GB` (powers of ten). Durations are as in workflow files (`30s`, `1m30s`).
//! - `writable` folders are relative to the workspace, without `..`; `.` is the workspace
//!   itself. Each must exist when the command runs, and is refused then if it resolves (by
//!   a symbolic link) outside the workspace.
//! - The file is refused when its group or others may write it, or when it is owned by
//!   neither the server's user nor root: whoever can change it can run any program as the
//!   server.
//!
//! # The sandbox
//! Each command runs with no shell, a cleared environment but for its `env`, the
//! workspace as working directory, stdin from `/dev/null`, no other inherited file
//! descriptor, in a session and process group of its own (killed whole at its end, its
//! timeout, cancellation or drop), under resource limits, and confined by Landlock
//! ([`Confinement`]): it reads and executes anywhere, writes only under its `writable`
//! folders and `/dev/null`, cannot signal processes outside its sandbox (the server among
//! them), and without `network` cannot bind or connect TCP sockets nor reach abstract Unix
//! sockets. Where the kernel cannot enforce what a command needs (writes confined: Landlock
//! ABI 3; no network: ABI 4), it is refused unless it says `unconfined = true`.
//!
//! Limits of the sandbox, said here so that an operator can weigh them:
//! - `max_processes` is `RLIMIT_NPROC`, which counts every process of the server's user,
//!   not the command's alone (set it above what that user runs already), and which the
//!   kernel does not enforce for root.
//! - A process that leaves the command's group (`setsid`) outlives the kill; it stays
//!   confined and limited, and the run stops reading its output shortly after the
//!   command's end ([`Ran::left_open`]).
//! - UDP and raw sockets are not denied before Landlock ABI 10; pathname Unix sockets are
//!   reachable before ABI 9.

mod decoder;
mod fields;
mod file;
pub(crate) mod node;
mod output;
mod params;
mod run;
mod sandbox;
mod set;
mod spec;
mod units;

#[cfg(test)]
mod file_tests;
#[cfg(test)]
mod params_tests;
#[cfg(test)]
mod run_tests;
#[cfg(test)]
mod sandbox_tests;

use std::path::PathBuf;
use std::time::Duration;

use indexmap::IndexMap;

pub use file::LoadError;
pub use params::Argv;
pub(crate) use params::{Element, Param};
pub use run::{Outcome, Ran, RunError, Runner};
pub use sandbox::{Confinement, confinement_available};
pub use set::CommandSet;

/// The commands of a commands file, by name, in the file's order.
#[derive(Debug, Clone, Default)]
pub struct Commands {
    commands: IndexMap<String, CommandSpec>,
}

impl Commands {
    /// The command named `name`.
    pub fn get(&self, name: &str) -> Option<&CommandSpec> {
        self.commands.get(name)
    }

    /// The names of the commands, in the file's order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.commands.keys().map(String::as_str)
    }

    /// How many commands there are.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// Whether the file names no command.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }
}

/// What a run resumed after a crash in the middle of a command does with it: the command
/// may have done part of its work, so only the operator knows whether running it again is
/// safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnResume {
    /// Ask the person who started the run whether to run it again.
    #[default]
    Ask,
    /// Run it again.
    Rerun,
    /// Fail its node.
    Fail,
}

/// One command of the commands file.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    /// The argv template: fixed elements and placeholders.
    pub(crate) template: Vec<Element>,
    pub(crate) params: IndexMap<String, Param>,
    pub(crate) timeout: Duration,
    /// Bytes kept of each of stdout and stderr.
    pub(crate) max_output: usize,
    pub(crate) max_memory: u64,
    pub(crate) max_processes: u64,
    pub(crate) max_file_size: u64,
    /// The variables copied from the server's environment.
    pub(crate) env: Vec<String>,
    /// Folders of the workspace the command may write, relative, without `..`.
    pub(crate) writable: Vec<PathBuf>,
    pub(crate) network: bool,
    pub(crate) ok_exit_codes: Vec<i32>,
    pub(crate) on_resume: OnResume,
    pub(crate) unconfined: bool,
}

impl CommandSpec {
    /// The command's name in the commands file.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the operator wrote the command does, if anything.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The names of its parameters, in the file's order.
    pub fn param_names(&self) -> impl Iterator<Item = &str> {
        self.params.keys().map(String::as_str)
    }

    /// What a run resumed after a crash in the middle of this command does with it.
    pub fn on_resume(&self) -> OnResume {
        self.on_resume
    }

    /// The wall time it may take before its process group is killed.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether `code` is an exit the operator lists as fine.
    pub fn ok_exit(&self, code: i32) -> bool {
        self.ok_exit_codes.contains(&code)
    }
}
