//! What a `command` node makes of a command: the errors of a refusal or a failed run, the
//! node's output, the audit row, the mark a started command leaves in its unit's record,
//! and the question a run resumed after a crash in the middle of it puts to the person.
//!
//! A command is an outside effect, run at least once: its unit's record says it started
//! (committed before the program is spawned) until the unit settles. A run resumed with
//! that mark in place cannot know how far the command got, so it does what the command's
//! `on_resume` says ([`OnResume`]).

use serde_json::{Map, Value, json};

use super::{Argv, CommandSpec, OnResume, Outcome, Ran, RunError};
use crate::engine::question::Question;
use crate::engine::report::{NodeError, NodeErrorKind};
use crate::todos::AuditOutcome;

/// The audit log's name for a command run, or refused.
pub(crate) const COMMAND_AUDIT: &str = "command";

/// What a started command's unit records as its intent, before its program is spawned.
const STARTED: &str = "command:";

/// How much of stderr a failed command's error quotes, from its end: the lines that say
/// why, usually.
const QUOTED_STDERR: usize = 1024;

/// The intent a unit records when its command starts: the mark and the SHA-256 of the
/// argv, so that a person reading the record can tell which run it was.
pub(crate) fn intent(argv: &Argv) -> String {
    let joined = argv.elements().join("\0");
    format!("{STARTED}{}", crate::auth::sha256_hex(joined.as_bytes()))
}

/// Whether a unit's recorded intent says its command started and its unit never settled.
pub(crate) fn started(intent: Option<&str>) -> bool {
    intent.is_some_and(|intent| intent.starts_with(STARTED))
}

/// The refusal of a node whose command the operator does not allow here and now.
pub(crate) fn not_allowed(name: &str, file: Option<&std::path::Path>) -> NodeError {
    let message = match file {
        None => format!(
            "command `{name}` is not allowed: the server was started without a commands file \
             (--commands), so no command runs"
        ),
        Some(file) => format!(
            "command `{name}` is not allowed: the commands file {} does not name it",
            file.display()
        ),
    };
    NodeError::new(NodeErrorKind::CommandNotAllowed, message)
}

/// The refusal of a command the kernel cannot confine as it asks.
pub(crate) fn unconfinable(name: &str, lack: &str) -> NodeError {
    let message = format!(
        "command `{name}` is not allowed on this host: {lack}; the operator may allow it \
         unconfined with `unconfined = true`"
    );
    NodeError::new(NodeErrorKind::CommandNotAllowed, message)
}

/// The refusal of a call's arguments by the command's parameters, every problem named.
pub(crate) fn refused_args(name: &str, problems: &[String]) -> NodeError {
    let message = format!(
        "the arguments of command `{name}` are refused: {}",
        problems.join("; ")
    );
    NodeError::new(NodeErrorKind::Invalid, message)
}

/// The node error of a command that could not be run at all.
pub(crate) fn run_error(name: &str, error: &RunError) -> NodeError {
    let kind = match error {
        RunError::Unconfinable(_) => NodeErrorKind::CommandNotAllowed,
        _ => NodeErrorKind::CommandFailed,
    };
    NodeError::new(kind, format!("command `{name}`: {error}"))
}

/// What the node makes of a run: its output when the exit is one the operator lists as
/// fine, else an error that says how it ended; `None` when it was cancelled.
pub(crate) fn result(spec: &CommandSpec, ran: &Ran) -> Option<Result<Value, NodeError>> {
    let name = &ran.command;
    let (kind, how) = match ran.outcome {
        Outcome::Ok => return Some(Ok(output(ran))),
        Outcome::Cancelled => return None,
        Outcome::TimedOut => (
            NodeErrorKind::Timeout,
            format!(
                "ran past its timeout of {} and was killed with its process group",
                crate::engine::duration::format_duration(spec.timeout)
            ),
        ),
        Outcome::Failed => (
            NodeErrorKind::CommandFailed,
            match (ran.exit_code, ran.signal) {
                (Some(code), _) => {
                    let fine: Vec<String> = spec.ok_exit_codes.iter().map(i32::to_string).collect();
                    format!(
                        "exited with {code}, which the commands file does not list as fine \
                         (ok_exit_codes: {})",
                        fine.join(", ")
                    )
                }
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                (None, None) => "ended without an exit code".to_owned(),
            },
        ),
    };
    let mut message = format!("command `{name}` {how}");
    let stderr = tail(&ran.stderr, QUOTED_STDERR).trim_end();
    if !stderr.is_empty() {
        message.push_str(&format!("; its stderr ends: {stderr}"));
    }
    Some(Err(NodeError::new(kind, message)))
}

/// The last `at_most` bytes of `text`, cut at a character's start.
fn tail(text: &str, at_most: usize) -> &str {
    let mut from = text.len().saturating_sub(at_most);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    &text[from..]
}

