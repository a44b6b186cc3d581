//! The one HTTP client the resource server talks to its issuer with: the issuer's
//! metadata, its keys, introspection and the token endpoint. A connection per request
//! (these are rare: metadata once, keys at most once per refresh interval), over hyper's
//! HTTP/1.1 client and, for `https`, rustls with ring and the system's roots. Every
//! request times out, connecting included; a response is read up to a cap; a GET follows
//! a redirect only within its origin, a POST none.
//!
//! Invariant: nothing this client sends (a form holding a token, a code or a client's
//! secret) reaches a log line or an error: errors name the URL and what went wrong.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use url::Url;

/// How long one request to the issuer may take, connecting and reading included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The largest response read from the issuer.
const MAX_BODY: usize = 1024 * 1024;

/// The most redirects a GET follows, each within the origin of the request.
const MAX_REDIRECTS: usize = 3;

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("cannot reach {url}: {why}")]
    Unreachable { url: String, why: String },
    #[error("{url} answered {status}")]
    Status {
        url: String,
        status: u16,
        body: Option<Value>,
    },
    #[error("{url} answered with something other than a JSON object")]
    NotJson { url: String },
}

/// A request to make: its method, headers besides `Host`, and body.
struct Outgoing {
    method: Method,
    headers: Vec<(header::HeaderName, String)>,
    body: Bytes,
}

/// The client.
#[derive(Clone)]
pub(crate) struct Fetcher {
    tls: tokio_rustls::TlsConnector,
}

impl Fetcher {
    pub(crate) fn new() -> anyhow::Result<Fetcher> {
        // ring, as for PostgreSQL (`store/postgres/tls.rs`): it builds with a C compiler
        // alone; rustls marks it deprecated for lacking post-quantum key exchange.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for certificate in rustls_native_certs::load_native_certs().certs {
            // A certificate of the system's store that rustls cannot parse is left out.
            let _ = roots.add(certificate);
        }
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Fetcher {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    /// The JSON object at `url`.
    pub(crate) async fn get_json(&self, url: &str) -> Result<Value, FetchError> {
        let outgoing = Outgoing {
            method: Method::GET,
            headers: vec![(header::ACCEPT, "application/json".to_owned())],
            body: Bytes::new(),
        };
        self.json(url, &outgoing).await
    }

    /// The JSON object a POST of `form` to `url` answers, authenticated as `client`
    /// (RFC 6749 §2.3.1: HTTP Basic with the id and secret form-encoded) when given.
    pub(crate) async fn post_form(
        &self,
        url: &str,
        form: &[(&str, &str)],
        client: Option<(&str, &str)>,
    ) -> Result<Value, FetchError> {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let mut headers = vec![
            (header::ACCEPT, "application/json".to_owned()),
            (
                header::CONTENT_TYPE,
                "application/x-www-form-urlencoded".to_owned(),
            ),
        ];
        if let Some((id, secret)) = client {
            headers.push((header::AUTHORIZATION, basic(id, secret)));
        }
        let outgoing = Outgoing {
            method: Method::POST,
            headers,
            body: Bytes::from(body),
        };
        self.json(url, &outgoing).await
    }

    /// The JSON object `outgoing` sent to `url` answers, following a GET's redirects
    /// within its origin.
    async fn json(&self, url: &str, outgoing: &Outgoing) -> Result<Value, FetchError> {
        let unreachable = |why: String| FetchError::Unreachable {
            url: url.to_owned(),
            why,
        };
        let mut at = Url::parse(url).map_err(|e| unreachable(e.to_string()))?;
        for _ in 0..=MAX_REDIRECTS {
            let exchange = self.exchange(&at, outgoing);
            let (status, location, body) = tokio::time::timeout(TIMEOUT, exchange)
                .await
                .map_err(|_| unreachable(format!("no answer within {TIMEOUT:?}")))??;
            let redirect = status.is_redirection() && outgoing.method == Method::GET;
            match location.filter(|_| redirect) {
                Some(location) => {
                    let next = at.join(&location).map_err(|e| unreachable(e.to_string()))?;
                    if next.origin() != at.origin() {
                        return Err(unreachable(format!(
                            "redirected to another origin ({})",
                            next.origin().ascii_serialization()
                        )));
                    }
                    at = next;
                }
                None => return answer(url, status, &body),
            }
        }
        Err(unreachable(format!("more than {MAX_REDIRECTS} redirects")))
    }

    /// One request on a connection of its own: the status, `Location`, and body.
    async fn exchange(
        &self,
        url: &Url,
        outgoing: &Outgoing,
    ) -> Result<(StatusCode, Option<String>, Bytes), FetchError> {
        let unreachable = |why: String| FetchError::Unreachable {
            url: url.to_string(),
            why,
        };
        let (Some(host), Some(port)) = (url.host(), url.port_or_known_default()) else {
            return Err(unreachable("no host".to_owned()));
        };
        let stream = match &host {
            url::Host::Domain(name) => tokio::net::TcpStream::connect((*name, port)).await,
            url::Host::Ipv4(ip) => tokio::net::TcpStream::connect((*ip, port)).await,
            url::Host::Ipv6(ip) => tokio::net::TcpStream::connect((*ip, port)).await,
        }
        .map_err(|e| unreachable(e.to_string()))?;
        let request = request(url, outgoing).map_err(unreachable)?;
        match url.scheme() {
            "https" => {
                let name = match &host {
                    url::Host::Domain(name) => (*name).to_owned(),
                    url::Host::Ipv4(ip) => ip.to_string(),
                    url::Host::Ipv6(ip) => ip.to_string(),
                };
                let name = rustls::pki_types::ServerName::try_from(name)
                    .map_err(|e| unreachable(e.to_string()))?;
                let tls = self
                    .tls
                    .connect(name, stream)
                    .await
                    .map_err(|e| unreachable(format!("TLS: {e}")))?;
                send(tls, request).await.map_err(unreachable)
            }
            "http" => send(stream, request).await.map_err(unreachable),
            scheme => Err(unreachable(format!("the scheme {scheme} is not fetched"))),
        }
    }
}

/// The HTTP request of `outgoing` to `url`, in origin form with its `Host`.
fn request(url: &Url, outgoing: &Outgoing) -> Result<Request<Full<Bytes>>, String> {
    let mut target = url.path().to_owned();
    if let Some(query) = url.query() {
        target.push('?');
        target.push_str(query);
    }
    let host = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_owned(),
    };
    let mut request = Request::builder()
        .method(outgoing.method.clone())
        .uri(target)
        .header(header::HOST, host)
        .header(
            header::USER_AGENT,
            concat!("mcp-task-server/", env!("CARGO_PKG_VERSION")),
        );
    for (name, value) in &outgoing.headers {
        request = request.header(name, value);
    }
    request
        .body(Full::new(outgoing.body.clone()))
        .map_err(|e| e.to_string())
}

