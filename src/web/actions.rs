//! The actions on a run: answer an open question from its form, cancel, retry; each the
//! application's own run operation, and cancel and retry audited as calls.

use http::Response;

use super::format::failed;
use super::run::run_page;
use super::{Body, form, see_other};
use crate::app::{App, Caller, Restart, RunError};
use crate::engine::RunOptions;
use crate::runs::QuestionView;

/// `POST /runs/{id}/answer`: answers a node's open question from its form.
pub(super) fn answer(
    app: &App,
    caller: &Caller,
    run_id: &str,
    posted: &[(String, String)],
) -> Response<Body> {
    let field = |name: &str| {
        posted
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let node = field("node").unwrap_or_default();
    let instance = field("instance").and_then(|i| i.parse::<usize>().ok());
    let run = match app.get_run(run_id, caller) {
        Ok(run) => run,
        Err(error) => return failed(&error),
    };
    if run.status != "running" {
        let ended = RunError::Finished {
            run_id: run_id.to_owned(),
            status: run.status.clone(),
        };
        return run_page(
            app,
            caller,
            run_id,
            None,
            Some((node, &[ended.to_string()])),
        );
    }
    let question = run
        .open_questions()
        .filter(|q| q.node.as_deref() == Some(node) && q.instance() == instance)
        .last()
        .and_then(QuestionView::question);
    let Some(question) = question else {
        return run_page(
            app,
            caller,
            run_id,
            None,
            Some((
                node,
                &["this question is answered already, or was never asked".to_owned()],
            )),
        );
    };
    let answer = match form::posted_answer(&question, posted) {
        Ok(answer) => answer,
        Err(problems) => return run_page(app, caller, run_id, None, Some((node, &problems))),
    };
    match app.answer_question(run_id, (node, instance), &answer, caller) {
        Ok(_) => see_other(&format!("/runs/{run_id}?done=answered")),
        Err(RunError::Answer(error)) => run_page(
            app,
            caller,
            run_id,
            None,
            Some((node, &[error.to_string()])),
        ),
        Err(error) => failed(&error),
    }
}

/// `POST /runs/{id}/cancel`.
pub(super) async fn cancel(app: &App, caller: &Caller, run_id: &str) -> Response<Body> {
    match app.cancel_run(run_id, caller).await {
        Ok(_) => see_other(&format!("/runs/{run_id}?done=cancelled")),
        Err(error) => failed(&error),
    }
}

/// `POST /runs/{id}/retry`: a new run that keeps what succeeded, driven by this process.
pub(super) fn retry(app: &App, caller: &Caller, run_id: &str) -> Response<Body> {
    match app.restart_run(run_id, Restart::Retry, RunOptions::default(), caller) {
        Ok(handle) => see_other(&format!("/runs/{}?done=retried", handle.run_id)),
        Err(error) => failed(&error),
    }
}
