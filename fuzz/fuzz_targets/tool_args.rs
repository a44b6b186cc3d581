//! `tool_args`: the oracle is documented on `mcp_task_server::fuzzing::tool_args`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_task_server::fuzzing::tool_args(data));
