#!/usr/bin/env python3
"""Sums the symbol sizes of an unstripped binary (`nm -C -S`) by crate, the
first path component of each demangled name (docs/performance.md, issue 26).

Generic code is counted where its path starts (`core::ptr::drop_in_place<
jsonschema::...>` counts as core), and C code (SQLite, ring) and the
tokenizer tables have no Rust path: they are the `(C/other...)` rows.
Usage: scripts/size-by-crate.py BINARY [ROWS]"""
import re, subprocess, sys, collections
binary = sys.argv[1]
out = subprocess.run(["nm", "-C", "--size-sort", "-S", binary], capture_output=True, text=True).stdout
by = collections.Counter(); kinds = collections.Counter()
for line in out.splitlines():
    parts = line.split(" ", 3)
    if len(parts) < 4: continue
    size = int(parts[1], 16); kind = parts[2].lower(); name = parts[3]
    m = re.match(r"[<&\s_*]*(?:dyn |mut |const )*([A-Za-z_][A-Za-z0-9_]*)", name)
    crate = m.group(1) if m else "?"
    if "::" not in name and not name.startswith("<"): crate = "(C/other: " + ("sqlite3" if "sqlite" in name else "ring" if "ring_core" in name else "misc") + ")"
    by[(crate, "text" if kind == "t" else "data")] += size
tot = collections.Counter()
for (c, k), s in by.items(): tot[c] += s
print(f"{'crate':40} {'text':>10} {'data':>10} {'total':>10}")
for c, s in tot.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 40):
    print(f"{c:40} {by[(c,'text')]:>10,} {by[(c,'data')]:>10,} {s:>10,}")
print("sum", sum(tot.values()))
