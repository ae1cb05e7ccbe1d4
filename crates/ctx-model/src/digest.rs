//! The one hex digest of ctx: lower-case hex SHA-256, of bytes
//! ([`sha256_hex`]) or of several fields framed by their lengths
//! ([`sha256_fields`]). Plan hashes, prompt hashes, cache keys, a secret's
//! stored hash and the engine's label of a system prompt are all written
//! with it, so a hash printed by one command can be compared by eye, or by
//! a script, with a hash stored by another.
//!
//! It lives in the vocabulary because both seams and the engine adapters
//! need it, and none of them may depend on another's crate.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256 of `bytes`.
///
/// ```
/// assert_eq!(
///     ctx_model::digest::sha256_hex(b"abc"),
///     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
/// );
/// ```
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// SHA-256 over several fields, each prefixed by its length (8 bytes,
/// little-endian), so that `("ab", "c")` and `("a", "bc")` differ.
pub fn sha256_fields(fields: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for f in fields {
        h.update((f.len() as u64).to_le_bytes());
        h.update(f);
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_framed_by_their_lengths() {
        assert_ne!(sha256_fields(&[b"ab", b"c"]), sha256_fields(&[b"a", b"bc"]));
        assert_eq!(sha256_fields(&[b"ab"]), sha256_fields(&[b"ab"]));
        assert_eq!(sha256_hex(b"").len(), 64);
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
