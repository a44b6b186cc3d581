//! Runs, their files and the workflows as resources a client reads or attaches:
//! - `file://…`: a file under the workspace, as the links in run results name them, read
//!   as a `read_file` node reads (never outside the workspace, nor through a link);
//! - `tasks://runs/{run_id}/report.json` and `…/summary.md`: a run's report, and its
//!   summary in Markdown, for the caller that may see the run;
//! - `tasks://workflows/{name}/source.toml` and `…/diagram.mmd`: a workflow's file, and
//!   its DAG as a Mermaid flowchart grouped by phase.
//!
//! Invariant: every read, refused or not, writes one audit row (`read_resource`).

use serde_json::{Map, Value};

use super::{App, Caller};
use crate::engine::files;
use crate::store::AuditOutcome;

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
    #[error("no resource {0}")]
    NotFound(String),
    #[error("{0}")]
    Refused(String),
}

impl App {
    /// Reads the resource at `uri` for `caller`; audited either way.
    pub(crate) fn read_resource(
        &self,
        uri: &str,
        caller: &Caller,
    ) -> Result<Contents, ResourceError> {
        let read = self.resolve(uri, caller);
        let outcome = match &read {
            Ok(_) => AuditOutcome::Ok,
            Err(ResourceError::NotFound(_)) => AuditOutcome::NotFound,
            Err(ResourceError::Refused(_)) => AuditOutcome::Rejected,
        };
        let mut args = Map::new();
        args.insert("uri".to_owned(), Value::String(uri.to_owned()));
        self.audit((READ_AUDIT, &args), outcome, run_of(uri), caller);
        read
    }

