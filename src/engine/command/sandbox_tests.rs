//! Tests of the sandbox: the confinement it reports, what a command needs of it, and,
//! with real processes, what Landlock and the limits refuse a command and what the child
//! does not inherit.

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::run_tests::{pids, run, run_with, server_env, workspace};
use super::sandbox::limits;
use super::{Commands, Confinement, Outcome, RunError, Runner, confinement_available};

fn spec(keys: &str) -> super::CommandSpec {
    let text = format!("[commands.c]\nargv = [\"/bin/true\"]\n{keys}\n");
    Commands::parse(&text).unwrap().get("c").unwrap().clone()
}

#[test]
fn the_confinement_says_what_the_kernel_enforces() {
    let here = confinement_available();
    assert_eq!(here, confinement_available(), "asked once");
    // The machines this project builds on have Landlock with network rules (ABI 4+).
    assert!(here.network(), "{here}");
    assert!(
        here.to_string()
            .starts_with(&format!("Landlock ABI {}: ", here.abi()))
    );
    let none = Confinement::none();
    assert!(!none.filesystem() && !none.network() && !none.scoped());
    assert!(none.to_string().starts_with("no Landlock"), "{none}");
    let three = Confinement::up_to(3);
    assert!(three.filesystem() && !three.network());
    assert_eq!(Confinement::up_to(99), here, "never more than the kernel's");
    assert!(Confinement::up_to(6).scoped() && !Confinement::up_to(5).scoped());
}

#[test]
fn a_command_needs_writes_confined_and_the_network_denied_unless_it_allows_it() {
    let offline = spec("");
    let online = spec("network = true");
    assert!(
        Confinement::none()
            .lacks(&online)
            .unwrap()
            .contains("no Landlock")
    );
    assert!(
        Confinement::up_to(2)
            .lacks(&online)
            .unwrap()
            .contains("ABI 3")
    );
    assert_eq!(Confinement::up_to(3).lacks(&online), None);
    let lack = Confinement::up_to(3).lacks(&offline).unwrap();
    assert!(
        lack.contains("network = false") && lack.contains("ABI 4"),
        "{lack}"
    );
    assert_eq!(Confinement::up_to(4).lacks(&offline), None);
}

#[test]
fn the_limits_follow_the_spec_and_never_pass_the_servers_own() {
    let found = limits(&spec(
        "timeout = \"90s\"\nmax_memory = \"256MiB\"\nmax_processes = 8\nmax_file_size = 1000",
    ));
    let get = |resource| {
        let (_, limit) = found.iter().find(|(r, _)| *r == resource).unwrap();
        (limit.rlim_cur, limit.rlim_max)
    };
    let mut own = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut own) };
    assert_eq!(get(libc::RLIMIT_CPU), (91, 92));
    assert_eq!(get(libc::RLIMIT_AS), (256 << 20, 256 << 20));
    assert_eq!(
        get(libc::RLIMIT_NPROC),
        (8.min(own.rlim_max), 8.min(own.rlim_max))
    );
    assert_eq!(get(libc::RLIMIT_FSIZE), (1000, 1000));
    assert_eq!(get(libc::RLIMIT_CORE), (0, 0));
}

