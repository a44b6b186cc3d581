//! MCP over Streamable HTTP: the same handler, registry and engine as stdio, served to
//! many clients at `/mcp` by rmcp's HTTP service, behind a gate that checks tokens.
//!
//! Safe by default:
//! - it binds loopback unless told otherwise, and a non-loopback address is refused
//!   without a tokens file;
//! - every request but `GET /healthz` needs a bearer token, loopback included: one of the
//!   tokens file (reloaded on SIGHUP, `keys.rs`), or without a file one made at start and
//!   printed on stderr; only `--http-no-auth` serves without, on loopback, with a warning;
//! - connections are capped and timed out before any token is checked
//!   (`connections.rs`);
//! - `Host` and `Origin` are checked against the loopback names and the names the
//!   operator gave, against DNS rebinding (rmcp checks them once told the lists);
//! - request bodies are capped at 4 MiB, open sessions by `max_sessions`, open SSE
//!   streams by `max_streams`, and each principal's unfinished runs by `max_runs`.
//!
//! The 2025-11-25 task layer applies to bodies and responses here (`rewrite.rs`), as the
//! stdio transport applies it to lines.
//!
//! Invariant: no token reaches a log line or a response.

mod connections;
mod keys;
pub(crate) mod rewrite;
mod sessions;
pub(crate) mod tokens;

use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use keys::Keys;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sessions::{Bounded, Sessions};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

pub use connections::Limits;
pub(crate) use tokens::Principal;
pub use tokens::Tokens;

use super::Server;

/// The port served when `--http` names none.
pub const DEFAULT_PORT: u16 = 8765;

/// How long open connections get to finish once shutdown begins.
const DRAIN: Duration = Duration::from_secs(5);

/// Who may call.
#[derive(Debug, Clone)]
pub enum Auth {
    /// The holders of the tokens of this file (already read), reloaded on SIGHUP.
    File { path: PathBuf, tokens: Tokens },
    /// The holder of a token made at start and printed on stderr.
    Generated,
    /// Anyone who can reach the address: loopback only, and only when asked for.
    Off,
}

impl Auth {
    /// The tokens of the file at `path`, or why it is refused.
    pub fn from_file(path: PathBuf) -> anyhow::Result<Auth> {
        let tokens = Tokens::load(&path)?;
        Ok(Auth::File { path, tokens })
    }
}

/// Where and for whom to serve.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    /// Which bearer tokens requests need, if any.
    pub auth: Auth,
    /// Host names besides the loopback ones that clients may reach the server by.
    pub hosts: Vec<String>,
    /// At most this many 2025-11-25 sessions are open at once.
    pub max_sessions: usize,
    /// At most this many SSE streams are open at once.
    pub max_streams: usize,
    /// At most this many unfinished runs per principal (with tokens).
    pub max_runs: u64,
    /// The cap on connections and their timeouts.
    pub connections: Limits,
}

impl HttpOptions {
    /// The options as given, or why they are refused.
    pub fn check(&self) -> anyhow::Result<()> {
        if !self.addr.ip().is_loopback() && !matches!(self.auth, Auth::File { .. }) {
            anyhow::bail!(
                "refusing to serve HTTP on {} without tokens: beyond loopback every request \
                 must carry a bearer token; give --http-tokens FILE (or TASKS_HTTP_TOKENS_FILE), \
                 or bind a loopback address such as 127.0.0.1:{DEFAULT_PORT}",
                self.addr
            );
        }
        Ok(())
    }

