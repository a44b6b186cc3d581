//! An authorization server of the test's own, on a loopback port: its RFC 8414 metadata,
//! a JWKS of the keys it publishes now (counting each fetch), an RFC 7662 introspection
//! endpoint for the opaque tokens the test registers, and a token endpoint that
//! exchanges the codes the test registers. Access tokens are signed in the test with
//! the keys of this folder (RSA and EC, made with openssl for these tests alone).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// The client the server signs browsers in as, and introspects with.
pub(crate) const CLIENT_ID: &str = "tasks-dashboard";
pub(crate) const CLIENT_SECRET: &str = "dashboard-secret-9f2c4e7b1a3d";

/// A signing key of the issuer.
struct Key {
    encoding: EncodingKey,
    algorithm: Algorithm,
    jwk: Value,
}

fn key(kid: &str, pem: &[u8], algorithm: Algorithm) -> Key {
    let encoding = match algorithm {
        Algorithm::ES256 => EncodingKey::from_ec_pem(pem).unwrap(),
        _ => EncodingKey::from_rsa_pem(pem).unwrap(),
    };
    let mut jwk =
        serde_json::to_value(Jwk::from_encoding_key(&encoding, algorithm).unwrap()).unwrap();
    jwk["kid"] = json!(kid);
    jwk["use"] = json!("sig");
    Key {
        encoding,
        algorithm,
        jwk,
    }
}

/// A code the token endpoint exchanges once.
pub(crate) struct Code {
    pub(crate) verifier_challenge: String,
    pub(crate) redirect_uri: String,
    pub(crate) resource: String,
    pub(crate) access_token: String,
}

#[derive(Default)]
struct State {
    /// The key ids the JWKS lists now.
    published: Vec<String>,
    jwks_fetches: usize,
    /// Introspection's answers, by token.
    opaque: HashMap<String, Value>,
    codes: HashMap<String, Code>,
    /// The forms the token endpoint was sent, for the test to look at.
    token_requests: Vec<HashMap<String, String>>,
}

