//! Runs as traces, caught by an in-memory exporter: the spans of a run, their parents,
//! links and attributes, as a tracing backend would receive them (`telemetry/runs.rs`).

use std::time::Duration;

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::{Map, json};

use super::{App, Caller, Config};
use crate::engine::RunOptions;
use crate::engine::report::{RunReport, RunStatus};
use crate::telemetry::runs::{RunTracer, TraceFrom, attributes as attr};

/// An application on a database in memory whose runs are traced into memory, with the
/// workflows given installed.
struct Traced {
    app: App,
    spans: InMemorySpanExporter,
    _provider: SdkTracerProvider,
    _dir: tempfile::TempDir,
}

impl Traced {
    fn new(workflows: &[(&str, &str)]) -> Traced {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("workflows");
        std::fs::create_dir(&folder).unwrap();
        for (name, toml) in workflows {
            std::fs::write(folder.join(format!("{name}.toml")), toml).unwrap();
        }
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        let mut config = Config::new(":memory:", workspace);
        config.workflows = Some(folder);
        let spans = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let tracer = RunTracer::new(provider.tracer("test"));
        let app = App::open(&config).unwrap().with_run_tracer(tracer);
        Traced {
            app,
            spans,
            _provider: provider,
            _dir: dir,
        }
    }

    fn start(&self, workflow: &str, trace: TraceFrom) -> crate::engine::RunHandle {
        let entry = self.app.workflows().get(workflow).expect("installed");
        let options = RunOptions {
            record: true,
            park_questions: true,
            trace,
            ..RunOptions::default()
        };
        (self.app.engine()).start(entry.plan.clone(), Map::new(), options)
    }

    async fn run(&self, workflow: &str) -> RunReport {
        self.start(workflow, TraceFrom::Nothing).join.await.unwrap()
    }

    fn spans(&self) -> Vec<SpanData> {
        self.spans.get_finished_spans().unwrap()
    }
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|span| span.name == name).collect()
}

fn one<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one `{name}` among {:#?}", names(spans));
    found[0]
}

