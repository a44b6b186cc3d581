//! Resource URIs read once into one canonical form, whatever their spelling: a resource
//! has one key however a client percent-encodes it, adds `.` or empty path components, or
//! names the local host. A URI that is not one of this server's shapes, or longer than
//! any path can be, is refused here, before anything looks at the workspace or the store:
//! the answer never depends on what exists.

/// The longest path a file resource names once decoded: Linux's `PATH_MAX`, past which no
/// file can be opened by path.
const MAX_PATH: usize = 4096;

/// The longest URI read at all: a path of [`MAX_PATH`] bytes, each percent-encoded, and
/// the longest prefix.
pub(crate) const MAX_URI: usize = 3 * MAX_PATH + 64;

/// What a resource URI names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    /// A file, by its absolute path (not yet known to be under the workspace).
    File(String),
    /// A run's report (`report.json`) or summary (`summary.md`).
    Run { run_id: String, part: RunPart },
    /// A workflow's source (`source.toml`) or diagram (`diagram.mmd`).
    Workflow { name: String, part: WorkflowPart },
    /// No resource of this server: it may be followed, and never changes.
    Foreign,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum RunPart {
    Report,
    Summary,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WorkflowPart {
    Source,
    Diagram,
}

/// A resource URI in its one spelling, with what it names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Canonical {
    pub(crate) uri: String,
    pub(crate) target: Target,
}

/// Why a URI names no resource of this server: the same for any state of the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadUri(pub(crate) String);

impl Canonical {
    /// Reads `uri` to follow it: its canonical form, or for a URI that names no resource
    /// of this server, itself as a [`Target::Foreign`] (a client may follow what it likes;
    /// nothing is ever told of it). Only a URI longer than any resource's is refused.
    pub(crate) fn followed(uri: &str) -> Result<Canonical, BadUri> {
        match Canonical::parse(uri) {
            Err(_) if uri.len() <= MAX_URI => Ok(Canonical {
                uri: uri.to_owned(),
                target: Target::Foreign,
            }),
            parsed => parsed,
        }
    }

    /// Reads `uri` into its canonical form.
    pub(crate) fn parse(uri: &str) -> Result<Canonical, BadUri> {
        if uri.len() > MAX_URI {
            return Err(BadUri(format!(
                "the URI is {} bytes long; no resource's is longer than {MAX_URI}",
                uri.len()
            )));
        }
        if let Some(rest) = strip_scheme(uri, "file") {
            return file(rest);
        }
        let Some(rest) = strip_scheme(uri, "tasks") else {
            return Err(BadUri(
                "not a resource of this server: its resources are file:// and tasks:// URIs"
                    .to_owned(),
            ));
        };
        let segments: Vec<String> = rest
            .split('/')
            .map(decoded_segment)
            .collect::<Result<_, _>>()?;
        let target = match segments.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["runs", run_id, "report.json"] => run(run_id, RunPart::Report),
            ["runs", run_id, "summary.md"] => run(run_id, RunPart::Summary),
            ["workflows", name, "source.toml"] => workflow(name, WorkflowPart::Source),
            ["workflows", name, "diagram.mmd"] => workflow(name, WorkflowPart::Diagram),
            _ => {
                return Err(BadUri(
                    "not a resource of this server: see resources/templates/list".to_owned(),
                ));
            }
        };
        let uri = format!(
            "tasks://{}",
            segments
                .iter()
                .map(|segment| encoded(segment.as_bytes(), false))
                .collect::<Vec<_>>()
                .join("/")
        );
        Ok(Canonical { uri, target })
    }
}

fn run(run_id: &str, part: RunPart) -> Target {
    Target::Run {
        run_id: run_id.to_owned(),
        part,
    }
}

fn workflow(name: &str, part: WorkflowPart) -> Target {
    Target::Workflow {
        name: name.to_owned(),
        part,
    }
}

/// The rest of `uri` after `scheme://`, the scheme matched as RFC 3986 says (any case).
fn strip_scheme<'a>(uri: &'a str, scheme: &str) -> Option<&'a str> {
    let (given, rest) = uri.split_once("://")?;
    given.eq_ignore_ascii_case(scheme).then_some(rest)
}

