//! `notifications/progress` for a run, when the client sent a progress token.
//!
//! The observer runs on the scheduler's task and must not wait, so it only queues; a
//! forwarding task sends the newest state, coalescing bursts into one notification.

use std::sync::Arc;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::engine::observer::{Event, Observer};

struct Update {
    done: usize,
    total: usize,
    message: String,
}

struct Forward(mpsc::UnboundedSender<Update>);

impl Observer for Forward {
    fn event(&self, event: &Event<'_>) {
        let (message, progress) = match event {
            Event::Iterated {
                node,
                instance,
                iteration,
                max,
                progress,
                ..
            } => {
                let unit = unit(node, *instance);
                let said = format!(
                    "node {unit} iteration {iteration} of at most {max} done; it runs again"
                );
                (said, progress)
            }
            Event::ChildProgressed {
                node,
                instance,
                child,
                percent,
                message,
                progress,
                ..
            } => {
                let unit = unit(node, *instance);
                let said = message.map(|m| format!(": {m}")).unwrap_or_default();
                (
                    format!("node {unit}, child run {child}, {percent}% done{said}"),
                    progress,
                )
            }
            Event::NodeChanged {
                node,
                status,
                progress,
                ..
            } if status.is_terminal() => (format!("node `{node}` {}", status.as_str()), progress),
            _ => return,
        };
        let _ = self.0.send(Update {
            done: progress.done,
            total: progress.total,
            message: format!("{message} ({}/{})", progress.done, progress.total),
        });
    }
}

/// A unit as a progress message names it: its node, and its item of a `for_each`.
fn unit(node: &str, instance: Option<usize>) -> String {
    match instance {
        Some(k) => format!("`{node}` item {k}"),
        None => format!("`{node}`"),
    }
}

/// An observer that reports progress to `peer` under `token`, and the task forwarding it.
/// The task ends once the observer is dropped and everything queued is sent, or once
/// `stop` is cancelled and what was queued by then is sent (for a call answered while its
/// run goes on). Await it before answering the request, so that no notification follows
/// the response.
pub(super) fn reporter(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    stop: CancellationToken,
) -> (Arc<dyn Observer>, JoinHandle<()>) {
    let (sender, mut receiver) = mpsc::unbounded_channel::<Update>();
    let forwarder = tokio::spawn(async move {
        loop {
            let mut update = tokio::select! {
                update = receiver.recv() => match update {
                    Some(update) => update,
                    None => break,
                },
                _ = stop.cancelled() => match receiver.try_recv() {
                    Ok(update) => update,
                    Err(_) => break,
                },
            };
            while let Ok(newer) = receiver.try_recv() {
                update = newer;
            }
            let param = ProgressNotificationParam::new(token.clone(), update.done as f64)
                .with_total(update.total as f64)
                .with_message(update.message);
            if peer.notify_progress(param).await.is_err() || stop.is_cancelled() {
                break;
            }
        }
    });
    (Arc::new(Forward(sender)), forwarder)
}
