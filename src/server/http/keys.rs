//! The tokens a running server accepts, reloaded from their file on SIGHUP, and the
//! sessions each token opened, which end when their token is removed.
//!
//! Invariant: after a reload, no request with a removed token is served, and no session
//! it opened stays open (its GET stream ends with it).
//!
//! Invariant: a reload that fails (an unreadable, invalid or unprotected file) changes
//! nothing: the tokens before it stay in force, and the log says why.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

use super::sessions::Sessions;
use super::tokens::{Principal, TokenDigest, Tokens, digest};

/// The tokens in force, and which token opened each session.
pub(super) struct Keys {
    /// The file they are read from; `None` for a token made at start.
    path: Option<PathBuf>,
    tokens: RwLock<Arc<Tokens>>,
    /// The digest of the token that opened each session still open, or lately closed.
    opened: Mutex<Opened>,
}

struct Opened {
    by: HashMap<SessionId, TokenDigest>,
    /// Sessions closed or idled out are forgotten when the map grows to this size.
    prune_at: usize,
}

const FIRST_PRUNE: usize = 64;

impl Keys {
    pub(super) fn new(tokens: Tokens, path: Option<PathBuf>) -> Keys {
        Keys {
            path,
            tokens: RwLock::new(Arc::new(tokens)),
            opened: Mutex::new(Opened {
                by: HashMap::new(),
                prune_at: FIRST_PRUNE,
            }),
        }
    }

    /// The principal of `token`, and the token's digest, if it is one of the tokens now.
    pub(super) fn principal(&self, token: &[u8]) -> Option<(Principal, TokenDigest)> {
        let token = digest(token);
        let tokens = self.tokens.read().clone();
        tokens.principal(&token).map(|p| (p.clone(), token))
    }

    /// Records that the token of digest `token` opened session `id`. A token removed while
    /// the session was being opened ends it at once.
    pub(super) async fn opened(&self, id: SessionId, token: TokenDigest, sessions: &Sessions) {
        let prune = {
            let mut opened = self.opened.lock();
            opened.by.insert(id.clone(), token);
            (opened.by.len() >= opened.prune_at).then(|| opened.by.keys().cloned().collect())
        };
        if !self.tokens.read().holds(&token) {
            self.end(vec![id], sessions).await;
        }
        if let Some(ids) = prune {
            self.prune(ids, sessions).await;
        }
    }

    /// Forgets the sessions of `ids` that are closed; sets when to prune next.
    async fn prune(&self, ids: Vec<SessionId>, sessions: &Sessions) {
        let mut gone = Vec::new();
        for id in ids {
            if !sessions.has_session(&id).await.unwrap_or(false) {
                gone.push(id);
            }
        }
        let mut opened = self.opened.lock();
        for id in &gone {
            opened.by.remove(id);
        }
        opened.prune_at = (opened.by.len() * 2).max(FIRST_PRUNE);
    }

    /// Closes the sessions of `ids` and forgets them.
    async fn end(&self, ids: Vec<SessionId>, sessions: &Sessions) {
        for id in ids {
            if let Err(error) = sessions.close_session(&id).await {
                tracing::warn!(%error, "cannot end a session of a removed token");
            }
            self.opened.lock().by.remove(&id);
        }
    }

    /// Reads the tokens file again: its tokens are in force from now on, and the sessions
    /// opened with a token it no longer holds end. If it cannot be read, nothing changes.
    pub(super) async fn reload(&self, sessions: &Sessions) {
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
        let removed: Vec<SessionId> = {
            let opened = self.opened.lock();
            opened
                .by
                .iter()
                .filter(|(_, token)| !tokens.holds(token))
                .map(|(id, _)| id.clone())
                .collect()
        };
        tracing::info!(
            tokens = tokens.len(),
            ended_sessions = removed.len(),
            "tokens reloaded from {}",
            path.display()
        );
        self.end(removed, sessions).await;
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
                keys.reload(&sessions).await;
            }
        }
    }
}
