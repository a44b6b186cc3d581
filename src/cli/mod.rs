//! The terminal commands beside the server: `workflows list|validate|run|show`, and the
//! commands on stored runs (`runs`, `status`, `resume`, `cancel`, `retry`, `purge`, `answer`).
//!
//! These write their results to stdout; they never run in server mode, where stdout
//! belongs to the protocol.

mod answers;
mod db;
mod prompt;
mod questions;
mod run;
mod runs;
mod summary;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::engine::command::Commands;
use crate::engine::definition::WorkflowDef;
use crate::engine::installed::{self, Entry, Installed};
use crate::engine::validate::{Limits, command_problems};

pub use db::{migrate, verify};
pub use run::{DriveArgs, RunArgs, run_workflow};
pub use runs::{answer, cancel, list_runs, purge, resume, retry, status};

/// Writes a line to stdout (allowed here: these are terminal commands, not server mode).
#[allow(clippy::print_stdout)]
pub(crate) fn say(text: &str) {
    println!("{text}");
}

/// Loads the installed workflows, each file validated under `limits` (a file's, with the
/// operator's caps), reporting rejected files on stderr.
pub fn load_installed(dir: Option<&Path>, limits: Limits) -> Installed {
    let (installed, rejected) = Installed::load_within(dir, limits);
    installed::log_rejected(&rejected);
    installed
}

/// An installed workflow by its name, or a path to a file (validated under `limits`).
pub fn resolve(installed: &Installed, name_or_path: &str, limits: Limits) -> Result<Entry, String> {
    if let Some(entry) = installed.get(name_or_path) {
        return Ok(entry.clone());
    }
    let path = PathBuf::from(name_or_path);
    if !path.exists() {
        let known: Vec<&str> = installed.entries().map(|e| e.def.name.as_str()).collect();
        return Err(format!(
            "no workflow named `{name_or_path}` and no such file; known workflows: {}",
            known.join(", ")
        ));
    }
    let def =
        installed::load_file_within(&path, limits).map_err(|problems| problems.to_string())?;
    let def = std::sync::Arc::new(def);
    let plan = std::sync::Arc::new(crate::engine::plan::Plan::new(std::sync::Arc::clone(&def)));
    Ok(Entry {
        def,
        plan,
        origin: path.display().to_string(),
    })
}

pub fn list(installed: &Installed) -> ExitCode {
    for entry in installed.entries() {
        let def: &WorkflowDef = &entry.def;
        say(&format!(
            "{:<28} {:>4} nodes  {}  ({})",
            def.name,
            def.nodes.len(),
            def.description,
            entry.origin
        ));
    }
    ExitCode::SUCCESS
}

/// Validates the given files, or every file of `dir` and the built-ins, under `limits`;
/// problems on stderr.
/// With a commands file, the commands their `command` nodes name must be in it, and the
/// arguments written out for them must fit their parameters.
pub fn validate(
    paths: &[PathBuf],
    dir: Option<&Path>,
    commands: Option<&Path>,
    limits: Limits,
) -> ExitCode {
    let commands = match commands.map(Commands::load).transpose() {
        Ok(commands) => commands,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = 0;
    let mut checked = 0;
    let mut report =
        |origin: &str, result: Result<WorkflowDef, crate::engine::definition::Problems>| {
            checked += 1;
            let result = result.and_then(|def| match &commands {
                Some(commands) => match command_problems(&def, commands) {
                    problems if problems.is_empty() => Ok(def),
                    problems => Err(crate::engine::definition::Problems(problems)),
                },
                None => Ok(def),
            });
            match result {
                Ok(def) => say(&format!(
                    "ok    {origin} ({}, {} nodes)",
                    def.name,
                    def.nodes.len()
                )),
                Err(problems) => {
                    failed += 1;
                    say(&format!("FAIL  {origin} ({} problems)", problems.0.len()));
                    for problem in &problems.0 {
                        eprintln!("{problem}");
                    }
                }
            }
        };
    if paths.is_empty() {
        let (installed, rejected) = Installed::load_within(dir, limits);
        for entry in installed.entries() {
            report(&entry.origin, Ok((*entry.def).clone()));
        }
        for file in rejected {
            report(&file.origin, Err(file.problems));
        }
    } else {
        for path in paths {
            let loaded = installed::load_file_within(path, limits);
            report(&path.display().to_string(), loaded);
        }
    }
    if failed > 0 {
        eprintln!("{failed} of {checked} workflow files have problems");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

pub fn show_mermaid(entry: &Entry) -> ExitCode {
    say(&crate::engine::mermaid::render(&entry.def));
    ExitCode::SUCCESS
}
