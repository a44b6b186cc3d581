//! `workflows run`: a run from the terminal, with a live progress bar on stderr and the
//! report as JSON on stdout.

use std::process::ExitCode;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Map, Value};

use crate::engine::catalog::Entry;
use crate::engine::definition::ValueType;
use crate::engine::journal::RunOrigin;
use crate::engine::observer::{Event, Observer};
use crate::engine::report::RunStatus;
use crate::engine::{Engine, RunHandle, RunOptions, validate};

pub struct RunArgs {
    /// `KEY=VALUE` pairs; a value is taken as text for string inputs, else parsed as JSON.
    pub inputs: Vec<String>,
    /// A JSON object of inputs; `--input` pairs override its keys.
    pub inputs_json: Option<String>,
    /// Park questions until `workflows answer` answers them, instead of taking defaults.
    pub wait_for_answers: bool,
}

fn gather_inputs(entry: &Entry, args: &RunArgs) -> Result<Map<String, Value>, String> {
    let mut inputs = match &args.inputs_json {
        None => Map::new(),
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err("--inputs-json must be a JSON object".into()),
            Err(e) => return Err(format!("--inputs-json is not valid JSON: {e}")),
        },
    };
    for pair in &args.inputs {
        let Some((key, raw)) = pair.split_once('=') else {
            return Err(format!("--input `{pair}` must look like KEY=VALUE"));
        };
        let is_text = entry
            .def
            .inputs
            .get(key)
            .is_none_or(|input| input.kind == ValueType::String);
        let value = if is_text {
            Value::String(raw.to_owned())
        } else {
            serde_json::from_str(raw)
                .map_err(|e| format!("--input {key}: `{raw}` is not a JSON value: {e}"))?
        };
        inputs.insert(key.to_owned(), value);
    }
    Ok(inputs)
}

struct Bar(ProgressBar);

impl Observer for Bar {
    fn event(&self, event: &Event<'_>) {
        match event {
            Event::RunStarted { run_id, total, .. } => {
                self.0.set_length(*total as u64);
                self.0.println(format!("run {run_id}"));
            }
            Event::NodeChanged {
                node,
                status,
                progress,
                ..
            } => {
                self.0.set_position(progress.done as u64);
                self.0.set_message(format!("{node}: {}", status.as_str()));
            }
            Event::AttemptFailed {
                node,
                attempt,
                error,
                retry_in: Some(delay),
                ..
            } => {
                self.0.println(format!(
                    "{node}: attempt {attempt} failed ({}), retrying in {delay:?}",
                    error.message
                ));
            }
            _ => {}
        }
    }
}

fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    let style =
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("the template is valid");
    bar.set_style(style);
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}

/// Runs `entry` to the end (Ctrl-C cancels it) and prints the report; 0 only on success.
pub async fn run_workflow(engine: &Engine, entry: &Entry, args: &RunArgs) -> ExitCode {
    let given = match gather_inputs(entry, args) {
        Ok(given) => given,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    let inputs = match validate::check_inputs(&entry.def, &given) {
        Ok(inputs) => inputs,
        Err(problems) => {
            eprintln!("{problems}");
            return ExitCode::FAILURE;
        }
    };
    let (bar, options) = watched(args.wait_for_answers);
    let handle = engine.start(Arc::clone(&entry.plan), inputs, options);
    follow(handle, bar).await
}

/// Options that show the run's progress on a bar and cancel the run on Ctrl-C, and the bar.
///
/// The Ctrl-C handler is in place before this returns, so before the run starts: one
/// installed once the run runs could miss an early Ctrl-C, which would then kill the
/// process with its run unrecorded.
pub(super) fn watched(park_questions: bool) -> (ProgressBar, RunOptions) {
    let bar = progress_bar();
    let options = RunOptions {
        observer: Some(Arc::new(Bar(bar.clone()))),
        park_questions,
        origin: RunOrigin::Cli,
        ..RunOptions::default()
    };
    let cancel = options.cancel.clone();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) {
        Ok(mut interrupt) => {
            tokio::spawn(async move {
                if interrupt.recv().await.is_some() {
                    cancel.cancel();
                }
            });
        }
        Err(error) => tracing::warn!(%error, "Ctrl-C will not cancel the run cleanly"),
    }
    (bar, options)
}

/// Waits for a run started in the background, then prints its report on stdout; 0 only on
/// success.
pub(super) async fn follow(handle: RunHandle, bar: ProgressBar) -> ExitCode {
    let report = match handle.join.await {
        Ok(report) => report,
        Err(e) => {
            bar.abandon();
            eprintln!("error: the run stopped abnormally: {e}");
            return ExitCode::FAILURE;
        }
    };
    bar.finish_with_message(format!("run {}", report.status.as_str()));
    let printed = serde_json::json!({
        "run_id": report.run_id,
        "status": report.status,
        "output": report.output,
        "error": report.error,
        "nodes": report.nodes,
    });
    super::say(&serde_json::to_string_pretty(&printed).expect("a report serialises"));
    if report.status == RunStatus::Succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
