"""Checks a ctx run's trace as MLflow's tracking server holds it.

Used by `cargo xtask e2e` (xtask/src/e2e/tracing_backend.rs); run with the
MLflow virtualenv's Python. The trace is read through MLflow's own client
API (`MlflowClient.get_trace`), so this checks what the backend made of
ctx's OTLP export, not what ctx meant to send. Inputs:

  --tracking-uri URL   the MLflow server
  --trace-id HEX       the OTel trace id (`ctx runs show --format json`)
  --plan PLAN          the plan that ran: the root span is
                       `invoke_workflow {its goal}`
  --tasks N            task spans expected, each a child of the root (or
                       of a worker's claim) with ctx.task.* attributes
  --provider NAME      every `chat` span's gen_ai.provider.name; at least
                       one chat span per task
  --usage              every chat span carries input and output token counts
                       (with --exported: each task's last one, where the
                       stored usage goes)
  --response-id        every chat span carries gen_ai.response.id
  --first-chunk        every chat span carries gen_ai.response.time_to_first_chunk
  --exported           the root is marked ctx.exported (`ctx runs export`)
  --workers N          the tasks hang under claim spans of N distinct workers

Prints one summary line and exits 0 when every check passes; otherwise
each failure on stderr, exit 1. Spans may still be arriving when it
starts (a worker's last batch): it polls for up to 30 s until the trace
has every task span.
"""

import argparse
import sys
import time

import yaml  # a dependency of mlflow
from mlflow import MlflowClient


def load_goal(path):
    with open(path, encoding="utf-8") as f:
        plan = yaml.safe_load(f)  # JSON is YAML
    return " ".join(str(plan.get("goal") or "").split())


def attr(span, key):
    value = span.attributes.get(key)
    return value


def fetch(client, trace_id, want_tasks):
    """The trace's spans, once it has `want_tasks` task spans (or after 30 s)."""
    deadline = time.time() + 30
    spans = []
    while True:
        try:
            trace = client.get_trace(f"tr-{trace_id}")
            spans = list(trace.data.spans) if trace else []
        except Exception as e:  # not there yet: MLflow raises for an unknown id
            last = e
            spans = []
        tasks = [s for s in spans if s.name.startswith("task ")]
        if len(tasks) >= want_tasks or time.time() > deadline:
            if not spans and "last" in locals():
                print(f"MLflow has no trace tr-{trace_id}: {last}", file=sys.stderr)
            return spans
        time.sleep(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracking-uri", required=True)
    ap.add_argument("--trace-id", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--tasks", type=int, required=True)
    ap.add_argument("--provider", required=True)
    ap.add_argument("--usage", action="store_true")
    ap.add_argument("--response-id", action="store_true")
    ap.add_argument("--first-chunk", action="store_true")
    ap.add_argument("--exported", action="store_true")
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()

    client = MlflowClient(tracking_uri=args.tracking_uri)
    spans = fetch(client, args.trace_id, args.tasks)
    problems = []
    if not spans:
        print(f"no spans for trace {args.trace_id}", file=sys.stderr)
        return 1

    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if not s.parent_id]
    workflow = f"invoke_workflow {load_goal(args.plan)}"
    if len(roots) != 1:
        problems.append(f"{len(roots)} root spans: {[r.name for r in roots]}")
    root = roots[0] if roots else None
    if root is not None:
        if root.name != workflow:
            problems.append(f"root span {root.name!r}, expected {workflow!r}")
        if attr(root, "gen_ai.operation.name") != "invoke_workflow":
            problems.append(f"root gen_ai.operation.name {attr(root, 'gen_ai.operation.name')!r}")
        if args.exported and attr(root, "ctx.exported") is not True:
            problems.append(f"root ctx.exported {attr(root, 'ctx.exported')!r}, expected true")

    tasks = [s for s in spans if s.name.startswith("task ")]
    if len(tasks) != args.tasks:
        problems.append(f"{len(tasks)} task spans, expected {args.tasks}")
    claims = [s for s in spans if s.name.startswith("claim ")]
    for t in tasks:
        parent = by_id.get(t.parent_id)
        if args.workers:
            if parent is None or not parent.name.startswith("claim ") or parent.parent_id != (root and root.span_id):
                problems.append(f"{t.name}: not under a claim span under the root")
        elif root is None or t.parent_id != root.span_id:
            problems.append(f"{t.name}: not a child of the root")
        if attr(t, "ctx.task.id") != t.name[len("task "):]:
            problems.append(f"{t.name}: ctx.task.id {attr(t, 'ctx.task.id')!r}")
        if attr(t, "ctx.task.status") != "completed":
            problems.append(f"{t.name}: ctx.task.status {attr(t, 'ctx.task.status')!r}")
        if not isinstance(attr(t, "ctx.task.attempts"), int):
            problems.append(f"{t.name}: ctx.task.attempts {attr(t, 'ctx.task.attempts')!r}")
    if args.workers:
        workers = {attr(c, "ctx.worker.id") for c in claims}
        if len(claims) != args.tasks or len(workers) != args.workers or None in workers:
            problems.append(f"{len(claims)} claims by workers {sorted(map(str, workers))}, expected {args.tasks} by {args.workers}")

    task_ids = {t.span_id for t in tasks}
    chats = [s for s in spans if s.name.startswith("chat")]
    if len(chats) < args.tasks:
        problems.append(f"{len(chats)} chat spans for {args.tasks} tasks")
    tokens = 0
    with_usage = set()
    for c in chats:
        where = f"{c.name} ({attr(c, 'ctx.task.id')})"
        if c.parent_id not in task_ids:
            problems.append(f"{where}: not under a task span")
        if attr(c, "gen_ai.operation.name") != "chat":
            problems.append(f"{where}: gen_ai.operation.name {attr(c, 'gen_ai.operation.name')!r}")
        # What MLflow made of the conventions: a chat model call.
        if attr(c, "mlflow.spanType") != "CHAT_MODEL":
            problems.append(f"{where}: MLflow span type {attr(c, 'mlflow.spanType')!r}, expected CHAT_MODEL")
        if attr(c, "gen_ai.provider.name") != args.provider:
            problems.append(f"{where}: gen_ai.provider.name {attr(c, 'gen_ai.provider.name')!r}")
        if args.usage:
            i, o = attr(c, "gen_ai.usage.input_tokens"), attr(c, "gen_ai.usage.output_tokens")
            if isinstance(i, int) and isinstance(o, int) and i > 0 and o > 0:
                tokens += i + o
                with_usage.add(c.parent_id)
            elif not args.exported:
                # Live, every call has its usage; exported, only each
                # task's last call (usage is stored per task).
                problems.append(f"{where}: usage {i!r} in, {o!r} out")
        if args.response_id and not attr(c, "gen_ai.response.id"):
            problems.append(f"{where}: no gen_ai.response.id")
        if args.first_chunk:
            first = attr(c, "gen_ai.response.time_to_first_chunk")
            if not isinstance(first, float) or first <= 0:
                problems.append(f"{where}: gen_ai.response.time_to_first_chunk {first!r}")

    if args.usage:
        for t in tasks:
            if t.span_id not in with_usage:
                problems.append(f"{t.name}: no chat span with usage")

    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    extra = f", {len(claims)} claims by {args.workers} workers" if args.workers else ""
    print(
        f"MLflow holds trace {args.trace_id}: {len(spans)} spans, {len(tasks)} tasks, "
        f"{len(chats)} chat spans{extra}" + (f", {tokens} tokens" if args.usage else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
