//! Node actions: resolving their templates, then performing them.
//!
//! There is deliberately no shell or command action: a server that runs commands on a
//! model's say-so is a confused deputy.

use std::future::Future;
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::definition::ActionDef;
use super::report::{NodeError, NodeErrorKind};
use super::template;
use crate::tools::Tools;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Questions a run may put to the MCP client: the user (elicitation) or its model (sampling).
pub trait Interaction: Send + Sync {
    /// Asks the user; resolves to the answer matching `schema`.
    fn ask(&self, message: String, schema: Value) -> BoxFuture<Result<Value, NodeError>>;
    /// Asks the client's model; resolves to its reply.
    fn sample(
        &self,
        prompt: String,
        system: Option<String>,
        max_tokens: u32,
    ) -> BoxFuture<Result<Value, NodeError>>;
}

/// What actions need from the world.
#[derive(Clone)]
pub struct ActionEnv {
    pub tools: Tools,
    /// `write_file` paths are relative to this directory and may not leave it.
    pub workspace: PathBuf,
    pub interaction: Option<Arc<dyn Interaction>>,
}

/// An action with its templates expanded, ready to perform (and to retry as it is).
#[derive(Debug, Clone)]
pub enum Resolved {
    Tool {
        name: String,
        args: Map<String, Value>,
    },
    Text(String),
    WriteFile {
        path: String,
        content: String,
        overwrite: bool,
    },
    Wait(Duration),
    Input {
        message: String,
        schema: Value,
        default: Option<Value>,
    },
    Sample {
        prompt: String,
        system: Option<String>,
        max_tokens: u32,
    },
}

const DEFAULT_SAMPLE_TOKENS: u32 = 1000;

fn template_error(what: &str, error: template::TemplateError) -> NodeError {
    NodeError::new(NodeErrorKind::Template, format!("{what}: {error}"))
}

fn render(what: &str, text: &str, ctx: &minijinja::Value) -> Result<String, NodeError> {
    if !template::is_template(text) {
        return Ok(text.to_owned());
    }
    template::render(text, ctx).map_err(|e| template_error(what, e))
}

/// Expands the action's templates against `ctx`.
pub fn resolve(action: &ActionDef, ctx: &minijinja::Value) -> Result<Resolved, NodeError> {
    Ok(match action {
        ActionDef::Tool { name, args } => {
            let args = template::expand(args, ctx).map_err(|e| template_error("args", e))?;
            let Value::Object(args) = args else {
                return Err(NodeError::new(
                    NodeErrorKind::Template,
                    "args must expand to an object",
                ));
            };
            Resolved::Tool {
                name: name.clone(),
                args,
            }
        }
        ActionDef::Render { template } => Resolved::Text(render("render", template, ctx)?),
        ActionDef::WriteFile {
            path,
            content,
            overwrite,
        } => Resolved::WriteFile {
            path: render("write_file.path", path, ctx)?,
            content: render("write_file.content", content, ctx)?,
            overwrite: *overwrite,
        },
        ActionDef::Wait { duration } => Resolved::Wait(*duration),
        ActionDef::Input {
            message,
            schema,
            default,
        } => Resolved::Input {
            message: render("input.message", message, ctx)?,
            schema: expand_form(schema, ctx)?,
            default: default.clone(),
        },
        ActionDef::Sample {
            prompt,
            system,
            max_tokens,
        } => Resolved::Sample {
            prompt: render("sample.prompt", prompt, ctx)?,
            system: system
                .as_deref()
                .map(|s| render("sample.system", s, ctx))
                .transpose()?,
            max_tokens: max_tokens.unwrap_or(DEFAULT_SAMPLE_TOKENS),
        },
    })
}

/// An `input` node's form with its templates expanded; choices computed upstream must
/// come out as a non-empty list of strings.
fn expand_form(schema: &Value, ctx: &minijinja::Value) -> Result<Value, NodeError> {
    if !template::has_template(schema) {
        return Ok(schema.clone());
    }
    let form = template::expand(schema, ctx).map_err(|e| template_error("input.schema", e))?;
    let properties = form["properties"].as_object().into_iter().flatten();
    for (name, property) in properties {
        for key in ["enum", "enumNames"] {
            let Some(choices) = property.get(key) else {
                continue;
            };
            let fits = choices
                .as_array()
                .is_some_and(|items| !items.is_empty() && items.iter().all(Value::is_string));
            if !fits {
                let message = format!(
                    "input.schema: `{name}.{key}` must expand to a non-empty list of strings, \
                     not {choices}"
                );
                return Err(NodeError::new(NodeErrorKind::Template, message));
            }
        }
    }
    Ok(form)
}

