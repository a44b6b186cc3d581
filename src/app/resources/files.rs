//! The workspace's files as resources, and who may read each. The local user (stdio,
//! `ui`, the terminal) owns the machine and reads any file under the workspace. Over
//! HTTP a caller reads a file only while the run that wrote it last was its own (as
//! recorded when it was written, `written_files`) and the file still holds what that run
//! wrote (its SHA-256): a file nobody's run wrote, another's file, and a file changed
//! since are all "not found", the answer a missing file gets.
//!
//! A file's digest is computed once per stamp (device, inode, size, modification and
//! change times) and kept: a subscription that looks at a file again after a change of
//! the store reads nothing while its stamp holds, and a file whose size is not the one
//! written is never read at all.
//!
//! Invariant: a remote caller is given a file's contents, its listing entry or an update
//! of it only if the file's last recorded writer is the caller's and the file's SHA-256 is
//! the one recorded.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use sha2::Digest as _;

use super::{Contents, MAX_READ};
use crate::app::{App, Caller};
use crate::engine::files::{self, Stamp};
use crate::store::WrittenFile;

/// At most this many digests are kept; past it the table starts again empty.
const KEPT_DIGESTS: usize = 4096;

/// A file's digest, made once however many ask for it at once.
type Once = Arc<OnceLock<Option<String>>>;

/// The digests of the files read, by stamp, and how many files were read to make them.
#[derive(Default)]
pub(crate) struct Digests {
    by_stamp: Mutex<HashMap<Stamp, Once>>,
    reads: AtomicU64,
}

impl Digests {
    /// The cell of `stamp`'s digest: the one made or being made, or a new one.
    fn cell(&self, stamp: Stamp) -> Once {
        let mut kept = self.by_stamp.lock();
        if kept.len() >= KEPT_DIGESTS && !kept.contains_key(&stamp) {
            kept.clear();
        }
        kept.entry(stamp).or_default().clone()
    }
}

/// A file of the workspace, opened: its path relative to the workspace and its stamp.
pub(crate) struct Opened {
    file: std::fs::File,
    pub(crate) relative: String,
    pub(crate) stamp: Stamp,
}

impl App {
    /// The file at absolute `path`, opened under the workspace as `read_file` opens it;
    /// `None` for anything that is not a regular file there.
    pub(crate) fn open_workspace_file(&self, path: &str) -> Option<Opened> {
        let root = self.engine.workspace();
        let relative = Path::new(path).strip_prefix(root).ok()?.to_str()?;
        let relative = files::normalised(relative)?;
        let (file, stamp) = files::open_file(root, &relative).ok()?;
        Some(Opened {
            file,
            relative,
            stamp,
        })
    }

    /// What `caller` reads of the file at absolute `path`; `None` for "not found",
    /// whatever the reason. A file that changes while it is read is not found either: what
    /// is given is what the check saw.
    pub(crate) fn workspace_file(&self, path: &str, caller: &Caller) -> Option<Contents> {
        let opened = self.open_workspace_file(path)?;
        if !self.may_read_file(&opened, caller) {
            return None;
        }
        let mut kept = Vec::new();
        (&opened.file).take(MAX_READ).read_to_end(&mut kept).ok()?;
        let after = files::stamp_of(&opened.file)?;
        (after == opened.stamp).then_some(())?;
        Some(match String::from_utf8(kept) {
            Ok(text) => Contents::Text {
                mime: super::mime_of(&opened.relative),
                text,
            },
            Err(error) => Contents::Blob {
                mime: "application/octet-stream".to_owned(),
                bytes: error.into_bytes(),
            },
        })
    }

    /// Whether `caller` may read the opened file: the local user always; a remote caller
    /// while its run wrote it last and it holds what was written. Reads the file only if
    /// its digest is not known for its stamp and its size is the one written.
    pub(crate) fn may_read_file(&self, opened: &Opened, caller: &Caller) -> bool {
        if caller.sees_everything() {
            return true;
        }
        let Some(written) = self.last_write(opened, caller) else {
            return false;
        };
        let cell = self.digests.cell(opened.stamp);
        let digest = cell.get_or_init(|| self.digest(opened));
        digest.as_deref() == Some(written.sha256.as_str())
    }

    /// The last recorded write of the opened file, if the caller owned the run that made
    /// it and the file's size is the one written.
    fn last_write(&self, opened: &Opened, caller: &Caller) -> Option<WrittenFile> {
        let store = self.registry.store();
        let written = store.written_file(&opened.relative).ok()??;
        let size = i64::try_from(opened.stamp.size).ok()?;
        (caller.owns(&written.owner()) && written.bytes == size).then_some(written)
    }

    /// The SHA-256 of the whole opened file, in hex, read from its start (the descriptor
    /// is read with `pread`, so its own position is left alone). Counted as a read.
    fn digest(&self, opened: &Opened) -> Option<String> {
        use std::os::unix::fs::FileExt as _;
        self.digests.reads.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(path = %opened.relative, "a followed or read file is read whole for its digest");
        let mut hasher = sha2::Sha256::new();
        let mut buffer = vec![0u8; 64 * 1024];
        let mut at = 0u64;
        loop {
            let n = opened.file.read_at(&mut buffer, at).ok()?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            at += n as u64;
        }
        Some(crate::auth::hex(&hasher.finalize()))
    }

    /// How many times a file was read whole to learn its digest, since the application
    /// opened: what following files costs beyond a look at their stamps.
    pub fn file_digest_reads(&self) -> u64 {
        self.digests.reads.load(Ordering::Relaxed)
    }
}
