//! MCP over Streamable HTTP: the same handler, registry and engine as stdio, served to
//! many clients at `/mcp` by rmcp's HTTP service, behind a gate that checks tokens.
//!
//! Safe by default:
//! - it binds loopback unless told otherwise, and a non-loopback address is refused
//!   without a tokens file or OAuth;
//! - every request but `GET /healthz` needs a bearer token, loopback included: one of the
//!   tokens file (reloaded on SIGHUP, `keys.rs`), or without a file one made at start and
//!   printed on stderr; only `--http-no-auth` serves without, on loopback, with a warning;
//! - or, with `--oauth-issuer`, an OAuth access token of that issuer for this resource,
//!   whose scopes cover the request (`oauth.rs`), and no static token at all: one mode
//!   per deployment;
//! - connections are capped and timed out before any token is checked
//!   (`connections.rs`);
//! - `Host` and `Origin` are checked against the loopback names and the names the
//!   operator gave, against DNS rebinding (rmcp checks them once told the lists);
//! - a session is its opener's: to another principal it is unknown (`gate.rs`,
//!   `owners.rs`);
//! - request bodies are capped at 4 MiB; open sessions, open SSE streams and waiting
//!   `tasks/result` requests are capped in all and per principal, and each principal's
//!   unfinished runs by `max_runs`.
//!
//! The 2025-11-25 task layer applies to bodies and responses here (`rewrite.rs`), as the
//! stdio transport applies it to lines.
//!
//! Invariant: no token reaches a log line or a response.

mod card;
mod connections;
mod gate;
mod oauth;
mod owners;
mod reload;
pub(crate) mod rewrite;
mod sessions;

use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use gate::Gate;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use owners::Owners;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sessions::Bounded;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use crate::auth::DEFAULT_FREE_FAILURES as DEFAULT_FREE_SIGN_IN_FAILURES;
pub use connections::Limits;
/// The most dashboard logins kept per principal unless told otherwise.
pub const DEFAULT_MAX_LOGINS_PER_PRINCIPAL: usize = web::DEFAULT_MAX_LOGINS_PER_PRINCIPAL;
pub use crate::auth::Tokens;
pub use crate::auth::oauth::{
    Client as OAuthClient, DEFAULT_ALGORITHMS as DEFAULT_OAUTH_ALGORITHMS,
    DEFAULT_SCOPES as DEFAULT_OAUTH_SCOPES,
    DEFAULT_SIGN_INS_PENDING as DEFAULT_OAUTH_SIGN_INS_PENDING, OAuthOptions,
    Scopes as OAuthScopes, Secret as OAuthSecret, parse_algorithms as parse_oauth_algorithms,
};
use crate::auth::{Keys, Throttle};

use crate::app::App;
use crate::server::Server;
use crate::server::operations::Operations;
use crate::slots::Slots;
use crate::web::{self, Viewer};

/// The port served when `--http` names none.
pub(crate) const DEFAULT_PORT: u16 = 8765;

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
    /// The holders of access tokens an OAuth issuer made for this resource.
    OAuth(Box<OAuthOptions>),
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
    /// At most this many of them opened by one principal of a tokens file.
    pub max_sessions_per_principal: usize,
    /// At most this many SSE streams are open at once.
    pub max_streams: usize,
    /// At most this many of them held by one principal of a tokens file.
    pub max_streams_per_principal: usize,
    /// At most this many unfinished runs per principal (with tokens).
    pub max_runs: u64,
    /// At most this many `tasks/result` requests wait at once.
    pub max_result_waits: usize,
    /// At most this many of them from one principal of a tokens file.
    pub max_result_waits_per_principal: usize,
    /// The cap on connections and their timeouts.
    pub connections: Limits,
    /// At most this many dashboard logins kept per principal.
    pub max_logins_per_principal: usize,
    /// The failed sign-ins an address may make before its tries are delayed.
    pub free_sign_in_failures: u32,
}

