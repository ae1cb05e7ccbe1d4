//! Lays out, at compile time, everything the exact counter reads at run
//! time, so that a fresh process counts its first token without building
//! anything:
//!
//! * per encoding, an open-addressing hash table `bytes -> rank`, the token
//!   bytes in rank order and their offsets (a base per 256 ranks and a
//!   16-bit delta per rank), written as little-endian files into `OUT_DIR`
//!   and embedded with `include_bytes!` (read-only data, mapped lazily by
//!   the OS, never copied), plus a direct table of the ranks of all byte
//!   pairs;
//! * the Unicode classes the pre-tokenizers test (`\p{L}`, `\p{N}`, `\s`,
//!   and o200k's upper/lower letter groups) as a two-level table;
//! * the characters that match a contraction letter case-insensitively.
//!
//! The ranks come from tiktoken-rs, the reference implementation, and the
//! classes from regex-syntax, the crate whose Unicode tables tiktoken-rs's
//! regex uses: the data cannot drift from the oracle the tests compare
//! against. Cost: about 2 s of build-script time (decoding ~350,000 ranks).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use regex_syntax::hir::{Class, HirKind};

#[path = "src/rank_hash.rs"]
mod rank_hash;

/// The ordinary (non-special) tokens of one encoding, indexed by rank.
/// `None` marks a rank that belongs to a special token or is unused.
fn ordinary_tokens(bpe: &tiktoken_rs::CoreBPE, max_rank: u32) -> Vec<Option<Vec<u8>>> {
    let specials: HashSet<Vec<u8>> = bpe
        .special_tokens()
        .into_iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    (0..=max_rank)
        .map(|rank| match bpe.decode_bytes(&[rank]) {
            Ok(bytes) if !specials.contains(&bytes) => Some(bytes),
            _ => None,
        })
        .collect()
}

fn write_le_u32(path: &Path, values: &[u32]) {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).expect("write table into OUT_DIR");
}

fn write_le_u16(path: &Path, values: &[u16]) {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).expect("write table into OUT_DIR");
}

/// Slots per token: a load factor of 0.625. Most lookups while merging
/// miss, and a miss ends at the first empty slot, so the load factor sets
/// the cost of a miss: about 4 slots read at 0.625 (linear probing's
/// `(1 + 1/(1 - a)^2) / 2`), contiguous, nearly always in one cache line.
/// The tables were at about 0.38 before (power-of-two sizes); at 0.625 they
/// are 1.3 MB smaller than at 0.38, with the same counting speed
/// (docs/performance.md, "Smaller tokenizer tables").
const SLOTS_PER_TOKEN_NUM: usize = 8;
const SLOTS_PER_TOKEN_DEN: usize = 5;

/// Ranks per entry of the offset base table: an offset is
/// `bases[rank / 256] + deltas[rank]`, two bytes per rank instead of four.
const OFFSET_GROUP: usize = 256;

/// In the byte-pair table, a pair that is no token.
const PAIR_NONE: u16 = u16::MAX;
/// In the byte-pair table, values from here up index the encoding's few
/// pair ranks that do not fit below it (`<name>.pairs_far`, `u32`): 613 of
/// cl100k's 3,830 two-byte tokens and 1,360 of o200k's 4,653. A direct
/// `u16` table is half the size of a `u32` one, and the side table keeps
/// every pair one read away.
const PAIR_FAR: u16 = 0xF000;