#[tokio::test]
async fn writes_outside_the_writable_folders_are_refused_by_landlock() {
    let elsewhere = tempfile::tempdir().unwrap();
    let ws = workspace(&[
        ("keep.txt", "kept"),
        (
            "write.sh",
            r#"echo x > outside.txt; echo "outside $?"
echo x > "$1/escape.txt"; echo "elsewhere $?"
echo y > out/inside.txt; echo "inside $?"
rm keep.txt; echo "remove $?"
mkdir out/sub && echo z > out/sub/deep.txt; echo "deep $?"
echo to-stderr > /dev/stderr; echo "stderr $?"
echo discarded > /dev/null; echo "null $?"
"#,
        ),
    ]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "write.sh", "{dir}"]
        writable = ["out"]
        params.dir.type = "string"
    "#;
    let dir = elsewhere.path().to_str().unwrap();
    let ran = run(toml, json!({ "dir": dir }), ws.path()).await;
    let said: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(said[0], "outside 2", "{ran:?}");
    assert_eq!(said[1], "elsewhere 2");
    assert_eq!(said[2], "inside 0");
    assert_ne!(said[3], "remove 0");
    assert_eq!(said[4], "deep 0");
    // Its own output and /dev/null, opened by path, stay writable.
    assert_eq!(said[5..], ["stderr 0", "null 0"]);
    assert!(ran.stderr.contains("to-stderr"), "{}", ran.stderr);
    assert!(ran.stderr.contains("Permission denied"), "{}", ran.stderr);
    assert!(!ws.path().join("outside.txt").exists());
    assert!(!elsewhere.path().join("escape.txt").exists());
    assert!(ws.path().join("keep.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out/inside.txt")).unwrap(),
        "y\n"
    );
}

#[tokio::test]
async fn a_writable_folder_that_is_missing_or_leads_outside_is_refused() {
    let elsewhere = tempfile::tempdir().unwrap();
    let ws = workspace(&[("file", "")]);
    std::os::unix::fs::symlink(elsewhere.path(), ws.path().join("link")).unwrap();
    std::os::unix::fs::symlink("/", ws.path().join("out/root")).unwrap();
    let runner = Runner::with(server_env(), confinement_available());
    for (folder, said) in [
        ("missing", "No such file"),
        ("link", "leads outside the workspace"),
        ("out/root", "leads outside the workspace"),
        ("file", "not a folder"),
    ] {
        let toml = format!("[commands.c]\nargv = [\"/bin/true\"]\nwritable = [\"{folder}\"]\n");
        let cancel = CancellationToken::new();
        let error = run_with(&runner, &toml, "c", json!({}), ws.path(), cancel)
            .await
            .unwrap_err();
        assert!(matches!(error, RunError::Workspace(_)), "{error}");
        assert!(error.to_string().contains(said), "{folder}: {error}");
    }
}

#[tokio::test]
async fn the_network_is_denied_unless_the_command_allows_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = "if exec 3<>/dev/tcp/127.0.0.1/$1; then echo connected; else echo refused; fi\n";
    let ws = workspace(&[("net.sh", script)]);
    for (network, said) in [(false, "refused"), (true, "connected")] {
        let toml = format!(
            "[commands.c]\nargv = [\"/bin/bash\", \"net.sh\", \"{{port}}\"]\n\
             network = {network}\nparams.port.type = \"integer\"\n"
        );
        let ran = run(&toml, json!({ "port": port }), ws.path()).await;
        assert_eq!(ran.stdout, format!("{said}\n"), "{ran:?}");
        let accepted = listener.accept();
        assert_eq!(accepted.is_ok(), network, "{accepted:?}");
    }
}

#[tokio::test]
async fn no_inherited_descriptor_reaches_the_command() {
    let file = std::fs::File::open("/dev/null").unwrap();
    // A descriptor without close-on-exec, as a careless library might leave one.
    // SAFETY: dup of an open descriptor; the copy is closed below.
    let leaked = unsafe { libc::dup(std::os::fd::AsRawFd::as_raw_fd(&file)) };
    assert!(leaked > 3);
    let ws = workspace(&[]);
    let toml = "[commands.c]\nargv = [\"/bin/ls\", \"/proc/self/fd\"]\n";
    let ran = run(toml, json!({}), ws.path()).await;
    // SAFETY: the copy made above.
    unsafe { libc::close(leaked) };
    assert_eq!(ran.outcome, Outcome::Ok, "{ran:?}");
    // stdin, stdout, stderr, and the folder ls reads.
    assert_eq!(pids(&ran.stdout), [0, 1, 2, 3], "{ran:?}");
}

