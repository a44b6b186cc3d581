//! A temporary folder for a test that runs the binary: a workflows folder, a workspace (the
//! folder runs write in, which must not hold the database) and the path of a database
//! file beside them.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use tempfile::TempDir;

use super::BIN;

pub(crate) struct Sandbox {
    pub(crate) dir: TempDir,
    /// `tasks.db` in the folder, made by the first server started on it.
    pub(crate) db: PathBuf,
    pub(crate) workflows: PathBuf,
    pub(crate) workspace: PathBuf,
}

impl Sandbox {
    pub(crate) fn new() -> Sandbox {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let workflows = dir.path().join("workflows");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workflows).unwrap();
        std::fs::create_dir(&workspace).unwrap();
        Sandbox {
            db: dir.path().join("tasks.db"),
            dir,
            workflows,
            workspace,
        }
    }

    /// `name` in the folder.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `text` to `name` in the folder (outside the workflows folder).
    pub(crate) fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes `text` to `name` in the workflows folder.
    pub(crate) fn workflow(&self, name: &str, text: &str) -> PathBuf {
        let path = self.workflows.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The binary with `--db <db>` (a file's path or a PostgreSQL URL), `--workflows` and
    /// `--workspace` into the folder, run from the folder with none of the server's
    /// settings inherited from this process and stdin closed.
    pub(crate) fn binary(&self, db: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(BIN);
        command
            .arg("--db")
            .arg(db)
            .arg("--workflows")
            .arg(&self.workflows)
            .arg("--workspace")
            .arg(&self.workspace)
            .env_remove("TASKS_DB_PATH")
            .env_remove("TASKS_WORKFLOWS_DIR")
            .env_remove("TASKS_WORKSPACE")
            .env_remove("RUST_LOG")
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        command
    }
}
