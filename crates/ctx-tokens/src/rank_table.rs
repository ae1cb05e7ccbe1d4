//! Static `bytes -> rank` tables, laid out by the build script.
//!
//! Each encoding's table is three byte arrays in the binary's read-only
//! data: open-addressing slots (`tag | rank + 1`, little-endian `u32`), the
//! token bytes in rank order, and each rank's offset into those bytes.
//! Loading one is free: nothing is parsed, hashed or copied, and the OS maps
//! only the pages a lookup touches. That is what makes the first exact count
//! of a fresh process as cheap as the thousandth.

use crate::rank_hash::{RANK_MASK, hash_bytes, tag_of};

mod generated {
    include!(concat!(env!("OUT_DIR"), "/tables.rs"));
}

pub(crate) use generated::{CLASS_BLOCKS, CONTRACTION_FOLDS};

/// One encoding's `bytes -> rank` table.
pub(crate) struct RankTable {
    slots: &'static [u8],
    offsets: &'static [u8],
    bytes: &'static [u8],
    /// Rank of every two-byte token, indexed by `a << 8 | b`.
    pairs: &'static [u8],
    shift: u32,
    mask: usize,
    /// Ranks above this one are not part of the encoding (r50k reads
    /// p50k's table, which has 24 more tokens).
    last_rank: u32,
}

impl RankTable {
    const fn new(
        slots: &'static [u8],
        offsets: &'static [u8],
        bytes: &'static [u8],
        pairs: &'static [u8],
        bits: u32,
        last_rank: u32,
    ) -> RankTable {
        RankTable {
            slots,
            offsets,
            bytes,
            pairs,
            shift: 64 - bits,
            mask: (1usize << bits) - 1,
            last_rank,
        }
    }

    #[inline]
    fn u32_at(array: &[u8], index: usize) -> u32 {
        match array.get(index * 4..index * 4 + 4) {
            Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
            _ => 0,
        }
    }

    /// The bytes of `rank`'s token (empty for an unused rank).
    #[inline]
    fn token(&self, rank: u32) -> &'static [u8] {
        let start = Self::u32_at(self.offsets, rank as usize) as usize;
        let end = Self::u32_at(self.offsets, rank as usize + 1) as usize;
        self.bytes.get(start..end).unwrap_or(&[])
    }

    /// The rank of the token whose bytes are `key`, if there is one.
    #[inline]
    pub(crate) fn rank(&self, key: &[u8]) -> Option<u32> {
        let hash = hash_bytes(key);
        let tag = tag_of(hash);
        let mut i = (hash >> self.shift) as usize;
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
            i = (i + 1) & self.mask;
        }
    }

    /// The rank of the two-byte token `[a, b]`, if there is one.
    #[inline]
    pub(crate) fn pair_rank(&self, a: u8, b: u8) -> Option<u32> {
        let rank = Self::u32_at(self.pairs, usize::from(a) << 8 | usize::from(b));
        (rank <= self.last_rank && rank != u32::MAX).then_some(rank)
    }

    /// How many tokens the table holds at or below `last_rank`.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        (0..=self.last_rank)
            .filter(|&r| !self.token(r).is_empty())
            .count()
    }

    /// Every (rank, bytes) pair, for tests.
    #[cfg(test)]
    pub(crate) fn tokens(&self) -> impl Iterator<Item = (u32, &'static [u8])> + '_ {
        (0..=self.last_rank)
            .map(|r| (r, self.token(r)))
            .filter(|(_, t)| !t.is_empty())
    }
}

macro_rules! table_file {
    ($name:literal, $ext:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".", $ext))
    };
}

/// `cl100k_base`.
pub(crate) static CL100K: RankTable = RankTable::new(
    table_file!("cl100k", "slots"),
    table_file!("cl100k", "offsets"),
    table_file!("cl100k", "bytes"),
    table_file!("cl100k", "pairs"),
    generated::CL100K_BITS,
    u32::MAX,
);

/// `o200k_base`, and `o200k_harmony`, whose ordinary tokens are the same.
pub(crate) static O200K: RankTable = RankTable::new(
    table_file!("o200k", "slots"),
    table_file!("o200k", "offsets"),
    table_file!("o200k", "bytes"),
    table_file!("o200k", "pairs"),
    generated::O200K_BITS,
    u32::MAX,
);

/// `p50k_base`.
pub(crate) static P50K: RankTable = RankTable::new(
    table_file!("p50k", "slots"),
    table_file!("p50k", "offsets"),
    table_file!("p50k", "bytes"),
    table_file!("p50k", "pairs"),
    generated::P50K_BITS,
    u32::MAX,
);

/// `r50k_base`: p50k's table without its last 24 tokens.
pub(crate) static R50K: RankTable = RankTable::new(
    table_file!("p50k", "slots"),
    table_file!("p50k", "offsets"),
    table_file!("p50k", "bytes"),
    table_file!("p50k", "pairs"),
    generated::P50K_BITS,
    generated::R50K_LAST_RANK,
);

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
