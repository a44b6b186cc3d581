//! One run of a command: the process started in its sandbox, its output read, its end
//! awaited until its timeout or a cancellation, and its whole process group killed.
//!
//! The process is reaped by a blocking task that waits for it without reaping
//! (`waitid(WNOWAIT)`), kills its group, then reaps it, under a lock that every other kill
//! takes too: until the leader is reaped its process id cannot be reused, so a kill of its
//! group can never reach another's. The group is killed when the command ends (so that
//! nothing it left running outlives it), at its timeout, on cancellation, and when the
//! future of the run is dropped.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use sha2::Digest as _;
use tokio_util::sync::CancellationToken;

use super::output::{Capped, pump};
use super::sandbox::{Confinement, Sandbox, confinement_available};
use super::{Argv, CommandSpec};

/// How long the output is still read once the command's group is dead: what is left in
/// the pipes comes at once; a pipe still open then is held by a process that left the
/// group.
const DRAIN: Duration = Duration::from_millis(200);

/// Why a command did not run (its own failures are a [`Ran`]).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The kernel cannot confine what the command asks, and it does not say
    /// `unconfined = true`.
    #[error(
        "the command cannot be confined as it asks: {0}; the operator may allow it unconfined with `unconfined = true`"
    )]
    Unconfinable(String),
    /// The workspace, or a writable folder in it, is missing or not where it must be.
    #[error("workspace: {0}")]
    Workspace(String),
    /// The sandbox could not be made.
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// The argv was built for another command.
    #[error("the argv was built for command `{built_for}`, not `{command}`")]
    OtherCommand { built_for: String, command: String },
    /// The program could not be started.
    #[error("cannot start `{program}`: {error}")]
    Spawn {
        program: String,
        error: std::io::Error,
    },
    /// Its end could not be awaited.
    #[error("cannot wait for the command: {0}")]
    Wait(String),
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It exited with a code the operator lists as fine.
    Ok,
    /// It exited with another code, or a signal killed it.
    Failed,
    /// Its timeout passed: its group was killed.
    TimedOut,
    /// The run was cancelled: its group was killed.
    Cancelled,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// What a run of a command did.
#[derive(Debug, Clone)]
pub struct Ran {
    /// The command's name in the commands file.
    pub command: String,
    /// The argv it ran.
    pub argv: Vec<String>,
    pub outcome: Outcome,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// The first `max_output` bytes of each stream, invalid UTF-8 replaced.
    pub stdout: String,
    pub stderr: String,
    /// Whether either stream wrote more than was kept.
    pub truncated: bool,
    /// Whether an output pipe was still open after the command's group was killed: a
    /// process that left the group held it, and its reading was stopped.
    pub left_open: bool,
    /// SHA-256, in hex, of the bytes kept of stdout then of stderr, before decoding.
    pub output_sha256: String,
    pub took_ms: u64,
}

impl Ran {
    /// Whether the command's node succeeds: it exited with a code the operator lists.
    pub fn ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }

    /// The fields of the command's audit row: its name, final argv, outcome, exit code or
    /// signal, duration, whether output was cut, and the digest of its output.
    pub fn audit(&self) -> Map<String, Value> {
        let row = json!({
            "command": self.command,
            "argv": self.argv,
            "outcome": self.outcome.name(),
            "exit_code": self.exit_code,
            "signal": self.signal,
            "took_ms": self.took_ms,
            "truncated": self.truncated,
            "output_sha256": self.output_sha256,
        });
        match row {
            Value::Object(map) => map,
            _ => unreachable!("a JSON object literal"),
        }
    }
}

/// Runs commands: the server's environment, from which each command's allow-listed
/// variables are copied, and the confinement the kernel gives.
#[derive(Debug, Clone)]
pub struct Runner {
    env: Vec<(String, std::ffi::OsString)>,
    confinement: Confinement,
}

impl Runner {
    /// A runner with the server's environment as it is now and this kernel's confinement.
    pub fn new() -> Runner {
        Runner::with(
            std::env::vars_os().filter_map(|(name, value)| Some((name.into_string().ok()?, value))),
            confinement_available(),
        )
    }

    /// A runner with the environment `env` and the confinement `confinement`.
    pub fn with(
        env: impl IntoIterator<Item = (String, std::ffi::OsString)>,
        confinement: Confinement,
    ) -> Runner {
        Runner {
            env: env.into_iter().collect(),
            confinement,
        }
    }

    /// The confinement commands get.
    pub fn confinement(&self) -> Confinement {
        self.confinement
    }

