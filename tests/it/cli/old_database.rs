//! A database written by a release from before the todos' table was renamed (SQLite
//! migration 11, PostgreSQL migration 6), committed in `tests/fixtures/databases/`, opened
//! by this build: every todo, run and audit row is still there, and work goes on from it.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::Ran;

use crate::support;
use crate::support::backends::{Place, on_both_backends};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/databases");
/// The schema the PostgreSQL dump was taken from; restored under the scratch schema's name.
const DUMPED_SCHEMA: &str = "before_todos_rename";

/// Every todo of the fixture, in id order: id, title, status, due date, tags. Ids 3 and 9
/// were deleted before the dump, 9 the newest of all.
fn todos_kept() -> Value {
    type Kept = (
        u32,
        &'static str,
        &'static str,
        Option<&'static str>,
        &'static [&'static str],
    );
    #[rustfmt::skip]
    const KEPT: [Kept; 7] = [
        (1, "Write the release notes", "open", Some("2026-12-10"), &["docs", "release"]),
        (2, "Fix the login redirect", "done", Some("2026-12-07"), &["bug"]),
        (4, "Review the database migration", "open", Some("2026-12-15"), &["review", "db"]),
        (5, "Renew the TLS certificate", "done", Some("2026-12-31"), &["ops"]),
        (6, "Plan the Q1 roadmap", "open", None, &[]),
        (7, "1.4.0: Freeze the branch", "open", None, &["release", "v1.4.0"]),
        (8, "1.4.0: Tag the release", "open", None, &["release", "v1.4.0"]),
    ];
    KEPT.iter()
        .map(|(id, title, status, due, tags)| {
            json!({ "id": id, "title": title, "status": status, "due": due, "tags": tags })
        })
        .collect()
}

/// Rows of the audit log the old release wrote: fourteen tool calls over MCP, and the two
/// todos of the release checklist.
const AUDIT_ROWS_KEPT: i64 = 16;

/// Puts the fixture of `place`'s backend there: a copy of the SQLite file (the committed
/// one is never opened in place), or the PostgreSQL dump restored into the scratch schema.
fn restore(place: &Place) {
    match place {
        Place::Sqlite(_) => {
            std::fs::copy(
                Path::new(FIXTURES).join("before-todos-rename.sqlite"),
                place.location(),
            )
            .expect("the SQLite fixture is copied");
        }
        Place::Postgres(scratch) => {
            let dump = std::fs::read_to_string(
                Path::new(FIXTURES).join("before-todos-rename.postgres.sql"),
            )
            .expect("the PostgreSQL fixture reads");
            // `\restrict` lines are for psql; the scratch schema exists already.
            let statements: String = dump
                .lines()
                .filter(|line| !line.starts_with('\\'))
                .filter(|line| *line != format!("CREATE SCHEMA {DUMPED_SCHEMA};"))
                .map(|line| format!("{line}\n"))
                .collect();
            let statements = statements.replace(
                &format!("{DUMPED_SCHEMA}."),
                &format!("{}.", scratch.schema()),
            );
            place.execute(&statements).expect("the dump restores");
        }
    }
}

/// The binary on `place`'s database, with `args`, in `cwd`, with no inherited setting.
fn command(place: &Place, cwd: &Path) -> Command {
    let mut command = Command::new(support::BIN);
    command
        .arg("--db")
        .arg(place.location())
        .env_remove("TASKS_DB_PATH")
        .env_remove("TASKS_WORKFLOWS_DIR")
        .env_remove("RUST_LOG")
        .current_dir(cwd)
        .stdin(Stdio::null());
    command
}

fn binary(place: &Place, cwd: &Path, args: &[&str]) -> Ran {
    Ran::from(
        command(place, cwd)
            .args(args)
            .output()
            .expect("run the binary"),
    )
}

/// The runs `workflows runs` lists, newest first: (id, workflow, status).
fn listed_runs(place: &Place, cwd: &Path) -> Vec<(String, String, String)> {
    let listed = binary(place, cwd, &["workflows", "runs"]);
    listed.assert_code(0);
    listed
        .stdout
        .lines()
        .skip(1)
        .map(|line| {
            let mut fields = line.split_whitespace().map(str::to_owned);
            let mut next = || fields.next().expect("a field of the listing");
            (next(), next(), next())
        })
        .collect()
}

