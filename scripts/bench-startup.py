#!/usr/bin/env python3
"""Whole-process CPU time of `ctx` against `/bin/true` and the Python peer,
interleaved run by run (issue 26's goals; docs/performance.md, "Against
the goals, one interleaved run").

Each process is timed by `os.wait4`, which returns the child's own
`rusage` (user + system CPU) to the microsecond: bash's `time` prints
milliseconds, a fifth of a 5 ms `ctx history`. Every round runs each
command once, in the same order, so that all of them see the same load;
the figures are medians over the rounds, with the fastest beside them.

Usage:
  scripts/bench-startup.py --ctx target/release/ctx [--before OLD_CTX]
      --archive DIR [--peer-python PY --peer-script SCRIPT] [--rounds N]
      [--peer-every K]

The archive is a bench-history one (`history_bench generate DIR 13 3000
5600`); the peer is SquadScope's scripts/assemble_historical_context.py,
called through the interpreter binary itself (a version-manager shim adds
about 100 ms to every process).
"""
import argparse
import os
import statistics
import subprocess
import sys

DATE = "2026-08-20"


def cpu_ms(argv):
    """Runs argv with its output discarded; its user + system CPU in ms."""
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null, stderr=null)
        _, status, usage = os.wait4(proc.pid, 0)
    # Popen must not reap it again.
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited with {proc.returncode}")
    return (usage.ru_utime + usage.ru_stime) * 1000.0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ctx", required=True)
    p.add_argument("--before")
    p.add_argument("--archive", required=True)
    p.add_argument("--peer-python")
    p.add_argument("--peer-script")
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--peer-every", type=int, default=4)
    a = p.parse_args()

    binaries = [("ctx", a.ctx)] + ([("before", a.before)] if a.before else [])
    commands = [("/bin/true", ["/bin/true"])]
    for name, path in binaries:
        commands.append((f"{name} --version", [path, "--version"]))
    history = ["history", "--content-root", a.archive, "--date", DATE]
    budgets = [
        ("default budget", [], "90000"),
        ("4,000, cl100k_base", ["--prompt-budget", "4000", "--tokenizer", "cl100k_base"], "4000"),
    ]
    for label, flags, budget in budgets:
        for name, path in binaries:
            commands.append((f"{name} history, {label}", [path] + history + flags))
        if a.peer_python and a.peer_script:
            commands.append(
                (
                    f"peer, {label}",
                    [
                        a.peer_python,
                        a.peer_script,
                        "--current-datetime",
                        f"{DATE}T00:00:00Z",
                        "--content-root",
                        a.archive,
                        "--prompt-token-budget",
                        budget,
                    ],
                )
            )

    # One warm-up round: page cache, the interpreter's .pyc files.
    for _, argv in commands:
        cpu_ms(argv)
    times = {label: [] for label, _ in commands}
    for r in range(a.rounds):
        for label, argv in commands:
            # The peer takes ~25x longer: every `--peer-every`th round keeps
            # the run short and still interleaves it with every other
            # command.
            if label.startswith("peer") and r % a.peer_every != 0:
                continue
            times[label].append(cpu_ms(argv))

    print(f"{'command':40} {'median ms':>10} {'fastest ms':>11} {'runs':>5}")
    med = {}
    for label, _ in commands:
        t = times[label]
        med[label] = statistics.median(t)
        print(f"{label:40} {med[label]:>10.3f} {min(t):>11.3f} {len(t):>5}")
    for label, _, _ in budgets:
        peer = med.get(f"peer, {label}")
        if peer:
            for name, _ in binaries:
                ours = med[f"{name} history, {label}"]
                print(f"peer ÷ {name}, {label}: {peer / ours:.1f}x")
    for name, _ in binaries:
        print(f"{name} --version ÷ /bin/true: {med[f'{name} --version'] / med['/bin/true']:.2f}")


if __name__ == "__main__":
    main()
