//! The OAuth 2.1 resource server's checks: who a bearer access token names and what its
//! scopes grant. A JWT is checked here against the issuer's keys (found from its
//! metadata, `issuer.rs`; cached and refreshed with a rate limit, `jwks.rs`; checked in
//! `jwt.rs`); an opaque token, when the operator configured it, at the issuer's
//! introspection endpoint (`introspect.rs`). The HTTP client all of them share is
//! `fetch.rs`; the operator's options are `config.rs`; the dashboard's sign-in through
//! the issuer (the authorization code grant with PKCE) is `sign_in.rs`.
//!
//! Invariant: a token is never logged, never echoed, never sent anywhere but to the
//! introspection endpoint the operator named (no passthrough): what is refused is told
//! by a [`Refused`] that holds nothing of it.
//!
//! Invariant: a token is taken only when it was issued by the configured issuer, for
//! this resource (`aud`), is within its lifetime, and names a principal; a JWT only when
//! signed by one of the issuer's keys with an allowed algorithm that key admits.

mod config;
mod fetch;
mod introspect;
mod issuer;
mod jwks;
mod jwt;
mod pending;
mod sign_in;

use std::sync::Arc;

use serde_json::{Map, Value};

pub use config::{
    Client, DEFAULT_ALGORITHMS, DEFAULT_SCOPES, Kind, Needs, OAuthOptions, Scopes, Secret,
    parse_algorithms,
};
pub(crate) use fetch::Fetcher;
pub(crate) use issuer::{DiscoveryError, Metadata};
pub use pending::DEFAULT_SIGN_INS_PENDING;
pub use sign_in::{BrowserSignIn, Callback};

use super::Principal;

/// The longest token looked at; a longer one is refused unread.
pub const MAX_TOKEN: usize = 16 * 1024;

/// The longest principal a claim may name (it is kept with every audit row).
const MAX_PRINCIPAL: usize = 256;

/// What a valid token grants: its principal, and its scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub(crate) principal: Principal,
    pub(crate) scopes: Vec<String>,
    /// When the token ends, by its `exp`, in seconds since the Unix epoch; `None` when an
    /// opaque token's introspection gives no `exp`.
    pub(crate) expires: Option<u64>,
}

/// Why a token was not taken. It holds nothing of the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("longer than {MAX_TOKEN} bytes")]
    TooLong,
    #[error("not a well-formed bearer token or JWT")]
    Malformed,
    #[error("signed with an algorithm not allowed, or not one its key admits")]
    Algorithm,
    #[error("its `typ` is not an access token's")]
    Type,
    #[error("signed by a key the issuer does not publish")]
    UnknownKey,
    #[error("its signature does not verify")]
    Signature,
    #[error("expired")]
    Expired,
    #[error("not valid yet")]
    NotYetValid,
    #[error("issued by another issuer")]
    Issuer,
    #[error("issued for another audience")]
    Audience,
    #[error("without a claim it must have (`exp`, `iss`, `aud`)")]
    MissingClaim,
    #[error("its principal claim is missing, not a string, or too long")]
    NoPrincipal,
    #[error("not a JWT, and no introspection endpoint is configured")]
    Opaque,
    #[error("not active, says the introspection endpoint")]
    Inactive,
    #[error("the issuer cannot be reached to check it")]
    Unavailable,
}

impl Refused {
    /// Whether the fault is the server's (its issuer unreachable), not the token's.
    pub fn is_unavailable(self) -> bool {
        self == Refused::Unavailable
    }
}

/// Seconds since the epoch, as tokens count time.
fn unix_now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// The checks of one resource server.
pub struct Validator {
    issuer: issuer::Issuer,
    audience: String,
    principal_claim: String,
    algorithms: Vec<jsonwebtoken::Algorithm>,
    keys: jwks::KeySet,
    introspection: Option<introspect::Introspection>,
    fetcher: Fetcher,
}

impl Validator {
    /// The checks `options` describe, for tokens issued for `audience` (the resolved one).
    pub fn new(options: &OAuthOptions, audience: String) -> anyhow::Result<Validator> {
        let fetcher = Fetcher::new()?;
        let introspection = match (&options.introspection_url, &options.client) {
            (Some(url), Some(client)) => Some(introspect::Introspection::new(
                url.clone(),
                client.clone(),
                fetcher.clone(),
                options.introspection_cache,
            )),
            _ => None,
        };
        Ok(Validator {
            issuer: issuer::Issuer::new(
                options.issuer.clone(),
                fetcher.clone(),
                options.jwks_min_refresh,
            ),
            audience,
            principal_claim: options.principal_claim.clone(),
            algorithms: options.algorithms.clone(),
            keys: jwks::KeySet::new(
                fetcher.clone(),
                options.jwks_min_refresh,
                options.jwks_max_age,
            ),
            introspection,
            fetcher,
        })
    }

