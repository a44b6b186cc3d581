//! A run's file actions against a hostile workspace, in process: a folder swapped for a
//! symbolic link while an installed workflow writes into it, and the audit rows every
//! read, listing and write leaves.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mcp_task_server::app::{App, Config};
use mcp_task_server::engine::installed::Installed;
use mcp_task_server::engine::report::RunStatus;
use mcp_task_server::engine::{Engine, RunOptions};
use mcp_task_server::store::Store;
use mcp_task_server::todos::Tools;
use serde_json::{Map, Value, json};

/// An engine on `workspace`, with the workflows of folder `workflows` installed.
fn installed(workspace: &Path, workflows: &Path, file: &str, text: &str) -> (Engine, Installed) {
    std::fs::write(workflows.join(file), text).unwrap();
    let (catalog, rejected) = Installed::load(Some(workflows));
    assert!(rejected.is_empty(), "the workflow loads");
    let store = Store::open_in_memory().unwrap();
    (Engine::new(Tools::new(store), workspace), catalog)
}

/// The same engine, its runs recorded in a journal on a database in `dir`.
fn journalled(engine: Engine, workspace: &Path, dir: &Path) -> Engine {
    drop(engine);
    let db = dir.join("tasks.db").display().to_string();
    let app = App::open(&Config::new(db, workspace)).expect("the application opens");
    app.engine().clone()
}

const MANY_WRITES: &str = r#"
description = "Writes many files into one folder."

[inputs.round]
type = "integer"
required = true

[nodes.write]
for_each = "range(200)"
write_file = { path = "out/deep/{{ inputs.round }}-{{ item }}.md", content = "note {{ item }}" }
on_failure = "continue"
"#;

/// Exchanges `a` and `b` atomically, whatever each is (`renameat2` with
/// `RENAME_EXCHANGE`): at every instant each name exists.
fn exchange(a: &Path, b: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let (a, b) = (c(a), c(b));
    // SAFETY: both paths are NUL-terminated and outlive the call.
    let status = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    status == 0
}

/// Swaps folder `out` for a symbolic link to `outside` and back, `swaps` times or until
/// `stop`; `out` is the folder again when it returns.
fn race(workspace: &Path, outside: &Path, swaps: usize, stop: &AtomicBool) -> usize {
    let (out, link) = (workspace.join("out"), workspace.join("link"));
    std::os::unix::fs::symlink(outside, &link).unwrap();
    let mut swapped = 0;
    for _ in 0..swaps {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        assert!(exchange(&out, &link), "the link takes the folder's place");
        swapped += 1;
        assert!(exchange(&out, &link), "the folder takes its place back");
    }
    swapped
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_swapped_for_a_link_mid_write_never_lets_a_byte_outside() {
    let dir = tempfile::tempdir().unwrap();
    let (workspace, outside, workflows) = (
        dir.path().join("ws"),
        dir.path().join("outside"),
        dir.path().join("workflows"),
    );
    for folder in [&workspace, &outside, &workflows] {
        std::fs::create_dir_all(folder).unwrap();
    }
    std::fs::create_dir_all(workspace.join("out/deep")).unwrap();
    // The link's target holds the same folder, so that a write that followed the link
    // would find its parent there and land.
    std::fs::create_dir_all(outside.join("deep")).unwrap();
    let (engine, catalog) = installed(&workspace, &workflows, "many.toml", MANY_WRITES);
    let plan = Arc::clone(&catalog.get("many").expect("installed").plan);

    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let (workspace, outside, stop) = (workspace.clone(), outside.clone(), Arc::clone(&stop));
        std::thread::spawn(move || race(&workspace, &outside, 1_000_000, &stop))
    };
    let mut refused = 0;
    for round in 0..5 {
        let mut inputs = Map::new();
        inputs.insert("round".into(), json!(round));
        let report = engine
            .run(Arc::clone(&plan), inputs, RunOptions::default())
            .await;
        assert_eq!(report.status, RunStatus::Succeeded, "on_failure = continue");
        let error = &report.nodes["write"].error;
        refused += usize::from(
            error
                .as_ref()
                .is_some_and(|e| e.message.contains("symbolic link")),
        );
    }
    stop.store(true, Ordering::Relaxed);
    let swapped = racer.join().unwrap();
    assert!(swapped > 0, "the racer swapped the folder at least once");
    let written = std::fs::read_dir(workspace.join("out/deep"))
        .unwrap()
        .count();
    assert!(written > 0, "some writes landed in the workspace");
    let escaped: Vec<_> = std::fs::read_dir(outside.join("deep"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        escaped.is_empty(),
        "written outside the workspace: {escaped:?}"
    );
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        1,
        "only `deep`"
    );
    eprintln!("{swapped} swaps, {written} files written, {refused} rounds met the link");
}

