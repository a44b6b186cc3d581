//! SIGHUP reloads the tokens file; the sessions a removed token opened end with it (their
//! owners are in `owners.rs`).
//!
//! Invariant: after a reload, no request with a removed token is served, and no session
//! it opened stays open (its GET stream ends with it).

use std::sync::Arc;

use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

use super::sessions::Sessions;
use crate::auth::Keys;

/// Closes the sessions of `ids` (whose owners the session manager then forgets).
pub(super) async fn end(ids: Vec<SessionId>, sessions: &Sessions) {
    for id in ids {
        if let Err(error) = sessions.close_session(&id).await {
            tracing::warn!(%error, "cannot end a session of a removed token");
        }
    }
}

/// Reloads the tokens at each SIGHUP until `shutdown`, and ends the sessions of the
/// tokens gone.
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
                let Some(tokens) = keys.reload() else { continue };
                let removed = sessions.owners().opened_without(|token| tokens.holds(token));
                tracing::info!(ended_sessions = removed.len(), "sessions of removed tokens end");
                end(removed, &sessions).await;
            }
        }
    }
}
