//! The sandbox of a command: what the kernel can confine ([`Confinement`]), the Landlock
//! ruleset and resource limits of one run, built in the server, and the steps the child
//! takes between fork and exec to put itself in them.
//!
//! Between fork and exec the child of a multithreaded server may call only
//! async-signal-safe functions: another thread may have held the allocator's lock at the
//! fork, so an allocation there can deadlock. Everything is therefore made before the
//! fork: the ruleset (a file descriptor the landlock crate fills with rules; opening the
//! rules' folders allocates) and the limits (plain numbers). The child then makes only
//! system calls, on numbers it captured by copy: `setsid`, `setrlimit`,
//! `prctl(PR_SET_NO_NEW_PRIVS)`, `landlock_restrict_self` on the ruleset's descriptor, and
//! `close_range`. The crate's own `RulesetCreated::restrict_self` does the same two calls
//! and, in 0.4.8, allocates nothing either, but it consumes the ruleset (whose drop and
//! bookkeeping are the crate's business, free to change in a patch release): calling the
//! two system calls directly keeps what runs in the child to what is written here.

use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

use super::CommandSpec;
use super::run::RunError;

/// The Landlock ABI whose writes confinement is whole: ABI 3 adds truncation, without
/// which a file outside the writable folders could still be emptied.
const FILESYSTEM_ABI: u32 = 3;
/// The Landlock ABI that denies TCP bind and connect.
const NETWORK_ABI: u32 = 4;
/// The Landlock ABI that scopes signals and abstract Unix sockets to the sandbox.
const SCOPE_ABI: u32 = 6;

/// What the running kernel can enforce on a command: its Landlock ABI version, 0 without
/// Landlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confinement {
    abi: u32,
}

/// What this kernel can enforce, asked once and remembered.
pub fn confinement_available() -> Confinement {
    static AVAILABLE: OnceLock<Confinement> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) answers the ABI
        // version, or fails where Landlock is not built in or not enabled.
        // SAFETY: a null attribute with size 0 and this flag only queries the version.
        let version = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                1u32,
            )
        };
        Confinement {
            abi: u32::try_from(version).unwrap_or(0),
        }
    })
}

impl Confinement {
    /// No confinement: a kernel without Landlock.
    pub fn none() -> Confinement {
        Confinement { abi: 0 }
    }

    /// The confinement of a kernel with Landlock ABI `abi`: what the server enforces when
    /// the kernel has at least that (an older kernel's, say, to try a command against).
    pub fn up_to(abi: u32) -> Confinement {
        Confinement {
            abi: abi.min(confinement_available().abi),
        }
    }

    /// The Landlock ABI version, 0 without Landlock.
    pub fn abi(&self) -> u32 {
        self.abi
    }

    /// Whether writes are confined to a command's folders.
    pub fn filesystem(&self) -> bool {
        self.abi >= FILESYSTEM_ABI
    }

    /// Whether TCP bind and connect can be denied.
    pub fn network(&self) -> bool {
        self.abi >= NETWORK_ABI
    }

    /// Whether a command is kept from signalling processes outside its sandbox.
    pub fn scoped(&self) -> bool {
        self.abi >= SCOPE_ABI
    }

    /// What `spec` asks that this cannot enforce, if anything.
    pub(crate) fn lacks(&self, spec: &CommandSpec) -> Option<String> {
        if !self.filesystem() {
            return Some(format!(
                "confining its writes needs Landlock ABI {FILESYSTEM_ABI}, {}",
                self.had()
            ));
        }
        if !spec.network && !self.network() {
            return Some(format!(
                "denying it the network (network = false) needs Landlock ABI {NETWORK_ABI}, {}",
                self.had()
            ));
        }
        None
    }

    fn had(&self) -> String {
        match self.abi {
            0 => "and this kernel has no Landlock".to_owned(),
            abi => format!("and this kernel has ABI {abi}"),
        }
    }
}

