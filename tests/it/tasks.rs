//! The task registry's rules: the state table, terminal states, progress, and task ids.

use mcp_task_server::engine::journal::{RunProgress, UnitState};
use mcp_task_server::engine::report::{NodeError, NodeErrorKind, NodeStatus, RunStatus};
use mcp_task_server::runs::TaskStatus;
use mcp_task_server::runs::progress::message;
use mcp_task_server::runs::status::unit_message;
use mcp_task_server::store::Store;

use TaskStatus::{Cancelled, Completed, Failed, InputRequired, Working};

use crate::support::backends::{Place, on_both_backends};

#[test]
fn node_states_map_to_task_states_by_the_documented_table() {
    let table = [
        (NodeStatus::Pending, false, Working),
        (NodeStatus::Running, false, Working),
        (NodeStatus::Running, true, InputRequired),
        (NodeStatus::Succeeded, false, Completed),
        (NodeStatus::Skipped, false, Completed),
        (NodeStatus::Failed, false, Failed),
        (NodeStatus::Cancelled, false, Cancelled),
    ];
    for (node, asking, task) in table {
        assert_eq!(
            TaskStatus::of_unit(node, asking),
            task,
            "{node:?} asking={asking}"
        );
    }
    assert_eq!(TaskStatus::of_run(RunStatus::Succeeded), Completed);
    assert_eq!(TaskStatus::of_run(RunStatus::Failed), Failed);
    assert_eq!(TaskStatus::of_run(RunStatus::Cancelled), Cancelled);
}

#[test]
fn status_messages_say_pending_the_skip_reason_or_the_error() {
    let unit = |status, reason: Option<&str>, error: Option<&str>| UnitState {
        status,
        reason: reason.map(str::to_owned),
        error: error.map(|m| NodeError::new(NodeErrorKind::Template, m)),
        ..UnitState::default()
    };
    assert_eq!(
        unit_message(&unit(NodeStatus::Pending, None, None)),
        "pending"
    );
    let skipped = unit(NodeStatus::Skipped, Some("condition false"), None);
    assert_eq!(unit_message(&skipped), "condition false");
    let failed = unit(NodeStatus::Failed, None, Some("bad template"));
    assert_eq!(unit_message(&failed), "bad template");
    let asking = UnitState {
        asking: Some("attempt-1".into()),
        ..unit(NodeStatus::Running, None, None)
    };
    assert_eq!(unit_message(&asking), "waiting for an answer");
}

#[test]
fn completed_failed_and_cancelled_are_the_terminal_task_states() {
    let terminal: Vec<TaskStatus> = [Working, InputRequired, Completed, Failed, Cancelled]
        .into_iter()
        .filter(|s| s.is_terminal())
        .collect();
    assert_eq!(terminal, [Completed, Failed, Cancelled]);
    for status in [Working, InputRequired, Completed, Failed, Cancelled] {
        assert_eq!(TaskStatus::parse(status.as_str()), Some(status));
    }
}

/// A database holding run `r` (key 1) with the status `run`, and its task with the
/// status `task` when given.
fn one_run(place: &Place, run: &str, task: Option<&str>) -> Store {
    let store = place.store();
    place
        .execute(&format!(
            "INSERT INTO plans (hash, snapshot, node_ids, nodes) VALUES ('h', '{{}}', '[]', 0);
             INSERT INTO runs (id, workflow, plan_key, status, origin, created_at, updated_at)
             VALUES ('r', 'w', 1, '{run}', 'cli', 'now', 'now');"
        ))
        .unwrap();
    if let Some(task) = task {
        place
            .execute(&format!(
                "INSERT INTO run_tasks (run_key, status, created_at, updated_at, updated_ms,
                     ttl_ms, poll_interval_ms)
                 VALUES (1, '{task}', 'now', 'now', 0, 1, 1)"
            ))
            .unwrap();
    }
    store
}

on_both_backends! {
    fn the_store_refuses_to_change_a_finished_task_whatever_writes_it(place) {
        let _store = one_run(&place, "succeeded", Some("completed"));
        let changed = place.execute("UPDATE run_tasks SET status = 'working' WHERE run_key = 1");
        let refused = changed.expect_err("the trigger refuses it");
        assert!(refused.contains("a finished task keeps its state"), "{refused}");
        let same = place.execute("UPDATE run_tasks SET status = 'completed' WHERE run_key = 1");
        assert_eq!(same, Ok(()));
        let out_of_range = place.execute("UPDATE run_tasks SET progress = 101 WHERE run_key = 1");
        assert!(out_of_range.is_err(), "progress stays within 0 to 100");
    }
}

