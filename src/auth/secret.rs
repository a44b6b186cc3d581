//! Secrets the server hands out or keeps (random bytes from the operating system, by
//! `getrandom`: a made token, a sign-in code, a login cookie, a signing key), and digests
//! in hex.

/// 32 random bytes from the operating system.
pub(crate) fn random_key() -> Vec<u8> {
    let mut key = vec![0u8; 32];
    getrandom::fill(&mut key).expect("the operating system gives random bytes");
    key
}

/// 32 random bytes from the operating system, in lowercase hex: a secret to hand out (a
/// token, a sign-in code, a login cookie).
pub(crate) fn random_hex() -> String {
    hex(&random_key())
}

/// `bytes` in lowercase hex. A table of digit pairs, not a `format!` per byte: the audit
/// log writes two digests a row, inside the writer's transaction.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = vec![0; bytes.len() * 2];
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(*byte)]);
    }
    String::from_utf8(out).expect("hex digits are ASCII")
}

/// Lowercase hex of the SHA-256 of `bytes`: the digest the audit log and the record of a
/// written file keep.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex(&sha2::Sha256::digest(bytes))
}

/// The two lowercase hex digits of each byte.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        pairs[byte] = [DIGITS[byte >> 4], DIGITS[byte & 0x0f]];
        byte += 1;
    }
    pairs
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_64_hex_digits_and_never_the_same_twice() {
        let (one, two) = (random_hex(), random_hex());
        assert_eq!(one.len(), 64);
        assert!(
            one.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_ne!(one, two);
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }
}
