#!/usr/bin/env python3
"""Measures how long headless Chromium takes to open a ctx run report.

Usage: load_time.py REPORT.html [RUNS]

The report's Content-Security-Policy admits only its own script, so a
probing copy is written next to it (REPORT.probe.html) without the policy
and with one added script that, at the `load` event, forces layout and logs
`performance.now()` (time since navigation start: parsing, style and
layout), then logs again after the next frame. Chromium runs headless with
`--screenshot` so the page is really laid out and painted; its console goes
to stderr, where the figures are read. The process time, including browser
start-up, is printed too.

This is a measuring tool, not a test: figures go to docs/runs.md.
"""

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBE = (
    "<script>window.addEventListener('load',function(){"
    "var t0=performance.now();document.body.getBoundingClientRect();"
    "requestAnimationFrame(function(){console.log('REPORT-LOAD load '+t0.toFixed(0)+"
    "' ms, first frame '+performance.now().toFixed(0)+' ms, '+"
    "document.getElementsByTagName('*').length+' elements');});});</script>"
)


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    report = Path(sys.argv[1]).resolve()
    runs = int(sys.argv[2]) if len(sys.argv) == 3 else 3
    html = report.read_text(encoding="utf-8")
    html, n = re.subn(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html, count=1)
    if n != 1 or "</body>" not in html:
        print(f"{report}: not a ctx run report", file=sys.stderr)
        return 1
    probe = report.with_suffix(".probe.html")
    probe.write_text(html.replace("</body>", PROBE + "</body>", 1), encoding="utf-8")
    print(f"{report.name}: {report.stat().st_size:,} bytes")
    with tempfile.TemporaryDirectory() as profile:
        for k in range(runs):
            shot = Path(profile) / "shot.png"
            started = time.monotonic()
            p = subprocess.run(
                [
                    "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                    f"--user-data-dir={profile}/p", "--enable-logging=stderr", "--v=0",
                    f"--screenshot={shot}", "--window-size=1280,1500", probe.as_uri(),
                ],
                capture_output=True, text=True, timeout=600,
            )
            took = time.monotonic() - started
            found = [l for l in p.stderr.splitlines() if "REPORT-LOAD" in l]
            figure = found[0].split('"')[1].removeprefix("REPORT-LOAD ") if found else "no figure: " + p.stderr[-300:]
            print(f"  run {k + 1}: {figure}; whole process {took:.1f} s")
    probe.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
