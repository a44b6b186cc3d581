//! What an operator tells the resource server: the issuer it trusts, the audience its
//! tokens must name, the scope of each kind of operation, the claim that names a
//! principal, the algorithms it accepts, and how often it may go back to the issuer.
//! Every value is checked here, once, at start, and refused with a message that says why.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use jsonwebtoken::Algorithm;

/// The kinds of operation a token's scopes grant, each with a scope of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Initialising, listing and reading: tools, todos, runs, tasks, resources, prompts.
    Read,
    /// Adding, completing and deleting todos.
    Todos,
    /// Running workflows (and the workflows published as tools), and cancelling runs.
    Run,
    /// Answering the questions of runs.
    Answer,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Read, Kind::Todos, Kind::Run, Kind::Answer];

    /// Its name in `--oauth-scopes`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Todos => "todos",
            Kind::Run => "run",
            Kind::Answer => "answer",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// The kinds one request needs, all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs(u8);

impl Needs {
    /// Every kind: what a request that cannot be classified needs.
    pub const ALL: Needs = Needs(0b1111);

    pub fn of(kind: Kind) -> Needs {
        Needs(kind.bit())
    }

    pub fn with(self, kind: Kind) -> Needs {
        Needs(self.0 | kind.bit())
    }

    pub fn union(self, other: Needs) -> Needs {
        Needs(self.0 | other.0)
    }

    pub fn contains(self, kind: Kind) -> bool {
        self.0 & kind.bit() != 0
    }

    pub fn kinds(self) -> impl Iterator<Item = Kind> {
        Kind::ALL
            .into_iter()
            .filter(move |kind| self.contains(*kind))
    }
}

/// The scope that grants each kind of operation. Two kinds may share one scope (one
/// scope for everything, say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scopes {
    by_kind: [String; 4],
}

/// The scopes unless told otherwise, as `--oauth-scopes` takes them.
pub const DEFAULT_SCOPES: &str =
    "read=tasks:read,todos=tasks:todos,run=tasks:run,answer=tasks:answer";

impl Default for Scopes {
    fn default() -> Scopes {
        Scopes::parse(DEFAULT_SCOPES).expect("the default scopes parse")
    }
}

impl Scopes {
    /// `KIND=SCOPE` pairs separated by commas, e.g. `read=tasks:read,run=tasks:run`; the
    /// kinds are `read`, `todos`, `run` and `answer`, and a kind not named keeps its
    /// default scope. A scope is a scope-token of RFC 6749 (printable ASCII but the space,
    /// `"` and `\`).
    pub fn parse(text: &str) -> Result<Scopes, String> {
        let mut by_kind =
            ["tasks:read", "tasks:todos", "tasks:run", "tasks:answer"].map(String::from);
        let mut named = Vec::new();
        for pair in text
            .split(',')
            .map(str::trim)
            .filter(|pair| !pair.is_empty())
        {
            let Some((kind, scope)) = pair.split_once('=') else {
                return Err(format!(
                    "`{pair}` is not KIND=SCOPE (the kinds: read, todos, run, answer)"
                ));
            };
            let kind = kind.trim();
            let Some(kind) = Kind::ALL.into_iter().find(|k| k.name() == kind) else {
                return Err(format!(
                    "`{kind}` is not a kind of operation (read, todos, run, answer)"
                ));
            };
            if named.contains(&kind) {
                return Err(format!("the kind `{}` is named twice", kind.name()));
            }
            let scope = scope.trim();
            if !is_scope_token(scope) {
                return Err(format!(
                    "`{scope}` is not a scope: one or more printable ASCII characters but \
                     the space, `\"` and `\\` (RFC 6749)"
                ));
            }
            by_kind[kind as usize] = scope.to_owned();
            named.push(kind);
        }
        Ok(Scopes { by_kind })
    }

    /// The scope that grants `kind`.
    pub fn of(&self, kind: Kind) -> &str {
        &self.by_kind[kind as usize]
    }

    /// The scopes `needs` takes, each once, in the order of the kinds.
    pub fn needed(&self, needs: Needs) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for kind in needs.kinds() {
            let scope = self.of(kind);
            if !names.contains(&scope) {
                names.push(scope);
            }
        }
        names
    }

    /// Every scope, each once: what a client asks for to do everything.
    pub fn all(&self) -> Vec<&str> {
        self.needed(Needs::ALL)
    }

    /// Whether `granted` holds the scope of every kind `needs` names.
    pub fn cover(&self, granted: &[String], needs: Needs) -> bool {
        self.needed(needs)
            .iter()
            .all(|scope| granted.iter().any(|g| g == scope))
    }
}

/// Whether `text` is a scope-token of RFC 6749 §3.3.
fn is_scope_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// The algorithms accepted unless told otherwise: every asymmetric one the crypto
/// backend verifies.
pub const DEFAULT_ALGORITHMS: &str = "RS256,RS384,RS512,PS256,PS384,PS512,ES256,ES384,EdDSA";

