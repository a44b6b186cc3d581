//! Crash and resume as a user meets them: the real binary, killed with SIGKILL at seeded
//! points of a run (after some node completions, mid-wait, mid-retry, at a random moment,
//! which lands in a commit now and then), then started again on the same database until
//! the run is done. Every finished node ran exactly once; every todo exists exactly once.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_task_server::store::{HistoryQuery, NodeRow, Store};
use serde_json::json;

use crate::support::backends::{Place, on_both_backends};
use crate::support::rng::Rng;
use crate::support::{Sandbox, sorted_titles, wait_until};

/// Tool nodes, a wait, a retry with backoff, two fan-outs and a file.
const CRASHY: &str = r#"
name = "crashy"
max_parallel = 3

[inputs.items]
type = "array"
default = ["a", "b", "c", "d", "e", "f"]

[nodes.first]
tool = "add_task"
args = { title = "first" }

[nodes.pause]
wait = "150ms"
needs = ["first"]

[nodes.fan]
for_each = "inputs.items"
tool = "add_task"
args = { title = "fan {{ item }}" }
needs = ["pause"]

[nodes.flaky]
wait = "1s"
timeout = "40ms"
retry = { max_attempts = 3, initial_delay = "120ms", factor = 1.0 }
on_failure = "continue"
needs = ["first"]

[nodes.tick]
for_each = "inputs.items"
wait = "40ms"
needs = ["fan"]

[nodes.note]
write_file = { path = "out/{{ run.id }}.txt", content = "{{ nodes.fan.output | length }} todos" }
needs = ["fan"]

[nodes.last]
tool = "add_task"
args = { title = "last" }
needs = ["tick", "note", "flaky"]
trigger = "all_done"
"#;

/// Where the servers of a test run, one after another: a site with `crashy.toml` in
/// its workflows folder, and a database on either backend.
struct Site {
    files: Sandbox,
    place: Place,
}

impl Site {
    fn new(place: Place) -> Site {
        let files = Sandbox::new();
        files.workflow("crashy.toml", CRASHY);
        Site { files, place }
    }

    /// The folder runs write in, beside the database.
    fn workspace(&self) -> &std::path::Path {
        &self.files.workspace
    }

