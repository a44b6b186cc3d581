//! OpenTelemetry: spans and metrics exported over OTLP (HTTP, protobuf bodies) when the
//! operator asks for them, the metrics read in process for `/metrics`, and the trace of the
//! request a log line was written in. A leaf: it knows nothing of MCP, runs or SQL; the
//! layers above name what they record (`server/observed.rs` the MCP spans, the gate the
//! HTTP span, the engine, the runs and the store their counters, in `metrics.rs`).
//!
//! Off by default. On when the standard variables say so (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//! or the per-signal `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `..._METRICS_ENDPOINT`, with
//! `OTEL_SDK_DISABLED=true` and `OTEL_{TRACES,METRICS}_EXPORTER=none` turning it off
//! again), or `--otel-endpoint`. The metrics are also recorded, without any exporter,
//! where `/metrics` serves them (`serve --http`).
//!
//! Invariant: off, nothing is exported, no thread or connection is made, and a request
//! pays one load of a flag per span or instrument it would have recorded ([`tracing_on`],
//! `metrics::instruments`).
//!
//! For the spans of runs (`runs.rs`, beside this file): [`tracer`] is the tracer to start
//! them with, [`current_context`] the context of the MCP request that is being served (its
//! span is current while the request is handled, on the task that handles it: read it
//! there, before spawning), and [`meter`] the meter of any further instrument.

pub(crate) mod http;
mod logs;
pub(crate) mod metrics;
mod prometheus;
pub mod runs;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::propagation::{Extractor, TextMapCompositePropagator};
use opentelemetry::{Context, KeyValue, global};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::SdkTracerProvider;

pub use logs::{Layer, with_trace_ids};

/// The instrumentation scope of every span and instrument of the server.
const SCOPE: &str = env!("CARGO_PKG_NAME");

/// What the operator asked for, read from the command line and the standard variables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Where spans go (the full URL of the OTLP/HTTP traces endpoint); `None`: nowhere.
    pub traces: Option<String>,
    /// Where metrics go (the full URL of the metrics endpoint); `None`: nowhere.
    pub metrics: Option<String>,
    /// Whether the metrics are recorded for `/metrics` (served by `serve --http`).
    pub scrape: bool,
}

