"""Checks one `ctx run --engine openai` against what the server received.

Used by `cargo xtask e2e`; run with the e2e virtualenv's Python. Inputs:

  --plan PLAN          the plan that ran (YAML or JSON)
  --out DIR            the run's --out directory (results.json, prompts/, outputs/)
  --requests FILE      JSON lines, one per request the server received, each
                       with "messages" (and "stream", "stream_options", and for
                       the LiteLLM mock the "answer" it gave)
  --secret KEY         the API key the run had; no artifact may contain it
  --artifact FILE      more files to search for the key (ctx's stdout, stderr)
  --stream             requests must have asked for a stream with usage
  --mock               outputs must be exactly the answers the mock logged
  --expect ID=STATUS   a task's expected status (default: every task completed)
  --expect-error ID=TEXT  a failed task's error must contain TEXT
  --expect-attempts ID=N  a task's recorded attempts
  --expect-check-attempts ID=N  a task's check attempts (retries with feedback)
  --usage-optional     a server that reports no usage (llama-cpp-python when
                       streaming) is accepted; usage it does report is checked
  --figures            print per-task time, tokens and tokens/s

Exit 0 when every check passes; otherwise each failure on stderr, exit 1.
"""

import argparse
import json
import os
import sys


def load_plan(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        return json.loads(text)
    import yaml  # PyYAML: a dependency of both e2e virtualenvs

    return yaml.safe_load(text)


def user_prompt(request):
    """The user message's text: ctx sends the assembled prompt as the last user message."""
    for message in reversed(request.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--requests", required=True)
    ap.add_argument("--secret", required=True)
    ap.add_argument("--artifact", action="append", default=[])
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--mock", action="store_true")
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--expect-error", action="append", default=[])
    ap.add_argument("--expect-attempts", action="append", default=[])
    ap.add_argument("--expect-check-attempts", action="append", default=[])
    ap.add_argument("--usage-optional", action="store_true")
    ap.add_argument("--figures", action="store_true")
    args = ap.parse_args()

    problems = []
    plan = load_plan(args.plan)
    deps = {t["id"]: list(t.get("dependencies") or []) for t in plan["sub_tasks"]}
    with open(os.path.join(args.out, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    tasks = {t["task_id"]: t for t in results["tasks"]}
    requests = []
    if os.path.exists(args.requests):
        with open(args.requests, encoding="utf-8") as f:
            requests = [json.loads(line) for line in f if line.strip()]

    expected = {tid: "completed" for tid in deps}
    for e in args.expect:
        tid, status = e.split("=", 1)
        expected[tid] = status
    if set(tasks) != set(deps):
        problems.append(f"results.json has tasks {sorted(tasks)}, the plan {sorted(deps)}")

    for tid, want in sorted(expected.items()):
        task = tasks.get(tid)
        if task is None:
            continue
        if task["status"] != want:
            problems.append(f"task {tid}: status {task['status']}, expected {want} ({task.get('error')})")
    for e in args.expect_error:
        tid, text = e.split("=", 1)
        error = (tasks.get(tid) or {}).get("error") or ""
        if text not in error:
            problems.append(f"task {tid}: error {error!r} does not contain {text!r}")

    for e in args.expect_attempts:
        tid, n = e.split("=", 1)
        got = len(((tasks.get(tid) or {}).get("metadata") or {}).get("attempts") or [])
        if got != int(n):
            problems.append(f"task {tid}: {got} attempts recorded, expected {n}")

    for e in args.expect_check_attempts:
        tid, n = e.split("=", 1)
        task = tasks.get(tid) or {}
        got = task.get("check_attempts", 0)
        if got != int(n):
            problems.append(f"task {tid}: {got} check attempts, expected {n}")
        if any(not c.get("passed") for c in task.get("checks") or []):
            problems.append(f"task {tid}: a check failed on the last attempt: {task.get('checks')}")
        if int(n) > 1:
            earlier = ((task.get("metadata") or {}).get("check_attempts") or [])[:-1]
            if not earlier or all(all(c.get("passed") for c in a.get("checks") or []) for a in earlier):
                problems.append(f"task {tid}: no earlier attempt failed a check")
            if "## Your previous answer failed these checks" not in (task.get("prompt") or ""):
                problems.append(f"task {tid}: the retried prompt has no feedback section")

    # Every request the server saw, matched to the task whose prompt it carried.
    by_prompt = {}
    for r in requests:
        by_prompt.setdefault(user_prompt(r), []).append(r)
        if args.stream:
            if r.get("stream") is not True:
                problems.append(f"a request did not ask for a stream: {r.get('stream')!r}")
            if (r.get("stream_options") or {}).get("include_usage") is not True:
                problems.append("a streaming request did not ask for usage (stream_options.include_usage)")
        elif r.get("stream"):
            problems.append("a request asked for a stream without --stream")

    # A task retried for its checks sent one prompt per check attempt.
    def task_prompts(task):
        earlier = ((task.get("metadata") or {}).get("check_attempts") or [])[:-1]
        return [a.get("prompt") for a in earlier] + [task.get("prompt")]

    prompts = {p for t in tasks.values() for p in task_prompts(t)}
    strays = [r for r in requests if user_prompt(r) not in prompts]
    if strays:
        problems.append(f"the server received {len(strays)} request(s) with no task's prompt")
    for tid, task in sorted(tasks.items()):
        meta = task.get("metadata") or {}
        attempts = meta.get("attempts") or []
        if task["status"] != "completed":
            continue
        output = task.get("output") or ""
        prompt = task.get("prompt") or ""
        if not output.strip():
            problems.append(f"task {tid}: empty output")
        usage = meta.get("tokens_used") or {}
        if usage or not args.usage_optional:
            if not usage.get("prompt_tokens") or not usage.get("completion_tokens"):
                problems.append(f"task {tid}: no usage reported ({usage})")
        if not meta.get("model"):
            problems.append(f"task {tid}: no model recorded")
        if not meta.get("finish_reason"):
            problems.append(f"task {tid}: no finish_reason recorded")
        if not attempts or attempts[-1].get("outcome") != "ok":
            problems.append(f"task {tid}: last attempt is not ok: {attempts}")
        seen = by_prompt.get(prompt, [])
        # Engine attempts of every check attempt are recorded together.
        sent = sum(len(by_prompt.get(p, [])) for p in set(task_prompts(task)))
        if sent != len(attempts) or not seen:
            problems.append(
                f"task {tid}: the server received its prompts {sent} times; {len(attempts)} attempts recorded"
            )
            continue
        received = user_prompt(seen[-1])
        if args.mock and seen[-1].get("answer") != output:
            problems.append(f"task {tid}: output {output!r} is not the mock's answer {seen[-1].get('answer')!r}")
        for dep in deps.get(tid, []):
            dep_output = (tasks.get(dep) or {}).get("output") or ""
            if not dep_output.strip() or dep_output.strip() not in received:
                problems.append(f"task {tid}: the prompt the server received lacks the output of dependency {dep}")
            if f"### Task {dep}:" not in received:
                problems.append(f"task {tid}: the prompt the server received has no `### Task {dep}:` section")

    # The key must appear in no artifact of the run.
    files = list(args.artifact)
    for dirpath, _, names in os.walk(args.out):
        files.extend(os.path.join(dirpath, n) for n in names)
    secret = args.secret.encode("utf-8")
    for path in files:
        with open(path, "rb") as f:
            if secret in f.read():
                problems.append(f"{path} contains the API key")

    if args.figures:
        print(f"{'task':<10} {'time s':>7} {'prompt tok':>10} {'compl tok':>9} {'tok/s':>6} {'chars':>6}  finish")
        total_ms = total_p = total_c = 0
        for tid in results["order"]:
            t = tasks[tid]
            m = t.get("metadata") or {}
            u = m.get("tokens_used") or {}
            ms = m.get("execution_time_ms") or 0
            p, c = u.get("prompt_tokens", 0), u.get("completion_tokens", 0)
            total_ms, total_p, total_c = total_ms + ms, total_p + p, total_c + c
            rate = c / (ms / 1000) if ms else 0
            chars = len(t.get("output") or "")
            print(f"{tid:<10} {ms / 1000:>7.2f} {p or '-':>10} {c or '-':>9} {rate:>6.1f} {chars:>6}  {m.get('finish_reason')}")
        rate = total_c / (total_ms / 1000) if total_ms else 0
        print(f"{'all':<10} {total_ms / 1000:>7.2f} {total_p:>10} {total_c:>9} {rate:>6.1f}")

    if problems:
        for p in problems:
            print(f"check: {p}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