/// A `file://` URI's rest: an empty or `localhost` authority, then an absolute path.
fn file(rest: &str) -> Result<Canonical, BadUri> {
    let path = match rest.find('/') {
        Some(0) => rest,
        Some(at) if rest[..at].eq_ignore_ascii_case("localhost") => &rest[at..],
        _ => {
            return Err(BadUri(
                "a file:// URI names a path on this host: file:///PATH".to_owned(),
            ));
        }
    };
    let decoded = percent_decoded(path)
        .ok_or_else(|| BadUri("the URI's path is not UTF-8 once decoded".to_owned()))?;
    if decoded.contains('\0') {
        return Err(BadUri("the URI's path holds a NUL byte".to_owned()));
    }
    let mut parts = Vec::new();
    for part in decoded.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(BadUri("the URI's path holds `..`".to_owned())),
            part => parts.push(part),
        }
    }
    let path = format!("/{}", parts.join("/"));
    if path.len() > MAX_PATH {
        return Err(BadUri(format!(
            "the URI's path is longer than {MAX_PATH} bytes, which no file's path may be"
        )));
    }
    Ok(Canonical {
        uri: file_uri(std::path::Path::new(&path)),
        target: Target::File(path),
    })
}

/// A `tasks://` URI's segment, decoded; it may not hold `/` or a NUL once decoded.
fn decoded_segment(segment: &str) -> Result<String, BadUri> {
    let decoded = percent_decoded(segment)
        .ok_or_else(|| BadUri("the URI is not UTF-8 once decoded".to_owned()))?;
    if decoded.contains(['/', '\0']) {
        return Err(BadUri("a segment of the URI holds `/` or a NUL".to_owned()));
    }
    Ok(decoded)
}

/// A `file://` URI of an absolute path, each byte outside the URI's unreserved characters
/// and `/` percent-encoded: as run results link the files they wrote.
pub(crate) fn file_uri(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    format!("file://{}", encoded(path.as_os_str().as_bytes(), true))
}

/// `bytes` with every byte outside the unreserved characters (and `/` where `slash`)
/// percent-encoded.
fn encoded(bytes: &[u8], slash: bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &byte in bytes {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char)
            }
            b'/' if slash => out.push('/'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// A percent-encoded path, decoded; `None` if it is not UTF-8 once decoded.
pub(crate) fn percent_decoded(encoded: &str) -> Option<String> {
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
        let canonical = Canonical::parse(&uri).unwrap();
        assert_eq!(canonical.uri, uri);
        assert_eq!(
            canonical.target,
            Target::File(path.to_str().unwrap().to_owned())
        );
    }

    #[test]
    fn every_spelling_of_one_file_has_one_canonical_uri() {
        let canonical = "file:///work/docs/report.md";
        for spelling in [
            canonical,
            "file:///work/docs/%72eport.md",
            "FILE:///work//docs/./report.md",
            "file://localhost/work/docs/report.md",
            "file://LocalHost/%77ork/docs/report%2Emd",
            "file:///work/docs/report.md/",
        ] {
            assert_eq!(
                Canonical::parse(spelling).unwrap().uri,
                canonical,
                "{spelling}"
            );
        }
        let run = Canonical::parse("tasks://runs/%72un-1/report.json").unwrap();
        assert_eq!(run.uri, "tasks://runs/run-1/report.json");
    }

    #[test]
    fn a_uri_of_no_resource_is_refused_whatever_exists() {
        for uri in [
            "file:///work/../etc/passwd",
            "file://evil.example/etc/passwd",
            "file:relative/path",
            "file:///work/%00x",
            "file:///work/%FF",
            "https://example.com/",
            "tasks://runs/a%2Fb/report.json",
            "tasks://runs/r/other.json",
            "tasks://workflows/w",
        ] {
            assert!(Canonical::parse(uri).is_err(), "{uri}");
        }
        let long = format!("file:///{}", "a".repeat(MAX_PATH + 1));
        assert!(
            Canonical::parse(&long)
                .unwrap_err()
                .0
                .contains("longer than")
        );
        let huge = format!("file:///{}", "%61".repeat(MAX_URI));
        assert!(
            Canonical::parse(&huge)
                .unwrap_err()
                .0
                .contains("bytes long")
        );
    }
}
