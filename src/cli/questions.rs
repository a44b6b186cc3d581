//! The questions of a run driven at the terminal. The run parks them in the store, as
//! with `--wait-for-answers`; this watches the run's open questions and answers each one
//! from the answers file, else from the person at the terminal, else as a run without
//! anyone to ask would (the node's default, or a failure). Answers go through
//! the application (`App::reply`), so that they are checked, audited and kept like any
//! other: a
//! resumed run asks only what is still open.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget};
use serde_json::Value;
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

use super::answers::AnswerFile;
use super::prompt::{self, Stopped};
use crate::app::App;
use crate::engine::definition::ActionDef;
use crate::engine::plan::{NodeAction, Plan};
use crate::engine::report::RunReport;
use crate::runs::{AnswerError, OpenQuestion, Refusal};

/// How often the store is read for new questions: questions are committed by the run's
/// own process, which has no way to wake this short of a poll.
const POLL: Duration = Duration::from_millis(100);

/// Where a run's answers come from.
#[derive(Debug, Default)]
pub(crate) struct Sources {
    /// `--answers FILE`.
    pub file: Option<AnswerFile>,
    /// Whether the person can be asked: stdin and stderr are a terminal.
    pub terminal: bool,
    /// `--wait-for-answers`: what nothing here answers waits for `workflows answer`.
    pub wait: bool,
}

impl Sources {
    /// Whether the run parks its questions in the store.
    pub(crate) fn parks(&self) -> bool {
        self.wait || self.watches()
    }

    /// Whether anything here answers the run's questions.
    pub(crate) fn watches(&self) -> bool {
        self.file.is_some() || (self.terminal && !self.wait)
    }
}

/// The run's questions, watched while it runs.
pub(crate) struct Watch {
    pub app: App,
    pub run_id: String,
    pub plan: Arc<Plan>,
    pub sources: Sources,
    pub bar: ProgressBar,
    /// Cancels the run, when the person stops it at a prompt.
    pub cancel: CancellationToken,
}

/// What the watch does next.
enum Next {
    Watch,
    /// The person stopped the run: ask nothing more, wait for it to end.
    Stop,
}

impl Watch {
    /// Answers the run's questions until it ends; returns its report.
    pub(crate) async fn follow(
        mut self,
        join: JoinHandle<RunReport>,
    ) -> Result<RunReport, JoinError> {
        tokio::pin!(join);
        let mut seen = HashSet::new();
        loop {
            tokio::select! {
                biased;
                report = &mut join => return report,
                _ = tokio::time::sleep(POLL) => {}
            }
            if let Next::Stop = self.pass(&mut seen).await {
                return join.await;
            }
        }
    }

    /// Answers the questions that opened since the last pass, in the order they were asked.
    async fn pass(&mut self, seen: &mut HashSet<String>) -> Next {
        let open = match self.app.open_questions(&self.run_id) {
            Ok(open) => open,
            Err(error) => {
                tracing::warn!(%error, "cannot read the run's questions");
                return Next::Watch;
            }
        };
        for question in open {
            if !seen.insert(asking_id(&question)) {
                continue;
            }
            if let Next::Stop = self.answer(question, seen).await {
                return Next::Stop;
            }
        }
        Next::Watch
    }

    async fn answer(&mut self, question: OpenQuestion, seen: &mut HashSet<String>) -> Next {
        let kind = question.request.kind();
        let from_file = self.sources.file.as_ref().and_then(|file| {
            let answer = file.answer(&unit_key(&question), question.instance, kind)?;
            Some((file.path.clone(), answer))
        });
        if let Some((path, answer)) = from_file {
            self.answer_from_file(&question, &path, &answer, seen);
            return Next::Watch;
        }
        if self.sources.wait {
            return Next::Watch;
        }
        // No person at the terminal writes a model-only sample's reply.
        if self.sources.terminal && !question.request.model_only() {
            return self.at_terminal(question).await;
        }
        self.unanswerable(&question);
        Next::Watch
    }

    /// Prints a line on stderr without tearing the progress bar.
    fn note(&self, text: &str) {
        self.bar.suspend(|| eprintln!("{text}"));
    }

    /// An answer from the file. One that does not fit fails the node with its problems:
    /// nobody is there to correct it.
    fn answer_from_file(
        &self,
        question: &OpenQuestion,
        path: &str,
        answer: &Value,
        seen: &mut HashSet<String>,
    ) {
        let unit = unit_name(question);
        match self.app.reply(&self.run_id, question, Ok(answer)) {
            Ok(()) => self.note(&format!("{unit}: answered from {path}")),
            Err(AnswerError::Invalid { problems }) => {
                let mut text =
                    format!("error: {path}: the answer to {unit} does not fit its form:");
                for problem in &problems {
                    text.push_str(&format!("\n  {problem}"));
                }
                self.note(&text);
                self.refuse_reasked(question, Refusal::Invalid, seen);
            }
            Err(error) => self.reply_failed(question, &error),
        }
    }

