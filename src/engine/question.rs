//! A question a run puts (an `input` node's form, a `sample` node's prompt), who is asked
//! it for what the client can answer, and the one asking policy every reply goes through
//! before its node takes it, whichever way it came (the caller during its call, a task's
//! client, `workflows answer`, an answers file, the terminal): the check of the answer
//! ([`Question::judge`]), how many times a question is asked, the key of each asking, and
//! the audit row each reply leaves, taken or not ([`Question::decide`]). How a question
//! reaches whoever answers it stays each face's own.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::actions::{self, Resolved};
use super::form;

/// How many times a question is asked when its answers do not fit its form.
pub const ASKED_AT_MOST: u32 = 3;

/// Why a person's reply to a model-only sample is not taken.
pub const MODEL_ONLY: &str =
    "only the client's model answers this question (`person = false`); no person writes it";

/// Why a model-only sample fails its node for a client without sampling, whichever way it
/// was put (during the call, or as a task's question).
pub const NO_MODEL: &str = "only the client's model answers this question (`person = false`), \
     and the client has no model (it did not declare sampling)";

/// Why an answer to a model-only sample given in its node's shape is not taken.
pub const MODEL_SHAPE: &str =
    "a model-only sample's answer is the model's reply, `{\"text\": ..., \"model\": ...}`";

/// A question as a run records it, tagged by `kind`: `{kind: "input", message, schema}` or
/// `{kind: "sample", prompt, system, maxTokens}`, with `person: false` when only a model
/// may answer the sample. The stored text of questions written before this type (and
/// before `person`) reads back as it was, and is written out the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Question {
    /// A form for the person: the answer is an object of its fields.
    Input { message: String, schema: Value },
    /// A prompt for the client's model: the answer is `{text, model}`.
    Sample {
        prompt: String,
        system: Option<String>,
        #[serde(rename = "maxTokens")]
        max_tokens: u32,
        /// Whether a person may write the reply for a client without a model; `false`
        /// (`sample = { person = false }`) is written only when set.
        #[serde(default = "person_may_answer", skip_serializing_if = "person_may")]
        person: bool,
    },
}

/// A sample written before `person`, or without it, lets a person answer.
fn person_may_answer() -> bool {
    true
}

fn person_may(person: &bool) -> bool {
    *person
}

/// Who is asked a question, and so what a reply looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answerer {
    /// A person fills in a form: an `input`'s own, or for a `sample`, one text field.
    Person,
    /// The client's model replies to a `sample`'s prompt, `{text, model}`.
    Model,
}

/// What a client declared it can answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// It shows forms to its person (elicitation).
    pub elicitation: bool,
    /// It has a model to ask (sampling).
    pub sampling: bool,
}

impl Capabilities {
    /// Whom the client asks `question` ([`Question::answerer`]), if it can ask them at all:
    /// a person needs its elicitation, a model its sampling.
    pub fn asks(self, question: &Question) -> Option<Answerer> {
        let answerer = question.answerer(self);
        let reached = match answerer {
            Answerer::Person => self.elicitation,
            Answerer::Model => self.sampling,
        };
        reached.then_some(answerer)
    }
}

/// What becomes of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// It fits: the node takes this value (a person's reply to a `sample` reads as a model's).
    Take(Value),
    /// It does not fit its form: the question is asked again, with these problems.
    AskAgain(Vec<String>),
    /// It does not fit, and the question was asked [`ASKED_AT_MOST`] times: the node fails.
    GiveUp(Vec<String>),
}

/// Why a question gets no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Decline,
    Cancel,
    /// The answers given did not fit the question's form, too many times.
    Invalid,
    /// Nobody was there to answer: the run's answers had none for it, and nobody could be
    /// asked.
    Unanswered,
    /// A model-only sample put to a client without a model: nobody may answer it.
    NoModel,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Decline => "decline",
            Refusal::Cancel => "cancel",
            Refusal::Invalid => "invalid",
            Refusal::Unanswered => "unanswered",
            Refusal::NoModel => "no_model",
        }
    }
}

