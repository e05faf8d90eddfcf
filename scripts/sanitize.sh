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
# Every core busy while the tests run: the two longest binaries each in four
# GoogleTest shards (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX: every test runs
# in exactly one), at most nproc processes at once, each into its own log;
# the tests a binary's shards ran are added up and must make its count.
JOBS=()
for t in core_tests cpu_backend_tests; do
  for i in 0 1 2 3; do JOBS+=("$t:$i:4"); done
done
JOBS+=(server_tests:0:1 worker_tests:0:1)
LOGS=$(mktemp -d)
trap 'rm -rf "$LOGS"' EXIT
# The example graphs' rewritten plans are compiled and run by the main run;
# under the sanitizers their time is the system compiler's, not ours.
filter_of() { if [ "$1" = cpu_backend_tests ]; then echo "--gtest_filter=-Examples/RewriteEndToEnd.*"; fi; }
run_job() {  # binary:shard:shards
  local t=${1%%:*} rest=${1#*:}
  local shard=${rest%%:*} shards=${rest#*:}
  GTEST_SHARD_INDEX=$shard GTEST_TOTAL_SHARDS=$shards "$DIR/bin/$t" --gtest_brief=1 \
    $(filter_of "$t") >"$LOGS/$t.$shard" 2>&1
}
declare -A pid_job=()
status=0
finish() {  # waits for one job, prints its log
  local pid rc=0
  wait -n -p pid "${!pid_job[@]}" || rc=$?
  local job=${pid_job[$pid]}
  unset "pid_job[$pid]"
  local t=${job%%:*} rest=${job#*:}
  echo "== $t shard ${rest%%:*} of ${rest#*:} (address, undefined)"
  cat "$LOGS/$t.${rest%%:*}"
  if [ $rc != 0 ]; then
    echo "sanitize: $t failed" >&2
    status=1
  fi
}
for job in "${JOBS[@]}"; do
  [ -x "$DIR/bin/${job%%:*}" ] || continue
  while ((${#pid_job[@]} >= $(nproc))); do finish; done
  run_job "$job" &
  pid_job[$!]=$job
done
while ((${#pid_job[@]})); do finish; done
for t in "${TESTS[@]}"; do
  [ -x "$DIR/bin/$t" ] || continue
  want=$("$DIR/bin/$t" --gtest_list_tests $(filter_of "$t") | grep -c '^  ')
  ran=$(cat "$LOGS/$t".* | sed -n 's/^\[==========\] \([0-9]*\) tests\? from .* ran\..*/\1/p' |
    awk '{n += $1} END {print n + 0}')
  if [ "$ran" != "$want" ]; then
    echo "sanitize: $t ran $ran of its $want tests" >&2
    status=1
  fi
done
exit $status
