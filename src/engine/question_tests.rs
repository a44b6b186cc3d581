//! The question type against the JSON runs have stored, who is asked, and the one check.

use super::*;

const INPUT: &str = r#"{"kind":"input","message":"Approve?","schema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}"#;
const SAMPLE: &str = r#"{"kind":"sample","prompt":"Write a line.","system":null,"maxTokens":200}"#;
const SAMPLE_WITH_SYSTEM: &str =
    r#"{"kind":"sample","prompt":"Write a line.","system":"Be brief.","maxTokens":64}"#;
const MODEL_ONLY_SAMPLE: &str =
    r#"{"kind":"sample","prompt":"Write a line.","system":null,"maxTokens":200,"person":false}"#;

fn approve() -> Question {
    serde_json::from_str(INPUT).unwrap()
}

fn sample() -> Question {
    serde_json::from_str(SAMPLE).unwrap()
}

#[test]
fn a_question_stored_as_runs_wrote_it_reads_back_and_is_written_out_the_same() {
    for stored in [INPUT, SAMPLE, SAMPLE_WITH_SYSTEM, MODEL_ONLY_SAMPLE] {
        let question: Question = serde_json::from_str(stored).unwrap();
        assert_eq!(serde_json::to_string(&question).unwrap(), stored);
    }
    assert_eq!(
        approve(),
        Question::Input {
            message: "Approve?".into(),
            schema: serde_json::from_str::<Value>(INPUT).unwrap()["schema"].clone(),
        }
    );
    let Question::Sample {
        system,
        max_tokens,
        person,
        ..
    } = sample()
    else {
        panic!("a sample reads as a sample");
    };
    // A sample stored before `person` lets a person answer, as it did.
    assert_eq!((system, max_tokens, person), (None, 200, true));
    assert!(!sample().model_only());
    assert!(model_only().model_only());
}

fn model_only() -> Question {
    serde_json::from_str(MODEL_ONLY_SAMPLE).unwrap()
}

#[test]
fn a_question_is_built_from_its_resolved_action_as_the_run_records_it() {
    let action = Resolved::Sample {
        prompt: "Write a line.".into(),
        system: None,
        max_tokens: 200,
        person: true,
    };
    let question = Question::of(&action).unwrap();
    assert_eq!(serde_json::to_string(&question).unwrap(), SAMPLE);
    let action = Resolved::Sample {
        prompt: "Write a line.".into(),
        system: None,
        max_tokens: 200,
        person: false,
    };
    let question = Question::of(&action).unwrap();
    assert_eq!(serde_json::to_string(&question).unwrap(), MODEL_ONLY_SAMPLE);
    assert_eq!(Question::of(&Resolved::Text("t".into())), None);
}

#[test]
fn a_sample_goes_to_the_person_only_for_a_client_that_shows_forms_and_has_no_model() {
    let can = |elicitation, sampling| Capabilities {
        elicitation,
        sampling,
    };
    assert_eq!(sample().answerer(can(true, false)), Answerer::Person);
    for (elicitation, sampling) in [(true, true), (false, true), (false, false)] {
        assert_eq!(
            sample().answerer(can(elicitation, sampling)),
            Answerer::Model
        );
    }
    for (elicitation, sampling) in [(true, true), (true, false), (false, true), (false, false)] {
        assert_eq!(
            approve().answerer(can(elicitation, sampling)),
            Answerer::Person
        );
    }
    // Whom a client asks, if it can ask anyone: a client with neither capability asks
    // nobody; one with a model only cannot ask an `input`.
    assert_eq!(can(false, false).asks(&sample()), None);
    assert_eq!(can(false, false).asks(&approve()), None);
    assert_eq!(can(false, true).asks(&approve()), None);
    assert_eq!(can(false, true).asks(&sample()), Some(Answerer::Model));
    assert_eq!(can(true, false).asks(&sample()), Some(Answerer::Person));
    assert_eq!(can(true, true).asks(&sample()), Some(Answerer::Model));
}

#[test]
fn an_answer_that_does_not_fit_its_form_is_asked_again_with_its_problems() {
    let misfit = json!({ "ok": "yes" });
    assert_eq!(
        approve().judge(Answerer::Person, &misfit, 1),
        Verdict::AskAgain(vec!["`ok`: must be a boolean".to_owned()])
    );
    assert_eq!(
        approve().judge(Answerer::Person, &json!({}), ASKED_AT_MOST - 1),
        Verdict::AskAgain(vec!["`ok`: is required".to_owned()])
    );
}

#[test]
fn an_answer_that_does_not_fit_at_the_last_asking_gives_the_question_up() {
    assert_eq!(
        approve().judge(Answerer::Person, &json!({}), ASKED_AT_MOST),
        Verdict::GiveUp(vec!["`ok`: is required".to_owned()])
    );
}