impl HttpOptions {
    /// The options as given, or why they are refused.
    pub fn check(&self) -> anyhow::Result<()> {
        if let Auth::OAuth(oauth) = &self.auth {
            oauth.check().map_err(anyhow::Error::msg)?;
            if !self.addr.ip().is_loopback() && oauth.audience.is_none() {
                anyhow::bail!(
                    "serving OAuth on {} needs this resource's URI, the one its tokens must \
                     name: give --oauth-audience (or TASKS_OAUTH_AUDIENCE), the URL clients \
                     reach /mcp by, e.g. https://tasks.example.com/mcp",
                    self.addr
                );
            }
            return Ok(());
        }
        if !self.addr.ip().is_loopback() && !matches!(self.auth, Auth::File { .. }) {
            anyhow::bail!(
                "refusing to serve HTTP on {} without tokens: beyond loopback every request \
                 must carry a bearer token; give --http-tokens FILE (or TASKS_HTTP_TOKENS_FILE) \
                 or --oauth-issuer URL, or bind a loopback address such as \
                 127.0.0.1:{DEFAULT_PORT}",
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

/// The request's `Host`, if it names a host the server is served under (names compared
/// without case, as DNS compares them); `None` for any other, and for none.
fn served_host<'a>(headers: &'a http::HeaderMap, hosts: &[String]) -> Option<&'a str> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let name = host_name(host);
    hosts
        .iter()
        .any(|served| served.eq_ignore_ascii_case(name))
        .then_some(host)
}

/// The host name of a `Host` value, without its port (an IPv6 address without brackets).
pub(crate) fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    plain_bytes(status, Bytes::from_static(text.as_bytes()))
}

fn plain_owned(status: StatusCode, text: String) -> Response<Body> {
    plain_bytes(status, Bytes::from(text))
}

fn plain_bytes(status: StatusCode, text: Bytes) -> Response<Body> {
    reply_of(status, "text/plain; charset=utf-8", text)
}

/// A response of `status` whose body is `body`, of `content_type`.
fn reply_of(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Body> {
    let mut reply = Response::new(Full::new(body).boxed());
    *reply.status_mut() = status;
    reply
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    reply
}

/// Serves MCP over Streamable HTTP until `shutdown` is cancelled, and the dashboard
/// beside it at `/` (with tokens); then stops accepting, ends the sessions, and gives
/// open connections a few seconds to finish.
pub async fn serve(
    server: Server,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let app = server.app().clone();
    listen(Some(server), app, options, shutdown).await
}

/// Serves the dashboard alone, over `app`'s database, which a stdio server may be using
/// too; until `shutdown` is cancelled. Without a tokens file, the holder of the token made
/// at start is the machine's local user, who sees every run, as at the terminal; the
/// link that signs a browser in is printed on stdout.
pub async fn serve_pages(
    app: App,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        !matches!(options.auth, Auth::Off),
        "the dashboard needs sign-in: serve it with a tokens file, or with the token made at start"
    );
    listen(None, app, options, shutdown).await
}

/// Serves MCP (given a server) and the dashboard on `options.addr`.
async fn listen(
    server: Option<Server>,
    app: App,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    options.check()?;
    // A run started over MCP, or started or retried from a page, counts against its
    // caller's cap.
    let app = app.with_max_runs(options.max_runs);
    let listener = TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("cannot listen on {}", options.addr))?;
    let local = listener.local_addr()?;
    // The per-principal caps keep the principals of a tokens file from each other; a
    // server with one principal (the token made at start) has the totals alone.
    let per_principal = |cap: usize| match options.auth {
        Auth::File { .. } | Auth::OAuth(_) => cap,
        Auth::Generated | Auth::Off => usize::MAX,
    };
    let sessions = Arc::new(Bounded::new(
        LocalSessionManager::default(),
        options.max_sessions,
        Owners::new(per_principal(options.max_sessions_per_principal)),
    ));
    let max_listened = server.as_ref().map_or(
        crate::server::DEFAULT_MAX_SUBSCRIPTIONS,
        Server::max_subscriptions,
    );
    let mcp = server.map(|server| {
        let config = StreamableHttpServerConfig::default()
            // The gate has checked `Host` for every path already, one rule for all.
            .disable_allowed_hosts()
            .with_allowed_origins(options.allowed_origins())
            .enforce_origin_validation()
            .with_max_request_body_bytes(rewrite::MAX_BODY)
            .with_cancellation_token(shutdown.child_token());
        let server = server.with_caps(
            app.clone(),
            Slots::new(
                options.max_result_waits,
                per_principal(options.max_result_waits_per_principal),
            ),
        );
        StreamableHttpService::new(
            move || Ok(server.for_session().observed()),
            sessions.clone(),
            config,
        )
    });
    let pages_only = mcp.is_none();
    let url = format!("http://{local}/mcp");
    let resource = match &options.auth {
        Auth::OAuth(oauth) => {
            let audience = oauth.audience.clone().unwrap_or_else(|| url.clone());
            let operations = (!pages_only).then(|| Operations::new(app.clone()));
            Some(Arc::new(oauth::Resource::new(oauth, audience, operations)?))
        }
        _ => None,
    };
    let (keys, hangups, generated) = match &options.auth {
        Auth::File { path, tokens } => {
            // Watched before the address is announced: SIGHUP's default ends the process.
            let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
                .context("cannot watch for SIGHUP, which reloads the tokens file")?;
            let keys = Keys::new(tokens.clone(), Some(path.clone()));
            (Some(Arc::new(keys)), Some(hangups), None)
        }
        Auth::Generated => {
            let (tokens, token) = Tokens::generate();
            if !pages_only {
                announce_token(&url, &token);
            }
            (Some(Arc::new(Keys::new(tokens, None))), None, Some(token))
        }
        Auth::OAuth(_) => (None, None, None),
        Auth::Off => {
            tracing::warn!(
                "serving HTTP without tokens (--http-no-auth): every local user, and every \
                     container that shares this host's network, may call every tool as this \
                     server's user; the dashboard, which needs sign-in, is not served"
            );
            (None, None, None)
        }
    };
    if let (Some(hangups), Some(keys)) = (hangups, &keys) {
        let reload =
            reload::reload_on_hangup(hangups, keys.clone(), sessions.clone(), shutdown.clone());
        tokio::spawn(reload);
    }
    // A live page's stream is one of the server's streams, as an MCP stream is; a failed
    // sign-in counts against its address on the pages and at /mcp alike.
    let streams = Slots::new(
        options.max_streams,
        per_principal(options.max_streams_per_principal),
    );
    let throttle = Arc::new(Throttle::new(options.free_sign_in_failures));
    let issuer = match (&options.auth, &resource) {
        (Auth::OAuth(oauth), Some(resource)) => Some(resource.sign_in(oauth)),
        _ => None,
    };
    let signs_in = keys.is_some() || issuer.is_some();
    let web = signs_in.then(|| {
        let viewer = match (&options.auth, pages_only) {
            (Auth::Generated, true) => Viewer::Local,
            _ => Viewer::Principal,
        };
        let setup = web::Setup {
            keys: keys.clone(),
            issuer,
            viewer,
            max_logins_per_principal: options.max_logins_per_principal,
            streams: streams.clone(),
            throttle: throttle.clone(),
        };
        web::mount(app.clone(), setup)
    });
    if let Some(web) = &web {
        let oauth = matches!(options.auth, Auth::OAuth(_));
        announce_dashboard(
            local,
            &*web.one_time_code,
            generated.as_deref(),
            pages_only,
            oauth,
        );
    }
    let pages = web.map(|web| web.handler);
    let gate = Arc::new(Gate {
        hosts: options.allowed_hosts(),
        keys,
        oauth: resource.clone(),
        sessions,
        streams,
        mcp,
        pages,
        throttle,
        max_listened,
    });
    tracing::info!(
        address = %local,
        auth = match options.auth {
            Auth::File { .. } => "tokens file",
            Auth::Generated => "generated token",
            Auth::Off => "none",
            Auth::OAuth(_) => "oauth",
        },
        max_connections = options.connections.max,
        "{}",
        match pages_only {
            true => format!("serving the dashboard at http://{local}/"),
            false => format!("serving MCP over Streamable HTTP at {url}"),
        }
    );
    // Told after the address: a log line of the issuer's URL must not come first.
    if let Some(resource) = resource {
        tokio::spawn(discover(resource));
    }
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

/// Finds the issuer's metadata at start, so that an issuer that cannot be reached, or
/// is not the one configured, is told in the log before the first client comes.
async fn discover(resource: Arc<oauth::Resource>) {
    let validator = &resource.validator;
    match validator.metadata().await {
        Ok(_) => tracing::info!(
            issuer = validator.issuer(),
            audience = validator.audience(),
            "OAuth: tokens of this issuer, for this audience, are taken"
        ),
        Err(error) => tracing::warn!(
            "OAuth: {error}; tokens cannot be checked until it is found (tried again as \
             tokens come, at most once per --oauth-jwks-min-refresh)"
        ),
    }
}

/// Tells where the dashboard is: with the token made at start, a one-time link that signs
/// a browser in; with OAuth, that a person signs in through the issuer. `ui` says it on stdout, its output; `serve` on stderr, beside the token.
fn announce_dashboard(
    local: SocketAddr,
    one_time_code: &dyn Fn(&str) -> Option<String>,
    token: Option<&str>,
    pages_only: bool,
    oauth: bool,
) {
    let base = format!("http://{local}");
    let how = match oauth {
        true => "sign in through the OAuth issuer",
        false => "sign in with a token of the tokens file",
    };
    let text = match token.and_then(|t| Some((t, one_time_code(t)?))) {
        Some((token, code)) => format!(
            "The dashboard: open {base}/login?code={code}\n\
             (the link signs one browser in, once, within 15 minutes; to sign in again, give\n\
             {base}/login the token {})\n",
            if pages_only { token } else { "above" }
        ),
        None => format!("The dashboard: {base}/ ({how})\n"),
    };
    if pages_only {
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
    } else {
        let _ = std::io::stderr()
            .lock()
            .write_all(format!("{text}\n").as_bytes());
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
