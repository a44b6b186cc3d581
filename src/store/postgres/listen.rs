//! The connection a store listens on: notifications from the triggers of migration 2,
//! passed on to the store's [`Wakes`]. It is opened as the pool's connections are (TLS,
//! password), by [`Target::open`].

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::oneshot;
use tokio_postgres::AsyncMessage;

use super::connect::Target;

use crate::store::wakes::Wakes;

/// How long a listener that lost its connection waits before it connects again.
const RECONNECT: Duration = Duration::from_millis(500);

/// Listens, on the connections' runtime, for as long as the store lives. The receiver
/// resolves once the first connection listens.
pub(super) fn spawn(
    runtime: &tokio::runtime::Runtime,
    target: Target,
    wakes: &Arc<Wakes>,
) -> oneshot::Receiver<()> {
    let wakes = Arc::downgrade(wakes);
    let (listening, heard) = oneshot::channel();
    let mut listening = Some(listening);
    runtime.spawn(async move {
        while wakes.strong_count() > 0 {
            if let Err(error) = listen(&target, &wakes, &mut listening).await {
                tracing::debug!(%error, "PostgreSQL listener stopped; connecting again");
            }
            tokio::time::sleep(RECONNECT).await;
        }
    });
    heard
}

async fn listen(
    target: &Target,
    wakes: &Weak<Wakes>,
    listening: &mut Option<oneshot::Sender<()>>,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = target.open(&target.config).await?;
    let (sender, mut notifications) = futures::channel::mpsc::unbounded();
    // The connection yields notifications only while it is polled: polled here, apart.
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(notification) = message
                && sender.unbounded_send(notification).is_err()
            {
                return;
            }
        }
    });
    let schema: String = client
        .query_one("SELECT current_schema()", &[])
        .await?
        .get(0);
    // The channel, like the schema's name, is an identifier; quoted, any name fits.
    let channel = format!("mcp_tasks_{schema}").replace('"', "\"\"");
    client
        .batch_execute(&format!("LISTEN \"{channel}\""))
        .await?;
    // Whatever changed while nobody listened went untold: count it as a change.
    if let Some(wakes) = wakes.upgrade() {
        wakes.count_change();
    }
    if let Some(listening) = listening.take() {
        let _ = listening.send(());
    }
    while let Some(notification) = notifications.next().await {
        let Some(wakes) = wakes.upgrade() else { break };
        wakes.wake(notification.payload());
    }
    driver.abort();
    Ok(())
}
