//! The OAuth 2.1 resource server's face over HTTP (`--oauth-issuer`): its protected-
//! resource metadata (RFC 9728) at the well-known addresses, the `WWW-Authenticate`
//! challenges of a missing, bad or too narrow token (RFC 6750, with the metadata's
//! address and the scopes to ask for), and the scopes each request needs
//! (`server/operations.rs`). The tokens themselves are checked by `auth/oauth`.
//!
//! Invariant: the metadata is served at exactly its addresses (no prefix matching), to
//! anyone, and only with OAuth on; without it, every `/.well-known/` address is 404, so a
//! client that finds no OAuth discovery uses the static token it was given.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use serde_json::json;

use super::{Body, plain, reply_of};
use crate::auth::oauth::{BrowserSignIn, Needs, OAuthOptions, Scopes, Validator};
use crate::server::operations::Operations;

/// The root of the protected-resource metadata's addresses.
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// One resource server.
pub(super) struct Resource {
    pub(super) validator: Arc<Validator>,
    scopes: Scopes,
    /// The metadata document, made once.
    metadata: Bytes,
    /// The paths it is served at.
    metadata_paths: Vec<String>,
    /// Its absolute URL, for challenges.
    metadata_url: String,
    /// The kinds of operation of MCP messages; `None` where MCP is not served (`ui`).
    operations: Option<Operations>,
}

impl Resource {
    /// The resource server of `options`, for tokens issued for `audience`.
    pub(super) fn new(
        options: &OAuthOptions,
        audience: String,
        operations: Option<Operations>,
    ) -> anyhow::Result<Resource> {
        let url = url::Url::parse(&audience)?;
        let origin = url.origin().ascii_serialization();
        let path = url.path().trim_end_matches('/');
        let mut metadata_paths = vec![WELL_KNOWN.to_owned(), format!("{WELL_KNOWN}/mcp")];
        let path_aware = format!("{WELL_KNOWN}{path}");
        if !metadata_paths.contains(&path_aware) {
            metadata_paths.push(path_aware.clone());
        }
        let metadata = json!({
            "resource": audience,
            "authorization_servers": [options.issuer],
            "scopes_supported": options.scopes.all(),
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-task-server",
        });
        Ok(Resource {
            validator: Arc::new(Validator::new(options, audience.clone())?),
            scopes: options.scopes.clone(),
            metadata: Bytes::from(metadata.to_string()),
            metadata_paths,
            metadata_url: format!("{origin}{path_aware}"),
            operations,
        })
    }

    /// The dashboard's sign-in through the issuer: back at `<public URL>/login/callback`
    /// (the public URL given, or the audience's origin), possible with the server's own
    /// client at the issuer.
    pub(super) fn sign_in(&self, options: &OAuthOptions) -> crate::web::IssuerSignIn {
        let audience = url::Url::parse(self.validator.audience()).ok();
        let origin = audience.map(|url| url.origin().ascii_serialization());
        let base = options.public_url.clone().or(origin).unwrap_or_default();
        let redirect_uri = format!("{}/login/callback", base.trim_end_matches('/'));
        let sign_in = options.client.clone().map(|client| {
            Arc::new(BrowserSignIn::new(
                self.validator.clone(),
                client,
                self.scopes.clone(),
                redirect_uri.clone(),
                options.sign_ins_pending,
            ))
        });
        crate::web::IssuerSignIn {
            issuer: options.issuer.clone(),
            redirect_uri,
            sign_in,
        }
    }

    /// The metadata, if `path` is one of its addresses; browsers may read it from any
    /// origin (a web client discovers the issuer from it).
    pub(super) fn metadata(&self, method: &Method, path: &str) -> Option<Response<Body>> {
        if !self.metadata_paths.iter().any(|p| p == path) {
            return None;
        }
        let mut reply = match *method {
            Method::GET | Method::HEAD => {
                reply_of(StatusCode::OK, "application/json", self.metadata.clone())
            }
            Method::OPTIONS => {
                let mut reply = plain(StatusCode::NO_CONTENT, "");
                let headers = reply.headers_mut();
                headers.insert(
                    header::ACCESS_CONTROL_ALLOW_METHODS,
                    HeaderValue::from_static("GET, HEAD, OPTIONS"),
                );
                headers.insert(
                    header::ACCESS_CONTROL_ALLOW_HEADERS,
                    HeaderValue::from_static("*"),
                );
                reply
            }
            _ => plain(StatusCode::METHOD_NOT_ALLOWED, "GET the metadata\n"),
        };
        reply.headers_mut().insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        Some(reply)
    }

