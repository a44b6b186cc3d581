//! The bodies of the fuzz targets in `fuzz/`, one function per target taking the fuzzer's
//! bytes and panicking when a property fails.
//!
//! They live in the crate, not in `fuzz/`, for two reasons: they reach `pub(crate)` code
//! (the stdio screen, the HTTP rewrite, the tool parsers), and the same functions replay
//! the committed corpora and regressions on stable (`tests/it/fuzz_corpus.rs`), so a finding
//! stays tested without a nightly toolchain. Nothing here runs in the server.
//!
//! Each target states its oracle: what must hold for every input, beyond not panicking.

mod commands;
mod engine;
mod markdown;
mod resources;
mod tools;
mod wire;

pub use commands::commands_file;
pub use engine::{form_answers, inline_definition, template};
pub use markdown::markdown;
pub use resources::{resource_uri, subscription_filter};
pub use tools::tool_args;
pub use wire::{http_rewrite, stdio_screen, tokens_file};

/// A target's body: it panics when the input breaks one of the target's properties.
pub type Harness = fn(&[u8]);

/// Every target, by the name of its fuzz target and of its corpus folder.
pub const TARGETS: &[(&str, Harness)] = &[
    ("stdio_screen", stdio_screen),
    ("tool_args", tool_args),
    ("inline_definition", inline_definition),
    ("template", template),
    ("form_answers", form_answers),
    ("tokens_file", tokens_file),
    ("http_rewrite", http_rewrite),
    ("resource_uri", resource_uri),
    ("subscription_filter", subscription_filter),
    ("markdown", markdown),
    ("commands_file", commands_file),
];

/// The parts of an input made of several texts: split at each NUL byte, which no JSON
/// text holds.
fn parts(data: &[u8], count: usize) -> Vec<&[u8]> {
    let mut parts: Vec<&[u8]> = data.splitn(count, |&b| b == 0).collect();
    parts.resize(count, &[]);
    parts
}
