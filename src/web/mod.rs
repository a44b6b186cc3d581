//! The dashboard: pages to follow and steer runs in a browser, served at `/` beside `/mcp`
//! (`serve --http`) or alone over a database a stdio server also uses (`ui`). A face like
//! `server/`: each page calls the same application operations as MCP and the terminal,
//! for the caller its login names (`auth.rs`), and holds no rule of its own.
//!
//! Invariant: every page but the sign-in page and the assets needs a live login; a request
//! without one is sent to sign in (GET) or refused (anything else).
//!
//! Invariant: every state-changing request (a POST) carries an `Origin` of this server's
//! own host; a cross-site one is refused before it is read.
//!
//! Invariant: every text reaches the page escaped: pages are maud templates, which escape
//! whatever is not marked `PreEscaped`, and nothing from the store or the request is.

mod actions;
mod audit;
mod dag;
mod form;
mod format;
mod gantt;
mod live;
mod oauth;
mod page;
mod run;
mod run_nodes;
mod runs;
pub(crate) mod sign_in;
mod todos;
mod workflows;

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use crate::app::{App, Caller};
use crate::auth::{self, ClientAddr, Keys, Throttle};
use crate::slots::{self, Slot, Slots};
pub(crate) use oauth::IssuerSignIn;
pub(crate) use sign_in::{DEFAULT_MAX_LOGINS_PER_PRINCIPAL, Viewer};

type Body = BoxBody<Bytes, Infallible>;

/// The largest form a page posts.
const MAX_FORM: usize = 256 * 1024;

/// Serves one request of the pages.
pub(crate) type Handler =
    Arc<dyn Fn(Request<Incoming>) -> BoxFuture<'static, Response<Body>> + Send + Sync>;

/// Makes the code of a one-time sign-in link for the holder of a token.
pub(crate) type LinkCodes = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The dashboard as a server mounts it: what serves its requests, and what makes the code
/// of a one-time sign-in link for the holder of a token. The server looks into neither.
pub(crate) struct Mounted {
    pub(crate) handler: Handler,
    pub(crate) one_time_code: LinkCodes,
}

/// The dashboard of `app`, ready to mount. Starts the watcher of live updates, so it is
/// made on the runtime.
pub(crate) fn mount(app: App, setup: Setup) -> Mounted {
    let web = Arc::new(Web::new(app, setup));
    let serving = web.clone();
    Mounted {
        handler: Arc::new(move |request| {
            let web = serving.clone();
            Box::pin(async move { web.handle(request).await })
        }),
        one_time_code: Arc::new(move |token| web.one_time_code(token)),
    }
}

/// The dashboard of one server.
struct Web {
    app: App,
    live: live::Live,
    sign_in: sign_in::SignIn,
    /// The server's SSE streams, which a live page's stream counts among, in all and for
    /// its principal.
    streams: Arc<Slots>,
    /// Failed sign-ins by address, shared with the bearer tokens of MCP.
    throttle: Arc<Throttle>,
    /// With OAuth, sign-in through the issuer instead of with a token.
    issuer: Option<IssuerSignIn>,
}

/// What the dashboard is given besides the application: who signs in, and the limits it
/// shares with MCP.
pub(crate) struct Setup {
    /// The server's tokens, which a person signs in with; `None` with OAuth.
    pub(crate) keys: Option<Arc<Keys>>,
    /// With OAuth, the issuer a person signs in through.
    pub(crate) issuer: Option<IssuerSignIn>,
    pub(crate) viewer: Viewer,
    pub(crate) max_logins_per_principal: usize,
    pub(crate) streams: Arc<Slots>,
    pub(crate) throttle: Arc<Throttle>,
}

/// A request as the pages see it: its method, path, query and headers, and who made it.
struct Asked<'a> {
    method: &'a Method,
    path: &'a str,
    query: Vec<(String, String)>,
    caller: Caller,
}

impl Asked<'_> {
    /// The value of query parameter `name`, if given and not empty.
    fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(key, value)| key == name && !value.is_empty())
            .map(|(_, value)| value.as_str())
    }
}

impl Web {
    /// The dashboard of `app`, whose browsers sign in with `setup.keys`. Starts the
    /// watcher of live updates, so it is made on the runtime.
    fn new(app: App, setup: Setup) -> Web {
        Web {
            live: live::Live::start(&app),
            app,
            sign_in: sign_in::SignIn::new(setup.keys, setup.viewer, setup.max_logins_per_principal),
            streams: setup.streams,
            throttle: setup.throttle,
            issuer: setup.issuer,
        }
    }

    /// A one-time link's code for the holder of `token`; see
    /// [`sign_in::SignIn::one_time_code`].
    fn one_time_code(&self, token: &str) -> Option<String> {
        self.sign_in.one_time_code(token.as_bytes())
    }