/// A comma-separated list of JWS algorithms. `none` and the HMAC ones are refused: a
/// resource server holds the issuer's public keys, never a secret it shares.
pub fn parse_algorithms(text: &str) -> Result<Vec<Algorithm>, String> {
    let mut algorithms = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let algorithm: Algorithm = match name.parse() {
            Ok(algorithm) => algorithm,
            Err(_) if name.eq_ignore_ascii_case("none") => {
                return Err("`none` is not an algorithm a token may be signed with".to_owned());
            }
            Err(_) => {
                return Err(format!(
                    "`{name}` is not a JWS algorithm this server verifies ({DEFAULT_ALGORITHMS})"
                ));
            }
        };
        if matches!(
            algorithm,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(format!(
                "`{name}` signs with a shared secret; the server checks tokens with the \
                 issuer's public keys only"
            ));
        }
        if !algorithms.contains(&algorithm) {
            algorithms.push(algorithm);
        }
    }
    if algorithms.is_empty() {
        return Err("name at least one algorithm".to_owned());
    }
    Ok(algorithms)
}

/// A URL the server fetches from or names: `https`, or `http` to a loopback host (a
/// development issuer), without a fragment. Keys fetched in clear text from elsewhere
/// could be anyone's.
pub(crate) fn checked_url(what: &str, text: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(text).map_err(|e| format!("{what} `{text}` is not a URL: {e}"))?;
    if url.fragment().is_some() {
        return Err(format!("{what} `{text}` has a fragment"));
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        _ => Err(format!(
            "{what} `{text}` must be an https URL (http only to a loopback address)"
        )),
    }
}

/// Whether `url` names a loopback host.
pub(super) fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// A client's secret, read from a file; shown as `[secret]` in any debug output.
#[derive(Clone)]
pub struct Secret(pub(crate) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[secret]")
    }
}

impl Secret {
    /// The secret in a file only its owner may read (its first line, trimmed); refused,
    /// as the tokens file is, when its group or others may read or write it.
    pub fn from_file(path: &Path) -> anyhow::Result<Secret> {
        let file = std::fs::File::open(path).map_err(|e| {
            anyhow::anyhow!("cannot read client secret file {}: {e}", path.display())
        })?;
        let mode = file.metadata()?.permissions().mode();
        if mode & 0o077 != 0 {
            anyhow::bail!(
                "client secret file {path} may be read or written by others (mode {mode:04o}); \
                 make it private to this user with `chmod 600 {path}`",
                path = path.display(),
                mode = mode & 0o7777,
            );
        }
        let text = std::io::read_to_string(file).map_err(|e| {
            anyhow::anyhow!("cannot read client secret file {}: {e}", path.display())
        })?;
        let secret = text.lines().next().unwrap_or_default().trim();
        anyhow::ensure!(
            !secret.is_empty(),
            "client secret file {} is empty",
            path.display()
        );
        Ok(Secret(secret.to_owned()))
    }
}

/// The server's own client at the issuer: for introspection and the dashboard's sign-in.
#[derive(Debug, Clone)]
pub struct Client {
    pub id: String,
    pub secret: Secret,
}

/// How the resource server checks tokens, as the operator gave it.
#[derive(Debug, Clone)]
pub struct OAuthOptions {
    /// The issuer's identifier, exactly as its metadata and its tokens give it.
    pub issuer: String,
    /// This resource's canonical URI, which tokens must name in `aud`; `None` takes
    /// `http://<bound address>/mcp`, on loopback only.
    pub audience: Option<String>,
    pub scopes: Scopes,
    /// The claim whose value names the principal.
    pub principal_claim: String,
    pub algorithms: Vec<Algorithm>,
    /// The RFC 7662 endpoint opaque tokens are checked at; `None`: only JWTs are taken.
    pub introspection_url: Option<String>,
    /// The server's client at the issuer.
    pub client: Option<Client>,
    /// The JWKS is fetched at most once in this long, however many unknown key ids come.
    pub jwks_min_refresh: Duration,
    /// The keys are fetched again when they are this old, so that a key the issuer
    /// dropped is dropped here too.
    pub jwks_max_age: Duration,
    /// How long an introspection's answer is kept.
    pub introspection_cache: Duration,
    /// The base URL browsers reach the dashboard by, for its sign-in's redirect URI;
    /// `None` takes the audience's origin.
    pub public_url: Option<String>,
    /// The dashboard's sign-ins kept between their start and the issuer's callback.
    pub sign_ins_pending: usize,
}

impl OAuthOptions {
    /// The options with their defaults, for `issuer`.
    pub fn new(issuer: String) -> OAuthOptions {
        OAuthOptions {
            issuer,
            audience: None,
            scopes: Scopes::default(),
            principal_claim: "sub".to_owned(),
            algorithms: parse_algorithms(DEFAULT_ALGORITHMS).expect("the defaults parse"),
            introspection_url: None,
            client: None,
            jwks_min_refresh: Duration::from_secs(30),
            jwks_max_age: Duration::from_secs(600),
            introspection_cache: Duration::from_secs(30),
            public_url: None,
            sign_ins_pending: super::pending::DEFAULT_SIGN_INS_PENDING,
        }
    }

