//! Runs as traces. A run is a trace of its own, apart from the request that started it
//! (a run outlives its `tools/call`), and each of its node attempts is a span in it.
//!
//! The shapes, as a tracing UI shows them:
//! - `run {workflow}` (INTERNAL): the run's root span, started with the run, in a new trace,
//!   with a link to the span of the request that started it, when one was traced. Its
//!   context (trace id, span id) is stored with the run as a W3C `traceparent`, the link's
//!   beside it. The root covers the first process's drive of the run: it ends when the
//!   run ends, or when that process stops driving it (it shuts down, or its lease went).
//!   The child run of a `workflow` node has no trace of its own: its root is a child of
//!   the node's attempt span, so that a tree of runs reads as one waterfall.
//! - `run {workflow} (resumed)` (INTERNAL): each later drive of the run, by the process
//!   that took it over (after a crash, its lease run out) or resumed it, or by this one
//!   after a storage failure; a child of the stored root span, in the same trace, linked
//!   to the request span as the root is.
//!   Invariant: every span of a run, in whichever process, has the run's trace id.
//!   A process killed mid-run never ends its drive's span, so after a crash the root (or
//!   the `(resumed)` span of the drive that died) is missing: the drives after it still
//!   name it as their parent, and a tracing UI shows them under a missing parent.
//! - `node {node_id}` (INTERNAL): one attempt of a unit (a node, or one `for_each`
//!   instance), a child of the drive's span. A retry is a new attempt span; the backoff
//!   is the gap between two, and a `retry` event on the failed one says how long. A
//!   repeating node's attempts carry their iteration; a `repeat` event ends an iteration
//!   that runs again.
//! - `question {key}` (INTERNAL): the wait for the answer to an `input` or `sample`
//!   node's question (or a resumed command's), a child of its attempt.
//!
//! Nothing here runs unless the engine was given a [`RunTracer`]: a run without one has
//! no [`RunTrace`], and the scheduler's hooks cost a test of an `Option`.

mod traceparent;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::global::{BoxedSpan, BoxedTracer};
use opentelemetry::trace::{
    Link, Span as _, SpanBuilder, SpanContext, SpanKind, Status, TraceContextExt as _, Tracer as _,
};
use opentelemetry::{Context, KeyValue};

pub(crate) use traceparent::{format as traceparent, parse as parse_traceparent};

/// The attribute names of runs' spans.
pub mod attributes {
    /// The run's id (every span of a run).
    pub const RUN_ID: &str = "mcp_task_server.run.id";
    /// The workflow's name (the run's root and `(resumed)` spans).
    pub const WORKFLOW: &str = "mcp_task_server.workflow.name";
    /// The MCP task id of a run a client started as a task (its root span).
    pub const TASK_ID: &str = "mcp.task.id";
    /// How the run ended (`succeeded`, `failed`, `cancelled`), on the span of the drive
    /// that ended it; `given_up` on a drive that stopped before the run ended.
    pub const RUN_STATUS: &str = "mcp_task_server.run.status";
    /// The node's id (attempt and question spans).
    pub const NODE_ID: &str = "mcp_task_server.node.id";
    /// The attempt's number, from 1, counted over the unit's iterations.
    pub const ATTEMPT: &str = "mcp_task_server.node.attempt";
    /// The `for_each` instance (the item's index), for an attempt of one.
    pub const INSTANCE: &str = "mcp_task_server.node.instance";
    /// The iteration of a repeating node the attempt belongs to, from 1.
    pub const ITERATION: &str = "mcp_task_server.node.iteration";
    /// How the attempt ended: `ok`, `failed`, `timed_out`, `cancelled`, or `abandoned`
    /// (its process stopped driving the run before it ended).
    pub const OUTCOME: &str = "mcp_task_server.node.outcome";
    /// The question's key (a question span).
    pub const QUESTION_KEY: &str = "mcp_task_server.question.key";
    /// What asks: `input`, `sample`, or `command` (a command cut off by a crash).
    pub const QUESTION_KIND: &str = "mcp_task_server.question.kind";
    /// How the wait for an answer ended, as [`OUTCOME`] says it.
    pub const QUESTION_OUTCOME: &str = "mcp_task_server.question.outcome";
    /// The delay before the next attempt (a `retry` event) or iteration (`repeat`), in ms.
    pub const DELAY_MS: &str = "mcp_task_server.delay_ms";
    /// The semantic conventions' error type: a node error's code, or why a run failed.
    pub const ERROR_TYPE: &str = "error.type";
}