const READS_AND_WRITES: &str = r#"
description = "Lists, reads and writes."

[nodes.listed]
list_dir = "docs"

[nodes.read]
read_file = { path = "docs/a.md", max_bytes = 4 }

[nodes.wrote]
needs = ["listed", "read"]
write_file = { path = "docs/b.md", content = "{{ nodes.read.output.content }}!" }

[nodes.missing]
read_file = "docs/none.md"
on_failure = "continue"
"#;

#[tokio::test]
async fn every_read_listing_and_write_of_a_run_is_audited_with_path_bytes_run_and_node() {
    audited_file_actions(false).await;
}

#[tokio::test]
async fn a_recorded_runs_file_actions_are_audited_with_their_units_records() {
    audited_file_actions(true).await;
}

async fn audited_file_actions(recorded: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (workspace, workflows) = (dir.path().join("ws"), dir.path().join("workflows"));
    std::fs::create_dir_all(workspace.join("docs")).unwrap();
    std::fs::create_dir_all(&workflows).unwrap();
    std::fs::write(workspace.join("docs/a.md"), "hello world").unwrap();
    let (mut engine, catalog) = installed(&workspace, &workflows, "files.toml", READS_AND_WRITES);
    if recorded {
        engine = journalled(engine, &workspace, dir.path());
    }
    let plan = Arc::clone(&catalog.get("files").expect("installed").plan);
    let report = engine.run(plan, Map::new(), RunOptions::default()).await;
    assert_eq!(report.status, RunStatus::Succeeded);
    let rows = engine.todo_tools().store().audit_rows().unwrap();
    let mut seen: Vec<(String, Value, String, String)> = rows
        .iter()
        .map(|row| {
            assert_eq!(row.run_id.as_deref(), Some(report.run_id.as_str()));
            let args: Value = serde_json::from_str(&row.args).unwrap();
            let node = row.node_id.clone().expect("a node");
            (row.tool.clone(), args, row.outcome.clone(), node)
        })
        .collect();
    seen.sort_by(|a, b| a.3.cmp(&b.3));
    let missing_error = seen[1].1["error"].as_str().unwrap_or_default().to_owned();
    assert!(missing_error.contains("docs/none.md"), "{missing_error}");
    assert_eq!(
        seen,
        [
            (
                "list_dir".to_owned(),
                json!({ "path": "docs", "entries": 1 }),
                "ok".to_owned(),
                "listed".to_owned()
            ),
            (
                "read_file".to_owned(),
                json!({ "path": "docs/none.md", "error": missing_error }),
                "error".to_owned(),
                "missing".to_owned()
            ),
            (
                "read_file".to_owned(),
                json!({ "path": "docs/a.md", "bytes": 4 }),
                "ok".to_owned(),
                "read".to_owned()
            ),
            (
                "write_file".to_owned(),
                json!({ "path": "docs/b.md", "bytes": 5 }),
                "ok".to_owned(),
                "wrote".to_owned()
            ),
        ]
    );
}
