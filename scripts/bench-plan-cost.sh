#!/usr/bin/env bash
# Times `ctx plan cost` (whole process) on the 2,000-task benchmark plan of
# `cargo xtask bench-plan` (crates/ctx-deps/benches/schedule.rs): the same
# splitmix64 generator and seed, written out as JSON. That plan names no
# model and no max_tokens, so the run passes --model gpt-4o-mini
# --max-tokens 1000 (every task bounded and priced). Figures go in
# docs/cost.md and docs/performance.md.
#
#   scripts/bench-plan-cost.sh            # 2,000 tasks, 5 runs
#   scripts/bench-plan-cost.sh 8000 3     # 8,000 tasks, 3 runs
#
# Builds the release binary; delete target/release afterwards if disk is
# short.
set -euo pipefail
cd "$(dirname "$0")/.."
tasks="${1:-2000}"
runs="${2:-5}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
python3 - "$tasks" > "$dir/plan.json" <<'PY'
import json, sys
MASK = (1 << 64) - 1
state = 42
def nxt():
    global state
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)
def rng(lo, hi):
    return lo + nxt() % (hi - lo + 1)
n = int(sys.argv[1])
tasks = []
for i in range(n):
    latency = rng(200, 5000)
    rng(500, 5000)  # the simulated output length, unused here
    deps = []
    if i > 0 and i % 10 != 0:
        lo = max(i - 300, 0)
        k = rng(0, min(20, i))
        while len(deps) < min(k, i - lo):
            d = rng(lo, i - 1)
            if d not in deps:
                deps.append(d)
    tasks.append({
        "id": f"t{i:04}",
        "description": f"Generated task {i}",
        "dependencies": [f"t{d:04}" for d in deps],
        "entity_context": [{"entity_name": "Budget", "intent_relevance": "constraint"}],
        "tool_or_prompt": {"name": "inference", "params": {
            "prompt": f"Write part {i} of the report, building on the parts above.",
            "estimated_ms": latency}},
    })
print(json.dumps({
    "schema_version": 1,
    "entities": [{"name": "Budget", "type": "constraint", "grounded_value": "4000 tokens per prompt"}],
    "sub_tasks": tasks,
}))
PY
cargo build --release -p ctx-cli --bin ctx --quiet
ctx=target/release/ctx
"$ctx" plan check "$dir/plan.json"
for _ in $(seq "$runs"); do
  /usr/bin/time -f "plan cost: %e s wall, %M KiB peak" \
    "$ctx" plan cost "$dir/plan.json" --model gpt-4o-mini --max-tokens 1000 --format json > "$dir/cost.json"
done
for _ in $(seq "$runs"); do
  /usr/bin/time -f "plan check (baseline: load and validate only): %e s wall" \
    "$ctx" plan check "$dir/plan.json" > /dev/null
done
python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["total"]; print("total:", t)' "$dir/cost.json"
