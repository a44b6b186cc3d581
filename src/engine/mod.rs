//! The DAG workflow engine: definitions, validation, planning and scheduling.
//!
//! Every tool call is a run: a direct `tools/call` of a todo tool is a one-node
//! workflow ([`Engine::call_tool`]) on the same path as a `tool` node of a workflow.
//! Invariant: the engine knows no SQL and no MCP; tools reach the store through `tools`.

pub mod actions;
pub mod attempt;
pub mod budget;
pub mod command;
pub mod definition;
pub mod duration;
pub mod fields;
pub mod files;
pub(crate) mod filters;
pub(crate) mod filters_lines;
mod filters_text;
pub mod form;
pub mod history;
pub mod installed;
pub mod journal;
pub mod loader;
pub(crate) mod markdown;
pub mod mermaid;
pub mod observer;
mod pattern;
mod pick_up;
pub mod plan;
pub mod question;
pub mod report;
mod scheduler;
pub mod template;
pub mod trigger;
pub mod validate;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use actions::{ActionEnv, Interaction};
use journal::{Answers, Journal, JournalError, RunOrigin, RunStart, UnitState};
use observer::Observer;
use plan::Plan;
use report::{NodeStatus, RunReport, RunStatus};
use scheduler::RunSetup;

use crate::store::{Durability, Owner};
use crate::telemetry::runs::{DriveEnd, RunNames, RunTrace, RunTracer, TraceFrom};
use crate::todos::{ToolResult, Tools};

/// Per-run settings.
#[derive(Default, Clone)]
pub struct RunOptions {
    pub observer: Option<Arc<dyn Observer>>,
    /// The caller's channel for `input` and `sample` nodes, while it is connected.
    pub interaction: Option<Arc<dyn Interaction>>,
    /// Park questions in the journal, to be answered through it, across restarts; without
    /// this (or a journal), a question goes to `interaction`, or takes its node's default.
    pub park_questions: bool,
    /// Cancel this token to cancel the run.
    pub cancel: CancellationToken,
    /// Who started the run; recorded, and decides who may take it over.
    pub origin: RunOrigin,
    /// Record the run even if its plan is the one-node plan of a direct tool call, whose
    /// audit row is otherwise its only record: a client asked for it as a task.
    pub record: bool,
    /// The key a client may retry the starting call under, and that call as it was made:
    /// recorded with the run, so that a retry finds this run instead of starting another.
    pub idempotency: Option<(String, String)>,
    /// How a client asked for the run's task, as labels the engine does not read (the task
    /// protocol and the tool), recorded with the run in the same transaction.
    pub task_label: Option<(String, String)>,
    /// The tool call that starts the run (its name and arguments), audited `ok` in the
    /// transaction that records the run.
    pub audit: Option<(String, Map<String, Value>)>,
    /// Who the run belongs to, where the server tells callers apart: recorded with it, and
    /// its principal named in the audit rows of the calls it makes.
    pub owner: Owner,
    /// Where the run's trace hangs from, when the engine traces runs: the span of the
    /// request that started it (linked), or of the attempt that starts it as a child.
    pub trace: TraceFrom,
}

/// The budgets of runs and of the evaluations in them, set by the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The budgets of one template or expression evaluation.
    pub template: template::TemplateLimits,
    /// The most instances one `for_each` node may expand to.
    pub max_for_each: usize,
    /// The most units one run may have: its nodes, and the instances of its `for_each`
    /// nodes (each a stored row and a sub-task).
    pub max_run_units: usize,
    /// The most iterations one repeating node may run.
    pub max_repeat: u32,
    /// Takeovers of a run, from processes that stopped while driving it with no node
    /// finished in between, after which the run is failed as poisoned instead of taken
    /// over again.
    pub max_takeovers: u32,
    /// How deep runs may nest: a `workflow` node of a run this deep below the run at the
    /// top of its tree fails instead of starting a child.
    pub max_workflow_depth: u32,
    /// The most runs one `history` node may read (its `limit` may not be more).
    pub max_history_rows: usize,
    /// The most bytes of one `history` node's output, as JSON: the runs that would not
    /// fit are left out, and the output says it is `truncated`.
    pub max_history_bytes: usize,
    /// The most earlier runs one `history` node's `where` looks at; past it the output
    /// says it is `truncated`.
    pub max_history_scan: usize,
}

