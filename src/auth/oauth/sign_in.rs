//! A person signed in to the dashboard through the issuer: the authorization code grant
//! with PKCE (S256), the server a confidential client (`--oauth-client-id`). `start`
//! keeps the attempt's `state` and PKCE verifier on the server, bound to a random value
//! the browser holds in a cookie, and gives the address at the issuer to send the
//! browser to; `finish` takes the issuer's answer at `/login/callback`: the attempt of
//! that `state` and that browser, spent once, within ten minutes; `iss` equal to the
//! issuer when given (and required when the issuer says it sends it, RFC 9207); the code
//! exchanged at the token endpoint with the verifier and this resource (RFC 8707); and the
//! access token checked by the same checks as any bearer token.
//!
//! Invariant: a code, a verifier, the client's secret and the access token are never
//! logged, never shown, and kept no longer than the exchange.

use std::sync::Arc;

use base64::Engine as _;

use super::config::{Client, Kind, Scopes};
use super::fetch::FetchError;
use super::pending::{Attempt, Pending};
use super::{Grant, Validator};
use crate::auth::{ClientAddr, digest, random_hex};

/// Why a sign-in did not happen: what the person is told, nothing secret.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("the issuer cannot be reached now; try again shortly")]
    Unavailable,
    #[error("the issuer publishes no {0}, which sign-in needs")]
    NoEndpoint(&'static str),
    #[error(
        "this sign-in was not started in this browser, was used already, or took too long; sign in again"
    )]
    UnknownAttempt,
    #[error("the answer comes from another issuer than this server's")]
    OtherIssuer,
    #[error("the issuer refused the sign-in: {0}")]
    Refused(String),
    #[error("the issuer's token was not taken: {0}")]
    BadToken(super::Refused),
    #[error("the issuer did not grant the scope {0}, which the dashboard needs")]
    NoReadScope(String),
}

/// A sign-in started: where to send the browser, and the value of its binding cookie.
pub struct Started {
    pub location: String,
    pub binding: String,
}

/// What the issuer's answer at the callback carries.
#[derive(Debug, Default)]
pub struct Callback {
    pub state: Option<String>,
    pub code: Option<String>,
    pub iss: Option<String>,
    pub error: Option<String>,
    /// The value of the browser's binding cookie.
    pub binding: Option<String>,
}

/// The dashboard's sign-in through the issuer.
pub struct BrowserSignIn {
    validator: Arc<Validator>,
    client: Client,
    scopes: Scopes,
    redirect_uri: String,
    pending: Pending,
}

impl BrowserSignIn {
    /// Sign-in as `client`, coming back to `redirect_uri`, tokens checked by `validator`,
    /// with at most `max_pending` attempts kept between their start and their callback.
    pub fn new(
        validator: Arc<Validator>,
        client: Client,
        scopes: Scopes,
        redirect_uri: String,
        max_pending: usize,
    ) -> BrowserSignIn {
        BrowserSignIn {
            validator,
            client,
            scopes,
            redirect_uri,
            pending: Pending::new(max_pending),
        }
    }

    /// The issuer's identifier.
    pub fn issuer(&self) -> &str {
        self.validator.issuer()
    }

    /// Starts an attempt for a browser at `from`: the address at the issuer to send the
    /// browser to.
    pub async fn start(&self, from: Option<ClientAddr>) -> Result<Started, SignInError> {
        let metadata = self
            .validator
            .metadata()
            .await
            .map_err(|_| SignInError::Unavailable)?;
        let endpoint = (metadata.authorization_endpoint.as_deref())
            .ok_or(SignInError::NoEndpoint("authorization endpoint"))?;
        let (state, verifier, binding) = (random_hex(), random_hex(), random_hex());
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(<sha2::Sha256 as sha2::Digest>::digest(verifier.as_bytes()));
        let scope = self.scopes.all().join(" ");
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.client.id)
            .append_pair("redirect_uri", &self.redirect_uri)
            .append_pair("scope", &scope)
            .append_pair("state", &state)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", self.validator.audience())
            .finish();
        let separator = if endpoint.contains('?') { '&' } else { '?' };
        let attempt = Attempt::new(digest(binding.as_bytes()), verifier, from);
        self.pending.keep(digest(state.as_bytes()), attempt);
        Ok(Started {
            location: format!("{endpoint}{separator}{query}"),
            binding,
        })
    }

    /// Finishes the attempt the callback names: the grant of the token the code is
    /// exchanged for.
    pub async fn finish(&self, callback: &Callback) -> Result<Grant, SignInError> {
        let state = callback.state.as_deref().unwrap_or_default();
        let attempt = self.pending.take(digest(state.as_bytes()));
        let binding = callback.binding.as_deref().map(|b| digest(b.as_bytes()));
        let Some(attempt) = attempt.filter(|a| Some(a.binding) == binding) else {
            return Err(SignInError::UnknownAttempt);
        };
        let metadata = self
            .validator
            .metadata()
            .await
            .map_err(|_| SignInError::Unavailable)?;
        match &callback.iss {
            Some(iss) if iss != self.issuer() => return Err(SignInError::OtherIssuer),
            None if metadata.returns_iss => return Err(SignInError::OtherIssuer),
            _ => {}
        }
        if let Some(error) = &callback.error {
            return Err(SignInError::Refused(shown(error)));
        }
        let code = callback.code.as_deref().unwrap_or_default();
        let endpoint = (metadata.token_endpoint.as_deref())
            .ok_or(SignInError::NoEndpoint("token endpoint"))?;
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.redirect_uri.as_str()),
            ("code_verifier", attempt.verifier.as_str()),
            ("resource", self.validator.audience()),
        ];
        let client = Some((self.client.id.as_str(), self.client.secret.0.as_str()));
        let answer = match self
            .validator
            .fetcher()
            .post_form(endpoint, &form, client)
            .await
        {
            Ok(answer) => answer,
            Err(FetchError::Status { body, .. }) => {
                let error = body.as_ref().and_then(|b| b["error"].as_str());
                return Err(SignInError::Refused(shown(
                    error.unwrap_or("no reason given"),
                )));
            }
            Err(error) => {
                tracing::warn!("the dashboard's sign-in: {error}");
                return Err(SignInError::Unavailable);
            }
        };
        let token = answer["access_token"].as_str().unwrap_or_default();
        let grant = self
            .validator
            .validate(token.as_bytes())
            .await
            .map_err(SignInError::BadToken)?;
        let read = self.scopes.of(Kind::Read);
        if !grant.scopes.iter().any(|s| s == read) {
            return Err(SignInError::NoReadScope(read.to_owned()));
        }
        Ok(grant)
    }
}

/// An issuer's error code as it may be shown: its first 64 characters of the RFC 6749
/// error alphabet.
fn shown(error: &str) -> String {
    error
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "_-. ".contains(*c))
        .take(64)
        .collect()
}

impl Grant {
    /// The principal it names.
    pub fn principal(&self) -> &str {
        &self.principal.0
    }

    /// How long its token lasts from now, by its `exp`; `None` when the token gives none.
    pub(crate) fn lasts(&self) -> Option<std::time::Duration> {
        let left = self.expires?.saturating_sub(super::unix_now());
        Some(std::time::Duration::from_secs(left))
    }
}
