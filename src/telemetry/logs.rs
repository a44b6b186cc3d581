//! Logs and traces together: each log line written while a span is current ends with that
//! span's `trace_id` and `span_id`, so that a line found in the logs leads to its trace,
//! and the crate's own `tracing` spans become OpenTelemetry spans when spans are exported.
//!
//! Invariant: the ids are those of `opentelemetry::Context::current()`, the context an MCP
//! request's handler runs in (`server/observed.rs`); without a span (telemetry off, or a
//! line outside any request) a line is written exactly as before.

use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing::{Event, Metadata, Subscriber};
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::filter::{FilterFn, Filtered};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::Layer as _;
use tracing_subscriber::registry::LookupSpan;

/// The layer that exports the crate's own `tracing` spans, and only those: the spans of
/// the libraries underneath (rmcp's session, for one) are not the operator's business.
pub type Layer<S> =
    Filtered<OpenTelemetryLayer<S, SdkTracer>, FilterFn<fn(&Metadata<'_>) -> bool>, S>;

pub(super) fn layer<S>(provider: &SdkTracerProvider) -> Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let ours: fn(&Metadata<'_>) -> bool =
        |metadata| metadata.is_span() && metadata.target().starts_with(env!("CARGO_CRATE_NAME"));
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(super::SCOPE))
        .with_filter(FilterFn::new(ours))
}

/// The format `inner` writes, with the current span's ids at the end of the line.
pub fn with_trace_ids<F>(inner: F) -> WithTraceIds<F> {
    WithTraceIds(inner)
}

/// See [`with_trace_ids`].
pub struct WithTraceIds<F>(F);

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let span = opentelemetry::Context::map_current(|cx| {
            let span = cx.span();
            let context = span.span_context();
            context
                .is_valid()
                .then(|| (context.trace_id(), context.span_id()))
        });
        let Some((trace_id, span_id)) = span else {
            return self.0.format_event(ctx, writer, event);
        };
        // The inner format ends its line; the ids go before that end.
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let body = line.strip_suffix('\n').unwrap_or(&line);
        writeln!(writer, "{body} trace_id={trace_id} span_id={span_id}")
    }
}
