//! The workspace's files as nodes see them: confined paths, the atomic no-replace write
//! of `write_file`, and the read-only, size-capped `list_dir` and `read_file`.
//!
//! Every path is relative to the workspace root, free of `..`, and goes through no
//! symbolic link, so a workflow can neither read nor write outside the workspace.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

use super::report::{NodeError, NodeErrorKind};

/// The most entries `list_dir` returns; a folder with more is cut, and says so.
const MAX_ENTRIES: usize = 1000;

fn file_error(message: impl Into<String>) -> NodeError {
    NodeError::new(NodeErrorKind::File, message)
}

/// Checks that `path` is relative and free of `..`, and that no existing component under
/// `root` is a symlink; returns the path joined to `root`.
pub fn confine(root: &Path, path: &str) -> Result<PathBuf, NodeError> {
    let relative = Path::new(path);
    if path.is_empty() {
        return Err(file_error("the path is empty"));
    }
    let mut joined = root.to_path_buf();
    for component in relative.components() {
        match component {
            Component::Normal(part) => {
                joined.push(part);
                if joined
                    .symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_symlink())
                {
                    return Err(file_error(format!(
                        "`{path}` goes through a symbolic link; refused"
                    )));
                }
            }
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(file_error(format!("`{path}` contains `..`; refused")));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(file_error(format!(
                    "`{path}` is absolute; paths are relative to the workspace"
                )));
            }
        }
    }
    Ok(joined)
}

/// Writes `content` to `path` under `root`: into a temporary file beside it, then renamed
/// into place, so that the file appears whole or not at all. Without `overwrite`, the
/// rename refuses to replace an existing file (`renameat2` with `RENAME_NOREPLACE`, or a
/// hard link where the file system lacks it).
///
/// `writer` names who writes, for the temporary file's name: a recorded run's unit, whose
/// attempt after a crash then replaces the temporary file a killed attempt left, instead
/// of leaving it beside the target for good (one driver per run, so no one else writes
/// under that name). `None` gives a name of its own to each write.
pub fn write_file(
    root: &Path,
    path: &str,
    content: &str,
    overwrite: bool,
    writer: Option<&str>,
) -> Result<Value, NodeError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    let target = confine(root, path)?;
    let cannot = |e: std::io::Error| file_error(format!("cannot write `{path}`: {e}"));
    let parent = target.parent().unwrap_or(root);
    std::fs::create_dir_all(parent)
        .map_err(|e| file_error(format!("cannot create the folder of `{path}`: {e}")))?;
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let temp = match writer {
        Some(writer) => {
            let temp = parent.join(format!(".{name}.{writer}.tmp"));
            match std::fs::remove_file(&temp) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(cannot(e)),
                _ => temp,
            }
        }
        None => parent.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple())),
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .map_err(cannot)?;
    let written = file
        .write_all(content.as_bytes())
        .and_then(|()| file.sync_data());
    drop(file);
    let placed = written.and_then(|()| match overwrite {
        true => std::fs::rename(&temp, &target),
        false => rename_no_replace(&temp, &target),
    });
    if let Err(error) = placed {
        let _ = std::fs::remove_file(&temp);
        return Err(match error.kind() {
            std::io::ErrorKind::AlreadyExists => file_error(format!(
                "`{path}` already exists; set overwrite = true to replace it"
            )),
            _ => cannot(error),
        });
    }
    Ok(json!({ "path": path, "bytes": content.len() }))
}

/// Renames `from` to `to` unless `to` exists (then `AlreadyExists`).
fn rename_no_replace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c =
        |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    let (c_from, c_to) = (c(from)?, c(to)?);
    // SAFETY: both arguments are valid NUL-terminated paths that outlive the call.
    let status = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            c_from.as_ptr(),
            libc::AT_FDCWD,
            c_to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if status == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        // The file system or kernel lacks the flag: a hard link refuses an existing name too.
        Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        _ => Err(error),
    }
}

/// A stable hash of a file's content (FNV-1a, 64 bits, with the length), as a `write_file`
/// attempt records it before writing.
pub fn content_hash(content: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in content.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("fnv1a64:{hash:016x}:{}", content.len())
}

/// Whether `path` under `root` already holds exactly `content`.
pub fn already_written(root: &Path, path: &str, content: &str) -> bool {
    confine(root, path)
        .ok()
        .and_then(|target| std::fs::read(target).ok())
        .is_some_and(|bytes| bytes == content.as_bytes())
}

