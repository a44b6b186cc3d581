//! Opaque access tokens, checked at the issuer's introspection endpoint (RFC 7662) with
//! the server's client credentials; each answer kept for `--oauth-introspection-cache`
//! by the token's digest, so that a client's calls cost the issuer one request a while.
//!
//! Invariant: the token is sent to the introspection endpoint the operator named and
//! nowhere else, and kept only as its digest.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::Refused;
use super::config::Client;
use super::fetch::Fetcher;
use crate::auth::{TokenDigest, digest};

/// The most answers kept at once; past it, the expired go, then the oldest.
const MAX_CACHED: usize = 10_000;

/// What introspection answered of a token: its members when active.
type Answer = Result<Map<String, Value>, Refused>;

/// The introspection endpoint and what it answered lately.
pub(super) struct Introspection {
    url: String,
    client: Client,
    fetcher: Fetcher,
    keep: Duration,
    /// By the token's digest: until when, and what.
    answers: Mutex<HashMap<TokenDigest, (Instant, Answer)>>,
}

impl Introspection {
    pub(super) fn new(url: String, client: Client, fetcher: Fetcher, keep: Duration) -> Self {
        Introspection {
            url,
            client,
            fetcher,
            keep,
            answers: Mutex::default(),
        }
    }

    /// The claims of an active `token` (the introspection response's members), which
    /// the caller checks as it checks a JWT's.
    pub(super) async fn claims(&self, token: &str) -> Result<Map<String, Value>, Refused> {
        let key = digest(token.as_bytes());
        if let Some((until, answer)) = self.answers.lock().get(&key)
            && *until > Instant::now()
        {
            return answer.clone();
        }
        let answer = self.ask(token).await;
        // An issuer that cannot be reached answered nothing to keep.
        if !matches!(answer, Err(Refused::Unavailable)) {
            self.keep(key, answer.clone());
        }
        answer
    }

    async fn ask(&self, token: &str) -> Result<Map<String, Value>, Refused> {
        let form = [("token", token), ("token_type_hint", "access_token")];
        let client = Some((self.client.id.as_str(), self.client.secret.0.as_str()));
        let answer = match self.fetcher.post_form(&self.url, &form, client).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::warn!("token introspection failed: {error}");
                return Err(Refused::Unavailable);
            }
        };
        let Value::Object(members) = answer else {
            return Err(Refused::Unavailable);
        };
        if members.get("active") != Some(&Value::Bool(true)) {
            return Err(Refused::Inactive);
        }
        Ok(members)
    }

    fn keep(&self, key: TokenDigest, answer: Answer) {
        let now = Instant::now();
        let mut until = now + self.keep;
        // Never past the token's own expiry.
        if let Ok(claims) = &answer
            && let Some(exp) = claims.get("exp").and_then(Value::as_u64)
        {
            let left = exp.saturating_sub(super::unix_now());
            until = until.min(now + Duration::from_secs(left));
        }
        let mut answers = self.answers.lock();
        if answers.len() >= MAX_CACHED {
            answers.retain(|_, (until, _)| *until > now);
            if answers.len() >= MAX_CACHED
                && let Some(oldest) = answers.iter().min_by_key(|(_, (u, _))| *u).map(|(k, _)| *k)
            {
                answers.remove(&oldest);
            }
        }
        answers.insert(key, (until, answer));
    }
}
