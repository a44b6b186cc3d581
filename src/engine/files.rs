//! The workspace's files as nodes see them: confined paths, the atomic no-replace write
//! of `write_file`, and the read-only, size-capped `list_dir` and `read_file`.
//!
//! Every path is relative to the workspace root, free of `..`, and goes through no
//! symbolic link, so a workflow can neither read nor write outside the workspace. That is
//! enforced by the kernel, not by a check before an open: each action opens the workspace
//! folder once, and every open under it is an `openat2` relative to that descriptor with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, one folder at a time
//! where folders are made. A link swapped in at any component, at any moment, makes the
//! open fail instead of leading elsewhere. A kernel without `openat2` (before Linux 5.6)
//! gets a refusal, never a weaker check.
//!
//! Only regular files are read, opened non-blocking and checked after the open (`fstat`),
//! so that a FIFO or a device never holds a thread; a file with other hard links is refused
//! too, since one of them may name a file outside the workspace.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path};

use serde_json::{Value, json};

use super::report::{NodeError, NodeErrorKind};

/// The most entries `list_dir` returns; a folder with more is cut, and says so.
const MAX_ENTRIES: usize = 1000;

/// Every open under the workspace stays beneath it and follows no link of any kind.
const RESOLVE: u64 =
    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;

fn file_error(message: impl Into<String>) -> NodeError {
    NodeError::new(NodeErrorKind::File, message)
}

/// The components of `path`, checked without touching the disk: relative and free of `..`.
/// `.` components are dropped, so `"."` gives none.
fn components(path: &str) -> Result<Vec<&OsStr>, NodeError> {
    if path.is_empty() {
        return Err(file_error("the path is empty"));
    }
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part),
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
    Ok(parts)
}

/// The error of an open under the workspace, in words: a link met on the way is refused as
/// such, and a kernel without `openat2` is said to be one.
fn refusal(path: &str, verb: &str, error: &io::Error) -> NodeError {
    match error.raw_os_error() {
        Some(libc::ELOOP) => file_error(format!("`{path}` goes through a symbolic link; refused")),
        Some(libc::EXDEV) => file_error(format!("`{path}` leaves the workspace; refused")),
        Some(libc::ENOSYS) => file_error(format!(
            "cannot {verb} `{path}`: this kernel lacks openat2 (Linux 5.6 or later), which \
             file actions need to stay inside the workspace; refused"
        )),
        _ => file_error(format!("cannot {verb} `{path}`: {error}")),
    }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `openat2(dir, name, flags)` beneath `dir`, through no link; `mode` for a created file.
fn open_beneath(dir: BorrowedFd<'_>, name: &OsStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let name = c_name(name)?;
    // SAFETY: `open_how` is plain old data; all-zero is its documented empty value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & libc::O_CREAT != 0 {
        u64::from(mode)
    } else {
        0
    };
    how.resolve = RESOLVE;
    // EAGAIN: the kernel saw a rename race it could not rule out; it asks for a retry.
    for _ in 0..16 {
        // SAFETY: `name` is NUL-terminated and `how` is an `open_how` of the size given;
        // both outlive the call.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                name.as_ptr(),
                &raw const how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            let fd = i32::try_from(fd).expect("a file descriptor fits an int");
            // SAFETY: the kernel just gave us this descriptor; nothing else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EAGAIN) {
            return Err(error);
        }
    }
    Err(io::Error::from_raw_os_error(libc::EAGAIN))
}

/// The workspace folder, opened once for one action: every open of the action is relative
/// to it.
fn open_workspace(root: &Path) -> Result<OwnedFd, NodeError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(root)
        .map(OwnedFd::from)
        .map_err(|e| {
            file_error(format!(
                "cannot open the workspace `{}`: {e}",
                root.display()
            ))
        })
}

/// A folder under `dir`, through no link (`RESOLVE_NO_SYMLINKS` covers the last component
/// too, and says so with `ELOOP`, where `O_NOFOLLOW` with `O_DIRECTORY` says `ENOTDIR`).
fn open_folder(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    open_beneath(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0)
}

