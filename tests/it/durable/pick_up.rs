//! A run whose journal refuses a write for a reason other than its lease (a commit cut off
//! by a database restart, say) is driven on by the same process from what was saved: a
//! tool call whose commit was kept is not made again, one whose commit was lost is, and
//! the run ends as it would have, under the same handle. A run whose scheduler panicked is
//! stored failed, not left running.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mcp_task_server::engine::actions::BoxFuture;
use mcp_task_server::engine::journal::{
    Answers, Journal, RunBatch, RunPoll, RunStart, StoredRun, ToolCall, UnitState,
};
use mcp_task_server::engine::report::NodeError;
use mcp_task_server::todos::{ToolResult, Tools};

use super::*;

/// The registry's journal, but the `cut_off`-th tool call's commit is answered with a
/// storage error, as a connection closed during the commit answers: after being kept
/// (`kept`), or without it. The first `ends_refused` commits of the run's end fail the
/// same way, unkept. The first `unreachable` claims of the run's lease fail as they do
/// while the database is down. With `every`, each tool call's commit from the
/// `cut_off`-th on is refused. The first `ends_panicking` commits of the run's end panic,
/// as a bug in the scheduler would.
#[derive(Default)]
struct CutOff {
    inner: Option<Arc<Registry>>,
    calls: AtomicUsize,
    cut_off: usize,
    every: bool,
    kept: bool,
    ends_refused: AtomicUsize,
    ends_panicking: AtomicUsize,
    unreachable: AtomicUsize,
}

impl CutOff {
    fn inner(&self) -> &Registry {
        self.inner.as_deref().expect("a registry")
    }
}

