//! The MCP protocol adapter: the only code that knows rmcp and JSON-RPC.
//!
//! `tools/list` and `tools/call` are implemented by hand on the `ServerHandler` (no
//! `#[tool]` macros, no typed parameters) so that the raw wire arguments reach our own
//! validator untouched, and rejected calls are audited like any other.

pub(crate) mod caller;
mod calls;
mod handler;
mod interaction;
pub(crate) mod listen_tasks;
mod observed;
mod progress;
mod prompts;
mod resources;
mod results;
pub(crate) mod shim;

mod subscriptions;
mod tasks;

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::app::App;
pub use observed::Observed;

/// The MCP server: cheap to clone, one per connection.
#[derive(Clone)]
pub struct Server {
    app: App,
    /// The cancel tokens of the runs that `tools/call` requests wait on, by request id.
    ///
    /// A run is cancelled by the client's `notifications/cancelled`, not by the request's
    /// own token: rmcp cancels that one too when the client hangs up, and a run whose
    /// caller is gone finishes its work (it is durable; nobody else may want it stopped).
    runs: Arc<parking_lot::Mutex<HashMap<String, CancellationToken>>>,
    /// A slot for each `tasks/result` request waiting, capped in all and per principal
    /// (served over HTTP).
    result_waits: Option<Arc<crate::slots::Slots>>,
    /// The session's `resources/subscribe` watches.
    watches: subscriptions::Watches,
    /// How many resources are followed at most: by a session, and across sessions.
    subscriptions: subscriptions::Caps,
}

/// The most resources a session follows at once unless told otherwise.
pub const DEFAULT_MAX_SUBSCRIPTIONS: usize = 64;
pub(crate) use subscriptions::accepted as accepted_subscriptions;
pub use subscriptions::{DEFAULT_MAX_SUBSCRIPTIONS_PER_PRINCIPAL, DEFAULT_MAX_SUBSCRIPTIONS_TOTAL};

/// Whether `method` is one of the protocol's own, which rmcp parses into a type of its own
/// and takes for a custom method only when its parameters do not fit that type.
pub(crate) fn is_standard_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "prompts/get"
            | "prompts/list"
            | "resources/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "resources/templates/list"
            | "tools/call"
            | "tools/list"
            | "completion/complete"
            | "logging/setLevel"
            // `tasks/result` and `tasks/list` are not here: rmcp has no type for them, and
            // they reach the handler as custom requests by design.
            | "tasks/get"
            | "tasks/cancel"
            | "tasks/update"
            | "subscriptions/listen"
    )
}

/// Whether a request speaks 2026-07-28 or later: stateless, with no requests from the
/// server to the client.
fn is_stateless(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> bool {
    context.protocol_version().is_some_and(|version| {
        version.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str()
    })
}

impl Server {
    /// The MCP face of `app`.
    pub fn new(app: App) -> Server {
        Server {
            app,
            runs: Arc::default(),
            result_waits: None,
            watches: subscriptions::Watches::default(),
            subscriptions: subscriptions::Caps::default(),
        }
    }

    /// The most resources a session follows at once, and tasks one listen follows.
    pub(crate) fn max_subscriptions(&self) -> usize {
        self.subscriptions.per_session
    }

    /// Lets each session follow at most `per_session` resources at once, by
    /// `resources/subscribe` or in one `subscriptions/listen` (and each listen at most
    /// that many tasks), and every session together at most `total`, `per_principal` of
    /// them by one principal.
    pub fn with_max_subscriptions(
        self,
        per_session: usize,
        total: usize,
        per_principal: usize,
    ) -> Server {
        Server {
            subscriptions: subscriptions::Caps {
                per_session,
                followed: crate::slots::Slots::new(total, per_principal),
            },
            ..self
        }
    }

    /// The application this server is the MCP face of: the HTTP transport serves the
    /// dashboard, another face of it, beside MCP.
    pub(crate) fn app(&self) -> &App {
        &self.app
    }

    /// A clone for one session: the same application, its own table of the runs its
    /// requests wait on (request ids are unique within a session only).
    pub(crate) fn for_session(&self) -> Server {
        Server {
            runs: Arc::default(),
            watches: subscriptions::Watches::default(),
            ..self.clone()
        }
    }

    /// Serves `app`, this server's application with an HTTP server's caps on it, and caps
    /// the `tasks/result` requests waiting by `result_waits`.
    pub(crate) fn with_caps(self, app: App, result_waits: Arc<crate::slots::Slots>) -> Server {
        Server {
            app,
            result_waits: Some(result_waits),
            ..self
        }
    }
}
