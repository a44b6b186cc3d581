//! What every request passes before rmcp sees it: its token, the session it names (its
//! principal's own, or 404), and the caps on sessions and streams, in all and per
//! principal.
//!
//! Invariant: with tokens, a request naming a session (`Mcp-Session-Id`) is served only
//! if its principal opened that session: POST, GET streams, `Last-Event-ID` resumption,
//! DELETE and stateless requests alike. To any other principal the session is unknown.

use std::convert::Infallible;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::SessionManager;

use super::owners::Opening;
use super::sessions::Sessions;
use super::{Body, plain, rewrite};
use crate::auth::{self, ClientAddr, Keys, Principal, Throttle, TokenDigest};
use crate::server::Observed;
use crate::slots::{Full, Slot, Slots};
use crate::telemetry;
use crate::web::Handler as Pages;

/// What every request passes before rmcp sees it.
pub(super) struct Gate {
    /// The `Host` names served.
    pub(super) hosts: Vec<String>,
    /// The tokens requests need; `None` with `--http-no-auth`.
    pub(super) keys: Option<Arc<Keys>>,
    pub(super) sessions: Arc<Sessions>,
    /// A slot for each SSE stream open, and for each request until its response shows
    /// whether it is one.
    pub(super) streams: Arc<Slots>,
    /// MCP at `/mcp`; `None` where only the dashboard is served (`ui`).
    pub(super) mcp: Option<StreamableHttpService<Observed, Sessions>>,
    /// The dashboard at every other path, a service the gate does not look into; `None`
    /// without tokens (`--http-no-auth`).
    pub(super) pages: Option<Pages>,
    /// Failed sign-ins by address, the pages' and the bearer tokens' alike.
    pub(super) throttle: Arc<Throttle>,
    /// The most tasks one `subscriptions/listen` follows (`--max-subscriptions`).
    pub(super) max_listened: usize,
}

/// The principal of a request's token, and the token's digest.
type Caller = (Principal, TokenDigest);

/// What a request asks for, by its path: the one place that tells each path's service,
/// and so what a caller needs for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// `GET /healthz`, without a token.
    Health,
    /// The server card, without a token.
    Card,
    /// MCP at `/mcp`, with a token.
    Mcp,
    /// The Prometheus text of the metrics at `/metrics`, with a token (any principal's:
    /// nothing in it is a principal's own, `telemetry/metrics.rs`), where MCP is served.
    Metrics,
    /// The dashboard, with a login; any other path.
    Pages,
}

impl Route {
    fn of(request: &Request<Incoming>, serves_mcp: bool) -> Route {
        match request.uri().path() {
            "/healthz" => Route::Health,
            "/mcp" => Route::Mcp,
            "/metrics" if serves_mcp => Route::Metrics,
            path if path == super::card::PATH && request.method() == Method::GET => Route::Card,
            _ => Route::Pages,
        }
    }
}

impl Gate {
    /// Serves `request`, under an HTTP span of its own when spans are exported and it is
    /// MCP's or the metrics'.
    pub(super) async fn handle(
        self: Arc<Self>,
        mut request: Request<Incoming>,
    ) -> Result<Response<Body>, Infallible> {
        let route = Route::of(&request, self.mcp.is_some());
        let span = match route {
            Route::Mcp => telemetry::http::start(&mut request, "/mcp"),
            Route::Metrics => telemetry::http::start(&mut request, "/metrics"),
            _ => None,
        };
        let response = self.serve(request, route).await?;
        Ok(match span {
            Some(span) => span.respond(response),
            None => response,
        })
    }

