//! A run's file actions: the write that a resumed run never makes twice, and the
//! read-only `list_dir` and `read_file`, which a resumed run may simply make again.

use serde_json::{Value, json};

use super::Run;
use crate::engine::actions::Resolved;
use crate::engine::files;
use crate::engine::report::NodeError;

impl Run {
    /// Writes a file so that a resumed run never writes it twice, nor calls its own
    /// earlier write a conflict: the content's hash is committed before the write, the
    /// write is a temporary file renamed into place, and a resumed attempt whose hash was
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
        let done = || json!({ "path": path, "bytes": content.len() });
        if self.journal.is_none() {
            return Some(files::write_file(&root, path, content, overwrite, None));
        }
        let intent = files::content_hash(content);
        if self.state.unit(node, instance).intent.as_deref() == Some(intent.as_str())
            && files::already_written(&root, path, content)
        {
            return Some(Ok(done()));
        }
        self.state.unit_mut(node, instance).intent = Some(intent);
        self.flush();
        if self
            .stop
            .as_ref()
            .is_some_and(|s| matches!(s, super::Stop::Lost(_)))
        {
            return None;
        }
        let writer = match instance {
            Some(instance) => format!("{}.{node}.{instance}", self.run_id),
            None => format!("{}.{node}", self.run_id),
        };
        Some(files::write_file(
            &root,
            path,
            content,
            overwrite,
            Some(&writer),
        ))
    }

    /// A `list_dir` or `read_file` attempt.
    pub(super) fn read(&self, action: &Resolved) -> Result<Value, NodeError> {
        let root = &self.env.workspace;
        match action {
            Resolved::ListDir(path) => files::list_dir(root, path),
            Resolved::ReadFile { path, max_bytes } => files::read_file(root, path, *max_bytes),
            _ => unreachable!("only reads are read"),
        }
    }
}