/// The issuer, serving until dropped.
pub(crate) struct Issuer {
    pub(crate) url: String,
    keys: Arc<HashMap<String, Key>>,
    state: Arc<Mutex<State>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Issuer {
    /// Serves on a loopback port, publishing `rsa-1` and `ec-1`.
    pub(crate) fn start() -> Issuer {
        let here = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/http/oauth");
        let read = |name: &str| std::fs::read(format!("{here}/{name}.pem")).unwrap();
        let keys: HashMap<String, Key> = [
            ("rsa-1", Algorithm::RS256),
            ("rsa-2", Algorithm::RS256),
            ("ec-1", Algorithm::ES256),
        ]
        .into_iter()
        .map(|(kid, alg)| (kid.to_owned(), key(kid, &read(kid), alg)))
        .collect();
        let state = Arc::new(Mutex::new(State {
            published: vec!["rsa-1".to_owned(), "ec-1".to_owned()],
            ..State::default()
        }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let url = format!("http://{addr}");
        let keys = Arc::new(keys);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let serving = Serving {
            url: url.clone(),
            keys: keys.clone(),
            state: state.clone(),
        };
        std::thread::spawn(move || serving.run(listener, addr, stopped));
        Issuer {
            url,
            keys,
            state,
            _stop: stop,
        }
    }

    /// An access token signed with `kid`'s key, of these claims.
    pub(crate) fn sign(&self, kid: &str, claims: &Value) -> String {
        let key = &self.keys[kid];
        let mut header = Header::new(key.algorithm);
        header.kid = Some(kid.to_owned());
        header.typ = Some("at+jwt".to_owned());
        jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
    }

    /// The claims of a good token of `sub` for `audience`, with `scope`.
    pub(crate) fn claims(&self, sub: &str, audience: &str, scope: &str) -> Value {
        let now = now();
        json!({"iss": self.url, "sub": sub, "aud": audience, "scope": scope,
               "iat": now, "exp": now + 600, "client_id": "test-client"})
    }

    /// The public key of `kid` as a JWK.
    pub(crate) fn jwk(&self, kid: &str) -> Value {
        self.keys[kid].jwk.clone()
    }

    /// The JWKS lists these keys from now on.
    pub(crate) fn publish(&self, kids: &[&str]) {
        self.state.lock().unwrap().published = kids.iter().map(|k| (*k).to_owned()).collect();
    }

    /// How many times the JWKS was fetched.
    pub(crate) fn jwks_fetches(&self) -> usize {
        self.state.lock().unwrap().jwks_fetches
    }

    /// Introspection answers `answer` for `token`.
    pub(crate) fn register_opaque(&self, token: &str, answer: Value) {
        self.state
            .lock()
            .unwrap()
            .opaque
            .insert(token.to_owned(), answer);
    }

    /// The token endpoint exchanges `code` once.
    pub(crate) fn register_code(&self, code: &str, registered: Code) {
        self.state
            .lock()
            .unwrap()
            .codes
            .insert(code.to_owned(), registered);
    }

    /// The forms the token endpoint was sent.
    pub(crate) fn token_requests(&self) -> Vec<HashMap<String, String>> {
        self.state.lock().unwrap().token_requests.clone()
    }
}

pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The S256 challenge of a PKCE verifier.
pub(crate) fn s256(verifier: &str) -> String {
    use sha2::Digest as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// What the serving thread holds.
#[derive(Clone)]
struct Serving {
    url: String,
    keys: Arc<HashMap<String, Key>>,
    state: Arc<Mutex<State>>,
}

impl Serving {
    fn run(
        self,
        listener: std::net::TcpListener,
        _addr: SocketAddr,
        mut stopped: tokio::sync::oneshot::Receiver<()>,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let accepted = tokio::select! {
                    _ = &mut stopped => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, _)) = accepted else { continue };
                let serving = self.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let serving = serving.clone();
                        async move { Ok::<_, Infallible>(serving.answer(request).await) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
    }

    async fn answer(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = request.uri().path().to_owned();
        let authorization = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = request.into_body().collect().await.unwrap().to_bytes();
        let form: HashMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
        match path.as_str() {
            "/.well-known/oauth-authorization-server" => json_reply(json!({
                "issuer": self.url,
                "jwks_uri": format!("{}/jwks", self.url),
                "authorization_endpoint": format!("{}/authorize", self.url),
                "token_endpoint": format!("{}/token", self.url),
                "introspection_endpoint": format!("{}/introspect", self.url),
                "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": true,
            })),
            "/jwks" => {
                let mut state = self.state.lock().unwrap();
                state.jwks_fetches += 1;
                let keys: Vec<Value> = state
                    .published
                    .iter()
                    .map(|kid| self.keys[kid].jwk.clone())
                    .collect();
                json_reply(json!({"keys": keys}))
            }
            "/introspect" => {
                if authorization.as_deref() != Some(&basic(CLIENT_ID, CLIENT_SECRET)) {
                    return status(StatusCode::UNAUTHORIZED);
                }
                let state = self.state.lock().unwrap();
                let token = form.get("token").cloned().unwrap_or_default();
                json_reply(
                    state
                        .opaque
                        .get(&token)
                        .cloned()
                        .unwrap_or(json!({"active": false})),
                )
            }
            "/token" => self.token(authorization.as_deref(), form),
            _ => status(StatusCode::NOT_FOUND),
        }
    }

    /// The authorization-code grant: the client authenticated, the code known and
    /// spent, its PKCE verifier, redirect URI and resource those of the authorization.
    fn token(
        &self,
        authorization: Option<&str>,
        form: HashMap<String, String>,
    ) -> Response<Full<Bytes>> {
        let mut state = self.state.lock().unwrap();
        state.token_requests.push(form.clone());
        let invalid = |error: &str| {
            let mut reply = json_reply(json!({"error": error}));
            *reply.status_mut() = StatusCode::BAD_REQUEST;
            reply
        };
        if authorization != Some(&basic(CLIENT_ID, CLIENT_SECRET)) {
            return invalid("invalid_client");
        }
        if form.get("grant_type").map(String::as_str) != Some("authorization_code") {
            return invalid("unsupported_grant_type");
        }
        let Some(code) = form.get("code").and_then(|code| state.codes.remove(code)) else {
            return invalid("invalid_grant");
        };
        let verifier = form.get("code_verifier").cloned().unwrap_or_default();
        if s256(&verifier) != code.verifier_challenge
            || form.get("redirect_uri") != Some(&code.redirect_uri)
            || form.get("resource") != Some(&code.resource)
        {
            return invalid("invalid_grant");
        }
        json_reply(
            json!({"access_token": code.access_token, "token_type": "Bearer",
                          "expires_in": 600}),
        )
    }
}

fn basic(id: &str, secret: &str) -> String {
    let encode = |t: &str| form_urlencoded::byte_serialize(t.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", encode(id), encode(secret));
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

fn json_reply(value: Value) -> Response<Full<Bytes>> {
    let mut reply = Response::new(Full::new(Bytes::from(value.to_string())));
    reply
        .headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    reply
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut reply = Response::new(Full::new(Bytes::new()));
    *reply.status_mut() = code;
    reply
}
