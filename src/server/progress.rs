//! `notifications/progress` for a run, when the client sent a progress token.
//!
//! The observer runs on the scheduler's task and must not wait, so it only queues; a
//! forwarding task sends the newest state, coalescing bursts into one notification.

use std::sync::Arc;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::engine::observer::{Event, Observer};

struct Update {
    done: usize,
    total: usize,
    message: String,
}

struct Forward(mpsc::UnboundedSender<Update>);

impl Observer for Forward {
    fn event(&self, event: &Event<'_>) {
        if let Event::NodeChanged {
            node,
            status,
            progress,
            ..
        } = event
            && status.is_terminal()
        {
            let message = format!(
                "node `{node}` {} ({}/{})",
                status.as_str(),
                progress.done,
                progress.total
            );
            let _ = self.0.send(Update {
                done: progress.done,
                total: progress.total,
                message,
            });
        }
    }
}

/// An observer that reports progress to `peer` under `token`, and the task forwarding it.
/// The task ends once the observer is dropped and everything queued is sent: await it
/// before answering the request, so that no notification follows the response.
pub(super) fn reporter(
    peer: Peer<RoleServer>,
    token: ProgressToken,
) -> (Arc<dyn Observer>, JoinHandle<()>) {
    let (sender, mut receiver) = mpsc::unbounded_channel::<Update>();
    let forwarder = tokio::spawn(async move {
        while let Some(mut update) = receiver.recv().await {
            while let Ok(newer) = receiver.try_recv() {
                update = newer;
            }
            let param = ProgressNotificationParam::new(token.clone(), update.done as f64)
                .with_total(update.total as f64)
                .with_message(update.message);
            if peer.notify_progress(param).await.is_err() {
                break;
            }
        }
    });
    (Arc::new(Forward(sender)), forwarder)
}
