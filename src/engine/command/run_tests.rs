//! Tests of running commands, as a hostile workflow author or model would try them: real
//! processes (`/bin/sh` scripts written to a temporary workspace) in the real sandbox.

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{Commands, Outcome, Ran, RunError, Runner, confinement_available};

/// The server's environment, as the tests pretend it: a secret among ordinary variables.
pub(super) fn server_env() -> Vec<(String, std::ffi::OsString)> {
    [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", "/nonexistent"),
        ("SECRET_TOKEN", "hunter2-do-not-leak"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value.into()))
    .collect()
}

/// A workspace holding `files` (executable scripts and others) and the folder `out`.
pub(super) fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("out")).unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

/// Runs command `name` of the commands file `toml` with `values`, by `runner`.
pub(super) async fn run_with(
    runner: &Runner,
    toml: &str,
    name: &str,
    values: Value,
    workspace: &Path,
    cancel: CancellationToken,
) -> Result<Ran, RunError> {
    let commands = Commands::parse(toml).unwrap_or_else(|p| panic!("{}", p.join("\n")));
    let spec = commands.get(name).unwrap();
    let argv = spec.argv(&args(values)).unwrap_or_else(|p| panic!("{p:?}"));
    runner.run(spec, &argv, workspace, cancel).await
}

pub(super) async fn run(toml: &str, values: Value, workspace: &Path) -> Ran {
    let runner = Runner::with(server_env(), confinement_available());
    run_with(
        &runner,
        toml,
        "c",
        values,
        workspace,
        CancellationToken::new(),
    )
    .await
    .unwrap()
}

/// Whether process `pid` runs: a zombie waiting for a parent that may never reap it (an
/// orphan's adoptive init, in a container) has ended.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with(['Z', 'X'])
        }
    }
}