impl std::fmt::Display for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.abi == 0 {
            return f.write_str(
                "no Landlock: commands run only where the commands file says \
                 unconfined = true, and then unconfined",
            );
        }
        write!(f, "Landlock ABI {}: ", self.abi)?;
        f.write_str(match self.filesystem() {
            true => "writes confined to each command's folders",
            false => "writes confined but for truncation",
        })?;
        if self.network() {
            f.write_str("; TCP bind and connect denied unless network = true")?;
        }
        if self.scoped() {
            f.write_str("; signals and abstract Unix sockets kept inside the sandbox")?;
        }
        Ok(())
    }
}

/// One resource limit: the resource and its soft and hard values.
type Limit = (libc::__rlimit_resource_t, libc::rlimit);

/// The sandbox of one run, made before the fork.
pub(crate) struct Sandbox {
    /// The Landlock ruleset, filled; `None` where the kernel has no Landlock (and the
    /// command says `unconfined = true`). Kept open until the child has applied it.
    ruleset: Option<OwnedFd>,
    limits: [Limit; 5],
}

impl Sandbox {
    /// The sandbox of `spec` in `workspace`: refused when the kernel cannot confine what
    /// the spec asks and the spec does not say `unconfined = true`, or when a writable
    /// folder is missing or resolves outside the workspace.
    pub(crate) fn prepare(
        spec: &CommandSpec,
        workspace: &Path,
        confinement: Confinement,
    ) -> Result<Sandbox, RunError> {
        if let Some(lack) = confinement.lacks(spec)
            && !spec.unconfined
        {
            return Err(RunError::Unconfinable(lack));
        }
        let workspace = std::fs::canonicalize(workspace)
            .map_err(|e| RunError::Workspace(format!("{}: {e}", workspace.display())))?;
        let folders = (spec.writable.iter())
            .map(|folder| writable_folder(&workspace, folder))
            .collect::<Result<Vec<_>, _>>()?;
        let ruleset = match confinement.abi {
            0 => None,
            abi => ruleset(spec, abi, folders).map_err(|e| {
                RunError::Sandbox(format!("cannot build its Landlock ruleset: {e}"))
            })?,
        };
        Ok(Sandbox {
            ruleset,
            limits: limits(spec),
        })
    }

    /// The steps the child takes between fork and exec, capturing only numbers.
    ///
    /// SAFETY (for the caller of `pre_exec` with it): the closure makes only
    /// async-signal-safe system calls and allocates nothing; `io::Error::last_os_error`
    /// holds the error number inline.
    pub(crate) fn child_setup(
        &self,
    ) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
        let ruleset: RawFd = self.ruleset.as_ref().map_or(-1, |fd| fd.as_raw_fd());
        let limits = self.limits;
        move || {
            let fail = || Err(std::io::Error::last_os_error());
            // SAFETY: each call is a system call on plain numbers, async-signal-safe.
            unsafe {
                // A session of its own: its own process group, to be killed whole, and no
                // controlling terminal to reach through /dev/tty.
                if libc::setsid() == -1 {
                    return fail();
                }
                for (resource, limit) in &limits {
                    if libc::setrlimit(*resource, limit) != 0 {
                        return fail();
                    }
                }
                if ruleset >= 0 {
                    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                        return fail();
                    }
                    if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
                        return fail();
                    }
                }
                close_inherited();
            }
            Ok(())
        }
    }
}

