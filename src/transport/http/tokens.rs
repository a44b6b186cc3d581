//! Bearer tokens for the HTTP transport: a file of `name token` lines, each name a
//! principal; or, without a file, one token made at start.
//!
//! Invariant: a token is never logged, never echoed in an error (a problem of the file is
//! told by its line number, never by the text of the line), and is compared as a SHA-256
//! digest, in constant time, against the digest of every token of the file, so that
//! neither the answer's timing nor its text tells how much of a guess was right.
//!
//! Invariant: a tokens file that its group or others may read or write is refused, at
//! start and at reload, as ssh refuses such a key.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sha2::{Digest as _, Sha256};

/// Tokens shorter than this are refused as guessable.
const MIN_TOKEN_LEN: usize = 16;

/// The principal of the token made at start when no tokens file is given.
pub(crate) const GENERATED_PRINCIPAL: &str = "local";

/// Who made a request, by the name its token has in the tokens file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Principal(pub(crate) String);

/// The SHA-256 digest of a token: what is kept and compared, never the token itself.
pub(crate) type TokenDigest = [u8; 32];

/// The digest of `token`.
pub(crate) fn digest(token: &[u8]) -> TokenDigest {
    Sha256::digest(token).into()
}

/// The tokens of a tokens file.
#[derive(Clone)]
pub struct Tokens {
    entries: Vec<(Principal, TokenDigest)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.entries.iter().map(|(p, _)| p.0.as_str()).collect();
        f.debug_struct("Tokens")
            .field("principals", &names)
            .finish()
    }
}

impl Tokens {
    /// Reads a tokens file: one `name token` pair a line; blank lines and lines starting
    /// with `#` are skipped. Every problem of the file is reported at once, by line.
    pub fn load(path: &Path) -> anyhow::Result<Tokens> {
        let file = std::fs::File::open(path)
            .map_err(|e| anyhow::anyhow!("cannot read tokens file {}: {e}", path.display()))?;
        let mode = file
            .metadata()
            .map_err(|e| anyhow::anyhow!("cannot read tokens file {}: {e}", path.display()))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            anyhow::bail!(
                "tokens file {path} may be read or written by others (mode {mode:04o}): \
                 its tokens cannot be trusted to be secret; make it private to this user \
                 with `chmod 600 {path}`",
                path = path.display(),
                mode = mode & 0o7777,
            );
        }
        let text = std::io::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("cannot read tokens file {}: {e}", path.display()))?;
        Tokens::parse(&text).map_err(|problems| {
            anyhow::anyhow!(
                "tokens file {} is not valid:\n{}",
                path.display(),
                problems.join("\n")
            )
        })
    }

    /// The tokens of `text`, or its problems. A problem names its line, never what the
    /// line holds: with name and token swapped, the "name" would be the token.
    pub(crate) fn parse(text: &str) -> Result<Tokens, Vec<String>> {
        let mut entries: Vec<(Principal, TokenDigest)> = Vec::new();
        // The line of each entry, to name the earlier line of a duplicate.
        let mut lines: Vec<usize> = Vec::new();
        let mut problems = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, token] = fields[..] else {
                problems.push(format!(
                    "line {number}: expected `name token`, found {} fields",
                    fields.len()
                ));
                continue;
            };
            let token_digest = digest(token.as_bytes());
            if token.len() < MIN_TOKEN_LEN {
                problems.push(format!(
                    "line {number}: the token (the second field) is shorter than \
                     {MIN_TOKEN_LEN} characters"
                ));
            }
            if let Some(at) = entries.iter().position(|(p, _)| p.0 == name) {
                problems.push(format!(
                    "line {number}: the name is given on line {} too",
                    lines[at]
                ));
            }
            if let Some(at) = entries.iter().position(|(_, t)| *t == token_digest) {
                problems.push(format!(
                    "line {number}: the token is the one of line {} too",
                    lines[at]
                ));
            }
            entries.push((Principal(name.to_owned()), token_digest));
            lines.push(number);
        }
        if entries.is_empty() && problems.is_empty() {
            problems.push("it names no token".to_owned());
        }
        if problems.is_empty() {
            Ok(Tokens { entries })
        } else {
            Err(problems)
        }
    }

    /// A token made now from 32 random bytes of the operating system, in hex, and the
    /// tokens that hold it alone, for principal [`GENERATED_PRINCIPAL`].
    pub(crate) fn generate() -> (Tokens, String) {
        let token = crate::runs::random_hex();
        let principal = Principal(GENERATED_PRINCIPAL.to_owned());
        let tokens = Tokens {
            entries: vec![(principal, digest(token.as_bytes()))],
        };
        (tokens, token)
    }

    /// The principal of the token whose digest is `candidate`. Every digest is compared,
    /// whole, whatever matched first.
    pub(crate) fn principal(&self, candidate: &TokenDigest) -> Option<&Principal> {
        let mut found = None;
        for (principal, token) in &self.entries {
            if constant_time_eq(candidate, token) {
                found = Some(principal);
            }
        }
        found
    }

    /// Whether some token of these has digest `candidate`.
    pub(crate) fn holds(&self, candidate: &TokenDigest) -> bool {
        self.principal(candidate).is_some()
    }

    /// How many tokens there are.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Whether digests `a` and `b` are equal, in a time that does not depend on where they
