//! A hostile corpus, one table: inline workflow definitions a prompt-injected model or a
//! hostile client may send, each of which must end in its clear failure within seconds,
//! while the same server keeps answering a plain call meanwhile; and a server restarted on
//! that database must find no run left `running`.
//!
//! Inline secret reads (`read_file`/`list_dir` in an inline definition) are refused at
//! validation, before any run starts, every offending node named. A client whose answers
//! never fit their question ends its node, not the server. A forged or replayed
//! `requestState` is refused over the 2026-07-28 wire on both backends in
//! `task_protocols.rs` (`a_forged_or_foreign_request_state_is_refused`, and the older
//! round refused in `a_call_without_tasks_asks_in_rounds_…`).

use std::time::Duration;

use mcp_task_server::store::Scope;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction,
};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};

use crate::support;
use crate::support::{Server, call};

/// How long a hostile run may take to end in its failure (a debug build, a shared machine).
const ENDS_WITHIN: Duration = Duration::from_secs(60);

/// How long a plain call may wait while a hostile run goes on.
const ANSWERED_WITHIN: Duration = Duration::from_secs(2);

/// How a case must end.
enum Expect {
    /// Node `node` fails with `code`, its message naming `words` (the run fails with it,
    /// unless the node may fail and the run go on).
    Fails {
        node: &'static str,
        code: &'static str,
        words: &'static [&'static str],
    },
    /// The run succeeds: what used to crash the server is answered.
    Succeeds,
    /// The call is refused before any run starts, with `code`, naming each of `words`.
    Refused {
        code: &'static str,
        words: &'static [&'static str],
    },
}

struct Case {
    name: &'static str,
    definition: Value,
    expect: Expect,
}

fn render(template: &str) -> Value {
    json!({ "nodes": { "bomb": { "render": template } } })
}

/// A megabyte string doubled a dozen times by `op`: one instruction each, 4 GiB in all.
fn doubled(op: &str) -> String {
    let double = format!("{{% set a = a {op} a %}}").repeat(12);
    format!("{{% set a = 'x' * 1000000 %}}{double}{{{{ a | length }}}}")
}

fn cases() -> Vec<Case> {
    let fuel = &["template-fuel", "bomb"];
    let output = &["template-max-output", "bomb"];
    let mut many = serde_json::Map::new();
    for i in 0..1000 {
        let node = match i % 4 {
            0 => json!({ "render": "{{ range(100000) * 100000 }}", "on_failure": "continue" }),
            1 => json!({ "value": "'x' * 10000000", "on_failure": "continue" }),
            2 => json!({ "render": "{{ 1 | zero_pad(100000000) }}", "on_failure": "continue" }),
            _ => {
                json!({ "for_each": "range(20000)", "render": "{{ item }}", "on_failure": "continue" })
            }
        };
        many.insert(format!("n{i}"), node);
    }
    vec![
        Case {
            name: "inline secret reads",
            definition: json!({ "nodes": {
                "env": { "read_file": ".env" },
                "tokens": { "read_file": { "path": "tokens.txt", "max_bytes": 100 } },
                "keys": { "read_file": ".ssh/id_ed25519" },
                "look": { "list_dir": "." },
                "leak": { "render": "{{ nodes.env.output.content }}", "needs": ["env"] }
            } }),
            expect: Expect::Refused {
                code: "invalid_input",
                words: &[
                    "nodes.env.read_file",
                    "nodes.tokens.read_file",
                    "nodes.keys.read_file",
                    "nodes.look.list_dir",
                ],
            },
        },
        Case {
            name: "nested loop",
            definition: render(
                "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            ),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: fuel,
            },
        },
        Case {
            name: "huge string",
            definition: json!({ "nodes": { "bomb": { "value": "'x' * 100000000" } } }),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "lazily repeated list written out",
            definition: render("{{ range(100000) * 100000 }}"),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "join over a repeated list",
            definition: render("{{ (range(100000) * 100000) | join(',') }}"),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "huge range fan-out",
            definition: json!({ "nodes": { "bomb": {
                "for_each": "range(100000)", "render": "{{ item }}"
            } } }),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: &["max-for-each", "bomb"],
            },
        },
        Case {
            name: "recursive macro",
            definition: render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            expect: Expect::Fails {
                node: "bomb",
                code: "template_error",
                words: &["recursion"],
            },
        },
        Case {
            name: "doubling macro",
            definition: render(
                "{% macro f(n) %}{% if n < 40 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) }}",
            ),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: fuel,
            },
        },
        Case {
            name: "zero_pad over a format width",
            definition: render("{{ 1 | zero_pad(70000) }}"),
            expect: Expect::Succeeds,
        },
        Case {
            name: "zero_pad over the output cap",
            definition: render("{{ 1 | zero_pad(100000000) }}"),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "string doubled by ~",
            definition: render(&doubled("~")),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "string doubled by +",
            definition: render(&doubled("+")),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "repeated list concatenated",
            definition: render("{{ ((range(100000) * 100000) ~ '') | length }}"),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "repeated lists compared",
            definition: render("{{ (range(100000) * 100000) == (range(100000) * 100000) }}"),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "repeated list searched",
            definition: render("{{ -1 in range(100000) * 100000 }}"),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "repeated lists compared by a test",
            definition: render("{{ (range(100000) * 100000) is eq(range(100000) * 100000) }}"),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "repeated list sliced backwards",
            definition: render("{{ ((range(100000) * 100000)[::-1]) | first }}"),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "repeated list indexed",
            definition: render("{{ (range(100000) * 100000)[9999999999] }}"),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "repeated list unpacked",
            definition: render("{% set a, b = range(100000) * 100000 %}"),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: output,
            },
        },
        Case {
            name: "long lists compared in a loop",
            definition: render(
                "{% set l = range(100000) * 10 %}{% for i in range(100000) %}{% if l == l + [] %}{% endif %}{% endfor %}",
            ),
            expect: Expect::Fails {
                node: "bomb",
                code: "budget_exceeded",
                words: fuel,
            },
        },
        Case {
            name: "a thousand nodes of bombs",
            definition: json!({ "nodes": many }),
            expect: Expect::Fails {
                node: "n0",
                code: "budget_exceeded",
                words: &["template-max-output", "n0"],
            },
        },
    ]
}

