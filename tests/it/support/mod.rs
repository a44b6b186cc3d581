//! The harness every integration test shares: the server binary and the ways to start
//! it (over stdio with an rmcp client, as raw JSON-RPC lines, from a sandbox folder), what
//! it left in its database, waiting for a child, the databases of both backends, a
//! PostgreSQL cluster of a test's own, the raw wire of an in-process server, the engine's
//! test support, and the notes of tests that skip.

pub(crate) mod backends;
pub(crate) mod cluster;
pub(crate) mod db;
pub(crate) mod engine;
pub(crate) mod otlp;
pub(crate) mod raw;
pub(crate) mod rng;
pub(crate) mod sandbox;
pub(crate) mod skip;
pub(crate) mod stdio;
pub(crate) mod text;
pub(crate) mod wait;
pub(crate) mod wire;

pub(crate) use db::{audit_rows, read_only, sorted_titles, sorted_todos, task_titles};
pub(crate) use raw::{RawServer, listening_address};
pub(crate) use sandbox::Sandbox;
pub(crate) use stdio::{
    Server, TempDb, call, envelope, expect_error, expect_ok, server_command, try_call,
};
pub(crate) use text::assert_contains_all;
pub(crate) use wait::{wait_until, wait_until_within};

/// Makes ring the process's TLS provider before an HTTP client is built: reqwest is built
/// with rustls and no provider of its own (the server's OTLP exporter uses it, with ring),
/// and an rmcp HTTP client built without a provider in place would panic. Every test that
/// builds one calls this; installing it twice changes nothing.
pub(crate) fn install_tls_provider() {
    #[allow(deprecated)] // ring, as the server uses it (`src/telemetry/mod.rs` says why)
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The server binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_mcp-task-server");