#[test]
fn an_answer_that_fits_is_taken_as_it_is() {
    let answer = json!({ "ok": true });
    assert_eq!(
        approve().judge(Answerer::Person, &answer, 1),
        Verdict::Take(answer)
    );
    let reply = json!({ "text": "Queues decouple.", "model": "m-1" });
    assert_eq!(
        sample().judge(Answerer::Model, &reply, 1),
        Verdict::Take(reply)
    );
}

#[test]
fn a_persons_reply_to_a_sample_must_have_its_text_and_reads_as_a_models() {
    let typed = json!({ "text": "Queues decouple." });
    assert_eq!(
        sample().judge(Answerer::Person, &typed, 1),
        Verdict::Take(json!({ "text": "Queues decouple.", "model": "person" }))
    );
    assert_eq!(
        sample().judge(Answerer::Person, &json!({}), 1),
        Verdict::AskAgain(vec!["`text`: is required".to_owned()])
    );
    let form = sample().form(Answerer::Person).unwrap();
    assert_eq!(form["required"], json!(["text"]));
    assert_eq!(sample().form(Answerer::Model), None);
}

#[test]
fn the_audit_log_names_a_replys_question_kind_key_and_instance_with_what_came_of_it() {
    let answer = json!({ "ok": true });
    let args = approve().audit_args("attempt-1", Some(2), Reply::Answer(&answer));
    assert_eq!(
        Value::Object(args),
        json!({ "kind": "input", "key": "attempt-1", "instance": 2, "answer": { "ok": true } })
    );
    let refused = sample().audit_args("attempt-1.r2", None, Reply::Refused(Refusal::Decline));
    assert_eq!(
        Value::Object(refused),
        json!({ "kind": "sample", "key": "attempt-1.r2", "refusal": "decline" })
    );
    let failed = approve().audit_args("attempt-1", None, Reply::Failed("gone"));
    assert_eq!(failed["error"], "gone");
}

#[test]
fn one_policy_decides_each_reply_its_next_key_and_its_audit_row() {
    use crate::todos::AuditOutcome;
    let question = approve();
    let misfit = json!({});
    let first = question.decide("attempt-2", Some(1), Answerer::Person, Ok(&misfit));
    assert!(matches!(
        &first.decision,
        Decision::AskAgain { next_key, .. } if next_key == "attempt-2.r2"
    ));
    assert_eq!(first.outcome, AuditOutcome::Rejected);
    assert_eq!(first.audit["key"], "attempt-2");
    assert_eq!(first.audit["instance"], 1);
    assert_eq!(first.audit["answer"], misfit);
    let last = question.decide(
        &format!("attempt-2.r{ASKED_AT_MOST}"),
        None,
        Answerer::Person,
        Ok(&misfit),
    );
    assert!(matches!(last.decision, Decision::GiveUp(_)));
    let refused = question.decide("attempt-1", None, Answerer::Person, Err(Refusal::Decline));
    assert_eq!(refused.decision, Decision::Refuse(Refusal::Decline));
    assert_eq!(
        (refused.outcome, &refused.audit["refusal"]),
        (AuditOutcome::Ok, &json!("decline"))
    );
    assert_eq!(asking("attempt-3.r2"), ("attempt-3", 2));
    assert_eq!(next_asking("attempt-3"), "attempt-3.r2");
    assert_eq!(first_asking(4), "attempt-4");
}

#[test]
fn a_model_only_sample_goes_to_the_model_whatever_the_client_can_do_and_never_to_a_person() {
    let can = |elicitation, sampling| Capabilities {
        elicitation,
        sampling,
    };
    for (elicitation, sampling) in [(true, true), (true, false), (false, true), (false, false)] {
        let client = can(elicitation, sampling);
        assert_eq!(model_only().answerer(client), Answerer::Model);
        // Only a client with a model can be asked it: one that shows forms cannot.
        let asked = sampling.then_some(Answerer::Model);
        assert_eq!(client.asks(&model_only()), asked, "{client:?}");
    }
    assert_eq!(model_only().form(Answerer::Person), None);
    assert_eq!(model_only().form(Answerer::Model), None);
}

#[test]
fn a_model_only_sample_takes_a_models_reply_and_refuses_a_persons() {
    let reply = json!({ "text": "A line.", "model": "m" });
    assert_eq!(
        model_only().judge(Answerer::Model, &reply, 1),
        Verdict::Take(reply.clone())
    );
    assert_eq!(
        model_only().judge(Answerer::Person, &json!({ "text": "Mine." }), ASKED_AT_MOST),
        Verdict::GiveUp(vec![MODEL_ONLY.to_owned()])
    );
    assert_eq!(
        model_only().judge(Answerer::Model, &json!("bare text"), 1),
        Verdict::AskAgain(vec![MODEL_SHAPE.to_owned()])
    );
    // A sample a person may answer still takes their text as a model's reply.
    assert_eq!(
        sample().judge(Answerer::Person, &json!({ "text": "Mine." }), 1),
        Verdict::Take(json!({ "text": "Mine.", "model": "person" }))
    );
}