    /// Serves one request for a page, an asset or an action; the gate has checked its
    /// `Host`.
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        if request.method() == Method::POST && !same_origin(request.headers()) {
            return plain(StatusCode::FORBIDDEN, "a cross-site request is refused\n");
        }
        let path = request.uri().path().to_owned();
        let query = parse_form(request.uri().query().unwrap_or("").as_bytes());
        match (request.method(), path.as_str()) {
            (&Method::GET, "/assets/dashboard.css") => return page::stylesheet(),
            (&Method::GET, "/assets/dashboard.js") => return page::script(),
            (&Method::GET, "/login") if let Some(issuer) = &self.issuer => {
                return issuer.page(StatusCode::OK, None);
            }
            (&Method::GET, "/login/start") if let Some(issuer) = &self.issuer => {
                return issuer.start(&request).await;
            }
            (&Method::GET, "/login/callback") if let Some(issuer) = &self.issuer => {
                return issuer
                    .callback(&request, &self.sign_in, &self.throttle)
                    .await;
            }
            (&Method::POST, "/login") if let Some(issuer) = &self.issuer => {
                let problem = "This server signs people in through its issuer, not with a token.";
                return issuer.page(StatusCode::FORBIDDEN, Some(problem));
            }
            (&Method::GET, "/login") => {
                let address = request.extensions().get::<ClientAddr>().copied();
                return match query.iter().find(|(key, _)| key == "code") {
                    Some((_, code)) => self.redeem(code, address),
                    None => page::html(StatusCode::OK, page::sign_in_page(None)),
                };
            }
            (&Method::POST, "/login") => {
                let address = request.extensions().get::<ClientAddr>().copied();
                let form = read_form(request).await;
                return self.sign_in(form, address);
            }
            (&Method::POST, "/logout") => {
                self.sign_in.sign_out(request.headers());
                let mut reply = see_other("/login");
                set_header(&mut reply, header::SET_COOKIE, &sign_in::clear_cookie());
                return reply;
            }
            _ => {}
        }
        let Some(caller) = self.sign_in.caller(request.headers()) else {
            return match *request.method() {
                Method::GET | Method::HEAD => see_other("/login"),
                _ => plain(StatusCode::FORBIDDEN, "sign in first\n"),
            };
        };
        let method = request.method().clone();
        let form = match method {
            Method::POST => read_form(request).await,
            _ => Ok(Vec::new()),
        };
        let asked = Asked {
            method: &method,
            path: &path,
            query,
            caller,
        };
        match form {
            Ok(form) => self.route(&asked, form).await,
            Err(reply) => reply,
        }
    }

    /// The pages and actions of a signed-in browser.
    async fn route(&self, asked: &Asked<'_>, form: Vec<(String, String)>) -> Response<Body> {
        let segments: Vec<&str> = asked.path.trim_matches('/').split('/').collect();
        match (asked.method, segments.as_slice()) {
            (&Method::GET, [""]) => runs::list(&self.app, asked),
            (&Method::GET, ["live"]) => match self.stream_slot(&asked.caller) {
                Ok(slot) => runs::list_live(&self.app, asked, &self.live, slot),
                Err(busy) => *busy,
            },
            (&Method::GET, ["runs", run_id]) => run::show(&self.app, asked, run_id),
            (&Method::GET, ["runs", run_id, "live"]) => match self.stream_slot(&asked.caller) {
                Ok(slot) => run::show_live(&self.app, asked, &self.live, run_id, slot),
                Err(busy) => *busy,
            },
            (&Method::GET, ["runs", run_id, "files", node]) => {
                run::file(&self.app, &asked.caller, run_id, node)
            }
            (&Method::POST, ["runs", run_id, "cancel"]) => {
                actions::cancel(&self.app, &asked.caller, run_id).await
            }
            (&Method::POST, ["runs", run_id, "retry"]) => {
                actions::retry(&self.app, &asked.caller, run_id)
            }
            (&Method::POST, ["runs", run_id, "answer"]) => {
                actions::answer(&self.app, &asked.caller, run_id, &form)
            }
            (&Method::GET, ["workflows"]) => workflows::list(&self.app),
            (&Method::GET, ["workflows", name]) => workflows::show(&self.app, name),
            (&Method::POST, ["workflows", name, "start"]) => {
                workflows::start(&self.app, &asked.caller, name, &form)
            }
            (&Method::GET, ["todos"]) => todos::list(&self.app, asked).await,
            (&Method::GET, ["audit"]) => audit::list(&self.app, asked),
            (&Method::POST, ["todos", id, "complete"]) => {
                todos::complete(&self.app, &asked.caller, id).await
            }
            (&Method::GET, ["todos", id, "delete"]) => todos::confirm_delete(id),
            (&Method::POST, ["todos", id, "delete"]) => {
                todos::delete(&self.app, &asked.caller, id, &form).await
            }
            _ => page::html(StatusCode::NOT_FOUND, page::not_found()),
        }
    }

    /// A slot among the server's SSE streams for a live page of `caller`; `Err` is the
    /// 503 to answer when the streams in all, or the caller's principal's, are taken.
    fn stream_slot(&self, caller: &Caller) -> Result<Slot, Box<Response<Body>>> {
        self.streams.take(caller.principal()).map_err(|full| {
            let text = match full {
                slots::Full::All => "too many open streams; close a page or retry later\n",
                slots::Full::Principal => {
                    "too many open streams for this principal \
                     (--http-max-streams-per-principal); close a page or retry later\n"
                }
            };
            let mut reply = plain(StatusCode::SERVICE_UNAVAILABLE, text);
            set_header(&mut reply, header::RETRY_AFTER, "5");
            Box::new(reply)
        })
    }

    fn sign_in(
        &self,
        form: Result<Vec<(String, String)>, Response<Body>>,
        address: Option<ClientAddr>,
    ) -> Response<Body> {
        if let Err(wait) = self.throttle.check(address) {
            return too_many_failures(wait);
        }
        let Ok(form) = form else {
            return page::html(StatusCode::BAD_REQUEST, page::sign_in_page(Some(BAD_FORM)));
        };
        let token = form.iter().find(|(key, _)| key == "token");
        let cookie = token.and_then(|(_, token)| self.sign_in.sign_in(token.trim().as_bytes()));
        match cookie {
            Some(cookie) => signed_in(&cookie),
            None => {
                self.throttle.failed(address);
                page::html(
                    StatusCode::UNAUTHORIZED,
                    page::sign_in_page(Some("That token is not one of this server's.")),
                )
            }
        }
    }

    fn redeem(&self, code: &str, address: Option<ClientAddr>) -> Response<Body> {
        if let Err(wait) = self.throttle.check(address) {
            return too_many_failures(wait);
        }
        match self.sign_in.redeem(code) {
            Some(cookie) => signed_in(&cookie),
            None => {
                self.throttle.failed(address);
                page::html(
                    StatusCode::UNAUTHORIZED,
                    page::sign_in_page(Some(
                        "That sign-in link was used already or has expired; sign in with a token.",
                    )),
                )
            }
        }
    }
}