/// differ.
fn constant_time_eq(a: &TokenDigest, b: &TokenDigest) -> bool {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Keep the optimiser from turning the fold into an early exit.
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_token_names_its_principal_and_nothing_else_does() {
        let tokens = Tokens::parse(
            "# team tokens\n\nalice 0123456789abcdef-alice\n  bob   0123456789abcdef-bob  \n",
        )
        .unwrap();
        let name = |t: &str| tokens.principal(&digest(t.as_bytes())).map(|p| p.0.clone());
        assert_eq!(name("0123456789abcdef-alice").as_deref(), Some("alice"));
        assert_eq!(name("0123456789abcdef-bob").as_deref(), Some("bob"));
        assert_eq!(name("0123456789abcdef-bo"), None);
        assert_eq!(name("0123456789abcdef-bobb"), None);
        assert_eq!(name(""), None);
        assert_eq!(name("alice"), None);
    }

    #[test]
    fn every_problem_of_a_tokens_file_is_reported_by_line_without_the_token() {
        let problems = Tokens::parse(
            "alice 0123456789abcdef-alice\nbob short\nalice 0123456789abcdef-other\ncarol\n\
             dave 0123456789abcdef-alice\n",
        )
        .err()
        .unwrap();
        assert_eq!(
            problems,
            [
                "line 2: the token (the second field) is shorter than 16 characters",
                "line 3: the name is given on line 1 too",
                "line 4: expected `name token`, found 1 fields",
                "line 5: the token is the one of line 1 too",
            ]
        );
        assert!(problems.iter().all(|p| !p.contains("0123456789abcdef")));
        assert_eq!(
            Tokens::parse("# nothing\n").err().unwrap(),
            ["it names no token"]
        );
    }

    #[test]
    fn a_line_with_name_and_token_swapped_is_told_by_its_number_alone() {
        let problems = Tokens::parse("0123456789abcdef-secret alice\n")
            .err()
            .unwrap();
        assert_eq!(
            problems,
            ["line 1: the token (the second field) is shorter than 16 characters"]
        );
    }

    #[test]
    fn a_made_token_is_64_hex_digits_held_by_the_local_principal_alone() {
        let (tokens, token) = Tokens::generate();
        let (_, other) = Tokens::generate();
        assert_eq!(token.len(), 64);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(token, other);
        let found = tokens.principal(&digest(token.as_bytes()));
        assert_eq!(found.map(|p| p.0.as_str()), Some(GENERATED_PRINCIPAL));
        assert!(!tokens.holds(&digest(other.as_bytes())));
    }

    #[test]
    fn the_debug_form_names_principals_and_no_token() {
        let tokens = Tokens::parse("alice 0123456789abcdef-alice\n").unwrap();
        let shown = format!("{tokens:?}");
        assert!(shown.contains("alice"));
        assert!(!shown.contains("0123456789abcdef"));
    }
}
