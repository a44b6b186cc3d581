//! `http_rewrite`: the oracle is documented on `mcp_task_server::fuzzing::http_rewrite`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_task_server::fuzzing::http_rewrite(data));