#[tokio::test]
async fn a_big_allocation_is_stopped_by_the_memory_limit() {
    let ws = workspace(&[]);
    let toml = |memory: &str| {
        format!(
            "[commands.c]\nargv = [\"/bin/dd\", \"if=/dev/zero\", \"of=/dev/null\", \
             \"bs=256M\", \"count=1\"]\nmax_memory = \"{memory}\"\n"
        )
    };
    let ran = run(&toml("64MiB"), json!({}), ws.path()).await;
    assert_eq!(ran.outcome, Outcome::Failed, "{ran:?}");
    assert!(ran.stderr.contains("memory exhausted"), "{ran:?}");
    let ran = run(&toml("1GiB"), json!({}), ws.path()).await;
    assert_eq!(ran.outcome, Outcome::Ok, "{ran:?}");
}

#[tokio::test]
async fn a_big_file_is_stopped_by_the_file_size_limit() {
    let ws = workspace(&[]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "-c", "head -c 100000 /dev/zero > out/big; echo $?"]
        writable = ["out"]
        max_file_size = "16KiB"
        env = ["PATH"]
    "#;
    let ran = run(toml, json!({}), ws.path()).await;
    // head was killed by SIGXFSZ.
    assert_eq!(ran.stdout, format!("{}\n", 128 + libc::SIGXFSZ), "{ran:?}");
    let size = std::fs::metadata(ws.path().join("out/big")).unwrap().len();
    assert_eq!(size, 16 * 1024);
}

#[tokio::test]
async fn forks_past_the_process_limit_fail() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        // The kernel does not hold root to RLIMIT_NPROC (see the module's documentation);
        // a fork loop is bounded by the group kill, which the timeout test covers.
        return;
    }
    let ws = workspace(&[]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "-c", "/bin/true && echo forked"]
        max_processes = 1
    "#;
    let ran = run(toml, json!({}), ws.path()).await;
    assert_eq!(ran.outcome, Outcome::Failed, "{ran:?}");
    assert!(!ran.stdout.contains("forked"), "{ran:?}");
}

#[tokio::test]
async fn signals_out_of_the_sandbox_are_refused() {
    let script = "kill -0 $$ && echo self\nkill -0 $1 2>/dev/null || echo refused\n";
    let ws = workspace(&[("signal.sh", script)]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "signal.sh", "{pid}"]
        params.pid.type = "integer"
    "#;
    let ran = run(toml, json!({ "pid": std::process::id() }), ws.path()).await;
    assert_eq!(ran.stdout, "self\nrefused\n", "{ran:?}");
}

#[tokio::test]
async fn a_kernel_that_cannot_confine_refuses_the_command_unless_unconfined() {
    let ws = workspace(&[]);
    let write = |network: bool, unconfined: bool| {
        format!(
            "[commands.c]\nargv = [\"/bin/sh\", \"-c\", \"echo x > outside.txt; echo $?\"]\n\
             network = {network}\nunconfined = {unconfined}\n"
        )
    };
    let no_landlock = Runner::with(server_env(), Confinement::none());
    let cancel = CancellationToken::new;
    let error = run_with(
        &no_landlock,
        &write(true, false),
        "c",
        json!({}),
        ws.path(),
        cancel(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, RunError::Unconfinable(_)), "{error}");
    assert!(error.to_string().contains("no Landlock"), "{error}");
    let ran = run_with(
        &no_landlock,
        &write(true, true),
        "c",
        json!({}),
        ws.path(),
        cancel(),
    )
    .await
    .unwrap();
    assert_eq!(ran.stdout, "0\n", "unconfined, it writes: {ran:?}");
    std::fs::remove_file(ws.path().join("outside.txt")).unwrap();
    // A kernel with writes confined but not the network.
    let abi_3 = Runner::with(server_env(), Confinement::up_to(3));
    let error = run_with(
        &abi_3,
        &write(false, false),
        "c",
        json!({}),
        ws.path(),
        cancel(),
    )
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("needs Landlock ABI 4"),
        "{error}"
    );
    for network in [true, false] {
        let ran = run_with(
            &abi_3,
            &write(network, true),
            "c",
            json!({}),
            ws.path(),
            cancel(),
        )
        .await
        .unwrap();
        assert_eq!(ran.stdout, "2\n", "its writes stay confined: {ran:?}");
    }
}
