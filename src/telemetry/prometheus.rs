//! `/metrics`: the SDK's metrics read on demand (a `ManualReader` beside any exporter) and
//! written in the Prometheus text format, version 0.0.4, as the OpenTelemetry
//! specification maps one to the other: names with `.` turned to `_` and the unit as a
//! suffix (`_seconds`), `_total` on counters, a histogram as cumulative `_bucket{le=…}`
//! series with `_sum` and `_count`, every label value escaped.

use std::fmt::{Display, Write as _};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, Temporality};

/// The reader `/metrics` collects from, shared with the meter provider that owns it.
#[derive(Debug, Clone)]
pub(super) struct Scrape(Arc<ManualReader>);

static READER: OnceLock<Scrape> = OnceLock::new();

/// The reader to give the meter provider; the first one made is the one `/metrics` reads.
pub(super) fn reader() -> Scrape {
    READER
        .get_or_init(|| Scrape(Arc::new(ManualReader::builder().build())))
        .clone()
}

impl MetricReader for Scrape {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

/// The metrics now, as Prometheus text; `None` where none are recorded for it.
pub(super) fn scrape() -> Option<String> {
    let reader = READER.get()?;
    let mut metrics = ResourceMetrics::default();
    if let Err(error) = reader.collect(&mut metrics) {
        tracing::warn!(%error, "cannot read the metrics for /metrics");
        return None;
    }
    let mut text = String::new();
    for scope in metrics.scope_metrics() {
        for metric in scope.metrics() {
            write_metric(&mut text, metric);
        }
    }
    Some(text)
}

fn write_metric(out: &mut String, metric: &Metric) {
    let base = name_of(metric.name(), metric.unit());
    match metric.data() {
        AggregatedMetrics::F64(data) => write_data(out, &base, metric.description(), data),
        AggregatedMetrics::U64(data) => write_data(out, &base, metric.description(), data),
        AggregatedMetrics::I64(data) => write_data(out, &base, metric.description(), data),
    }
}

/// A number as Prometheus writes it (`+Inf`, `-Inf`, `NaN` for the special values).
trait Number: Copy + Display {
    fn as_f64(self) -> f64;
}

impl Number for f64 {
    fn as_f64(self) -> f64 {
        self
    }
}
impl Number for u64 {
    fn as_f64(self) -> f64 {
        self as f64
    }
}
impl Number for i64 {
    fn as_f64(self) -> f64 {
        self as f64
    }
}

fn number(value: impl Number) -> String {
    let float = value.as_f64();
    if float.is_nan() {
        "NaN".to_owned()
    } else if float.is_infinite() {
        if float > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        value.to_string()
    }
}

fn write_data<T: Number>(out: &mut String, base: &str, help: &str, data: &MetricData<T>) {
    match data {
        MetricData::Sum(sum) => {
            let (name, kind) = match sum.is_monotonic() {
                true => (format!("{base}_total"), "counter"),
                false => (base.to_owned(), "gauge"),
            };
            head(out, &name, help, kind);
            for point in sum.data_points() {
                sample(out, &name, point.attributes(), None, &number(point.value()));
            }
        }
        MetricData::Gauge(gauge) => {
            head(out, base, help, "gauge");
            for point in gauge.data_points() {
                sample(out, base, point.attributes(), None, &number(point.value()));
            }
        }
        MetricData::Histogram(histogram) => {
            head(out, base, help, "histogram");
            let bucket = format!("{base}_bucket");
            for point in histogram.data_points() {
                let mut cumulative = 0;
                let bounds = point.bounds().map(number).chain(["+Inf".to_owned()]);
                for (le, count) in bounds.zip(point.bucket_counts()) {
                    cumulative += count;
                    let le = ("le", le.as_str());
                    sample(
                        out,
                        &bucket,
                        point.attributes(),
                        Some(le),
                        &cumulative.to_string(),
                    );
                }
                let (sum, count) = (number(point.sum()), point.count().to_string());
                sample(out, &format!("{base}_sum"), point.attributes(), None, &sum);
                sample(
                    out,
                    &format!("{base}_count"),
                    point.attributes(),
                    None,
                    &count,
                );
            }
        }
        // Not made by any instrument of the server.
        MetricData::ExponentialHistogram(_) => {}
    }
}

fn head(out: &mut String, name: &str, help: &str, kind: &str) {
    let help = help.replace('\\', r"\\").replace('\n', r"\n");
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn sample<'a>(
    out: &mut String,
    name: &str,
    attributes: impl Iterator<Item = &'a KeyValue>,
    extra: Option<(&str, &str)>,
    value: &str,
) {
    out.push_str(name);
    let labels: Vec<(String, String)> = attributes
        .map(|kv| (sanitize(kv.key.as_str(), false), kv.value.to_string()))
        .chain(extra.map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    if !labels.is_empty() {
        out.push('{');
        for (i, (key, text)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{key}=\"{}\"", escape(text));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// A label value as the text format quotes it: `\`, `"` and line feeds escaped.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => escaped.push_str(r"\\"),
            '"' => escaped.push_str(r#"\""#),
            '\n' => escaped.push_str(r"\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// A metric or label name: letters, digits and `_` (and `:` in a metric's), not starting
/// with a digit; any other character becomes `_`.
fn sanitize(name: &str, metric: bool) -> String {
    let mut out: String = name
        .chars()
        .map(|c| match c {
            c if c.is_ascii_alphanumeric() || c == '_' || (metric && c == ':') => c,
            _ => '_',
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// The Prometheus name of an instrument: sanitised, with its unit's suffix (`s` →
/// `_seconds`; annotations such as `{run}` have none).
fn name_of(name: &str, unit: &str) -> String {
    let name = sanitize(name, true);
    let suffix = match unit {
        "s" => "seconds",
        "ms" => "milliseconds",
        "By" => "bytes",
        _ => return name,
    };
    match name.ends_with(&format!("_{suffix}")) {
        true => name,
        false => format!("{name}_{suffix}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{escape, name_of, sanitize};

    #[test]
    fn names_take_the_unit_and_lose_the_characters_prometheus_refuses() {
        assert_eq!(
            name_of("mcp.server.operation.duration", "s"),
            "mcp_server_operation_duration_seconds"
        );
        assert_eq!(
            name_of("mcp_task_server.runs.started", "{run}"),
            "mcp_task_server_runs_started"
        );
        assert_eq!(name_of("x_seconds", "s"), "x_seconds");
        assert_eq!(sanitize("9lives-é", false), "_9lives__");
        assert_eq!(sanitize("a:b", true), "a:b");
        assert_eq!(sanitize("a:b", false), "a_b");
    }

    #[test]
    fn label_values_escape_backslashes_quotes_and_line_feeds() {
        assert_eq!(escape("a\\b\"c\nd"), r#"a\\b\"c\nd"#);
    }
}
