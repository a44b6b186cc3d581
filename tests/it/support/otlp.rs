//! A collector for the tests: an HTTP server on a loopback port that takes what the server
//! exports over OTLP (HTTP, protobuf bodies), decodes it with the official messages of the
//! `opentelemetry-proto` crate, answers 200, and keeps it for the test to read.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::task::JoinHandle;

/// What the receiver was sent.
#[derive(Default)]
struct Received {
    spans: Vec<Span>,
    metrics: Vec<Metric>,
    /// Requests to any other path, or bodies that did not decode.
    strays: Vec<String>,
}

/// The receiver, listening until dropped.
pub(crate) struct Receiver {
    pub(crate) addr: SocketAddr,
    received: Arc<Mutex<Received>>,
    serving: JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

impl Receiver {
    pub(crate) async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received: Arc<Mutex<Received>> = Arc::default();
        let kept = Arc::clone(&received);
        let serving = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let kept = Arc::clone(&kept);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let kept = Arc::clone(&kept);
                        async move { Ok::<_, Infallible>(take(request, &kept).await) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        Receiver {
            addr,
            received,
            serving,
        }
    }

    /// The base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub(crate) fn spans(&self) -> Vec<Span> {
        self.received.lock().unwrap().spans.clone()
    }

    /// Every metric received so far, each export's in turn.
    pub(crate) fn metrics(&self) -> Vec<Metric> {
        self.received.lock().unwrap().metrics.clone()
    }

    /// Whether anything at all was sent.
    pub(crate) fn is_empty(&self) -> bool {
        let received = self.received.lock().unwrap();
        received.spans.is_empty() && received.metrics.is_empty() && received.strays.is_empty()
    }

    /// Requests that were neither spans nor metrics.
    pub(crate) fn strays(&self) -> Vec<String> {
        self.received.lock().unwrap().strays.clone()
    }

    /// Waits (10 s at most) until a span named `name` came; returns it.
    pub(crate) async fn span(&self, name: &str) -> Span {
        for _ in 0..200 {
            if let Some(span) = self.spans().into_iter().find(|s| s.name == name) {
                return span;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let names: Vec<String> = self.spans().into_iter().map(|s| s.name).collect();
        panic!("no span named {name:?}; received {names:?}");
    }

    /// Waits (10 s at most) until a metric named `name` came; returns its last export.
    pub(crate) async fn metric(&self, name: &str) -> Metric {
        for _ in 0..200 {
            if let Some(metric) = self.metrics().into_iter().rev().find(|m| m.name == name) {
                return metric;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let names: Vec<String> = self.metrics().into_iter().map(|m| m.name).collect();
        panic!("no metric named {name:?}; received {names:?}");
    }
}

async fn take(request: Request<Incoming>, kept: &Mutex<Received>) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let content_type = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let mut received = kept.lock().unwrap();
    match path.as_str() {
        "/v1/traces" if content_type == "application/x-protobuf" => {
            match ExportTraceServiceRequest::decode(body) {
                Ok(export) => received.spans.extend(
                    export
                        .resource_spans
                        .into_iter()
                        .flat_map(|r| r.scope_spans)
                        .flat_map(|s| s.spans),
                ),
                Err(error) => received.strays.push(format!("{path}: {error}")),
            }
        }
        "/v1/metrics" if content_type == "application/x-protobuf" => {
            match ExportMetricsServiceRequest::decode(body) {
                Ok(export) => received.metrics.extend(
                    export
                        .resource_metrics
                        .into_iter()
                        .flat_map(|r| r.scope_metrics)
                        .flat_map(|s| s.metrics),
                ),
                Err(error) => received.strays.push(format!("{path}: {error}")),
            }
        }
        _ => received.strays.push(format!("{path} ({content_type})")),
    }
    let mut response = Response::new(Full::new(Bytes::new()));
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/x-protobuf"),
    );
    response
}

/// The string value of attribute `key`, if it has one.
pub(crate) fn attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match value.value.as_ref()? {
        any_value::Value::StringValue(text) => Some(text.clone()),
        any_value::Value::IntValue(number) => Some(number.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// Lowercase hex of an id.
pub(crate) fn hex(id: &[u8]) -> String {
    id.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The data points of a histogram metric: each point's attributes, bounds and count.
pub(crate) fn histogram_points(metric: &Metric) -> Vec<(Vec<KeyValue>, Vec<f64>, u64)> {
    match &metric.data {
        Some(metric::Data::Histogram(histogram)) => histogram
            .data_points
            .iter()
            .map(|p| (p.attributes.clone(), p.explicit_bounds.clone(), p.count))
            .collect(),
        other => panic!("{} is not a histogram: {other:?}", metric.name),
    }
}
