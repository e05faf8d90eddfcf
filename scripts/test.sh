#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit tests, the
# format check, then the process-level integration tests that start real
# servers and workers) and a short chaos run (bench/chaos.sh;
# YIRAGE_CHAOS_TESTS=0 skips it), then the unit tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer (scripts/sanitize.sh; YIRAGE_SANITIZE_TESTS=0
# skips that part), and a short run of the libFuzzer targets (scripts/fuzz.sh;
# YIRAGE_FUZZ_TESTS=0 skips it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
bash scripts/install-deps.sh
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
(cd "$BUILD_DIR" && ctest --output-on-failure -j"$(nproc)" --timeout 900)
if [ "${YIRAGE_CHAOS_TESTS:-1}" != 0 ]; then
  # The short chaos run: 40 jobs while the server and workers are killed.
  CHAOS_SEED=1 CHAOS_JOBS=40 bash bench/chaos.sh "$BUILD_DIR" 30
fi
if [ "${YIRAGE_SANITIZE_TESTS:-1}" != 0 ]; then
  bash scripts/sanitize.sh
fi
if [ "${YIRAGE_FUZZ_TESTS:-1}" != 0 ]; then
  bash scripts/fuzz.sh
fi
