//! `inline_definition`: the oracle is documented on `mcp_task_server::fuzzing::inline_definition`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_task_server::fuzzing::inline_definition(data));