/// What one reply to one asking of a question comes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The node takes this value.
    Take(Value),
    /// The question is refused: nobody will answer it.
    Refuse(Refusal),
    /// The answer does not fit: the question is asked again under `next_key`.
    AskAgain {
        problems: Vec<String>,
        next_key: String,
    },
    /// The answer does not fit, and the question was asked as often as it is: the node
    /// fails.
    GiveUp(Vec<String>),
}

/// A reply judged, with the audit row it leaves: its arguments and its outcome (a reply
/// taken or refused is `ok`, an answer that does not fit `rejected`).
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub decision: Decision,
    pub audit: Map<String, Value>,
    pub outcome: crate::todos::AuditOutcome,
}

/// The key of a unit's question in attempt `attempt` of the unit, as first asked.
pub fn first_asking(attempt: u32) -> String {
    format!("attempt-{attempt}")
}

/// A question's key as first asked, and how many times it has been asked: `attempt-1` is
/// the first asking, `attempt-1.r2` the second.
pub fn asking(key: &str) -> (&str, u32) {
    match key.rsplit_once(".r") {
        Some((base, n)) => match n.parse::<u32>() {
            Ok(n) => (base, n),
            Err(_) => (key, 1),
        },
        None => (key, 1),
    }
}

/// The key of the asking after the one under `key`.
pub fn next_asking(key: &str) -> String {
    let (base, asked) = asking(key);
    format!("{base}.r{}", asked + 1)
}

