//! Who a browser is. A person signs in once with a token of the server (the tokens file's,
//! or the one made at start), on the sign-in page or by the one-time link the server
//! prints, or with OAuth through the issuer (`oauth.rs`); the browser then holds a login
//! cookie (`HttpOnly`, `SameSite=Strict`) that names the principal, and is asked for
//! nothing else.
//!
//! Invariant: a login made with a token lasts while its token does: a token taken out of
//! the tokens file (SIGHUP) ends the logins made with it at their next request, and a
//! login made through the issuer ends when its access token's `exp` passes.
//!
//! Invariant: neither a token nor a login's cookie is kept or compared as text: both are
//! kept as SHA-256 digests, as the tokens file's tokens are (`transport/http/tokens.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;
use parking_lot::Mutex;

use crate::app::Caller;
use crate::auth::{Keys, Principal, TokenDigest, digest};

/// The name of the login cookie.
pub(super) const COOKIE: &str = "mts_login";

/// How long a login lasts without a request.
const IDLE: Duration = Duration::from_secs(12 * 3600);

/// How long a one-time link may wait to be opened.
const LINK_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// At most this many logins of one principal are kept unless told otherwise; past it that
/// principal's least recently used goes, and no other principal's.
pub(crate) const DEFAULT_MAX_LOGINS_PER_PRINCIPAL: usize = 64;

/// Whom a browser signed in with a token of the server stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Viewer {
    /// The principal of the token, as over MCP: it sees its own runs.
    Principal,
    /// The one local user, as at the terminal and over stdio: it sees every run. This is
    /// `ui` without a tokens file, where the token made at start is the only one.
    Local,
}

/// One signed-in browser.
struct Login {
    principal: Principal,
    /// The digest of the token it signed in with, which must still be in force.
    token: TokenDigest,
    last_seen: Instant,
    /// When it ends whatever its use: its token's end, for a login through the issuer.
    until: Option<Instant>,
}

impl Login {
    /// Whether it is still in use and its token has not ended, at `now`.
    fn live(&self, now: Instant) -> bool {
        now.duration_since(self.last_seen) < IDLE && self.until.is_none_or(|until| now < until)
    }
}

/// The sign-ins of one server.
pub(super) struct SignIn {
    /// The server's tokens; `None` with OAuth, whose logins are made through the issuer.
    keys: Option<Arc<Keys>>,
    viewer: Viewer,
    /// The most logins one principal keeps.
    per_principal: usize,
    /// By the digest of their cookie.
    logins: Mutex<HashMap<TokenDigest, Login>>,
    /// One-time links not yet opened, by the digest of their code.
    links: Mutex<HashMap<TokenDigest, (Principal, TokenDigest, Instant)>>,
}

impl SignIn {
    pub(super) fn new(keys: Option<Arc<Keys>>, viewer: Viewer, per_principal: usize) -> SignIn {
        SignIn {
            keys,
            viewer,
            per_principal: per_principal.max(1),
            logins: Mutex::default(),
            links: Mutex::default(),
        }
    }

    /// A new login for the holder of `token`, as the cookie's value; `None` if the token
    /// is not one of the server's.
    pub(super) fn sign_in(&self, token: &[u8]) -> Option<String> {
        let (principal, token) = self.keys.as_ref()?.principal(token)?;
        Some(self.open_login(principal, token, None))
    }

    /// A one-time code for the holder of `token` (which must be in force): opening the
    /// link that carries it signs a browser in, once, within a quarter of an hour.
    pub(crate) fn one_time_code(&self, token: &[u8]) -> Option<String> {
        let (principal, token) = self.keys.as_ref()?.principal(token)?;
        let code = crate::auth::random_hex();
        let expires = Instant::now() + LINK_LIFETIME;
        let mut links = self.links.lock();
        links.retain(|_, (_, _, until)| *until > Instant::now());
        links.insert(digest(code.as_bytes()), (principal, token, expires));
        Some(code)
    }

    /// Signs in with a one-time code, which is spent.
    pub(super) fn redeem(&self, code: &str) -> Option<String> {
        let (principal, token, expires) = self.links.lock().remove(&digest(code.as_bytes()))?;
        (expires > Instant::now() && self.in_force(&token))
            .then(|| self.open_login(principal, token, None))
    }

    /// Whether the token a login was made with is still one of the server's; with OAuth,
    /// whose logins name no token, always.
    fn in_force(&self, token: &TokenDigest) -> bool {
        self.keys.as_ref().is_none_or(|keys| keys.holds(token))
    }

    /// A new login of `principal`, made with the token of digest `token`, which ends
    /// `lasts` from now if given, as the cookie's value.
    pub(super) fn open_login(
        &self,
        principal: Principal,
        token: TokenDigest,
        lasts: Option<Duration>,
    ) -> String {
        let cookie = crate::auth::random_hex();
        let mut logins = self.logins.lock();
        let now = Instant::now();
        logins.retain(|_, login| login.live(now));
        // A principal's new login pushes out its own least recently used, never another's.
        let mine: Vec<(TokenDigest, Instant)> = logins
            .iter()
            .filter(|(_, login)| login.principal == principal)
            .map(|(key, login)| (*key, login.last_seen))
            .collect();
        if mine.len() >= self.per_principal
            && let Some((oldest, _)) = mine.iter().min_by_key(|(_, seen)| *seen)
        {
            logins.remove(oldest);
        }
        let login = Login {
            principal,
            token,
            last_seen: now,
            until: lasts.map(|lasts| now + lasts),
        };
        logins.insert(digest(cookie.as_bytes()), login);
        cookie
    }

    /// The caller a request's login cookie names, if it names a live login.
    pub(super) fn caller(&self, headers: &HeaderMap) -> Option<Caller> {
        let cookie = login_cookie(headers)?;
        let key = digest(cookie.as_bytes());
        let mut logins = self.logins.lock();
        let login = logins.get_mut(&key)?;
        let now = Instant::now();
        if !login.live(now) || !self.in_force(&login.token) {
            logins.remove(&key);
            return None;
        }
        login.last_seen = now;
        Some(match self.viewer {
            Viewer::Local => Caller::default(),
            Viewer::Principal => Caller::remote(Some(login.principal.0.clone()), None),
        })
    }

    /// Ends the login a request's cookie names.
    pub(super) fn sign_out(&self, headers: &HeaderMap) {
        if let Some(cookie) = login_cookie(headers) {
            self.logins.lock().remove(&digest(cookie.as_bytes()));
        }
    }
}

/// The value of the login cookie among the request's cookies.
fn login_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// The `Set-Cookie` value of a login.
pub(super) fn set_cookie(value: &str) -> String {
    format!("{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict")
}

/// The `Set-Cookie` value that ends a login in the browser.
pub(super) fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}