/// A run's output as its node gives it: `{exit_code, stdout, stderr, truncated, took_ms}`.
pub(crate) fn output(ran: &Ran) -> Value {
    json!({
        "exit_code": ran.exit_code,
        "stdout": ran.stdout,
        "stderr": ran.stderr,
        "truncated": ran.truncated,
        "took_ms": ran.took_ms,
    })
}

/// The audit row of a run: the command's name, final argv, how it ended, its duration and
/// the digest of its output ([`Ran::audit`]), and the instance; ok when its node succeeds.
pub(crate) fn audit_row(ran: &Ran, instance: Option<usize>) -> (Map<String, Value>, AuditOutcome) {
    let mut args = ran.audit();
    if let Some(k) = instance {
        args.insert("instance".into(), json!(k));
    }
    let outcome = match ran.ok() {
        true => AuditOutcome::Ok,
        false => AuditOutcome::Error,
    };
    (args, outcome)
}

/// The audit row of a command that did not run: its name, the argv when one was built,
/// and why; `rejected` when the operator's file refused it, an error otherwise.
pub(crate) fn refusal_row(
    name: &str,
    argv: Option<&Argv>,
    instance: Option<usize>,
    error: &NodeError,
) -> (Map<String, Value>, AuditOutcome) {
    let mut args = Map::new();
    args.insert("command".into(), json!(name));
    if let Some(argv) = argv {
        args.insert("argv".into(), json!(argv.elements()));
    }
    if let Some(k) = instance {
        args.insert("instance".into(), json!(k));
    }
    args.insert("error".into(), json!(error.message));
    (args, error.code.audit_outcome())
}

/// What a run resumed after its command was cut off does, as the command's `on_resume`
/// says, with the question put when it asks.
pub(crate) enum Resumed {
    Ask(Question),
    Rerun,
    Fail(NodeError),
}

/// What the command `spec`, cut off by the end of the process that ran `argv`, is to do.
pub(crate) fn resumed(spec: &CommandSpec, argv: &Argv) -> Resumed {
    let argv = shown(argv);
    match spec.on_resume() {
        OnResume::Rerun => Resumed::Rerun,
        OnResume::Fail => Resumed::Fail(NodeError::new(
            NodeErrorKind::CommandInterrupted,
            format!(
                "command `{}` ({argv}) was cut off by the end of the process that ran it, and \
                 its on_resume is \"fail\": it may have done part of its work",
                spec.name
            ),
        )),
        OnResume::Ask => Resumed::Ask(Question::Input {
            message: format!(
                "The command `{}` ({argv}) was running when the server that ran it stopped, \
                 so it may have done all, part or none of its work. Did it complete?",
                spec.name
            ),
            schema: json!({
                "type": "object",
                "required": ["outcome"],
                "properties": {
                    "outcome": {
                        "type": "string",
                        "title": "What became of it",
                        "oneOf": [
                            { "const": "completed", "title": "It completed: go on" },
                            { "const": "rerun", "title": "Run it again" },
                            { "const": "failed", "title": "It did not complete: fail its node" },
                        ],
                    },
                },
            }),
        }),
    }
}

/// The argv as the question shows it: each element quoted when it holds a space or a
/// quote, so that a person sees where one ends.
fn shown(argv: &Argv) -> String {
    let shown: Vec<String> = (argv.elements().iter())
        .map(
            |element| match element.is_empty() || element.contains([' ', '"', '\'']) {
                true => format!("{element:?}"),
                false => element.clone(),
            },
        )
        .collect();
    shown.join(" ")
}

/// What the person answered a resumed command's question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// It completed: the node succeeds, with an output that says a person said so.
    Completed,
    /// Run it again.
    Rerun,
    /// It did not complete: the node fails.
    Failed,
}

impl Answer {
    /// The answer of a form filled in, or why it is none of the three.
    pub(crate) fn of(answer: &Value) -> Result<Answer, NodeError> {
        match answer.get("outcome").and_then(Value::as_str) {
            Some("completed") => Ok(Answer::Completed),
            Some("rerun") => Ok(Answer::Rerun),
            Some("failed") => Ok(Answer::Failed),
            _ => Err(NodeError::new(
                NodeErrorKind::Invalid,
                format!("the answer {answer} says none of completed, rerun or failed"),
            )),
        }
    }
}

/// The output of a command a person said completed: no exit code, no output, and who
/// said so.
pub(crate) fn completed_by_person() -> Value {
    json!({
        "exit_code": null,
        "stdout": "",
        "stderr": "",
        "truncated": false,
        "took_ms": 0,
        "completed_by": "person",
    })
}

/// The error of a resumed command whose question got no answer it could take (declined,
/// timed out, nobody to ask): the node fails, the command not run again.
pub(crate) fn unanswered(name: &str, error: &NodeError) -> NodeError {
    match error.kind {
        NodeErrorKind::CommandInterrupted => error.clone(),
        _ => NodeError::new(
            NodeErrorKind::CommandInterrupted,
            format!(
                "command `{name}` was cut off by the end of the process that ran it, and the \
                 question whether it completed got no answer ({}: {}); it is not run again \
                 unasked",
                error.code, error.message
            ),
        ),
    }
}

