//! Prompts and completions in the protocol's shapes: the application's prompts
//! (workflows a person starts as a command) listed and given, and the completion of their
//! arguments. A prompt that does not exist, or arguments that do not fit, are the
//! caller's mistake: a JSON-RPC "invalid params" error naming every problem.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams, GetPromptResult,
    Prompt, PromptArgument, PromptMessage, Reference, Role,
};

use crate::app::prompts::PromptDef;
use crate::app::{App, Caller};

/// Every prompt of `app`.
pub(super) fn listed(app: &App) -> Vec<Prompt> {
    app.prompts().into_iter().map(published).collect()
}

fn published(def: PromptDef) -> Prompt {
    let arguments = def
        .arguments
        .into_iter()
        .map(|argument| {
            let mut published = PromptArgument::new(argument.name);
            published.description = Some(argument.description).filter(|d| !d.is_empty());
            published.required = Some(argument.required);
            published
        })
        .collect();
    let mut prompt = Prompt::new(def.name, Some(def.description), Some(arguments));
    prompt.title = Some(def.title);
    prompt
}

/// The messages of the prompt `request` names.
pub(super) fn given(
    app: &App,
    request: &GetPromptRequestParams,
) -> Result<GetPromptResult, McpError> {
    let args = request.arguments.clone().unwrap_or_default();
    let prompt = app
        .prompt(&request.name, &args)
        .map_err(|error| McpError::invalid_params(error.to_string(), None))?;
    let mut result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, prompt.text)]);
    result.description = Some(prompt.description);
    Ok(result)
}

/// The values that complete a prompt's argument or a resource template's variable.
pub(super) fn completed(
    app: &App,
    request: &CompleteRequestParams,
    caller: &Caller,
) -> CompleteResult {
    let (name, typed) = (&request.argument.name, &request.argument.value);
    let values = match &request.r#ref {
        Reference::Prompt(prompt) => app.complete_prompt_argument(&prompt.name, name, typed),
        Reference::Resource(template) => {
            app.complete_template_variable(&template.uri, name, typed, caller)
        }
        _ => Vec::new(),
    };
    let total = values.len();
    let shown: Vec<String> = values
        .into_iter()
        .take(CompletionInfo::MAX_VALUES)
        .collect();
    let mut info = CompletionInfo::new(shown).expect("at most the most values");
    info.total = u32::try_from(total).ok();
    info.has_more = Some(total > CompletionInfo::MAX_VALUES);
    CompleteResult::new(info)
}
