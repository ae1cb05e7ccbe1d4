//! Static `bytes -> rank` tables, laid out by the build script.
//!
//! Each encoding's table is a few byte arrays in the binary's read-only
//! data: open-addressing slots (`tag | rank + 1`, little-endian `u32`), the
//! token bytes in rank order, each rank's offset into those bytes (a `u32`
//! base per 256 ranks plus a `u16` delta per rank), and the ranks of all
//! byte pairs (`u16`). Loading one is free: nothing is parsed, hashed or
//! copied, and the OS maps only the pages a lookup touches. That is what
//! makes the first exact count of a fresh process as cheap as the
//! thousandth.
//!
//! The layout is chosen for size as much as for speed: the four tables are
//! most of the `ctx` binary's read-only data, so every array holds the
//! narrowest integer that fits (docs/performance.md, "Smaller tokenizer
//! tables").

use crate::rank_hash::{RANK_MASK, hash_bytes, home_slot, tag_of};

mod generated {
    include!(concat!(env!("OUT_DIR"), "/tables.rs"));
}

pub(crate) use generated::{CLASS_BLOCKS, CONTRACTION_FOLDS};
use generated::{OFFSET_GROUP, PAIR_FAR, PAIR_NONE};

/// One encoding's `bytes -> rank` table.
pub(crate) struct RankTable {
    slots: &'static [u8],
    /// Offset of every 256th rank's bytes (`u32`).
    bases: &'static [u8],
    /// Offset of each rank's bytes from its group's base (`u16`).
    deltas: &'static [u8],
    bytes: &'static [u8],
    /// Rank of every two-byte token, indexed by `a << 8 | b` (`u16`;
    /// [`PAIR_NONE`] for no token, `PAIR_FAR + i` for `pairs_far[i]`).
    pairs: &'static [u8],
    /// The two-byte tokens' ranks from [`PAIR_FAR`] up (`u32`).
    pairs_far: &'static [u8],
    /// Home slots: a probe starts in `0..size` and may run on into the
    /// table's overflow tail.
    size: usize,
    /// Ranks above this one are not part of the encoding (r50k reads
    /// p50k's table, which has 24 more tokens).
    last_rank: u32,
}

impl RankTable {
    /// The `u32` at `index`, 0 past the end (which reads as an empty slot:
    /// the build script never places a token there).
    #[inline]
    fn u32_at(array: &[u8], index: usize) -> u32 {
        match array.get(index * 4..index * 4 + 4) {
            Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
            _ => 0,
        }
    }

    #[inline]
    fn u16_at(array: &[u8], index: usize) -> Option<u16> {
        match array.get(index * 2..index * 2 + 2) {
            Some(&[a, b]) => Some(u16::from_le_bytes([a, b])),
            _ => None,
        }
    }

    /// Where `rank`'s bytes start (`rank` may be one past the last, where
    /// the last token's bytes end).
    #[inline]
    fn offset(&self, rank: usize) -> usize {
        let base = Self::u32_at(self.bases, rank / OFFSET_GROUP) as usize;
        base + Self::u16_at(self.deltas, rank).map_or(0, usize::from)
    }

