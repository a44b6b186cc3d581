//! Runs, their files and the workflows as resources a client reads or attaches:
//! - `file://…`: a file under the workspace, as the links in run results name them, read
//!   as a `read_file` node reads (never outside the workspace, nor through a link); over
//!   HTTP only a file the caller's own run wrote last, while it holds what was written
//!   (`files.rs`);
//! - `tasks://runs/{run_id}/report.json` and `…/summary.md`: a run's report, and its
//!   summary in Markdown, for the caller that may see the run;
//! - `tasks://workflows/{name}/source.toml` and `…/diagram.mmd`: a workflow's file, and
//!   its DAG as a Mermaid flowchart grouped by phase.
//!
//! Every URI is read into its canonical form first (`uri.rs`); what cannot be read is
//! "not found", the same answer whether it exists or not.
//!
//! Invariant: every read, refused or not, writes one audit row (`read_resource`), under
//! the run it read only when it was read.

mod files;
mod follow;
mod uri;

use serde_json::{Map, Value};

use super::{App, Caller};
use crate::runs::RunView;
use crate::store::{AuditOutcome, Scope};
pub(crate) use files::Digests;
pub(crate) use follow::Followed;
pub(crate) use uri::{BadUri, Canonical, MAX_URI, Target, file_uri, percent_decoded};
use uri::{RunPart, WorkflowPart};

/// The most bytes of a file a read returns.
const MAX_READ: u64 = 4 * 1024 * 1024;

/// The name of the audit rows of reads.
const READ_AUDIT: &str = "read_resource";

/// The templates of the resources: (URI template, name, description, MIME type).
pub(crate) const TEMPLATES: [(&str, &str, &str, &str); 4] = [
    (
        "tasks://runs/{run_id}/report.json",
        "run-report",
        "A run's report: its status, every node with its output, its questions.",
        "application/json",
    ),
    (
        "tasks://runs/{run_id}/summary.md",
        "run-summary",
        "A run's summary in Markdown: its status, its nodes, the files it wrote.",
        "text/markdown",
    ),
    (
        "tasks://workflows/{name}/source.toml",
        "workflow-source",
        "A workflow's TOML file.",
        "application/toml",
    ),
    (
        "tasks://workflows/{name}/diagram.mmd",
        "workflow-diagram",
        "A workflow's DAG as a Mermaid flowchart, grouped by phase.",
        "text/vnd.mermaid",
    ),
];

/// What a resource holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Contents {
    Text { mime: String, text: String },
    Blob { mime: String, bytes: Vec<u8> },
}

/// A file a run wrote, as the listing shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Listed {
    pub uri: String,
    pub name: String,
    pub mime: String,
    pub bytes: u64,
}

/// Why a resource was not read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum ResourceError {
    /// Nothing the caller may read is there: it does not exist, or is not the caller's.
    #[error("no resource {0}")]
    NotFound(String),
    /// The URI names no resource of this server, whatever exists.
    #[error("{0}")]
    Invalid(String),
}

impl App {
    /// Reads the resource at `uri` for `caller`; audited either way.
    pub(crate) fn read_resource(
        &self,
        uri: &str,
        caller: &Caller,
    ) -> Result<Contents, ResourceError> {
        let (read, run) = match Canonical::parse(uri) {
            Ok(canonical) => {
                let read = self.resolve(&canonical, caller);
                let run = match (&read, &canonical.target) {
                    (Some(_), Target::Run { run_id, .. }) => Some(run_id.clone()),
                    _ => None,
                };
                (
                    read.ok_or_else(|| ResourceError::NotFound(uri.to_owned())),
                    run,
                )
            }
            Err(BadUri(why)) => (
                Err(ResourceError::Invalid(format!("{uri} is not read: {why}"))),
                None,
            ),
        };
        let outcome = match &read {
            Ok(_) => AuditOutcome::Ok,
            Err(ResourceError::NotFound(_)) => AuditOutcome::NotFound,
            Err(ResourceError::Invalid(_)) => AuditOutcome::Rejected,
        };
        let mut args = Map::new();
        args.insert("uri".to_owned(), Value::String(uri.to_owned()));
        self.audit((READ_AUDIT, &args), outcome, run.as_deref(), caller);
        read
    }