/// Whether `pid` ends within two seconds.
async fn ends(pid: i32) -> bool {
    for _ in 0..40 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

pub(super) fn pids(text: &str) -> Vec<i32> {
    text.lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// Waits until `path` holds `count` process ids, and gives them.
async fn written_pids(path: &Path, count: usize) -> Vec<i32> {
    for _ in 0..200 {
        let found = pids(&std::fs::read_to_string(path).unwrap_or_default());
        if found.len() >= count {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} never held {count} pids", path.display());
}

const PRINT_ARGS: &str = r#"printf '%s\n' "$#"
for arg in "$@"; do printf '[%s]\n' "$arg"; done
"#;

#[tokio::test]
async fn hostile_values_reach_the_program_as_one_literal_element_each() {
    let ws = workspace(&[("args.sh", PRINT_ARGS)]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "args.sh", "{a}", "{b}", "{c}", "{d}", "{e}", "{f}"]
        env = ["PATH"]
        params.a.type = "string"
        params.b.type = "string"
        params.c.type = "string"
        params.d.type = "string"
        params.e.type = "string"
        params.f.type = "string"
        params.f.multiline = true
    "#;
    let values = json!({
        "a": "two words",
        "b": "x; touch pwned",
        "c": "$(touch pwned)",
        "d": "`touch pwned`",
        "e": "* \"q\" 'q' | > pwned",
        "f": "line one\nline two",
    });
    let ran = run(toml, values, ws.path()).await;
    assert_eq!(ran.outcome, Outcome::Ok, "{ran:?}");
    assert_eq!(
        ran.stdout,
        "6\n[two words]\n[x; touch pwned]\n[$(touch pwned)]\n[`touch pwned`]\n\
         [* \"q\" 'q' | > pwned]\n[line one\nline two]\n"
    );
    assert!(!ws.path().join("pwned").exists());
    // Refused before anything runs: a NUL, a leading dash, a line break not allowed.
    let commands = Commands::parse(toml).unwrap();
    let spec = commands.get("c").unwrap();
    for bad in ["a\0b", "-rf", "--help", "two\nlines"] {
        let mut values = args(json!({"a": "", "b": "", "c": "", "d": "", "e": "", "f": ""}));
        values.insert("a".into(), bad.into());
        assert!(spec.argv(&values).is_err(), "{bad:?}");
    }
}

#[tokio::test]
async fn the_servers_secrets_stay_out_of_the_commands_environment() {
    let ws = workspace(&[]);
    let toml = r#"
        [commands.c]
        argv = ["/usr/bin/env"]
        env = ["PATH", "LANG"]
    "#;
    let ran = run(toml, json!({}), ws.path()).await;
    assert_eq!(ran.outcome, Outcome::Ok, "{ran:?}");
    // PATH alone: LANG is allowed but the server has none; the secret and HOME are not.
    assert_eq!(ran.stdout, "PATH=/usr/local/bin:/usr/bin:/bin\n");
    assert!(!ran.stdout.contains("hunter2") && !ran.stderr.contains("hunter2"));
}

#[tokio::test]
async fn a_grandchild_left_running_is_killed_at_the_timeout() {
    let script = "sleep 1000 &\necho $!\ni=0\nwhile [ $i -lt 20 ]; do sleep 1000 & i=$((i+1)); done\n\
                  jobs -p\nwait\n";
    let ws = workspace(&[("hang.sh", script)]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "hang.sh"]
        timeout = "1s"
        env = ["PATH"]
    "#;
    let ran = run(toml, json!({}), ws.path()).await;
    assert_eq!(ran.outcome, Outcome::TimedOut, "{ran:?}");
    assert_eq!((ran.exit_code, ran.signal), (None, Some(libc::SIGKILL)));
    assert!(!ran.ok());
    assert!((1000..10_000).contains(&ran.took_ms), "{}", ran.took_ms);
    let pids = pids(&ran.stdout);
    assert!(pids.len() >= 21, "{ran:?}");
    for pid in pids {
        assert!(ends(pid).await, "{pid} still runs");
    }
}

#[tokio::test]
async fn what_a_command_leaves_running_is_killed_when_it_exits() {
    // The sleep holds stdout open: the run ends with the script, not at the timeout.
    let ws = workspace(&[("leave.sh", "sleep 1000 &\necho $!\n")]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "leave.sh"]
        timeout = "60s"
        env = ["PATH"]
    "#;
    let ran = run(toml, json!({}), ws.path()).await;
    assert_eq!(ran.outcome, Outcome::Ok, "{ran:?}");
    assert!(ran.took_ms < 10_000, "{}", ran.took_ms);
    assert!(!ran.left_open);
    let pid = pids(&ran.stdout)[0];
    assert!(ends(pid).await, "{pid} still runs");
}

#[tokio::test]
async fn a_process_that_left_the_group_does_not_hold_the_run_open() {
    // The script waits a little, so that the escape happens before the group is killed.
    let script = "setsid sh -c 'echo $$; exec sleep 1000' &\nsleep 0.5\n";
    let ws = workspace(&[("escape.sh", script)]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "escape.sh"]
        timeout = "60s"
        env = ["PATH"]
    "#;
    let ran = run(toml, json!({}), ws.path()).await;
    let pid = pids(&ran.stdout)[0];
    let escaped = alive(pid);
    // SAFETY: kill on a pid this test's command started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert_eq!(ran.outcome, Outcome::Ok, "{ran:?}");
    assert!(ran.took_ms < 10_000, "{}", ran.took_ms);
    assert!(escaped && ran.left_open, "{ran:?}");
}

#[tokio::test]
async fn a_flood_of_output_is_capped_and_read_quickly() {
    let ws = workspace(&[]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "-c", "yes | head -c 200000000; echo done >&2"]
        max_output = "64KiB"
        timeout = "60s"
        env = ["PATH"]
    "#;
    let ran = run(toml, json!({}), ws.path()).await;
    assert_eq!(ran.outcome, Outcome::Ok, "{ran:?}");
    assert_eq!(ran.stdout.len(), 64 * 1024);
    assert!(ran.stdout.starts_with("y\ny\n"));
    assert_eq!(ran.stderr, "done\n");
    assert!(ran.truncated);
    assert!(ran.took_ms < 30_000, "{}", ran.took_ms);
}

#[tokio::test]
async fn cancelling_kills_the_whole_group() {
    let script = "sleep 1000 &\necho $! >> out/pids\necho $$ >> out/pids\nsleep 1000\n";
    let ws = workspace(&[("wait.sh", script)]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "wait.sh"]
        writable = ["out"]
        env = ["PATH"]
    "#;
    let cancel = CancellationToken::new();
    let runner = Runner::with(server_env(), confinement_available());
    let running = run_with(&runner, toml, "c", json!({}), ws.path(), cancel.clone());
    let pids_file = ws.path().join("out/pids");
    let canceller = async {
        let pids = written_pids(&pids_file, 2).await;
        cancel.cancel();
        pids
    };
    let (ran, pids) = tokio::join!(running, canceller);
    let ran = ran.unwrap();
    assert_eq!(ran.outcome, Outcome::Cancelled, "{ran:?}");
    assert_eq!(ran.signal, Some(libc::SIGKILL));
    for pid in pids {
        assert!(ends(pid).await, "{pid} still runs");
    }
}

#[tokio::test]
async fn dropping_the_run_kills_the_whole_group() {
    let script = "sleep 1000 &\necho $! >> out/pids\necho $$ >> out/pids\nsleep 1000\n";
    let ws = workspace(&[("wait.sh", script)]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "wait.sh"]
        writable = ["out"]
        env = ["PATH"]
    "#;
    let runner = Runner::with(server_env(), confinement_available());
    let cancel = CancellationToken::new();
    let running = run_with(&runner, toml, "c", json!({}), ws.path(), cancel);
    let pids_file = ws.path().join("out/pids");
    let pids = tokio::select! {
        ran = running => panic!("ended: {ran:?}"),
        pids = written_pids(&pids_file, 2) => pids,
    };
    for pid in pids {
        assert!(ends(pid).await, "{pid} still runs");
    }
}

#[tokio::test]
async fn exit_codes_the_operator_lists_are_fine_and_others_fail() {
    let ws = workspace(&[]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "-c", "case $0 in kill) kill -9 $$;; *) exit $0;; esac", "{how}"]
        ok_exit_codes = [0, 1]
        params.how.type = "string"
    "#;
    for (how, outcome, exit_code, signal) in [
        ("0", Outcome::Ok, Some(0), None),
        ("1", Outcome::Ok, Some(1), None),
        ("2", Outcome::Failed, Some(2), None),
        ("kill", Outcome::Failed, None, Some(9)),
    ] {
        let ran = run(toml, json!({ "how": how }), ws.path()).await;
        assert_eq!(
            (ran.outcome, ran.exit_code, ran.signal),
            (outcome, exit_code, signal),
            "{how}"
        );
        assert_eq!(ran.ok(), outcome == Outcome::Ok);
    }
}

#[tokio::test]
async fn the_audit_row_names_the_command_its_argv_exit_and_output_digest() {
    let ws = workspace(&[]);
    let toml = r#"
        [commands.c]
        argv = ["/bin/sh", "-c", "printf out; printf err >&2; exit 3", "{word}"]
        params.word.type = "string"
    "#;
    let ran = run(toml, json!({ "word": "a b" }), ws.path()).await;
    let row = ran.audit();
    assert_eq!(row["command"], "c");
    assert_eq!(
        row["argv"],
        json!(["/bin/sh", "-c", "printf out; printf err >&2; exit 3", "a b"])
    );
    assert_eq!(row["outcome"], "failed");
    assert_eq!(row["exit_code"], 3);
    assert_eq!(row["signal"], Value::Null);
    assert_eq!(row["truncated"], false);
    assert_eq!(row["took_ms"], ran.took_ms);
    assert_eq!(row["output_sha256"], crate::auth::sha256_hex(b"outerr"));
}

#[tokio::test]
async fn a_program_that_cannot_start_or_an_argv_of_another_command_is_refused() {
    let ws = workspace(&[]);
    let runner = Runner::with(server_env(), confinement_available());
    let toml = "[commands.c]\nargv = [\"/nonexistent/program\"]\n\
                [commands.d]\nargv = [\"/bin/true\"]\n";
    let error = run_with(
        &runner,
        toml,
        "c",
        json!({}),
        ws.path(),
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, RunError::Spawn { .. }), "{error}");
    assert!(
        error.to_string().contains("/nonexistent/program"),
        "{error}"
    );
    let commands = Commands::parse(toml).unwrap();
    let argv = commands.get("c").unwrap().argv(&Map::new()).unwrap();
    let other = commands.get("d").unwrap();
    let error = (runner.run(other, &argv, ws.path(), CancellationToken::new()))
        .await
        .unwrap_err();
    assert!(matches!(error, RunError::OtherCommand { .. }), "{error}");
}

#[test]
fn a_run_is_a_future_the_runtime_can_move_between_threads() {
    fn send<T: Send>(_: &T) {}
    let runner = Runner::with(server_env(), confinement_available());
    let commands = Commands::parse("[commands.c]\nargv = [\"/bin/true\"]\n").unwrap();
    let spec = commands.get("c").unwrap();
    let argv = spec.argv(&Map::new()).unwrap();
    let running = runner.run(spec, &argv, Path::new("/"), CancellationToken::new());
    send(&running);
}
