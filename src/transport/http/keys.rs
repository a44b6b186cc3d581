//! The tokens a running server accepts, reloaded from their file on SIGHUP. The sessions
//! a removed token opened end with it (their owners are in `owners.rs`).
//!
//! Invariant: after a reload, no request with a removed token is served, and no session
//! it opened stays open (its GET stream ends with it).
//!
//! Invariant: a reload that fails (an unreadable, invalid or unprotected file) changes
//! nothing: the tokens before it stay in force, and the log says why.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

use super::owners::Owners;
use super::sessions::Sessions;
use super::tokens::{Principal, TokenDigest, Tokens, digest};

/// The tokens in force.
pub(crate) struct Keys {
    /// The file they are read from; `None` for a token made at start.
    path: Option<PathBuf>,
    tokens: RwLock<Arc<Tokens>>,
}

impl Keys {
    pub(super) fn new(tokens: Tokens, path: Option<PathBuf>) -> Keys {
        Keys {
            path,
            tokens: RwLock::new(Arc::new(tokens)),
        }
    }

    /// The principal of `token`, and the token's digest, if it is one of the tokens now.
    pub(crate) fn principal(&self, token: &[u8]) -> Option<(Principal, TokenDigest)> {
        let token = digest(token);
        let tokens = self.tokens.read().clone();
        tokens.principal(&token).map(|p| (p.clone(), token))
    }

    /// Whether the token of digest `token` is one of the tokens now.
    pub(crate) fn holds(&self, token: &TokenDigest) -> bool {
        self.tokens.read().holds(token)
    }

    /// Reads the tokens file again: its tokens are in force from now on, and the sessions
    /// opened with a token it no longer holds end. If it cannot be read, nothing changes.
    pub(super) async fn reload(&self, owners: &Owners, sessions: &Sessions) {
        let Some(path) = &self.path else {
            return;
        };
        let tokens = match Tokens::load(path) {
            Ok(tokens) => Arc::new(tokens),
            Err(error) => {
                tracing::error!("tokens not reloaded; the previous ones stay in force: {error:#}");
                return;
            }
        };
        *self.tokens.write() = tokens.clone();
        let removed = owners.opened_without(|token| tokens.holds(token));
        tracing::info!(
            tokens = tokens.len(),
            ended_sessions = removed.len(),
            "tokens reloaded from {}",
            path.display()
        );
        end(removed, sessions).await;
    }
}

/// Closes the sessions of `ids` (whose owners the session manager then forgets).
pub(super) async fn end(ids: Vec<SessionId>, sessions: &Sessions) {
    for id in ids {
        if let Err(error) = sessions.close_session(&id).await {
            tracing::warn!(%error, "cannot end a session of a removed token");
        }
    }
}

/// Reloads the tokens at each SIGHUP until `shutdown`.
pub(super) async fn reload_on_hangup(
    mut hangups: tokio::signal::unix::Signal,
    keys: Arc<Keys>,
    sessions: Arc<Sessions>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            received = hangups.recv() => {
                if received.is_none() {
                    return;
                }
                keys.reload(sessions.owners(), &sessions).await;
            }
        }
    }
}