/// The path as the kernel takes it: the components joined, `.` for none.
fn joined(parts: &[&OsStr]) -> std::path::PathBuf {
    match parts.is_empty() {
        true => ".".into(),
        false => parts.iter().collect(),
    }
}

/// What a file is now, told without reading it: a file rewritten, replaced or touched has
/// another stamp (its change time moves with every write, and no one can set it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    pub device: u64,
    pub inode: u64,
    pub size: u64,
    pub modified_ns: i128,
    pub changed_ns: i128,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        Stamp {
            device: meta.dev(),
            inode: meta.ino(),
            size: meta.len(),
            modified_ns: ns(meta.mtime(), meta.mtime_nsec()),
            changed_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Opens the regular file `path` under `root` for reading, as [`read_file`] reaches it
/// (never outside `root`, nor through a link, a regular file with one link only), with its
/// stamp; nothing is read.
pub fn open_file(root: &Path, path: &str) -> Result<(File, Stamp), NodeError> {
    let workspace = open_workspace(root)?;
    let (file, _) = open_regular(std::os::fd::AsFd::as_fd(&workspace), path)?;
    let meta = file
        .metadata()
        .map_err(|e| file_error(format!("cannot read `{path}`: {e}")))?;
    Ok((file, Stamp::of(&meta)))
}

/// `path` as the workspace names it: relative, its components joined by `/`, without `.`
/// or empty components; `None` where a file action would refuse it.
pub fn normalised(path: &str) -> Option<String> {
    let parts = components(path).ok()?;
    let parts: Vec<&str> = parts
        .iter()
        .map(|part| part.to_str())
        .collect::<Option<_>>()?;
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The stamp of an open file now; `None` if it cannot be looked at.
pub fn stamp_of(file: &File) -> Option<Stamp> {
    file.metadata().ok().map(|meta| Stamp::of(&meta))
}

/// Opens the regular file `path` under the workspace for reading, non-blocking (a FIFO or
/// a device is refused once opened, without a wait); returns it with its size.
fn open_regular(workspace: BorrowedFd<'_>, path: &str) -> Result<(File, u64), NodeError> {
    let parts = components(path)?;
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW;
    let file = open_beneath(workspace, joined(&parts).as_os_str(), flags, 0)
        .map(File::from)
        .map_err(|e| refusal(path, "read", &e))?;
    let meta = file
        .metadata()
        .map_err(|e| file_error(format!("cannot read `{path}`: {e}")))?;
    if !meta.file_type().is_file() {
        return Err(file_error(format!(
            "`{path}` is not a regular file; refused"
        )));
    }
    if meta.nlink() > 1 {
        return Err(file_error(format!(
            "`{path}` has other hard links, which may name a file outside the workspace; refused"
        )));
    }
    Ok((file, meta.len()))
}

/// How `write_file` places its file.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteMode<'a> {
    /// Replace a file already at the path; without it, that is an error.
    pub overwrite: bool,
    /// Who writes, for the temporary file's name (see [`write_file`]).
    pub writer: Option<&'a str>,
    /// Sync the folders the write changed once the file is in place (`--durability full`):
    /// a power loss then cannot take back a file whose node was recorded as done.
    pub sync_folders: bool,
}

/// Writes `content` to `path` under `root`: into a temporary file beside it, then renamed
/// into place, so that the file appears whole or not at all. Without `overwrite`, the
/// rename refuses to replace an existing file (`renameat2` with `RENAME_NOREPLACE`, or a
/// hard link where the file system lacks it). Missing folders are made one at a time,
/// each opened beneath the one before, through no link.
///
/// `writer` names who writes, for the temporary file's name: a recorded run's unit, whose
/// attempt after a crash then replaces the temporary file a killed attempt left, instead
/// of leaving it beside the target for good (one driver per run, so no one else writes
/// under that name). `None` gives a name of its own to each write.
pub fn write_file(
    root: &Path,
    path: &str,
    content: &str,
    mode: WriteMode<'_>,
) -> Result<Value, NodeError> {
    stage(root, path, content, mode)?.place()
}

/// A file written in full beside its target, under a temporary name, and not yet renamed
/// into place: [`write_file`] in two steps, so that a recorded run renames it only while
/// it still holds the run's lease (`scheduler/files.rs`).
#[derive(Debug)]
pub(crate) struct Staged {
    parent: File,
    temp: OsString,
    name: OsString,
    path: String,
    bytes: usize,
    overwrite: bool,
    sync_folders: bool,
}

/// The first step of [`write_file`]: the folders made, the content written to the
/// temporary file and synced.
pub(crate) fn stage(
    root: &Path,
    path: &str,
    content: &str,
    mode: WriteMode<'_>,
) -> Result<Staged, NodeError> {
    let parts = components(path)?;
    let Some((name, folders)) = parts.split_last() else {
        return Err(file_error(format!("`{path}` names no file")));
    };
    let cannot = |e: io::Error| file_error(format!("cannot write `{path}`: {e}"));
    let workspace = open_workspace(root)?;
    let parent = make_folders(&workspace, folders, path, mode.sync_folders)?;
    let parent = File::from(parent);
    let dir = std::os::fd::AsFd::as_fd(&parent);
    let name_text = name.to_string_lossy();
    let temp = match mode.writer {
        Some(writer) => {
            let temp = format!(".{name_text}.{writer}.tmp");
            match unlink_at(dir, OsStr::new(&temp)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(cannot(e)),
                _ => temp,
            }
        }
        None => format!(".{name_text}.{}.tmp", uuid::Uuid::new_v4().simple()),
    };
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let mut file = open_beneath(dir, OsStr::new(&temp), flags, 0o666)
        .map(File::from)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::EXDEV | libc::ENOSYS) => refusal(path, "write", &e),
            _ => cannot(e),
        })?;
    let written = file
        .write_all(content.as_bytes())
        .and_then(|()| file.sync_data());
    drop(file);
    if let Err(error) = written {
        let _ = unlink_at(dir, OsStr::new(&temp));
        return Err(cannot(error));
    }
    Ok(Staged {
        parent,
        temp: temp.into(),
        name: name.to_os_string(),
        path: path.to_owned(),
        bytes: content.len(),
        overwrite: mode.overwrite,
        sync_folders: mode.sync_folders,
    })
}