/// The entries of folder `path` under `root`, sorted by name: `{name, kind, bytes}`, with
/// `kind` one of `file`, `dir` and `other`. A folder that does not exist has no entries:
/// a workflow that keeps files in a folder meets it empty before its first file.
pub fn list_dir(root: &Path, path: &str) -> Result<Value, NodeError> {
    let folder = match path.trim_matches('/') {
        "" | "." => root.to_path_buf(),
        relative => confine(root, relative)?,
    };
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(json!({ "path": path, "entries": [], "truncated": false }));
        }
        Err(error) => return Err(file_error(format!("cannot list `{path}`: {error}"))),
    };
    let mut listed: Vec<(String, &str, u64)> = Vec::new();
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let kind = match meta.file_type() {
            t if t.is_file() => "file",
            t if t.is_dir() => "dir",
            _ => "other",
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        listed.push((name, kind, meta.len()));
    }
    listed.sort();
    let truncated = listed.len() > MAX_ENTRIES;
    listed.truncate(MAX_ENTRIES);
    let entries: Vec<Value> = listed
        .into_iter()
        .map(|(name, kind, bytes)| json!({ "name": name, "kind": kind, "bytes": bytes }))
        .collect();
    Ok(json!({ "path": path, "entries": entries, "truncated": truncated }))
}

/// The text of file `path` under `root`, at most `max_bytes` of it (cut at a character
/// boundary): `{path, content, bytes, truncated}`. A file that is not UTF-8 is refused.
pub fn read_file(root: &Path, path: &str, max_bytes: u64) -> Result<Value, NodeError> {
    use std::os::unix::fs::OpenOptionsExt;

    let target = confine(root, path)?;
    let cannot = |e: std::io::Error| file_error(format!("cannot read `{path}`: {e}"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&target)
        .map_err(cannot)?;
    let size = file.metadata().map_err(cannot)?.len();
    let mut bytes = Vec::new();
    file.take(max_bytes)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    let truncated = size > max_bytes;
    let content = match String::from_utf8(bytes) {
        Ok(text) => text,
        // A cut may fall inside a character: keep the whole characters before it.
        Err(error) if truncated && error.utf8_error().error_len().is_none() => {
            let valid = error.utf8_error().valid_up_to();
            let mut bytes = error.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).expect("cut at a character boundary")
        }
        Err(_) => return Err(file_error(format!("`{path}` is not UTF-8 text"))),
    };
    Ok(json!({ "path": path, "content": content, "bytes": size, "truncated": truncated }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_is_sorted_and_a_missing_folder_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("adrs/old")).unwrap();
        std::fs::write(dir.path().join("adrs/0002-b.md"), "bb").unwrap();
        std::fs::write(dir.path().join("adrs/0001-a.md"), "a").unwrap();
        let listed = list_dir(dir.path(), "adrs").unwrap();
        assert_eq!(
            listed["entries"],
            json!([
                { "name": "0001-a.md", "kind": "file", "bytes": 1 },
                { "name": "0002-b.md", "kind": "file", "bytes": 2 },
                { "name": "old", "kind": "dir", "bytes": listed["entries"][2]["bytes"] }
            ])
        );
        assert_eq!(
            list_dir(dir.path(), "none/here").unwrap()["entries"],
            json!([])
        );
        assert!(list_dir(dir.path(), "../etc").is_err());
    }

    #[test]
    fn a_write_replaces_the_temporary_file_its_writers_killed_attempt_left() {
        let dir = tempfile::tempdir().unwrap();
        // What an attempt killed between its temporary file and the rename leaves.
        std::fs::write(dir.path().join(".note.md.unit-1.tmp"), "half").unwrap();
        write_file(dir.path(), "note.md", "whole", false, Some("unit-1")).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["note.md"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("note.md")).unwrap(),
            "whole"
        );
    }

    #[test]
    fn a_read_is_capped_at_a_character_boundary_and_confined() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("note.md"), "héllo").unwrap();
        let whole = read_file(dir.path(), "note.md", 1024).unwrap();
        assert_eq!(whole["content"], "héllo");
        assert_eq!(whole["truncated"], false);
        // `é` is two bytes: a cap of 2 falls inside it.
        let cut = read_file(dir.path(), "note.md", 2).unwrap();
        assert_eq!(cut["content"], "h");
        assert_eq!(cut["truncated"], true);
        assert_eq!(cut["bytes"], 6);
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link")).unwrap();
        let refused = read_file(dir.path(), "link", 1024).unwrap_err();
        assert!(
            refused.message.contains("symbolic link"),
            "{}",
            refused.message
        );
        assert!(read_file(dir.path(), "/etc/passwd", 1024).is_err());
        std::fs::write(dir.path().join("bin"), [0xff, 0xfe]).unwrap();
        assert!(read_file(dir.path(), "bin", 1024).is_err());
    }
}