use attributes as attr;

/// The tracer runs' spans go to: the process's, once telemetry is on, or a test's own.
#[derive(Clone)]
pub struct RunTracer(Arc<BoxedTracer>);

impl RunTracer {
    pub fn new<T>(tracer: T) -> RunTracer
    where
        T: opentelemetry::trace::Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        RunTracer(Arc::new(BoxedTracer::new(Box::new(tracer))))
    }

    /// The process's tracer, from the provider the telemetry setup installed.
    pub fn global() -> RunTracer {
        RunTracer(Arc::new(super::tracer()))
    }

    fn start(&self, builder: SpanBuilder, parent: &Context) -> BoxedSpan {
        self.0.build_with_context(builder, parent)
    }
}

/// Where a new run's trace hangs from.
#[derive(Clone, Debug, Default)]
pub enum TraceFrom {
    /// Nothing: a run the terminal or the dashboard started. A new trace, unlinked.
    #[default]
    Nothing,
    /// The span of the request that started the run: a new trace, its root linked to it.
    Request(SpanContext),
    /// The attempt span of the `workflow` node that starts the run as its child: the
    /// child's root is a child of it, in its trace.
    Parent(SpanContext),
}

impl TraceFrom {
    /// The span of the request being served where this is called, when one is traced.
    pub fn request() -> TraceFrom {
        if !super::tracing_on() {
            return TraceFrom::Nothing;
        }
        let cx = super::current_context();
        let sc = cx.span().span_context().clone();
        match sc.is_valid() {
            true => TraceFrom::Request(sc),
            false => TraceFrom::Nothing,
        }
    }
}

/// How a run is named: by its span names (`label`: the workflow's name when the operator
/// installed it, else `inline`, so that a client's definition cannot make names without
/// end), and by its attribute (`workflow`: the name it gives itself).
#[derive(Debug, Clone, Copy)]
pub struct RunNames<'a> {
    pub label: &'a str,
    pub workflow: &'a str,
}

/// A unit of a run: a node's index in the plan, and its `for_each` instance.
pub type Unit = (usize, Option<usize>);

/// An attempt as it starts.
pub struct Attempt<'a> {
    pub node: &'a Arc<str>,
    pub number: u32,
    pub instance: Option<usize>,
    /// The iteration it belongs to, when its node repeats.
    pub iteration: Option<u32>,
    /// When it starts: now, or when the backoff it waits first ends.
    pub at: SystemTime,
}

/// How an attempt (or a question's wait) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed,
    TimedOut,
    Cancelled,
    /// Its process stopped driving the run before it ended.
    Abandoned,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled => "cancelled",
            Outcome::Abandoned => "abandoned",
        }
    }
}

/// What follows an attempt that ended: nothing more of it, its retry, or the next
/// iteration of its node, after a delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Nothing,
    Retry(Duration),
    Repeat(Duration),
}

/// An attempt's end: its outcome, its error (the type and the message), what follows.
pub struct AttemptEnd<'a> {
    pub outcome: Outcome,
    pub error: Option<(&'a str, &'a str)>,
    pub next: Next,
}

/// How a drive of a run ended.
pub enum DriveEnd<'a> {
    /// The run ended: its status, and for a failure, its error's type and message.
    Finished {
        status: &'static str,
        error: Option<(&'a str, &'a str)>,
    },
    /// This process stopped driving the run before it ended.
    GivenUp,
}

/// An attempt under way, its span, and its question's while it waits for an answer.
struct Open {
    span: BoxedSpan,
    at: SystemTime,
    question: Option<BoxedSpan>,
}