/// Whether a POST comes from a page of this server: its `Origin` is an `http` or `https`
/// origin of the host the request was sent to. A browser sends `Origin` with every POST;
/// a request without one did not come from a page and is refused too.
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &http::HeaderValue| v.to_str().ok())
    };
    let (Some(origin), Some(host)) = (text(header::ORIGIN), text(header::HOST)) else {
        return false;
    };
    let Some((scheme, origin_host)) = origin.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https") && origin_host.eq_ignore_ascii_case(host)
}

/// 429 for an address that failed to sign in too often: the sign-in page, saying so.
fn too_many_failures(wait: std::time::Duration) -> Response<Body> {
    let mut reply = page::html(
        StatusCode::TOO_MANY_REQUESTS,
        page::sign_in_page(Some(
            "Too many failed sign-ins from this address; wait a little before trying again.",
        )),
    );
    set_header(&mut reply, header::RETRY_AFTER, &auth::retry_after(wait));
    reply
}

const BAD_FORM: &str = "That form could not be read.";

/// The pairs of a URL-encoded form or query.
fn parse_form(bytes: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(bytes).into_owned().collect()
}

/// The fields of a POSTed form; `Err` is the reply when it is too long or unreadable.
async fn read_form(request: Request<Incoming>) -> Result<Vec<(String, String)>, Response<Body>> {
    let body = Limited::new(request.into_body(), MAX_FORM);
    match body.collect().await {
        Ok(collected) => Ok(parse_form(&collected.to_bytes())),
        Err(_) => Err(plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the form is too long\n",
        )),
    }
}

/// Sends a just signed-in browser to the runs, holding its login.
fn signed_in(cookie: &str) -> Response<Body> {
    let mut reply = see_other("/");
    set_header(&mut reply, header::SET_COOKIE, &sign_in::set_cookie(cookie));
    reply
}

fn set_header(reply: &mut Response<Body>, name: header::HeaderName, value: &str) {
    if let Ok(value) = value.parse() {
        reply.headers_mut().insert(name, value);
    }
}

/// 303 to `location`: where a browser goes after a form, or to sign in.
fn see_other(location: &str) -> Response<Body> {
    let mut reply = Response::new(Full::new(Bytes::new()).boxed());
    *reply.status_mut() = StatusCode::SEE_OTHER;
    set_header(&mut reply, header::LOCATION, location);
    reply
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut reply = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *reply.status_mut() = status;
    set_header(
        &mut reply,
        header::CONTENT_TYPE,
        "text/plain; charset=utf-8",
    );
    reply
}
