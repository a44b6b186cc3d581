//! Node actions: resolving their templates, then performing them.
//!
//! There is no shell: a server that runs what a model says is a confused deputy. A
//! `command` node runs only a program the operator named in the commands file, its argv
//! fixed there but for whole elements its parameters fill (`engine/command`).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::Limits;
use super::definition::{ActionDef, HistoryLimit};
use super::history::{History, HistoryRequest};
use super::question::Question;
use super::report::{NodeError, NodeErrorKind};
use super::template::{self, Templates};
use crate::todos::Tools;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Questions a run may put to the MCP client: the user (elicitation) or its model (sampling).
pub trait Interaction: Send + Sync {
    /// Asks the user; resolves to the answer matching `schema`.
    fn ask(&self, message: String, schema: Value) -> BoxFuture<Result<Value, NodeError>>;
    /// Asks the client's model; resolves to its reply.
    fn sample(
        &self,
        prompt: String,
        system: Option<String>,
        max_tokens: u32,
    ) -> BoxFuture<Result<Value, NodeError>>;

    /// Puts `question`, asked as `asking` says, to whoever answers; resolves to what its
    /// node takes, with the audit row of each reply given ([`Question::decide`]: one
    /// policy for every path). An interaction that asks again when an answer does not fit
    /// implements this; the default asks once, by [`Interaction::ask`] or
    /// [`Interaction::sample`], and leaves the audit of its answer to the run.
    fn put(&self, asking: Asking, question: Question) -> BoxFuture<Asked> {
        let _ = asking;
        let answered = match question {
            Question::Input { message, schema } => self.ask(message, schema),
            Question::Sample {
                prompt,
                system,
                max_tokens,
                ..
            } => self.sample(prompt, system, max_tokens),
        };
        Box::pin(async move {
            Asked {
                result: answered.await,
                replies: Vec::new(),
            }
        })
    }
}

/// Which asking of which unit's question is put: its key, and the `for_each` instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asking {
    pub key: String,
    pub instance: Option<usize>,
}

/// What putting a question came to: what its node takes (or why not), and the audit row
/// of each reply the interaction judged (its arguments and outcome), in order.
pub struct Asked {
    pub result: Result<Value, NodeError>,
    pub replies: Vec<(Map<String, Value>, crate::todos::AuditOutcome)>,
}

/// What actions need from the world.
#[derive(Clone)]
pub struct ActionEnv {
    pub tools: Tools,
    /// `write_file` paths are relative to this directory and may not leave it.
    pub workspace: PathBuf,
    /// Sync a folder after a file is placed in it (`--durability full`).
    pub sync_folders: bool,
    pub interaction: Option<Arc<dyn Interaction>>,
    /// The principal the run acts for, named in the audit rows of its calls.
    pub principal: Option<Arc<str>>,
    /// Templates evaluated under the budgets of `limits.template`.
    pub templates: Arc<Templates>,
    /// The budgets of a run and of each evaluation in it.
    pub limits: Limits,
    /// The operator's commands in force, and what runs them.
    pub commands: super::command::CommandSet,
    /// The finished runs `history` nodes read, when the engine keeps a record of runs.
    pub history: Option<Arc<dyn History>>,
}

impl ActionEnv {
    /// Makes the templates again from the limits and the commands in force: both shape them.
    pub(crate) fn rebuild_templates(&mut self) {
        let templates = Templates::new(self.limits.template).with_commands(self.commands.clone());
        self.templates = Arc::new(templates);
    }
}

/// An action with its templates expanded, ready to perform (and to retry as it is).
#[derive(Debug, Clone)]
pub enum Resolved {
    Tool {
        name: String,
        args: Map<String, Value>,
    },
    Text(String),
    WriteFile {
        path: String,
        content: String,
        overwrite: bool,
    },
    Wait(Duration),
    Input {
        message: String,
        schema: Value,
        default: Option<Value>,
    },
    Sample {
        prompt: String,
        system: Option<String>,
        max_tokens: u32,
        /// Whether a person may answer in the model's place.
        person: bool,
    },
    /// A `value` node's value, checked: it becomes the output as it is.
    Value(Value),
    ListDir(String),
    ReadFile {
        path: String,
        max_bytes: u64,
    },
    /// Run installed workflow `name` as a child run, with these inputs (not yet checked
    /// against its declarations).
    Workflow {
        name: String,
        inputs: Map<String, Value>,
    },
    /// A `command` node's command and its arguments, expanded; checked against the
    /// command's parameters when its attempt starts, against the commands then in force.
    Command {
        name: String,
        args: Map<String, Value>,
    },
    /// A `command` node resumed after its command was cut off, whose `on_resume` asks the
    /// person: the question put, and the command to run again if the answer says so.
    CommandResumed {
        question: Question,
        command: Box<Resolved>,
    },
    History(HistoryRequest),
}