/// Writes `<name>.slots`, `.bases`, `.deltas`, `.bytes`, `.pairs` and
/// `.pairs_far`, and
/// returns the number of home slots (probes start in `0..size`; a probe
/// may run past it into the overflow tail the table carries).
fn write_rank_table(out: &Path, name: &str, tokens: &[Option<Vec<u8>>]) -> usize {
    let count = tokens.iter().filter(|t| t.is_some()).count();
    let size = (count * SLOTS_PER_TOKEN_NUM).div_ceil(SLOTS_PER_TOKEN_DEN);
    assert!(
        tokens.len() < (1 << rank_hash::RANK_BITS),
        "{name}: ranks exceed the slot layout"
    );

    let mut blob = Vec::new();
    let mut offsets = Vec::with_capacity(tokens.len() + 1);
    for token in tokens {
        offsets.push(u32::try_from(blob.len()).expect("token bytes fit in u32"));
        if let Some(bytes) = token {
            blob.extend_from_slice(bytes);
        }
    }
    offsets.push(u32::try_from(blob.len()).expect("token bytes fit in u32"));
    let bases: Vec<u32> = offsets.iter().step_by(OFFSET_GROUP).copied().collect();
    let deltas: Vec<u16> = offsets
        .iter()
        .enumerate()
        .map(|(i, &offset)| {
            u16::try_from(offset - bases[i / OFFSET_GROUP])
                .expect("a group of 256 tokens spans under 64 KiB")
        })
        .collect();

    // Linear probing without wrap-around: a probe that runs past the last
    // home slot continues into a tail that is as long as the longest run
    // needs, so the reader never wraps either (it stops at the first empty
    // slot, or at the end of the table, which reads as empty).
    let mut slots = vec![0u32; size];
    let mut seen = HashMap::new();
    for (rank, token) in tokens.iter().enumerate() {
        let Some(bytes) = token else { continue };
        assert!(!bytes.is_empty(), "{name}: empty token at rank {rank}");
        assert!(
            seen.insert(bytes.clone(), rank).is_none(),
            "{name}: duplicate token"
        );
        let hash = rank_hash::hash_bytes(bytes);
        let mut i = rank_hash::home_slot(hash, size);
        while slots.get(i).is_some_and(|&s| s != 0) {
            i += 1;
        }
        if i == slots.len() {
            slots.push(0);
        }
        slots[i] = rank_hash::tag_of(hash) | (rank as u32 + 1);
    }
    write_le_u32(&out.join(format!("{name}.slots")), &slots);
    // Every merge starts from byte pairs, so pairs get a direct table: one
    // read instead of a hash and a probe (128 KiB per encoding).
    let mut pairs = vec![PAIR_NONE; 1 << 16];
    let mut far = Vec::new();
    for (rank, token) in tokens.iter().enumerate() {
        if let Some(&[a, b]) = token.as_deref() {
            let rank = u32::try_from(rank).expect("ranks fit in u32");
            pairs[usize::from(a) << 8 | usize::from(b)] = match u16::try_from(rank) {
                Ok(near) if near < PAIR_FAR => near,
                _ => {
                    far.push(rank);
                    u16::try_from(far.len() - 1)
                        .ok()
                        .and_then(|i| PAIR_FAR.checked_add(i))
                        .filter(|&v| v < PAIR_NONE)
                        .expect("far pair ranks fit their index range")
                }
            };
        }
    }
    write_le_u16(&out.join(format!("{name}.pairs")), &pairs);
    write_le_u32(&out.join(format!("{name}.pairs_far")), &far);
    write_le_u32(&out.join(format!("{name}.bases")), &bases);
    write_le_u16(&out.join(format!("{name}.deltas")), &deltas);
    std::fs::write(out.join(format!("{name}.bytes")), blob).expect("write table into OUT_DIR");
    size
}

fn unicode_ranges(pattern: &str) -> Vec<(u32, u32)> {
    let hir = regex_syntax::parse(pattern).expect("class pattern parses");
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => class
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        HirKind::Literal(lit) => {
            let c = std::str::from_utf8(&lit.0)
                .expect("literal is UTF-8")
                .chars()
                .next();
            let c = c.expect("non-empty literal") as u32;
            vec![(c, c)]
        }
        other => panic!("unexpected HIR for {pattern}: {other:?}"),
    }
}

