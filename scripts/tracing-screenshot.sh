#!/bin/sh
# Makes docs/tracing-mlflow.png, docs/tracing.md's screenshot of a ctx run in
# a tracing backend: the LiteLLM e2e (`cargo xtask e2e`) with
# CTX_E2E_TRACE_SCREENSHOT set, so that while MLflow's tracking server
# still holds the live `--stream` Tetris trace, headless Chromium (see
# scripts/install-chromium.sh; CTX_CHROMIUM picks one) saves MLflow's page
# of it. The e2e's own checks run as usual; the first run installs LiteLLM
# and MLflow into target/e2e (a few minutes).
#
# Usage: scripts/tracing-screenshot.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
CTX_E2E_TRACE_SCREENSHOT="$root/docs/tracing-mlflow.png" cargo xtask e2e
echo "tracing-screenshot: docs/tracing-mlflow.png"
