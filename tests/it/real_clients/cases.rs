//! The shape most real-client tests share, as data: a client script (the TypeScript SDK,
//! the Python SDK or FastMCP's client) runs one scenario against a sandbox's server, over
//! stdio or Streamable HTTP, and what it printed is checked. [`real_client_cases!`] makes
//! one `#[tokio::test]` of each case of a table; [`run_case`] runs any of them.

use std::path::Path;

use tokio::process::Command;

use super::checks::adr_answers_up_front;
use super::clients::{Ran, clients_dir, command, fastmcp, installed, py_sdk, run, ts_sdk};
use super::http::{HttpServer, TOKEN};
use super::workflows::bootstrap_answers_up_front;
use crate::support::Sandbox;

/// One test: which client runs which scenario, how it reaches the server, and what it
/// must have seen.
pub(super) struct Case {
    pub(super) client: Client,
    pub(super) over: Over,
    pub(super) scenario: Scenario,
    /// What the sandbox holds before the client runs (ADRs to validate, say).
    pub(super) setup: fn(&Sandbox),
    pub(super) expect: fn(&Seen),
}

/// A client that runs as a script of `tests/clients`.
#[derive(Clone, Copy)]
pub(super) enum Client {
    /// `ts_sdk.mjs`, the TypeScript SDK on Node.js.
    TsSdk,
    /// `py_sdk.py`, the Python SDK.
    PySdk,
    /// `fastmcp_client.py`, FastMCP's client, in the Python SDK's venv.
    FastMcp,
}

/// How the client reaches the server.
#[derive(Clone, Copy)]
pub(super) enum Over {
    /// The client starts the server itself and speaks to its stdio.
    Stdio,
    /// The server serves Streamable HTTP without tokens; the client is given its URL.
    Http,
    /// The server serves Streamable HTTP with a tokens file; the client runs once with
    /// its bearer token, then once more without it ([`Seen::without_token`]).
    HttpWithToken,
    /// Two servers on one database; the client is given the first's URL, and the
    /// second's in `TASKS_TEST_URL_B`.
    TwoHttpServers,
}

/// What the script is asked to do: its first argument.
pub(super) enum Scenario {
    /// One of the scenarios the script names (`task-stream`, `auto:research`, …).
    Named(&'static str),
    /// Every answer of the ADR planner, so that it asks nothing: what FastMCP's script
    /// takes.
    AdrAnswersUpFront,
    /// FastMCP's script calling `adr_validation` on `docs/adrs`.
    AdrValidation,
    /// Every answer of the bootstrap validation loop, so that it asks nothing, for
    /// FastMCP's script.
    BootstrapAnswersUpFront,
}

/// What a case's client left: the sandbox its server ran in, and what it printed.
pub(super) struct Seen {
    pub(super) sandbox: Sandbox,
    pub(super) ran: Ran,
    /// Over [`Over::HttpWithToken`], the same client run again without the token.
    pub(super) without_token: Option<Ran>,
}

impl Client {
    /// The interpreter that runs the script, or what is missing.
    fn installed(self) -> Result<std::path::PathBuf, String> {
        match self {
            Client::TsSdk => ts_sdk(),
            Client::PySdk => py_sdk(),
            Client::FastMcp => fastmcp(),
        }
    }

    fn script(self) -> &'static str {
        match self {
            Client::TsSdk => "ts_sdk.mjs",
            Client::PySdk => "py_sdk.py",
            Client::FastMcp => "fastmcp_client.py",
        }
    }
}

impl Scenario {
    fn argument(&self) -> String {
        match self {
            Scenario::Named(name) => (*name).to_owned(),
            Scenario::AdrAnswersUpFront => adr_answers_up_front().to_string(),
            Scenario::AdrValidation => {
                r#"{"workflow": "adr_validation", "arguments": {"folder": "docs/adrs"}}"#.to_owned()
            }
            Scenario::BootstrapAnswersUpFront => bootstrap_answers_up_front().to_string(),
        }
    }

