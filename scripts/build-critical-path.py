#!/usr/bin/env python3
"""Critical path and slowest units of a cargo --timings HTML report.

A unit's duration under load is inflated by waiting for a core; the
critical path here is the longest chain of unit *durations* along the
dependency edges (unblocked_units), i.e. what a machine with enough idle
cores would still have to do in sequence."""
import json, re, sys
html = open(sys.argv[1]).read()
m = re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S)
units = json.loads(m.group(1))
by = {u["i"]: u for u in units}
preds = {u["i"]: [] for u in units}
for u in units:
    for d in u.get("unblocked_units", []) + u.get("unblocked_rmeta_units", []):
        preds[d].append(u["i"])
memo = {}
def longest(i):
    if i in memo: return memo[i]
    best = (0.0, [])
    for p in preds[i]:
        c = longest(p)
        if c[0] > best[0]: best = c
    memo[i] = (best[0] + by[i]["duration"], best[1] + [i])
    return memo[i]
end = max(by, key=lambda i: longest(i)[0])
total, path = longest(end)
name = lambda u: f'{u["name"]} {u.get("target","").strip()}'.strip()
print(f"sum of unit durations {sum(u['duration'] for u in units):.0f} s over {len(units)} units; critical path {total:.0f} s:")
for i in path:
    u = by[i]
    print(f'  {u["duration"]:7.1f} s  {name(u)}')
print("slowest units:")
for u in sorted(units, key=lambda u: -u["duration"])[:15]:
    print(f'  {u["duration"]:7.1f} s  {name(u)}  (codegen {u.get("rmeta_time") and u["duration"]-u["rmeta_time"] or 0:.1f} s)')
