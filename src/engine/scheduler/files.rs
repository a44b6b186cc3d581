//! A run's file actions: the write that a resumed run never makes twice, and the
//! read-only `list_dir` and `read_file`, which a resumed run may simply make again.
//! Each action is audited: its path, the bytes it moved, the run and the node; in a
//! recorded run, the row commits in the batch that records the unit.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::Run;
use crate::engine::actions::Resolved;
use crate::engine::files::{self, WriteMode};
use crate::engine::journal::{PendingAudit, Wrote};
use crate::engine::report::NodeError;
use crate::todos::{AuditOutcome, Origin};

impl Run {
    /// Writes a file so that a resumed run never writes it twice, nor calls its own
    /// earlier write a conflict, nor lands it once another process took the run over: the
    /// content's hash is committed before the write, the write is a temporary file renamed
    /// into place by the journal's [`commit_placing`](crate::engine::journal::Journal::commit_placing)
    /// (so only while this process holds the lease), and a resumed attempt whose hash was
    /// recorded finds the identical file there and is done. The temporary file is named
    /// after the unit, so that a resumed attempt replaces one a killed attempt left.
    /// `None` if the journal refused.
    pub(super) fn write_file(
        &mut self,
        node: usize,
        instance: Option<usize>,
        path: &str,
        content: &str,
        overwrite: bool,
    ) -> Option<Result<Value, NodeError>> {
        let root = self.env.workspace.clone();
        let mut mode = WriteMode {
            overwrite,
            writer: None,
            sync_folders: self.env.sync_folders,
        };
        if self.journal.is_none() {
            if self.lost() {
                return None;
            }
            let result = files::write_file(&root, path, content, mode);
            self.audit_write(node, instance, path, content, &result);
            return Some(result);
        }
        let intent = files::content_hash(content);
        if self.state.unit(node, instance).intent.as_deref() == Some(intent.as_str())
            && files::already_written(&root, path, content)
        {
            // The write of an attempt cut short; its row may be missing, so it is written
            // again (a row too many rather than a write without one).
            let done = Ok(json!({ "path": path, "bytes": content.len() }));
            self.audit_write(node, instance, path, content, &done);
            return Some(done);
        }
        self.state.unit_mut(node, instance).intent = Some(intent);
        self.flush();
        if self.lost() {
            return None;
        }
        let writer = match instance {
            Some(instance) => format!("{}.{node}.{instance}", self.run_id),
            None => format!("{}.{node}", self.run_id),
        };
        mode.writer = Some(&writer);
        let result = match files::stage(&root, path, content, mode) {
            Ok(staged) => self.place(staged)?,
            Err(error) => Err(error),
        };
        self.audit_write(node, instance, path, content, &result);
        Some(result)
    }

    /// The audit row of a `write_file`; a write that landed is recorded with it as its
    /// path's last, with the SHA-256 of `content`, so that its run's owner may read it.
    fn audit_write(
        &mut self,
        node: usize,
        instance: Option<usize>,
        path: &str,
        content: &str,
        result: &Result<Value, NodeError>,
    ) {
        let wrote = match result {
            Ok(_) => files::normalised(path).map(|path| Wrote {
                path,
                sha256: crate::auth::sha256_hex(content.as_bytes()),
                bytes: content.len() as u64,
            }),
            Err(_) => None,
        };
        self.audit_file(node, instance, "write_file", path, result, wrote);
    }

    /// Renames a staged file into place inside a transaction that first checks and
    /// extends this process's lease on the run; `None`, the file discarded, if the lease
    /// is lost (the run is then given up here).
    fn place(&mut self, staged: files::Staged) -> Option<Result<Value, NodeError>> {
        let journal = Arc::clone(self.journal.as_ref()?);
        let mut staged = Some(staged);
        let mut placed = None;
        let committed = journal.commit_placing(&self.batch(None), &mut || {
            placed = staged.take().map(files::Staged::place);
        });
        match committed {
            Ok(()) => {
                self.committed();
                placed
            }
            Err(error) => {
                if let Some(staged) = staged {
                    staged.discard();
                }
                self.lose(error);
                None
            }
        }
    }

    /// Whether this process gave the run up, its journal having refused a write: it then
    /// writes nothing more of the run, files and audit rows included.
    pub(super) fn lost(&self) -> bool {
        matches!(self.stop, Some(super::Stop::Lost(_)))
    }

    /// A `list_dir` or `read_file` attempt, audited.
    pub(super) fn read(
        &mut self,
        node: usize,
        instance: Option<usize>,
        action: &Resolved,
    ) -> Result<Value, NodeError> {
        let root = &self.env.workspace;
        let (name, path, result) = match action {
            Resolved::ListDir(path) => ("list_dir", path, files::list_dir(root, path)),
            Resolved::ReadFile { path, max_bytes } => {
                ("read_file", path, files::read_file(root, path, *max_bytes))
            }
            _ => unreachable!("only reads are read"),
        };
        self.audit_file(node, instance, name, path, &result, None);
        result
    }

    /// The audit row of a file action, under the action's name: the path, and what it
    /// moved (the bytes written or read, the entries listed), or why it failed. In a
    /// recorded run the row commits with the unit's record, in the run's next batch;
    /// otherwise it is appended at once.
    fn audit_file(
        &mut self,
        node: usize,
        instance: Option<usize>,
        action: &'static str,
        path: &str,
        result: &Result<Value, NodeError>,
        wrote: Option<Wrote>,
    ) {
        let mut args = Map::new();
        args.insert("path".into(), json!(path));
        if let Some(k) = instance {
            args.insert("instance".into(), json!(k));
        }
        let outcome = match result {
            Ok(output) => {
                let moved = match action {
                    "list_dir" => (
                        "entries",
                        json!(output["entries"].as_array().map_or(0, Vec::len)),
                    ),
                    "read_file" => (
                        "bytes",
                        json!(output["content"].as_str().map_or(0, str::len)),
                    ),
                    _ => ("bytes", output["bytes"].clone()),
                };
                args.insert(moved.0.into(), moved.1);
                AuditOutcome::Ok
            }
            Err(error) => {
                args.insert("error".into(), json!(error.message));
                AuditOutcome::Error
            }
        };
        self.audit_with(node, action, args, outcome, wrote);
    }

    /// Writes an audit row of a node's, for the principal the run acts for. In a recorded
    /// run the row commits with the node's record, in the run's next batch, so only while
    /// this process holds the run's lease: a run given up here writes none. Otherwise it
    /// is appended at once.
    pub(super) fn audit(
        &mut self,
        node: usize,
        action: &'static str,
        args: Map<String, Value>,
        outcome: AuditOutcome,
    ) {
        self.audit_with(node, action, args, outcome, None);
    }

    /// [`Run::audit`], with the file the action wrote, recorded with its row.
    fn audit_with(
        &mut self,
        node: usize,
        action: &'static str,
        args: Map<String, Value>,
        outcome: AuditOutcome,
        wrote: Option<Wrote>,
    ) {
        if self.lost() {
            return;
        }
        if self.journal.is_some() {
            self.audits.push(PendingAudit {
                action,
                node_id: Arc::clone(&self.plan.nodes[node].id),
                args,
                outcome,
                principal: self.env.principal.clone(),
                wrote,
            });
            return;
        }
        let origin = Origin {
            run_id: Some(&self.run_id),
            node_id: Some(&self.plan.nodes[node].id),
            principal: self.env.principal.as_deref(),
        };
        self.env.tools.audit(action, &args, outcome, origin);
    }
}
