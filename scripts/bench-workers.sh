#!/usr/bin/env bash
# One process against four workers on the shared PostgreSQL store, side by
# side in one run (figures in docs/scaling.md):
#
#   A. `ctx run PLAN --store URL --concurrency 16` (registers, works alone);
#   B. `ctx run PLAN --store URL --no-local` and 4 × `ctx worker
#      --concurrency 4 --until-idle` (the same 16 in flight, 4 processes).
#
# The plan is the 2,000-task bench plan of `cargo xtask bench-plan` (the
# same splitmix64 generator and seed as scripts/bench-plan-cost.sh) with
# its simulated latencies (200–5,000 ms) divided by SCALE (default 20, so
# 10–250 ms) and slept for real by the command engine (`sleep`, read from
# params.model through CTX_MODEL): real processes, real time, a real
# server. The makespan is taken from the store (last finish − first
# start); the bound is max(critical path, total work ÷ 16) of the scaled
# latencies; the round trips are the statements the processes sent.
#
#   scripts/bench-workers.sh [TASKS] [SCALE]
#
# Uses CTX_TEST_POSTGRES_URL when set, else starts scripts/postgres.sh.
# Builds the release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
tasks="${1:-2000}"
scale="${2:-20}"
if [ -z "${CTX_TEST_POSTGRES_URL:-}" ]; then
    eval "$(scripts/postgres.sh start)"
fi
server="$CTX_TEST_POSTGRES_URL"
base="${server%/*}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
python3 - "$tasks" "$scale" > "$dir/plan.json" 2> "$dir/bound.txt" <<'PY'
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
n, scale = int(sys.argv[1]), int(sys.argv[2])
tasks, lat, deps_of = [], [], []
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
    ms = latency / scale
    lat.append(ms)
    deps_of.append(deps)
    tasks.append({
        "id": f"t{i:04}",
        "description": f"Generated task {i}",
        "dependencies": [f"t{d:04}" for d in deps],
        "entity_context": [{"entity_name": "Budget", "intent_relevance": "constraint"}],
        "tool_or_prompt": {"name": "inference", "params": {
            "prompt": f"Write part {i} of the report, building on the parts above.",
            "model": f"sleep-{ms / 1000:.4f}",
            "estimated_ms": latency}},
    })
finish = []
for i in range(n):
    finish.append(max([finish[d] for d in deps_of[i]], default=0) + lat[i])
crit, total = max(finish), sum(lat)
print(f"{crit / 1000:.3f} {total / 1000:.3f} {max(crit, total / 16) / 1000:.3f}", file=sys.stderr)
print(json.dumps({
    "schema_version": 1,
    "entities": [{"name": "Budget", "type": "constraint", "grounded_value": "4000 tokens per prompt"}],
    "sub_tasks": tasks,
}))
PY
read -r crit total bound < "$dir/bound.txt"
cargo build --release -p ctx-cli --bin ctx --quiet
ctx="$PWD/target/release/ctx"
engine=(--engine command --command 'sleep "${CTX_MODEL#sleep-}"; echo "done $CTX_TASK_ID"')

fresh() {
    psql -q "$server" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null 2>&1
    echo "$base/$1"
}
makespan() {
    psql -qtA "$1" -c "SELECT extract(epoch FROM max(finished_at) - min(started_at)) FROM ctx_tasks"
}
trips() {
    grep -ho '[0-9]* round trips' "$@" | awk '{s += $1} END {print s + 0}'
}

echo "plan: $tasks tasks, latencies ÷ $scale: critical path $crit s, total work $total s, bound at 16 in flight $bound s"

url=$(fresh ctx_bench_one)
start=$(date +%s.%N)
CTX_STORE="$url" "$ctx" run "$dir/plan.json" --concurrency 16 "${engine[@]}" > "$dir/one.out" 2> "$dir/one.err"
end=$(date +%s.%N)
m1=$(makespan "$url")
t1=$(trips "$dir/one.err")
echo "A  1 process × 16: makespan $m1 s (wall $(echo "$end - $start" | bc) s), ratio $(echo "scale=3; $m1 / $bound" | bc), $(echo "scale=2; $t1 / $tasks" | bc) round trips per task (registration, claims, reads, prompt, commit, close check)"

url=$(fresh ctx_bench_four)
"$ctx" run "$dir/plan.json" --store "$url" --no-local > "$dir/follow.out" 2> "$dir/follow.err" &
follower=$!
until grep -q registered "$dir/follow.err" 2>/dev/null; do sleep 0.1; done
start=$(date +%s.%N)
pids=()
for w in 1 2 3 4; do
    "$ctx" worker --store "$url" --concurrency 4 --until-idle "${engine[@]}" 2> "$dir/w$w.err" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
end=$(date +%s.%N)
wait "$follower"
m4=$(makespan "$url")
t4=$(trips "$dir"/w*.err)
echo "B  4 workers × 4:  makespan $m4 s (wall $(echo "$end - $start" | bc) s), ratio $(echo "scale=3; $m4 / $bound" | bc), $(echo "scale=2; $t4 / $tasks" | bc) round trips per task (claims, reads, prompt, commit, close check, heartbeats, idle polls)"
grep -h "committed" "$dir"/w*.err
tail -n 1 "$dir/follow.out"
