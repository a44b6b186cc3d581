//! The span of an HTTP request the server serves, as the HTTP semantic conventions name
//! it (`{method} {route}`, kind server, the method, scheme, path, route, protocol version
//! and response status), under the context of its `traceparent` header. It ends when its
//! response's body does (a stream, when the stream ends).

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::BodyExt as _;
use http_body_util::combinators::BoxBody;
use opentelemetry::propagation::Extractor;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};

use super::HttpSpan;

/// An HTTP request's span while it is served.
pub(crate) struct Served(Context);

/// Starts the span of `request`, served at `route`, and puts its context in the request's
/// extensions for the MCP span to link; `None` while spans are not exported.
pub(crate) fn start<B>(request: &mut Request<B>, route: &'static str) -> Option<Served> {
    if !super::tracing_on() {
        return None;
    }
    let parent = super::extract(&Headers(request.headers()));
    let method = request.method().as_str().to_owned();
    let version = match request.version() {
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_2 => "2",
        _ => "1.1",
    };
    let attributes = vec![
        KeyValue::new("http.request.method", method.clone()),
        KeyValue::new("url.scheme", "http"),
        KeyValue::new("url.path", route),
        KeyValue::new("http.route", route),
        KeyValue::new("network.protocol.name", "http"),
        KeyValue::new("network.protocol.version", version),
    ];
    let tracer = super::tracer();
    let span = tracer
        .span_builder(format!("{method} {route}"))
        .with_kind(SpanKind::Server)
        .with_attributes(attributes)
        .start_with_context(&tracer, &parent);
    let served = parent.with_span(span);
    let context = served.span().span_context().clone();
    request.extensions_mut().insert(HttpSpan(context));
    Some(Served(served))
}

/// Ends the span as the body ends, dropped or read whole.
struct Ends(Context);

impl Drop for Ends {
    fn drop(&mut self) {
        self.0.span().end();
    }
}

impl Served {
    /// The response, with its status on the span, which ends when the body does.
    pub(crate) fn respond<E: 'static>(
        self,
        response: Response<BoxBody<Bytes, E>>,
    ) -> Response<BoxBody<Bytes, E>> {
        let status = response.status();
        let span = self.0.span();
        span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status.as_u16()),
        ));
        // Server errors are the server's: a 4xx is the client's (the conventions' rule).
        if status.is_server_error() {
            span.set_attribute(KeyValue::new("error.type", status.as_str().to_owned()));
            span.set_status(Status::error(""));
        }
        let ends = Ends(self.0);
        response.map(|body| {
            body.map_frame(move |frame| {
                let _ends = &ends;
                frame
            })
            .boxed()
        })
    }
}

/// HTTP headers as the propagators read them.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}
