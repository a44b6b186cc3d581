//! The tokens a running server accepts, reloaded from their file on SIGHUP (the HTTP
//! transport watches the signal and ends the sessions a removed token opened).
//!
//! Invariant: a reload that fails (an unreadable, invalid or unprotected file) changes
//! nothing: the tokens before it stay in force, and the log says why.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;

use super::tokens::{Principal, TokenDigest, Tokens, digest};

/// The tokens in force.
pub(crate) struct Keys {
    /// The file they are read from; `None` for a token made at start.
    path: Option<PathBuf>,
    tokens: RwLock<Arc<Tokens>>,
}

impl Keys {
    pub(crate) fn new(tokens: Tokens, path: Option<PathBuf>) -> Keys {
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

    /// Reads the tokens file again: its tokens are in force from now on, and are returned
    /// (so that whoever keeps sessions ends those of a token gone). `None`, nothing
    /// changed, when there is no file or it cannot be read.
    pub(crate) fn reload(&self) -> Option<Arc<Tokens>> {
        let path = self.path.as_ref()?;
        match Tokens::load(path) {
            Ok(tokens) => {
                let tokens = Arc::new(tokens);
                *self.tokens.write() = tokens.clone();
                tracing::info!(
                    tokens = tokens.len(),
                    "tokens reloaded from {}",
                    path.display()
                );
                Some(tokens)
            }
            Err(error) => {
                tracing::error!("tokens not reloaded; the previous ones stay in force: {error:#}");
                None
            }
        }
    }
}