    /// Lays out what the scenario's workflow reads in the workspace: the accepted ADRs
    /// of the bootstrap validation loop.
    fn prepare(&self, sandbox: &Sandbox) {
        let bootstrap = match self {
            Scenario::Named(name) => name.ends_with(":bootstrap_validation_loop"),
            Scenario::BootstrapAnswersUpFront => true,
            Scenario::AdrAnswersUpFront | Scenario::AdrValidation => false,
        };
        if bootstrap {
            crate::bootstrap::write_adrs(&sandbox.workspace, false);
        }
    }
}

/// Runs `case`: skips it, saying so, where its client is not installed (fails it under
/// `TASKS_REAL_CLIENTS=required`); else starts what it runs over, runs the client, which
/// must succeed, and checks what it saw while the servers still run.
pub(super) async fn run_case(case: Case) {
    let Some(interpreter) = installed(case.client.installed()) else {
        return;
    };
    let sandbox = Sandbox::for_clients();
    (case.setup)(&sandbox);
    case.scenario.prepare(&sandbox);
    let servers: Vec<HttpServer> = match case.over {
        Over::Stdio => Vec::new(),
        Over::Http => vec![HttpServer::start(&sandbox, &[])],
        Over::HttpWithToken => vec![HttpServer::with_token(&sandbox)],
        Over::TwoHttpServers => vec![
            HttpServer::start(&sandbox, &[]),
            HttpServer::start(&sandbox, &[]),
        ],
    };
    let with_token = matches!(case.over, Over::HttpWithToken).then_some(TOKEN);
    let ran = run(case.command(&interpreter, &sandbox, &servers, with_token))
        .await
        .succeeded();
    let without_token = match case.over {
        Over::HttpWithToken => {
            Some(run(case.command(&interpreter, &sandbox, &servers, None)).await)
        }
        _ => None,
    };
    let seen = Seen {
        sandbox,
        ran,
        without_token,
    };
    (case.expect)(&seen);
    drop(servers);
}

impl Case {
    /// `<script> <scenario> -- <server>` over stdio, `<script> <scenario> --url <url>`
    /// over HTTP, with `token` as the bearer (`TASKS_TEST_TOKEN`).
    fn command(
        &self,
        interpreter: &Path,
        sandbox: &Sandbox,
        servers: &[HttpServer],
        token: Option<&str>,
    ) -> Command {
        let mut command = command(interpreter, sandbox);
        command
            .arg(clients_dir().join(self.client.script()))
            .arg(self.scenario.argument());
        let [first, others @ ..] = servers else {
            command.arg("--").args(sandbox.server());
            return command;
        };
        command.arg("--url").arg(&first.url);
        if let [second] = others {
            command.env("TASKS_TEST_URL_B", &second.url);
        }
        match token {
            Some(token) => command.env("TASKS_TEST_TOKEN", token),
            None => command.env_remove("TASKS_TEST_TOKEN"),
        };
        command
    }
}

/// `real_client_cases! { fn name { client: TsSdk, over: Stdio, scenario: Named("…"),
/// setup: |sandbox| …, expect: |seen| … } … }` (`setup` may be left out): a
/// `#[tokio::test]` named `name` for each case of the table, which runs it with
/// [`run_case`].
macro_rules! real_client_cases {
    (@setup) => { |_| {} };
    (@setup $setup:expr) => { $setup };
    ($(
        $(#[$attr:meta])*
        fn $name:ident {
            client: $client:ident,
            over: $over:ident,
            scenario: $scenario:expr,
            $(setup: $setup:expr,)?
            expect: $expect:expr $(,)?
        }
    )*) => {
        $(
            $(#[$attr])*
            #[tokio::test]
            async fn $name() {
                use $crate::real_clients::cases::Scenario::*;
                use $crate::real_clients::cases::{Case, Client, Over, run_case};
                run_case(Case {
                    client: Client::$client,
                    over: Over::$over,
                    scenario: $scenario,
                    setup: real_client_cases!(@setup $($setup)?),
                    expect: $expect,
                })
                .await;
            }
        )*
    };
}

pub(super) use real_client_cases;
