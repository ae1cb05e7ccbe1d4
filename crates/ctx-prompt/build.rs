//! Lays out, at compile time, the WHATWG named character references the
//! fence decoder reads (`src/fence/decode.rs`), as two sorted arrays of
//! `(name, value)` searched by binary search: `EXACT` (names without `&`
//! and `;`) and `FOLDED` (names lower-cased; the all-lower-case name wins
//! a clash, else the smallest). Built at run time, the two hash maps cost
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
    let mut out = String::new();
    let _ = writeln!(out, "/// The longest entity name, in bytes.");
    let _ = writeln!(out, "pub(super) const LONGEST: usize = {longest};");
    let _ = writeln!(out, "/// Every entity name (no `&`, no `;`) and its value, sorted by name.");
    let _ = writeln!(out, "pub(super) static EXACT: [(&str, &str); {}] = [", names.len());
    for (name, value) in &names {
        let _ = writeln!(out, "    ({name:?}, {value:?}),");
    }
    let _ = writeln!(out, "];");
    let _ = writeln!(out, "/// Lower-cased names and their values, sorted by name.");
    let _ = writeln!(out, "pub(super) static FOLDED: [(&str, &str); {}] = [", folded.len());
    for (name, value) in &folded {
        let _ = writeln!(out, "    ({name:?}, {value:?}),");
    }
    let _ = writeln!(out, "];");
    let dir = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let path = std::path::Path::new(&dir).join("entities.rs");
    std::fs::write(&path, out).expect("write entities.rs into OUT_DIR");
}