/// A run's trace in this process: the span of its drive, and the attempts under way.
pub struct RunTrace {
    tracer: RunTracer,
    run_id: Arc<str>,
    /// The run's root span, whose context is stored with the run.
    root: SpanContext,
    /// The request span the root links to, stored beside it.
    link: Option<SpanContext>,
    drive: BoxedSpan,
    drive_cx: Context,
    open: HashMap<Unit, Open>,
    ended: bool,
}

impl RunTrace {
    /// The trace of a new run: its root span starts now.
    pub fn start(
        tracer: &RunTracer,
        names: RunNames<'_>,
        run_id: &Arc<str>,
        task: bool,
        from: &TraceFrom,
    ) -> RunTrace {
        let mut attributes = vec![
            KeyValue::new(attr::RUN_ID, Arc::clone(run_id)),
            KeyValue::new(attr::WORKFLOW, names.workflow.to_owned()),
        ];
        if task {
            attributes.push(KeyValue::new(attr::TASK_ID, Arc::clone(run_id)));
        }
        let builder = SpanBuilder::from_name(format!("run {}", names.label))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes);
        let (builder, parent, link) = match from {
            TraceFrom::Nothing => (builder, Context::new(), None),
            TraceFrom::Request(sc) => (
                builder.with_links(vec![Link::with_context(sc.clone())]),
                Context::new(),
                Some(sc.clone()),
            ),
            TraceFrom::Parent(sc) => (
                builder,
                Context::new().with_remote_span_context(sc.clone()),
                None,
            ),
        };
        let drive = tracer.start(builder, &parent);
        let root = drive.span_context().clone();
        RunTrace::driving(tracer, run_id, root, link, drive)
    }

    /// The trace of a stored run this process drives again: a `(resumed)` span under the
    /// stored root (`stored`, a `traceparent`), linked to the request span the root links
    /// to (`link`). A run stored without a trace (recorded while telemetry was off) starts
    /// one here.
    pub fn resume(
        tracer: &RunTracer,
        names: RunNames<'_>,
        run_id: &Arc<str>,
        stored: Option<&str>,
        link: Option<&str>,
    ) -> RunTrace {
        let root = stored.and_then(parse_traceparent);
        let link = link.and_then(parse_traceparent);
        let builder = SpanBuilder::from_name(format!("run {} (resumed)", names.label))
            .with_kind(SpanKind::Internal)
            .with_attributes([
                KeyValue::new(attr::RUN_ID, Arc::clone(run_id)),
                KeyValue::new(attr::WORKFLOW, names.workflow.to_owned()),
            ]);
        // The root of a run whose first process was killed never arrives, nor its link:
        // each drive links the request again, so that the way from it to the run stays.
        let builder = match &link {
            Some(link) => builder.with_links(vec![Link::with_context(link.clone())]),
            None => builder,
        };
        let parent = match &root {
            Some(root) => Context::new().with_remote_span_context(root.clone()),
            None => Context::new(),
        };
        let drive = tracer.start(builder, &parent);
        let root = root.unwrap_or_else(|| drive.span_context().clone());
        RunTrace::driving(tracer, run_id, root, link, drive)
    }

    fn driving(
        tracer: &RunTracer,
        run_id: &Arc<str>,
        root: SpanContext,
        link: Option<SpanContext>,
        drive: BoxedSpan,
    ) -> RunTrace {
        let drive_cx = Context::new().with_remote_span_context(drive.span_context().clone());
        RunTrace {
            tracer: tracer.clone(),
            run_id: Arc::clone(run_id),
            root,
            link,
            drive,
            drive_cx,
            open: HashMap::new(),
            ended: false,
        }
    }

    /// What the store keeps of the trace: the root's `traceparent`, and the link's.
    pub fn stored(&self) -> (String, Option<String>) {
        (traceparent(&self.root), self.link.as_ref().map(traceparent))
    }

    /// The context of the run's root span.
    pub fn root(&self) -> &SpanContext {
        &self.root
    }

    /// An attempt of `unit` starts (one still open is ended first, abandoned).
    pub fn attempt(&mut self, unit: Unit, attempt: Attempt<'_>) {
        self.end(unit, Outcome::Abandoned, None, Next::Nothing);
        let mut attributes = vec![
            KeyValue::new(attr::RUN_ID, Arc::clone(&self.run_id)),
            KeyValue::new(attr::NODE_ID, Arc::clone(attempt.node)),
            KeyValue::new(attr::ATTEMPT, i64::from(attempt.number)),
        ];
        if let Some(k) = attempt.instance {
            attributes.push(KeyValue::new(attr::INSTANCE, k as i64));
        }
        if let Some(iteration) = attempt.iteration {
            attributes.push(KeyValue::new(attr::ITERATION, i64::from(iteration)));
        }
        let builder = SpanBuilder::from_name(format!("node {}", attempt.node))
            .with_kind(SpanKind::Internal)
            .with_start_time(attempt.at)
            .with_attributes(attributes);
        let span = self.tracer.start(builder, &self.drive_cx);
        let open = Open {
            span,
            at: attempt.at,
            question: None,
        };
        self.open.insert(unit, open);
    }

    /// The open attempt of `unit` asks question `key` and waits for its answer.
    pub fn question(&mut self, unit: Unit, node: &Arc<str>, key: &str, kind: &'static str) {
        let Some(open) = self.open.get_mut(&unit) else {
            return;
        };
        let parent = Context::new().with_remote_span_context(open.span.span_context().clone());
        let builder = SpanBuilder::from_name(format!("question {key}"))
            .with_kind(SpanKind::Internal)
            .with_start_time(open.at.max(SystemTime::now()))
            .with_attributes([
                KeyValue::new(attr::RUN_ID, Arc::clone(&self.run_id)),
                KeyValue::new(attr::NODE_ID, Arc::clone(node)),
                KeyValue::new(attr::QUESTION_KEY, key.to_owned()),
                KeyValue::new(attr::QUESTION_KIND, kind),
            ]);
        let span = self.tracer.start(builder, &parent);
        if let Some(mut earlier) = open.question.replace(span) {
            close(
                &mut earlier,
                attr::QUESTION_OUTCOME,
                Outcome::Abandoned,
                None,
            );
        }
    }

    /// Whether `unit` has an attempt under way.
    pub fn is_open(&self, unit: Unit) -> bool {
        self.open.contains_key(&unit)
    }

    /// The context of `unit`'s attempt under way: the parent of the child run it starts.
    pub fn attempt_context(&self, unit: Unit) -> Option<SpanContext> {
        (self.open.get(&unit)).map(|open| open.span.span_context().clone())
    }

    /// The attempt of `unit` under way ended (nothing if none is).
    pub fn attempt_ended(&mut self, unit: Unit, end: AttemptEnd<'_>) {
        self.end(unit, end.outcome, end.error, end.next);
    }

    fn end(&mut self, unit: Unit, outcome: Outcome, error: Option<(&str, &str)>, next: Next) {
        let Some(mut open) = self.open.remove(&unit) else {
            return;
        };
        if let Some(mut question) = open.question.take() {
            close(&mut question, attr::QUESTION_OUTCOME, outcome, error);
        }
        let span = &mut open.span;
        match next {
            Next::Nothing => {}
            Next::Retry(delay) => span.add_event("retry", vec![delay_ms(delay)]),
            Next::Repeat(delay) => span.add_event("repeat", vec![delay_ms(delay)]),
        }
        close(span, attr::OUTCOME, outcome, error);
    }

    /// This process's drive of the run ended: the attempts still under way are
    /// abandoned (or cancelled, when the run ended), and the drive's span ends.
    pub fn finish(mut self, end: DriveEnd<'_>) {
        self.close_drive(end);
    }

    fn close_drive(&mut self, end: DriveEnd<'_>) {
        if self.ended {
            return;
        }
        self.ended = true;
        let left = match end {
            DriveEnd::Finished { .. } => Outcome::Cancelled,
            DriveEnd::GivenUp => Outcome::Abandoned,
        };
        let units: Vec<Unit> = self.open.keys().copied().collect();
        for unit in units {
            self.end(unit, left, None, Next::Nothing);
        }
        match end {
            DriveEnd::Finished { status, error } => {
                self.drive
                    .set_attribute(KeyValue::new(attr::RUN_STATUS, status));
                if let Some((kind, message)) = error {
                    self.drive
                        .set_attribute(KeyValue::new(attr::ERROR_TYPE, kind.to_owned()));
                    self.drive.set_status(Status::error(message.to_owned()));
                }
            }
            DriveEnd::GivenUp => {
                (self.drive).set_attribute(KeyValue::new(attr::RUN_STATUS, "given_up"));
            }
        }
        self.drive.end();
    }
}

