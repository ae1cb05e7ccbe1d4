//! The hash that places a token's bytes in the static rank tables.
//!
//! This file is compiled twice: into the build script, which lays the
//! tables out, and into the library, which probes them. One definition for
//! both is what makes a table built at compile time readable at run time
//! without any work: a change here changes both sides at once.

/// Bits of a table slot that hold `rank + 1` (0 marks an empty slot).
/// 2^18 = 262,144 covers every encoding ctx ships (o200k has 200,000 ranks).
pub const RANK_BITS: u32 = 18;

/// Mask of the rank part of a slot.
pub const RANK_MASK: u32 = (1 << RANK_BITS) - 1;

/// A multiplier with well-spread bits (the 64-bit golden ratio).
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// Hashes a token's bytes. The top bits choose the slot, the low bits give
/// the tag stored beside the rank, so most probes that miss are rejected
/// without touching the token bytes.
#[inline]
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    // Final avalanche (from splitmix64), so both ends of `h` are well mixed.
    h ^= h >> 31;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^ (h >> 29)
}

/// The tag a slot stores for `hash`: the bits above the rank.
#[inline]
pub fn tag_of(hash: u64) -> u32 {
    (hash as u32) & !RANK_MASK
}

/// The slot where a probe for `hash` starts in a table of `size` slots:
/// the high 32 bits of the hash scaled to `size` (Lemire's multiply-shift
/// range reduction). Any size works, not only powers of two, so a table's
/// load factor is chosen for speed and size rather than rounded to the next
/// power of two (which left every table at a load of about 0.38). The
/// tag ([`tag_of`]) comes from the low bits, so slot and tag are
/// independent.
#[inline]
pub fn home_slot(hash: u64, size: usize) -> usize {
    (((hash >> 32) * size as u64) >> 32) as usize
}
