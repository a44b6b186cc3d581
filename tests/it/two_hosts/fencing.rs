//! Fencing: a host that lost a run's lease writes nothing more of it. Cut off from the
//! database by the network (the proxy between them stopped), a host's runs are taken over
//! and finished by the other; back on the network, it makes no todo, no file and no audit
//! row of them. A host that loses the lease while a `write_file` is in progress does not
//! land its file, nor the node's record.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use mcp_task_server::store::{AuditOutcome, Durability, Scope, Scratch, Store};

use super::proxy::Proxy;
use super::{
    give, held_by, job, job_titles, owner_prefix, serve, signal, statuses, stop, workspace,
};
use crate::support::{sorted_titles, wait_until_within};

const RUNS: u64 = 3;

/// What the server logs when it gives a run up because the journal refused a batch.
const GIVEN_UP: &str = "this process stops driving it";

/// What it logs when the journal refuses the batch that ends a run.
const END_REFUSED: &str = "the run's end could not be saved";

/// The host and port of a PostgreSQL URL.
fn server_address(url: &str) -> std::net::SocketAddr {
    let after_at = url.rsplit_once('@').map_or(url, |(_, rest)| rest);
    let host_port = after_at.split(['/', '?']).next().unwrap();
    std::net::ToSocketAddrs::to_socket_addrs(host_port)
        .unwrap()
        .next()
        .unwrap()
}

fn log_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn a_host_cut_off_from_the_database_loses_its_runs_and_back_writes_nothing_more() {
    let Some(scratch) = Scratch::postgres("two_hosts_cut_off") else {
        return;
    };
    // A wait the host is cut off in, then a file.
    let dir = workspace(&[("filed_job", &job("filed_job", "10s", true))]);
    std::fs::create_dir(dir.path().join("out")).unwrap();
    let store = Store::open_at(scratch.url(), Durability::Normal).unwrap();
    let mut proxy = Proxy::start(server_address(scratch.url()));
    let log = dir.path().join("a.log");
    let lease = ["--lease", "1s"];
    let through_proxy = proxy.url(scratch.url());
    let file = std::fs::File::create(&log).unwrap();
    let mut a = serve(dir.path(), &through_proxy, &lease, &[], Stdio::null(), file);
    let mut b = serve(
        dir.path(),
        scratch.url(),
        &lease,
        &[],
        Stdio::null(),
        Stdio::null(),
    );
    give(&mut a, "filed_job", 0..RUNS);
    give(&mut b, "filed_job", RUNS..2 * RUNS);
    let all = (2 * RUNS) as usize;
    wait_until_within(
        "every run has made its first todo",
        Duration::from_secs(20),
        || store.list_todos(&Default::default()).unwrap().len() >= all,
    );
    assert_eq!(held_by(&store, &owner_prefix(&a)), RUNS as usize);

    // Cut off in the wait, A renews nothing; B takes its runs once their leases run out.
    proxy.cut();
    wait_until_within("B holds every run", Duration::from_secs(20), || {
        held_by(&store, &owner_prefix(&b)) == all
    });
    // Back before its waits end, A goes on with the runs it believes it drives, and finds
    // them taken at its next commit.
    proxy.restore();
    wait_until_within("every run has succeeded", Duration::from_secs(40), || {
        statuses(&store).iter().all(|s| s == "succeeded")
    });
    wait_until_within(
        "A has given up each of its runs",
        Duration::from_secs(30),
        || log_of(&log).matches(GIVEN_UP).count() >= RUNS as usize,
    );
    assert!(
        log_of(&log).contains("is driven by another process now"),
        "A was refused for the lease, not cut off: {}",
        log_of(&log)
    );
    // Time for anything A might still write to land, if it could.
    std::thread::sleep(Duration::from_secs(2));
    stop(a);
    stop(b);

    assert_eq!(
        sorted_titles(&store),
        job_titles(0..2 * RUNS),
        "every todo exactly once"
    );
    let audit = store.audit_rows().unwrap();
    let calls = |tool: &str| audit.iter().filter(|r| r.tool == tool).count();
    assert_eq!(calls("add_task"), 2 * all, "one audited call per todo");
    assert_eq!(calls("write_file"), all, "one audited write per file");
    assert!(
        audit
            .iter()
            .filter(|r| r.tool == "write_file")
            .all(|r| r.outcome == AuditOutcome::Ok.as_str()),
        "no write was refused as a conflict with another's"
    );
    let mut files: Vec<String> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let expected: Vec<String> = (0..2 * RUNS).map(|n| format!("{n}.txt")).collect();
    assert_eq!(
        files, expected,
        "each file once, and no write left half done"
    );
    for n in 0..2 * RUNS {
        let text = std::fs::read_to_string(dir.path().join(format!("out/{n}.txt"))).unwrap();
        assert_eq!(text, format!("job {n}"));
    }
}