    /// A fingerprint of what the resource at `uri` holds now, for `caller`: it differs
    /// whenever the contents do (a subscription sends an update then); `None` while the
    /// resource cannot be read. Not audited: the read the update prompts is.
    pub(crate) fn resource_fingerprint(&self, uri: &str, caller: &Caller) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let contents = self.resolve(uri, caller).ok()?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        match &contents {
            Contents::Text { text, .. } => text.hash(&mut hasher),
            Contents::Blob { bytes, .. } => bytes.hash(&mut hasher),
        }
        Some(hasher.finish())
    }

    fn resolve(&self, uri: &str, caller: &Caller) -> Result<Contents, ResourceError> {
        if let Some(path) = uri.strip_prefix("file://") {
            return self.workspace_file(uri, path);
        }
        let not_found = || ResourceError::NotFound(uri.to_owned());
        let rest = uri.strip_prefix("tasks://").ok_or_else(not_found)?;
        match rest.split('/').collect::<Vec<_>>().as_slice() {
            ["runs", run_id, "report.json"] => {
                let run = self.get_run(run_id, caller).map_err(|_| not_found())?;
                let text = serde_json::to_string_pretty(&run).expect("a report serialises");
                Ok(text_of("application/json", text))
            }
            ["runs", run_id, "summary.md"] => {
                let run = self.get_run(run_id, caller).map_err(|_| not_found())?;
                Ok(text_of("text/markdown", summary(&run)))
            }
            ["workflows", name, "source.toml"] => {
                let text = self.workflows().source(name).ok_or_else(not_found)?;
                Ok(text_of("application/toml", text))
            }
            ["workflows", name, "diagram.mmd"] => {
                let entry = self.workflows().get(name).ok_or_else(not_found)?;
                Ok(text_of(
                    "text/vnd.mermaid",
                    crate::cli::mermaid::render(&entry.def),
                ))
            }
            _ => Err(not_found()),
        }
    }

    /// A file under the workspace, named by the absolute path of a `file://` URI.
    fn workspace_file(&self, uri: &str, encoded: &str) -> Result<Contents, ResourceError> {
        let path =
            percent_decoded(encoded).ok_or_else(|| refused(uri, "its path is not UTF-8 text"))?;
        let root = self.engine.workspace();
        let relative = std::path::Path::new(&path)
            .strip_prefix(root)
            .map_err(|_| refused(uri, "it is outside the workspace"))?;
        let relative = relative
            .to_str()
            .ok_or_else(|| refused(uri, "its path is not UTF-8 text"))?;
        let (bytes, _) =
            files::read_bytes(root, relative, MAX_READ).map_err(|error| {
                match error.message.contains("No such file") {
                    true => ResourceError::NotFound(uri.to_owned()),
                    false => refused(uri, &error.message),
                }
            })?;
        let mime = mime_of(relative);
        Ok(match String::from_utf8(bytes) {
            Ok(text) => Contents::Text { mime, text },
            Err(error) => Contents::Blob {
                mime: "application/octet-stream".to_owned(),
                bytes: error.into_bytes(),
            },
        })
    }

    /// The files runs that `caller` may see wrote, newest run first, at most `limit`,
    /// after the first `skip`.
    pub(crate) fn written_files(&self, caller: &Caller, skip: usize, limit: usize) -> Vec<Listed> {
        let query = crate::store::RunQuery {
            limit: 200,
            ..Default::default()
        };
        let runs = self.board_runs(&query, caller).unwrap_or_default();
        let root = self.engine.workspace();
        runs.iter()
            .flat_map(|run| self.run_files(&run.id, caller).unwrap_or_default())
            .skip(skip)
            .take(limit)
            .map(|file| {
                let path = root.join(&file.path);
                Listed {
                    uri: file_uri(&path),
                    name: file.path.clone(),
                    mime: mime_of(&file.path),
                    bytes: file.bytes,
                }
            })
            .collect()
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
                let runs = self.board_runs(&query, caller).unwrap_or_default();
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
fn summary(run: &Value) -> String {
    let text = |key: &str| run[key].as_str().unwrap_or_default().to_owned();
    let mut out = format!(
        "# Run of `{}`: {}\n\n- Run: `{}`\n- Started: {}\n",
        text("workflow"),
        text("status"),
        text("run_id"),
        text("created_at")
    );
    if let Some(finished) = run["finished_at"].as_str() {
        out.push_str(&format!("- Finished: {finished}\n"));
    }
    if let Some(error) = run["error"].as_str() {
        out.push_str(&format!("- Error: {error}\n"));
    }
    out.push_str("\n| Node | State | Attempts |\n|---|---|---|\n");
    for (id, node) in run["nodes"].as_object().into_iter().flatten() {
        let state = node["status"].as_str().unwrap_or("pending");
        out.push_str(&format!("| `{id}` | {state} | {} |\n", node["attempts"]));
    }
    out
}

fn text_of(mime: &str, text: String) -> Contents {
    Contents::Text {
        mime: mime.to_owned(),
        text,
    }
}

fn refused(uri: &str, why: &str) -> ResourceError {
    ResourceError::Refused(format!("{uri} is not read: {why}"))
}

/// The run a `tasks://runs/…` URI names, for its audit row.
fn run_of(uri: &str) -> Option<&str> {
    uri.strip_prefix("tasks://runs/")?.split('/').next()
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

/// A `file://` URI of an absolute path, each byte outside the URI's unreserved characters
/// and `/` percent-encoded: as run results link the files they wrote.
pub(crate) fn file_uri(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file://");
    for &byte in path.as_os_str().as_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(byte as char)
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    uri
}

/// A percent-encoded path, decoded; `None` if it is not UTF-8 once decoded.
fn percent_decoded(encoded: &str) -> Option<String> {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = encoded
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_uri_names_its_path_percent_encoded_and_decodes_back() {
        let path = std::path::Path::new("/work/docs/a b%c/ünï.md");
        let uri = file_uri(path);
        assert_eq!(uri, "file:///work/docs/a%20b%25c/%C3%BCn%C3%AF.md");
        assert_eq!(
            percent_decoded(uri.strip_prefix("file://").unwrap()).unwrap(),
            path.to_str().unwrap()
        );
    }
}