    /// Why the options cannot be served, if they cannot: a URL that is not one, or an
    /// introspection endpoint without a client to authenticate with.
    pub fn check(&self) -> Result<(), String> {
        checked_url("the issuer", &self.issuer)?;
        if let Some(audience) = &self.audience {
            check_audience(audience)?;
        }
        if let Some(url) = &self.introspection_url {
            checked_url("the introspection endpoint", url)?;
            if self.client.is_none() {
                return Err(
                    "introspection needs the server's client at the issuer: give \
                            --oauth-client-id and --oauth-client-secret-file"
                        .to_owned(),
                );
            }
        }
        if let Some(url) = &self.public_url {
            let url = url::Url::parse(url).map_err(|e| format!("the public URL `{url}`: {e}"))?;
            if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
                return Err(format!("the public URL `{url}` must be an http(s) URL"));
            }
        }
        if self.principal_claim.is_empty() {
            return Err("the principal claim must be named".to_owned());
        }
        Ok(())
    }
}

/// Why `audience` is no resource URI (RFC 8707: absolute, no fragment; here also http(s)
/// with a host, as clients derive the metadata's address from it).
pub(crate) fn check_audience(audience: &str) -> Result<(), String> {
    let url = url::Url::parse(audience)
        .map_err(|e| format!("the audience `{audience}` is not an absolute URI: {e}"))?;
    if url.fragment().is_some() || url.query().is_some() {
        return Err(format!(
            "the audience `{audience}` must have neither a query nor a fragment"
        ));
    }
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!(
            "the audience `{audience}` must be the http(s) URL clients reach /mcp by"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_default_per_kind_and_a_pair_overrides_one() {
        let scopes = Scopes::default();
        assert_eq!(
            scopes.all(),
            ["tasks:read", "tasks:todos", "tasks:run", "tasks:answer"]
        );
        let custom = Scopes::parse("run=mcp:workflows, answer=mcp:workflows").unwrap();
        assert_eq!(custom.of(Kind::Run), "mcp:workflows");
        assert_eq!(custom.of(Kind::Read), "tasks:read");
        assert_eq!(
            custom.needed(Needs::of(Kind::Run).with(Kind::Answer)),
            ["mcp:workflows"]
        );
        let granted = vec!["mcp:workflows".to_owned()];
        assert!(custom.cover(&granted, Needs::of(Kind::Answer)));
        assert!(!custom.cover(&granted, Needs::of(Kind::Answer).with(Kind::Read)));
    }

    #[test]
    fn a_malformed_scope_spec_is_refused_with_why() {
        for (text, why) in [
            ("read", "not KIND=SCOPE"),
            ("write=x", "not a kind"),
            ("read=a b", "not a scope"),
            ("read=\"x\"", "not a scope"),
            ("read=", "not a scope"),
            ("read=a,read=b", "named twice"),
        ] {
            let error = Scopes::parse(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
        }
    }

    #[test]
    fn none_and_hmac_are_never_accepted_algorithms() {
        assert!(parse_algorithms("none").unwrap_err().contains("none"));
        assert!(
            parse_algorithms("RS256,HS256")
                .unwrap_err()
                .contains("shared secret")
        );
        assert!(parse_algorithms("").is_err());
        assert_eq!(
            parse_algorithms("ES256, EdDSA,ES256").unwrap(),
            [Algorithm::ES256, Algorithm::EdDSA]
        );
        assert!(
            parse_algorithms(DEFAULT_ALGORITHMS)
                .unwrap()
                .iter()
                .all(|a| !matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512))
        );
    }

    #[test]
    fn urls_fetched_are_https_or_loopback_http() {
        assert!(checked_url("x", "https://id.example/realms/a").is_ok());
        assert!(checked_url("x", "http://127.0.0.1:9/").is_ok());
        assert!(checked_url("x", "http://localhost:9/").is_ok());
        assert!(checked_url("x", "http://[::1]:9/").is_ok());
        assert!(checked_url("x", "http://id.example/").is_err());
        assert!(checked_url("x", "ftp://id.example/").is_err());
        assert!(checked_url("x", "https://id.example/#k").is_err());
        assert!(check_audience("https://tasks.example/mcp").is_ok());
        assert!(check_audience("https://tasks.example/mcp?x=1").is_err());
        assert!(check_audience("urn:tasks").is_err());
    }

    #[test]
    fn a_secret_file_others_may_read_is_refused_and_a_secret_never_shows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "s3cret-value\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = Secret::from_file(&path).unwrap_err().to_string();
        assert!(error.contains("chmod 600"), "{error}");
        assert!(!error.contains("s3cret"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let secret = Secret::from_file(&path).unwrap();
        assert_eq!(secret.0, "s3cret-value");
        assert_eq!(format!("{secret:?}"), "[secret]");
    }
}
