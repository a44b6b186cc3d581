//! Bearer tokens for the HTTP transport: a file of `name token` lines, each name a
//! principal.
//!
//! Invariant: a token is never logged, never echoed in an error, and compared in constant
//! time against every token of the file, so that neither the answer's timing nor its text
//! tells how much of a guess was right.

use std::path::Path;

/// Tokens shorter than this are refused as guessable.
const MIN_TOKEN_LEN: usize = 16;

/// Who made a request, by the name its token has in the tokens file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Principal(pub(crate) String);

/// The tokens of a tokens file.
#[derive(Clone)]
pub struct Tokens {
    entries: Vec<(Principal, Vec<u8>)>,
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
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read tokens file {}: {e}", path.display()))?;
        Tokens::parse(&text).map_err(|problems| {
            anyhow::anyhow!(
                "tokens file {} is not valid:\n{}",
                path.display(),
                problems.join("\n")
            )
        })
    }

    pub(crate) fn parse(text: &str) -> Result<Tokens, Vec<String>> {
        let mut entries: Vec<(Principal, Vec<u8>)> = Vec::new();
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
            if token.len() < MIN_TOKEN_LEN {
                problems.push(format!(
                    "line {number}: the token of `{name}` is shorter than {MIN_TOKEN_LEN} characters"
                ));
            }
            if entries.iter().any(|(p, _)| p.0 == name) {
                problems.push(format!("line {number}: `{name}` is named twice"));
            }
            if entries.iter().any(|(_, t)| t == token.as_bytes()) {
                problems.push(format!(
                    "line {number}: the token of `{name}` is another name's token too"
                ));
            }
            entries.push((Principal(name.to_owned()), token.as_bytes().to_vec()));
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

    /// The principal whose token `candidate` is. Every token is compared, whatever
    /// matched first.
    pub(crate) fn principal(&self, candidate: &[u8]) -> Option<&Principal> {
        let mut found = None;
        for (principal, token) in &self.entries {
            if constant_time_eq(candidate, token) {
                found = Some(principal);
            }
        }
        found
    }
}

/// Whether `a` and `b` are equal, in a time that depends on their lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
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
        let name = |t: &str| tokens.principal(t.as_bytes()).map(|p| p.0.clone());
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
                "line 2: the token of `bob` is shorter than 16 characters",
                "line 3: `alice` is named twice",
                "line 4: expected `name token`, found 1 fields",
                "line 5: the token of `dave` is another name's token too",
            ]
        );
        assert!(problems.iter().all(|p| !p.contains("0123456789abcdef")));
        assert_eq!(
            Tokens::parse("# nothing\n").err().unwrap(),
            ["it names no token"]
        );
    }

    #[test]
    fn the_debug_form_names_principals_and_no_token() {
        let tokens = Tokens::parse("alice 0123456789abcdef-alice\n").unwrap();
        let shown = format!("{tokens:?}");
        assert!(shown.contains("alice"));
        assert!(!shown.contains("0123456789abcdef"));
    }
}
