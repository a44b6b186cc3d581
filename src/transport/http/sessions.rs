//! A cap on the number of open 2025-11-25 sessions, around rmcp's session manager, which
//! also tells the table of owners (`owners.rs`) of every session that closes.
//!
//! Each session holds a worker task and its channels until the client closes it or it
//! idles out (rmcp's keep-alive, five minutes), so a client that opens sessions in a loop
//! could otherwise exhaust the server's memory. The gate refuses a new session with 503
//! when the cap is reached; this wrapper makes the cap exact when several sessions are
//! opened at once.

use std::collections::HashMap;
use std::time::Instant;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::server_side_http::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

use super::owners::Owners;

/// How many sessions a manager holds open now.
pub(super) trait OpenSessions {
    fn open(&self) -> impl Future<Output = usize> + Send;
}

impl OpenSessions for LocalSessionManager {
    async fn open(&self) -> usize {
        self.sessions.read().await.len()
    }
}

#[derive(Debug, thiserror::Error)]
pub(super) enum BoundedError<E> {
    #[error("{open} sessions are open, the most this server keeps; close one or retry later")]
    Full { open: usize },
    #[error(transparent)]
    Inner(E),
}

/// A session manager that opens at most `max` sessions, and forgets each session's
/// owner when it closes (rmcp closes an idle session through this manager too).
pub(super) struct Bounded<M> {
    inner: M,
    max: usize,
    owners: Owners,
    /// Held from the count to the new session's insertion, so that the count is exact.
    creating: tokio::sync::Mutex<()>,
    /// When each open session opened, for `mcp.server.session.duration`.
    opened: parking_lot::Mutex<HashMap<SessionId, Instant>>,
}

impl<M> Bounded<M> {
    pub(super) fn new(inner: M, max: usize, owners: Owners) -> Bounded<M> {
        Bounded {
            inner,
            max,
            owners,
            creating: tokio::sync::Mutex::new(()),
            opened: parking_lot::Mutex::default(),
        }
    }

    /// Who owns each open session.
    pub(super) fn owners(&self) -> &Owners {
        &self.owners
    }
}

impl<M: OpenSessions> Bounded<M> {
    /// Whether a new session would be refused now.
    pub(super) async fn is_full(&self) -> bool {
        self.inner.open().await >= self.max
    }
}

impl<M> SessionManager for Bounded<M>
where
    M: SessionManager + OpenSessions + Send + Sync,
{
    type Error = BoundedError<M::Error>;
    type Transport = M::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _creating = self.creating.lock().await;
        let open = self.inner.open().await;
        if open >= self.max {
            return Err(BoundedError::Full { open });
        }
        let created = self.inner.create_session().await;
        let (id, transport) = created.map_err(BoundedError::Inner)?;
        self.opened.lock().insert(id.clone(), Instant::now());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let reply = self.inner.initialize_session(id, message).await;
        reply.map_err(BoundedError::Inner)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner
            .has_session(id)
            .await
            .map_err(BoundedError::Inner)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        self.owners.forget(id);
        if let Some(opened) = self.opened.lock().remove(id) {
            crate::telemetry::metrics::session(opened.elapsed(), "tcp");
        }
        closed.map_err(BoundedError::Inner)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_stream(id, message).await;
        stream.map_err(BoundedError::Inner)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        let accepted = self.inner.accept_message(id, message).await;
        accepted.map_err(BoundedError::Inner)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_standalone_stream(id).await;
        stream.map_err(BoundedError::Inner)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.resume(id, last_event_id).await;
        stream.map_err(BoundedError::Inner)
    }
}

/// The manager the server uses: rmcp's in-memory one, capped.
pub(super) type Sessions = Bounded<LocalSessionManager>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Principal;
    use std::sync::Arc;

    #[tokio::test]
    async fn sessions_opened_at_once_never_exceed_the_cap() {
        let sessions = Arc::new(Bounded::new(
            LocalSessionManager::default(),
            3,
            Owners::new(3),
        ));
        let attempts: Vec<_> = (0..8)
            .map(|_| {
                let sessions = sessions.clone();
                tokio::spawn(async move { sessions.create_session().await.map(|(id, _)| id) })
            })
            .collect();
        let mut opened = Vec::new();
        for attempt in attempts {
            match attempt.await.unwrap() {
                Ok(id) => opened.push(id),
                Err(error) => assert!(matches!(error, BoundedError::Full { open: 3 }), "{error}"),
            }
        }
        assert_eq!(opened.len(), 3);
        assert!(sessions.is_full().await);
        sessions.close_session(&opened[0]).await.unwrap();
        assert!(!sessions.is_full().await);
        assert!(sessions.create_session().await.is_ok());
    }

    #[tokio::test]
    async fn a_session_closed_however_it_closes_is_forgotten_with_its_owner() {
        let sessions = Bounded::new(LocalSessionManager::default(), 3, Owners::new(1));
        let alice = Principal("alice".to_owned());
        let (id, _transport) = sessions.create_session().await.unwrap();
        let opening = sessions.owners().reserve(&alice, [7; 32]).unwrap();
        sessions.owners().record(id.clone(), opening);
        assert!(sessions.owners().owns(&id, &alice));
        assert!(sessions.owners().reserve(&alice, [7; 32]).is_none());
        // rmcp closes an idle session, as a DELETE does, through the manager.
        sessions.close_session(&id).await.unwrap();
        assert!(!sessions.owners().owns(&id, &alice));
        assert!(sessions.owners().reserve(&alice, [7; 32]).is_some());
    }
}
