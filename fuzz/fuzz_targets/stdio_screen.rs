//! `stdio_screen`: the oracle is documented on `mcp_task_server::fuzzing::stdio_screen`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_task_server::fuzzing::stdio_screen(data));
