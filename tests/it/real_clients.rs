//! Real MCP clients that this project did not write, talking to the server binary over
//! stdio: the TypeScript SDK, the Python SDK and the MCP Inspector, installed from their
//! registries at the versions locked in `tests/clients/` (`package-lock.json`,
//! `requirements.txt`), and rmcp's own client in the 2026-07-28 era.
//!
//! Each test runs one client scenario against its own database and workflows folder and
//! asserts on what the client printed (JSON). Nothing here installs or builds a client:
//! `tests/clients/install` does (`.ci/run` calls it). Where a client is not installed the
//! test prints `SKIPPED ...` on stderr, naming what is missing and how to install it, and
//! returns; with `TASKS_REAL_CLIENTS=required` (as `.ci/run` sets) it fails instead.
//!
//! The tests of a client script run once, over stdio here and over HTTP in `http.rs`, are
//! the rows of a table ([`real_client_cases!`], `cases.rs`); the MCP Inspector's
//! (`inspector.rs`), rmcp's (`rmcp.rs`) and the conformance suite's (`conformance.rs`)
//! take several steps each and are written out.

mod cases;
mod checks;
mod clients;
mod conformance;
mod http;
mod inspector;
mod oauth;
mod rmcp;
mod workflows;

use cases::real_client_cases;
use checks::{
    assert_cancelled_ask_task, assert_directly_asked_ask, assert_fastmcp_read_the_adr,
    assert_py_answered_ask_in_a_round, assert_py_discovered_and_added_todos,
    assert_py_legacy_session_was_asked_by_elicitation, assert_py_planned_an_adr_in_rounds,
    assert_py_used_the_surface, assert_rounds, assert_streamed_as_a_task, assert_streamed_ask_task,
    assert_ts_planned_an_adr_directly, assert_ts_streamed_the_adr_planner, assert_used_the_surface,
    result,
};
use workflows::{
    assert_adrs_validated_and_reviewed, assert_bootstrap_looped_asking,
    assert_bootstrap_scripts_written, assert_fastmcp_ran_the_bootstrap_loop,
    assert_fastmcp_validated_the_adrs, assert_readiness_checked, assert_remembered,
    assert_research_reported, assert_troubleshooting_planned, questions, succeeded_output,
    with_accepted_adrs, with_clean_adrs, with_faulty_adrs,
};

/// Every check of `adr_bootstrap_validation` up front, for FastMCP's script: nothing is
/// asked.
pub(crate) const BOOTSTRAP_CHECKS_UP_FRONT: &str = r#"{"workflow": "adr_bootstrap_validation", "arguments": {"checks": [
    {"id": "0001_use_postgres_l9", "check": "test -d docs/adrs || { echo 'no ADR folder'; exit 1; }"},
    {"id": "0001_use_postgres_l10", "check": "echo 'operators ready'"},
    {"id": "0002_config_l9", "check": "test -f config/app.toml || { echo 'no config'; exit 1; }"}]}}"#;

