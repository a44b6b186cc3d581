//! The integration tests, as one test binary: one module per subject, over the harness
//! in `support`. One binary links once, where a binary per subject linked the crate and
//! its dependencies thirty times.
//!
//! Every test here shares one process with the others: none may change what the process
//! holds for all of them (its environment, its working directory, its limits, its signal
//! handlers) but through the child processes it starts.

mod support;

mod adr_planning;
mod adr_validation;
mod audit;
mod bootstrap;
mod browser;
mod builtin_workflows;
mod cli;
mod commands;
mod crash;
mod crash_tasks;
mod disk_full;
mod docs;
mod durable;
mod e2e_stdio;
mod e2e_workflows;
mod engine;
mod engine_phases;
mod fuzz_corpus;
mod history;
mod hostile;
mod http;
mod in_process;
mod model_only;
mod postgres;
mod postgres_tls;
mod protocol_eras;
mod real_clients;
mod repeat;
mod run_traces;
mod schema;
mod start;
mod store;
mod subworkflows;
mod task_protocols;
mod tasks;
mod telemetry;
mod template_budgets;
mod two_hosts;
mod wire_corpus;
mod workflow_memory;
mod workspace_files;