    /// The `Host` values accepted: loopback names, the bound address, and the names given.
    fn allowed_hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
        if !self.addr.ip().is_unspecified() {
            hosts.push(self.addr.ip().to_string());
        }
        hosts.extend(self.hosts.iter().cloned());
        hosts
    }

    /// The browser origins accepted: pages served from an accepted host, on any port.
    fn allowed_origins(&self) -> Vec<String> {
        self.allowed_hosts()
            .iter()
            .flat_map(|host| {
                let host = if host.contains(':') {
                    format!("[{host}]")
                } else {
                    host.clone()
                };
                [format!("http://{host}:*"), format!("https://{host}:*")]
            })
            .collect()
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// What every request passes before rmcp sees it.
struct Gate {
    /// The tokens requests need; `None` with `--http-no-auth`.
    keys: Option<Arc<Keys>>,
    /// Whether the server serves tasks, and so speaks the 2025-11-25 task layer.
    tasks: bool,
    sessions: Arc<Sessions>,
    /// A permit for each SSE stream open, and for each request until its response shows
    /// whether it is one.
    streams: Arc<Semaphore>,
    mcp: StreamableHttpService<Server, Sessions>,
}

impl Gate {
    async fn handle(
        self: Arc<Self>,
        mut request: Request<Incoming>,
    ) -> Result<Response<Body>, Infallible> {
        if request.uri().path() == "/healthz" {
            return Ok(match *request.method() {
                Method::GET | Method::HEAD => plain(StatusCode::OK, "ok\n"),
                _ => plain(StatusCode::METHOD_NOT_ALLOWED, "GET /healthz\n"),
            });
        }
        // The digest of the request's token, to end the session it opens with the token.
        let mut token = None;
        if let Some(keys) = &self.keys {
            let given = bearer(&request);
            let Some((principal, digest)) = given.and_then(|t| keys.principal(t)) else {
                return Ok(unauthorized(given.is_some()));
            };
            tracing::debug!(principal = %principal.0, method = %request.method(), "HTTP request");
            // rmcp hands the request's parts to the handler, which tells callers apart.
            request.extensions_mut().insert(principal);
            token = Some(digest);
        }
        if request.uri().path() != "/mcp" {
            return Ok(plain(StatusCode::NOT_FOUND, "MCP is served at /mcp\n"));
        }
        let opens = opens_session(&request);
        if opens && self.sessions.is_full().await {
            return Ok(busy("too many open sessions; close one or retry later\n"));
        }
        let mut mcp = self.mcp.clone();
        // Only a GET (the session's stream) or a POST (answered as a stream) may open one;
        // a DELETE that closes a session is served even when the streams are all taken.
        if !matches!(*request.method(), Method::GET | Method::POST) {
            return tower_service::Service::call(&mut mcp, request).await;
        }
        let Ok(permit) = self.streams.clone().try_acquire_owned() else {
            return Ok(busy("too many open streams; close one or retry later\n"));
        };
        let response = if request.method() != Method::POST {
            tower_service::Service::call(&mut mcp, request).await?
        } else {
            let (request, outbound) = match rewrite::inbound(request, self.tasks).await {
                Ok(rewritten) => rewritten,
                Err(reply) => return Ok(reply),
            };
            let response = tower_service::Service::call(&mut mcp, request).await?;
            if opens {
                self.record_session(&response, token).await;
            }
            match outbound {
                Some(outbound) => rewrite::outbound(response, outbound),
                None => response,
            }
        };
        Ok(holding_while_streaming(response, permit))
    }

    /// Records which token opened the session `response` names, if it names one.
    async fn record_session(&self, response: &Response<Body>, token: Option<tokens::TokenDigest>) {
        let (Some(keys), Some(token)) = (&self.keys, token) else {
            return;
        };
        let id = response.headers().get("mcp-session-id");
        if let Some(id) = id.and_then(|id| id.to_str().ok()) {
            keys.opened(id.into(), token, &self.sessions).await;
        }
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

/// 503 with `Retry-After`, for a limit reached.
fn busy(text: &'static str) -> Response<Body> {
    let mut reply = plain(StatusCode::SERVICE_UNAVAILABLE, text);
    reply
        .headers_mut()
        .insert(header::RETRY_AFTER, "5".parse().expect("a header value"));
    reply
}

/// The response, holding `permit` until its body ends if it is an SSE stream.
fn holding_while_streaming(
    response: Response<Body>,
    permit: OwnedSemaphorePermit,
) -> Response<Body> {
    let streams = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
    if !streams {
        return response;
    }
    response.map(|body| {
        body.map_frame(move |frame| {
            let _held = &permit;
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

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    plain_bytes(status, Bytes::from_static(text.as_bytes()))
}

fn plain_owned(status: StatusCode, text: String) -> Response<Body> {
    plain_bytes(status, Bytes::from(text))
}

fn plain_bytes(status: StatusCode, text: Bytes) -> Response<Body> {
    let mut reply = Response::new(Full::new(text).boxed());
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        "text/plain; charset=utf-8".parse().expect("a header value"),
    );
    reply
}

impl Server {
    /// A clone for one HTTP session: the same engine and registry, its own table of the
    /// runs its requests wait on (request ids are unique within a session only).
    fn for_session(&self) -> Server {
        Server {
            runs: Arc::default(),
            ..self.clone()
        }
    }

    /// Serves MCP over Streamable HTTP until `shutdown` is cancelled; then stops accepting,
    /// ends the sessions, and gives open connections a few seconds to finish.
    pub async fn serve_http(
        self,
        options: HttpOptions,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        options.check()?;
        let listener = TcpListener::bind(options.addr)
            .await
            .with_context(|| format!("cannot listen on {}", options.addr))?;
        let local = listener.local_addr()?;
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(options.allowed_hosts())
            .with_allowed_origins(options.allowed_origins())
            .enforce_origin_validation()
            .with_max_request_body_bytes(rewrite::MAX_BODY)
            .with_cancellation_token(shutdown.child_token());
        let tasks = self.registry.is_some();
        let server = Server {
            max_runs: Some(options.max_runs),
            ..self
        };
        let sessions = Arc::new(Bounded::new(
            LocalSessionManager::default(),
            options.max_sessions,
        ));
        let mcp =
            StreamableHttpService::new(move || Ok(server.for_session()), sessions.clone(), config);
        let url = format!("http://{local}/mcp");
        let (keys, hangups) = match &options.auth {
            Auth::File { path, tokens } => {
                // Watched before the address is announced: SIGHUP's default ends the process.
                let hangups =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
                        .context("cannot watch for SIGHUP, which reloads the tokens file")?;
                let keys = Keys::new(tokens.clone(), Some(path.clone()));
                (Some(Arc::new(keys)), Some(hangups))
            }
            Auth::Generated => {
                let (tokens, token) = Tokens::generate();
                announce_token(&url, &token);
                (Some(Arc::new(Keys::new(tokens, None))), None)
            }
            Auth::Off => {
                tracing::warn!(
                    "serving HTTP without tokens (--http-no-auth): every local user, and every \
                     container that shares this host's network, may call every tool as this \
                     server's user"
                );
                (None, None)
            }
        };
        if let (Some(hangups), Some(keys)) = (hangups, &keys) {
            let reload =
                keys::reload_on_hangup(hangups, keys.clone(), sessions.clone(), shutdown.clone());
            tokio::spawn(reload);
        }
        let gate = Arc::new(Gate {
            keys,
            tasks,
            sessions,
            streams: Arc::new(Semaphore::new(options.max_streams)),
            mcp,
        });
        tracing::info!(
            address = %local,
            auth = match options.auth {
                Auth::File { .. } => "tokens file",
                Auth::Generated => "generated token",
                Auth::Off => "none",
            },
            max_connections = options.connections.max,
            "serving MCP over Streamable HTTP at {url}"
        );
        let mut connections =
            connections::accept(listener, gate, options.connections, shutdown.clone()).await;
        tracing::info!("HTTP shutdown: no new connections; finishing open ones");
        let drained = tokio::time::timeout(DRAIN, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                open = connections.len(),
                "HTTP connections still open after {DRAIN:?}; closing them"
            );
            connections.shutdown().await;
        }
        Ok(())
    }
}

/// Tells the person who started the server the token it made, and how a client sends it.
/// Written straight to stderr, not logged: the token must not reach log files or
/// collectors, and must show whatever `RUST_LOG` says.
fn announce_token(url: &str, token: &str) {
    let entry = serde_json::json!({
        "type": "http",
        "url": url,
        "headers": {"Authorization": format!("Bearer {token}")},
    });
    let text = format!(
        "\nMCP over Streamable HTTP at {url}\n\
         No tokens file was given, so this run made a token of its own; every request needs\n\
         \n    Authorization: Bearer {token}\n\n\
         An MCP client entry for it:\n\n    {entry}\n\n\
         For lasting tokens, give --http-tokens FILE; to serve without one, --http-no-auth.\n\n"
    );
    // One write, so that no log line lands inside it.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
