//! Live updates over SSE, on the application's count of the store's changes
//! (`app/changes.rs`): a change wakes every open stream, which renders its page's live
//! regions for its own caller and sends those that changed. So a browser never polls, and
//! a store that does not change costs one cheap read a tick, however many browsers watch.
//!
//! Invariant: a region is sent only when its text differs from what that stream sent
//! last; the script in the page replaces a region only when its key differs, and never
//! a question's form while the same questions are open (what the person typed stays).

use std::collections::HashMap;
use std::convert::Infallible;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use http::{Response, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use maud::{Markup, html};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::{Body, set_header};
use crate::app::App;
use crate::slots::Slot;

/// How long a stream stays silent before it sends a comment, so that proxies and the
/// browser keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A part of a page that changes as the run does: its element id, a key that changes
/// when it must be replaced, and what it holds.
pub(super) struct Region {
    id: &'static str,
    key: String,
    inner: Markup,
}

impl Region {
    /// A region keyed by its own text.
    pub(super) fn of(id: &'static str, inner: Markup) -> Region {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        inner.0.hash(&mut hasher);
        let key = format!("{:016x}", hasher.finish());
        Region { id, key, inner }
    }

    /// A region keyed by what it shows rather than its text (the open questions).
    pub(super) fn keyed(id: &'static str, key: String, inner: Markup) -> Region {
        Region { id, key, inner }
    }

    /// The region as the page holds it: an element of its id, carrying its key.
    pub(super) fn markup(&self) -> Markup {
        html! { div id=(self.id) data-key=(self.key) { (self.inner) } }
    }
}

/// The watcher of one server's store.
pub(super) struct Live {
    changed: watch::Receiver<u64>,
    /// The regions last rendered for each view (a page for one caller), with the count of
    /// changes they were rendered at: the streams that watch the same view share one
    /// rendering a change.
    rendered: Arc<Mutex<HashMap<String, (u64, Rendered)>>>,
}

type Rendered = Arc<Option<Vec<Region>>>;

impl Live {
    /// The live updates of `app`'s pages, on the application's watch of its store.
    pub(super) fn start(app: &App) -> Live {
        let changed = app.changes();
        Live {
            changed,
            rendered: Arc::default(),
        }
    }

    /// An SSE stream of the regions `render` makes, sent as they change. `render` gives
    /// `None` when there is nothing more to show (the run is gone), which ends it. `view`
    /// names what `render` shows to whom: streams of one view share each rendering. The
    /// stream holds `slot`, one of the server's SSE streams, until it ends.
    pub(super) fn stream(
        &self,
        slot: Slot,
        view: String,
        render: impl Fn() -> Option<Vec<Region>> + Send + Sync + 'static,
    ) -> Response<Body> {
        let mut changed = self.changed.clone();
        changed.mark_unchanged();
        let watch = Watch {
            changed,
            sent: HashMap::new(),
            view,
            render,
            rendered: self.rendered.clone(),
        };
        // The first pass renders at once: what changed between the page's rendering and
        // this stream's start is sent, and the page keeps the regions whose key it has.
        let events = futures::stream::unfold((watch, true), |(mut watch, first)| async move {
            let mut first = first;
            loop {
                if !first {
                    let woke = tokio::time::timeout(KEEP_ALIVE, watch.changed.changed()).await;
                    match woke {
                        Err(_) => {
                            return Some((Bytes::from_static(b": alive\n\n"), (watch, false)));
                        }
                        Ok(Err(_)) => return None,
                        Ok(Ok(())) => {}
                    }
                }
                first = false;
                let regions = watch.regions();
                let regions = regions.as_ref().as_ref()?;
                if let Some(event) = update(regions, &mut watch.sent) {
                    return Some((event, (watch, false)));
                }
            }
        });
        let body = StreamBody::new(events.map(move |bytes| {
            let _held = &slot;
            Ok::<_, Infallible>(Frame::data(bytes))
        }));
        let mut reply = Response::new(BodyExt::boxed(body));
        set_header(&mut reply, header::CONTENT_TYPE, "text/event-stream");
        set_header(&mut reply, header::CACHE_CONTROL, "no-store");
        reply
    }
}

/// One open stream.
struct Watch<R> {
    changed: watch::Receiver<u64>,
    /// The key of each region as this stream last sent it.
    sent: HashMap<&'static str, String>,
    view: String,
    render: R,
    rendered: Arc<Mutex<HashMap<String, (u64, Rendered)>>>,
}

impl<R: Fn() -> Option<Vec<Region>>> Watch<R> {
    /// The view's regions as of the last change: rendered by the first stream of the view
    /// to ask, and shared with the others.
    fn regions(&self) -> Rendered {
        let change = *self.changed.borrow();
        if let Some((at, regions)) = self.rendered.lock().get(&self.view)
            && *at == change
        {
            return regions.clone();
        }
        let regions = Arc::new((self.render)());
        let mut rendered = self.rendered.lock();
        // Views nobody watches any more go with the next change.
        rendered.retain(|_, (at, _)| *at + 1 >= change);
        rendered.insert(self.view.clone(), (change, regions.clone()));
        regions
    }
}

/// The event that sends the regions whose text changed since `sent`, if any did.
fn update(regions: &[Region], sent: &mut HashMap<&'static str, String>) -> Option<Bytes> {
    let mut changed = Map::new();
    for region in regions {
        if sent.get(region.id) == Some(&region.key) {
            continue;
        }
        sent.insert(region.id, region.key.clone());
        changed.insert(
            region.id.to_owned(),
            json!({ "key": region.key, "html": region.markup().0 }),
        );
    }
    if changed.is_empty() {
        return None;
    }
    Some(Bytes::from(format!(
        "event: update\ndata: {}\n\n",
        Value::Object(changed)
    )))
}
