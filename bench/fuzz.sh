#!/usr/bin/env bash
# The long fuzzing run: every libFuzzer target (fuzz/) for 10^6 executions
# (FUZZ_RUNS to change it), through scripts/fuzz.sh; prints each target's
# executions, its corpus size at the end and its peak memory.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_RUNS=${FUZZ_RUNS:-1000000} bash scripts/fuzz.sh
DIR=${FUZZ_DIR:-build-fuzz}
for t in graph_json_fuzz chip_json_fuzz plan_fuzz; do
  echo "$t: $(ls "$DIR/corpus/$t" | wc -l) corpus files"
done
