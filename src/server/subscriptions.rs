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
use rmcp::ErrorData as McpError;
use rmcp::model::{
    NotificationMetaObject, ResourceUpdatedNotificationParam, ServerNotification,
    SubscriptionFilter, TaskStatus, TaskStatusNotification, TaskStatusNotificationParams,
};
use rmcp::service::SubscriptionContext;
use tokio_util::sync::CancellationToken;

use super::Server;
use super::listen_tasks;
use super::tasks::questions;
use crate::app::resources::{Canonical, Followed};
use crate::app::{App, Caller};
use crate::slots::{Full, Slot, Slots};

/// The resources followed at most at once, in all and by one principal, unless told
/// otherwise: each change of the store looks at every one.
pub const DEFAULT_MAX_SUBSCRIPTIONS_TOTAL: usize = 4096;
pub const DEFAULT_MAX_SUBSCRIPTIONS_PER_PRINCIPAL: usize = 256;

/// How many resources may be followed at once: by one session (`--max-subscriptions`),
/// and across every session, in all and by one principal (`--max-subscriptions-total`,
/// `--max-subscriptions-per-principal`).
#[derive(Clone)]
pub(crate) struct Caps {
    pub(crate) per_session: usize,
    pub(crate) followed: Arc<Slots>,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps {
            per_session: super::DEFAULT_MAX_SUBSCRIPTIONS,
            followed: Slots::new(
                DEFAULT_MAX_SUBSCRIPTIONS_TOTAL,
                DEFAULT_MAX_SUBSCRIPTIONS_PER_PRINCIPAL,
            ),
        }
    }
}

impl Caps {
    /// A slot for one more resource followed by `caller`, or the error that refuses it.
    fn take(&self, caller: &Caller) -> Result<Slot, McpError> {
        self.followed.take(caller.principal()).map_err(|full| {
            let why = match full {
                Full::All => {
                    "this server follows as many resources as it allows in all \
                     (--max-subscriptions-total)"
                }
                Full::Principal => {
                    "this principal follows as many resources as the server allows one \
                     (--max-subscriptions-per-principal)"
                }
            };
            McpError::invalid_params(format!("{why}; unsubscribe from one first"), None)
        })
    }
}

/// One `resources/subscribe` watch: ended by its token; its slot held while it lasts.
struct Watch {
    stop: CancellationToken,
    _slot: Slot,
}

/// The `resources/subscribe` watches of one session, by canonical URI: a resource is
/// followed once, however many spellings of it the client subscribes with.
#[derive(Default, Clone)]
pub(crate) struct Watches(Arc<Mutex<HashMap<String, Watch>>>);

impl Watches {
    /// Starts watching `uri` for the session of `peer`, unless it is already. Refused
    /// when the URI is longer than any resource's, or when the session, the caller's
    /// principal or the server follows as many resources as it may. A URI of no resource
    /// of this server may be followed: nothing is ever told of it.
    pub(super) fn subscribe(
        &self,
        app: &App,
        uri: String,
        caller: Caller,
        peer: rmcp::Peer<rmcp::RoleServer>,
        caps: &Caps,
    ) -> Result<(), McpError> {
        let canonical =
            Canonical::followed(&uri).map_err(|bad| McpError::invalid_params(bad.0, None))?;
        let key = canonical.uri.clone();
        let stop = CancellationToken::new();
        {
            let mut watches = self.0.lock();
            if watches.contains_key(&key) {
                return Ok(());
            }
            if watches.len() >= caps.per_session {
                return Err(McpError::invalid_params(
                    format!(
                        "this session follows {} resources, as many as this server allows \
                         one (--max-subscriptions); unsubscribe from one first",
                        watches.len()
                    ),
                    None,
                ));
            }
            let slot = caps.take(&caller)?;
            let watch = Watch {
                stop: stop.clone(),
                _slot: slot,
            };
            watches.insert(key.clone(), watch);
        }
        let app = app.clone();
        // Weak: the session's handle ends every watch when it goes (`Drop`).
        let watches = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut changes = app.changes();
            let mut followed = Followed::new(&app, canonical, &caller);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    changed = changes.changed() => if changed.is_err() { return },
                }
                if !app.look_again(&mut followed, &caller) {
                    continue;
                }
                // As the client named it: the spelling it subscribed with.
                let update = ResourceUpdatedNotificationParam::new(uri.clone());
                if peer.notify_resource_updated(update).await.is_err() {
                    // The session is gone.
                    if let Some(watches) = watches.upgrade() {
                        watches.lock().remove(&key);
                    }
                    return;
                }
            }
        });
        Ok(())
    }

    /// Stops watching `uri`, in any of its spellings.
    pub(super) fn unsubscribe(&self, uri: &str) {
        let Ok(canonical) = Canonical::followed(uri) else {
            return;
        };
        if let Some(watch) = self.0.lock().remove(&canonical.uri) {
            watch.stop.cancel();
        }
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        // The last handle of a session's watches ends them all.
        if Arc::strong_count(&self.0) == 1 {
            for (_, watch) in self.0.lock().drain() {
                watch.stop.cancel();
            }
        }
    }
}

