//! `workflows run`: a run from the terminal, with a live progress bar on stderr, its
//! questions answered from a file or at the terminal, and at its end a summary for a
//! person or the report as JSON on stdout.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Map, Value};

use super::answers::AnswerFile;
use super::questions::{Sources, Watch};
use crate::app::App;
use crate::engine::definition::ValueType;
use crate::engine::installed::Entry;
use crate::engine::journal::RunOrigin;
use crate::engine::observer::{Event, Observer};
use crate::engine::plan::Plan;
use crate::engine::report::{RunReport, RunStatus};
use crate::engine::{RunHandle, RunOptions, validate};

pub struct RunArgs {
    /// `KEY=VALUE` pairs; a value is taken as text for string inputs, else parsed as JSON.
    pub inputs: Vec<String>,
    /// A JSON object of inputs; `--input` pairs override its keys.
    pub inputs_json: Option<String>,
    pub drive: DriveArgs,
}

/// How a terminal command drives a run: where its answers come from, and how it ends.
pub struct DriveArgs {
    /// `--answers FILE`: answers given up front, keyed by node id.
    pub answers: Option<PathBuf>,
    /// Questions nothing here answers wait for `workflows answer`, instead of being asked
    /// at the terminal or taking their defaults.
    pub wait_for_answers: bool,
    /// Print the report as JSON even at a terminal.
    pub json: bool,
}

impl DriveArgs {
    /// The run's answer sources, its answers file checked against `plan`; `Err` names
    /// every problem of the file.
    fn sources(&self, plan: &Plan) -> Result<Sources, Vec<String>> {
        let file = self.answers.as_deref();
        Ok(Sources {
            file: file.map(|path| AnswerFile::load(path, plan)).transpose()?,
            terminal: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
            wait: self.wait_for_answers,
        })
    }
}

/// What a followed run needs besides its handle: how its questions are answered and how
/// its end is shown.
pub(super) struct Following {
    pub app: App,
    pub plan: Arc<Plan>,
    pub sources: Sources,
    pub json: bool,
}

impl Following {
    /// The run's answer sources for `plan` and `drive`, or every problem of its answers
    /// file (printed on stderr).
    pub(super) fn new(
        app: &App,
        plan: Arc<Plan>,
        drive: &DriveArgs,
    ) -> Result<Following, ExitCode> {
        match drive.sources(&plan) {
            Ok(sources) => Ok(Following {
                app: app.clone(),
                plan,
                sources,
                json: drive.json,
            }),
            Err(problems) => {
                for problem in problems {
                    eprintln!("error: {problem}");
                }
                Err(ExitCode::FAILURE)
            }
        }
    }
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
            Event::ChildProgressed {
                node,
                instance,
                percent,
                message,
                ..
            } => {
                let unit = match instance {
                    Some(k) => format!("{node}[{k}]"),
                    None => (*node).to_owned(),
                };
                let said = message.map(|m| format!(" · {m}")).unwrap_or_default();
                self.0
                    .set_message(format!("{unit}: child run {percent}%{said}"));
            }
            Event::Iterated {
                node,
                instance,
                iteration,
                max,
                ..
            } => {
                let unit = match instance {
                    Some(k) => format!("{node}[{k}]"),
                    None => (*node).to_owned(),
                };
                self.0.println(format!(
                    "{unit}: iteration {iteration} of at most {max} done, `until` does not \
                     hold yet; it runs again"
                ));
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
pub async fn run_workflow(app: &App, entry: &Entry, args: &RunArgs) -> ExitCode {
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
    let following = match Following::new(app, Arc::clone(&entry.plan), &args.drive) {
        Ok(following) => following,
        Err(code) => return code,
    };
    let (bar, options) = watched(following.sources.parks());
    let handle = app.start_at_terminal(Arc::clone(&entry.plan), inputs, options);
    follow(handle, bar, following).await
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

/// Waits for a run started in the background, answering its questions, then shows its
/// end on stdout; 0 only on success.
pub(super) async fn follow(handle: RunHandle, bar: ProgressBar, following: Following) -> ExitCode {
    let Following {
        app,
        plan,
        sources,
        json,
    } = following;
    let ended = match sources.watches() {
        true => {
            let watch = Watch {
                app,
                run_id: handle.run_id.clone(),
                plan: Arc::clone(&plan),
                sources,
                bar: bar.clone(),
                cancel: handle.cancel.clone(),
            };
            watch.follow(handle.join).await
        }
        false => handle.join.await,
    };
    let report = match ended {
        Ok(report) => report,
        Err(e) => {
            bar.abandon();
            eprintln!("error: the run stopped abnormally: {e}");
            return ExitCode::FAILURE;
        }
    };
    bar.finish_with_message(format!("run {}", report.status.as_str()));
    show_end(&report, &plan, json);
    if report.status == RunStatus::Succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The report as JSON for a script (`--json`, or stdout is not a terminal), else a summary.
fn show_end(report: &RunReport, plan: &Plan, json: bool) {
    if !json && std::io::stdout().is_terminal() {
        super::say(super::summary::render(report, plan).trim_end());
        return;
    }
    let printed = serde_json::json!({
        "run_id": report.run_id,
        "status": report.status,
        "output": report.output,
        "error": report.error,
        "nodes": report.nodes,
    });
    super::say(&serde_json::to_string_pretty(&printed).expect("a report serialises"));
}