const DEFAULT_SAMPLE_TOKENS: u32 = 1000;

/// The node error of a template that failed: an exhausted budget is `budget_exceeded`,
/// anything else a template error; `what` names the field.
pub fn template_error(what: &str, error: template::TemplateError) -> NodeError {
    let kind = match error {
        template::TemplateError::Budget { .. } => NodeErrorKind::BudgetExceeded,
        template::TemplateError::Panicked(_) => NodeErrorKind::Panicked,
        template::TemplateError::Failed(_) => NodeErrorKind::Template,
    };
    NodeError::new(kind, format!("{what}: {error}"))
}

fn render(
    templates: &Templates,
    what: &str,
    text: &str,
    ctx: &minijinja::Value,
) -> Result<String, NodeError> {
    if !template::is_template(text) {
        return Ok(text.to_owned());
    }
    templates
        .render(text, ctx)
        .map_err(|e| template_error(what, e))
}

/// Expands the action's templates against `ctx`.
pub fn resolve(
    templates: &Templates,
    action: &ActionDef,
    ctx: &minijinja::Value,
) -> Result<Resolved, NodeError> {
    let render = |what: &str, text: &str| render(templates, what, text, ctx);
    Ok(match action {
        ActionDef::Tool { name, args } => {
            let args = templates
                .expand(args, ctx)
                .map_err(|e| template_error("args", e))?;
            let Value::Object(args) = args else {
                return Err(NodeError::new(
                    NodeErrorKind::Template,
                    "args must expand to an object",
                ));
            };
            Resolved::Tool {
                name: name.clone(),
                args,
            }
        }
        ActionDef::Render { template } => Resolved::Text(render("render", template)?),
        ActionDef::WriteFile {
            path,
            content,
            overwrite,
        } => Resolved::WriteFile {
            path: render("write_file.path", path)?,
            content: render("write_file.content", content)?,
            overwrite: *overwrite,
        },
        ActionDef::Wait { duration } => Resolved::Wait(*duration),
        ActionDef::WaitFor { duration } => {
            let text = render("wait", duration)?;
            let duration = crate::engine::duration::parse_duration(text.trim()).map_err(|e| {
                NodeError::new(
                    NodeErrorKind::Template,
                    format!("wait: `{text}` is not a duration: {e}"),
                )
            })?;
            Resolved::Wait(duration)
        }
        ActionDef::Input {
            message,
            schema,
            default,
        } => Resolved::Input {
            message: render("input.message", message)?,
            schema: expand_form(templates, schema, ctx)?,
            default: default.clone(),
        },
        ActionDef::Sample {
            prompt,
            system,
            max_tokens,
            person,
        } => Resolved::Sample {
            prompt: render("sample.prompt", prompt)?,
            system: system
                .as_deref()
                .map(|s| render("sample.system", s))
                .transpose()?,
            max_tokens: max_tokens.unwrap_or(DEFAULT_SAMPLE_TOKENS),
            person: *person,
        },
        ActionDef::Value { expr, schema } => {
            Resolved::Value(value_of(templates, expr, schema, ctx)?)
        }
        ActionDef::ListDir { path } => Resolved::ListDir(render("list_dir", path)?),
        ActionDef::ReadFile { path, max_bytes } => Resolved::ReadFile {
            path: render("read_file.path", path)?,
            max_bytes: *max_bytes,
        },
        ActionDef::Workflow { name, inputs } => {
            let inputs = templates
                .expand(inputs, ctx)
                .map_err(|e| template_error("workflow.inputs", e))?;
            let Value::Object(inputs) = inputs else {
                return Err(NodeError::new(
                    NodeErrorKind::Template,
                    "workflow.inputs must expand to an object",
                ));
            };
            Resolved::Workflow {
                name: name.clone(),
                inputs,
            }
        }
        ActionDef::Command { name, args } => {
            let args = templates
                .expand(args, ctx)
                .map_err(|e| template_error("command.args", e))?;
            let Value::Object(args) = args else {
                return Err(NodeError::new(
                    NodeErrorKind::Template,
                    "command.args must expand to an object",
                ));
            };
            Resolved::Command {
                name: name.clone(),
                args,
            }
        }
        ActionDef::History {
            workflow,
            limit,
            status,
            filter,
        } => Resolved::History(HistoryRequest {
            workflow: render("history.workflow", workflow)?,
            limit: match limit {
                HistoryLimit::Default => None,
                HistoryLimit::Fixed(n) => Some(*n as usize),
                HistoryLimit::Template(text) => {
                    Some(history_limit(&render("history.limit", text)?)?)
                }
            },
            status: status.clone(),
            // The `where` is evaluated for each earlier run, in the node's context.
            filter: filter.clone().map(|filter| (filter, ctx.clone())),
        }),
    })
}

