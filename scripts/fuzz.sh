#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer into ./build-fuzz (override with FUZZ_DIR) and
# runs each for FUZZ_RUNS executions (default 50000; bench/fuzz.sh runs
# 10^6) from a seed corpus: the example graphs, the chip catalog, and the
# fuzz graph's candidate plans. A crash, leak, timeout or sanitizer report
# fails the run; the input that caused it is kept under build-fuzz/artifacts.
# scripts/test.sh runs this (YIRAGE_FUZZ_TESTS=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${FUZZ_DIR:-build-fuzz}
RUNS=${FUZZ_RUNS:-50000}
TARGETS=(chip_json_fuzz graph_json_fuzz plan_fuzz)  # the longest run first
# Warnings are the GCC build's business (-Werror there); clang's own
# warnings do not stop fuzzing.
CC=clang CXX=clang++ cmake -S . -B "$DIR" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" \
  -DYIRAGE_SANITIZE=address,undefined -DYIRAGE_FUZZ=ON -DYIRAGE_WERROR=OFF \
  -DYIRAGE_BUILD_TESTS=OFF >/dev/null
cmake --build "$DIR" -j"$(nproc)" --target "${TARGETS[@]}" plan_fuzz_seeds
corpus="$DIR/corpus"
rm -rf "$corpus"
mkdir -p "$corpus/graph_json_fuzz" "$corpus/chip_json_fuzz" "$corpus/plan_fuzz" "$DIR/artifacts"
n=0
for f in examples/graphs/*.json examples/graphs/*/*.json; do
  cp "$f" "$corpus/graph_json_fuzz/seed_$((n++))_$(basename "$f")"
done
cp data/chips/*.json "$corpus/chip_json_fuzz/"
"$DIR/bin/plan_fuzz_seeds" "$corpus/plan_fuzz"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Each target runs as one process on one core: up to nproc of them at once
# (the same runs as one after another).
fuzz_one() {
  # The corpus directory grows with what the run finds; -seed makes CI's
  # runs repeatable.
  "$DIR/bin/$1" -runs="$RUNS" -seed=1 -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$DIR/artifacts/$1-" "$corpus/$1" >"$DIR/$1.log" 2>&1
}
declare -A pid_target=()
status=0
finish() {  # waits for one target, reports it
  local pid rc=0
  wait -n -p pid "${!pid_target[@]}" || rc=$?
  local t=${pid_target[$pid]}
  unset "pid_target[$pid]"
  echo "== $t ($RUNS runs)"
  if [ $rc != 0 ]; then
    tail -n 60 "$DIR/$t.log"
    echo "fuzz: $t failed (inputs in $DIR/artifacts)" >&2
    status=1
    return
  fi
  grep -E "^Done|stat::number_of_executed_units|stat::peak_rss_mb" "$DIR/$t.log" || true
}
for t in "${TARGETS[@]}"; do
  while ((${#pid_target[@]} >= $(nproc))); do finish; done
  fuzz_one "$t" &
  pid_target[$!]=$t
done
while ((${#pid_target[@]})); do finish; done
exit $status
