//! The commands file: read, its permissions checked, and decoded into [`Commands`], every
//! problem reported at once with its line.
//!
//! The TOML is first turned into JSON while the line of every field is recorded under its
//! dotted path (`commands.build.argv[2]`, `decoder.rs`); the decoder then reads the JSON
//! (`spec.rs`, `fields.rs`) and names the line of whatever it refuses.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use toml::de::DeTable;

use super::Commands;
use super::decoder::{Decoder, Lines};

/// A commands file refused: why, every problem with its line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("commands file {} is not valid:\n{}", path.display(), problems.join("\n"))]
pub struct LoadError {
    pub path: PathBuf,
    pub problems: Vec<String>,
}

impl Commands {
    /// Reads the commands file at `path`: every problem of it at once, its permissions'
    /// and its content's, each with its line. Call it again to reload; a failure leaves
    /// whatever the caller holds in force.
    pub fn load(path: &Path) -> Result<Commands, LoadError> {
        let refuse = |problems| LoadError {
            path: path.to_owned(),
            problems,
        };
        let cannot_read = |e: std::io::Error| refuse(vec![format!("cannot read it: {e}")]);
        // The checks and the read go through one open file, so what is checked is read.
        let file = std::fs::File::open(path).map_err(cannot_read)?;
        let metadata = file.metadata().map_err(cannot_read)?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let server_uid = unsafe { libc::geteuid() };
        let mut problems = permission_problems(&metadata, server_uid, path);
        if !metadata.is_file() {
            return Err(refuse(problems));
        }
        let text = std::io::read_to_string(file).map_err(cannot_read)?;
        match Commands::parse(&text) {
            Ok(commands) if problems.is_empty() => Ok(commands),
            Ok(_) => Err(refuse(problems)),
            Err(more) => {
                problems.extend(more);
                Err(refuse(problems))
            }
        }
    }

    /// The commands of `text`, or its problems, each with its line.
    pub(crate) fn parse(text: &str) -> Result<Commands, Vec<String>> {
        let lines = Lines::new(text);
        let root = DeTable::parse(text).map_err(|error| {
            let line = error.span().map_or(1, |span| lines.line(span.start));
            vec![format!("line {line}: invalid TOML: {}", error.message())]
        })?;
        let mut decoder = Decoder::default();
        let value = decoder.toml_table(&lines, "", root.get_ref());
        let commands = decoder.file(&value);
        decoder.finish().map(|()| Commands { commands })
    }
}

/// Why a file with `metadata` cannot be trusted to hold only what the operator wrote.
pub(super) fn permission_problems(
    metadata: &std::fs::Metadata,
    server_uid: u32,
    path: &Path,
) -> Vec<String> {
    let path = path.display();
    let mut problems = Vec::new();
    if !metadata.is_file() {
        problems.push("it is not a regular file".to_owned());
    }
    let mode = metadata.mode() & 0o7777;
    if mode & 0o022 != 0 {
        problems.push(format!(
            "its group or others may write it (mode {mode:04o}), and whoever changes it \
             can run any program as this server; make it writable by its owner alone with \
             `chmod go-w {path}`"
        ));
    }
    let owner = metadata.uid();
    if owner != server_uid && owner != 0 {
        problems.push(format!(
            "it is owned by uid {owner}, neither this server's user (uid {server_uid}) nor \
             root, and its owner can run any program as this server; give it to this user \
             with `chown {server_uid} {path}`"
        ));
    }
    problems
}