/// The number a `history` node's templated `limit` rendered to.
/// A number too large for the machine is more than any cap: it fails the node as over its
/// budget, as any limit over the cap does.
fn history_limit(text: &str) -> Result<usize, NodeError> {
    let digits = text.trim();
    let whole = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    match digits.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        Err(_) if whole => Ok(usize::MAX),
        _ => Err(NodeError::new(
            NodeErrorKind::Template,
            format!("history.limit: `{text}` is not a whole number of at least 1"),
        )),
    }
}

/// A `value` node's expression evaluated, and checked against its schema: every misfit is
/// named in the node's error.
fn value_of(
    templates: &Templates,
    expr: &str,
    schema: &Option<Value>,
    ctx: &minijinja::Value,
) -> Result<Value, NodeError> {
    let value = templates
        .eval(expr, ctx)
        .map_err(|e| template_error("value", e))?;
    let Some(schema) = schema else {
        return Ok(value);
    };
    let problems = crate::schema::value_problems(schema, &value);
    if problems.is_empty() {
        return Ok(value);
    }
    let message = format!("the value does not fit its schema: {}", problems.join("; "));
    Err(NodeError::new(NodeErrorKind::Invalid, message))
}

/// An `input` node's form with its templates expanded; choices computed upstream must
/// come out as a non-empty list of strings.
fn expand_form(
    templates: &Templates,
    schema: &Value,
    ctx: &minijinja::Value,
) -> Result<Value, NodeError> {
    if !template::has_template(schema) {
        return Ok(schema.clone());
    }
    let form = templates
        .expand(schema, ctx)
        .map_err(|e| template_error("input.schema", e))?;
    let properties = form["properties"].as_object().into_iter().flatten();
    for (name, property) in properties {
        for key in ["enum", "enumNames"] {
            let Some(choices) = property.get(key) else {
                continue;
            };
            let fits = choices
                .as_array()
                .is_some_and(|items| !items.is_empty() && items.iter().all(Value::is_string));
            if !fits {
                let message = format!(
                    "input.schema: `{name}.{key}` must expand to a non-empty list of strings, \
                     not {choices}"
                );
                return Err(NodeError::new(NodeErrorKind::Template, message));
            }
        }
    }
    Ok(form)
}

/// A `sample` node's answer written by a person where a model would have replied: its
/// output has the shape of a model's reply, with `model: "person"`.
pub(crate) fn sampled_by_person(text: &Value) -> Value {
    serde_json::json!({ "text": text, "model": "person" })
}

/// Puts an `input` or `sample` question to the run's interaction; without one, see
/// [`unanswered`]. (The scheduler performs every other action itself.)
pub async fn ask(env: &ActionEnv, question: &Resolved, asking: Asking) -> Asked {
    let Some(interaction) = &env.interaction else {
        return Asked {
            result: unanswered(question),
            replies: Vec::new(),
        };
    };
    let put = Question::of(question).expect("only `input` and `sample` are questions");
    let mut asked = interaction.put(asking, put).await;
    // A client that cannot answer this kind of question: an `input`'s default stands in.
    if let (
        Err(error),
        Resolved::Input {
            default: Some(default),
            ..
        },
    ) = (&asked.result, question)
        && error.kind == NodeErrorKind::Unsupported
    {
        asked.result = Ok(default.clone());
    }
    asked
}

/// A question nobody is there to answer: an `input` takes its declared default, or fails;
/// a `sample` fails, and so does a resumed `command` that asks.
pub fn unanswered(question: &Resolved) -> Result<Value, NodeError> {
    match question {
        Resolved::Input { default, .. } => default.clone().ok_or_else(|| {
            NodeError::new(
                NodeErrorKind::Unsupported,
                "this node asks the user a question, and no MCP client that can answer is connected",
            )
        }),
        Resolved::CommandResumed { .. } => Err(NodeError::new(
            NodeErrorKind::CommandInterrupted,
            "this node's command was cut off by the end of the process that ran it, and \
             nobody who could say whether it completed is there to ask (its `on_resume` is \
             \"ask\"); the node fails rather than run it again unasked",
        )),
        _ => Err(NodeError::new(
            NodeErrorKind::Unsupported,
            "this node asks the client's model, and no MCP client with a model is connected",
        )),
    }
}
