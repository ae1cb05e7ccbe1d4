//! Byte-pair merging of one piece, counting the tokens it ends with.
//!
//! The rule is tiktoken's: a piece that is itself a token costs one;
//! otherwise start from single bytes and repeatedly merge the adjacent pair
//! whose concatenation has the lowest rank, the leftmost on a tie, until no
//! pair is a token. Short pieces (nearly all of them) use tiktoken's own
//! quadratic scan over a small array, which is fastest at that size. Long
//! pieces (a megabyte without a space, a run of one character) use a heap
//! of candidate merges keyed by (rank, position), so the work stays
//! `O(n log n)` however the input was made: same rule, same result.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::rank_table::RankTable;

/// Pieces up to this many bytes use the array scan.
const SMALL: usize = 128;

/// How many tokens `piece` becomes under `table`.
#[inline]
pub(crate) fn count_piece(table: &RankTable, piece: &[u8]) -> usize {
    if piece.len() <= 1 {
        return piece.len();
    }
    if table.rank(piece).is_some() {
        return 1;
    }
    if piece.len() <= SMALL {
        count_small(table, piece)
    } else {
        count_large(table, piece)
    }
}

fn count_small(table: &RankTable, piece: &[u8]) -> usize {
    // parts[k] = (start of part k, rank of merging part k with part k+1).
    let mut parts = [(0usize, u32::MAX); SMALL + 1];
    let n = piece.len();
    for (i, part) in parts.iter_mut().enumerate().take(n) {
        let rank = if i + 2 <= n {
            table.pair_rank(piece[i], piece[i + 1]).unwrap_or(u32::MAX)
        } else {
            u32::MAX
        };
        *part = (i, rank);
    }
    parts[n] = (n, u32::MAX);
    let mut len = n + 1; // part starts plus the end sentinel
    let rank_of = |parts: &[(usize, u32)], len: usize, k: usize| -> u32 {
        // Merging part k with part k+1 after the pending removal of k+1:
        // the bytes run from part k's start to part k+3's start.
        if k + 3 < len {
            table
                .rank(&piece[parts[k].0..parts[k + 3].0])
                .unwrap_or(u32::MAX)
        } else {
            u32::MAX
        }
    };
    loop {
        let mut best = (u32::MAX, 0);
        for (k, &(_, rank)) in parts[..len - 1].iter().enumerate() {
            if rank < best.0 {
                best = (rank, k);
            }
        }
        if best.0 == u32::MAX {
            break;
        }
        let k = best.1;
        if k > 0 {
            parts[k - 1].1 = rank_of(&parts, len, k - 1);
        }
        parts[k].1 = rank_of(&parts, len, k);
        parts.copy_within(k + 2..len, k + 1);
        len -= 1;
    }
    len - 1
}

fn count_large(table: &RankTable, piece: &[u8]) -> usize {
    let n = piece.len();
    // Positions fit in 32 bits, ranks in 32 bits: a heap entry is one u64,
    // `rank << 32 | start`, so the smallest entry is the lowest rank and,
    // on a tie, the leftmost pair: tiktoken's rule.
    const DEAD: u32 = u32::MAX;
    let Ok(n32) = u32::try_from(n) else {
        // A piece of 4 GiB or more: the byte bound, which never
        // undercounts, rather than a panic.
        return n;
    };
    // end[s]: end of the part starting at s (DEAD if s starts none).
    // prev[s]: start of the part before it. pair[s]: rank of merging the
    // part at s with the next one, u32::MAX if that is no token; a heap
    // entry whose rank is not `pair[start]` any more is stale.
    let mut end: Vec<u32> = (1..=n32).collect();
    let mut prev: Vec<u32> = (0..n32).map(|s| s.wrapping_sub(1)).collect();
    let mut pair = vec![u32::MAX; n];
    let mut heap = BinaryHeap::with_capacity(n);
    for s in 0..n - 1 {
        if let Some(rank) = table.pair_rank(piece[s], piece[s + 1]) {
            pair[s] = rank;
            heap.push(Reverse((u64::from(rank) << 32) | s as u64));
        }
    }
    let mut parts = n;
    let set_pair =
        |pair: &mut Vec<u32>, heap: &mut BinaryHeap<Reverse<u64>>, s: usize, e: usize| {
            let rank = table.rank(&piece[s..e]).unwrap_or(u32::MAX);
            pair[s] = rank;
            if rank != u32::MAX {
                heap.push(Reverse((u64::from(rank) << 32) | s as u64));
            }
        };
    while let Some(Reverse(entry)) = heap.pop() {
        let rank = (entry >> 32) as u32;
        let s = (entry & 0xFFFF_FFFF) as usize;
        if end[s] == DEAD || pair[s] != rank {
            continue;
        }
        let mid = end[s] as usize;
        let pair_end = end[mid] as usize;
        end[s] = pair_end as u32;
        end[mid] = DEAD;
        pair[mid] = u32::MAX;
        parts -= 1;
        if pair_end < n {
            prev[pair_end] = s as u32;
            let next_end = end[pair_end] as usize;
            set_pair(&mut pair, &mut heap, s, next_end);
        } else {
            pair[s] = u32::MAX;
        }
        if s > 0 {
            let p = prev[s] as usize;
            set_pair(&mut pair, &mut heap, p, pair_end);
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rank_table::CL100K;

    #[test]
    fn small_and_large_agree() {
        // The two paths implement one rule; check them on the same pieces.
        let pieces: [&[u8]; 5] = [
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            b"unbelievablyuncharacteristicallyantidisestablishmentarianism",
            b"                                                   ",
            b"0123456789abcdefghijklmnopqrstuvwxyz!@#$%^&*()_+-=",
            "日本語のテキストを数える".as_bytes(),
        ];
        for piece in pieces {
            assert_eq!(
                count_small(&CL100K, piece),
                count_large(&CL100K, piece),
                "{piece:?}"
            );
        }
    }
}
