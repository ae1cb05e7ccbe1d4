#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets/*.rs) for a while each.
# cargo-fuzz needs a nightly toolchain: this script installs nightly and
# cargo-fuzz itself when they are missing. Not part of CI (too slow); run it
# before touching a parser.
#
#   scripts/fuzz.sh            # 60 s per target
#   scripts/fuzz.sh 600 sse    # 10 minutes on one target
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi
for t in "${targets[@]}"; do
  echo "==> fuzzing $t for ${secs}s"
  cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -max_len=65536
done