/// Sends `request` over `io` and reads the answer, its body up to [`MAX_BODY`].
async fn send<S>(
    io: S,
    request: Request<Full<Bytes>>,
) -> Result<(StatusCode, Option<String>, Bytes), String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let location = response
        .headers()
        .get(header::LOCATION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = Limited::new(response.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| match e.is::<http_body_util::LengthLimitError>() {
            true => format!("more than {MAX_BODY} bytes"),
            false => e.to_string(),
        })?
        .to_bytes();
    Ok((status, location, body))
}

/// The JSON object of an answer, or why there is none.
fn answer(url: &str, status: StatusCode, body: &[u8]) -> Result<Value, FetchError> {
    let parsed = serde_json::from_slice::<Value>(body)
        .ok()
        .filter(Value::is_object);
    if !status.is_success() {
        return Err(FetchError::Status {
            url: url.to_owned(),
            status: status.as_u16(),
            body: parsed,
        });
    }
    parsed.ok_or_else(|| FetchError::NotJson {
        url: url.to_owned(),
    })
}

/// HTTP Basic credentials of a client, each part form-encoded first (RFC 6749 §2.3.1).
fn basic(id: &str, secret: &str) -> String {
    use base64::Engine as _;
    let encode = |text: &str| form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", encode(id), encode(secret));
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_credentials_are_form_encoded_before_basic() {
        // RFC 6749 §2.3.1: `a b:c` is sent as `a+b` and `c` encoded, then base64.
        assert_eq!(basic("a b", "s:1"), "Basic YStiOnMlM0Ex");
    }
}
