#!/bin/sh
# Installs a headless Chromium from the Debian packages, for the browser test
# of crates/ctx-report (tests/browser.rs) and for CI. Idempotent: when a
# `chromium` (or `chromium-browser`) is already on PATH it says so and does
# nothing. About 31 s on a fresh Debian container (apt-get update included).
#
# Usage: scripts/install-chromium.sh
set -eu

for b in chromium chromium-browser; do
    if command -v "$b" >/dev/null 2>&1; then
        echo "install-chromium: $b already installed at $(command -v "$b"): $("$b" --version 2>/dev/null || echo 'version unknown')"
        exit 0
    fi
done

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium: no apt-get on this machine; install Chromium with its package manager" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y chromium
echo "install-chromium: installed $(command -v chromium): $(chromium --version)"
