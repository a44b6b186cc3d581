//! `commands_file`: the oracle is documented on `mcp_task_server::fuzzing::commands_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_task_server::fuzzing::commands_file(data));
