#!/usr/bin/env bash
# The CPU benchmark, one command (from the repository root): starts a server
# with a local CPU worker, optimizes each graph, exports each job's kernel
# with `yirage-client kernel`, stops the server and worker (so nothing else
# runs while timing), then times every exported kernel against PyTorch CPU
# eager in one process (bench/cpu_vs_torch.py) and prints the table.
#   bench/cpu_bench.sh [BIN_DIR] [NAME_SUBSTRING...] [GRAPH.json...]
# Graphs: examples/graphs/*.json (the examples) and examples/graphs/cpu/*.json
# (CPU-sized KernelBench and LLM cases); graph files given replace them, other
# arguments keep the graphs whose name contains one of them.
# BIN_DIR holds yirage-server, yirage-worker, yirage-client and the backends
# (default build/bin). Environment:
#   BUDGET      candidates evaluated per job (default 12)
#   JOB_SECONDS time limit per job (default 600)
#   THREADS     threads of both sides (default every core)
#   ITERS       timed calls per side (default 50)
#   OUT         logs, kernels and results (default /tmp/yirage-cpu-bench):
#               table.txt, table.md, results.json, job_seconds.json,
#               candidates/NAME.txt and .json (every candidate of each job,
#               for bench/rank_quality.py) and chip.json (the worker's chip)
#   SKIP_TORCH  1: stop after the jobs (no export, no PyTorch timing)
# Needs /usr/bin/python3 with python3-torch (Debian), and OpenBLAS
# (libopenblas0-pthread) for both sides' matmuls.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN_ARG=$ROOT/build/bin
if [ $# -gt 0 ] && [ -d "$1" ]; then BIN_ARG=$1; shift; fi
BIN=$(cd "$BIN_ARG" && pwd) || exit 2
PY=/usr/bin/python3
FILES=()
PATTERNS=()
for a in "$@"; do
  if [ -f "$a" ]; then FILES+=("$a"); else PATTERNS+=("$a"); fi
done
ALL=("$ROOT"/examples/graphs/*.json "$ROOT"/examples/graphs/cpu/*.json)
[ ${#FILES[@]} -gt 0 ] && ALL=("${FILES[@]}")
GRAPHS=()
for g in "${ALL[@]}"; do
  name=$(basename "$g" .json)
  if [ ${#PATTERNS[@]} -eq 0 ]; then GRAPHS+=("$g"); continue; fi
  for p in "${PATTERNS[@]}"; do
    case "$name" in *"$p"*) GRAPHS+=("$g"); break ;; esac
  done
done
if [ ${#GRAPHS[@]} -eq 0 ]; then echo "no graph selected (names containing: ${PATTERNS[*]:-})" >&2; exit 2; fi
GRAPH_DIRS=("$ROOT/examples/graphs" "$ROOT/examples/graphs/cpu" "$ROOT/examples/graphs/suite")
for g in "${FILES[@]}"; do
  d=$(cd "$(dirname "$g")" && pwd)
  case " ${GRAPH_DIRS[*]} " in *" $d "*) ;; *) GRAPH_DIRS+=("$d") ;; esac
done
OUT=${OUT:-/tmp/yirage-cpu-bench}
rm -rf "$OUT/kernels"
mkdir -p "$OUT/kernels"
THREADS=${THREADS:-$(nproc)}
export OMP_NUM_THREADS=$THREADS
lscpu | grep -E '^(Model name|CPU\(s\)|Thread|L3)' || true
"$BIN/yirage-server" --listen 127.0.0.1:0 --worker-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --db "$OUT/yirage.db" --local-workers none >"$OUT/server.log" 2>&1 &
SERVER=$!
WORKER=
trap 'kill $WORKER $SERVER 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 100); do grep -q listening "$OUT/server.log" && break; sleep 0.1; done
C=$(grep -o 'client=[^ ]*' "$OUT/server.log" | cut -d= -f2)
W=$(grep -o 'worker=[^ ]*' "$OUT/server.log" | cut -d= -f2)
"$BIN/yirage-worker" --scheduler "$W" --backend cpu --backend-dir "$BIN" >"$OUT/worker.log" 2>&1 &
WORKER=$!
for _ in $(seq 100); do
  "$BIN/yirage-client" --server "$C" workers 2>/dev/null | grep -q cpu && break
  sleep 0.2
done
echo '{}' >"$OUT/job_seconds.json"
DIRS=()
for g in "${GRAPHS[@]}"; do
  name=$(basename "$g" .json)
  gname=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1])).get("name", ""))' "$g")
  [ -n "$gname" ] || gname=$name
  start=$(date +%s.%N)
  if ! timeout "${JOB_SECONDS:-600}" "$BIN/yirage-client" --server "$C" submit "$g" --backend cpu \
      --budget-candidates "${BUDGET:-12}" --wait >"$OUT/$name.submit.log" 2>&1; then
    echo "== $name: job failed"; tail -5 "$OUT/$name.submit.log"; continue
  fi
  secs=$($PY -c "import time; print(round(time.time() - $start, 2))")
  J=$("$BIN/yirage-client" --server "$C" list --json | $PY -c '
import json, sys
jobs = [j for j in json.load(sys.stdin)["jobs"] if j.get("graph") == sys.argv[1]]
print(max(jobs, key=lambda j: j.get("created_unix", 0))["job_id"])' "$gname")
  $PY - "$OUT/job_seconds.json" "$gname" "$secs" <<'PY'
import json, sys
path, name, seconds = sys.argv[1:]
table = json.load(open(path))
table[name] = float(seconds)
json.dump(table, open(path, "w"), indent=1, sort_keys=True)
PY
  echo "== $name: job $J done in $secs s"
  mkdir -p "$OUT/candidates"
  "$BIN/yirage-client" --server "$C" candidates "$J" >"$OUT/candidates/$name.txt" 2>&1
  "$BIN/yirage-client" --server "$C" candidates "$J" --json >"$OUT/candidates/$name.json" 2>/dev/null
  cut -c1-150 "$OUT/candidates/$name.txt" | head -8
  [ "${SKIP_TORCH:-0}" = 1 ] && continue
  "$BIN/yirage-client" --server "$C" kernel "$J" --out "$OUT/kernels/$name" >/dev/null &&
    DIRS+=("$OUT/kernels/$name")
done
CHIP=$("$BIN/yirage-client" --server "$C" workers --json 2>/dev/null |
  $PY -c 'import json,sys; print(([w.get("chip_id","") for w in json.load(sys.stdin)["workers"]] + [""])[0])')
[ -n "$CHIP" ] && "$BIN/yirage-client" --server "$C" chips get "$CHIP" --json >"$OUT/chip.json" 2>/dev/null
kill $WORKER $SERVER 2>/dev/null
wait 2>/dev/null
trap - EXIT
[ "${SKIP_TORCH:-0}" = 1 ] && exit 0
if [ ${#DIRS[@]} -eq 0 ]; then echo "no kernel was exported" >&2; exit 1; fi
echo "== exported kernels vs PyTorch CPU eager (one process, alternating calls)"
$PY "$ROOT/bench/cpu_vs_torch.py" --threads "$THREADS" --iters "${ITERS:-50}" \
  --graphs-dir "${GRAPH_DIRS[@]}" --job-seconds "$OUT/job_seconds.json" \
  --json "$OUT/results.json" --markdown "$OUT/table.md" "${DIRS[@]}" 2>&1 | tee "$OUT/table.txt"
