//! Telemetry: what the server tells an operator's tracing backend.

pub mod runs;
