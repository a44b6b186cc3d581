//! mcp-task-server: a task manager and a DAG workflow engine behind one MCP server, over
//! stdio or Streamable HTTP, its state in SQLite or PostgreSQL.
//!
//! The layers, from the outside in:
//! - [`transport`]: stdio and HTTP, bytes in and out;
//! - [`server`]: MCP translation (rmcp), the only module that knows the protocol;
//! - [`cli`]: the terminal commands, a face beside the server;
//! - [`app`]: every operation, whichever face asks for it: the published tools, the call
//!   path, the run operations;
//! - [`engine`]: workflows, their validation, plans and the scheduler;
//! - [`runs`]: the durable run registry, the engine's journal on the store, and the runs'
//!   MCP tasks;
//! - [`todos`]: the five todo tools, each validated, run and audited on one path;
//! - [`store`]: persistence (todos, audit log, runs, nodes, tasks), knowing nothing of MCP;
//! - [`clock`]: timestamps as the tools report them and stored deadlines;
//! - [`telemetry`]: OpenTelemetry spans and metrics, `/metrics`, trace ids in the logs, and
//!   runs as traces.

pub mod app;
pub(crate) mod auth;
pub mod cli;
pub mod clock;
pub mod engine;
pub mod runs;
pub mod schema;
pub mod server;
pub(crate) mod slots;
pub mod store;
pub mod telemetry;
pub mod todos;
pub mod transport;
pub(crate) mod web;

#[doc(hidden)]
pub mod fuzzing;
mod layers;