/// Calls `run_workflow` with `definition`, and meanwhile a plain `list_tasks`, which must
/// be answered while the run goes on.
async fn run_beside_a_plain_call(server: &Server, name: &str, definition: Value) -> CallToolResult {
    let Value::Object(args) = json!({ "definition": definition }) else {
        unreachable!()
    };
    let params = CallToolRequestParams::new("run_workflow").with_arguments(args);
    let run = server.client.call_tool(params);
    let plain = async {
        // Let the run start first.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let answered = tokio::time::timeout(
            ANSWERED_WITHIN,
            call(&server.client, "list_tasks", json!({})),
        )
        .await;
        assert!(
            answered.is_ok(),
            "{name}: list_tasks was not answered while the run went on"
        );
    };
    let (result, ()) = tokio::join!(
        async {
            tokio::time::timeout(ENDS_WITHIN, run)
                .await
                .unwrap_or_else(|_| panic!("{name}: the run did not end in time"))
                .unwrap_or_else(|e| panic!("{name}: run_workflow failed on the wire: {e}"))
        },
        plain
    );
    result
}

fn check(case: &Case, result: &CallToolResult) {
    let wire = serde_json::to_value(result).expect("a result serialises");
    let structured = &wire["structuredContent"];
    match &case.expect {
        Expect::Succeeds => {
            let data = support::expect_ok(result);
            assert_eq!(data["status"], "succeeded", "{}: {data:#}", case.name);
        }
        Expect::Refused { code, words } => {
            assert_eq!(structured["ok"], false, "{}: {structured:#}", case.name);
            assert_eq!(structured["error"]["code"], *code, "{}", case.name);
            let message = structured["error"]["message"].as_str().unwrap_or_default();
            for word in *words {
                assert!(
                    message.contains(word),
                    "{}: {word:?} not in {message}",
                    case.name
                );
            }
            assert!(
                !message.contains("hunter2"),
                "{}: a secret leaked",
                case.name
            );
        }
        Expect::Fails { node, code, words } => {
            let report = &structured["data"];
            assert_ne!(report["status"], "running", "{}: {structured:#}", case.name);
            let error = &report["nodes"][node]["error"];
            assert_eq!(error["code"], *code, "{}: {error:#}", case.name);
            let message = error["message"].as_str().unwrap_or_default();
            for word in *words {
                assert!(
                    message.contains(word),
                    "{}: {word:?} not in {message}",
                    case.name
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_definition_ends_in_its_failure_while_the_server_answers() {
    let server = Server::start().await;
    // The workspace defaults to the server's working directory, where secrets may live.
    let cwd = server.db.parent().expect("the database's folder");
    std::fs::write(cwd.join(".env"), "API_KEY=hunter2\n").expect("write .env");
    for case in cases() {
        let result = run_beside_a_plain_call(&server, case.name, case.definition.clone()).await;
        check(&case, &result);
    }
    // Budget failures are audited, node and budget named.
    let rows = support::audit_rows(&server.db);
    let budget_rows: Vec<_> = rows
        .iter()
        .filter(|r| r.tool == "budget_exceeded")
        .collect();
    assert!(
        budget_rows
            .iter()
            .any(|r| r.node_id.as_deref() == Some("bomb") && r.args.contains("template-fuel")),
        "no audit row names the fuel budget and its node: {budget_rows:?}"
    );
    let stopped = server.stop().await;

    // A server restarted on that database takes nothing over that freezes it, and leaves no
    // run `running`.
    let restarted = Server::start_on(&stopped.db).await;
    let answered = tokio::time::timeout(
        ANSWERED_WITHIN,
        call(&restarted.client, "list_tasks", json!({})),
    )
    .await;
    assert!(answered.is_ok(), "the restarted server does not answer");
    let running = support::read_only(&stopped.db)
        .list_runs(Some("running"), Scope::Everyone, 100)
        .expect("list the runs");
    assert!(running.is_empty(), "runs left running: {running:?}");
    restarted.stop().await;
}

/// A client that answers every question with what does not fit it.
#[derive(Clone)]
struct Misfit;

impl ClientHandler for Misfit {
    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let content = json!({ "count": "not a number", "extra": [1, 2, 3] });
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content))
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities =
            serde_json::from_value::<ClientCapabilities>(json!({ "elicitation": { "form": {} } }))
                .expect("capabilities");
        info
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_that_never_fit_their_form_fail_the_node_and_the_server_answers_meanwhile() {
    let temp = support::TempDb::new();
    let mut command = support::server_command(temp.dir.path());
    command.arg("--db").arg(&temp.path);
    let server = Server::spawn_with(command, temp.path.clone(), Misfit).await;
    let schema = json!({ "type": "object", "properties": { "count": { "type": "integer" } },
                         "required": ["count"] });
    let definition =
        json!({ "nodes": { "ask": { "input": { "message": "How many?", "schema": schema } } } });
    let Value::Object(args) = json!({ "definition": definition }) else {
        unreachable!()
    };
    let params = CallToolRequestParams::new("run_workflow").with_arguments(args);
    let result = tokio::time::timeout(ENDS_WITHIN, server.client.call_tool(params))
        .await
        .expect("the run ends in time")
        .expect("run_workflow answers");
    let wire = serde_json::to_value(&result).unwrap();
    let error = &wire["structuredContent"]["data"]["nodes"]["ask"]["error"];
    assert_eq!(error["code"], "refused", "{wire:#}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("did not fit"),
        "{error}"
    );
    let listed = CallToolRequestParams::new("list_tasks");
    let answered = tokio::time::timeout(ANSWERED_WITHIN, server.client.call_tool(listed)).await;
    assert!(
        answered.is_ok_and(|r| r.is_ok()),
        "list_tasks is answered after it"
    );
    // Each reply is audited as rejected under its asking's key, as on the durable path.
    let answers: Vec<(String, String)> = support::audit_rows(&temp.path)
        .into_iter()
        .filter(|row| row.tool == "answer")
        .map(|row| {
            let args: Value = serde_json::from_str(&row.args).unwrap();
            (
                args["key"].as_str().unwrap_or_default().to_owned(),
                row.outcome,
            )
        })
        .collect();
    let rejected = |key: &str| (key.to_owned(), "rejected".to_owned());
    assert_eq!(
        answers,
        [
            rejected("attempt-1"),
            rejected("attempt-1.r2"),
            rejected("attempt-1.r3")
        ]
    );
    server.stop().await;
}