/// A todo as the tools return it, without its timestamps (the fixture's own), but with
/// whether it has a completion time.
fn without_times(todo: &Value) -> Value {
    let mut kept = todo.clone();
    let fields = kept.as_object_mut().expect("a todo is an object");
    let created = fields.remove("createdAt").expect("a creation time");
    assert!(created.is_string(), "{todo}");
    let completed = fields
        .remove("completedAt")
        .expect("a completion time or null");
    assert_eq!(completed.is_string(), todo["status"] == "done", "{todo}");
    kept
}

/// The MCP session over stdio: every todo listed and found as before, and a new one gets
/// the id after the highest ever given: 10, not the deleted newest 9.
async fn todos_over_mcp(place: &Place, cwd: &Path) {
    let mut serve = support::server_command(cwd);
    serve.arg("--db").arg(place.location());
    let server = support::Server::spawn(serve, place.location().into()).await;
    let client = &server.client;

    let listed = support::expect_ok(&support::call(client, "list_tasks", json!({})).await);
    let listed: Vec<Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(without_times)
        .collect();
    assert_eq!(Value::from(listed), todos_kept());

    let found = support::call(client, "search_tasks", json!({ "query": "release" })).await;
    let ids: Vec<i64> = support::expect_ok(&found)
        .as_array()
        .unwrap()
        .iter()
        .map(|todo| todo["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 8]);

    let filter = json!({ "filter": { "tag": "v1.4.0" } });
    let tagged = support::expect_ok(&support::call(client, "list_tasks", filter).await);
    assert_eq!(tagged.as_array().unwrap().len(), 2, "{tagged}");

    let added = support::call(client, "add_task", json!({ "title": "After the rename" })).await;
    assert_eq!(support::expect_ok(&added)["id"], 10);
    server.stop().await;
}

/// The three runs the old release left, each as it left it (`workflows runs`, then
/// `workflows status` of each); returns the id of the one still waiting on its question.
fn runs_as_left(place: &Place, cwd: &Path) -> String {
    let runs = listed_runs(place, cwd);
    let shapes: Vec<(&str, &str)> = runs
        .iter()
        .map(|(_, workflow, status)| (workflow.as_str(), status.as_str()))
        .collect();
    assert_eq!(
        shapes,
        [
            ("ask", "running"),
            ("ask", "cancelled"),
            ("release_checklist", "succeeded")
        ]
    );
    let status = |id: &str| {
        let ran = binary(place, cwd, &["workflows", "status", id]);
        ran.assert_code(0).json()
    };
    let checklist = status(&runs[2].0);
    let made: Vec<&Value> = checklist["output"]["todos"]
        .as_array()
        .expect("the checklist's todos")
        .iter()
        .map(|todo| &todo["id"])
        .collect();
    assert_eq!(made, [7, 8]);
    assert_eq!(status(&runs[1].0)["task_status"], "cancelled");
    let waiting = status(&runs[0].0);
    assert_eq!(waiting["task_status"], "input_required");
    assert_eq!(waiting["questions"][0]["node"], "approve");
    assert_eq!(waiting["nodes"]["pause"]["status"], "succeeded");
    runs[0].0.clone()
}

on_both_backends! {
    async fn a_database_written_before_the_todos_rename_opens_with_every_todo_run_and_audit_row(place) {
        restore(&place);
        let cwd = tempfile::tempdir().unwrap();
        let cwd = cwd.path();

        binary(&place, cwd, &["db", "migrate"]).assert_code(0);
        assert_eq!(place.count("audit_log"), AUDIT_ROWS_KEPT);
        let verified = binary(&place, cwd, &["db", "verify"]);
        verified.assert_code(0);
        assert!(
            verified.stdout.contains(&format!("{AUDIT_ROWS_KEPT} rows checked")),
            "{}",
            verified.stdout
        );

        let waiting = runs_as_left(&place, cwd);
        todos_over_mcp(&place, cwd).await;

        // The run left waiting on its question goes on from where it stopped.
        binary(&place, cwd, &["workflows", "answer", &waiting, "approve", r#"{"ok":true}"#])
            .assert_code(0);
        let resumed = binary(&place, cwd, &["workflows", "resume", &waiting, "--json"]);
        let resumed = resumed.assert_code(0).json();
        assert_eq!(resumed["status"], "succeeded");
        assert_eq!(resumed["nodes"]["todo"]["output"]["id"], 11);
        assert_eq!(resumed["nodes"]["todo"]["output"]["title"], "approved the fixture");

        // The chain goes on from the old rows: every row since is on it too.
        binary(&place, cwd, &["db", "verify"]).assert_code(0);
        assert!(place.count("audit_log") > AUDIT_ROWS_KEPT);
    }
}