impl Staged {
    /// The second step of [`write_file`]: the rename into place (and the folder's sync).
    pub fn place(self) -> Result<Value, NodeError> {
        let path = &self.path;
        let dir = std::os::fd::AsFd::as_fd(&self.parent);
        if let Err(error) = rename_at(dir, &self.temp, &self.name, !self.overwrite) {
            let _ = unlink_at(dir, &self.temp);
            return Err(match error.kind() {
                io::ErrorKind::AlreadyExists => file_error(format!(
                    "`{path}` already exists; set overwrite = true to replace it"
                )),
                _ => file_error(format!("cannot write `{path}`: {error}")),
            });
        }
        if self.sync_folders {
            self.parent
                .sync_all()
                .map_err(|e| file_error(format!("cannot sync the folder of `{path}`: {e}")))?;
        }
        Ok(json!({ "path": path, "bytes": self.bytes }))
    }

    /// Removes the temporary file: the write is not to land.
    pub(crate) fn discard(self) {
        let _ = unlink_at(std::os::fd::AsFd::as_fd(&self.parent), &self.temp);
    }
}

/// The folder `folders` names under the workspace, made where missing: each component is
/// made (`mkdirat`, which never follows a link) and opened beneath the one before. With
/// `sync`, a folder that gained a new folder is synced.
fn make_folders(
    workspace: &OwnedFd,
    folders: &[&OsStr],
    path: &str,
    sync: bool,
) -> Result<OwnedFd, NodeError> {
    let cannot = |e: io::Error| file_error(format!("cannot create the folder of `{path}`: {e}"));
    let mut dir = open_folder(std::os::fd::AsFd::as_fd(workspace), OsStr::new("."))
        .map_err(|e| refusal(path, "write", &e))?;
    for folder in folders {
        let name = c_name(folder).map_err(cannot)?;
        // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is an open folder.
        let made = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o777) };
        if made != 0 {
            let error = io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EEXIST) {
                return Err(cannot(error));
            }
        } else if sync {
            File::from(dir.try_clone().map_err(cannot)?)
                .sync_all()
                .map_err(cannot)?;
        }
        dir = open_folder(std::os::fd::AsFd::as_fd(&dir), folder).map_err(|e| {
            match e.raw_os_error() {
                Some(libc::ELOOP | libc::EXDEV | libc::ENOSYS) => refusal(path, "write", &e),
                _ => cannot(e),
            }
        })?;
    }
    Ok(dir)
}

fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let name = c_name(name)?;
    // SAFETY: `name` is NUL-terminated and outlives the call.
    match unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Renames `from` to `to`, both in folder `dir`; with `no_replace`, not over an existing
/// `to` (then `AlreadyExists`). A rename never follows a link at either name.
fn rename_at(dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr, no_replace: bool) -> io::Result<()> {
    let (c_from, c_to) = (c_name(from)?, c_name(to)?);
    let flags = if no_replace {
        libc::RENAME_NOREPLACE
    } else {
        0
    };
    // SAFETY: both names are NUL-terminated and outlive the call; `dir` is an open folder.
    let status = unsafe {
        libc::renameat2(
            dir.as_raw_fd(),
            c_from.as_ptr(),
            dir.as_raw_fd(),
            c_to.as_ptr(),
            flags,
        )
    };
    if status == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        // The file system or kernel lacks the flag: a hard link refuses an existing name too.
        Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP) if no_replace => {
            // SAFETY: as above.
            let linked = unsafe {
                libc::linkat(
                    dir.as_raw_fd(),
                    c_from.as_ptr(),
                    dir.as_raw_fd(),
                    c_to.as_ptr(),
                    0,
                )
            };
            if linked != 0 {
                return Err(io::Error::last_os_error());
            }
            unlink_at(dir, from)
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

/// Whether `path` under `root` already holds exactly `content`. It reads at most one byte
/// more than `content`, through the same confined open as `read_file`.
pub(crate) fn already_written(root: &Path, path: &str, content: &str) -> bool {
    let Ok(workspace) = open_workspace(root) else {
        return false;
    };
    let Ok((file, size)) = open_regular(std::os::fd::AsFd::as_fd(&workspace), path) else {
        return false;
    };
    if size != content.len() as u64 {
        return false;
    }
    let mut bytes = Vec::with_capacity(content.len());
    file.take(content.len() as u64 + 1)
        .read_to_end(&mut bytes)
        .is_ok_and(|_| bytes == content.as_bytes())
}

/// The entries of folder `path` under `root`, sorted by name: `{name, kind, bytes}`, with
/// `kind` one of `file`, `dir` and `other` (a symbolic link is `other`, never followed). A
/// folder that does not exist has no entries: a workflow that keeps files in a folder
/// meets it empty before its first file.
pub fn list_dir(root: &Path, path: &str) -> Result<Value, NodeError> {
    let parts = match path.trim_matches('/') {
        "" => Vec::new(),
        relative => components(relative)?,
    };
    let workspace = open_workspace(root)?;
    let folder = match open_folder(
        std::os::fd::AsFd::as_fd(&workspace),
        joined(&parts).as_os_str(),
    ) {
        Ok(folder) => folder,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Ok(json!({ "path": path, "entries": [], "truncated": false }));
        }
        Err(error) => return Err(refusal(path, "list", &error)),
    };
    let mut listed =
        entries(folder).map_err(|e| file_error(format!("cannot list `{path}`: {e}")))?;
    listed.sort();
    let truncated = listed.len() > MAX_ENTRIES;
    listed.truncate(MAX_ENTRIES);
    let entries: Vec<Value> = listed
        .into_iter()
        .map(|(name, kind, bytes)| json!({ "name": name, "kind": kind, "bytes": bytes }))
        .collect();
    Ok(json!({ "path": path, "entries": entries, "truncated": truncated }))
}

