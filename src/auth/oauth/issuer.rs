//! The issuer's metadata (RFC 8414, or OpenID Connect Discovery): where its keys are,
//! where a browser signs in, where codes are exchanged. Found at the first need and kept;
//! a failed discovery is tried again at most once per `--oauth-jwks-min-refresh`.
//!
//! Invariant: metadata is taken only when its `issuer` is exactly the one configured
//! (RFC 8414 §3.3), and only with URLs the server may fetch (`https`, or `http` to
//! loopback).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::config::checked_url;
use super::fetch::{FetchError, Fetcher};

/// What the server uses of the issuer's metadata.
#[derive(Debug, Clone)]
pub(crate) struct Metadata {
    pub(crate) jwks_uri: String,
    pub(crate) authorization_endpoint: Option<String>,
    pub(crate) token_endpoint: Option<String>,
    /// Whether it says it returns `iss` with its authorization responses (RFC 9207).
    pub(crate) returns_iss: bool,
}

/// Why the issuer's metadata cannot be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DiscoveryError {
    #[error("no metadata of issuer {issuer} could be read: {tried}")]
    NotFound { issuer: String, tried: String },
    #[error("the metadata at {url} names issuer `{found}`, not `{issuer}`")]
    OtherIssuer {
        url: String,
        found: String,
        issuer: String,
    },
    #[error("the metadata at {url}: {why}")]
    Invalid { url: String, why: String },
    #[error("the issuer's metadata was not found a moment ago; it is tried again shortly")]
    Waiting,
}

/// The issuer, its metadata once found.
pub(crate) struct Issuer {
    pub(crate) issuer: String,
    fetcher: Fetcher,
    retry_after: Duration,
    found: tokio::sync::Mutex<Found>,
}

#[derive(Default)]
struct Found {
    metadata: Option<Arc<Metadata>>,
    last_try: Option<Instant>,
}

impl Issuer {
    pub(crate) fn new(issuer: String, fetcher: Fetcher, retry_after: Duration) -> Issuer {
        Issuer {
            issuer,
            fetcher,
            retry_after,
            found: tokio::sync::Mutex::default(),
        }
    }

    /// The metadata, discovered now if it has not been.
    pub(crate) async fn metadata(&self) -> Result<Arc<Metadata>, DiscoveryError> {
        let mut found = self.found.lock().await;
        if let Some(metadata) = &found.metadata {
            return Ok(metadata.clone());
        }
        if found
            .last_try
            .is_some_and(|at| at.elapsed() < self.retry_after)
        {
            return Err(DiscoveryError::Waiting);
        }
        found.last_try = Some(Instant::now());
        let metadata = Arc::new(self.discover().await?);
        found.metadata = Some(metadata.clone());
        Ok(metadata)
    }

    /// Tries each well-known address in turn: RFC 8414's (the well-known path before the
    /// issuer's path), OpenID Connect's (after it), then RFC 8414's after it, which some
    /// servers answer.
    async fn discover(&self) -> Result<Metadata, DiscoveryError> {
        let mut tried = Vec::new();
        for url in well_known_urls(&self.issuer) {
            match self.fetcher.get_json(&url).await {
                Ok(document) => return self.read(&url, &document),
                Err(error @ (FetchError::Status { .. } | FetchError::NotJson { .. })) => {
                    tried.push(error.to_string());
                }
                Err(error) => {
                    return Err(DiscoveryError::NotFound {
                        issuer: self.issuer.clone(),
                        tried: error.to_string(),
                    });
                }
            }
        }
        Err(DiscoveryError::NotFound {
            issuer: self.issuer.clone(),
            tried: tried.join("; "),
        })
    }

    fn read(&self, url: &str, document: &Value) -> Result<Metadata, DiscoveryError> {
        let found = document["issuer"].as_str().unwrap_or_default();
        if found != self.issuer {
            return Err(DiscoveryError::OtherIssuer {
                url: url.to_owned(),
                found: found.to_owned(),
                issuer: self.issuer.clone(),
            });
        }
        let invalid = |why: String| DiscoveryError::Invalid {
            url: url.to_owned(),
            why,
        };
        let endpoint = |name: &str| -> Result<Option<String>, DiscoveryError> {
            match document.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) => checked_url(name, text)
                    .map(|_| Some(text.clone()))
                    .map_err(invalid),
                Some(_) => Err(invalid(format!("`{name}` is not a string"))),
            }
        };
        let jwks_uri = endpoint("jwks_uri")?.ok_or_else(|| invalid("no `jwks_uri`".to_owned()))?;
        Ok(Metadata {
            jwks_uri,
            authorization_endpoint: endpoint("authorization_endpoint")?,
            token_endpoint: endpoint("token_endpoint")?,
            returns_iss: document["authorization_response_iss_parameter_supported"] == true,
        })
    }
}

/// The addresses of the issuer's metadata, in the order they are tried.
fn well_known_urls(issuer: &str) -> Vec<String> {
    let trimmed = issuer.trim_end_matches('/');
    let mut urls = Vec::new();
    if let Ok(url) = url::Url::parse(issuer) {
        let path = url.path().trim_end_matches('/');
        let origin = url.origin().ascii_serialization();
        urls.push(format!(
            "{origin}/.well-known/oauth-authorization-server{path}"
        ));
    }
    for url in [
        format!("{trimmed}/.well-known/openid-configuration"),
        format!("{trimmed}/.well-known/oauth-authorization-server"),
    ] {
        if !urls.contains(&url) {
            urls.push(url);
        }
    }
    urls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_rfc_8414_and_openid_connect_put_it() {
        assert_eq!(
            well_known_urls("https://id.example"),
            [
                "https://id.example/.well-known/oauth-authorization-server",
                "https://id.example/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            well_known_urls("https://id.example/realms/tasks"),
            [
                "https://id.example/.well-known/oauth-authorization-server/realms/tasks",
                "https://id.example/realms/tasks/.well-known/openid-configuration",
                "https://id.example/realms/tasks/.well-known/oauth-authorization-server",
            ]
        );
    }
}
