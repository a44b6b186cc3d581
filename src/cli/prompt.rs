//! A run's questions put to the person at the terminal, with `inquire` (drawn on stderr):
//! an `input` form field by field, a `sample` as lines of text, since the terminal has no
//! model to ask. These calls block; the caller runs them off the async runtime.

use inquire::validator::Validation;
use inquire::{Confirm, InquireError, MultiSelect, Select, Text};
use serde_json::{Map, Value};

use crate::engine::fields::{self, Field, FieldKind};
use crate::engine::question::{Answerer, Question};

/// Why a question got no answer at the terminal.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Stopped {
    /// The person pressed Esc or Ctrl-C: they want the run to stop.
    #[error("cancelled at the terminal")]
    Cancelled,
    #[error("the terminal cannot ask: {0}")]
    Terminal(String),
}

impl From<InquireError> for Stopped {
    fn from(error: InquireError) -> Stopped {
        match error {
            InquireError::OperationCanceled | InquireError::OperationInterrupted => {
                Stopped::Cancelled
            }
            other => Stopped::Terminal(other.to_string()),
        }
    }
}

/// Asks `question` under `header`, which names the node; returns the answer to record.
pub(crate) fn ask(header: &str, question: &Question) -> Result<Value, Stopped> {
    eprintln!("\n{header}");
    match question {
        Question::Input { message, schema } => ask_form(question, message, schema),
        Question::Sample { prompt, system, .. } => ask_sample(prompt, system.as_deref()),
    }
}

/// An `input` form, one prompt per field. Each field is checked as it is typed; the whole
/// answer is checked as every answer is ([`Question::problems`]), and the form asked again
/// until it fits.
fn ask_form(question: &Question, message: &str, schema: &Value) -> Result<Value, Stopped> {
    eprintln!("{message}");
    loop {
        let mut answer = Map::new();
        for field in fields::fields(schema) {
            if let Some(value) = ask_field(&field)? {
                answer.insert(field.name, value);
            }
        }
        let answer = Value::Object(answer);
        let problems = question.problems(Answerer::Person, &answer);
        if problems.is_empty() {
            return Ok(answer);
        }
        show_problems(&problems);
    }
}

/// Shows why an answer does not fit, before it is asked again.
pub(crate) fn show_problems(problems: &[String]) {
    eprintln!("The answer does not fit the form:");
    for problem in problems {
        eprintln!("  {problem}");
    }
}

/// One field; `None` leaves an optional field out.
fn ask_field(field: &Field) -> Result<Option<Value>, Stopped> {
    // A yes-or-no question is always answered, and a list says how to leave it empty.
    let label = match (field.required, &field.kind) {
        (false, FieldKind::Text { .. } | FieldKind::Number { .. }) => {
            format!("{} (optional)", field.label)
        }
        _ => field.label.clone(),
    };
    let help = field.help.as_deref();
    match &field.kind {
        FieldKind::Confirm { default } => {
            let mut prompt = Confirm::new(&label);
            prompt = match default {
                Some(default) => prompt.with_default(*default),
                None => prompt.with_placeholder("y/n"),
            };
            if let Some(help) = help {
                prompt = prompt.with_help_message(help);
            }
            Ok(Some(Value::Bool(prompt.prompt()?)))
        }
        FieldKind::MultiSelect { choices, defaults } => {
            let mut prompt = MultiSelect::new(&label, choices.clone()).with_default(defaults);
            if let Some(help) = help {
                prompt = prompt.with_help_message(help);
            }
            let picked = prompt.prompt()?.into_iter().filter_map(|c| c.value);
            Ok(Some(Value::Array(picked.map(Value::String).collect())))
        }
        FieldKind::Select { choices, default } => {
            let mut prompt = Select::new(&label, choices.clone());
            if let Some(default) = default {
                prompt = prompt.with_starting_cursor(*default);
            }
            if let Some(help) = help {
                prompt = prompt.with_help_message(help);
            }
            Ok(prompt.prompt()?.value.map(Value::String))
        }
        FieldKind::Text { default } | FieldKind::Number { default, .. } => {
            let checked = field.clone();
            let validator = move |typed: &str| {
                Ok(match checked.parse(typed) {
                    Ok(_) => Validation::Valid,
                    Err(problems) => Validation::Invalid(problems.join("; ").into()),
                })
            };
            let mut prompt = Text::new(&label).with_validator(validator);
            if let Some(default) = default {
                prompt = prompt.with_initial_value(default);
            }
            if let Some(help) = help {
                prompt = prompt.with_help_message(help);
            }
            let typed = prompt.prompt()?;
            // The validator accepted this text, so it parses.
            Ok(field.parse(&typed).unwrap_or_default())
        }
    }
}

/// A `sample` node's prompt, answered by the person: lines of text, ended by an empty one.
fn ask_sample(prompt: &str, system: Option<&str>) -> Result<Value, Stopped> {
    if let Some(system) = system {
        eprintln!("(system) {system}");
    }
    eprintln!("{prompt}");
    let first_line = |typed: &str| {
        Ok(match typed.is_empty() {
            true => Validation::Invalid("a reply needs some text".into()),
            false => Validation::Valid,
        })
    };
    let first = Text::new("Reply")
        .with_help_message("the model's reply, typed by you; an empty line ends it")
        .with_validator(first_line)
        .prompt()?;
    let mut lines = vec![first];
    loop {
        let line = Text::new("…").prompt()?;
        if line.is_empty() {
            return Ok(fields::sample_answer(&lines));
        }
        lines.push(line);
    }
}
