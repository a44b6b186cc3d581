//! Tasks across a crash, over stdio: a task created by one server process, killed with
//! SIGKILL mid-run, is answered by the next process on the same database under the same
//! task id, runs to the end, and makes each of its todos once.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::BIN;
use crate::support::backends::on_both_backends;

const DEADLINE: Duration = Duration::from_secs(15);

const SLOW: &str = r#"
name = "slow"
description = "Waits, then makes a todo."
expose_as_tool = true

[nodes.pause]
wait = "1500ms"

[nodes.todo]
needs = ["pause"]
tool = "add_task"
args = { title = "made after the wait" }
"#;

const ASK: &str = r#"
name = "ask"
description = "Asks, then makes a todo."
expose_as_tool = true

[nodes.approve]
input = { message = "Approve?", schema = { type = "object", properties = { ok = { type = "boolean" } }, required = ["ok"] } }

[nodes.todo]
needs = ["approve"]
tool = "add_task"
args = { title = "made after the answer" }
"#;

/// One server process and a raw 2025-11-25 client session with it.
struct Process {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
}

impl Process {
    fn start(dir: &Path, db: &str) -> Process {
        let mut child = Command::new(BIN)
            .arg("--db")
            .arg(db)
            .arg("--workflows")
            .arg(dir.join("workflows"))
            .arg("--workspace")
            .arg(dir)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let Ok(message) = serde_json::from_str(&line) else {
                    return;
                };
                if send.send(message).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut process = Process {
            child,
            stdin,
            lines,
        };
        let init = json!({ "protocolVersion": "2025-11-25",
            "capabilities": { "elicitation": {} },
            "clientInfo": { "name": "crash", "version": "1" } });
        process.request(0, "initialize", init);
        process.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        process
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// A request's reply; an elicitation on the way is accepted with `{ok: true}`.
    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            let message = self
                .lines
                .recv_timeout(DEADLINE)
                .expect("the server answers in time");
            match (message.get("id"), message.get("method")) {
                (Some(got), None) if got == &json!(id) => return message,
                (Some(server_id), Some(_)) => {
                    let reply = json!({ "jsonrpc": "2.0", "id": server_id,
                        "result": { "action": "accept", "content": { "ok": true } } });
                    self.send(reply);
                }
                _ => {}
            }
        }
    }

    fn poll_until(&mut self, task_id: &Value, status: &str) -> Value {
        for i in 0..300 {
            let reply = self.request(100 + i, "tasks/get", json!({ "taskId": task_id }));
            if reply["result"]["status"] == status {
                return reply;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("task {task_id} never became {status}");
    }

    fn todo_titles(&mut self) -> Vec<String> {
        let reply = self.request(
            9,
            "tools/call",
            json!({ "name": "list_tasks", "arguments": {} }),
        );
        reply["result"]["structuredContent"]["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["title"].as_str().unwrap().to_owned())
            .collect()
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let flows = dir.path().join("workflows");
    std::fs::create_dir(&flows).unwrap();
    std::fs::write(flows.join("slow.toml"), SLOW).unwrap();
    std::fs::write(flows.join("ask.toml"), ASK).unwrap();
    dir
}

on_both_backends! {
    fn a_task_killed_mid_run_completes_in_the_next_process_under_the_same_id(place) {
        let dir = workspace();
        let mut first = Process::start(dir.path(), &place.location());
        let created = first.request(
            1,
            "tools/call",
            json!({ "name": "slow", "arguments": {}, "task": {} }),
        );
        let task_id = created["result"]["task"]["taskId"].clone();
        assert!(task_id.is_string(), "{created}");
        std::thread::sleep(Duration::from_millis(300));
        first.kill();

        let mut second = Process::start(dir.path(), &place.location());
        let done = second.poll_until(&task_id, "completed");
        assert_eq!(done["result"]["taskId"], task_id);
        let result = second.request(2, "tasks/result", json!({ "taskId": task_id }));
        let report = &result["result"]["structuredContent"]["data"];
        assert_eq!(report["status"], "succeeded");
        assert_eq!(
            second.todo_titles(),
            ["made after the wait"],
            "the todo was made once"
        );
    }
}

on_both_backends! {
    fn a_task_waiting_for_input_is_answered_after_a_crash_and_completes(place) {
        let dir = workspace();
        let mut first = Process::start(dir.path(), &place.location());
        let created = first.request(
            1,
            "tools/call",
            json!({ "name": "ask", "arguments": {}, "task": {} }),
        );
        let task_id = created["result"]["task"]["taskId"].clone();
        first.poll_until(&task_id, "input_required");
        first.kill();

        let mut second = Process::start(dir.path(), &place.location());
        let asking = second.request(2, "tasks/get", json!({ "taskId": task_id }));
        assert_eq!(
            asking["result"]["status"], "input_required",
            "the question survived"
        );
        // The client waits for the result; the question reaches it from the new process.
        let result = second.request(3, "tasks/result", json!({ "taskId": task_id }));
        let report = &result["result"]["structuredContent"]["data"];
        assert_eq!(report["status"], "succeeded", "{result}");
        assert_eq!(report["nodes"]["approve"]["output"], json!({ "ok": true }));
        assert_eq!(second.todo_titles(), ["made after the answer"]);
    }
}