/// How deep runs may nest by default.
pub const DEFAULT_MAX_WORKFLOW_DEPTH: u32 = 8;

/// Runs one `history` node may read by default.
pub const DEFAULT_MAX_HISTORY_ROWS: usize = 100;

/// Bytes of one `history` node's output by default.
pub const DEFAULT_MAX_HISTORY_BYTES: usize = 1024 * 1024;

/// Earlier runs one `history` node's `where` looks at by default.
pub const DEFAULT_MAX_HISTORY_SCAN: usize = 10_000;

/// Instances one `for_each` node may have by default.
pub const DEFAULT_MAX_FOR_EACH: usize = 10_000;

/// Iterations one repeating node may run by default.
pub const DEFAULT_MAX_REPEAT: u32 = 1_000;

/// Units one run may have by default.
pub const DEFAULT_MAX_RUN_UNITS: usize = 100_000;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            template: template::TemplateLimits::default(),
            max_for_each: DEFAULT_MAX_FOR_EACH,
            max_run_units: DEFAULT_MAX_RUN_UNITS,
            max_repeat: DEFAULT_MAX_REPEAT,
            max_takeovers: DEFAULT_MAX_TAKEOVERS,
            max_workflow_depth: DEFAULT_MAX_WORKFLOW_DEPTH,
            max_history_rows: DEFAULT_MAX_HISTORY_ROWS,
            max_history_bytes: DEFAULT_MAX_HISTORY_BYTES,
            max_history_scan: DEFAULT_MAX_HISTORY_SCAN,
        }
    }
}

/// Takeovers of a run with no node finished in between allowed by default.
pub const DEFAULT_MAX_TAKEOVERS: u32 = 3;

/// A run started in the background.
pub struct RunHandle {
    pub run_id: String,
    pub cancel: CancellationToken,
    pub join: JoinHandle<RunReport>,
    /// When the run was recorded, if this start recorded it (ms since the Unix epoch).
    pub recorded_ms: Option<i64>,
}

/// The engine: cheap to clone, shared by every run.
#[derive(Clone)]
pub struct Engine {
    env: Arc<ActionEnv>,
    /// The one-node plans behind direct tool calls, built once.
    single: Arc<HashMap<&'static str, Arc<Plan>>>,
    journal: Option<Arc<dyn Journal>>,
    /// The durable runs this process drives, by run id.
    active: Arc<Mutex<HashMap<String, Active>>>,
    /// The installed workflows, which `workflow` nodes run as child runs.
    workflows: Arc<installed::Installed>,
    /// At most this many unfinished runs per principal, child runs included.
    max_runs: Option<u64>,
    /// Where runs' traces go, when telemetry is on.
    tracer: Option<RunTracer>,
}

/// How to reach a run this process drives.
struct Active {
    cancel: CancellationToken,
    units: tokio::sync::mpsc::UnboundedSender<scheduler::UnitCancel>,
}

/// Takes a run out of the engine's `active` table when dropped.
struct ActiveGuard {
    active: Arc<Mutex<HashMap<String, Active>>>,
    run_id: String,
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        active.remove(&self.run_id);
    }
}

/// The node reports of a run none of whose nodes was reached.
fn unreached(plan: &Plan) -> report::NodeReports {
    (plan.nodes.iter())
        .map(|node| (Arc::clone(&node.id), report::NodeReport::default()))
        .collect()
}

/// Why a stored run cannot be resumed or retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    #[error("this engine keeps no journal, so it has no stored runs")]
    NoJournal,
    #[error("run {0} is already driven by this process")]
    AlreadyActive(String),
    #[error("run {run_id} is {status}; only a failed or cancelled run can be retried")]
    NotRetryable { run_id: String, status: String },
    #[error(transparent)]
    Journal(#[from] JournalError),
}

impl Engine {
    /// The engine of `tools`, whose file actions work under `workspace`, which it keeps
    /// as an absolute path with its links resolved (where it exists): what the `file://`
    /// links of results name, and what a read by such a link is checked against.
    pub fn new(tools: Tools, workspace: &Path) -> Engine {
        let workspace = std::fs::canonicalize(workspace)
            .or_else(|_| std::path::absolute(workspace))
            .unwrap_or_else(|_| workspace.to_path_buf());
        let single = Tools::specs()
            .into_iter()
            .map(|spec| (spec.name, Arc::new(Plan::single_tool(spec.name))))
            .collect();
        Engine {
            env: Arc::new(ActionEnv {
                tools,
                workspace,
                sync_folders: false,
                interaction: None,
                principal: None,
                templates: Arc::default(),
                limits: Limits::default(),
                commands: command::CommandSet::none(),
                history: None,
            }),
            single: Arc::new(single),
            journal: None,
            active: Arc::default(),
            workflows: Arc::default(),
            max_runs: None,
            tracer: None,
        }
    }

