//! `resource_uri`: the oracle is documented on `mcp_task_server::fuzzing::resource_uri`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_task_server::fuzzing::resource_uri(data));