    /// The kinds of operation a POSTed body needs; every kind where no MCP is served.
    pub(super) fn needs(&self, body: &[u8]) -> Needs {
        self.operations
            .as_ref()
            .map_or(Needs::ALL, |operations| operations.needs(body))
    }

    /// Whether `granted` covers `needs`.
    pub(super) fn covers(&self, granted: &[String], needs: Needs) -> bool {
        self.scopes.cover(granted, needs)
    }

    /// 401 for a request without a token (`given` false) or with one refused, naming
    /// the metadata and every scope, which a client asks for to do everything.
    pub(super) fn unauthorized(&self, given: bool) -> Response<Body> {
        let (text, error) = match given {
            true => ("the bearer token is not valid\n", Some("invalid_token")),
            false => ("a bearer token is required\n", None),
        };
        let mut reply = plain(StatusCode::UNAUTHORIZED, text);
        let challenge = self.challenge(error, &self.scopes.all());
        insert_challenge(&mut reply, &challenge);
        reply
    }

    /// 403 for a token whose scopes do not cover `needs`, naming the scopes it takes.
    pub(super) fn insufficient(&self, needs: Needs) -> Response<Body> {
        let mut reply = plain(
            StatusCode::FORBIDDEN,
            "the token's scopes do not cover this request\n",
        );
        let challenge = self.challenge(Some("insufficient_scope"), &self.scopes.needed(needs));
        insert_challenge(&mut reply, &challenge);
        reply
    }

    /// 400 for a request that carries its token in the query string, which is never read.
    pub(super) fn token_in_query(&self) -> Response<Body> {
        let mut reply = plain(
            StatusCode::BAD_REQUEST,
            "a token in the URL is refused: send it in the Authorization header\n",
        );
        let challenge = self.challenge(Some("invalid_request"), &self.scopes.all());
        insert_challenge(&mut reply, &challenge);
        reply
    }

    /// A `Bearer` challenge with the metadata's address, the scopes, and `error`.
    fn challenge(&self, error: Option<&str>, scopes: &[&str]) -> String {
        let mut challenge = format!(
            "Bearer resource_metadata=\"{}\"",
            quoted(&self.metadata_url)
        );
        if !scopes.is_empty() {
            challenge.push_str(&format!(", scope=\"{}\"", quoted(&scopes.join(" "))));
        }
        if let Some(error) = error {
            challenge.push_str(&format!(", error=\"{error}\""));
        }
        challenge
    }
}

/// 503 for a token that could not be checked: the issuer cannot be reached.
pub(super) fn issuer_unavailable() -> Response<Body> {
    let mut reply = plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "the token cannot be checked now: the issuer cannot be reached\n",
    );
    reply
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    reply
}

/// 404 for an address under `/.well-known/` the server does not serve.
pub(super) fn not_served() -> Response<Body> {
    plain(StatusCode::NOT_FOUND, "not found\n")
}

/// Whether `path` is under `/.well-known/`.
pub(super) fn is_well_known(path: &str) -> bool {
    path.starts_with("/.well-known/")
}

/// Whether a request's query names an `access_token` (RFC 6750 §2.3), whose value is not
/// read.
pub(super) fn has_query_token(query: Option<&str>) -> bool {
    query.is_some_and(|query| {
        form_urlencoded::parse(query.as_bytes()).any(|(name, _)| name == "access_token")
    })
}

fn insert_challenge(reply: &mut Response<Body>, challenge: &str) {
    if let Ok(value) = HeaderValue::from_str(challenge) {
        reply.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
}

/// `text` as the inside of a quoted-string: `"` and `\` escaped (RFC 9110 §5.6.4).
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_value_escapes_quotes_and_backslashes() {
        assert_eq!(quoted(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(quoted("https://x/.well-known/y"), "https://x/.well-known/y");
    }

    #[test]
    fn a_token_named_in_the_query_is_found_by_its_name_only() {
        assert!(has_query_token(Some("access_token=abc")));
        assert!(has_query_token(Some("x=1&access_token")));
        assert!(has_query_token(Some("access%5Ftoken=abc")));
        assert!(!has_query_token(Some("token=abc")));
        assert!(!has_query_token(None));
    }
}
