#!/usr/bin/env python3
"""Critical path and slowest units of a cargo --timings HTML report
(docs/performance.md, issue 26).

Usage: scripts/build-critical-path.py target/cargo-timings/cargo-timing.html [CPU_SECONDS [JOBS]]

The chain printed is the longest sum of unit durations along the edges the
report records: for each unit, the units it was the last dependency of to
finish (`unblocked_units`, `unblocked_rmeta_units`). On a loaded machine
every duration includes waiting for a core, so compare chains, not seconds,
across machines.

With CPU_SECONDS (the build's user + system time from `/usr/bin/time -v`),
it also scales every unit's duration to its share of that CPU and replays
the unit graph on JOBS idle cores (default 2), longest remaining chain
first, as cargo orders its queue: what the same build would take on a quiet
machine, from a measurement on a loaded one."""
import heapq, json, re, sys
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
    codegen = sum(
        part["end"] - part["start"] for kind, part in (u.get("sections") or []) if kind == "codegen"
    )
    print(f'  {u["duration"]:7.1f} s  {name(u)}  (codegen {codegen:.1f} s)')

if len(sys.argv) > 2:
    cpu = float(sys.argv[2])
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    scale = cpu / sum(u["duration"] for u in units)
    succ = {i: [] for i in by}
    for d, ps in preds.items():
        for p in ps:
            succ[p].append(d)
    def remaining_chain(i, memo={}):
        if i not in memo:
            memo[i] = by[i]["duration"] * scale + max((remaining_chain(s) for s in succ[i]), default=0.0)
        return memo[i]
    sys.setrecursionlimit(100000)
    waiting = {i: len(preds[i]) for i in by}
    ready = [(-remaining_chain(i), i) for i in by if waiting[i] == 0]
    heapq.heapify(ready)
    running, now = [], 0.0
    while ready or running:
        while ready and len(running) < jobs:
            _, i = heapq.heappop(ready)
            heapq.heappush(running, (now + by[i]["duration"] * scale, i))
        now, i = heapq.heappop(running)
        for s in succ[i]:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(ready, (-remaining_chain(s), s))
    print(f"{cpu:.0f} CPU-s on {jobs} idle cores, replayed from the unit graph: {now:.0f} s")