    /// The binary on the site's database, with a lease short enough that a takeover
    /// comes soon after a kill.
    fn command(&self) -> Command {
        let mut command = self.files.binary(self.place.location());
        command.arg("--lease").arg("900ms");
        command
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.command()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// `serve`, with a client that has sent `initialize` and, if given, one tools/call.
    fn serve(&self, call: Option<&str>) -> Child {
        let mut child = self
            .command()
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.as_mut().unwrap();
        let mut send = |message: serde_json::Value| writeln!(stdin, "{message}").unwrap();
        send(
            json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": { "name": "crash-test", "version": "1" } } }),
        );
        send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        if let Some(workflow) = call {
            send(json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": { "name": "run_workflow", "arguments": { "workflow": workflow } } }));
        }
        stdin.flush().unwrap();
        child
    }

    fn store(&self) -> Store {
        self.place.store()
    }
}

/// Where a kill lands.
#[derive(Debug, Clone, Copy)]
enum Point {
    /// Once this many nodes and instances have finished.
    AfterCompletions(usize),
    /// While this wait node (`pause`, or an instance of `tick`) is running.
    MidWait(&'static str),
    /// While `flaky` waits for its next attempt.
    MidRetry,
    /// After this long, wherever the run is (in a commit, sometimes).
    After(Duration),
}

impl Point {
    fn draw(rng: &mut Rng) -> Point {
        match rng.below(4) {
            0 => Point::AfterCompletions(2 + rng.below(16) as usize),
            1 => Point::MidWait(["pause", "tick"][rng.below(2) as usize]),
            2 => Point::MidRetry,
            _ => Point::After(Duration::from_millis(5 + rng.below(400))),
        }
    }

    fn reached(&self, rows: &[NodeRow], since: Instant) -> bool {
        let running = |node: &str| {
            rows.iter()
                .any(|r| r.node_id == node && r.status == "running" && r.deadline_ms.is_some())
        };
        match self {
            Point::AfterCompletions(n) => {
                let done = rows.iter().filter(|r| is_terminal(&r.status)).count();
                done >= *n
            }
            Point::MidWait(node) => running(node),
            Point::MidRetry => rows.iter().any(|r| {
                r.node_id == "flaky" && r.status == "running" && r.next_attempt_ms.is_some()
            }),
            Point::After(delay) => since.elapsed() >= *delay,
        }
    }
}

fn is_terminal(status: &str) -> bool {
    !matches!(status, "pending" | "running")
}

fn run_id(store: &Store) -> Option<String> {
    store
        .list_runs(None, mcp_task_server::store::Scope::Everyone, 1)
        .unwrap()
        .into_iter()
        .next()
        .map(|r| r.id)
}

fn run_status(store: &Store) -> Option<String> {
    store
        .list_runs(None, mcp_task_server::store::Scope::Everyone, 1)
        .unwrap()
        .into_iter()
        .next()
        .map(|r| r.status)
}

/// Kills `child` with SIGKILL once `point` is reached (or the run ended by then), counting
/// from the moment the run is recorded: a process killed before that took no run on.
fn kill_at(child: &mut Child, store: &Store, point: Point) {
    wait_until("the run is recorded", || run_id(store).is_some());
    let since = Instant::now();
    let limit = since + Duration::from_secs(20);
    loop {
        let rows = run_id(store)
            .map(|id| store.nodes(&id).unwrap())
            .unwrap_or_default();
        let ended = matches!(run_status(store).as_deref(), Some(s) if s != "running");
        if ended || point.reached(&rows, since) || Instant::now() > limit {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let rows = run_id(store)
        .map(|id| store.nodes(&id).unwrap())
        .unwrap_or_default();
    let done = rows.iter().filter(|r| is_terminal(&r.status)).count();
    eprintln!(
        "killed at {point:?}: {done} units done, run {:?}",
        run_status(store)
    );
}

/// Waits for the run to end, for at most 30 s.
fn wait_for_end(store: &Store) -> String {
    let limit = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = run_status(store).filter(|s| s != "running") {
            return status;
        }
        assert!(Instant::now() < limit, "the run did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What every interrupted run of `crashy` must have left once it ended; `starts` is how
/// many audit rows of its start it has: one from the terminal, which records its start
/// with the run; none from a synchronous MCP call whose process died before its end.
fn assert_exactly_once(site: &Site, kills: &[Point], starts: usize) {
    let store = site.store();
    let id = run_id(&store).unwrap();
    let run = store.run(&id).unwrap().unwrap();
    assert_eq!(run.status, "succeeded", "after kills at {kills:?}: {run:?}");
    // Its history is one row, written with its end, whichever commit a kill landed in.
    let history = store
        .history(&HistoryQuery {
            workflow: "crashy",
            principal: None,
            statuses: &[],
            after: None,
            limit: 10,
        })
        .unwrap();
    let ended: Vec<(&str, &str)> = (history.iter())
        .map(|row| (row.run_id.as_str(), row.status.as_str()))
        .collect();
    assert_eq!(
        ended,
        [(id.as_str(), "succeeded")],
        "after kills at {kills:?}"
    );
    assert_eq!(history[0].finished_at, run.finished_at.unwrap());

    let titles = sorted_titles(&store);
    let mut expected = vec!["first".to_owned(), "last".to_owned()];
    expected.extend(["a", "b", "c", "d", "e", "f"].map(|i| format!("fan {i}")));
    expected.sort();
    assert_eq!(
        titles, expected,
        "each todo exactly once, after kills at {kills:?}"
    );

    let audit = store.audit_rows().unwrap();
    let calls: Vec<&str> = audit
        .iter()
        .filter(|r| r.tool == "add_task")
        .map(|r| r.node_id.as_deref().unwrap_or("?"))
        .collect();
    assert_eq!(calls.len(), 8, "one audited call per todo: {calls:?}");
    assert!(audit.iter().all(|r| r.run_id.as_deref() == Some(&*id)));
    // Every call ok; a `workflows resume` that came after the run's end is refused.
    assert!(
        (audit.iter())
            .all(|r| r.outcome == "ok" || (&*r.tool, &*r.outcome) == ("resume_run", "rejected")),
        "{audit:#?}"
    );
    let started = audit.iter().filter(|r| r.tool == "run_workflow").count();
    assert_eq!(
        started, starts,
        "the run's start, however often it was resumed"
    );

    let rows = store.nodes(&id).unwrap();
    assert!(rows.iter().all(|r| is_terminal(&r.status)), "{rows:?}");
    let node = |n: &str| {
        rows.iter()
            .find(|r| r.node_id == n && r.instance == -1)
            .unwrap()
    };
    assert_eq!(node("flaky").status, "failed");
    assert_eq!(
        node("flaky").attempts,
        3,
        "the retry policy's attempts, no more, no fewer"
    );
    assert_eq!(node("first").attempts, 1);
    assert_eq!(node("last").attempts, 1);
    let ticks = rows
        .iter()
        .filter(|r| r.node_id == "tick" && r.instance >= 0);
    assert_eq!(ticks.filter(|r| r.status == "succeeded").count(), 6);
    let note = std::fs::read_to_string(site.workspace().join(format!("out/{id}.txt")));
    assert_eq!(note.unwrap(), "6 todos");
    let leftovers = std::fs::read_dir(site.workspace().join("out"))
        .unwrap()
        .count();
    assert_eq!(leftovers, 1, "no temporary file is left behind");
}

fn kills(seed: u64, count: usize) -> Vec<Point> {
    let mut rng = Rng::new(seed);
    (0..count).map(|_| Point::draw(&mut rng)).collect()
}

/// A terminal run, killed at each point in turn and resumed with `workflows resume`.
fn crash_from_the_terminal(seed: u64, place: Place) {
    let site = Site::new(place);
    let store = site.store();
    let points = kills(seed, 4);
    let mut child = site.spawn(&["workflows", "run", "crashy"]);
    for point in &points {
        kill_at(&mut child, &store, *point);
        let id = run_id(&store).expect("the run was recorded");
        child = site.spawn(&["workflows", "resume", &id]);
    }
    let status = child.wait().unwrap();
    let id = run_id(&store).unwrap();
    if !status.success() {
        // The last kill may have come after the run ended; then nothing is left to resume.
        assert_eq!(wait_for_end(&store), "succeeded", "run {id}");
    }
    assert_exactly_once(&site, &points, 1);
}

on_both_backends! {
    fn a_terminal_run_killed_anywhere_finishes_with_every_effect_exactly_once(place) {
        for seed in 1..=6 {
            crash_from_the_terminal(seed, place.fresh());
        }
    }
}

/// A run over MCP, killed at each point in turn; a new `serve` takes it over by itself.
fn crash_under_serve(seed: u64, place: Place) {
    let site = Site::new(place);
    let store = site.store();
    let points = kills(seed, 3);
    let mut child = site.serve(Some("crashy"));
    for point in &points {
        kill_at(&mut child, &store, *point);
        child = site.serve(None);
    }
    wait_for_end(&store);
    drop(child.stdin.take());
    child.wait().unwrap();
    assert_exactly_once(&site, &points, 0);
}

on_both_backends! {
    fn a_run_over_stdio_killed_anywhere_is_finished_by_the_next_server(place) {
        for seed in 11..=14 {
            crash_under_serve(seed, place.fresh());
        }
    }
}

/// A workflow `name`: a todo, a wait of `wait`, another todo.
fn todo_wait_todo(name: &str, wait: &str) -> String {
    format!(
        "name = \"{name}\"\n\
         [nodes.first]\ntool = \"add_task\"\nargs = {{ title = \"first\" }}\n\
         [nodes.pause]\nwait = \"{wait}\"\nneeds = [\"first\"]\n\
         [nodes.last]\ntool = \"add_task\"\nargs = {{ title = \"last\" }}\nneeds = [\"pause\"]\n"
    )
}

/// A run held unfinished for a while.
fn slow() -> String {
    todo_wait_todo("slow", "2500ms")
}

fn lease_owner_pid(store: &Store, id: &str) -> Option<u32> {
    let owner = store.run(id).unwrap()?.lease_owner?;
    // `pid@machine:uuid`
    owner.split(['@', ':']).next()?.parse().ok()
}

/// Waits until the newest run's `pause` node has started.
fn wait_until_paused(store: &Store) {
    wait_until("the wait starts", || {
        run_id(store).is_some_and(|id| {
            store
                .nodes(&id)
                .unwrap()
                .iter()
                .any(|r| r.node_id == "pause")
        })
    });
}

fn read_stderr(mut child: Child) -> String {
    use std::io::Read;
    let _ = child.kill();
    let _ = child.wait();
    let mut text = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut text);
    }
    text
}

on_both_backends! {
    fn of_two_servers_one_drives_an_orphaned_run_and_the_other_takes_over_when_it_dies(place) {
        let site = Site::new(place);
        site.files.workflow("slow.toml", &slow());
        let store = site.store();
        let mut first = site.serve(Some("slow"));
        wait_until_paused(&store);
        first.kill().unwrap();
        first.wait().unwrap();
        let id = run_id(&store).unwrap();

        let b = site.serve(None);
        let c = site.serve(None);
        let (b_pid, c_pid) = (b.id(), c.id());
        wait_until("a server takes the run", || {
            lease_owner_pid(&store, &id).is_some_and(|pid| pid == b_pid || pid == c_pid)
        });
        let driver_pid = lease_owner_pid(&store, &id).unwrap();
        let (driver, other) = if driver_pid == b_pid { (b, c) } else { (c, b) };
        // Both servers looked; the run stays with its driver while it lives.
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(lease_owner_pid(&store, &id), Some(driver_pid));
        let driver_log = read_stderr(driver);

        wait_until("the other server takes over", || {
            lease_owner_pid(&store, &id) == Some(other.id())
        });
        assert_eq!(wait_for_end(&store), "succeeded");
        let other_log = read_stderr(other);
        assert_eq!(
            driver_log.matches("took over an unfinished run").count(),
            1,
            "{driver_log}"
        );
        assert_eq!(
            other_log.matches("took over an unfinished run").count(),
            1,
            "{other_log}"
        );
        let titles = sorted_titles(&store);
        assert_eq!(titles, ["first", "last"]);
    }
}

on_both_backends! {
    /// A terminal run parked on a question, killed, then resumed and answered from another
    /// terminal.
    fn a_run_waiting_for_an_answer_still_waits_after_a_kill_and_takes_the_answer(place) {
        let site = Site::new(place);
        site.files.workflow("ask.toml", r#"
            name = "ask"
            [nodes.make]
            tool = "add_task"
            args = { title = "before the question" }
            [nodes.ask]
            input = { message = "Name the release", schema = { type = "object", properties = { name = { type = "string" } } } }
            needs = ["make"]
            [nodes.named]
            tool = "add_task"
            args = { title = "release {{ nodes.ask.output.name }}" }
            needs = ["ask"]
            "#,
        );
        let store = site.store();
        let mut child = site.spawn(&["workflows", "run", "ask", "--wait-for-answers"]);
        wait_until("the question is asked", || {
            run_id(&store).is_some_and(|id| !store.questions(&id).unwrap().is_empty())
        });
        child.kill().unwrap();
        child.wait().unwrap();
        let id = run_id(&store).unwrap();
        let task = store.run_task(&id).unwrap().unwrap();
        assert_eq!(task.status, "input_required");

        let mut resumed = site.spawn(&["workflows", "resume", &id, "--wait-for-answers"]);
        let answered = site
            .command()
            .args(["workflows", "answer", &id, "ask", r#"{"name": "1.4"}"#])
            .output()
            .unwrap();
        assert!(answered.status.success(), "{answered:?}");
        assert!(resumed.wait().unwrap().success());
        let titles: Vec<String> = store
            .list_todos(&Default::default())
            .unwrap()
            .into_iter()
            .map(|t| t.title)
            .collect();
        assert_eq!(titles, ["before the question", "release 1.4"]);
        assert_eq!(store.run(&id).unwrap().unwrap().status, "succeeded");
    }
}

on_both_backends! {
    fn a_terminal_run_stopped_with_ctrl_c_is_recorded_as_cancelled(place) {
        let site = Site::new(place);
        site.files.workflow("slow.toml", &slow());
        let store = site.store();
        let mut child = site.spawn(&["workflows", "run", "slow"]);
        wait_until_paused(&store);
        let pid = i32::try_from(child.id()).unwrap();
        // SAFETY: sends SIGINT to the child this test started and still owns.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(1), "a cancelled run exits 1");
        let id = run_id(&store).unwrap();
        let run = store.run(&id).unwrap().unwrap();
        assert_eq!(run.status, "cancelled");
        assert_eq!(run.lease_owner, None, "nothing is left to take over");
        assert_eq!(store.run_task(&id).unwrap().unwrap().status, "cancelled");
    }
}

fn hang_up(child: &mut Child) {
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

on_both_backends! {
    fn a_client_that_hangs_up_does_not_cancel_its_run_which_finishes_here_or_in_the_next_server(place) {
        let site = Site::new(place);
        site.files.workflow("slow.toml", &slow());
        // Longer than the 5 s a server gives its calls to finish once its client is gone.
        let longer = todo_wait_todo("longer", "6500ms");
        site.files.workflow("longer.toml", &longer);
        let store = site.store();
        let started = |workflow: &str| {
            let runs = store
                .list_runs(None, mcp_task_server::store::Scope::Everyone, 10)
                .unwrap();
            let run = runs.into_iter().find(|r| r.workflow == workflow)?;
            let rows = store.nodes(&run.id).unwrap();
            rows.iter().any(|r| r.node_id == "pause").then_some(run.id)
        };

        // A run that ends within the server's grace period ends in that server.
        let mut first = site.serve(Some("slow"));
        wait_until("the slow wait starts", || started("slow").is_some());
        hang_up(&mut first);
        let slow = started("slow").unwrap();
        assert_eq!(store.run(&slow).unwrap().unwrap().status, "succeeded");

        // A longer one is left, unfinished and unleased, to the next server.
        let mut second = site.serve(Some("longer"));
        wait_until("the longer wait starts", || started("longer").is_some());
        hang_up(&mut second);
        let longer = started("longer").unwrap();
        let run = store.run(&longer).unwrap().unwrap();
        assert_eq!(run.status, "running", "a hang-up is not a cancel");
        assert_eq!(
            run.lease_owner, None,
            "the lease was given up on the way out"
        );
        let next = site.serve(None);
        wait_until("the next server finishes it", || {
            store.run(&longer).unwrap().unwrap().status != "running"
        });
        read_stderr(next);
        assert_eq!(store.run(&longer).unwrap().unwrap().status, "succeeded");
        assert_eq!(sorted_titles(&store), ["first", "first", "last", "last"]);
    }
}

/// Every answer of the ADR planner, with `tasks` planned tasks.
fn adr_answers(tasks: usize) -> String {
    let tasks: Vec<serde_json::Value> = (0..tasks)
        .map(|i| json!({ "description": format!("task {i}"), "priority": "high", "effort": "1d" }))
        .collect();
    json!({
        "title": "Crash-proof planning",
        "problem": "A planning run must survive a crash in its last phase.",
        "findings": [{ "source": "s", "insight": "i", "relevance": "high" }],
        "options": [{ "name": "A", "description": "d", "pros": [], "cons": [],
                      "effort": "low", "confidence": 50 }],
        "decision": { "name": "A", "rationale": "r", "tradeoffs": [] },
        "impacts": { "technical": [], "business": [], "team": [], "risks": [], "dependencies": [] },
        "plan": { "phases": [], "tasks": tasks, "successCriteria": [] }
    })
    .to_string()
}

on_both_backends! {
    fn an_adr_planning_run_killed_in_its_last_phase_writes_its_file_once_and_each_todo_once(place) {
        for seed in 1..=4 {
            let site = Site::new(place.fresh());
            let store = site.store();
            let answers = adr_answers(40);
            let run = [
                "workflows",
                "run",
                "interactive_adr_planning",
                "--inputs-json",
            ];
            let mut child = site.spawn(&[&run[..], &[answers.as_str()]].concat());
            let mut rng = Rng::new(seed);
            let points: Vec<Point> = (0..3)
                .map(|_| Point::AfterCompletions(20 + rng.below(40) as usize))
                .collect();
            for point in &points {
                kill_at(&mut child, &store, *point);
                let id = run_id(&store).expect("the run was recorded");
                child = site.spawn(&["workflows", "resume", &id]);
            }
            let _ = child.wait().unwrap();
            assert_eq!(
                wait_for_end(&store),
                "succeeded",
                "after kills at {points:?}"
            );
            let adrs: Vec<String> = std::fs::read_dir(site.workspace().join("docs/adrs"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(
                adrs,
                ["0001-crash-proof-planning.md"],
                "after kills at {points:?}"
            );
            let expected: Vec<String> = {
                let mut titles: Vec<String> = (0..40).map(|i| format!("task {i}")).collect();
                titles.sort();
                titles
            };
            assert_eq!(sorted_titles(&store), expected, "after kills at {points:?}");
        }
    }
}
