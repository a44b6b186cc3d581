//! mcp-task-server: a task manager and a DAG workflow engine behind one stdio MCP server.
//!
//! Reading order, from the wire inwards:
//! - [`server`]: the MCP protocol adapter (rmcp), the only module that knows the protocol;
//! - [`cli`]: the terminal commands beside the server;
//! - [`engine`]: workflows, their validation, plans and the scheduler;
//! - [`tasks`]: the durable task registry, the engine's journal on the store;
//! - [`tools`]: the task-manager tools, each validated, run and audited on one path;
//! - [`store`]: SQLite persistence (todos, audit log, runs, nodes, tasks), knowing nothing
//!   of MCP;
//! - [`clock`]: timestamps as the tools report them and stored deadlines.

pub mod app;
pub mod cli;
pub mod clock;
pub mod engine;
pub mod runs;
pub mod server;
pub mod store;
pub mod todos;

#[doc(hidden)]
pub mod fuzzing;
