//! Where the server's own files lie: never inside the workspace. The database (with its
//! `-wal`, `-shm` and `-journal` files beside it), the tokens file and the PostgreSQL
//! password file hold what no client may read (other principals' runs and sessions, the
//! key that signs `requestState`, the tokens themselves), and the file actions of
//! workflows and the `file://` resources reach everything under the workspace. So a
//! workspace that holds one of them is refused at start, every one named at once, with
//! how to fix it.
//!
//! Invariant: no server file the operator named lies under the workspace when the
//! application opens (`App::open` checks before it opens the database).

use std::path::{Path, PathBuf};

/// One of the server's own files, named by what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFile {
    /// What it is, as a person names it: `the database`, `the tokens file`.
    pub what: &'static str,
    pub path: PathBuf,
}

impl ServerFile {
    pub fn new(what: &'static str, path: impl Into<PathBuf>) -> ServerFile {
        ServerFile {
            what,
            path: path.into(),
        }
    }

    /// The SQLite file of `db` (a path, or a `file:` URI), if it names a file: not
    /// `:memory:` nor a PostgreSQL URL.
    pub fn database(db: &str) -> Option<ServerFile> {
        if db == ":memory:" || crate::store::is_url(db) {
            return None;
        }
        let path = match db.strip_prefix("file:") {
            Some(uri) => {
                let path = uri.split(['?', '#']).next().unwrap_or(uri);
                let path = path.strip_prefix("//localhost").unwrap_or(path);
                if path.is_empty() || path == ":memory:" {
                    return None;
                }
                super::resources::percent_decoded(path)?
            }
            None => db.to_owned(),
        };
        Some(ServerFile::new("the database", path))
    }
}

/// Refuses a workspace that holds any of `files`, each named with how to fix it.
pub(crate) fn check(workspace: &Path, files: &[ServerFile]) -> anyhow::Result<()> {
    let Some(root) = resolved(workspace) else {
        return Ok(());
    };
    let problems: Vec<String> = files
        .iter()
        .filter(|file| resolved(&file.path).is_some_and(|path| path.starts_with(&root)))
        .map(|file| {
            format!(
                "the workspace {} holds {} ({}): workflows read and write every file under \
                 the workspace, and clients read them as resources, so {} would be theirs \
                 to read; {}",
                workspace.display(),
                file.what,
                file.path.display(),
                file.what,
                fix(file),
            )
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    anyhow::bail!("{}", problems.join("\n"))
}

/// How to move `file` out of the workspace.
fn fix(file: &ServerFile) -> String {
    match file.what {
        "the database" => format!(
            "give --workspace a folder of its own (by default ./workspace), or stop every \
             server that uses the database, move {} (with its -wal and -shm files, if any) \
             out of the workspace and pass its new path to --db",
            file.path.display()
        ),
        _ => format!(
            "give --workspace a folder of its own (by default ./workspace), or move {} out \
             of the workspace",
            file.path.display()
        ),
    }
}

/// `path` made absolute with every link resolved; a file that does not exist yet is its
/// folder's path, resolved, and its name. `None` when not even the folder exists.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(real) = std::fs::canonicalize(path) {
        return Some(real);
    }
    let absolute = std::path::absolute(path).ok()?;
    let folder = std::fs::canonicalize(absolute.parent()?).ok()?;
    Some(folder.join(absolute.file_name()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_holding_the_database_or_the_tokens_file_is_refused_naming_each() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("work")).unwrap();
        std::fs::write(root.join("tokens"), "").unwrap();
        let inside = [
            ServerFile::database(root.join("tasks.db").to_str().unwrap()).unwrap(),
            ServerFile::new("the tokens file", root.join("tokens")),
        ];
        let error = check(root, &inside).unwrap_err().to_string();
        assert_eq!(error.lines().count(), 2, "{error}");
        assert!(error.contains("holds the database"), "{error}");
        assert!(error.contains("holds the tokens file"), "{error}");
        assert!(error.contains("--workspace"), "{error}");
        // The database need not exist yet; `..` and a `file:` URI name the same file.
        let spelled = format!("file:{}/work/../tasks.db?mode=rwc", root.display());
        let database = ServerFile::database(&spelled).unwrap();
        assert!(check(root, &[database]).is_err());
        // Beside the workspace, not in it.
        assert!(check(&root.join("work"), &inside).is_ok());
    }

    #[test]
    fn a_link_into_the_workspace_is_followed_before_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("work")).unwrap();
        std::os::unix::fs::symlink(root.join("work"), root.join("alias")).unwrap();
        let database = ServerFile::database(root.join("alias/tasks.db").to_str().unwrap());
        assert!(check(&root.join("work"), &[database.unwrap()]).is_err());
    }

    #[test]
    fn memory_and_postgres_databases_are_no_files() {
        assert_eq!(ServerFile::database(":memory:"), None);
        assert_eq!(ServerFile::database("file::memory:?cache=shared"), None);
        assert_eq!(ServerFile::database("postgres://u@h/db"), None);
    }
}
