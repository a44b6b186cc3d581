//! Who holds a run's lease: a process, named so that another process can tell whether it
//! is gone, and a store shared by several machines never takes a live machine's runs.
//!
//! An owner is `pid@machine:uuid`. `machine` names where `pid` means that process: the
//! kernel's boot and the PID namespace, so that two containers on one kernel, or two
//! hosts on one PostgreSQL, are different machines. A process can see that an owner of
//! its own machine has died; of another machine's, only the lease's expiry tells.

use std::sync::OnceLock;

/// A new lease owner for this process.
pub(crate) fn new_owner() -> String {
    format!(
        "{}@{}:{}",
        std::process::id(),
        this_machine(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Whether the process named in lease owner `owner` is known to be gone: it was of this
/// machine and no longer runs. Owners of the form `pid:uuid`, written before machines
/// were named, are taken to be of this machine, as they were then.
pub(crate) fn owner_is_gone(owner: &str) -> bool {
    let Some((process, _)) = owner.split_once(':') else {
        return false;
    };
    let (pid, machine) = match process.split_once('@') {
        Some((pid, machine)) => (pid, Some(machine)),
        None => (process, None),
    };
    if machine.is_some_and(|machine| machine != this_machine()) {
        return false;
    }
    let Ok(pid) = pid.parse::<i32>() else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    !alive
}

/// This machine's name: the kernel's boot id and the PID namespace's inode. Where either
/// cannot be read, a name of this process alone, so that no other process is ever
/// thought gone by mistake.
fn this_machine() -> &'static str {
    static MACHINE: OnceLock<String> = OnceLock::new();
    MACHINE.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id");
        let namespace = std::fs::read_link("/proc/self/ns/pid");
        match (boot, namespace) {
            (Ok(boot), Ok(namespace)) => {
                let boot: String = boot
                    .trim()
                    .chars()
                    .filter(char::is_ascii_hexdigit)
                    .take(12)
                    .collect();
                let namespace: String = namespace
                    .to_string_lossy()
                    .chars()
                    .filter(char::is_ascii_digit)
                    .collect();
                format!("{boot}-{namespace}")
            }
            _ => format!("p{}", uuid::Uuid::new_v4().simple()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_not_gone_and_a_dead_one_of_this_machine_is() {
        let me = new_owner();
        assert!(!owner_is_gone(&me));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let dead = format!("{pid}@{}:x", this_machine());
        assert!(owner_is_gone(&dead));
    }

    #[test]
    fn an_owner_of_another_machine_is_never_thought_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!owner_is_gone(&format!("{pid}@elsewhere-1:x")));
        assert!(
            owner_is_gone(&format!("{pid}:x")),
            "an owner of before machines had names"
        );
    }
}
