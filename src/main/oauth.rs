//! The `--oauth-*` options of `serve --http` and `ui`: the server as an OAuth 2.1
//! resource server of one issuer, in place of a tokens file.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use mcp_task_server::transport::http::{
    DEFAULT_OAUTH_ALGORITHMS, DEFAULT_OAUTH_SCOPES, DEFAULT_OAUTH_SIGN_INS_PENDING, OAuthClient,
    OAuthOptions, OAuthScopes, OAuthSecret, parse_oauth_algorithms,
};

use super::duration;

/// How HTTP requests are authorised by an OAuth issuer instead of a tokens file.
#[derive(Args)]
pub(crate) struct OAuthArgs {
    /// Take OAuth 2.1 access tokens of this issuer (its identifier exactly as its metadata
    /// and tokens give it, e.g. https://id.example.com/realms/tasks) instead of a tokens
    /// file: the server is then a resource server, serves its protected-resource metadata
    /// (RFC 9728) at /.well-known/oauth-protected-resource[/mcp], and finds the issuer's
    /// keys from its RFC 8414 or OpenID Connect metadata. An https URL (http only on
    /// loopback). No static token is made or read.
    #[arg(
        long,
        env = "TASKS_OAUTH_ISSUER",
        value_name = "URL",
        conflicts_with_all = ["http_tokens", "http_no_auth"],
        global = true
    )]
    pub(crate) oauth_issuer: Option<String>,

    /// This resource's canonical URI (RFC 8707), which every token's `aud` must hold: the
    /// URL clients reach MCP by, e.g. https://tasks.example.com/mcp. Required beyond
    /// loopback; on loopback it defaults to http://ADDR/mcp of the bound address.
    #[arg(long, env = "TASKS_OAUTH_AUDIENCE", value_name = "URI", global = true)]
    pub(crate) oauth_audience: Option<String>,

    /// The scope that grants each kind of operation, as KIND=SCOPE pairs separated by
    /// commas; a kind not named keeps its default. The kinds: `read` (initialize, list and
    /// read tools, todos, runs, tasks, resources, prompts), `todos` (add_task,
    /// complete_task, delete_task), `run` (run_workflow, the workflows published as tools,
    /// tasks/cancel) and `answer` (answers to a run's questions: elicitation and sampling
    /// responses, tasks/update, a retry with inputResponses). Several kinds may share a
    /// scope, e.g. read=mcp,todos=mcp,run=mcp,answer=mcp.
    #[arg(long, env = "TASKS_OAUTH_SCOPES", value_name = "KIND=SCOPE,...", default_value = DEFAULT_OAUTH_SCOPES, value_parser = OAuthScopes::parse, global = true)]
    pub(crate) oauth_scopes: OAuthScopes,

    /// The token claim whose value names the principal (who owns runs, sessions and
    /// audit rows): a string of at most 256 characters.
    #[arg(
        long,
        env = "TASKS_OAUTH_PRINCIPAL_CLAIM",
        value_name = "CLAIM",
        default_value = "sub",
        global = true
    )]
    pub(crate) oauth_principal_claim: String,

    /// The JWS algorithms a token may be signed with, comma-separated; `none` and the
    /// HMAC algorithms are refused (tokens are checked with the issuer's public keys).
    #[arg(long, env = "TASKS_OAUTH_ALGORITHMS", value_name = "LIST", default_value = DEFAULT_OAUTH_ALGORITHMS, value_parser = parse_oauth_algorithms_arg, global = true)]
    pub(crate) oauth_algorithms: Algorithms,

    /// The issuer's RFC 7662 introspection endpoint, where opaque (non-JWT) access tokens
    /// are checked, authenticated with --oauth-client-id and --oauth-client-secret-file.
    /// Without it only JWT access tokens are taken.
    #[arg(
        long,
        env = "TASKS_OAUTH_INTROSPECTION_URL",
        value_name = "URL",
        requires = "oauth_client_id",
        global = true
    )]
    pub(crate) oauth_introspection_url: Option<String>,

    /// The server's own client id at the issuer (a confidential client): for
    /// introspection, and for the dashboard's sign-in through the issuer.
    #[arg(
        long,
        env = "TASKS_OAUTH_CLIENT_ID",
        value_name = "ID",
        requires = "oauth_client_secret_file",
        global = true
    )]
    pub(crate) oauth_client_id: Option<String>,

    /// A file holding that client's secret (its first line), readable by this user only
    /// (`chmod 600`); refused if its group or others may read it.
    #[arg(
        long,
        env = "TASKS_OAUTH_CLIENT_SECRET_FILE",
        value_name = "FILE",
        requires = "oauth_client_id",
        global = true
    )]
    pub(crate) oauth_client_secret_file: Option<PathBuf>,

    /// The issuer's keys (JWKS) are fetched at most once in this long, however many tokens
    /// name a key id it has not seen: a token signed with a key rotated in waits at most
    /// this long to be taken, and a flood of made-up key ids costs the issuer one request
    /// per interval.
    #[arg(long, env = "TASKS_OAUTH_JWKS_MIN_REFRESH", value_name = "DURATION", default_value = "30s", value_parser = duration, global = true)]
    pub(crate) oauth_jwks_min_refresh: Duration,

    /// The issuer's keys are fetched again when they are this old, so that a key the
    /// issuer dropped stops being accepted within this long.
    #[arg(long, env = "TASKS_OAUTH_JWKS_MAX_AGE", value_name = "DURATION", default_value = "10m", value_parser = duration, global = true)]
    pub(crate) oauth_jwks_max_age: Duration,

    /// How long an introspection's answer for an opaque token is kept: a token revoked
    /// at the issuer may be taken this long after.
    #[arg(long, env = "TASKS_OAUTH_INTROSPECTION_CACHE", value_name = "DURATION", default_value = "30s", value_parser = duration, global = true)]
    pub(crate) oauth_introspection_cache: Duration,

    /// The base URL browsers reach the dashboard by, e.g. https://tasks.example.com: its
    /// sign-in through the issuer returns to BASE/login/callback, the redirect URI to
    /// register for --oauth-client-id. Defaults to the audience's origin.
    #[arg(
        long,
        env = "TASKS_OAUTH_PUBLIC_URL",
        value_name = "URL",
        global = true
    )]
    pub(crate) oauth_public_url: Option<String>,

    /// The dashboard's sign-ins through the issuer kept at once between their start and
    /// the issuer's callback, each for at most ten minutes. Starting one needs no
    /// credential: when they are this many, the oldest of the address holding the most
    /// goes, so a flood from one address costs its own attempts, not other people's.
    #[arg(long, env = "TASKS_OAUTH_SIGN_INS_PENDING", value_name = "N", default_value_t = DEFAULT_OAUTH_SIGN_INS_PENDING as u32, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub(crate) oauth_sign_ins_pending: u32,
}