/// An open folder's entries as `(name, kind, bytes)`, each looked at without following a
/// link (`fstatat` with `AT_SYMLINK_NOFOLLOW`, relative to the folder).
fn entries(folder: OwnedFd) -> io::Result<Vec<(String, &'static str, u64)>> {
    use std::os::fd::IntoRawFd;

    /// Closes the stream, and the descriptor it owns, however the listing ends.
    struct Stream(*mut libc::DIR);
    impl Drop for Stream {
        fn drop(&mut self) {
            // SAFETY: the stream is open and closed only here.
            unsafe { libc::closedir(self.0) };
        }
    }

    let fd = folder.into_raw_fd();
    // SAFETY: `fd` is an open folder whose ownership passes to the stream.
    let stream = unsafe { libc::fdopendir(fd) };
    if stream.is_null() {
        let error = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `fd` is still ours to close.
        unsafe { libc::close(fd) };
        return Err(error);
    }
    let stream = Stream(stream);
    let mut listed = Vec::new();
    loop {
        // SAFETY: the stream is open; the entry is read before the next `readdir`.
        let entry = unsafe { libc::readdir(stream.0) };
        if entry.is_null() {
            break;
        }
        // SAFETY: `d_name` is a NUL-terminated name inside the entry.
        let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) };
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        // SAFETY: all-zero is a valid `stat`, filled in by the call.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the stream's descriptor is open, `name` NUL-terminated, `stat` writable.
        let looked = unsafe {
            libc::fstatat(
                libc::dirfd(stream.0),
                name.as_ptr(),
                &raw mut stat,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if looked != 0 {
            continue;
        }
        let kind = match stat.st_mode & libc::S_IFMT {
            libc::S_IFREG => "file",
            libc::S_IFDIR => "dir",
            _ => "other",
        };
        let name = String::from_utf8_lossy(name.to_bytes()).into_owned();
        listed.push((name, kind, u64::try_from(stat.st_size).unwrap_or(0)));
    }
    Ok(listed)
}

