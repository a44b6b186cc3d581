//! Resource subscriptions, in both eras: a 2025-11-25 client's `resources/subscribe` (a
//! watch per URI, until `resources/unsubscribe` or the end of its session) and a
//! 2026-07-28 client's `subscriptions/listen` (one stream for the URIs and the tasks it
//! names). Each waits on the application's count of the store's changes and sends
//! `notifications/resources/updated` when what the resource holds for the caller differs
//! from what it held: a run's report and summary as its nodes change, a file once
//! rewritten; and on a listen, `notifications/tasks` with a task as `tasks/get` gives it,
//! once as the listen begins and again each time its status or message changes.
//!
//! Invariant: a subscription sends nothing about a resource or a task its caller may not
//! read (another principal's run holds nothing for it, so it never changes).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::model::{
    NotificationMetaObject, ResourceUpdatedNotificationParam, ServerNotification,
    SubscriptionFilter, TaskStatus, TaskStatusNotification, TaskStatusNotificationParams,
};
use rmcp::service::SubscriptionContext;
use tokio_util::sync::CancellationToken;

use super::Server;
use super::listen_tasks;
use super::tasks::questions;
use crate::app::{App, Caller};

/// The `resources/subscribe` watches of one session, by URI.
#[derive(Default, Clone)]
pub(crate) struct Watches(Arc<Mutex<HashMap<String, CancellationToken>>>);

impl Watches {
    /// Starts watching `uri` for the session of `peer`, unless it is already. Refused,
    /// with the number watched, when the session watches `max` resources already: each
    /// change of the store looks at every one.
    pub(super) fn subscribe(
        &self,
        app: &App,
        uri: String,
        caller: Caller,
        peer: rmcp::Peer<rmcp::RoleServer>,
        max: usize,
    ) -> Result<(), usize> {
        let stop = CancellationToken::new();
        {
            let mut watches = self.0.lock();
            if watches.contains_key(&uri) {
                return Ok(());
            }
            if watches.len() >= max {
                return Err(watches.len());
            }
            watches.insert(uri.clone(), stop.clone());
        }
        let app = app.clone();
        // Weak: the session's handle ends every watch when it goes (`Drop`).
        let watches = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut changes = app.changes();
            let mut seen = app.resource_fingerprint(&uri, &caller);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    changed = changes.changed() => if changed.is_err() { return },
                }
                let now = app.resource_fingerprint(&uri, &caller);
                if now == seen {
                    continue;
                }
                seen = now;
                let update = ResourceUpdatedNotificationParam::new(uri.clone());
                if peer.notify_resource_updated(update).await.is_err() {
                    // The session is gone.
                    if let Some(watches) = watches.upgrade() {
                        watches.lock().remove(&uri);
                    }
                    return;
                }
            }
        });
        Ok(())
    }

    /// Stops watching `uri`.
    pub(super) fn unsubscribe(&self, uri: &str) {
        if let Some(stop) = self.0.lock().remove(uri) {
            stop.cancel();
        }
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        // The last handle of a session's watches ends them all.
        if Arc::strong_count(&self.0) == 1 {
            for (_, stop) in self.0.lock().drain() {
                stop.cancel();
            }
        }
    }
}

/// What a `subscriptions/listen` request is granted: updates of the resources it names,
/// the first `max` of them (the acknowledgement tells the client which). A listen that
/// names none may still follow tasks, which rmcp's filter does not carry
/// (`listen_tasks.rs`).
pub(super) fn accepted(requested: &SubscriptionFilter, max: usize) -> Option<SubscriptionFilter> {
    let Some(mut uris) = requested.resource_subscriptions.clone() else {
        return Some(SubscriptionFilter::new());
    };
    if uris.len() > max {
        tracing::warn!(
            asked = uris.len(),
            max,
            "a subscriptions/listen request named more resources than --max-subscriptions; \
             the first are granted"
        );
        uris.truncate(max);
    }
    Some(
        SubscriptionFilter::builder()
            .resource_subscriptions(uris)
            .build(),
    )
}

/// Serves one `subscriptions/listen` stream until its request is cancelled.
pub(super) async fn listen(server: &Server, caller: &Caller, context: &SubscriptionContext) {
    let app = server.app();
    let mut tasks: Vec<Followed> = listen_tasks::of(&context.request_context().extensions)
        .into_iter()
        .map(|id| Followed { id, told: None })
        .collect();
    let uris = context
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    let mut seen: Vec<Option<u64>> = uris
        .iter()
        .map(|uri| app.resource_fingerprint(uri, caller))
        .collect();
    let mut changes = app.changes();
    // What the tasks are as the listen begins, so that no change before it goes untold.
    if !tell_tasks(server, caller, context, &mut tasks).await {
        return;
    }
    loop {
        tokio::select! {
            _ = context.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
        if !tell_tasks(server, caller, context, &mut tasks).await {
            return;
        }
        for (uri, seen) in uris.iter().zip(seen.iter_mut()) {
            let now = app.resource_fingerprint(uri, caller);
            if now != *seen {
                *seen = now;
                if context
                    .sink()
                    .notify_resource_updated(uri.clone())
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

/// A task a listen follows, and what it last told of it: its status and message.
struct Followed {
    id: String,
    told: Option<(TaskStatus, Option<String>)>,
}

/// Sends `notifications/tasks` for each followed task whose status or message changed
/// since it was last told; a task the caller may not see (unknown, or another principal's)
/// is never told, and one whose end was told is not read again (an ended task never
/// changes). `false` once the stream is gone.
async fn tell_tasks(
    server: &Server,
    caller: &Caller,
    context: &SubscriptionContext,
    tasks: &mut [Followed],
) -> bool {
    let request = context.request_context();
    let can = questions::capabilities(request);
    let unended = tasks.iter_mut().filter(|task| {
        !task
            .told
            .as_ref()
            .is_some_and(|(status, _)| status.is_terminal())
    });
    for task in unended {
        let Ok(reply) = server.get_extension_task(&task.id, can, caller) else {
            continue;
        };
        let wire = &reply.task.task;
        let state = (wire.status, wire.status_message.clone());
        if task.told.as_ref() == Some(&state) {
            continue;
        }
        task.told = Some(state);
        let mut notification =
            TaskStatusNotification::new(TaskStatusNotificationParams::new(reply.task));
        let mut meta = NotificationMetaObject::new();
        meta.set_subscription_id(request.id.clone());
        notification.extensions.insert(meta);
        let sent = request
            .peer
            .send_notification(ServerNotification::TaskStatusNotification(notification))
            .await;
        if sent.is_err() {
            return false;
        }
    }
    true
}
