//! `form_answers`: the oracle is documented on `mcp_task_server::fuzzing::form_answers`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_task_server::fuzzing::form_answers(data));