    /// The bytes of `rank`'s token (empty for an unused rank).
    #[inline]
    fn token(&self, rank: u32) -> &'static [u8] {
        let start = self.offset(rank as usize);
        let end = self.offset(rank as usize + 1);
        self.bytes.get(start..end).unwrap_or(&[])
    }

    /// The rank of the token whose bytes are `key`, if there is one.
    #[inline]
    pub(crate) fn rank(&self, key: &[u8]) -> Option<u32> {
        let hash = hash_bytes(key);
        let tag = tag_of(hash);
        let mut i = home_slot(hash, self.size);
        loop {
            let slot = Self::u32_at(self.slots, i);
            if slot == 0 {
                return None;
            }
            if slot & !RANK_MASK == tag {
                let rank = (slot & RANK_MASK) - 1;
                if self.token(rank) == key {
                    return (rank <= self.last_rank).then_some(rank);
                }
            }
            i += 1;
        }
    }

    /// The rank of the two-byte token `[a, b]`, if there is one.
    #[inline]
    pub(crate) fn pair_rank(&self, a: u8, b: u8) -> Option<u32> {
        let rank = match Self::u16_at(self.pairs, usize::from(a) << 8 | usize::from(b))? {
            PAIR_NONE => return None,
            near if near < PAIR_FAR => u32::from(near),
            far => Self::u32_at(self.pairs_far, usize::from(far - PAIR_FAR)),
        };
        (rank <= self.last_rank).then_some(rank)
    }

    /// The ranks the table can hold: those below the end of its offsets,
    /// and at or below `last_rank`.
    #[cfg(test)]
    fn ranks(&self) -> std::ops::Range<u32> {
        let stored = u32::try_from(self.deltas.len() / 2 - 1).unwrap_or(u32::MAX);
        0..stored.min(self.last_rank.saturating_add(1))
    }

    /// How many tokens the table holds at or below `last_rank`.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ranks().filter(|&r| !self.token(r).is_empty()).count()
    }

    /// Every (rank, bytes) pair, for tests.
    #[cfg(test)]
    pub(crate) fn tokens(&self) -> impl Iterator<Item = (u32, &'static [u8])> + '_ {
        self.ranks()
            .map(|r| (r, self.token(r)))
            .filter(|(_, t)| !t.is_empty())
    }
}

macro_rules! table_file {
    ($name:literal, $ext:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".", $ext))
    };
}

macro_rules! rank_table {
    ($name:literal, $size:expr, $last_rank:expr) => {
        RankTable {
            slots: table_file!($name, "slots"),
            bases: table_file!($name, "bases"),
            deltas: table_file!($name, "deltas"),
            bytes: table_file!($name, "bytes"),
            pairs: table_file!($name, "pairs"),
            pairs_far: table_file!($name, "pairs_far"),
            size: $size,
            last_rank: $last_rank,
        }
    };
}

/// `cl100k_base`.
pub(crate) static CL100K: RankTable = rank_table!("cl100k", generated::CL100K_SIZE, u32::MAX);

/// `o200k_base`, and `o200k_harmony`, whose ordinary tokens are the same.
pub(crate) static O200K: RankTable = rank_table!("o200k", generated::O200K_SIZE, u32::MAX);

/// `p50k_base`.
pub(crate) static P50K: RankTable = rank_table!("p50k", generated::P50K_SIZE, u32::MAX);

/// `r50k_base`: p50k's table without its last 24 tokens.
pub(crate) static R50K: RankTable =
    rank_table!("p50k", generated::P50K_SIZE, generated::R50K_LAST_RANK);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ordinary token of the reference maps to its own rank, and the
    /// tables hold nothing else.
    #[test]
    fn tables_equal_tiktoken_ranks() {
        let cases = [
            (&CL100K, tiktoken_rs::cl100k_base().unwrap()),
            (&O200K, tiktoken_rs::o200k_base().unwrap()),
            (&O200K, tiktoken_rs::o200k_harmony().unwrap()),
            (&P50K, tiktoken_rs::p50k_base().unwrap()),
            (&R50K, tiktoken_rs::r50k_base().unwrap()),
        ];
        for (table, bpe) in cases {
            let specials = bpe.special_tokens();
            let mut ordinary = 0;
            for rank in 0..202_000u32 {
                let Ok(bytes) = bpe.decode_bytes(&[rank]) else {
                    continue;
                };
                if std::str::from_utf8(&bytes).is_ok_and(|s| specials.contains(s)) {
                    continue;
                }
                ordinary += 1;
                assert_eq!(table.rank(&bytes), Some(rank), "rank {rank}");
            }
            assert_eq!(table.len(), ordinary);
            for (rank, bytes) in table.tokens().take(1000) {
                assert_eq!(bpe.decode_bytes(&[rank]).unwrap(), bytes);
            }
        }
        // The direct pair table agrees with the hash table on every pair.
        for table in [&CL100K, &O200K, &P50K, &R50K] {
            for a in 0..=255u8 {
                for b in 0..=255u8 {
                    assert_eq!(table.pair_rank(a, b), table.rank(&[a, b]));
                }
            }
        }
        assert_eq!(
            R50K.rank(b"  "),
            None,
            "p50k's whitespace tokens are not r50k's"
        );
        assert!(P50K.rank(b"  ").is_some());
    }
}