    /// Makes every workflow run (and every run a client starts as a task) a trace of its
    /// own on `tracer`; a direct call of a todo tool is no run of its own there.
    pub fn with_run_tracer(mut self, tracer: RunTracer) -> Engine {
        self.tracer = Some(tracer);
        self
    }

    /// How a run's trace names it: by its workflow's name when it is installed (or a
    /// todo tool's, for its one-node plan), else as `inline`.
    fn trace_names<'a>(&self, plan: &'a Plan) -> RunNames<'a> {
        let named = self.workflow(&plan.name).is_some() || !plan.is_durable();
        RunNames {
            label: if named { &plan.name } else { "inline" },
            workflow: &plan.name,
        }
    }

    /// The trace of a stored run this process drives on, when the engine traces runs.
    fn resumed_trace(&self, stored: &journal::StoredRun) -> Option<Box<RunTrace>> {
        let tracer = self.tracer.as_ref()?;
        Some(Box::new(RunTrace::resume(
            tracer,
            self.trace_names(&stored.plan),
            &Arc::from(stored.run_id.as_str()),
            stored.trace_parent.as_deref(),
            stored.trace_link.as_deref(),
        )))
    }

    /// Lets `workflow` nodes run the workflows of `installed` as child runs.
    pub fn with_workflows(mut self, installed: Arc<installed::Installed>) -> Engine {
        self.workflows = installed;
        self
    }

    /// Refuses a principal a child run while it has `cap` unfinished runs, as the
    /// application refuses it a run it starts.
    pub(crate) fn with_max_runs(mut self, cap: u64) -> Engine {
        self.max_runs = Some(cap);
        self
    }

    /// The installed workflow `name`, which a `workflow` node may run.
    pub(crate) fn workflow(&self, name: &str) -> Option<&installed::Entry> {
        self.workflows.get(name)
    }

    pub(crate) fn max_runs(&self) -> Option<u64> {
        self.max_runs
    }

    /// Runs and evaluates templates under `limits` instead of the defaults.
    pub fn with_limits(mut self, limits: Limits) -> Engine {
        let env = Arc::make_mut(&mut self.env);
        env.limits = limits;
        env.rebuild_templates();
        self
    }

    /// Runs `command` nodes with `commands`, the operator's (`--commands`); without it no
    /// command runs.
    pub fn with_commands(mut self, commands: command::CommandSet) -> Engine {
        let env = Arc::make_mut(&mut self.env);
        env.commands = commands;
        env.rebuild_templates();
        self
    }

    /// The operator's commands in force.
    pub fn commands(&self) -> &command::CommandSet {
        &self.env.commands
    }

    pub fn limits(&self) -> Limits {
        self.env.limits
    }

    /// Records every workflow run in `journal`, so that runs outlive the process.
    pub fn with_journal(mut self, journal: Arc<dyn Journal>) -> Engine {
        self.journal = Some(journal);
        self
    }

    /// Lets `history` nodes read the finished runs `history` keeps; without it, such a
    /// node fails as `unsupported`.
    pub fn with_history(mut self, history: Arc<dyn history::History>) -> Engine {
        Arc::make_mut(&mut self.env).history = Some(history);
        self
    }

    /// Commits files as the store commits (`--durability`): with `Full`, a folder is
    /// synced once `write_file` has placed a file in it, so that a power loss cannot take
    /// back a file whose node the store recorded as done.
    pub(crate) fn with_durability(mut self, durability: Durability) -> Engine {
        Arc::make_mut(&mut self.env).sync_folders = durability == Durability::Full;
        self
    }

    pub fn todo_tools(&self) -> &Tools {
        &self.env.tools
    }

    pub fn workspace(&self) -> &Path {
        &self.env.workspace
    }

    fn env_for(&self, options: &RunOptions, principal: Option<&str>) -> Arc<ActionEnv> {
        if options.interaction.is_none() && principal.is_none() {
            return Arc::clone(&self.env);
        }
        Arc::new(ActionEnv {
            interaction: options.interaction.clone(),
            principal: principal.map(Arc::from),
            ..(*self.env).clone()
        })
    }

    /// Runs `plan` to the end on the current task. `inputs` must have passed
    /// [`validate::check_inputs`] (or be a tool's raw arguments, for a one-node plan).
    pub async fn run(
        &self,
        plan: Arc<Plan>,
        inputs: Map<String, Value>,
        options: RunOptions,
    ) -> RunReport {
        self.drive(self.fresh_setup(plan, inputs, options, Vec::new(), None, None))
            .await
    }

    /// Starts `plan` as a task on the runtime and returns at once.
    pub fn start(
        &self,
        plan: Arc<Plan>,
        inputs: Map<String, Value>,
        options: RunOptions,
    ) -> RunHandle {
        self.spawn(self.fresh_setup(plan, inputs, options, Vec::new(), None, None))
    }

    /// Starts `plan` as the child run a `workflow` node starts, under the id and with the
    /// link `child` gives it.
    pub(crate) fn start_child(
        &self,
        plan: Arc<Plan>,
        inputs: Map<String, Value>,
        options: RunOptions,
        child: scheduler::ChildOf,
    ) -> RunHandle {
        self.spawn(self.fresh_setup(plan, inputs, options, Vec::new(), None, Some(child)))
    }

    fn spawn(&self, mut setup: RunSetup) -> RunHandle {
        let run_id = setup.run_id.to_string();
        let cancel = setup.cancel.clone();
        let recorded_ms = setup.recorded_ms;
        let engine = self.clone();
        // Active from now on, not from the task's first poll: the run is recorded, so a
        // cancel may come for it at once, and must find it here rather than wait for the
        // next renewal of the leases to learn of it.
        let active = self.register_active(&mut setup);
        let join = tokio::spawn(async move { engine.drive_registered(setup, active).await });
        RunHandle {
            run_id,
            cancel,
            join,
            recorded_ms,
        }
    }

    /// The setup of a new run, under a new id; with a journal and a workflow's plan, the run is recorded
    /// first. A run that cannot be recorded (a read-only database) still runs, unrecorded.
    fn fresh_setup(
        &self,
        plan: Arc<Plan>,
        inputs: Map<String, Value>,
        options: RunOptions,
        restored: Vec<(String, Option<usize>, UnitState)>,
        retry_of: Option<&str>,
        child: Option<scheduler::ChildOf>,
    ) -> RunSetup {
        let run_id: Arc<str> = match &child {
            Some(child) => Arc::clone(&child.run_id),
            None => uuid::Uuid::new_v4().to_string().into(),
        };
        let env = self.env_for(&options, options.owner.principal.as_deref());
        let answers = match (options.park_questions, &options.interaction) {
            (true, _) => Answers::Parked,
            (false, Some(_)) => Answers::Caller,
            (false, None) => Answers::Nobody,
        };
        let deadline_ms = plan.timeout.map(|limit| {
            crate::clock::now_ms() + i64::try_from(limit.as_millis()).unwrap_or(i64::MAX)
        });
        let recorded = plan.is_durable() || options.record;
        let created_ms = crate::clock::now_ms();
        let mut refused = None;
        let trace = (self.tracer.as_ref().filter(|_| recorded)).map(|tracer| {
            let task = options.task_label.is_some();
            let names = self.trace_names(&plan);
            Box::new(RunTrace::start(
                tracer,
                names,
                &run_id,
                task,
                &options.trace,
            ))
        });
        let stored_trace = trace.as_ref().map(|trace| trace.stored());
        let journal = self.journal.as_ref().filter(|_| recorded).and_then(|journal| {
            let start = RunStart {
                run_id: &run_id,
                plan: &plan,
                inputs: &inputs,
                origin: options.origin,
                answers,
                deadline_ms,
                retry_of,
                idempotency: options
                    .idempotency
                    .as_ref()
                    .map(|(key, call)| (key.as_str(), call.as_str())),
                task_label: options
                    .task_label
                    .as_ref()
                    .map(|(era, tool)| (era.as_str(), tool.as_str())),
                audit: options.audit.as_ref().map(|(tool, args)| (tool.as_str(), args)),
                owner: &options.owner,
                created_ms,
                parent: child.as_ref().map(|child| journal::ParentLink {
                    run_id: &child.parent,
                    node: &child.node,
                    index: child.index,
                    instance: child.instance,
                    depth: child.depth,
                }),
                trace: (stored_trace.as_ref())
                    .map(|(parent, link)| (parent.as_str(), link.as_deref())),
            };
            match journal.create(&start) {
                Ok(()) => Some(Arc::clone(journal)),
                // A run that a retry must find again does not run unrecorded: another
                // start under its key may have won the record.
                Err(error) if options.idempotency.is_some() => {
                    refused = Some(format!("the run could not be recorded: {error}"));
                    None
                }
                Err(error) => {
                    tracing::warn!(%run_id, %error, "the run cannot be recorded; it runs unrecorded");
                    None
                }
            }
        });
        let recorded_ms = journal.as_ref().map(|_| created_ms);
        let (depth, tree) = match child {
            Some(child) => (child.depth, child.tree),
            None => (0, scheduler::TreeUnits::new(self.env.limits.max_run_units)),
        };
        RunSetup {
            origin: options.origin,
            owner: options.owner,
            depth,
            tree,
            plan,
            env,
            run_id,
            inputs,
            observer: options.observer,
            cancel: options.cancel,
            journal,
            answers,
            deadline_ms,
            restored,
            resumed: false,
            unit_cancels: None,
            refused,
            recorded_ms,
            poisoned: None,
            picked_up: false,
            trace,
        }
    }

    async fn drive(&self, mut setup: RunSetup) -> RunReport {
        let active = self.register_active(&mut setup);
        self.drive_registered(setup, active).await
    }

    /// Makes a recorded run (one not refused) active in this process: found by
    /// `cancel_local` and `cancel_unit`, and never driven here a second time. The guard
    /// takes it out again however its drive ends: returned, panicked, or dropped with its
    /// task, polled or not. It stays there while the run is picked up again, so that no
    /// takeover or resume here drives it a second time meanwhile.
    fn register_active(&self, setup: &mut RunSetup) -> Option<ActiveGuard> {
        if setup.journal.is_none() || setup.refused.is_some() {
            return None;
        }
        let run_id = setup.run_id.to_string();
        let active = Active {
            cancel: setup.cancel.clone(),
            units: unit_cancels_for(setup),
        };
        self.lock_active().insert(run_id.clone(), active);
        Some(ActiveGuard {
            active: Arc::clone(&self.active),
            run_id,
        })
    }

    async fn drive_registered(
        &self,
        mut setup: RunSetup,
        _active: Option<ActiveGuard>,
    ) -> RunReport {
        if let Some(why) = setup.refused.take() {
            if let Some(trace) = setup.trace.take() {
                let error = Some(("not_recorded", why.as_str()));
                let status = RunStatus::Failed.as_str();
                trace.finish(DriveEnd::Finished { status, error });
            }
            let nodes = unreached(&setup.plan);
            return RunReport {
                run_id: setup.run_id.to_string(),
                workflow: setup.plan.name.clone(),
                status: RunStatus::Failed,
                output: Value::Null,
                error: Some(why),
                nodes,
            };
        }
        let durable = setup.journal.is_some();
        let run_id = setup.run_id.to_string();
        let plan = Arc::clone(&setup.plan);
        let mut pause = pick_up::FIRST_PAUSE;
        let mut finished = pick_up::finished_units(&setup);
        loop {
            let again = pick_up::Again::of(&setup);
            let drive =
                std::panic::AssertUnwindSafe(scheduler::Run::new(setup, self.clone()).drive());
            let driven = match futures::FutureExt::catch_unwind(drive).await {
                Ok(driven) => driven,
                // A drive cut short because the runtime shuts down (the process exits) is
                // no bug of the run: it is left as stored, for a takeover to go on with.
                Err(payload) if shutting_down(payload.as_ref()) => {
                    tracing::info!(%run_id, "the runtime shuts down; the run is left for a takeover");
                    return self.left_unfinished(run_id, &plan);
                }
                Err(_) => return self.panicked(run_id, &plan, durable),
            };
            if !driven.unsaved {
                return driven.report;
            }
            match self.pick_up(&run_id, again, pause).await {
                Some(mut next) => {
                    // A drive that saved no unit's end waits longer before the next
                    // pick-up, so that a write that fails every time costs a try every
                    // few seconds rather than a loop.
                    let now = pick_up::finished_units(&next);
                    pause = match now > finished {
                        true => pick_up::FIRST_PAUSE,
                        false => pick_up::longer(pause),
                    };
                    finished = now;
                    let units = unit_cancels_for(&mut next);
                    if let Some(active) = self.lock_active().get_mut(&run_id) {
                        active.units = units;
                    }
                    setup = next;
                }
                None => return driven.report,
            }
        }
    }

    fn lock_active(&self) -> std::sync::MutexGuard<'_, HashMap<String, Active>> {
        self.active.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cancels a run this process drives; false if it drives no such run.
    pub(crate) fn cancel_local(&self, run_id: &str) -> bool {
        match self.lock_active().get(run_id) {
            Some(active) => {
                active.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Cancels one node (with its instances), or one `for_each` instance, of a run this
    /// process drives; the rest of the run goes on. False if it drives no such run.
    pub(crate) fn cancel_unit(&self, run_id: &str, node: &str, instance: Option<usize>) -> bool {
        match self.lock_active().get(run_id) {
            Some(active) => active.units.send((node.to_owned(), instance)).is_ok(),
            None => false,
        }
    }

    /// Takes a stored, unfinished run over and drives it on from where it stopped, through
    /// the same constructor that starts a fresh run: what finished is kept, what had not
    /// committed runs again.
    pub fn resume(&self, run_id: &str, options: RunOptions) -> Result<RunHandle, ResumeError> {
        self.resume_in(run_id, options, None)
    }

    /// [`Engine::resume`], for a run of a tree whose units `tree` counts (a child run its
    /// parent takes over with it), or of a tree of its own.
    pub(crate) fn resume_in(
        &self,
        run_id: &str,
        options: RunOptions,
        tree: Option<Arc<scheduler::TreeUnits>>,
    ) -> Result<RunHandle, ResumeError> {
        let journal = self.journal.clone().ok_or(ResumeError::NoJournal)?;
        if self.lock_active().contains_key(run_id) {
            return Err(ResumeError::AlreadyActive(run_id.to_owned()));
        }
        let stored = journal.load(run_id)?;
        if let Some(status) = stored.finished {
            return Err(JournalError::Finished {
                run_id: run_id.to_owned(),
                status: status.as_str().to_owned(),
            }
            .into());
        }
        // Whoever resumes the run may answer its questions where its starter could not
        // (a terminal, an answers file): then they are parked for it, and stay parked for
        // whoever takes the run over after it.
        let parked = options.park_questions.then_some(Answers::Parked);
        journal.claim(run_id, parked)?;
        let takeovers = stored.takeovers;
        let env = self.env_for(&options, stored.owner.principal.as_deref());
        let trace = self.resumed_trace(&stored);
        let mut setup = RunSetup::from_stored(stored, env);
        setup.trace = trace;
        setup.tree =
            tree.unwrap_or_else(|| scheduler::TreeUnits::new(self.env.limits.max_run_units));
        if takeovers >= self.env.limits.max_takeovers {
            tracing::warn!(%run_id, takeovers, "the run is poisoned: failing it instead of taking it over again");
            setup.poisoned = Some(format!(
                "run_poisoned: the run was taken over {takeovers} times from processes that \
                 stopped while driving it, with no node finished in between; it is failed \
                 rather than driven again (`workflows retry` runs it anew)"
            ));
        }
        if let Some(answers) = parked {
            setup.answers = answers;
        }
        setup.observer = options.observer;
        setup.cancel = options.cancel;
        setup.journal = Some(journal);
        Ok(self.spawn(setup))
    }

    /// Runs a failed or cancelled run again as a new run: nodes (and `for_each` instances)
    /// that succeeded keep their results; failed, cancelled and skipped ones run again.
    pub fn retry(&self, run_id: &str, options: RunOptions) -> Result<RunHandle, ResumeError> {
        let journal = self.journal.clone().ok_or(ResumeError::NoJournal)?;
        let stored = journal.load(run_id)?;
        match stored.finished {
            Some(RunStatus::Failed | RunStatus::Cancelled) => {}
            other => {
                let status = other.map_or("unfinished", RunStatus::as_str);
                return Err(ResumeError::NotRetryable {
                    run_id: run_id.to_owned(),
                    status: status.to_owned(),
                });
            }
        }
        let kept = stored
            .units
            .into_iter()
            .filter(|(_, _, unit)| unit.status == NodeStatus::Succeeded)
            .collect();
        let setup = self.fresh_setup(
            stored.plan,
            stored.inputs,
            options,
            kept,
            Some(run_id),
            None,
        );
        Ok(self.spawn(setup))
    }

    /// Starts a call of a todo tool as a one-node run in the background. `None` if
    /// no such tool.
    pub fn start_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        options: RunOptions,
    ) -> Option<RunHandle> {
        let plan = Arc::clone(self.single.get(name)?);
        Some(self.start(plan, args, options))
    }

    /// A direct call of a todo tool, as a one-node workflow. `None` if no such tool.
    pub async fn call_tool(&self, name: &str, args: Map<String, Value>) -> Option<ToolResult> {
        self.call_tool_for(name, args, Owner::default()).await
    }

    /// [`Engine::call_tool`] for a caller the server tells apart, named in its audit row.
    pub(crate) async fn call_tool_for(
        &self,
        name: &str,
        args: Map<String, Value>,
        owner: Owner,
    ) -> Option<ToolResult> {
        let plan = Arc::clone(self.single.get(name)?);
        let options = RunOptions {
            owner,
            ..RunOptions::default()
        };
        let report = self.run(plan, args, options).await;
        let (_, node) = report
            .nodes
            .into_iter()
            .next()
            .expect("a one-node plan has one node");
        Some(node.into_tool_result())
    }
}

impl Engine {
    /// The report of a run whose scheduler panicked: a bug in the scheduler itself. The
    /// caller still gets an answer, and the store is told (`durable`), so that the run is
    /// not left unfinished under a lease this process renews.
    fn panicked(&self, run_id: String, plan: &Plan, durable: bool) -> RunReport {
        tracing::error!(%run_id, "the run's scheduler panicked; the run is reported failed");
        let error = "internal error: the run's scheduler panicked";
        if durable {
            self.end_failed(&run_id, plan, error);
        }
        RunReport {
            run_id,
            workflow: plan.name.clone(),
            status: RunStatus::Failed,
            output: Value::Null,
            error: Some(error.into()),
            nodes: unreached(plan),
        }
    }

    /// The report of a run this process stopped driving without ending it.
    fn left_unfinished(&self, run_id: String, plan: &Plan) -> RunReport {
        RunReport {
            run_id,
            workflow: plan.name.clone(),
            status: RunStatus::Failed,
            output: Value::Null,
            error: Some("the process stopped driving the run".into()),
            nodes: unreached(plan),
        }
    }

    /// Records that `run_id` ended failed with `error`, nothing else of it: for a run whose
    /// scheduler could not end it. Under the run's lease, as every batch is.
    fn end_failed(&self, run_id: &str, plan: &Plan, error: &str) {
        let Some(journal) = &self.journal else {
            return;
        };
        let output = Value::Null;
        let batch = journal::RunBatch {
            run_id,
            units: Vec::new(),
            questions: Vec::new(),
            answers: Vec::new(),
            progress: journal::RunProgress {
                percent: 0,
                done: 0,
                total: plan.nodes.len(),
                current: None,
                asking: false,
                iteration: None,
            },
            end: Some(journal::RunEnd {
                status: RunStatus::Failed,
                error: Some(error),
                output: &output,
            }),
            audits: &[],
        };
        if let Err(error) = journal.commit(&batch) {
            tracing::error!(%run_id, %error, "the run's end could not be saved");
        }
    }
}

/// Whether a panic is tokio's refusal of a timer or task while its runtime shuts down.
pub(crate) fn shutting_down(payload: &(dyn std::any::Any + Send)) -> bool {
    let text = match payload.downcast_ref::<String>() {
        Some(text) => text.as_str(),
        None => payload.downcast_ref::<&str>().copied().unwrap_or_default(),
    };
    text.contains("is being shutdown")
}

/// A channel for cancels of single units of `setup`'s run: its receiver goes with the
/// setup, its sender is returned for the `active` table.
fn unit_cancels_for(
    setup: &mut RunSetup,
) -> tokio::sync::mpsc::UnboundedSender<scheduler::UnitCancel> {
    let (units, requests) = tokio::sync::mpsc::unbounded_channel();
    setup.unit_cancels = Some(requests);
    units
}
