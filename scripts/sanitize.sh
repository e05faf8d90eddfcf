#!/usr/bin/env bash
# Builds the core, server, worker and CPU backend unit tests with
# AddressSanitizer and UndefinedBehaviorSanitizer into ./build-sanitize
# (override with SANITIZE_DIR) and runs them; any report fails the run.
# scripts/test.sh runs this after the main tests (YIRAGE_SANITIZE_TESTS=0
# skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${SANITIZE_DIR:-build-sanitize}
TESTS=(core_tests server_tests worker_tests cpu_backend_tests)
# -O1 -g1 with assertions on: line numbers in reports, and the least build
# plus run time of the levels measured (bench/RESULTS.md, "CI time"); the
# build type is explicit, since an empty one falls back to RelWithDebInfo.
cmake -S . -B "$DIR" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" -DYIRAGE_SANITIZE=address,undefined >/dev/null
cmake --build "$DIR" -j"$(nproc)" --target "${TESTS[@]}" yirage_backend_cpu
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${TESTS[@]}"; do
  [ -x "$DIR/bin/$t" ] || continue
  echo "== $t (address, undefined)"
  # The example graphs' rewritten plans are compiled and run by the main
  # run; under the sanitizers their time is the system compiler's, not ours.
  filter=""
  [ "$t" = cpu_backend_tests ] && filter="--gtest_filter=-Examples/RewriteEndToEnd.*"
  if ! "$DIR/bin/$t" --gtest_brief=1 $filter; then
    echo "sanitize: $t failed" >&2
    status=1
  fi
done
exit $status