/// The text of file `path` under `root`, at most `max_bytes` of it (cut at a character
/// boundary): `{path, content, bytes, truncated}`. A file that is not UTF-8 is refused, as
/// is anything but a regular file.
pub fn read_file(root: &Path, path: &str, max_bytes: u64) -> Result<Value, NodeError> {
    let workspace = open_workspace(root)?;
    let (file, size) = open_regular(std::os::fd::AsFd::as_fd(&workspace), path)?;
    let cannot = |e: io::Error| file_error(format!("cannot read `{path}`: {e}"));
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

/// The bytes of file `path` under `root`, at most `max_bytes` of them, and the file's size:
/// reached as [`read_file`] reaches it (never outside `root`, nor through a link).
pub fn read_bytes(root: &Path, path: &str, max_bytes: u64) -> Result<(Vec<u8>, u64), NodeError> {
    let workspace = open_workspace(root)?;
    let (file, size) = open_regular(std::os::fd::AsFd::as_fd(&workspace), path)?;
    let mut bytes = Vec::new();
    file.take(max_bytes)
        .read_to_end(&mut bytes)
        .map_err(|e| file_error(format!("cannot read `{path}`: {e}")))?;
    Ok((bytes, size))
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
    fn a_staged_file_lands_only_when_placed_and_a_discarded_one_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let names = || {
            let mut names: Vec<String> = std::fs::read_dir(dir.path().join("out"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        let staged = stage(dir.path(), "out/a.md", "a", WriteMode::default()).unwrap();
        assert!(!dir.path().join("out/a.md").exists(), "not in place yet");
        staged.discard();
        assert!(names().is_empty(), "{:?}", names());
        let staged = stage(dir.path(), "out/a.md", "a", WriteMode::default()).unwrap();
        assert_eq!(staged.place().unwrap()["bytes"], 1);
        assert_eq!(names(), ["a.md"]);
    }

    #[test]
    fn a_write_replaces_the_temporary_file_its_writers_killed_attempt_left() {
        let dir = tempfile::tempdir().unwrap();
        // What an attempt killed between its temporary file and the rename leaves.
        std::fs::write(dir.path().join(".note.md.unit-1.tmp"), "half").unwrap();
        let mode = WriteMode {
            writer: Some("unit-1"),
            ..WriteMode::default()
        };
        write_file(dir.path(), "note.md", "whole", mode).unwrap();
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

    fn refused(result: Result<Value, NodeError>, needle: &str) {
        let error = result.expect_err("refused");
        assert!(
            error.message.contains(needle),
            "{needle:?} not in {}",
            error.message
        );
    }

    #[test]
    fn a_symbolic_link_at_an_inner_component_is_refused_for_every_action() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("docs/out")).unwrap();
        let link = "goes through a symbolic link";
        refused(read_file(&root, "docs/out/secret", 1024), link);
        refused(list_dir(&root, "docs/out"), link);
        refused(
            write_file(&root, "docs/out/new/x.md", "x", WriteMode::default()),
            link,
        );
        refused(
            write_file(&root, "docs/out/x.md", "x", WriteMode::default()),
            link,
        );
        assert!(!already_written(&root, "docs/out/secret", "s3cret"));
        // A link to a folder inside the workspace is refused too: no link is followed.
        std::os::unix::fs::symlink(root.join("docs"), root.join("alias")).unwrap();
        refused(
            write_file(&root, "alias/x.md", "x", WriteMode::default()),
            link,
        );
        let names: Vec<_> = std::fs::read_dir(outside.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "nothing was written outside");
        assert!(!root.join("docs/x.md").exists());
    }

    #[test]
    fn dot_dot_and_absolute_paths_are_refused_before_any_open() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        refused(read_file(dir.path(), "a/../../x", 10), "contains `..`");
        refused(
            write_file(dir.path(), "a/../x", "x", WriteMode::default()),
            "contains `..`",
        );
        refused(read_file(dir.path(), "/etc/passwd", 10), "is absolute");
        refused(
            write_file(dir.path(), "/tmp/x", "x", WriteMode::default()),
            "is absolute",
        );
        refused(
            write_file(dir.path(), ".", "x", WriteMode::default()),
            "names no file",
        );
        assert!(!dir.path().join("x").exists());
    }

    #[test]
    fn a_fifo_is_refused_at_once_instead_of_blocking_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = std::ffi::CString::new(dir.path().join("pipe").as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        // Without O_NONBLOCK, this open waits for a writer that never comes: the test's
        // thread would hang, and the harness with it.
        let (sender, receiver) = std::sync::mpsc::channel();
        let root = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let _ = sender.send((
                read_file(&root, "pipe", 10).map_err(|e| e.message),
                already_written(&root, "pipe", "x"),
            ));
        });
        let (read, written) = receiver
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the read of a FIFO returns instead of blocking");
        assert!(read.unwrap_err().contains("is not a regular file"));
        assert!(!written);
        refused(list_dir(dir.path(), "pipe"), "cannot list");
    }

    #[test]
    fn a_device_behind_a_link_and_a_folder_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
        refused(read_file(dir.path(), "zero", 10), "symbolic link");
        std::fs::create_dir(dir.path().join("folder")).unwrap();
        refused(read_file(dir.path(), "folder", 10), "is not a regular file");
    }

    #[test]
    fn a_file_with_another_hard_link_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        // A name outside the workspace for the same file (the same file system here).
        std::fs::write(dir.path().join("outside"), "s3cret").unwrap();
        std::fs::hard_link(dir.path().join("outside"), root.join("inside")).unwrap();
        refused(read_file(&root, "inside", 100), "other hard links");
        assert!(!already_written(&root, "inside", "s3cret"));
    }

    #[test]
    fn the_check_on_resume_holds_only_for_the_identical_content() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big"), "x".repeat(1 << 20)).unwrap();
        assert!(!already_written(dir.path(), "big", "x"));
        std::fs::write(dir.path().join("same"), "hello").unwrap();
        assert!(already_written(dir.path(), "same", "hello"));
        assert!(!already_written(dir.path(), "same", "hellO"));
    }

    #[test]
    fn a_write_makes_its_folders_and_refuses_to_replace_without_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let mode = WriteMode {
            sync_folders: true,
            ..WriteMode::default()
        };
        write_file(dir.path(), "a/b/c.md", "one", mode).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.md")).unwrap(),
            "one"
        );
        refused(
            write_file(dir.path(), "a/b/c.md", "two", mode),
            "already exists",
        );
        let mode = WriteMode {
            overwrite: true,
            ..mode
        };
        write_file(dir.path(), "a/b/c.md", "two", mode).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.md")).unwrap(),
            "two"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path().join("a/b")).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
    }
}