    async fn serve(
        &self,
        mut request: Request<Incoming>,
        route: Route,
    ) -> Result<Response<Body>, Infallible> {
        if route == Route::Health {
            return Ok(match *request.method() {
                Method::GET | Method::HEAD => plain(StatusCode::OK, "ok\n"),
                _ => plain(StatusCode::METHOD_NOT_ALLOWED, "GET /healthz\n"),
            });
        }
        // Against DNS rebinding: every path but the health check answers only under the
        // names the server is served by, the pages and the card as MCP.
        let Some(host) = super::served_host(request.headers(), &self.hosts) else {
            return Ok(plain(
                StatusCode::FORBIDDEN,
                "this host name is not served\n",
            ));
        };
        if route == Route::Card {
            return Ok(super::card::card(host, self.keys.is_some()));
        }
        if route == Route::Pages
            && let Some(pages) = &self.pages
        {
            // Browsers sign in by a cookie of their own, not a bearer token.
            return Ok(pages(request).await);
        }
        let caller = match self.authenticate(&mut request) {
            Ok(caller) => caller,
            Err(refused) => return Ok(*refused),
        };
        if route == Route::Metrics {
            return Ok(metrics(&request));
        }
        let Some(mcp) = &self.mcp else {
            return Ok(plain(
                StatusCode::NOT_FOUND,
                "this server serves the dashboard only\n",
            ));
        };
        if route != Route::Mcp {
            return Ok(plain(StatusCode::NOT_FOUND, "MCP is served at /mcp\n"));
        }
        if let Some((principal, _)) = &caller
            && self.names_foreign_session(&request, principal)
        {
            // As rmcp answers for a session it does not know.
            return Ok(plain(StatusCode::NOT_FOUND, "Not Found: Session not found"));
        }
        let opening = match self.reserve_session(&request, caller.as_ref()).await {
            Ok(opening) => opening,
            Err(refused) => return Ok(refused),
        };
        let mut mcp = mcp.clone();
        // Only a GET (the session's stream) or a POST (answered as a stream) may open one;
        // a DELETE that closes a session is served even when the streams are all taken.
        if !matches!(*request.method(), Method::GET | Method::POST) {
            return tower_service::Service::call(&mut mcp, request).await;
        }
        let principal = caller.as_ref().map(|(principal, _)| principal.0.as_str());
        let slot = match self.streams.take(principal) {
            Ok(slot) => slot,
            Err(Full::All) => return Ok(busy("too many open streams; close one or retry later\n")),
            Err(Full::Principal) => {
                return Ok(busy(
                    "too many open streams for this principal \
                     (--http-max-streams-per-principal); close one or retry later\n",
                ));
            }
        };
        let response = if request.method() != Method::POST {
            tower_service::Service::call(&mut mcp, request).await?
        } else {
            let (request, outbound) = match rewrite::inbound(request, self.max_listened).await {
                Ok(rewritten) => rewritten,
                Err(reply) => return Ok(reply),
            };
            let response = tower_service::Service::call(&mut mcp, request).await?;
            if let Some(opening) = opening {
                self.record_session(&response, opening).await;
            }
            match outbound {
                Some(outbound) => rewrite::outbound(response, outbound),
                None => response,
            }
        };
        Ok(holding_while_streaming(response, slot))
    }

    /// The caller named by the request's token, which the request then carries for the
    /// handler (rmcp hands it the request's parts); `None` without tokens. `Err` is the
    /// 401 to answer.
    fn authenticate(
        &self,
        request: &mut Request<Incoming>,
    ) -> Result<Option<Caller>, Box<Response<Body>>> {
        let Some(keys) = &self.keys else {
            return Ok(None);
        };
        let address = request.extensions().get::<ClientAddr>().copied();
        if let Err(wait) = self.throttle.check(address) {
            return Err(Box::new(too_many_failures(wait)));
        }
        let given = bearer(request);
        let Some((principal, digest)) = given.and_then(|t| keys.principal(t)) else {
            if given.is_some() {
                self.throttle.failed(address);
            }
            return Err(Box::new(unauthorized(given.is_some())));
        };
        tracing::debug!(principal = %principal.0, method = %request.method(), "HTTP request");
        request.extensions_mut().insert(principal.clone());
        Ok(Some((principal, digest)))
    }

    /// For a request that may open a session, a slot of the caller's sessions, held until
    /// the session is recorded; `Err` is the 503 to answer when the sessions in all, or
    /// the caller's, are at their cap.
    async fn reserve_session(
        &self,
        request: &Request<Incoming>,
        caller: Option<&Caller>,
    ) -> Result<Option<Opening>, Response<Body>> {
        if !opens_session(request) {
            return Ok(None);
        }
        if self.sessions.is_full().await {
            return Err(busy("too many open sessions; close one or retry later\n"));
        }
        let Some((principal, digest)) = caller else {
            return Ok(None);
        };
        match self.sessions.owners().reserve(principal, *digest) {
            Some(opening) => Ok(Some(opening)),
            None => Err(busy(
                "too many open sessions for this principal \
                 (--http-max-sessions-per-principal); close one or retry later\n",
            )),
        }
    }

