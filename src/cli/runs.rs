//! The terminal commands on stored runs: `workflows runs|status|resume|cancel|retry|purge|
//! answer`, each one of the application's run operations. Read-only ones (`runs`,
//! `status`) never take a run over. The terminal is the local user, who sees every run.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

use super::run::{DriveArgs, Following, follow, watched};
use crate::app::{App, Caller, Cancelled, Restart, RunError, RunFilter};

/// `workflows runs`: a table of runs, newest first.
pub fn list_runs(app: &App, status: Option<&str>, limit: usize) -> ExitCode {
    let runs = match app.list_runs(RunFilter { status, limit }, &Caller::default()) {
        Ok(runs) => runs,
        Err(error) => return fail(&format!("cannot read the runs: {error}")),
    };
    super::say(&format!(
        "{:<36}  {:<28}  {:<9}  {:>4}  {:<24}  {:>6}",
        "ID", "WORKFLOW", "STATUS", "DONE", "STARTED", "AGE"
    ));
    let now = crate::clock::now_ms();
    for run in runs {
        let age = crate::clock::ms_from_iso(&run.created_at)
            .map(|at| human_age(now.saturating_sub(at)))
            .unwrap_or_default();
        super::say(&format!(
            "{:<36}  {:<28}  {:<9}  {:>3}%  {:<24}  {:>6}",
            run.id, run.workflow, run.status, run.progress, run.created_at, age
        ));
    }
    ExitCode::SUCCESS
}

fn human_age(ms: i64) -> String {
    let secs = ms / 1000;
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

/// `workflows status RUN_ID`: the stored report as JSON.
pub fn status(app: &App, run_id: &str) -> ExitCode {
    match app.get_run(run_id, &Caller::default()) {
        Ok(view) => {
            super::say(&serde_json::to_string_pretty(&view).expect("a view serialises"));
            ExitCode::SUCCESS
        }
        Err(error @ RunError::NotFound(_)) => fail(&error.to_string()),
        Err(error) => fail(&format!("cannot read the run: {error}")),
    }
}

/// `workflows resume RUN_ID`: takes the run over and drives it to the end, answering what
/// is still open of its questions.
pub async fn resume(app: &App, run_id: &str, drive: &DriveArgs) -> ExitCode {
    drive_stored(app, run_id, drive, Restart::Resume).await
}

/// `workflows retry RUN_ID`: runs a failed or cancelled run again, as a new run.
pub async fn retry(app: &App, run_id: &str, drive: &DriveArgs) -> ExitCode {
    drive_stored(app, run_id, drive, Restart::Retry).await
}

/// Drives the run that `how` makes of stored run `run_id` to its end, at the terminal.
async fn drive_stored(app: &App, run_id: &str, drive: &DriveArgs, how: Restart) -> ExitCode {
    // Its answers file is checked against the plan the run runs.
    let plan = match app.stored_plan(run_id) {
        Ok(plan) => plan,
        Err(error) => return fail(&error.to_string()),
    };
    let following = match Following::new(app, plan, drive) {
        Ok(following) => following,
        Err(code) => return code,
    };
    let (bar, options) = watched(following.sources.parks());
    match app.restart_run(run_id, how, options, &Caller::default()) {
        Ok(handle) => follow(handle, bar, following).await,
        Err(error) => {
            bar.abandon();
            fail(&error.to_string())
        }
    }
}

/// `workflows cancel RUN_ID`: a run driven by a live process is cancelled by that process
/// within a few seconds; a run nobody drives is taken over and cancelled here.
pub async fn cancel(app: &App, run_id: &str) -> ExitCode {
    match app.cancel_run(run_id, &Caller::default()).await {
        Ok(Cancelled::Here(status)) => {
            super::say(&format!("run {run_id} {status}"));
            ExitCode::SUCCESS
        }
        Ok(Cancelled::Requested) => {
            super::say(&format!(
                "run {run_id}: cancel requested; the process driving it stops it shortly"
            ));
            ExitCode::SUCCESS
        }
        Err(error @ (RunError::NotFound(_) | RunError::Finished { .. })) => {
            fail(&error.to_string())
        }
        Err(error) => fail(&format!("cannot cancel: {error}")),
    }
}

/// `workflows purge`: deletes finished runs and their tasks (never the audit log). The
/// history of runs, which `history` nodes read, outlives them: only its rows past
/// `--history-ttl` go, as `serve` purges them.
pub fn purge(app: &App, older_than: Duration) -> ExitCode {
    match app.purge_runs(older_than) {
        Ok(purged) => {
            let ttl = crate::engine::duration::format_duration(purged.history_ttl);
            super::say(&format!(
                "purged {} finished runs (their history stays for --history-ttl, {ttl}); \
                 purged {} rows of history older than that",
                purged.runs, purged.history
            ));
            ExitCode::SUCCESS
        }
        Err(error) => fail(&format!("cannot purge: {error}")),
    }
}

/// `workflows answer RUN_ID NODE ANSWER`: answers a question a run waits on.
pub fn answer(
    app: &App,
    run_id: &str,
    node: &str,
    instance: Option<usize>,
    answer: &str,
) -> ExitCode {
    let value: Value = match serde_json::from_str(answer) {
        Ok(value) => value,
        Err(_) => Value::String(answer.to_owned()),
    };
    match app.answer_question(run_id, (node, instance), &value, &Caller::default()) {
        Ok(key) => {
            super::say(&format!("answered {node} ({key}) of run {run_id}"));
            ExitCode::SUCCESS
        }
        Err(error) => fail(&error.to_string()),
    }
}