/// The allowed algorithms, parsed.
#[derive(Clone)]
pub(crate) struct Algorithms(Vec<jsonwebtoken::Algorithm>);

fn parse_oauth_algorithms_arg(text: &str) -> Result<Algorithms, String> {
    parse_oauth_algorithms(text).map(Algorithms)
}

impl OAuthArgs {
    /// The OAuth options, when `--oauth-issuer` turns OAuth on; `Err` when a file they
    /// name cannot be read or is not private.
    pub(crate) fn options(&self) -> anyhow::Result<Option<OAuthOptions>> {
        let Some(issuer) = &self.oauth_issuer else {
            return Ok(None);
        };
        let client = match (&self.oauth_client_id, &self.oauth_client_secret_file) {
            (Some(id), Some(path)) => Some(OAuthClient {
                id: id.clone(),
                secret: OAuthSecret::from_file(path)?,
            }),
            _ => None,
        };
        Ok(Some(OAuthOptions {
            audience: self.oauth_audience.clone(),
            scopes: self.oauth_scopes.clone(),
            principal_claim: self.oauth_principal_claim.clone(),
            algorithms: self.oauth_algorithms.0.clone(),
            introspection_url: self.oauth_introspection_url.clone(),
            client,
            jwks_min_refresh: self.oauth_jwks_min_refresh,
            jwks_max_age: self.oauth_jwks_max_age,
            introspection_cache: self.oauth_introspection_cache,
            public_url: self.oauth_public_url.clone(),
            sign_ins_pending: self.oauth_sign_ins_pending as usize,
            ..OAuthOptions::new(issuer.clone())
        }))
    }
}