    /// Runs `argv` (built by `spec`) in `workspace`, until it ends, its timeout passes or
    /// `cancel` is cancelled. Dropping the future kills the command's group too.
    pub async fn run(
        &self,
        spec: &CommandSpec,
        argv: &Argv,
        workspace: &Path,
        cancel: CancellationToken,
    ) -> Result<Ran, RunError> {
        if argv.command != spec.name {
            return Err(RunError::OtherCommand {
                built_for: argv.command.clone(),
                command: spec.name.clone(),
            });
        }
        let sandbox = Sandbox::prepare(spec, workspace, self.confinement)?;
        let Some(program) = argv.elements.first() else {
            return Err(RunError::Sandbox("the argv names no program".to_owned()));
        };
        let mut command = std::process::Command::new(program);
        command
            .args(&argv.elements[1..])
            .env_clear()
            .current_dir(workspace)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for name in &spec.env {
            if let Some((_, value)) = self.env.iter().find(|(n, _)| n == name) {
                command.env(name, value);
            }
        }
        // SAFETY: the setup makes only async-signal-safe system calls (see sandbox.rs).
        unsafe { command.pre_exec(sandbox.child_setup()) };
        let started = Instant::now();
        let mut child = command.spawn().map_err(|error| RunError::Spawn {
            program: program.clone(),
            error,
        })?;
        // The child has applied the ruleset; the server's copy of it, and the command with
        // its environment, need not live in the future while the command runs.
        drop(sandbox);
        drop(command);
        let group = Arc::new(Group::new(child.id()));
        let _kill_on_drop = KillOnDrop(group.clone());
        let streams = (child.stdout.take(), child.stderr.take());
        let (Some(stdout), Some(stderr)) = streams else {
            return Err(RunError::Wait("its output was not piped".to_owned()));
        };
        let stdout = tokio::process::ChildStdout::from_std(stdout);
        let stderr = tokio::process::ChildStderr::from_std(stderr);
        let (stdout, stderr) = match (stdout, stderr) {
            (Ok(out), Ok(err)) => (out, err),
            (Err(e), _) | (_, Err(e)) => return Err(RunError::Wait(e.to_string())),
        };
        let waiter = tokio::task::spawn_blocking({
            let group = group.clone();
            move || {
                let status = group.wait_and_reap();
                drop(child);
                status
            }
        });
        let mut out = Capped::new(spec.max_output);
        let mut err = Capped::new(spec.max_output);
        let (status, stopped, left_open) = {
            let reading = async { tokio::join!(pump(stdout, &mut out), pump(stderr, &mut err)) };
            tokio::pin!(reading);
            tokio::pin!(waiter);
            let deadline = tokio::time::sleep(spec.timeout);
            tokio::pin!(deadline);
            let mut stopped = None;
            let mut read = false;
            let status = loop {
                tokio::select! {
                    _ = &mut reading, if !read => read = true,
                    status = &mut waiter => break status,
                    _ = &mut deadline, if stopped.is_none() => {
                        stopped = Some(Outcome::TimedOut);
                        group.kill();
                    }
                    _ = cancel.cancelled(), if stopped.is_none() => {
                        stopped = Some(Outcome::Cancelled);
                        group.kill();
                    }
                }
            };
            let left_open = !read && tokio::time::timeout(DRAIN, &mut reading).await.is_err();
            (status, stopped, left_open)
        };
        let took_ms = started.elapsed().as_millis() as u64;
        let status = status
            .map_err(|e| RunError::Wait(e.to_string()))?
            .map_err(|e| RunError::Wait(e.to_string()))?;
        let (exit_code, signal) = status;
        let outcome = stopped.unwrap_or(match exit_code {
            Some(code) if spec.ok_exit(code) => Outcome::Ok,
            _ => Outcome::Failed,
        });
        let mut digest = sha2::Sha256::new();
        digest.update(out.bytes());
        digest.update(err.bytes());
        Ok(Ran {
            command: spec.name.clone(),
            argv: argv.elements.clone(),
            outcome,
            exit_code,
            signal,
            stdout: out.text(),
            stderr: err.text(),
            truncated: out.truncated() || err.truncated(),
            left_open,
            output_sha256: crate::auth::hex(&digest.finalize()),
            took_ms,
        })
    }
}

impl Default for Runner {
    fn default() -> Runner {
        Runner::new()
    }
}

/// A command's process group, led by the process started (its id is the group's, as the
/// child made a session of its own), and whether the leader is reaped.
struct Group {
    leader: libc::pid_t,
    reaped: parking_lot::Mutex<bool>,
}

impl Group {
    fn new(pid: u32) -> Group {
        Group {
            leader: pid as libc::pid_t,
            reaped: parking_lot::Mutex::new(false),
        }
    }

    /// Kills every process of the group, unless its leader is reaped (its id could then
    /// be another's).
    fn kill(&self) {
        let reaped = self.reaped.lock();
        if !*reaped {
            // SAFETY: killpg on a group whose leader is not reaped reaches that group.
            unsafe { libc::killpg(self.leader, libc::SIGKILL) };
        }
    }

    /// Blocks until the leader ends, kills what is left of its group, then reaps the
    /// leader: its exit code or the signal that killed it.
    fn wait_and_reap(&self) -> std::io::Result<(Option<i32>, Option<i32>)> {
        loop {
            // SAFETY: waitid fills the siginfo it is given; WNOWAIT leaves the child
            // unreaped.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let waited = unsafe {
                libc::waitid(
                    libc::P_PID,
                    self.leader as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if waited == 0 {
                break;
            }
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::Interrupted {
                // Not a child of ours to wait for (reaped by someone else): never kill its
                // group again, whose id may now be another's.
                *self.reaped.lock() = true;
                return Err(error);
            }
        }
        let mut reaped = self.reaped.lock();
        let mut status = 0;
        // SAFETY: the leader is a zombie of ours: its group id is still its own.
        unsafe { libc::killpg(self.leader, libc::SIGKILL) };
        // SAFETY: waitpid fills the status it is given.
        let waited = unsafe { libc::waitpid(self.leader, &mut status, 0) };
        *reaped = true;
        if waited != self.leader {
            return Err(std::io::Error::last_os_error());
        }
        Ok(match libc::WIFEXITED(status) {
            true => (Some(libc::WEXITSTATUS(status)), None),
            false => (None, Some(libc::WTERMSIG(status))),
        })
    }
}

/// Kills the group when the run's future is dropped (and, harmlessly, when it ends).
struct KillOnDrop(Arc<Group>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.kill();
    }
}