/// The error of a command a person said did not complete.
pub(crate) fn failed_by_person(name: &str) -> NodeError {
    NodeError::new(
        NodeErrorKind::CommandInterrupted,
        format!(
            "command `{name}` was cut off by the end of the process that ran it, and the \
             person asked said it did not complete"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::command::Commands;

    fn spec() -> CommandSpec {
        let file = "[commands.build]\nargv = [\"/bin/sh\", \"build.sh\", \"{target}\"]\n\
                    ok_exit_codes = [0, 2]\n[commands.build.params.target]\ntype = \"string\"\n";
        Commands::parse(file).unwrap().get("build").unwrap().clone()
    }

    fn ran(outcome: Outcome, exit_code: Option<i32>, stderr: &str) -> Ran {
        Ran {
            command: "build".into(),
            argv: vec!["/bin/sh".into(), "build.sh".into(), "two words".into()],
            outcome,
            exit_code,
            signal: None,
            stdout: "out".into(),
            stderr: stderr.into(),
            truncated: false,
            left_open: false,
            output_sha256: String::new(),
            took_ms: 12,
        }
    }

    #[test]
    fn a_started_command_is_told_from_a_write_by_its_mark() {
        let argv = spec().argv(&serde_json::from_value(json!({"target": "x"})).unwrap());
        let intent = intent(&argv.unwrap());
        assert!(started(Some(&intent)));
        assert!(!started(Some(&crate::engine::files::content_hash(
            "a file"
        ))));
        assert!(!started(None));
    }

    #[test]
    fn a_run_becomes_the_nodes_output_or_an_error_saying_how_it_ended() {
        let spec = spec();
        let ok = result(&spec, &ran(Outcome::Ok, Some(0), ""))
            .unwrap()
            .unwrap();
        assert_eq!(
            ok,
            json!({"exit_code": 0, "stdout": "out", "stderr": "", "truncated": false, "took_ms": 12})
        );
        let long = format!("{}é the reason\n", "x".repeat(2000));
        let failed = result(&spec, &ran(Outcome::Failed, Some(9), &long))
            .unwrap()
            .unwrap_err();
        assert_eq!(failed.code.as_str(), "command_failed");
        assert!(failed.message.starts_with(
            "command `build` exited with 9, which the commands file does not list as fine \
             (ok_exit_codes: 0, 2); its stderr ends: "
        ));
        assert!(
            failed.message.ends_with("é the reason"),
            "{}",
            failed.message
        );
        assert!(failed.message.len() < QUOTED_STDERR + 200);
        let timed_out = result(&spec, &ran(Outcome::TimedOut, None, ""))
            .unwrap()
            .unwrap_err();
        assert_eq!(timed_out.code.as_str(), "timeout");
        assert!(timed_out.message.contains("ran past its timeout of 5m"));
        assert!(result(&spec, &ran(Outcome::Cancelled, None, "")).is_none());
    }

    #[test]
    fn the_resume_question_shows_the_argv_and_takes_three_answers() {
        let spec = spec();
        let argv = spec.argv(&serde_json::from_value(json!({"target": "two words"})).unwrap());
        let Resumed::Ask(Question::Input { message, schema }) = resumed(&spec, &argv.unwrap())
        else {
            panic!("on_resume asks by default")
        };
        assert!(
            message.contains("`build` (/bin/sh build.sh \"two words\")"),
            "{message}"
        );
        assert!(
            crate::engine::form::answer_problems(&schema, &json!({"outcome": "rerun"})).is_empty()
        );
        assert!(
            !crate::engine::form::answer_problems(&schema, &json!({"outcome": "x"})).is_empty()
        );
        assert_eq!(
            Answer::of(&json!({"outcome": "completed"})).unwrap(),
            Answer::Completed
        );
        assert_eq!(
            Answer::of(&json!({"outcome": "rerun"})).unwrap(),
            Answer::Rerun
        );
        assert_eq!(
            Answer::of(&json!({"outcome": "failed"})).unwrap(),
            Answer::Failed
        );
        assert!(Answer::of(&json!({})).is_err());
    }

    #[test]
    fn a_question_without_an_answer_fails_the_node_without_a_retry() {
        let declined = NodeError::new(NodeErrorKind::Refused, "the user declined");
        let error = unanswered("build", &declined);
        assert_eq!(error.code.as_str(), "command_interrupted");
        assert!(!error.is_retryable());
        assert!(
            error.message.contains("refused: the user declined"),
            "{}",
            error.message
        );
        let timed_out = NodeError::new(NodeErrorKind::Timeout, "timed out after 1h");
        assert!(!unanswered("build", &timed_out).is_retryable());
    }
}
