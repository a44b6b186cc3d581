//! The transports, the outermost layer: bytes in and out, before MCP. stdio is our own
//! JSON-RPC line transport in front of rmcp (screening, a bounded write queue, cancels of
//! calls in flight); HTTP is rmcp's Streamable HTTP service behind our gate (tokens,
//! sessions owned by their principal, connection and stream limits).
//!
//! Invariant: a transport hands the MCP server (`server/`) only messages it can serve,
//! and decides nothing about tools, runs or tasks.

pub mod http;
pub mod stdio;