    /// The audience tokens must name.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// The issuer's identifier.
    pub fn issuer(&self) -> &str {
        &self.issuer.issuer
    }

    /// The issuer's metadata, discovered at the first need.
    pub(crate) async fn metadata(&self) -> Result<Arc<Metadata>, DiscoveryError> {
        self.issuer.metadata().await
    }

    /// The client the server talks to its issuer with.
    pub(crate) fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// What `token` grants, or why it grants nothing.
    pub async fn validate(&self, token: &[u8]) -> Result<Grant, Refused> {
        if token.len() > MAX_TOKEN {
            return Err(Refused::TooLong);
        }
        let token = std::str::from_utf8(token).map_err(|_| Refused::Malformed)?;
        if !is_b64token(token) {
            return Err(Refused::Malformed);
        }
        let claims = match jwt::header(token)? {
            Some(header) => self.jwt_claims(token, &header).await?,
            None => match &self.introspection {
                Some(introspection) => {
                    let claims = introspection.claims(token).await?;
                    self.check_introspected(&claims)?;
                    claims
                }
                None => return Err(Refused::Opaque),
            },
        };
        self.grant(&claims)
    }

    async fn jwt_claims(
        &self,
        token: &str,
        header: &jsonwebtoken::Header,
    ) -> Result<Map<String, Value>, Refused> {
        jwt::admissible(header, &self.algorithms)?;
        let metadata = self.issuer.metadata().await.map_err(|error| {
            tracing::warn!("cannot check a token: {error}");
            Refused::Unavailable
        })?;
        let key = self
            .keys
            .key(&metadata.jwks_uri, header.kid.as_deref(), header.alg)
            .await
            .ok_or(Refused::UnknownKey)?;
        jwt::claims(token, key.key(), header.alg, self.issuer(), &self.audience)
    }

    /// The checks of a JWT's claims, made on an introspection's answer: `iss` when given,
    /// `aud` always, `exp` and `nbf` when given.
    fn check_introspected(&self, claims: &Map<String, Value>) -> Result<(), Refused> {
        if let Some(iss) = claims.get("iss")
            && iss.as_str() != Some(self.issuer())
        {
            return Err(Refused::Issuer);
        }
        let audience = self.audience.as_str();
        let names_us = match claims.get("aud") {
            Some(Value::String(aud)) => aud == audience,
            Some(Value::Array(auds)) => auds.iter().any(|aud| aud.as_str() == Some(audience)),
            _ => false,
        };
        if !names_us {
            return Err(Refused::Audience);
        }
        let now = unix_now();
        const LEEWAY: u64 = 60;
        if let Some(exp) = claims.get("exp").and_then(Value::as_u64)
            && exp + LEEWAY < now
        {
            return Err(Refused::Expired);
        }
        if let Some(nbf) = claims.get("nbf").and_then(Value::as_u64)
            && nbf > now + LEEWAY
        {
            return Err(Refused::NotYetValid);
        }
        Ok(())
    }

    /// The principal and scopes of checked claims.
    fn grant(&self, claims: &Map<String, Value>) -> Result<Grant, Refused> {
        let principal = claims
            .get(&self.principal_claim)
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty() && p.len() <= MAX_PRINCIPAL)
            .filter(|p| !p.chars().any(char::is_control))
            .ok_or(Refused::NoPrincipal)?;
        Ok(Grant {
            principal: Principal(principal.to_owned()),
            scopes: scopes(claims),
            expires: claims.get("exp").and_then(Value::as_u64),
        })
    }
}

/// The scopes of a token's claims: `scope`, space-separated (RFC 9068), or `scp`, an
/// array or a string (as some issuers give them).
fn scopes(claims: &Map<String, Value>) -> Vec<String> {
    let split = |text: &str| text.split_whitespace().map(str::to_owned).collect();
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(scope)), _) => split(scope),
        (_, Some(Value::Array(scp))) => scp
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        (_, Some(Value::String(scp))) => split(scp),
        _ => Vec::new(),
    }
}

/// Whether `token` has the syntax of RFC 6750's `b64token`.
fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let of = |claims: Value| scopes(claims.as_object().unwrap());
        assert_eq!(of(json!({"scope": "a  b"})), ["a", "b"]);
        assert_eq!(of(json!({"scp": ["a", "b", 3]})), ["a", "b"]);
        assert_eq!(of(json!({"scp": "a b"})), ["a", "b"]);
        assert_eq!(of(json!({"scope": "a", "scp": ["b"]})), ["a"]);
        assert!(of(json!({})).is_empty());
    }

    #[test]
    fn a_bearer_token_has_the_b64token_syntax() {
        assert!(is_b64token("abc.DEF-_~+/=="));
        for bad in ["", "==", "a b", "a\"b", "a,b", "tok\u{e9}n"] {
            assert!(!is_b64token(bad), "{bad}");
        }
    }
}
