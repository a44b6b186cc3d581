//! The terminal commands on stored runs: `workflows runs|status|resume|cancel|retry|purge|
//! answer`. Read-only ones (`runs`, `status`) never take a run over.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::run::{DriveArgs, Following, follow, watched};
use crate::engine::journal::Journal;
use crate::engine::{Engine, ResumeError, RunHandle, RunOptions};
use crate::runs::Registry;

/// `workflows runs`: a table of runs, newest first.
pub fn list_runs(registry: &Registry, status: Option<&str>, limit: usize) -> ExitCode {
    let runs = match registry.runs(status, crate::store::Scope::Everyone, limit) {
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
pub fn status(registry: &Registry, run_id: &str) -> ExitCode {
    match registry.run_view(run_id) {
        Ok(Some(view)) => {
            super::say(&serde_json::to_string_pretty(&view).expect("a view serialises"));
            ExitCode::SUCCESS
        }
        Ok(None) => fail(&format!("no run with id {run_id}")),
        Err(error) => fail(&format!("cannot read the run: {error}")),
    }
}

/// `workflows resume RUN_ID`: takes the run over and drives it to the end, answering what
/// is still open of its questions.
pub async fn resume(
    engine: &Engine,
    registry: &Arc<Registry>,
    run_id: &str,
    drive: &DriveArgs,
) -> ExitCode {
    drive_stored(registry, run_id, drive, |options| {
        engine.resume(run_id, options)
    })
    .await
}

/// `workflows retry RUN_ID`: runs a failed or cancelled run again, as a new run.
pub async fn retry(
    engine: &Engine,
    registry: &Arc<Registry>,
    run_id: &str,
    drive: &DriveArgs,
) -> ExitCode {
    drive_stored(registry, run_id, drive, |options| {
        engine.retry(run_id, options)
    })
    .await
}

/// Drives the run that `start` makes of stored run `run_id` to its end, at the terminal.
async fn drive_stored(
    registry: &Arc<Registry>,
    run_id: &str,
    drive: &DriveArgs,
    start: impl FnOnce(RunOptions) -> Result<RunHandle, ResumeError>,
) -> ExitCode {
    let following = match following(registry, run_id, drive) {
        Ok(following) => following,
        Err(code) => return code,
    };
    let (bar, options) = watched(following.sources.parks());
    match start(options) {
        Ok(handle) => follow(handle, bar, following).await,
        Err(error) => {
            bar.abandon();
            fail(&error.to_string())
        }
    }
}

/// How to follow a stored run: its answers file is checked against the plan it runs.
fn following(
    registry: &Arc<Registry>,
    run_id: &str,
    drive: &DriveArgs,
) -> Result<Following, ExitCode> {
    let plan = match registry.load(run_id) {
        Ok(stored) => stored.plan,
        Err(error) => return Err(fail(&error.to_string())),
    };
    Following::new(registry, plan, drive)
}

/// `workflows cancel RUN_ID`: a run driven by a live process is cancelled by that process
/// within a few seconds; a run nobody drives is taken over and cancelled here.
pub async fn cancel(engine: &Engine, registry: &Registry, run_id: &str) -> ExitCode {
    match registry.request_cancel(run_id) {
        Ok(true) => {}
        Ok(false) => {
            return match registry.store().run(run_id) {
                Ok(Some(run)) => fail(&format!("run {run_id} already {}", run.status)),
                _ => fail(&format!("no run with id {run_id}")),
            };
        }
        Err(error) => return fail(&format!("cannot cancel: {error}")),
    }
    let options = crate::engine::RunOptions::default();
    options.cancel.cancel();
    match engine.resume(run_id, options) {
        Ok(handle) => match handle.join.await {
            Ok(report) => {
                super::say(&format!("run {run_id} {}", report.status.as_str()));
                ExitCode::SUCCESS
            }
            Err(error) => fail(&format!("the run stopped abnormally: {error}")),
        },
        Err(crate::engine::ResumeError::Journal(crate::engine::journal::JournalError::Held(_))) => {
            super::say(&format!(
                "run {run_id}: cancel requested; the process driving it stops it shortly"
            ));
            ExitCode::SUCCESS
        }
        Err(error) => fail(&error.to_string()),
    }
}

/// `workflows purge`: deletes finished runs and their tasks (never the audit log).
pub fn purge(registry: &Registry, older_than: Duration) -> ExitCode {
    match registry.purge(older_than) {
        Ok(count) => {
            super::say(&format!("purged {count} finished runs"));
            ExitCode::SUCCESS
        }
        Err(error) => fail(&format!("cannot purge: {error}")),
    }
}

/// `workflows answer RUN_ID NODE ANSWER`: answers a question a run waits on.
pub fn answer(
    registry: &Registry,
    run_id: &str,
    node: &str,
    instance: Option<usize>,
    answer: &str,
) -> ExitCode {
    let value: Value = match serde_json::from_str(answer) {
        Ok(value) => value,
        Err(_) => Value::String(answer.to_owned()),
    };
    match registry.answer_question(run_id, node, instance, &value) {
        Ok(key) => {
            super::say(&format!("answered {node} ({key}) of run {run_id}"));
            ExitCode::SUCCESS
        }
        Err(error) => fail(&error.to_string()),
    }
}
