#!/usr/bin/env bash
# The plans that won on the H200 (bench/h200_winners.json) stay among the
# first BUDGET plans a job times: plans every graph of examples/graphs/bench,
# examples/graphs/suite and the seed-11 random graphs with the CUDA
# backend's description of an H200 (no device) and runs bench/order_check.py.
# A cost model or generator change that moves a winner out fails it, unless
# the winner's entry says why ("moved_out"). The ctest OrderCheckH200.
#   bench/order_check.sh SEARCH_BENCH CUDA_BACKEND_LIB RANDOM_GRAPH_DIR OUT_DIR [BUDGET]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SEARCH_BENCH=$1 LIB=$2 RG_DIR=$3 OUT=$4 BUDGET=${5:-12}
rm -rf "$OUT"
graphs=("$ROOT"/examples/graphs/bench/*.json "$ROOT"/examples/graphs/suite/*.json)
if compgen -G "$RG_DIR/*.json" >/dev/null; then graphs+=("$RG_DIR"/*.json); fi
"$SEARCH_BENCH" --runs 1 --chip h200 --backend cuda --backend-lib "$LIB" --max-candidates 64 \
  --json-dir "$OUT" "${graphs[@]}" >"$OUT.log" 2>&1 || { tail -20 "$OUT.log"; exit 1; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" "$ROOT/bench/order_check.py" --winners "$ROOT/bench/h200_winners.json" --budget "$BUDGET" "$OUT"
