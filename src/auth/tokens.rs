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
const MIN_TOKEN_LEN: usize = 32;

/// Tokens whose measured entropy is below this many bits are refused as guessable: the
/// token's length times the Shannon entropy of its characters' frequencies. A random hex
/// token of 32 characters measures about 115 bits, one of 64 (as `openssl rand -hex 32`
/// makes) about 250; a word or a few characters repeated measure far less.
const MIN_TOKEN_BITS: f64 = 96.0;

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
            if let Some(why) = guessable(token) {
                problems.push(format!(
                    "line {number}: the token (the second field) is guessable: {why}; \
                     make one with `openssl rand -hex 32`"
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
        let token = crate::auth::random_hex();
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

/// Why `token` is too easy to guess, if it is: too short, a stretch of it repeated or in
/// sequence (`abcdefgh`, `87654321`), or too little measured entropy ([`MIN_TOKEN_BITS`]).
/// Never names the token. A random hex token fails the stretch checks less than once in a
/// million draws.
fn guessable(token: &str) -> Option<String> {
    const STRETCH: usize = 8;
    let chars: Vec<char> = token.chars().collect();
    if chars.len() < MIN_TOKEN_LEN {
        return Some(format!("shorter than {MIN_TOKEN_LEN} characters"));
    }
    let mut seen = std::collections::HashSet::new();
    if chars.windows(STRETCH).any(|stretch| !seen.insert(stretch)) {
        return Some(format!(
            "a stretch of {STRETCH} characters occurs in it twice"
        ));
    }
    let step = |w: &[char], by: i64| w.windows(2).all(|p| p[1] as i64 - p[0] as i64 == by);
    if chars.windows(STRETCH).any(|w| step(w, 1) || step(w, -1)) {
        return Some(format!("{STRETCH} characters of it run in sequence"));
    }
    let bits = measured_bits(&chars);
    (bits < MIN_TOKEN_BITS).then(|| {
        format!(
            "its characters measure {bits:.0} bits of entropy, fewer than \
             {MIN_TOKEN_BITS:.0}"
        )
    })
}

/// The length of `chars` times the Shannon entropy of their frequencies, in bits.
fn measured_bits(chars: &[char]) -> f64 {
    let mut counts = std::collections::HashMap::<char, usize>::new();
    for &c in chars {
        *counts.entry(c).or_default() += 1;
    }
    let n = chars.len() as f64;
    let per_char: f64 = counts
        .values()
        .map(|&count| {
            let p = count as f64 / n;
            -p * p.log2()
        })
        .sum();
    per_char * n
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

    const ALICE: &str = "7f3a9c2e5b8d1f4a6c0e9b3d7a2f5c8e-alice";
    const BOB: &str = "e1c4b7a0d3f6c9b2e5a8d1f4c7b0a3e6-bob";

    #[test]
    fn each_token_names_its_principal_and_nothing_else_does() {
        let tokens = Tokens::parse(&format!(
            "# team tokens\n\nalice {ALICE}\n  bob   {BOB}  \n"
        ))
        .unwrap();
        let name = |t: &str| tokens.principal(&digest(t.as_bytes())).map(|p| p.0.clone());
        assert_eq!(name(ALICE).as_deref(), Some("alice"));
        assert_eq!(name(BOB).as_deref(), Some("bob"));
        assert_eq!(name(&BOB[..BOB.len() - 1]), None);
        assert_eq!(name(&format!("{BOB}b")), None);
        assert_eq!(name(""), None);
        assert_eq!(name("alice"), None);
    }

    #[test]
    fn every_problem_of_a_tokens_file_is_reported_by_line_without_the_token() {
        let problems = Tokens::parse(&format!(
            "alice {ALICE}\nbob short\nalice {BOB}\ncarol\ndave {ALICE}\n"
        ))
        .err()
        .unwrap();
        assert_eq!(
            problems,
            [
                "line 2: the token (the second field) is guessable: shorter than 32 \
                 characters; make one with `openssl rand -hex 32`",
                "line 3: the name is given on line 1 too",
                "line 4: expected `name token`, found 1 fields",
                "line 5: the token is the one of line 1 too",
            ]
        );
        assert!(problems.iter().all(|p| !p.contains(&ALICE[..8])));
        assert_eq!(
            Tokens::parse("# nothing\n").err().unwrap(),
            ["it names no token"]
        );
    }

    #[test]
    fn a_line_with_name_and_token_swapped_is_told_by_its_number_alone() {
        let problems = Tokens::parse(&format!("{ALICE} alice\n")).err().unwrap();
        assert_eq!(
            problems,
            [
                "line 1: the token (the second field) is guessable: shorter than 32 \
              characters; make one with `openssl rand -hex 32`"
            ]
        );
    }

    #[test]
    fn a_long_token_that_repeats_a_pattern_or_has_few_symbols_is_refused_as_guessable() {
        let refused = |token: &str| {
            let problems = Tokens::parse(&format!("alice {token}\n")).err().unwrap();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(!problems[0].contains(token), "{problems:?}");
            problems[0].clone()
        };
        assert!(refused(&"a".repeat(40)).contains("occurs in it twice"));
        assert!(refused(&"letmein!".repeat(5)).contains("occurs in it twice"));
        assert!(refused("passwordpasswordpassword12345678").contains("occurs in it twice"));
        assert!(refused("9f2c-abcdefghij-4e7b-a1d8-3c6f-0b5e").contains("run in sequence"));
        assert!(refused("x7q2-987654321-mz4k-p8w1-t5r3-b6n0").contains("run in sequence"));
        // Two symbols alone, no stretch of 8 twice: 48 bits over 48 characters.
        assert!(
            refused("xxxxxxxxzxxxxxxzzxxxxxzxzxxxxxzzzxxxxzxxzxxxxzxz").contains("fewer than 96")
        );
        // Tokens as `openssl rand -hex 16` and `-hex 32` make them.
        for token in [
            "8d0691e9221ea1527993c3bcee2eea3c",
            "3ca0875bdeffaf446be68bf45b3b0157",
            "83c55a336a024e1fbee424875e71a33da08316c1d1a060681bfee31ef0a9df28",
            ALICE,
            BOB,
        ] {
            assert!(Tokens::parse(&format!("a {token}\n")).is_ok(), "{token}");
        }
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
        let tokens = Tokens::parse(&format!("alice {ALICE}\n")).unwrap();
        let shown = format!("{tokens:?}");
        assert!(shown.contains("alice"));
        assert!(!shown.contains(&ALICE[..8]));
    }
}
