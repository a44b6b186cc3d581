//! How a run ends on stdout: a summary for a person when stdout is a terminal, the JSON
//! report for a script (stdout not a terminal, or `--json`). The terminal is a
//! pseudo-terminal made here.

use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::process::Stdio;

use super::{HELLO, Ran, Sandbox, WRITER};

/// A pseudo-terminal: the side a program writes to, and the side that reads it.
fn pty() -> (File, File) {
    let (mut reader, mut terminal) = (0, 0);
    // SAFETY: openpty writes two new descriptors into the integers it is given; the
    // null pointers ask for no name and the default settings.
    let made = unsafe {
        libc::openpty(
            &mut reader,
            &mut terminal,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(made, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are new and owned by nothing else.
    unsafe { (File::from_raw_fd(reader), File::from_raw_fd(terminal)) }
}

/// Runs the binary with `args` and its stdout on a terminal; stdout is what the terminal
/// showed, with its line ends as written.
fn run_at_terminal(sandbox: &Sandbox, args: &[&str]) -> Ran {
    let (mut reader, terminal) = pty();
    let shown = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut buffer = [0; 4096];
        // Ends with an error (EIO) once no process holds the terminal side open.
        while let Ok(n @ 1..) = reader.read(&mut buffer) {
            bytes.extend_from_slice(&buffer[..n]);
        }
        bytes
    });
    let output = {
        let mut command = sandbox.command(args);
        command.stdout(Stdio::from(terminal)).stderr(Stdio::piped());
        command.output().expect("run the binary")
    };
    let shown = String::from_utf8(shown.join().unwrap()).expect("UTF-8 on the terminal");
    Ran {
        code: output.status.code(),
        stdout: shown.replace("\r\n", "\n"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

#[test]
fn at_a_terminal_a_run_ends_with_a_summary_and_a_script_gets_the_json_report() {
    let sandbox = Sandbox::new();
    sandbox.workflow("hello.toml", HELLO);
    let ran = run_at_terminal(&sandbox, &["workflows", "run", "hello"]);
    ran.assert_code(0);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(
        lines[0].starts_with("run ") && lines[0].ends_with(" of `hello`: succeeded"),
        "{}",
        ran.stdout
    );
    assert_eq!(
        lines[1..],
        [
            "  greet  succeeded",
            "output:",
            "  {",
            "    \"text\": \"hello world\"",
            "  }"
        ]
    );

    let json = run_at_terminal(&sandbox, &["workflows", "run", "hello", "--json"]);
    let report = json.assert_code(0).json();
    assert_eq!(report["output"]["text"], "hello world");

    let piped = sandbox.run(&["workflows", "run", "hello"]);
    assert_eq!(piped.assert_code(0).json()["status"], "succeeded");
}

#[test]
fn a_summary_names_the_files_written_and_why_a_node_failed() {
    let sandbox = Sandbox::new();
    sandbox.workflow("writer.toml", WRITER);
    let run = |path: &str| {
        let input = format!("path={path}");
        run_at_terminal(&sandbox, &["workflows", "run", "writer", "--input", &input])
    };
    let ran = run("notes/today.md");
    ran.assert_code(0);
    assert!(
        ran.stdout
            .ends_with("files written:\n  notes/today.md (40 bytes)\n"),
        "{}",
        ran.stdout
    );
    let ran = run("../x");
    ran.assert_code(1);
    let note = ran
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("note "));
    let note = note.unwrap_or_else(|| panic!("a line for the node:\n{}", ran.stdout));
    assert!(
        note.contains("failed: ") && note.contains("..") && note.ends_with("(file_error)"),
        "{note}"
    );
    assert!(!ran.stdout.contains("files written"), "{}", ran.stdout);
}
