//! Workflows as prompts: each workflow exposed as a tool is also a prompt, which a client
//! shows a person as a command to start. Its arguments are the workflow's inputs (a string
//! as it is; any other type as optional JSON text), and its message tells the model what
//! the workflow does, its phases, the arguments given, and to draft what it can and pass
//! it up front, leaving the person to confirm the rest as the run asks.

use serde_json::{Map, Value};

use super::App;
use crate::engine::definition::{InputDef, ValueType, WorkflowDef};

/// A prompt as the listing shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PromptDef {
    pub name: String,
    pub title: String,
    pub description: String,
    pub arguments: Vec<PromptArg>,
}

/// One argument of a prompt: one input of its workflow.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PromptArg {
    pub name: String,
    pub description: String,
    pub required: bool,
}

/// A prompt's messages, once its arguments are read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PromptText {
    pub description: String,
    /// The one message, from the user.
    pub text: String,
}

/// Why a prompt was not given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum PromptError {
    #[error("no prompt named `{0}`")]
    Unknown(String),
    #[error("{}", .0.join("; "))]
    Arguments(Vec<String>),
}

impl App {
    /// Every prompt, in the order of the tools.
    pub(crate) fn prompts(&self) -> Vec<PromptDef> {
        self.prompt_workflows().map(prompt_def).collect()
    }

