//! A database the server cannot use gets a clear error at start, never a hang: damaged,
//! locked by another program, or read-only before its schema is made.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcp_task_server::store::Store;

use crate::support::BIN;

/// Generous: the busy timeout is 5 s, and the machine may be loaded.
const DEADLINE: Duration = Duration::from_secs(40);

/// Starts `serve` (stdio, its stdin kept open) on `db` and waits for it to give up: its
/// stderr. Fails the test if it serves instead, or takes longer than [`DEADLINE`].
fn refused_at_start(db: &str) -> String {
    let mut child = Command::new(BIN)
        .env_remove("TASKS_DB_PATH")
        .env_remove("RUST_LOG")
        .args(["--db", db])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            child.kill().unwrap();
            panic!("the server neither served nor gave up within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "the server exited cleanly: {stderr}");
    stderr
}

fn made(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("tasks.db");
    drop(Store::open(&path).expect("a fresh database"));
    path
}

#[test]
fn a_file_that_is_not_a_database_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    std::fs::write(&path, vec![0x5a; 64 * 1024]).unwrap();
    let stderr = refused_at_start(path.to_str().unwrap());
    assert!(stderr.contains("not a database"), "{stderr}");
}

#[test]
fn a_database_damaged_in_a_table_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = made(&dir);
    let (root, page_size): (i64, i64) = {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let root = conn
            .query_row(
                "SELECT rootpage FROM sqlite_schema WHERE name = 'todos'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let size = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        (root, size)
    };
    let mut bytes = std::fs::read(&path).unwrap();
    let start = ((root - 1) * page_size) as usize;
    bytes[start..start + page_size as usize].fill(0x55);
    std::fs::write(&path, bytes).unwrap();
    let stderr = refused_at_start(path.to_str().unwrap());
    assert!(stderr.contains("the database file is damaged"), "{stderr}");
}

#[test]
fn a_database_locked_by_another_program_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = made(&dir);
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder
        .pragma_update(None, "locking_mode", "EXCLUSIVE")
        .unwrap();
    holder
        .execute_batch("BEGIN EXCLUSIVE; CREATE TABLE held (x);")
        .unwrap();
    let stderr = refused_at_start(path.to_str().unwrap());
    assert!(stderr.contains("database is locked"), "{stderr}");
    drop(holder);
}

#[test]
fn a_read_only_database_without_its_schema_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE other (x);")
        .unwrap();
    let stderr = refused_at_start(&format!("file:{}?mode=ro", path.display()));
    assert!(
        stderr.contains("read-only and its schema is not initialised"),
        "{stderr}"
    );
}
