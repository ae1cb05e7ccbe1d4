//! Static `bytes -> rank` tables, laid out by the build script.
//!
//! Each encoding's table is three byte arrays in the binary's read-only
//! data: open-addressing slots (`tag | rank + 1`, little-endian `u32`), the
//! token bytes in rank order, and each rank's offset into those bytes.
//! Loading one is free: nothing is parsed, hashed or copied, and the OS maps
//! only the pages a lookup touches. That is what makes the first exact count
//! of a fresh process as cheap as the thousandth.

use crate::rank_hash::{hash_bytes, tag_of, RANK_MASK};

mod generated {
    include!(concat!(env!("OUT_DIR"), "/tables.rs"));
}

pub(crate) use generated::{CLASS_BLOCKS, CONTRACTION_FOLDS};

/// One encoding's `bytes -> rank` table.
pub(crate) struct RankTable {
    slots: &'static [u8],
    offsets: &'static [u8],
    bytes: &'static [u8],
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
        bits: u32,
        last_rank: u32,
    ) -> RankTable {
        RankTable {
            slots,
            offsets,
            bytes,
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
    generated::CL100K_BITS,
    u32::MAX,
);

/// `o200k_base`, and `o200k_harmony`, whose ordinary tokens are the same.
pub(crate) static O200K: RankTable = RankTable::new(
    table_file!("o200k", "slots"),
    table_file!("o200k", "offsets"),
    table_file!("o200k", "bytes"),
    generated::O200K_BITS,
    u32::MAX,
);

/// `p50k_base`.
pub(crate) static P50K: RankTable = RankTable::new(
    table_file!("p50k", "slots"),
    table_file!("p50k", "offsets"),
    table_file!("p50k", "bytes"),
    generated::P50K_BITS,
    u32::MAX,
);

/// `r50k_base`: p50k's table without its last 24 tokens.
pub(crate) static R50K: RankTable = RankTable::new(
    table_file!("p50k", "slots"),
    table_file!("p50k", "offsets"),
    table_file!("p50k", "bytes"),
    generated::P50K_BITS,
    generated::R50K_LAST_RANK,
);