    /// The question of the same unit, asked again after an answer that did not fit,
    /// refused (if the registry has not already failed the node).
    fn refuse_reasked(&self, asked: &OpenQuestion, why: Refusal, seen: &mut HashSet<String>) {
        let open = self.app.open_questions(&self.run_id).unwrap_or_default();
        let again = open.into_iter().find(|q| {
            q.run_id == asked.run_id && q.node_id == asked.node_id && q.instance == asked.instance
        });
        if let Some(again) = again {
            seen.insert(asking_id(&again));
            if let Err(error) = self.app.reply(&self.run_id, &again, Err(why)) {
                self.reply_failed(&again, &error);
            }
        }
    }

    fn reply_failed(&self, question: &OpenQuestion, error: &AnswerError) {
        match error {
            // Answered elsewhere (`workflows answer`), or its node was cancelled.
            AnswerError::NoQuestion { .. } => {}
            error => self.note(&format!(
                "error: cannot answer {}: {error}",
                unit_name(question)
            )),
        }
    }

    /// A question nothing here answers, with nobody to ask: an `input` takes its node's
    /// default; otherwise the node fails.
    fn unanswerable(&self, question: &OpenQuestion) {
        let path = self
            .sources
            .file
            .as_ref()
            .map_or("", |file| file.path.as_str());
        let unit = unit_name(question);
        let reply = match self.default_of(question) {
            Some(default) => {
                self.note(&format!(
                    "{unit}: {path} has no answer; it takes its default"
                ));
                self.app.reply(&self.run_id, question, Ok(&default))
            }
            None if question.request.model_only() => {
                self.note(&format!(
                    "{unit} asks the client's model only, and there is no model here: it is \
                     left unanswered"
                ));
                let refusal = Err(Refusal::NoModel);
                self.app.reply(&self.run_id, question, refusal)
            }
            None => {
                self.note(&format!(
                    "error: {unit} asks a question that {path} does not answer, and there \
                     is no terminal to ask"
                ));
                let refusal = Err(Refusal::Unanswered);
                self.app.reply(&self.run_id, question, refusal)
            }
        };
        if let Err(error) = reply {
            self.reply_failed(question, &error);
        }
    }

    fn default_of(&self, question: &OpenQuestion) -> Option<Value> {
        // A child run's question is of a node of the child's plan.
        let child;
        let plan = match question.run_id == self.run_id {
            true => &self.plan,
            false => {
                child = self.app.stored_plan(&question.run_id).ok()?;
                &child
            }
        };
        let node = plan.nodes.get(usize::try_from(question.node).ok()?)?;
        match &node.action {
            NodeAction::Defined(ActionDef::Input { default, .. }) => default.clone(),
            _ => None,
        }
    }

    /// Asks the person; Esc or Ctrl-C at the prompt cancels the run.
    async fn at_terminal(&mut self, question: OpenQuestion) -> Next {
        let header = format!("{} asks:", unit_name(&question));
        let request = question.request.clone();
        // The bar would redraw over the prompt: hidden while the person answers.
        self.bar.set_draw_target(ProgressDrawTarget::hidden());
        eprint!("\r\x1b[2K");
        let asked = tokio::task::spawn_blocking(move || prompt::ask(&header, &request))
            .await
            .unwrap_or_else(|e| Err(Stopped::Terminal(format!("the prompt failed: {e}"))));
        self.bar.set_draw_target(ProgressDrawTarget::stderr());
        let answer = match asked {
            Ok(answer) => answer,
            Err(Stopped::Cancelled) => {
                self.note("cancelling the run");
                self.cancel.cancel();
                return Next::Stop;
            }
            Err(error) => {
                self.note(&format!("error: {error}"));
                let refusal = Err(Refusal::Unanswered);
                if let Err(error) = self.app.reply(&self.run_id, &question, refusal) {
                    self.reply_failed(&question, &error);
                }
                return Next::Watch;
            }
        };
        match self.app.reply(&self.run_id, &question, Ok(&answer)) {
            Ok(()) => {}
            // The registry asks again under a new key, which the next pass finds.
            Err(AnswerError::Invalid { problems }) => {
                self.bar.suspend(|| prompt::show_problems(&problems))
            }
            Err(error) => self.reply_failed(&question, &error),
        }
        Next::Watch
    }
}

/// One asking of a question: its unit and its key.
fn asking_id(question: &OpenQuestion) -> String {
    let instance = question.instance.map_or(-1, |k| k as i64);
    let run = &question.run_id;
    format!("{run}/{}/{instance}/{}", question.node_id, question.key)
}

/// The node as the answers file keys it: its id, after the path to its run for a child
/// run's (`review>approve`).
fn unit_key(question: &OpenQuestion) -> String {
    format!("{}{}", question.path, question.node_id)
}

/// A node, or one instance of it, as messages name it: `` `approve` ``, `` `check`[2] ``,
/// or a child run's `` `review>approve` ``.
fn unit_name(question: &OpenQuestion) -> String {
    let key = unit_key(question);
    match question.instance {
        Some(k) => format!("`{key}`[{k}]"),
        None => format!("`{key}`"),
    }
}
