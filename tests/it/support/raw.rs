//! The server binary without a client library in between: raw JSON-RPC lines over its
//! stdio, and the address a server started with `--http` announces.

use std::sync::Arc;
use std::time::Duration;

use tempfile::TempDir;

use super::BIN;

/// The server binary on a fresh database, spoken to in raw JSON-RPC lines over its stdin
/// and stdout (no client library in between). Killed when dropped, and after two minutes
/// in any case, so that a server that never replies fails the test's read instead of
/// hanging it.
pub(crate) struct RawServer {
    child: std::process::Child,
    pub(crate) stdin: std::process::ChildStdin,
    pub(crate) stdout: std::io::BufReader<std::process::ChildStdout>,
    /// Set once the server is gone, so that the watchdog kills no process reusing its pid.
    gone: Arc<std::sync::atomic::AtomicBool>,
    _dir: TempDir,
}

impl RawServer {
    pub(crate) fn start() -> RawServer {
        use std::process::Stdio;
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let mut child = std::process::Command::new(BIN)
            .arg("--db")
            .arg(dir.path().join("tasks.db"))
            .env_remove("TASKS_DB_PATH")
            .env_remove("RUST_LOG")
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
        let pid = child.id().to_string();
        let gone: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let watched = Arc::clone(&gone);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(120));
            if !watched.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid])
                    .status();
            }
        });
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        RawServer {
            child,
            stdin,
            stdout,
            gone,
            _dir: dir,
        }
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.gone.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The address a server started with `--http` listens on, from what it logs on stderr.
pub(crate) fn listening_address(stderr: std::process::ChildStderr) -> std::net::SocketAddr {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            if !sent && let Some(at) = line.split("http://").nth(1) {
                let addr = at.split('/').next().unwrap().to_owned();
                sent = sender.send(addr).is_ok();
            }
        }
    });
    let addr = receiver
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the server logs the address it listens on");
    addr.parse().unwrap()
}
