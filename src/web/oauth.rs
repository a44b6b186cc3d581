//! The dashboard's sign-in through the OAuth issuer, when the server takes its tokens
//! (`--oauth-issuer`): the sign-in page with its button (or, without the server's own
//! client at the issuer, how to enable it), `/login/start`, which sends the browser to
//! the issuer, and `/login/callback`, where it comes back; the grant itself is
//! `auth/oauth/sign_in.rs`. A person signed in holds the same login cookie as one signed
//! in with a token, naming the principal of the issuer's access token.
//!
//! Invariant: an attempt is finished only in the browser that started it: it holds a
//! random value in a cookie of its own (`SameSite=Lax`, so that it comes back with the
//! issuer's redirect), which the attempt is bound to; a callback without it, or with
//! another attempt's `state`, signs nobody in and counts as a failed sign-in.

use std::sync::Arc;

use http::{HeaderMap, Request, Response, StatusCode, header};
use hyper::body::Incoming;

use super::{Body, page, set_header, sign_in};
use crate::auth::oauth::{BrowserSignIn, Callback};
use crate::auth::{ClientAddr, Throttle, digest};

/// The cookie that binds an attempt to its browser.
const BINDING: &str = "mts_signin";

/// Sign-in through the issuer, as the dashboard is given it.
pub(crate) struct IssuerSignIn {
    pub(crate) issuer: String,
    /// Where the issuer sends the browser back.
    pub(crate) redirect_uri: String,
    /// `None` without the server's own client at the issuer: sign-in is not possible.
    pub(crate) sign_in: Option<Arc<BrowserSignIn>>,
}

impl IssuerSignIn {
    /// The sign-in page, with `problem` told.
    pub(super) fn page(&self, status: StatusCode, problem: Option<&str>) -> Response<Body> {
        let enabled = self.sign_in.is_some();
        let markup = page::issuer_sign_in_page(&self.issuer, &self.redirect_uri, enabled, problem);
        page::html(status, markup)
    }

    /// `/login/start`: sends the browser to the issuer, holding the attempt's binding.
    pub(super) async fn start(&self, request: &Request<Incoming>) -> Response<Body> {
        let Some(sign_in) = &self.sign_in else {
            return self.page(StatusCode::NOT_FOUND, None);
        };
        let from = request.extensions().get::<ClientAddr>().copied();
        match sign_in.start(from).await {
            Ok(started) => {
                let mut reply = super::see_other(&started.location);
                let cookie = format!(
                    "{BINDING}={}; Path=/login; HttpOnly; SameSite=Lax; Max-Age=600",
                    started.binding
                );
                set_header(&mut reply, header::SET_COOKIE, &cookie);
                reply
            }
            Err(error) => self.page(StatusCode::SERVICE_UNAVAILABLE, Some(&error.to_string())),
        }
    }

    /// `/login/callback`: the issuer's answer; a login for the principal of the access
    /// token its code is exchanged for.
    pub(super) async fn callback(
        &self,
        request: &Request<Incoming>,
        sign_in: &sign_in::SignIn,
        throttle: &Throttle,
    ) -> Response<Body> {
        let Some(browser) = &self.sign_in else {
            return self.page(StatusCode::NOT_FOUND, None);
        };
        let address = request.extensions().get::<ClientAddr>().copied();
        if let Err(wait) = throttle.check(address) {
            return super::too_many_failures(wait);
        }
        let callback = callback_of(request);
        match browser.finish(&callback).await {
            Ok(grant) => {
                // The login ends with the access token it was made from.
                let login = sign_in.open_login(grant.principal.clone(), digest(b""), grant.lasts());
                tracing::debug!(
                    principal = grant.principal(),
                    "signed in through the issuer"
                );
                let mut reply = page::html(StatusCode::OK, page::signed_in_page());
                let headers = reply.headers_mut();
                for cookie in [sign_in::set_cookie(&login), clear_binding()] {
                    if let Ok(value) = cookie.parse() {
                        headers.append(header::SET_COOKIE, value);
                    }
                }
                reply
            }
            Err(error) => {
                throttle.failed(address);
                let mut reply = self.page(StatusCode::UNAUTHORIZED, Some(&error.to_string()));
                set_header(&mut reply, header::SET_COOKIE, &clear_binding());
                reply
            }
        }
    }
}

/// The issuer's answer in a callback's query, and the browser's binding.
fn callback_of(request: &Request<Incoming>) -> Callback {
    let mut callback = Callback {
        binding: cookie(request.headers(), BINDING).map(str::to_owned),
        ..Callback::default()
    };
    let query = request.uri().query().unwrap_or_default();
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        let slot = match name.as_ref() {
            "state" => &mut callback.state,
            "code" => &mut callback.code,
            "iss" => &mut callback.iss,
            "error" => &mut callback.error,
            _ => continue,
        };
        slot.get_or_insert_with(|| value.into_owned());
    }
    callback
}

/// The value of cookie `name` among the request's cookies.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

fn clear_binding() -> String {
    format!("{BINDING}=; Path=/login; HttpOnly; SameSite=Lax; Max-Age=0")
}
