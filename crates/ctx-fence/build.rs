//! Lays out, at compile time, the WHATWG named character references the
//! fence decoder reads (`src/decode.rs`), as two sorted arrays of
//! `(name, value)` spans of one string, searched by binary search: `EXACT`
//! (names without `&` and `;`) and `FOLDED` (names lower-cased; the
//! all-lower-case name wins a clash, else the smallest). Built at run time, the two hash maps cost
//! about 0.5 ms the first time a `&` appeared in a neutralized text (most
//! `ctx history` and `ctx render` calls); as static data they cost
//! nothing, and htmlize's own map is no longer linked into the binary.
//!
//! The names come from htmlize's copy of `entities.json`, the crate that
//! read them at run time before, so the decoding is the same.

use std::collections::BTreeMap;
use std::fmt::Write as _;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let mut names: Vec<(&'static str, &'static str)> = htmlize::ENTITIES
        .entries()
        .filter_map(|(k, v)| {
            let name = std::str::from_utf8(k).ok()?;
            let name = name.strip_prefix('&')?;
            let name = name.strip_suffix(';').unwrap_or(name);
            Some((name, std::str::from_utf8(v).ok()?))
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut folded: BTreeMap<String, &str> = BTreeMap::new();
    let mut longest = 0;
    for &(name, value) in &names {
        longest = longest.max(name.len());
        let lower = name.to_ascii_lowercase();
        let canonical = lower == name;
        if canonical || !folded.contains_key(&lower) {
            folded.insert(lower, value);
        }
    }
    // A name that names two values (with and without `;`) keeps its first,
    // as the run-time map's `insert` kept the last of equal keys: check
    // there is none, so the order cannot matter.
    for pair in names.windows(2) {
        assert!(
            pair[0].0 != pair[1].0,
            "entity `{}` has two values",
            pair[0].0
        );
    }
    // One string holds every name and value; the tables hold (offset,
    // length) pairs packed in a u32 (offset << 8 | length), not pointers:
    // a pointer in a static costs the dynamic loader one relocation at
    // every start of `ctx`, and these tables would have added ~17,000.
    let mut blob = String::new();
    let mut spans: BTreeMap<String, u32> = BTreeMap::new();
    let mut span = |text: &str, blob: &mut String| -> u32 {
        if let Some(&at) = spans.get(text) {
            return at;
        }
        let offset = u32::try_from(blob.len()).expect("entity blob fits in u32");
        let len = u32::try_from(text.len()).expect("entity text fits in u32");
        assert!(
            offset < 1 << 24 && len < 1 << 8,
            "entity `{text}` does not fit the packing"
        );
        blob.push_str(text);
        let packed = offset << 8 | len;
        spans.insert(text.to_string(), packed);
        packed
    };
    let exact: Vec<[u32; 2]> = names
        .iter()
        .map(|(name, value)| [span(name, &mut blob), span(value, &mut blob)])
        .collect();
    let folded_spans: Vec<[u32; 2]> = folded
        .iter()
        .map(|(name, value)| [span(name, &mut blob), span(value, &mut blob)])
        .collect();
    let mut out = String::new();
    let _ = writeln!(out, "/// The longest entity name, in bytes.");
    let _ = writeln!(out, "pub(super) const LONGEST: usize = {longest};");
    let _ = writeln!(
        out,
        "/// Every name and value, spelled once; the tables point into it."
    );
    let _ = writeln!(out, "pub(super) const TEXT: &str = {blob:?};");
    let _ = writeln!(
        out,
        "/// Every entity name (no `&`, no `;`) and its value as packed spans of TEXT, sorted by name."
    );
    let _ = writeln!(
        out,
        "pub(super) static EXACT: [[u32; 2]; {}] = {exact:?};",
        exact.len()
    );
    let _ = writeln!(
        out,
        "/// Lower-cased names and their values as packed spans of TEXT, sorted by name."
    );
    let _ = writeln!(
        out,
        "pub(super) static FOLDED: [[u32; 2]; {}] = {folded_spans:?};",
        folded_spans.len()
    );
    let dir = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let path = std::path::Path::new(&dir).join("entities.rs");
    std::fs::write(&path, out).expect("write entities.rs into OUT_DIR");
}