    /// The messages of prompt `name` with `args` (text values, as prompts take them); every
    /// problem of the arguments at once.
    pub(crate) fn prompt(
        &self,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<PromptText, PromptError> {
        let def = self
            .prompt_workflows()
            .find(|def| def.name == name)
            .ok_or_else(|| PromptError::Unknown(name.to_owned()))?;
        let given = given_inputs(def, args)?;
        Ok(PromptText {
            description: def.description.clone(),
            text: message(def, &given),
        })
    }

    /// The values argument `argument` of prompt `prompt` may take that start with `typed`:
    /// an input's allowed values, or `true` and `false` for a boolean one.
    pub(crate) fn complete_prompt_argument(
        &self,
        prompt: &str,
        argument: &str,
        typed: &str,
    ) -> Vec<String> {
        let Some(def) = self.prompt_workflows().find(|def| def.name == prompt) else {
            return Vec::new();
        };
        let Some(input) = def.inputs.get(argument) else {
            return Vec::new();
        };
        let values: Vec<String> = match (&input.choices, input.kind) {
            (Some(choices), _) => choices.iter().map(text_of).collect(),
            (None, ValueType::Boolean) => vec!["true".to_owned(), "false".to_owned()],
            (None, _) => Vec::new(),
        };
        values
            .into_iter()
            .filter(|value| value.starts_with(typed))
            .collect()
    }

    /// The workflows that are prompts: those published as tools of their own.
    fn prompt_workflows(&self) -> impl Iterator<Item = &WorkflowDef> {
        let tools = self.published_tools();
        self.workflows()
            .entries()
            .map(|entry| entry.def.as_ref())
            .filter(move |def| {
                def.expose_as_tool
                    && tools
                        .get(&def.name)
                        .is_some_and(|tool| tool.route == super::Route::RunWorkflow)
            })
    }
}

fn prompt_def(def: &WorkflowDef) -> PromptDef {
    PromptDef {
        name: def.name.clone(),
        title: title_of(&def.name),
        description: def.description.clone(),
        arguments: def
            .inputs
            .iter()
            .map(|(name, input)| argument(name, input))
            .collect(),
    }
}

fn argument(name: &str, input: &InputDef) -> PromptArg {
    let mut description = input.description.clone();
    if input.kind != ValueType::String {
        let note = format!("As JSON: a {}.", input.kind.name());
        description = match description.is_empty() {
            true => note,
            false => format!("{description} {note}"),
        };
    }
    PromptArg {
        name: name.to_owned(),
        description,
        // A structured input is never required of a person typing a command: the model
        // drafts it, or the run asks for it.
        required: input.required && input.kind == ValueType::String && input.default.is_none(),
    }
}

/// The inputs the arguments give, each as its type wants it.
fn given_inputs(
    def: &WorkflowDef,
    args: &Map<String, Value>,
) -> Result<Map<String, Value>, PromptError> {
    let mut problems = Vec::new();
    let mut given = Map::new();
    for (name, value) in args {
        let Some(input) = def.inputs.get(name) else {
            problems.push(format!("`{name}`: not an argument of `{}`", def.name));
            continue;
        };
        let Some(text) = value.as_str() else {
            problems.push(format!("`{name}`: a prompt argument is text"));
            continue;
        };
        if text.is_empty() {
            continue;
        }
        let value = match input.kind {
            ValueType::String => Value::String(text.to_owned()),
            kind => match serde_json::from_str::<Value>(text) {
                Ok(value) => value,
                Err(error) => {
                    problems.push(format!("`{name}`: not JSON for a {}: {error}", kind.name()));
                    continue;
                }
            },
        };
        given.insert(name.clone(), value);
    }
    for (name, input) in &def.inputs {
        let required = argument(name, input).required;
        if required && !given.contains_key(name) {
            problems.push(format!("`{name}`: required"));
        }
    }
    match problems.is_empty() {
        true => Ok(given),
        false => Err(PromptError::Arguments(problems)),
    }
}

/// The message a prompt gives: what to run, its phases, the arguments, and how to go about it.
fn message(def: &WorkflowDef, given: &Map<String, Value>) -> String {
    let mut text = format!(
        "Run the workflow `{name}` with the tool `{name}`. ",
        name = def.name
    );
    match &def.prompt {
        // The workflow's own words, which say what it does better than its description.
        Some(prompt) => {
            text.push_str(prompt.trim_end());
            text.push('\n');
        }
        None => {
            text.push_str(&def.description);
            text.push('\n');
        }
    }
    let mut phases: Vec<&str> = Vec::new();
    for phase in def.nodes.values().filter_map(|node| node.phase.as_deref()) {
        if !phases.contains(&phase) {
            phases.push(phase);
        }
    }
    if !phases.is_empty() {
        text.push_str(&format!(
            "\nIt goes in {} phases: {}.\n",
            phases.len(),
            phases.join(", ")
        ));
    }
    if given.is_empty() {
        text.push_str("\nNo argument was given.\n");
    } else {
        text.push_str("\nThe arguments given:\n");
        for (name, value) in given {
            text.push_str(&format!("- `{name}`: {value}\n"));
        }
    }
    let others: Vec<&str> = def
        .inputs
        .keys()
        .filter(|name| !given.contains_key(*name))
        .map(String::as_str)
        .collect();
    text.push_str("\nPass these as the tool's inputs. ");
    if !others.is_empty() {
        text.push_str(&format!(
            "Of its other inputs ({}), draft what our conversation already answers and pass \
             it up front; leave out what it does not. ",
            others.join(", ")
        ));
    }
    text.push_str(
        "The run asks the person to confirm or complete the rest as it goes: do not invent \
         answers for them.",
    );
    text
}

/// `interactive_adr_planning` → `Interactive ADR planning`: the name, as a title.
fn title_of(name: &str) -> String {
    let words: Vec<String> = name
        .split('_')
        .enumerate()
        .map(|(i, word)| match word {
            "adr" => "ADR".to_owned(),
            word if i == 0 => {
                let mut chars = word.chars();
                chars
                    .next()
                    .map_or(String::new(), |c| c.to_uppercase().chain(chars).collect())
            }
            word => word.to_owned(),
        })
        .collect();
    words.join(" ")
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn every_workflow_exposed_as_a_tool_is_a_prompt_with_its_inputs_as_arguments() {
        let app = App::in_memory();
        let prompts = app.prompts();
        let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
        assert!(names.contains(&"interactive_adr_planning"), "{names:?}");
        let readiness = prompts
            .iter()
            .find(|p| p.name == "deployment_readiness")
            .unwrap();
        assert_eq!(readiness.title, "Deployment readiness");
        let version = readiness
            .arguments
            .iter()
            .find(|a| a.name == "version")
            .unwrap();
        assert!(
            version.required,
            "a required string input is a required argument"
        );
        let checks = readiness
            .arguments
            .iter()
            .find(|a| a.name == "checks")
            .unwrap();
        assert!(!checks.required);
        assert!(
            checks.description.ends_with("As JSON: a array."),
            "{}",
            checks.description
        );
    }

    #[test]
    fn a_prompts_message_names_its_phases_its_arguments_and_what_to_draft() {
        let app = App::in_memory();
        let given = args(json!({"title": "Queue", "problem": "Which queue?"}));
        let prompt = app.prompt("interactive_adr_planning", &given).unwrap();
        assert!(
            prompt
                .text
                .contains("with the tool `interactive_adr_planning`"),
            "{}",
            prompt.text
        );
        assert!(
            prompt
                .text
                .contains("It goes in 7 phases: problem_definition, research_analysis"),
            "{}",
            prompt.text
        );
        assert!(
            prompt.text.contains("- `problem`: \"Which queue?\""),
            "{}",
            prompt.text
        );
        assert!(
            prompt
                .text
                .contains("draft what our conversation already answers"),
            "{}",
            prompt.text
        );
    }

    #[test]
    fn an_argument_with_allowed_values_completes_to_those_that_start_as_typed() {
        let app = App::in_memory();
        let statuses = app.complete_prompt_argument("interactive_adr_planning", "status", "");
        assert!(statuses.len() > 1, "{statuses:?}");
        let first = &statuses[0];
        let typed = &first[..1];
        let completed = app.complete_prompt_argument("interactive_adr_planning", "status", typed);
        assert!(completed.iter().all(|s| s.starts_with(typed)) && completed.contains(first));
        assert!(
            app.complete_prompt_argument("interactive_adr_planning", "title", "")
                .is_empty()
        );
        assert!(
            app.complete_prompt_argument("no_such", "status", "")
                .is_empty()
        );
    }

    #[test]
    fn a_workflow_that_writes_its_own_prompt_is_started_with_its_words() {
        let app = App::in_memory();
        let given = args(json!({"title": "Queue"}));
        let prompt = app.prompt("interactive_adr_planning", &given).unwrap();
        let own = app
            .workflows()
            .get("interactive_adr_planning")
            .unwrap()
            .def
            .prompt
            .clone();
        let own = own.expect("the ADR planner writes its own prompt");
        assert!(prompt.text.contains(own.trim_end()), "{}", prompt.text);
        assert!(
            !prompt.text.contains(
                &app.workflows()
                    .get("interactive_adr_planning")
                    .unwrap()
                    .def
                    .description
            )
        );
        assert!(
            prompt.text.contains("- `title`: \"Queue\""),
            "{}",
            prompt.text
        );
    }

    #[test]
    fn a_prompts_arguments_are_checked_and_every_problem_named() {
        let app = App::in_memory();
        let given = args(json!({"checks": "[not json", "nope": "x"}));
        let Err(PromptError::Arguments(problems)) = app.prompt("deployment_readiness", &given)
        else {
            panic!("refused")
        };
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems[0].starts_with("`checks`: not JSON for a array"),
            "{problems:?}"
        );
        assert_eq!(
            problems[1],
            "`nope`: not an argument of `deployment_readiness`"
        );
        assert_eq!(problems[2], "`version`: required");
        assert_eq!(
            app.prompt("no_such", &Map::new()),
            Err(PromptError::Unknown("no_such".to_owned()))
        );
    }
}