/// Puts an `input` or `sample` question to the run's interaction; without one, see
/// [`unanswered`]. (The scheduler performs every other action itself.)
pub async fn ask(env: &ActionEnv, question: &Resolved) -> Result<Value, NodeError> {
    let Some(interaction) = &env.interaction else {
        return unanswered(question);
    };
    match question {
        Resolved::Input {
            message,
            schema,
            default,
        } => {
            let answer = interaction.ask(message.clone(), schema.clone()).await;
            match (answer, default) {
                // A client that cannot answer this kind of question: the default stands in.
                (Err(error), Some(default)) if error.kind == NodeErrorKind::Unsupported => {
                    Ok(default.clone())
                }
                (answer, _) => answer,
            }
        }
        Resolved::Sample {
            prompt,
            system,
            max_tokens,
        } => {
            interaction
                .sample(prompt.clone(), system.clone(), *max_tokens)
                .await
        }
        _ => unreachable!("only `input` and `sample` are questions"),
    }
}

/// A question nobody is there to answer: an `input` takes its declared default, or fails;
/// a `sample` fails.
pub fn unanswered(question: &Resolved) -> Result<Value, NodeError> {
    match question {
        Resolved::Input { default, .. } => default.clone().ok_or_else(|| {
            NodeError::new(
                NodeErrorKind::Unsupported,
                "this node asks the user a question, and no MCP client that can answer is connected",
            )
        }),
        _ => Err(NodeError::new(
            NodeErrorKind::Unsupported,
            "this node asks the client's model, and no MCP client that can answer is connected",
        )),
    }
}

fn file_error(message: impl Into<String>) -> NodeError {
    NodeError::new(NodeErrorKind::File, message)
}

/// Checks that `path` is relative and free of `..`, and that no existing component under
/// `root` is a symlink; returns the path joined to `root`.
pub fn confine(root: &Path, path: &str) -> Result<PathBuf, NodeError> {
    let relative = Path::new(path);
    if path.is_empty() {
        return Err(file_error("the path is empty"));
    }
    let mut joined = root.to_path_buf();
    for component in relative.components() {
        match component {
            Component::Normal(part) => {
                joined.push(part);
                if joined
                    .symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_symlink())
                {
                    return Err(file_error(format!(
                        "`{path}` goes through a symbolic link; refused"
                    )));
                }
            }
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(file_error(format!("`{path}` contains `..`; refused")));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(file_error(format!(
                    "`{path}` is absolute; paths are relative to the workspace"
                )));
            }
        }
    }
    Ok(joined)
}

/// Writes `content` to `path` under `root`: into a temporary file beside it, then renamed
/// into place, so that the file appears whole or not at all. Without `overwrite`, the
/// rename refuses to replace an existing file (`renameat2` with `RENAME_NOREPLACE`, or a
/// hard link where the file system lacks it).
pub fn write_file(
    root: &Path,
    path: &str,
    content: &str,
    overwrite: bool,
) -> Result<Value, NodeError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    let target = confine(root, path)?;
    let cannot = |e: std::io::Error| file_error(format!("cannot write `{path}`: {e}"));
    let parent = target.parent().unwrap_or(root);
    std::fs::create_dir_all(parent)
        .map_err(|e| file_error(format!("cannot create the folder of `{path}`: {e}")))?;
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let temp = parent.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .map_err(cannot)?;
    let written = file
        .write_all(content.as_bytes())
        .and_then(|()| file.sync_data());
    drop(file);
    let placed = written.and_then(|()| match overwrite {
        true => std::fs::rename(&temp, &target),
        false => rename_no_replace(&temp, &target),
    });
    if let Err(error) = placed {
        let _ = std::fs::remove_file(&temp);
        return Err(match error.kind() {
            std::io::ErrorKind::AlreadyExists => file_error(format!(
                "`{path}` already exists; set overwrite = true to replace it"
            )),
            _ => cannot(error),
        });
    }
    Ok(json!({ "path": path, "bytes": content.len() }))
}

/// Renames `from` to `to` unless `to` exists (then `AlreadyExists`).
fn rename_no_replace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c =
        |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    let (c_from, c_to) = (c(from)?, c(to)?);
    // SAFETY: both arguments are valid NUL-terminated paths that outlive the call.
    let status = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            c_from.as_ptr(),
            libc::AT_FDCWD,
            c_to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if status == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        // The file system or kernel lacks the flag: a hard link refuses an existing name too.
        Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        _ => Err(error),
    }
}

/// A stable hash of a file's content (FNV-1a, 64 bits, with the length), as a `write_file`
/// attempt records it before writing.
pub fn content_hash(content: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in content.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("fnv1a64:{hash:016x}:{}", content.len())
}

/// Whether `path` under `root` already holds exactly `content`.
pub fn already_written(root: &Path, path: &str, content: &str) -> bool {
    confine(root, path)
        .ok()
        .and_then(|target| std::fs::read(target).ok())
        .is_some_and(|bytes| bytes == content.as_bytes())
}