/// What a `subscriptions/listen` request is granted: updates of the resources it names,
/// one spelling of each resource (the first), the first `max` of them (the
/// acknowledgement tells the client which). A URI longer than any resource's is not
/// granted. A listen that names none may still follow tasks, which rmcp's filter does not
/// carry (`listen_tasks.rs`).
pub(crate) fn accepted(requested: &SubscriptionFilter, max: usize) -> Option<SubscriptionFilter> {
    let Some(asked) = &requested.resource_subscriptions else {
        return Some(SubscriptionFilter::new());
    };
    let mut seen = std::collections::HashSet::new();
    let uris: Vec<String> = asked
        .iter()
        .filter(|uri| Canonical::followed(uri).is_ok_and(|canonical| seen.insert(canonical.uri)))
        .take(max)
        .cloned()
        .collect();
    Some(
        SubscriptionFilter::builder()
            .resource_subscriptions(uris)
            .build(),
    )
}

/// Serves one `subscriptions/listen` stream until its request is cancelled. Refused, its
/// stream ended with an error, when the caller's principal or the server cannot follow
/// that many more resources.
pub(super) async fn listen(
    server: &Server,
    caller: &Caller,
    context: &SubscriptionContext,
) -> Result<(), McpError> {
    let app = server.app();
    let mut tasks: Vec<FollowedTask> = listen_tasks::of(&context.request_context().extensions)
        .into_iter()
        .map(|id| FollowedTask { id, told: None })
        .collect();
    let uris = context
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    let _slots: Vec<Slot> = uris
        .iter()
        .map(|_| server.subscriptions.take(caller))
        .collect::<Result<_, _>>()?;
    let mut followed: Vec<(String, Followed)> = uris
        .into_iter()
        .filter_map(|uri| {
            let canonical = Canonical::followed(&uri).ok()?;
            Some((uri, Followed::new(app, canonical, caller)))
        })
        .collect();
    let mut changes = app.changes();
    // What the tasks are as the listen begins, so that no change before it goes untold.
    if !tell_tasks(server, caller, context, &mut tasks).await {
        return Ok(());
    }
    loop {
        tokio::select! {
            _ = context.cancelled() => return Ok(()),
            changed = changes.changed() => if changed.is_err() { return Ok(()) },
        }
        if !tell_tasks(server, caller, context, &mut tasks).await {
            return Ok(());
        }
        for (uri, followed) in &mut followed {
            if app.look_again(followed, caller)
                && context
                    .sink()
                    .notify_resource_updated(uri.clone())
                    .await
                    .is_err()
            {
                return Ok(());
            }
        }
    }
}

/// A task a listen follows, and what it last told of it: its status and message.
struct FollowedTask {
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
    tasks: &mut [FollowedTask],
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
