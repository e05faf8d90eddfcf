#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit tests, then the
# process-level integration tests that start real servers and workers).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
cd "$BUILD_DIR"
ctest --output-on-failure -j"$(nproc)" --timeout 900