/// One large file: writing it takes long enough for the test to stop the host between
/// the file's creation under its temporary name and its rename into place.
const BIG_WRITE: &str = r#"
name = "big_write"
description = "Writes a large file."
expose_as_tool = true

[inputs.n]
type = "integer"

[nodes.big]
write_file = { path = "out/big.txt", content = "{{ 'x' * 67108864 }}" }
"#;

#[test]
fn a_host_that_loses_its_lease_mid_write_does_not_land_its_file_nor_its_record() {
    let Some(scratch) = Scratch::postgres("two_hosts_fenced_write") else {
        return;
    };
    let dir = workspace(&[("big_write", BIG_WRITE)]);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let store = Store::open_at(scratch.url(), Durability::Normal).unwrap();
    let log = dir.path().join("a.log");
    let args = [
        "--lease",
        "1s",
        "--template-max-output",
        "134217728",
        "--template-fuel",
        "1000000000",
    ];
    let file = std::fs::File::create(&log).unwrap();
    let mut a = serve(dir.path(), scratch.url(), &args, &[], Stdio::null(), file);
    let created = Created::watch(&out);
    give(&mut a, "big_write", 0..1);

    // Stopped as soon as its temporary file appears, before the content is even written.
    let temp = created.next(Duration::from_secs(60));
    assert!(temp.starts_with(".big.txt."), "{temp}");
    signal(&a, libc::SIGSTOP);
    wait_until_within("A is stopped", Duration::from_secs(10), || stopped(&a));
    assert!(
        !out.join("big.txt").exists(),
        "the host renamed its file before the test could stop it; it must be stopped mid-write"
    );

    // Its lease runs out; another host claims the run (by the database's clock).
    let runs = store
        .list_runs(Some("running"), Scope::Everyone, 10)
        .unwrap();
    let [run] = &runs[..] else {
        panic!("one run: {runs:?}")
    };
    wait_until_within(
        "another host claims the run",
        Duration::from_secs(30),
        || {
            store
                .claim_run(&run.id, "another-host", 600_000, None, None)
                .unwrap()
        },
    );
    signal(&a, libc::SIGCONT);
    wait_until_within("A's journal refuses it", Duration::from_secs(60), || {
        let log = log_of(&log);
        log.contains(GIVEN_UP) || log.contains(END_REFUSED)
    });
    std::thread::sleep(Duration::from_millis(500));
    stop(a);

    assert!(
        !out.join("big.txt").exists(),
        "the file of a host that lost its lease landed"
    );
    let left: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert!(left.is_empty(), "its temporary file is removed: {left:?}");
    let nodes = store.nodes(&run.id).unwrap();
    assert!(
        nodes.iter().all(|n| n.status != "succeeded"),
        "the write's record landed: {nodes:?}"
    );
    let audit = store.audit_rows().unwrap();
    assert!(
        audit.iter().all(|r| r.tool != "write_file"),
        "the write's audit row landed"
    );
    assert_eq!(
        store.lease_owner(&run.id).unwrap(),
        Some(Some("another-host".to_owned()))
    );
}

/// Whether the process is stopped (state `T` in `/proc/PID/stat`).
fn stopped(host: &Child) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", host.id())).unwrap();
    let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
    state == Some(Some('T'))
}

/// The names of the files made in a folder, as inotify tells them.
struct Created {
    fd: std::os::fd::OwnedFd,
}

impl Created {
    fn watch(folder: &Path) -> Created {
        use std::os::fd::FromRawFd;
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: plain system calls; the descriptor is owned from here on.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        assert!(fd >= 0, "inotify: {}", std::io::Error::last_os_error());
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let path = std::ffi::CString::new(folder.as_os_str().as_bytes()).unwrap();
        // SAFETY: `path` is NUL-terminated and outlives the call.
        let watch = unsafe {
            libc::inotify_add_watch(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                path.as_ptr(),
                libc::IN_CREATE,
            )
        };
        assert!(watch >= 0, "inotify: {}", std::io::Error::last_os_error());
        Created { fd }
    }

    /// The name of the next file made, waiting up to `limit`.
    fn next(&self, limit: Duration) -> String {
        use std::os::fd::AsRawFd;
        let mut poll = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut poll, 1, ms) };
        assert_eq!(ready, 1, "no file was made within {limit:?}");
        let mut buffer = [0u8; 4096];
        // SAFETY: the buffer is valid for its length.
        let read = unsafe { libc::read(poll.fd, buffer.as_mut_ptr().cast(), buffer.len()) };
        assert!(read > 16, "inotify: {}", std::io::Error::last_os_error());
        // struct inotify_event: wd, mask, cookie, len (4 bytes each), then the name.
        let len = u32::from_ne_bytes(buffer[12..16].try_into().unwrap()) as usize;
        let name = &buffer[16..16 + len];
        let name = name.split(|&b| b == 0).next().unwrap();
        String::from_utf8_lossy(name).into_owned()
    }
}