impl Settings {
    /// The settings `endpoint` (`--otel-endpoint`, whose variable is the standard
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`) and the standard variables of this process make.
    pub fn from_env(endpoint: Option<&str>, scrape: bool) -> Settings {
        Settings::from_vars(endpoint, scrape, |name| std::env::var(name).ok())
    }

    /// [`Settings::from_env`] over any source of variables.
    pub fn from_vars(
        endpoint: Option<&str>,
        scrape: bool,
        var: impl Fn(&str) -> Option<String>,
    ) -> Settings {
        let set = |name: &str| var(name).filter(|value| !value.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Settings {
                scrape,
                ..Settings::default()
            };
        }
        let base = endpoint.filter(|e| !e.trim().is_empty()).map(str::to_owned);
        let signal = |own: &str, exporter: &str, path: &str| {
            if set(exporter).is_some_and(|v| v.trim().eq_ignore_ascii_case("none")) {
                return None;
            }
            set(own).or_else(|| base.as_deref().map(|base| signal_url(base, path)))
        };
        Settings {
            traces: signal(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "OTEL_TRACES_EXPORTER",
                "v1/traces",
            ),
            metrics: signal(
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                "OTEL_METRICS_EXPORTER",
                "v1/metrics",
            ),
            scrape,
        }
    }
}

/// The URL of a signal under a base endpoint, as the OTLP specification joins them.
fn signal_url(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim_end_matches('/'))
}

/// Whether spans are recorded and exported: read before anything is built for one.
static TRACING: AtomicBool = AtomicBool::new(false);

/// Whether MCP spans are exported. One load: the check every request makes.
#[inline]
pub(crate) fn tracing_on() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// The tracer of the server's spans (a no-op one while tracing is off).
pub(crate) fn tracer() -> global::BoxedTracer {
    global::tracer(SCOPE)
}

/// The meter of the server's instruments (a no-op one while no metric is recorded).
pub(crate) fn meter() -> opentelemetry::metrics::Meter {
    global::meter(SCOPE)
}

/// The context of the span being served on this task: an MCP request's while its handler
/// runs (`server/observed.rs`), else whatever is current (the empty context when off).
/// Read it on the task that handles the request; a spawned task starts without it.
#[allow(
    dead_code,
    reason = "for the spans of runs, which start from the request's"
)]
pub(crate) fn current_context() -> Context {
    Context::current()
}

/// The context a carrier (an MCP request's `_meta`, HTTP headers) names with its W3C
/// `traceparent`, `tracestate` and `baggage`; the empty context when it names none.
pub(crate) fn extract(carrier: &dyn Extractor) -> Context {
    global::get_text_map_propagator(|propagator| {
        propagator.extract_with_context(&Context::new(), carrier)
    })
}

/// The span of the HTTP request that carried an MCP request, which the gate puts in the
/// request's extensions and the MCP request's span links.
#[derive(Debug, Clone)]
pub(crate) struct HttpSpan(pub(crate) opentelemetry::trace::SpanContext);

/// What [`init`] set up; flushes and stops the exporters when dropped, at the process's end.
#[must_use = "the telemetry is flushed when the guard is dropped"]
pub struct Guard {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
}

impl Guard {
    /// The tracing layer that turns the crate's own `tracing` spans into OpenTelemetry
    /// spans, when spans are exported.
    pub fn layer<S>(&self) -> Option<Layer<S>>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        self.tracer.as_ref().map(logs::layer)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        TRACING.store(false, Ordering::Relaxed);
        // Whatever waits in the batch is sent now, before the process ends.
        if let Some(tracer) = self.tracer.take()
            && let Err(error) = tracer.shutdown_with_timeout(SHUTDOWN)
        {
            tracing::warn!(%error, "the last spans could not be exported");
        }
        if let Some(meter) = self.meter.take()
            && let Err(error) = meter.shutdown_with_timeout(SHUTDOWN)
        {
            tracing::warn!(%error, "the last metrics could not be exported");
        }
    }
}

/// How long the end of the process waits for the last export.
const SHUTDOWN: Duration = Duration::from_secs(5);

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("cannot set up the OTLP exporter for {signal} at {url}: {source}")]
    Exporter {
        signal: &'static str,
        url: String,
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// Sets up what `settings` asks for: the exporters, the global tracer and meter providers,
/// the W3C propagators, and the instruments. Call once, before anything is recorded.
pub fn init(settings: &Settings) -> Result<Guard, TelemetryError> {
    let resource = OnceLock::new();
    let resource = || resource.get_or_init(service).clone();
    let mut guard = Guard {
        tracer: None,
        meter: None,
    };
    if settings.traces.is_some() || settings.metrics.is_some() {
        // reqwest is built with rustls and no crypto provider of its own: ring, as the
        // PostgreSQL connections use.
        // (ring is deprecated for lacking post-quantum key exchange, as `store/postgres/tls.rs`
        // says; collectors do not ask for it.)
        #[allow(deprecated)]
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    if let Some(url) = &settings.traces {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .build()
            .map_err(|source| TelemetryError::Exporter {
                signal: "traces",
                url: url.clone(),
                source,
            })?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource())
            .build();
        global::set_tracer_provider(provider.clone());
        global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ]));
        guard.tracer = Some(provider);
        TRACING.store(true, Ordering::Relaxed);
    }
    let mut meter = None::<opentelemetry_sdk::metrics::MeterProviderBuilder>;
    if let Some(url) = &settings.metrics {
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .build()
            .map_err(|source| TelemetryError::Exporter {
                signal: "metrics",
                url: url.clone(),
                source,
            })?;
        let builder = SdkMeterProvider::builder().with_resource(resource());
        meter = Some(builder.with_reader(PeriodicReader::builder(exporter).build()));
    }
    if settings.scrape {
        let builder =
            meter.unwrap_or_else(|| SdkMeterProvider::builder().with_resource(resource()));
        meter = Some(builder.with_reader(prometheus::reader()));
    }
    if let Some(builder) = meter {
        let provider = builder.build();
        global::set_meter_provider(provider.clone());
        metrics::install(&meter_of(&provider));
        guard.meter = Some(provider);
    }
    Ok(guard)
}

fn meter_of(provider: &SdkMeterProvider) -> opentelemetry::metrics::Meter {
    use opentelemetry::metrics::MeterProvider as _;
    provider.meter(SCOPE)
}

/// The resource every span and metric names: `service.name` (`OTEL_SERVICE_NAME`, else
/// this program's name), `service.version`, and `OTEL_RESOURCE_ATTRIBUTES`.
fn service() -> Resource {
    let mut builder = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if std::env::var_os("OTEL_SERVICE_NAME").is_none_or(|name| name.is_empty()) {
        builder = builder.with_service_name(SCOPE);
    }
    builder.build()
}

/// The metrics as Prometheus text (version 0.0.4), or `None` where they are not recorded.
pub(crate) fn scrape() -> Option<String> {
    prometheus::scrape()
}

#[cfg(test)]
mod tests {
    use super::Settings;

    fn settings(endpoint: Option<&str>, vars: &[(&str, &str)]) -> Settings {
        Settings::from_vars(endpoint, false, |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn telemetry_is_off_unless_an_endpoint_is_named() {
        assert_eq!(settings(None, &[]), Settings::default());
        assert_eq!(settings(Some(""), &[]), Settings::default());
    }

    #[test]
    fn the_base_endpoint_names_both_signals_and_a_signal_of_its_own_wins() {
        let both = settings(Some("http://collector:4318/"), &[]);
        assert_eq!(
            both.traces.as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        assert_eq!(
            both.metrics.as_deref(),
            Some("http://collector:4318/v1/metrics")
        );
        let own = settings(
            Some("http://collector:4318"),
            &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:9/x")],
        );
        assert_eq!(own.traces.as_deref(), Some("http://traces:9/x"));
        assert_eq!(
            own.metrics.as_deref(),
            Some("http://collector:4318/v1/metrics")
        );
        let metrics_only = settings(
            None,
            &[(
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                "http://m:9/v1/metrics",
            )],
        );
        assert_eq!(metrics_only.traces, None);
        assert_eq!(
            metrics_only.metrics.as_deref(),
            Some("http://m:9/v1/metrics")
        );
    }

    #[test]
    fn the_sdk_switch_and_an_exporter_of_none_turn_telemetry_off() {
        let off = settings(Some("http://c:4318"), &[("OTEL_SDK_DISABLED", "TRUE")]);
        assert_eq!(off, Settings::default());
        let no_traces = settings(Some("http://c:4318"), &[("OTEL_TRACES_EXPORTER", "none")]);
        assert_eq!(no_traces.traces, None);
        assert!(no_traces.metrics.is_some());
    }
}