    /// Whether the request names a session that `principal` did not open (or that is not
    /// open).
    fn names_foreign_session(&self, request: &Request<Incoming>, principal: &Principal) -> bool {
        let Some(id) = request.headers().get("mcp-session-id") else {
            return false;
        };
        let owners = self.sessions.owners();
        !id.to_str().is_ok_and(|id| owners.owns(id, principal))
    }

    /// Records who opened the session `response` names, if it names one. A token removed
    /// while the session was being opened ends it at once.
    async fn record_session(&self, response: &Response<Body>, opening: Opening) {
        let id = response.headers().get("mcp-session-id");
        let Some(id) = id.and_then(|id| id.to_str().ok()) else {
            return;
        };
        let id: rmcp::transport::streamable_http_server::SessionId = id.into();
        let token = opening.token();
        self.sessions.owners().record(id.clone(), opening);
        let removed = self.keys.as_ref().is_some_and(|keys| !keys.holds(&token));
        // Closed meanwhile (shutdown): its owner is not kept.
        let closed = !self.sessions.has_session(&id).await.unwrap_or(false);
        if removed || closed {
            super::reload::end(vec![id], &self.sessions).await;
        }
    }
}

/// The metrics as Prometheus text, to a GET.
fn metrics(request: &Request<Incoming>) -> Response<Body> {
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n");
    }
    match telemetry::scrape() {
        Some(text) => super::reply_of(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            text.into(),
        ),
        None => plain(
            StatusCode::NOT_FOUND,
            "no metrics are recorded in this process\n",
        ),
    }
}

/// 401, with the challenge of RFC 6750: `invalid_token` when a bearer token was given.
fn unauthorized(token_given: bool) -> Response<Body> {
    let (text, challenge) = if token_given {
        (
            "the bearer token is not valid\n",
            r#"Bearer error="invalid_token""#,
        )
    } else {
        ("a bearer token is required\n", "Bearer")
    };
    let mut reply = plain(StatusCode::UNAUTHORIZED, text);
    reply.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        challenge.parse().expect("a header value"),
    );
    reply
}

/// 429 with `Retry-After`, for an address that failed to sign in too often.
pub(crate) fn too_many_failures(wait: std::time::Duration) -> Response<Body> {
    let mut reply = plain(
        StatusCode::TOO_MANY_REQUESTS,
        "too many failed sign-ins from this address; wait before trying again\n",
    );
    if let Ok(value) = auth::retry_after(wait).parse() {
        reply.headers_mut().insert(header::RETRY_AFTER, value);
    }
    reply
}

/// 503 with `Retry-After`, for a limit reached.
fn busy(text: &'static str) -> Response<Body> {
    let mut reply = plain(StatusCode::SERVICE_UNAVAILABLE, text);
    reply
        .headers_mut()
        .insert(header::RETRY_AFTER, "5".parse().expect("a header value"));
    reply
}

/// The response, holding `slot` until its body ends if it is an SSE stream.
fn holding_while_streaming(response: Response<Body>, slot: Slot) -> Response<Body> {
    let streams = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
    if !streams {
        return response;
    }
    response.map(|body| {
        body.map_frame(move |frame| {
            let _held = &slot;
            frame
        })
        .boxed()
    })
}

/// Whether the request may open a 2025-11-25 session: a POST outside any session, and not
/// a 2026-07-28 request (which names its method in `Mcp-Method` and is served without one).
fn opens_session(request: &Request<Incoming>) -> bool {
    let headers = request.headers();
    request.method() == Method::POST
        && !headers.contains_key("mcp-session-id")
        && headers
            .get("mcp-method")
            .is_none_or(|method| method == "initialize")
}

/// The token of an `Authorization: Bearer …` header.
fn bearer(request: &Request<Incoming>) -> Option<&[u8]> {
    let value = request.headers().get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, token) = value.split_at_checked(7)?;
    scheme.eq_ignore_ascii_case(b"bearer ").then_some(token)
}