/// A reply to a question as the audit log records it.
#[derive(Debug, Clone, Copy)]
pub enum Reply<'a> {
    Answer(&'a Value),
    Refused(Refusal),
    /// The caller could not answer: why, as its node's error says.
    Failed(&'a str),
}

impl Question {
    /// The question of an `input` or `sample` action, or the one a resumed `command` node
    /// puts; none for any other action.
    pub fn of(action: &Resolved) -> Option<Question> {
        match action {
            Resolved::Input {
                message, schema, ..
            } => Some(Question::Input {
                message: message.clone(),
                schema: schema.clone(),
            }),
            Resolved::Sample {
                prompt,
                system,
                max_tokens,
                person,
            } => Some(Question::Sample {
                prompt: prompt.clone(),
                system: system.clone(),
                max_tokens: *max_tokens,
                person: *person,
            }),
            Resolved::CommandResumed { question, .. } => Some(question.clone()),
            _ => None,
        }
    }

    /// `input` or `sample`, as a run records it and an answers file names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Question::Input { .. } => "input",
            Question::Sample { .. } => "sample",
        }
    }

    /// Who a client with `can` puts the question to: an `input` to its person; a `sample`
    /// to its model, or to its person when it can show forms but has no model to ask,
    /// unless the sample is for a model only ([`Question::model_only`]). Whether it can
    /// ask them at all is [`Capabilities::asks`].
    pub(crate) fn answerer(&self, can: Capabilities) -> Answerer {
        match self {
            Question::Input { .. } => Answerer::Person,
            Question::Sample { person: true, .. } if can.elicitation && !can.sampling => {
                Answerer::Person
            }
            Question::Sample { .. } => Answerer::Model,
        }
    }

    /// A `sample` with `person = false`: only the client's model answers it, never a
    /// person shown a form in its place. (An answer in the model's shape given through
    /// `workflows answer` or an answers file is still taken: an operator passing a model's
    /// reply.)
    pub fn model_only(&self) -> bool {
        matches!(self, Question::Sample { person: false, .. })
    }

    /// Who the question is written for: an `input`'s person, a `sample`'s model. An answer
    /// given in the shape its node takes (`workflows answer`, an answers file) reads as
    /// theirs.
    pub(crate) fn written_for(&self) -> Answerer {
        match self {
            Question::Input { .. } => Answerer::Person,
            Question::Sample { .. } => Answerer::Model,
        }
    }

    /// The text shown above the form, or sent to the model.
    pub fn message(&self) -> &str {
        match self {
            Question::Input { message, .. } => message,
            Question::Sample { prompt, .. } => prompt,
        }
    }

    /// The form `answerer` fills in: an `input`'s own; for a `sample` put to a person, one
    /// text field for the reply they write themselves. A model fills in none, and a
    /// model-only sample has none.
    pub fn form(&self, answerer: Answerer) -> Option<Value> {
        match (self, answerer) {
            (Question::Input { schema, .. }, _) => Some(schema.clone()),
            (Question::Sample { person: true, .. }, Answerer::Person) => Some(json!({
                "type": "object",
                "properties": { "text": {
                    "type": "string",
                    "title": "Your reply",
                    "description": "There is no model to ask: write the reply yourself."
                } },
                "required": ["text"]
            })),
            (Question::Sample { .. }, _) => None,
        }
    }

    /// The problems of `answer` as `answerer`'s answer: those of the form it was shown
    /// ([`form::answer_problems`]); a model's reply has no form to fit. A person may not
    /// answer a model-only sample at all.
    pub fn problems(&self, answerer: Answerer, answer: &Value) -> Vec<String> {
        if self.model_only() {
            return match (answerer, answer["text"].is_string()) {
                (Answerer::Person, _) => vec![MODEL_ONLY.to_owned()],
                (Answerer::Model, true) => Vec::new(),
                (Answerer::Model, false) => vec![MODEL_SHAPE.to_owned()],
            };
        }
        match self.form(answerer) {
            Some(form) => form::answer_problems(&form, answer),
            None => Vec::new(),
        }
    }

    /// What becomes of `answer`, given by `answerer` to the question's `asked`-th asking:
    /// taken as its node takes it, or asked again with its problems, or, at the last
    /// asking, given up.
    pub(crate) fn judge(&self, answerer: Answerer, answer: &Value, asked: u32) -> Verdict {
        let problems = self.problems(answerer, answer);
        if !problems.is_empty() {
            return match asked >= ASKED_AT_MOST {
                true => Verdict::GiveUp(problems),
                false => Verdict::AskAgain(problems),
            };
        }
        Verdict::Take(match (self, answerer) {
            (Question::Sample { .. }, Answerer::Person) => {
                actions::sampled_by_person(&answer["text"])
            }
            _ => answer.clone(),
        })
    }

    /// What becomes of `answerer`'s `reply` to the asking of this question under `key` (of
    /// `instance`), and the audit row it leaves: the one policy of every path that asks.
    pub fn decide(
        &self,
        key: &str,
        instance: Option<usize>,
        answerer: Answerer,
        reply: Result<&Value, Refusal>,
    ) -> Judged {
        use crate::todos::AuditOutcome;
        let answer = match reply {
            Err(refusal) => {
                return Judged {
                    decision: Decision::Refuse(refusal),
                    audit: self.audit_args(key, instance, Reply::Refused(refusal)),
                    outcome: AuditOutcome::Ok,
                };
            }
            Ok(answer) => answer,
        };
        let (_, asked) = asking(key);
        let (decision, audited, outcome) = match self.judge(answerer, answer, asked) {
            Verdict::Take(taken) => {
                let audit = self.audit_args(key, instance, Reply::Answer(&taken));
                return Judged {
                    decision: Decision::Take(taken),
                    audit,
                    outcome: AuditOutcome::Ok,
                };
            }
            Verdict::AskAgain(problems) => (
                Decision::AskAgain {
                    problems,
                    next_key: next_asking(key),
                },
                answer,
                AuditOutcome::Rejected,
            ),
            Verdict::GiveUp(problems) => {
                (Decision::GiveUp(problems), answer, AuditOutcome::Rejected)
            }
        };
        Judged {
            decision,
            audit: self.audit_args(key, instance, Reply::Answer(audited)),
            outcome,
        }
    }

    /// What the audit log records of a reply to the question asked under `key`: its kind,
    /// key and instance, and the answer, the refusal or the caller's error.
    pub(crate) fn audit_args(
        &self,
        key: &str,
        instance: Option<usize>,
        reply: Reply<'_>,
    ) -> Map<String, Value> {
        let mut args = Map::new();
        args.insert("kind".into(), Value::from(self.kind()));
        args.insert("key".into(), Value::from(key));
        if let Some(k) = instance {
            args.insert("instance".into(), Value::from(k));
        }
        match reply {
            Reply::Answer(answer) => args.insert("answer".into(), answer.clone()),
            Reply::Refused(refusal) => args.insert("refusal".into(), Value::from(refusal.as_str())),
            Reply::Failed(error) => args.insert("error".into(), Value::from(error)),
        };
        args
    }
}

#[cfg(test)]
#[path = "question_tests.rs"]
mod tests;