/// Marks every descriptor from 3 up close-on-exec, so that the program starts with stdin,
/// stdout and stderr alone. Marked, not closed: the standard library reports a failed
/// exec to the parent through a close-on-exec pipe among them.
///
/// SAFETY: system calls only; for the child between fork and exec.
unsafe fn close_inherited() {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC changes flags only (Linux 5.11).
    let marked = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if marked == 0 {
        return;
    }
    // An older kernel: each descriptor up to the limit of open files, one by one.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let highest = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
        0 => limit.rlim_cur.min(1 << 20) as RawFd,
        _ => 1 << 16,
    };
    for fd in 3..highest {
        // SAFETY: F_SETFD on a descriptor that may not exist fails harmlessly.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

/// The resource limits of `spec`, none above what the server has itself (an unprivileged
/// child may not raise a hard limit).
pub(super) fn limits(spec: &CommandSpec) -> [Limit; 5] {
    // CPU seconds of each process: the wall timeout bounds the command, this bounds a
    // process that escaped its group. One second more for the hard limit, so that
    // SIGXCPU comes first.
    let cpu = spec.timeout.as_secs() + 1;
    let wanted = [
        (libc::RLIMIT_CPU, cpu, cpu + 1),
        (libc::RLIMIT_AS, spec.max_memory, spec.max_memory),
        (libc::RLIMIT_NPROC, spec.max_processes, spec.max_processes),
        (libc::RLIMIT_FSIZE, spec.max_file_size, spec.max_file_size),
        // No core dumps in the workspace.
        (libc::RLIMIT_CORE, 0, 0),
    ];
    wanted.map(|(resource, soft, hard)| {
        let mut own = libc::rlimit {
            rlim_cur: libc::RLIM_INFINITY,
            rlim_max: libc::RLIM_INFINITY,
        };
        // SAFETY: getrlimit writes the struct it is given.
        unsafe { libc::getrlimit(resource, &mut own) };
        let hard = hard.min(own.rlim_max);
        (
            resource,
            libc::rlimit {
                rlim_cur: soft.min(hard),
                rlim_max: hard,
            },
        )
    })
}

/// A writable folder, opened: refused when missing, not a folder, or resolving (through a
/// symbolic link) outside the workspace. The check reads where the opened descriptor
/// points, so a link swapped after it cannot widen the rule.
fn writable_folder(workspace: &Path, folder: &Path) -> Result<PathFd, RunError> {
    let path = workspace.join(folder);
    let refused =
        |why: String| RunError::Workspace(format!("writable folder `{}`: {why}", folder.display()));
    let fd = PathFd::new(&path).map_err(|e| refused(e.to_string()))?;
    let raw = fd.as_fd().as_raw_fd();
    let real: PathBuf = std::fs::read_link(format!("/proc/self/fd/{raw}"))
        .map_err(|e| refused(format!("cannot tell where it leads: {e}")))?;
    if !real.starts_with(workspace) {
        return Err(refused("it leads outside the workspace".to_owned()));
    }
    let metadata =
        std::fs::metadata(format!("/proc/self/fd/{raw}")).map_err(|e| refused(e.to_string()))?;
    if !metadata.is_dir() {
        return Err(refused("it is not a folder".to_owned()));
    }
    Ok(fd)
}

/// The ruleset of `spec` for a kernel with Landlock ABI `abi`: read and execute
/// everywhere; write `/dev/null` and under `folders`; with `network = false`, no TCP and
/// no abstract Unix socket out of the sandbox; never a signal out of it.
///
/// The ABI is the one [`Confinement`] reported, not the newest the crate knows with its
/// best-effort fallback: so that what was said at start is what is enforced, and an older
/// kernel's confinement can be asked for ([`Confinement::up_to`]).
fn ruleset(spec: &CommandSpec, abi: u32, folders: Vec<PathFd>) -> Result<Option<OwnedFd>, String> {
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let abi = ABI::from(i32::try_from(abi).unwrap_or(i32::MAX));
    let mut handled = AccessFs::from_all(abi);
    if spec.network {
        // Connecting to a pathname Unix socket (ABI 9) is network, which it may use.
        handled.remove(AccessFs::ResolveUnix);
    }
    let mut ruleset = Ruleset::default()
        .handle_access(handled)
        .map_err(|e| text(&e))?;
    let network = AccessNet::from_all(abi);
    if !spec.network && !network.is_empty() {
        ruleset = ruleset.handle_access(network).map_err(|e| text(&e))?;
    }
    let mut scopes: BitFlags<Scope> = Scope::from_all(abi);
    if spec.network {
        scopes.remove(Scope::AbstractUnixSocket);
    }
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(|e| text(&e))?;
    }
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    let root = PathFd::new("/").map_err(|e| text(&e))?;
    let null = PathFd::new("/dev/null").map_err(|e| text(&e))?;
    let mut created = (ruleset.create())
        .and_then(|r| r.add_rule(PathBeneath::new(root, AccessFs::from_read(abi))))
        .and_then(|r| r.add_rule(PathBeneath::new(null, device & handled)))
        .map_err(|e| text(&e))?;
    for folder in folders {
        created = (created.add_rule(PathBeneath::new(folder, handled))).map_err(|e| text(&e))?;
    }
    Ok(created.into())
}