    /// What `caller` reads of the resource; `None` when there is nothing it may read.
    fn resolve(&self, canonical: &Canonical, caller: &Caller) -> Option<Contents> {
        match &canonical.target {
            Target::File(path) => self.workspace_file(path, caller),
            Target::Run { run_id, part } => {
                let run = self.get_run(run_id, caller).ok()?;
                Some(match part {
                    RunPart::Report => text_of(
                        "application/json",
                        serde_json::to_string_pretty(&run).expect("a report serialises"),
                    ),
                    RunPart::Summary => text_of("text/markdown", summary(&run)),
                })
            }
            Target::Workflow { name, part } => match part {
                WorkflowPart::Source => {
                    let text = self.workflows().source(name)?;
                    Some(text_of("application/toml", text))
                }
                WorkflowPart::Diagram => {
                    let entry = self.workflows().get(name)?;
                    Some(text_of(
                        "text/vnd.mermaid",
                        crate::engine::mermaid::render(&entry.def),
                    ))
                }
            },
            Target::Foreign => None,
        }
    }

    /// The files whose last writer was a run of `caller`'s, and that still hold what it
    /// wrote (for the local user: that still exist), newest first: at most `limit` of the
    /// `limit` records after the first `skip`, and whether more records follow.
    pub(crate) fn written_files(
        &self,
        caller: &Caller,
        skip: usize,
        limit: usize,
    ) -> (Vec<Listed>, bool) {
        let scope = match caller.sees_everything() {
            true => Scope::Everyone,
            false => caller.listing(),
        };
        let store = self.registry.store();
        let wanted = i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1);
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        let mut records = store.written_files(scope, skip, wanted).unwrap_or_default();
        let more = records.len() > limit;
        records.truncate(limit);
        let root = self.engine.workspace();
        let listed = records
            .into_iter()
            .filter_map(|record| {
                let path = root.join(&record.path);
                let opened = self.open_workspace_file(path.to_str()?)?;
                self.may_read_file(&opened, caller).then(|| Listed {
                    uri: file_uri(&path),
                    name: record.path.clone(),
                    mime: mime_of(&record.path),
                    bytes: opened.stamp.size,
                })
            })
            .collect();
        (listed, more)
    }

    /// The values a template variable may take that start with `typed`: the workflows'
    /// names, or the ids of the runs `caller` may see.
    pub(crate) fn complete_template_variable(
        &self,
        template: &str,
        variable: &str,
        typed: &str,
        caller: &Caller,
    ) -> Vec<String> {
        if !TEMPLATES.iter().any(|(uri, ..)| *uri == template) {
            return Vec::new();
        }
        let values: Vec<String> = match variable {
            "name" => self
                .workflows()
                .entries()
                .map(|e| e.def.name.clone())
                .collect(),
            "run_id" => {
                let query = crate::store::RunQuery {
                    limit: 100,
                    ..Default::default()
                };
                let runs = self.listed_runs(&query, caller).unwrap_or_default();
                runs.into_iter().map(|run| run.id).collect()
            }
            _ => Vec::new(),
        };
        values
            .into_iter()
            .filter(|value| value.starts_with(typed))
            .collect()
    }
}

/// A run's summary in Markdown.
fn summary(run: &RunView) -> String {
    let mut out = format!(
        "# Run of `{}`: {}\n\n- Run: `{}`\n- Started: {}\n",
        run.workflow, run.status, run.run_id, run.created_at
    );
    if let Some(finished) = &run.finished_at {
        out.push_str(&format!("- Finished: {finished}\n"));
    }
    if let Some(error) = &run.error {
        out.push_str(&format!("- Error: {error}\n"));
    }
    out.push_str("\n| Node | State | Attempts |\n|---|---|---|\n");
    for (id, node) in &run.nodes {
        out.push_str(&format!(
            "| `{id}` | {} | {} |\n",
            node.status, node.attempts
        ));
    }
    out
}

fn text_of(mime: &str, text: String) -> Contents {
    Contents::Text {
        mime: mime.to_owned(),
        text,
    }
}

/// The MIME type of a file, by its extension.
fn mime_of(path: &str) -> String {
    let kind = match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("md") => "text/markdown",
        Some("json") => "application/json",
        Some("toml") => "application/toml",
        Some("txt" | "log") => "text/plain",
        Some("html") => "text/html",
        Some("csv") => "text/csv",
        _ => "text/plain",
    };
    kind.to_owned()
}