on_both_backends! {
    fn a_finished_units_row_keeps_its_state_whatever_is_written_after(place) {
        use mcp_task_server::store::NodeRow;
        let store = one_run(&place, "running", None);
        let row = |status: &str, output: &str| NodeRow {
            node: 0,
            node_id: "a".into(),
            instance: -1,
            status: status.into(),
            reason: None,
            attempts: 1,
            next_attempt_ms: None,
            deadline_ms: None,
            asking: None,
            output: Some(output.into()),
            error: None,
            intent: None,
            started_at: None,
            finished_at: None,
            retried: None,
            iterations: None,
            updated_at: String::new(),
        };
        let write = |r: NodeRow| {
            store
                .transaction(|tx| tx.upsert_nodes(1, std::slice::from_ref(&r)))
                .unwrap()
                .unwrap()
        };
        write(row("running", "null"));
        write(row("succeeded", "1"));
        for later in ["running", "failed", "cancelled", "succeeded"] {
            write(row(later, "2"));
        }
        let stored = store.nodes("r").unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(
            (stored[0].status.as_str(), stored[0].output.as_deref()),
            ("succeeded", Some("1"))
        );
    }
}

on_both_backends! {
    fn a_tasks_progress_never_goes_backwards_and_stays_within_0_to_100(place) {
        let store = one_run(&place, "running", Some("working"));
        let mut shown = Vec::new();
        for reported in [0, 14, 10, 28, 28, 250, 42] {
            store
                .transaction(|tx| tx.update_run_task(1, "working", "m", reported, None, None))
                .unwrap()
                .unwrap();
            shown.push(store.run_task("r").unwrap().unwrap().progress);
        }
        assert_eq!(shown, [0, 14, 14, 28, 28, 100, 100]);
    }
}

#[test]
fn the_run_message_says_how_far_it_is_and_where() {
    let at = |current| RunProgress {
        percent: 42,
        done: 3,
        total: 7,
        current,
        asking: false,
        iteration: None,
    };
    assert_eq!(
        message(&at(Some("option_exploration"))),
        "3/7 · option_exploration"
    );
    assert_eq!(message(&at(None)), "3/7");
    let repeating = RunProgress {
        iteration: Some((2, 5)),
        ..at(Some("checks"))
    };
    assert_eq!(message(&repeating), "3/7 · checks · iteration 2/5");
}

/// A database holding a two-node run under the task id `RUN`, as a task.
const RUN: &str = "3f2b8c1e-7d4a-4b9e-9c21-5a6f0e8d7b34";

fn two_node_task(place: &Place) -> mcp_task_server::runs::Registry {
    use mcp_task_server::runs::{Registry, RegistryConfig};
    use mcp_task_server::todos::Tools;
    let store = place.store();
    place
        .execute(&format!(
            "INSERT INTO plans (hash, snapshot, node_ids, nodes)
                 VALUES ('h', '{{}}', '[\"a\",\"b\"]', 2);
             INSERT INTO runs (id, workflow, plan_key, status, origin, created_at, updated_at)
             VALUES ('{RUN}', 'w', 1, 'running', 'cli', 'now', 'now');
             INSERT INTO run_tasks (run_key, status, created_at, updated_at, updated_ms,
                 ttl_ms, poll_interval_ms)
             VALUES (1, 'working', 'now', 'now', 0, 1, 1);"
        ))
        .unwrap();
    Registry::new(store.clone(), Tools::new(store), RegistryConfig::default())
}

on_both_backends! {
    fn sub_task_ids_depend_on_the_servers_secret_and_lead_back_to_their_node_with_it(place) {
        // Two servers that each made their own secret, holding the same run: the same node
        // gets a different id from each, each finds its own id's node, and neither finds
        // the other's. A sub-task id does not follow from the run id alone.
        let other = Place::sqlite();
        let ours = two_node_task(&place);
        let theirs = two_node_task(&other);
        let ids = |registry: &mcp_task_server::runs::Registry| -> Vec<String> {
            let subs = registry.sub_tasks(RUN, None, 10).unwrap();
            subs.into_iter().map(|view| view.task_id).collect()
        };
        let (our_ids, their_ids) = (ids(&ours), ids(&theirs));
        assert_eq!(our_ids.len(), 2);
        for (index, (id, theirs_id)) in our_ids.iter().zip(&their_ids).enumerate() {
            assert_ne!(id, theirs_id);
            assert!(id.starts_with(&RUN[..18]), "{id}");
            let view = ours.task(id).unwrap().expect("our id names our node");
            assert_eq!(view.node_id.as_deref(), Some(["a", "b"][index]));
            assert_eq!(view.task_id, *id);
            assert!(ours.task(theirs_id).unwrap().is_none(), "{theirs_id}");
            assert!(theirs.task(id).unwrap().is_none(), "{id}");
        }
        // The key is kept: a registry opened again on the same database gives the same ids.
        let again = mcp_task_server::runs::Registry::new(
            place.store(),
            mcp_task_server::todos::Tools::new(place.store()),
            mcp_task_server::runs::RegistryConfig::default(),
        );
        assert_eq!(ids(&again), our_ids);
    }
}