impl Drop for RunTrace {
    /// A drive dropped without its end said (its task cut short as the runtime shuts
    /// down, or its scheduler panicked) was given up.
    fn drop(&mut self) {
        self.close_drive(DriveEnd::GivenUp);
    }
}

fn delay_ms(delay: Duration) -> KeyValue {
    KeyValue::new(
        attr::DELAY_MS,
        i64::try_from(delay.as_millis()).unwrap_or(i64::MAX),
    )
}

/// Ends an attempt's or a question's span with its outcome, and its error as the span's.
fn close(span: &mut BoxedSpan, key: &'static str, outcome: Outcome, error: Option<(&str, &str)>) {
    span.set_attribute(KeyValue::new(key, outcome.as_str()));
    if let (Outcome::Failed | Outcome::TimedOut, Some((kind, message))) = (outcome, error) {
        span.set_attribute(KeyValue::new(attr::ERROR_TYPE, kind.to_owned()));
        span.set_status(Status::error(message.to_owned()));
    }
    span.end();
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{SpanId, TracerProvider as _};
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};

    use super::*;

    fn tracer() -> (RunTracer, InMemorySpanExporter, SdkTracerProvider) {
        let spans = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        (RunTracer::new(provider.tracer("test")), spans, provider)
    }

    const NAMES: RunNames<'static> = RunNames {
        label: "w",
        workflow: "w",
    };

    #[test]
    fn a_stored_trace_that_does_not_read_starts_a_trace_of_the_drive_rather_than_failing_it() {
        let (tracer, spans, _provider) = tracer();
        let run_id: Arc<str> = Arc::from("run-1");
        for stored in ["", "not a traceparent", "00-zz-zz-01", "\u{0}"] {
            let trace = RunTrace::resume(&tracer, NAMES, &run_id, Some(stored), Some(stored));
            let (parent, link) = trace.stored();
            assert!(parse_traceparent(&parent).is_some(), "{parent}");
            assert_eq!(link, None, "a link that does not read is dropped");
            trace.finish(DriveEnd::GivenUp);
        }
        let finished = spans.get_finished_spans().unwrap();
        assert_eq!(finished.len(), 4);
        for span in finished {
            assert_eq!(span.name, "run w (resumed)");
            assert_eq!(span.parent_span_id, SpanId::INVALID, "a root of its own");
        }
    }

    #[test]
    fn a_drive_dropped_mid_attempt_ends_its_spans_as_abandoned() {
        let (tracer, spans, _provider) = tracer();
        let run_id: Arc<str> = Arc::from("run-2");
        let node: Arc<str> = Arc::from("ask");
        let mut trace = RunTrace::start(&tracer, NAMES, &run_id, false, &TraceFrom::Nothing);
        let attempt = Attempt {
            node: &node,
            number: 1,
            instance: Some(3),
            iteration: None,
            at: SystemTime::now(),
        };
        trace.attempt((0, Some(3)), attempt);
        trace.question((0, Some(3)), &node, "attempt-1", "input");
        drop(trace);
        let finished = spans.get_finished_spans().unwrap();
        let outcome = |name: &str, key: &str| {
            let span = finished.iter().find(|s| s.name == name).expect(name);
            let kv = span.attributes.iter().find(|kv| kv.key.as_str() == key);
            kv.map(|kv| kv.value.as_str().into_owned())
        };
        assert_eq!(
            outcome("question attempt-1", attr::QUESTION_OUTCOME).as_deref(),
            Some("abandoned")
        );
        assert_eq!(
            outcome("node ask", attr::OUTCOME).as_deref(),
            Some("abandoned")
        );
        assert_eq!(outcome("node ask", attr::INSTANCE).as_deref(), Some("3"));
        assert_eq!(
            outcome("run w", attr::RUN_STATUS).as_deref(),
            Some("given_up")
        );
    }
}
