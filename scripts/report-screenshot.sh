#!/bin/sh
# Makes docs/report-tetris.png, the README's screenshot of `ctx runs report`,
# from a real stored run: the Tetris plan (fixtures/tetris/plan.yaml) run by a
# command engine that answers each checked task as a model would (the
# assembly task forgets its <canvas> until the feedback says so, as in
# crates/ctx-cli/tests/run_checks.rs) and takes a few tenths of a second per
# answer, so the timeline has the plan's shape. Then headless Chromium (see
# scripts/install-chromium.sh) takes the screenshot with the browser test's
# flags.
#
# Usage: scripts/report-screenshot.sh [CTX_BINARY]   (default target/release/ctx,
#        else target/debug/ctx)
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
ctx=${1:-}
if [ -z "$ctx" ]; then
    for c in "$root/target/release/ctx" "$root/target/debug/ctx"; do
        if [ -x "$c" ]; then ctx=$c; break; fi
    done
fi
[ -n "$ctx" ] || { echo "report-screenshot: build ctx first (cargo build -p ctx-cli)" >&2; exit 1; }
browser=${CTX_CHROMIUM:-}
if [ -z "$browser" ]; then
    for b in chromium chromium-browser google-chrome; do
        if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
    done
fi
[ -n "$browser" ] || { echo "report-screenshot: no Chromium; run scripts/install-chromium.sh" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
engine='p=$(cat)
case "$CTX_TASK_ID" in
  1) sleep 0.4; echo "<!-- the page skeleton -->";;
  2) sleep 0.3; echo "#board { width: 300px; height: 600px; }";;
  5) sleep 0.5; echo "const LINES = [0, 40, 100, 300, 1200]; // x (level + 1); level up every 10 lines; 48 frames at level 0";;
  9) sleep 0.4; case "$p" in
       *"Your previous answer failed these checks"*) echo "<!DOCTYPE html><html><body><canvas id=\"board\" width=\"300\" height=\"600\"></canvas></body></html>";;
       *) echo "<!DOCTYPE html><html><body></body></html>";;
     esac;;
  *) sleep 0.3; echo "part $CTX_TASK_ID";;
esac'
# The plan is named as the README names it (the report shows its path).
cd "$root"
"$ctx" run fixtures/tetris/plan.yaml --root "$work/runs" --concurrency 2 --command "$engine" >/dev/null
run=$("$ctx" runs list --root "$work/runs" --format json | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -n 1)
"$ctx" runs report "$run" --root "$work/runs" -o "$work/report.html"
"$browser" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions \
    --user-data-dir="$work/profile" --screenshot="$root/docs/report-tetris.png" \
    --window-size=1280,1500 --hide-scrollbars "file://$work/report.html" 2>/dev/null
echo "report-screenshot: docs/report-tetris.png from run $run"