/// Takes one from `count` if it is above zero; says whether it was.
fn one_less(count: &AtomicUsize) -> bool {
    count
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

impl Journal for CutOff {
    fn create(&self, start: &RunStart<'_>) -> Result<(), JournalError> {
        self.inner().create(start)
    }

    fn commit(&self, batch: &RunBatch<'_>) -> Result<(), JournalError> {
        if batch.end.is_some() && one_less(&self.ends_panicking) {
            panic!("a bug in the scheduler");
        }
        if batch.end.is_some() && one_less(&self.ends_refused) {
            return Err(JournalError::Storage(
                "the connection closed during the commit".into(),
            ));
        }
        self.inner().commit(batch)
    }

    fn commit_tool_call(
        &self,
        batch: &RunBatch<'_>,
        call: &ToolCall<'_>,
        settle: &dyn Fn(&ToolResult) -> UnitState,
    ) -> Result<(ToolResult, UnitState), JournalError> {
        let call_number = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let refused = match self.every {
            true => call_number >= self.cut_off,
            false => call_number == self.cut_off,
        };
        if !refused {
            return self.inner().commit_tool_call(batch, call, settle);
        }
        if self.kept {
            let _kept = self.inner().commit_tool_call(batch, call, settle)?;
        }
        Err(JournalError::Storage(
            "the connection closed during the commit".into(),
        ))
    }

    fn commit_placing(
        &self,
        batch: &RunBatch<'_>,
        place: &mut dyn FnMut(),
    ) -> Result<(), JournalError> {
        self.inner().commit_placing(batch, place)
    }

    fn load(&self, run_id: &str) -> Result<StoredRun, JournalError> {
        self.inner().load(run_id)
    }

    fn poll(&self, run_id: &str) -> Result<Option<RunPoll>, JournalError> {
        self.inner().poll(run_id)
    }

    fn request_cancel(&self, run_id: &str) -> Result<bool, JournalError> {
        Journal::request_cancel(self.inner(), run_id)
    }

    fn running_runs_of(&self, principal: &str) -> Result<u64, JournalError> {
        self.inner().running_runs_of(principal)
    }

    fn claim(&self, run_id: &str, answers: Option<Answers>) -> Result<(), JournalError> {
        if one_less(&self.unreachable) {
            return Err(JournalError::Storage("the database is unreachable".into()));
        }
        self.inner().claim(run_id, answers)
    }

    fn answer(
        &self,
        run_id: &str,
        node: &str,
        instance: Option<usize>,
        key: &str,
    ) -> BoxFuture<Result<Value, NodeError>> {
        self.inner().answer(run_id, node, instance, key)
    }
}

/// Five `add_task` nodes in a chain, `t1` to `t5`, each making the todo of its name.
fn five_in_a_chain() -> String {
    let mut toml = String::new();
    for i in 1..=5 {
        toml += &format!("[nodes.t{i}]\ntool = \"add_task\"\nargs = {{ title = \"t{i}\" }}\n");
        if i > 1 {
            toml += &format!("needs = [\"t{}\"]\n", i - 1);
        }
    }
    toml
}

/// Runs the chain on `journal` (given the registry here); checks that the run succeeds,
/// stored as it reports, with every todo made once.
async fn chain_succeeds_once(world: &World, mut journal: CutOff) {
    let a = world.process(SHORT);
    journal.inner = Some(Arc::clone(&a.registry));
    let engine =
        Engine::new(Tools::new(world.store()), world.dir.path()).with_journal(Arc::new(journal));
    let plan = plan(&five_in_a_chain());
    let inputs = checked_inputs(&plan, json!({}));
    let handle = engine.start(plan, inputs, RunOptions::default());
    let run_id = handle.run_id.clone();
    let report = tokio::time::timeout(Duration::from_secs(30), handle.join)
        .await
        .expect("the run ends")
        .unwrap();
    assert_eq!(report.status, RunStatus::Succeeded, "{:?}", report.error);
    assert_eq!(world.todo_titles(), ["t1", "t2", "t3", "t4", "t5"]);
    let stored = world.store().run(&run_id).unwrap().unwrap();
    assert_eq!(stored.status, "succeeded");
    // Picked up by the process that drove it: no takeover counted against the run.
    assert_eq!(stored.takeovers, 0);
}

/// The third tool call's commit cut off, kept or not, and the database then unreachable
/// for two tries.
fn third_commit_cut_off(kept: bool) -> CutOff {
    CutOff {
        cut_off: 3,
        kept,
        unreachable: AtomicUsize::new(2),
        ..CutOff::default()
    }
}

on_both_backends! {
    async fn a_commit_cut_off_but_kept_is_not_made_again_and_the_run_goes_on(place) {
        chain_succeeds_once(&World::new(place), third_commit_cut_off(true)).await;
    }
}

on_both_backends! {
    async fn a_commit_cut_off_and_lost_is_made_again_and_the_run_goes_on(place) {
        chain_succeeds_once(&World::new(place), third_commit_cut_off(false)).await;
    }
}

on_both_backends! {
    async fn a_run_whose_end_could_not_be_saved_is_ended_again(place) {
        let journal = CutOff {
            ends_refused: AtomicUsize::new(1),
            ..CutOff::default()
        };
        chain_succeeds_once(&World::new(place), journal).await;
    }
}

on_both_backends! {
    async fn a_run_that_never_saves_is_tried_less_and_less_often_and_can_be_cancelled(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let journal = Arc::new(CutOff {
            inner: Some(Arc::clone(&a.registry)),
            cut_off: 1,
            every: true,
            ..CutOff::default()
        });
        let engine = Engine::new(Tools::new(world.store()), world.dir.path())
            .with_journal(Arc::clone(&journal) as Arc<dyn Journal>);
        let plan = plan(&five_in_a_chain());
        let inputs = checked_inputs(&plan, json!({}));
        let handle = engine.start(plan, inputs, RunOptions::default());
        let run_id = handle.run_id.clone();
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Read back after pauses of 0.2, 0.4 and 0.8 s, then 1.6 s: four tries at most in
        // two seconds (ten or more at a pause of 0.2 s each).
        let tries = journal.calls.load(Ordering::SeqCst);
        assert!((1..=4).contains(&tries), "{tries} tries in two seconds");
        handle.cancel.cancel();
        let report = tokio::time::timeout(Duration::from_secs(30), handle.join)
            .await
            .expect("the cancelled run ends")
            .unwrap();
        assert_eq!(report.status, RunStatus::Cancelled, "{:?}", report.error);
        let stored = world.store().run(&run_id).unwrap().unwrap();
        assert_eq!(stored.status, "cancelled");
        assert!(world.todo_titles().is_empty());
    }
}

on_both_backends! {
    async fn a_run_whose_scheduler_panicked_is_stored_failed_not_left_running(place) {
        let world = World::new(place);
        let a = world.process(SHORT);
        let journal = CutOff {
            inner: Some(Arc::clone(&a.registry)),
            ends_panicking: AtomicUsize::new(1),
            ..CutOff::default()
        };
        let engine = Engine::new(Tools::new(world.store()), world.dir.path())
            .with_journal(Arc::new(journal));
        let plan = plan(&five_in_a_chain());
        let inputs = checked_inputs(&plan, json!({}));
        let handle = engine.start(plan, inputs, RunOptions::default());
        let run_id = handle.run_id.clone();
        let report = handle.join.await.unwrap();
        assert_eq!(report.status, RunStatus::Failed);
        let stored = world.store().run(&run_id).unwrap().unwrap();
        assert_eq!(stored.status, "failed");
        assert_eq!(
            stored.error.as_deref(),
            Some("internal error: the run's scheduler panicked")
        );
    }
}
