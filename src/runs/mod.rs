//! The durable task registry: runs as parent tasks, nodes and `for_each` instances as
//! sub-tasks, their states, progress, questions, leases and TTL.
//!
//! The registry is the engine's [`Journal`](crate::engine::journal::Journal) on the store.
//! Invariant: this module knows no SQL and no MCP types; the store holds the queries and
//! the server speaks the protocol.

mod admin;
mod history;
pub mod housekeeping;
mod ids;
mod lease_owner;
mod leases;
mod outcome;
pub mod progress;
mod records;
mod registry;
mod rounds;
pub mod status;
mod tree_tasks;
mod view;

pub use crate::engine::question::{ASKED_AT_MOST, Refusal};
pub use admin::{AnswerError, OpenQuestion};
pub use registry::{DEFAULT_HISTORY_TTL, Registry, RegistryConfig};
pub use status::TaskStatus;
pub use view::{
    ChildRunView, ErrorView, IterationView, NodeView, ParentView, QuestionView, RetriedView,
    RunView, Skipped, TaskView, Times,
};