fn names(spans: &[SpanData]) -> Vec<&str> {
    spans.iter().map(|span| &*span.name).collect()
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    (span.attributes.iter())
        .find(|kv: &&KeyValue| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn int(span: &SpanData, key: &str) -> Option<i64> {
    match attribute(span, key) {
        Some(Value::I64(n)) => Some(*n),
        _ => None,
    }
}

fn text(span: &SpanData, key: &str) -> Option<String> {
    attribute(span, key).map(|value| value.as_str().into_owned())
}

fn is_child_of(span: &SpanData, parent: &SpanData) -> bool {
    span.span_context.trace_id() == parent.span_context.trace_id()
        && span.parent_span_id == parent.span_context.span_id()
}

/// A node whose attempts all time out, retried once, and a node after it.
const FLAKY: &str = r#"
name = "flaky"
[nodes.flaky]
wait = "5s"
timeout = "30ms"
retry = { max_attempts = 2, initial_delay = "60ms", factor = 1.0 }
on_failure = "continue"
[nodes.after]
value = "1"
needs = ["flaky"]
trigger = "all_done"
"#;

#[tokio::test]
async fn a_retried_node_is_an_attempt_span_each_under_the_run_root_the_failed_ones_errors() {
    let t = Traced::new(&[("flaky", FLAKY)]);
    let report = t.run("flaky").await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let spans = t.spans();
    let root = one(&spans, "run flaky");
    assert_eq!(
        root.parent_span_id,
        SpanId::INVALID,
        "the run is a trace of its own"
    );
    assert_eq!(root.span_kind, SpanKind::Internal);
    assert_eq!(text(root, attr::RUN_ID).as_deref(), Some(&*report.run_id));
    assert_eq!(text(root, attr::WORKFLOW).as_deref(), Some("flaky"));
    assert_eq!(text(root, attr::RUN_STATUS).as_deref(), Some("succeeded"));
    let mut attempts = named(&spans, "node flaky");
    attempts.sort_by_key(|span| int(span, attr::ATTEMPT));
    assert_eq!(attempts.len(), 2, "{:#?}", names(&spans));
    for (number, attempt) in attempts.iter().enumerate() {
        assert!(is_child_of(attempt, root), "{attempt:#?}");
        assert_eq!(int(attempt, attr::ATTEMPT), Some(number as i64 + 1));
        assert_eq!(text(attempt, attr::NODE_ID).as_deref(), Some("flaky"));
        assert_eq!(text(attempt, attr::OUTCOME).as_deref(), Some("timed_out"));
        assert_eq!(text(attempt, attr::ERROR_TYPE).as_deref(), Some("timeout"));
        assert!(
            matches!(attempt.status, Status::Error { .. }),
            "{attempt:#?}"
        );
    }
    let (first, second) = (attempts[0], attempts[1]);
    let retry = (first.events.iter())
        .find(|event| event.name == "retry")
        .expect("the retried attempt says when the next one comes");
    let delay = (retry.attributes.iter())
        .find(|kv| kv.key.as_str() == attr::DELAY_MS)
        .map(|kv| kv.value.clone());
    assert!(matches!(delay, Some(Value::I64(ms)) if ms > 0), "{retry:?}");
    assert!(
        second.events.iter().all(|event| event.name != "retry"),
        "the last attempt is not retried"
    );
    assert!(
        second.start_time >= first.end_time,
        "the backoff is the gap between them"
    );
    let after = one(&spans, "node after");
    assert!(is_child_of(after, root));
    assert_eq!(text(after, attr::OUTCOME).as_deref(), Some("ok"));
    assert_eq!(after.status, Status::Unset);
}

const ASKS: &str = r#"
name = "asks"
[nodes.ask]
input = { message = "Which colour?", schema = { type = "object", properties = { colour = { type = "string" } } } }
[nodes.after]
value = "nodes.ask.output.colour"
needs = ["ask"]
"#;

#[tokio::test]
async fn the_wait_for_an_answer_is_a_question_span_under_its_attempt() {
    let t = Traced::new(&[("asks", ASKS)]);
    let handle = t.start("asks", TraceFrom::Nothing);
    let answer = json!({ "colour": "green" });
    let asked_at = loop {
        let answered =
            (t.app).answer_question(&handle.run_id, ("ask", None), &answer, &Caller::default());
        if answered.is_ok() {
            break std::time::SystemTime::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let report = handle.join.await.unwrap();
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let spans = t.spans();
    let root = one(&spans, "run asks");
    let attempt = one(&spans, "node ask");
    let question = one(&spans, "question attempt-1");
    assert!(is_child_of(attempt, root));
    assert!(is_child_of(question, attempt), "{question:#?}");
    assert_eq!(
        text(question, attr::QUESTION_KEY).as_deref(),
        Some("attempt-1")
    );
    assert_eq!(
        text(question, attr::QUESTION_KIND).as_deref(),
        Some("input")
    );
    assert_eq!(
        text(question, attr::QUESTION_OUTCOME).as_deref(),
        Some("ok")
    );
    assert!(question.start_time <= asked_at && asked_at <= question.end_time);
    assert!(attempt.start_time <= question.start_time && question.end_time <= attempt.end_time);
}

const COUNTS: &str = r#"
name = "counts"
[nodes.count]
value = "repeat.iteration"
repeat = { until = "output == 3", max = 5, delay = "20ms" }
"#;

#[tokio::test]
async fn each_iteration_of_a_repeated_node_is_an_attempt_span_that_says_its_iteration() {
    let t = Traced::new(&[("counts", COUNTS)]);
    let report = t.run("counts").await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let spans = t.spans();
    let mut attempts = named(&spans, "node count");
    attempts.sort_by_key(|span| int(span, attr::ITERATION));
    let iterations: Vec<_> = (attempts.iter())
        .map(|span| (int(span, attr::ITERATION), int(span, attr::ATTEMPT)))
        .collect();
    assert_eq!(
        iterations,
        [(Some(1), Some(1)), (Some(2), Some(2)), (Some(3), Some(3))]
    );
    for (k, attempt) in attempts.iter().enumerate() {
        let repeats = attempt.events.iter().any(|event| event.name == "repeat");
        assert_eq!(repeats, k < 2, "only an iteration that runs again says so");
        assert_eq!(text(attempt, attr::OUTCOME).as_deref(), Some("ok"));
    }
}

const INNER: &str = r#"
name = "inner"
[nodes.deep]
value = "2"
"#;

const OUTER: &str = r#"
name = "outer"
[nodes.call]
workflow = "inner"
"#;

#[tokio::test]
async fn a_child_workflows_run_hangs_under_the_attempt_of_the_node_that_started_it() {
    let t = Traced::new(&[("inner", INNER), ("outer", OUTER)]);
    let report = t.run("outer").await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let spans = t.spans();
    let root = one(&spans, "run outer");
    let call = one(&spans, "node call");
    let child = one(&spans, "run inner");
    let deep = one(&spans, "node deep");
    assert!(is_child_of(call, root));
    assert!(is_child_of(child, call), "{child:#?}");
    assert!(is_child_of(deep, child));
    assert_ne!(text(child, attr::RUN_ID), text(root, attr::RUN_ID));
}

#[tokio::test]
async fn a_run_a_request_started_is_a_new_trace_linked_to_the_request_span_and_stored() {
    let t = Traced::new(&[("counts", COUNTS)]);
    let request = SpanContext::new(
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    let handle = t.start("counts", TraceFrom::Request(request.clone()));
    let run_id = handle.run_id.clone();
    handle.join.await.unwrap();
    let spans = t.spans();
    let root = one(&spans, "run counts");
    assert_ne!(root.span_context.trace_id(), request.trace_id());
    let links: Vec<_> = root
        .links
        .iter()
        .map(|link| link.span_context.clone())
        .collect();
    assert_eq!(links.len(), 1);
    assert_eq!(links[0].trace_id(), request.trace_id());
    assert_eq!(links[0].span_id(), request.span_id());
    use crate::engine::journal::Journal as _;
    let stored = t.app.registry().load(&run_id).unwrap();
    let expected = format!(
        "00-{:032x}-{:016x}-01",
        root.span_context.trace_id(),
        root.span_context.span_id()
    );
    assert_eq!(stored.trace_parent.as_deref(), Some(expected.as_str()));
    assert_eq!(
        stored.trace_link.as_deref(),
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    );
}

#[tokio::test]
async fn a_resumed_run_goes_on_in_its_stored_trace_under_a_resumed_span() {
    let t = Traced::new(&[("asks", ASKS)]);
    let first = t.start("asks", TraceFrom::Nothing);
    let run_id = first.run_id.clone();
    // The first drive stops mid-question as a process shutting down stops it (its task
    // dropped), and the run is driven on from what was stored.
    while t.app.open_questions(&run_id).unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.join.abort();
    assert!(first.join.await.unwrap_err().is_cancelled());
    let options = RunOptions {
        park_questions: true,
        ..RunOptions::default()
    };
    let resumed = t.app.engine().resume(&run_id, options).unwrap();
    while (t.app)
        .answer_question(
            &run_id,
            ("ask", None),
            &json!({ "colour": "red" }),
            &Caller::default(),
        )
        .is_err()
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = resumed.join.await.unwrap();
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let spans = t.spans();
    let root = one(&spans, "run asks");
    assert_eq!(text(root, attr::RUN_STATUS).as_deref(), Some("given_up"));
    let again = one(&spans, "run asks (resumed)");
    assert!(is_child_of(again, root), "{again:#?}");
    assert_eq!(text(again, attr::RUN_STATUS).as_deref(), Some("succeeded"));
    let mut asked = named(&spans, "node ask");
    asked.sort_by_key(|span| span.start_time);
    assert_eq!(asked.len(), 2, "{:#?}", names(&spans));
    assert!(is_child_of(asked[0], root));
    assert_eq!(text(asked[0], attr::OUTCOME).as_deref(), Some("abandoned"));
    assert!(is_child_of(asked[1], again));
    assert_eq!(text(asked[1], attr::OUTCOME).as_deref(), Some("ok"));
    assert!(is_child_of(one(&spans, "node after"), again));
}

#[tokio::test]
async fn a_direct_call_of_a_todo_tool_is_no_trace_of_its_own() {
    let t = Traced::new(&[]);
    let args = json!({ "title": "milk" });
    let serde_json::Value::Object(args) = args else {
        unreachable!()
    };
    let result = t.app.call_todo("add_task", args, &Caller::default()).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(t.spans().is_empty(), "{:#?}", names(&t.spans()));
}

#[tokio::test]
async fn a_clients_own_definition_names_its_spans_inline_and_its_attribute_by_its_name() {
    use std::sync::Arc;

    use crate::engine::loader;
    use crate::engine::plan::Plan;

    let t = Traced::new(&[]);
    let toml = "[nodes.one]\nvalue = \"1\"\n";
    let definition = loader::parse_toml("made_up.toml", "made_up_name", toml).unwrap();
    let plan = Arc::new(Plan::new(Arc::new(definition)));
    let options = RunOptions {
        record: true,
        ..RunOptions::default()
    };
    let handle = t.app.engine().start(plan, Map::new(), options);
    handle.join.await.unwrap();
    let spans = t.spans();
    let root = one(&spans, "run inline");
    assert_eq!(text(root, attr::WORKFLOW).as_deref(), Some("made_up_name"));
    assert!(named(&spans, "run made_up_name").is_empty());
}
