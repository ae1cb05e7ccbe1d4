#!/usr/bin/env python3
"""Counts the relative relocations the dynamic loader applies at every start
of a position-independent binary, by where each one lies and where it points
(docs/performance.md, issue 26: `ctx --version` spent about half of its
instructions in `_dl_relocate_object`).

Each relative relocation is one pointer stored in the binary's data (a
`&str` or `&[T]` in a static table, a vtable entry, a function pointer)
that the loader patches with the load address. The script decodes the
packed `.relr.dyn` table (DT_RELR) and any `R_X86_64_RELATIVE` entries of
`.rela.dyn`, then names, for each relocated address, the symbol that holds
it (`nm -C -S`: a static table, a vtable) and the symbol it points to (read
from the file: the implicit addend), and sums them by crate, the first
path component of the demangled name, as scripts/size-by-crate.py does.
Unnamed data (`anon.*` constants, string literals) is counted by section.

Usage: scripts/relocs-by-crate.py BINARY [ROWS]
(an unstripped build, such as target/release/ctx)."""
import bisect
import collections
import re
import struct
import subprocess
import sys


def sections(data):
    """(name, addr, offset, size, type, entsize) of every section header."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    raw = []
    for i in range(shnum):
        name, typ, _flags, addr, off, size, _link, _info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize)
        raw.append((name, addr, off, size, typ, entsize))
    strtab_off = raw[shstrndx][2]

    def name_of(n):
        end = data.index(b"\0", strtab_off + n)
        return data[strtab_off + n:end].decode()

    return [(name_of(n), a, o, s, t, e) for (n, a, o, s, t, e) in raw]


def relr_addresses(data, off, size):
    """The addresses a DT_RELR table relocates: an even entry is an
    address, an odd one a bitmap of the 63 words after the last."""
    out = []
    where = 0
    for i in range(size // 8):
        entry, = struct.unpack_from("<Q", data, off + i * 8)
        if entry & 1 == 0:
            out.append(entry)
            where = entry + 8
        else:
            bits = entry >> 1
            for k in range(63):
                if bits & (1 << k):
                    out.append(where + 8 * k)
            where += 63 * 8
    return out


def rela_relative(data, off, size):
    out = []
    for i in range(size // 24):
        r_off, r_info, addend = struct.unpack_from("<QQq", data, off + i * 24)
        if r_info & 0xFFFFFFFF == 8:  # R_X86_64_RELATIVE
            out.append((r_off, addend))
    return out


def crate_of(name):
    if "::" not in name and not name.startswith("<"):
        return "(C/other)"
    m = re.match(r"[<&\s_*]*(?:dyn |mut |const )*([A-Za-z_][A-Za-z0-9_]*)", name)
    return m.group(1) if m else "?"


def main():
    binary = sys.argv[1]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    data = open(binary, "rb").read()
    secs = sections(data)
    relocs = []  # (address, target)
    for name, addr, off, size, typ, _ in secs:
        if name == ".relr.dyn" or typ == 19:  # SHT_RELR
            for a in relr_addresses(data, off, size):
                relocs.append((a, None))
        elif name == ".rela.dyn":
            relocs.extend(rela_relative(data, off, size))
    loaded = [(a, o, s, n) for (n, a, o, s, t, _) in secs if a and t != 8]  # not NOBITS

    def read_pointer(addr):
        for a, o, s, _ in loaded:
            if a <= addr < a + s:
                return struct.unpack_from("<Q", data, o + addr - a)[0]
        return None

    def section_of(addr):
        for n, a, _o, s, _t, _e in secs:
            if a and a <= addr < a + s:
                return n
        return "?"

    nm = subprocess.run(["nm", "-C", "-S", "--defined-only", binary],
                        capture_output=True, text=True).stdout
    syms = []
    for line in nm.splitlines():
        m = re.match(r"([0-9a-f]+) ([0-9a-f]+) \S (.*)$", line)
        if m:  # symbols without a size are skipped
            syms.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3)))
    syms.sort()
    starts = [s[0] for s in syms]

    def symbol_at(addr):
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0 and syms[i][0] <= addr < syms[i][0] + max(syms[i][1], 1):
            return syms[i][2]
        return None

    def label(addr):
        name = symbol_at(addr)
        if name is None:
            return ("(unnamed " + section_of(addr) + ")", "(unnamed " + section_of(addr) + ")")
        if name.startswith("anon."):
            return ("(anon " + section_of(addr) + ")", name)
        return (crate_of(name), name)

    def source_crate(target):
        """The crate of a source path a pointer points to (the `file` of a
        panic location, `core::panic::Location`), or None."""
        for a, o, sz, n in loaded:
            if a <= target < a + sz:
                raw = data[o + target - a:o + target - a + 160]
                break
        else:
            return None
        m = re.match(rb"/rustc/[0-9a-f]+/library/([a-z_]+)/", raw)
        if m:
            return m.group(1).decode()
        m = re.match(rb"(?:/[^\0]*?)?/(?:registry/src/[^/]+|git/checkouts/[^/]+)/([A-Za-z0-9_.-]+?)-\d+\.\d+[^/]*/", raw)
        if m:
            return m.group(1).decode()
        m = re.match(rb"crates/([A-Za-z0-9_-]+)/", raw)
        if m:
            return m.group(1).decode()
        return None

    by_kind = collections.Counter()
    by_holder = collections.Counter()
    by_holder_sym = collections.Counter()
    by_target = collections.Counter()
    by_section = collections.Counter()
    for addr, addend in relocs:
        target = addend if addend is not None else read_pointer(addr)
        crate, name = label(addr)
        by_holder[crate] += 1
        by_holder_sym[name] += 1
        by_section[section_of(addr)] += 1
        if target is not None:
            crate_of_target = label(target)[0]
            by_target[crate_of_target] += 1
            src = source_crate(target) if crate_of_target.startswith("(") else None
            if src:
                by_kind["source path (panic location) of " + src] += 1
            elif not crate_of_target.startswith("("):
                by_kind["function or named data of " + crate_of_target] += 1
            else:
                by_kind["other unnamed data in " + crate_of_target] += 1

    print(f"{len(relocs):,} relative relocations\n")
    print("by section relocated:")
    for n, c in by_section.most_common():
        print(f"  {c:>9,}  {n}")
    print("\nby crate of the symbol that holds the pointer:")
    for n, c in by_holder.most_common(rows):
        print(f"  {c:>9,}  {n}")
    print("\nby symbol that holds the pointers:")
    for n, c in by_holder_sym.most_common(rows):
        print(f"  {c:>9,}  {n[:150]}")
    print("\nby what the pointer points to (a source path: a panic location's file):")
    for n, c in by_kind.most_common(rows):
        print(f"  {c:>9,}  {n}")
    print("\nby crate of what the pointer points to:")
    for n, c in by_target.most_common(rows):
        print(f"  {c:>9,}  {n}")

    # Unnamed tables: runs of relocated addresses at most 32 bytes apart,
    # with what their first pointers point to (a string's first bytes, a
    # function's name), which usually says whose table it is.
    def preview(target):
        if target is None:
            return "?"
        name = symbol_at(target)
        if name and not name.startswith("anon."):
            return name[:60]
        raw = b""
        for a, o, sz, n in loaded:
            if a <= target < a + sz:
                raw = data[o + target - a:o + target - a + 24]
        text = raw.split(b"\0")[0].decode("utf-8", "replace")
        return repr(text) if text.isprintable() and text else "(" + section_of(target) + ")"

    runs = []
    ordered = sorted(relocs)
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i][0] - ordered[i - 1][0] > 32:
            runs.append(ordered[start:i])
            start = i
    runs.sort(key=len, reverse=True)
    print("\nlargest runs of pointers (tables), with their holder and first targets:")
    for run in runs[:rows]:
        addr = run[0][0]
        samples = []
        for a, addend in run[:3]:
            samples.append(preview(addend if addend is not None else read_pointer(a)))
        print(f"  {len(run):>9,}  {addr:#x} {label(addr)[1][:60]}: " + ", ".join(samples))


if __name__ == "__main__":
    main()