/// Class bits, one per set the pre-tokenizers test. Must match `CLASS_*`
/// in `src/pretokenize.rs`.
const CLASSES: [(&str, u8); 5] = [
    (r"\p{L}", 1),
    (r"\p{N}", 2),
    (r"\s", 4),
    (r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", 8),
    (r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]", 16),
];

fn write_class_tables(out: &Path) -> usize {
    let mut bits = vec![0u8; 0x11_0000];
    for (pattern, bit) in CLASSES {
        for (start, end) in unicode_ranges(pattern) {
            for cp in start..=end {
                bits[cp as usize] |= bit;
            }
        }
    }
    // Two levels: 256-code-point blocks, identical blocks stored once.
    let mut stage1 = Vec::with_capacity(0x1100);
    let mut blocks: Vec<&[u8]> = Vec::new();
    let mut index: HashMap<&[u8], u16> = HashMap::new();
    for block in bits.chunks(256) {
        let id = *index.entry(block).or_insert_with(|| {
            blocks.push(block);
            u16::try_from(blocks.len() - 1).expect("fewer than 65,536 blocks")
        });
        stage1.push(id);
    }
    let s1: Vec<u8> = stage1.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(out.join("class.stage1"), s1).expect("write class table");
    std::fs::write(out.join("class.stage2"), blocks.concat()).expect("write class table");
    blocks.len()
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/rank_hash.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));

    let cl100k = tiktoken_rs::cl100k_base().expect("tiktoken-rs builds cl100k_base");
    let o200k = tiktoken_rs::o200k_base().expect("tiktoken-rs builds o200k_base");
    let p50k = tiktoken_rs::p50k_base().expect("tiktoken-rs builds p50k_base");
    let r50k = tiktoken_rs::r50k_base().expect("tiktoken-rs builds r50k_base");

    let cl100k_tokens = ordinary_tokens(&cl100k, 100_300);
    let o200k_tokens = ordinary_tokens(&o200k, 200_100);
    let p50k_tokens = ordinary_tokens(&p50k, 50_300);
    let r50k_tokens = ordinary_tokens(&r50k, 50_300);

    // r50k_base is p50k_base without p50k's whitespace-run tokens, which all
    // rank above r50k's last one: one table serves both, r50k ignoring the
    // ranks past its own. Checked here rather than assumed.
    let r50k_limit = r50k_tokens
        .iter()
        .rposition(Option::is_some)
        .expect("r50k has tokens");
    for (rank, token) in p50k_tokens.iter().enumerate() {
        let expected = r50k_tokens.get(rank).cloned().flatten();
        if rank <= r50k_limit {
            assert_eq!(token, &expected, "r50k and p50k differ at rank {rank}");
        }
    }
    assert!(r50k_tokens[r50k_limit + 1..].iter().all(Option::is_none));

    let trim = |mut tokens: Vec<Option<Vec<u8>>>| {
        while tokens.last().is_some_and(Option::is_none) {
            tokens.pop();
        }
        tokens
    };
    let cl100k_tokens = trim(cl100k_tokens);
    let o200k_tokens = trim(o200k_tokens);
    let p50k_tokens = trim(p50k_tokens);

    let mut consts = String::new();
    for (name, tokens) in [
        ("cl100k", &cl100k_tokens),
        ("o200k", &o200k_tokens),
        ("p50k", &p50k_tokens),
    ] {
        let size = write_rank_table(&out, name, tokens);
        let upper = name.to_uppercase();
        writeln!(consts, "/// Home slots of the {name} table.").unwrap();
        writeln!(consts, "pub const {upper}_SIZE: usize = {size};").unwrap();
    }
    writeln!(
        consts,
        "/// The last rank r50k_base has (it shares p50k's table)."
    )
    .unwrap();
    writeln!(consts, "pub const R50K_LAST_RANK: u32 = {r50k_limit};").unwrap();
    let blocks = write_class_tables(&out);
    writeln!(consts, "/// Distinct 256-code-point class blocks.").unwrap();
    writeln!(consts, "pub const CLASS_BLOCKS: usize = {blocks};").unwrap();

    // Characters other than ASCII that `(?i:x)` matches for a contraction
    // letter x (regex's simple case folding: `ſ` for `s`, for example).
    let mut folds = Vec::new();
    for letter in ['s', 't', 'r', 'e', 'v', 'm', 'l', 'd'] {
        for (start, end) in unicode_ranges(&format!("(?i:{letter})")) {
            for cp in start..=end {
                if cp >= 0x80 {
                    folds.push((cp, letter));
                }
            }
        }
    }
    writeln!(
        consts,
        "/// Non-ASCII characters that fold to a contraction letter."
    )
    .unwrap();
    write!(consts, "pub const CONTRACTION_FOLDS: &[(char, u8)] = &[").unwrap();
    for (cp, letter) in folds {
        write!(consts, "('\\u{{{cp:x}}}', b'{letter}'), ").unwrap();
    }
    writeln!(consts, "];").unwrap();
    writeln!(consts, "/// A byte pair that is no token.").unwrap();
    writeln!(consts, "pub const PAIR_NONE: u16 = {PAIR_NONE};").unwrap();
    writeln!(
        consts,
        "/// Byte-pair values from here up index the far ranks."
    )
    .unwrap();
    writeln!(consts, "pub const PAIR_FAR: u16 = {PAIR_FAR};").unwrap();
    writeln!(consts, "/// Ranks per offset base.").unwrap();
    writeln!(consts, "pub const OFFSET_GROUP: usize = {OFFSET_GROUP};").unwrap();
    std::fs::write(out.join("tables.rs"), consts).expect("write tables.rs");
}
