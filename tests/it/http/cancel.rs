//! A cancel is one operation of the application, whichever face asks for it: MCP's
//! `tasks/cancel` in either task protocol, the dashboard's cancel button, and `workflows
//! cancel` at the terminal each leave the same audit row, on both backends.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::*;
use crate::support;
use crate::support::backends::on_both_backends;

/// A run that waits long enough to be cancelled.
fn waiting() -> Value {
    json!({"nodes": {"sleep": {"wait": WAIT}}})
}

on_both_backends! {
    fn a_cancel_from_every_face_leaves_the_same_audit_row(place) {
        let server = HttpServer::start_on(&place, &["--http-tokens", "{tokens}"]);
        let alice = open_session(&server, ALICE);
        let by_2025 = start_2025_task(&server, &alice, waiting());
        let by_2026 = start_modern_task_as(&server, &[bearer(ALICE)], waiting());
        let by_page = start_2025_task(&server, &alice, waiting());
        let by_terminal = start_2025_task(&server, &alice, waiting());

        let cancel = server.post(&alice, &request(5, "tasks/cancel", json!({"taskId": by_2025})));
        assert_eq!(cancel.response(5)["result"]["status"], "cancelled");
        let cancel = json!({"jsonrpc": "2.0", "id": 6, "method": "tasks/cancel",
                            "params": {"taskId": by_2026, "_meta": modern_meta()}});
        let mut headers = modern_headers("tasks/cancel", &by_2026).to_vec();
        headers.push(bearer(ALICE));
        let cancelled = server.post(&headers, &cancel).response(6);
        assert!(cancelled.get("result").is_some(), "{cancelled}");
        let cookie = server.sign_in(ALICE);
        let path = format!("/runs/{by_page}/cancel");
        let posted = server.form(&path, Some(&cookie), Some(&server.origin()), "");
        assert_eq!(posted.status, 303, "{}", posted.body);
        let terminal = Command::new(support::BIN)
            .env_remove("TASKS_DB_PATH")
            .env_remove("TASKS_WORKSPACE")
            .current_dir(server.db.dir.path())
            .args(["--db", &place.location(), "workflows", "cancel", &by_terminal])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            terminal.status.success(),
            "{}",
            String::from_utf8_lossy(&terminal.stderr)
        );

        let rows: Vec<_> = (place.store().audit_rows().unwrap().into_iter())
            .filter(|row| row.tool == "cancel_run")
            .collect();
        for (run, principal) in [
            (&by_2025, Some("alice")),
            (&by_2026, Some("alice")),
            (&by_page, Some("alice")),
            (&by_terminal, None),
        ] {
            let of_run: Vec<_> = rows.iter().filter(|row| row.run_id.as_ref() == Some(run)).collect();
            assert_eq!(of_run.len(), 1, "one row for {run}: {rows:#?}");
            let row = of_run[0];
            let args: Value = serde_json::from_str(&row.args).unwrap();
            assert_eq!(args, json!({"run_id": run}), "{row:?}");
            assert_eq!(row.outcome, "ok", "{row:?}");
            assert_eq!(row.principal.as_deref(), principal, "{row:?}");
            assert_eq!(row.node_id, None, "{row:?}");
        }
    }
}