real_client_cases! {
    // The TypeScript SDK (1.x, 2025-11-25 tasks).
    fn ts_sdk_call_tool_stream_runs_ask_as_a_task_answers_its_elicitation_and_lists_it {
        client: TsSdk,
        over: Stdio,
        scenario: Named("task-stream"),
        expect: |seen| assert_streamed_ask_task(&seen.ran),
    }
    fn ts_sdk_cancels_a_waiting_task_and_a_second_cancel_is_invalid_params {
        client: TsSdk,
        over: Stdio,
        scenario: Named("task-cancel"),
        expect: |seen| assert_cancelled_ask_task(&seen.ran),
    }
    fn ts_sdk_plain_call_tool_of_ask_is_answered_by_direct_elicitation {
        client: TsSdk,
        over: Stdio,
        scenario: Named("direct-elicit"),
        expect: |seen| assert_directly_asked_ask(&seen.ran),
    }
    fn ts_sdk_starts_a_workflow_as_a_prompt_reads_what_a_run_wrote_and_follows_a_run {
        client: TsSdk,
        over: Stdio,
        scenario: Named("surface"),
        expect: |seen| assert_used_the_surface(&seen.ran),
    }

    // The built-in workflows, drafted and answered as `tests/clients/scenarios.json` lists.
    fn ts_sdk_call_tool_stream_plans_an_adr_as_a_task_answering_its_sampling_and_elicitation {
        client: TsSdk,
        over: Stdio,
        scenario: Named("stream:interactive_adr_planning"),
        expect: assert_ts_streamed_the_adr_planner,
    }
    fn ts_sdk_plain_call_tool_plans_an_adr_with_direct_sampling_and_elicitation {
        client: TsSdk,
        over: Stdio,
        scenario: Named("direct:interactive_adr_planning"),
        expect: assert_ts_planned_an_adr_directly,
    }
    fn ts_sdk_call_tool_stream_checks_deployment_readiness_as_a_task_asking_each_open_check {
        client: TsSdk,
        over: Stdio,
        scenario: Named("stream:deployment_readiness"),
        expect: |seen| {
            assert_streamed_as_a_task(&seen.ran);
            assert_readiness_checked(&seen.sandbox, &result(&seen.ran), &questions(&seen.ran));
        },
    }
    fn ts_sdk_call_tool_stream_troubleshoots_as_a_task_answering_its_sampling_and_elicitation {
        client: TsSdk,
        over: Stdio,
        scenario: Named("stream:troubleshoot"),
        expect: |seen| {
            assert_streamed_as_a_task(&seen.ran);
            let asked = questions(&seen.ran);
            assert_troubleshooting_planned(&seen.sandbox, &result(&seen.ran), &asked);
        },
    }
    fn ts_sdk_remembers_the_readiness_trend_and_rates_a_troubleshooting_session_for_the_next {
        client: TsSdk,
        over: Stdio,
        scenario: Named("memory"),
        expect: |seen| assert_remembered(&seen.sandbox, &seen.ran),
    }
    fn ts_sdk_call_tool_stream_validates_adrs_as_a_task_its_model_reviewing_each {
        client: TsSdk,
        over: Stdio,
        scenario: Named("stream:adr_validation"),
        setup: with_clean_adrs,
        expect: |seen| {
            assert_streamed_as_a_task(&seen.ran);
            let asked = questions(&seen.ran);
            assert_adrs_validated_and_reviewed(&seen.sandbox, &result(&seen.ran), &asked);
        },
    }
    fn ts_sdk_call_tool_stream_runs_the_bootstrap_loop_as_a_task_pasting_each_run_of_the_script {
        client: TsSdk,
        over: Stdio,
        scenario: Named("stream:bootstrap_validation_loop"),
        expect: |seen| {
            assert_streamed_as_a_task(&seen.ran);
            let asked = questions(&seen.ran);
            assert_bootstrap_looped_asking(&seen.sandbox, &result(&seen.ran), &asked);
        },
    }
    fn ts_sdk_call_tool_stream_drafts_a_check_per_requirement_and_writes_the_bootstrap_scripts {
        client: TsSdk,
        over: Stdio,
        scenario: Named("stream:adr_bootstrap_validation"),
        setup: with_accepted_adrs,
        expect: |seen| {
            assert_streamed_as_a_task(&seen.ran);
            let asked = questions(&seen.ran);
            let drafted = asked.iter().filter(|(_, a)| a == "draft check").count();
            let reviewed = asked.iter().filter(|(_, a)| a == "review check").count();
            assert_eq!((drafted, reviewed), (3, 3), "{asked:?}");
            let result = result(&seen.ran);
            assert_bootstrap_scripts_written(&seen.sandbox, succeeded_output(&result));
        },
    }
    fn ts_sdk_call_tool_stream_researches_as_a_task_sampling_every_fanned_out_sub_question {
        client: TsSdk,
        over: Stdio,
        scenario: Named("stream:research"),
        expect: |seen| {
            assert_streamed_as_a_task(&seen.ran);
            assert_research_reported(&seen.sandbox, &result(&seen.ran), &questions(&seen.ran));
        },
    }

    // The Python SDK (`mcp` 2.x): `legacy` mode with direct elicitation, `auto` mode
    // answering in `input_required` rounds.
    fn py_sdk_2025_11_25_session_call_tool_of_ask_is_answered_by_its_elicitation_callback {
        client: PySdk,
        over: Stdio,
        scenario: Named("legacy-elicit"),
        expect: assert_py_legacy_session_was_asked_by_elicitation,
    }
    fn py_sdk_auto_mode_discovers_2026_07_28_and_adds_and_lists_todos {
        client: PySdk,
        over: Stdio,
        scenario: Named("auto-todos"),
        expect: assert_py_discovered_and_added_todos,
    }
    fn py_sdk_auto_mode_answers_a_workflow_question_in_an_input_required_round {
        client: PySdk,
        over: Stdio,
        scenario: Named("auto-rounds"),
        expect: assert_py_answered_ask_in_a_round,
    }
    fn py_sdk_auto_mode_gets_a_prompt_completes_its_argument_and_reads_what_a_run_wrote {
        client: PySdk,
        over: Stdio,
        scenario: Named("auto-surface"),
        expect: |seen| assert_py_used_the_surface(&seen.ran),
    }
    fn py_sdk_auto_mode_plans_an_adr_in_input_required_rounds_with_sampling_and_elicitation {
        client: PySdk,
        over: Stdio,
        scenario: Named("auto:interactive_adr_planning"),
        expect: assert_py_planned_an_adr_in_rounds,
    }
    fn py_sdk_auto_mode_checks_deployment_readiness_in_one_round_per_open_check {
        client: PySdk,
        over: Stdio,
        scenario: Named("auto:deployment_readiness"),
        expect: |seen| {
            assert_rounds(&seen.ran, &[1, 2], 2);
            assert_readiness_checked(&seen.sandbox, &result(&seen.ran), &questions(&seen.ran));
        },
    }
    fn py_sdk_auto_mode_troubleshoots_in_six_input_required_rounds {
        client: PySdk,
        over: Stdio,
        scenario: Named("auto:troubleshoot"),
        expect: |seen| {
            assert_rounds(&seen.ran, &[1, 2, 3, 4, 5, 6], 6);
            let asked = questions(&seen.ran);
            assert_troubleshooting_planned(&seen.sandbox, &result(&seen.ran), &asked);
        },
    }
    fn py_sdk_auto_mode_researches_in_four_rounds_answering_the_fanned_out_sub_questions_in_one {
        client: PySdk,
        over: Stdio,
        scenario: Named("auto:research"),
        expect: |seen| {
            assert_rounds(&seen.ran, &[1, 2, 3, 3, 3, 4], 4);
            assert_research_reported(&seen.sandbox, &result(&seen.ran), &questions(&seen.ran));
        },
    }

    // FastMCP's client (`fastmcp`, pinned with the Python SDK in `requirements.txt`).
    fn fastmcp_client_validates_faulty_adrs_and_reads_the_report_the_run_wrote {
        client: FastMcp,
        over: Stdio,
        scenario: AdrValidation,
        setup: with_faulty_adrs,
        expect: assert_fastmcp_validated_the_adrs,
    }
    fn fastmcp_client_writes_the_bootstrap_scripts_with_every_check_up_front_and_reads_the_setup {
        client: FastMcp,
        over: Stdio,
        scenario: Named(BOOTSTRAP_CHECKS_UP_FRONT),
        setup: with_accepted_adrs,
        expect: |seen| {
            let output = &seen.ran.event("output")["output"];
            assert_bootstrap_scripts_written(&seen.sandbox, output);
            let read = seen.ran.event("read");
            // The setup script, linked last: no check passed up front has a setup step.
            let uri = read["uri"].as_str().unwrap();
            assert!(uri.ends_with("scripts/bootstrap/bootstrap.sh"), "{read}");
            let text = read["text"].as_str().unwrap();
            assert!(text.contains("# No requirement has a setup step.\n"), "{text}");
        },
    }
    fn fastmcp_client_gets_the_adr_planners_prompt_and_reads_the_adr_the_run_wrote {
        client: FastMcp,
        over: Stdio,
        scenario: AdrAnswersUpFront,
        expect: |seen| assert_fastmcp_read_the_adr(&seen.ran),
    }
    fn fastmcp_client_remembers_the_readiness_trend_and_rates_a_troubleshooting_session {
        client: FastMcp,
        over: Stdio,
        scenario: Named("memory"),
        expect: |seen| assert_remembered(&seen.sandbox, &seen.ran),
    }
    fn fastmcp_client_runs_the_bootstrap_loop_with_every_answer_up_front_and_reads_its_report {
        client: FastMcp,
        over: Stdio,
        scenario: BootstrapAnswersUpFront,
        expect: assert_fastmcp_ran_the_bootstrap_loop,
    }
}
