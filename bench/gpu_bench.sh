#!/usr/bin/env bash
# The CUDA benchmark, one command on a GPU host (from the repository root):
# starts a server and a CUDA worker, optimizes each graph, exports each job's
# kernel with `yirage-client kernel`, then times every exported kernel
# against PyTorch eager and torch.compile in one process
# (bench/cuda_vs_torch.py) and prints the table.
#   bench/gpu_bench.sh [BIN_DIR] [--suite bench|suite] [NAME_SUBSTRING...] [GRAPH.json...]
# --suite bench (the default): examples/graphs/bench, five graphs at b = 1 and
# b = 8; --suite suite: examples/graphs/suite/*.json (KernelBench level 1 and 2
# cases and LLM blocks at real sizes, PyTorch in examples/graphs/suite/torch_fns.py).
# Arguments that are graph files replace the suite's graphs; any other
# argument keeps only the graphs whose name contains one of them.
# BIN_DIR holds yirage-server, yirage-worker, yirage-client and
# libyirage_backend_cuda.so (default build/bin), or is a bundle made by
# ../shared/tools/bundle.sh (with a `run` launcher). Environment:
#   BUDGET      candidates evaluated per job (default 12)
#   JOB_SECONDS time limit per job (default 600)
#   OUT         where logs, kernels and results go (default /tmp/yirage-bench):
#               table.txt, table.md (markdown), results.json, job_seconds.json,
#               candidates/NAME.txt and .json (every candidate of each job,
#               timed or not; bench/rank_quality.py reads the .json: with a
#               BUDGET of every candidate, how well the search's order finds
#               the fastest)
#   ITERS       timed calls per measurement (default 200)
#   PROFILE=1   also print each kernel's GPU time per call (torch.profiler)
#   SEARCH_UNTIL  epoch seconds after which no further job starts (and a
#               running one is cut there): the graphs left are listed as
#               skipped and the ones searched are still timed, so a caller
#               with a time limit gets a table of what fitted
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN_ARG=build/bin
if [ $# -gt 0 ] && [ -d "$1" ]; then BIN_ARG=$1; shift; fi
BIN=$(cd "$BIN_ARG" && pwd) || exit 2
SUITE=bench
FILES=()
PATTERNS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) SUITE=${2:-}; shift 2 || shift ;;
    --suite=*) SUITE=${1#--suite=}; shift ;;
    *) if [ -f "$1" ]; then FILES+=("$1"); else PATTERNS+=("$1"); fi; shift ;;
  esac
done
case "$SUITE" in
  bench) SUITE_GRAPHS=("$ROOT"/examples/graphs/bench/*_b1.json "$ROOT"/examples/graphs/bench/*_b8.json) ;;
  suite) SUITE_GRAPHS=("$ROOT"/examples/graphs/suite/*.json) ;;
  *) echo "--suite must be bench or suite (got '$SUITE')" >&2; exit 2 ;;
esac
[ ${#FILES[@]} -gt 0 ] && SUITE_GRAPHS=("${FILES[@]}")
GRAPHS=()
for g in "${SUITE_GRAPHS[@]}"; do
  name=$(basename "$g" .json)
  if [ ${#PATTERNS[@]} -eq 0 ]; then GRAPHS+=("$g"); continue; fi
  for p in "${PATTERNS[@]}"; do
    case "$name" in *"$p"*) GRAPHS+=("$g"); break ;; esac
  done
done
if [ ${#GRAPHS[@]} -eq 0 ]; then
  echo "no graph selected (suite $SUITE, names containing: ${PATTERNS[*]:-})" >&2; exit 2
fi
# Folders where cuda_vs_torch.py finds each graph's JSON (FLOPs): the suites
# and the folders of graph files given here.
GRAPH_DIRS=("$ROOT/examples/graphs/suite" "$ROOT/examples/graphs/bench")
for g in "${FILES[@]}"; do
  d=$(cd "$(dirname "$g")" && pwd)
  case " ${GRAPH_DIRS[*]} " in *" $d "*) ;; *) GRAPH_DIRS+=("$d") ;; esac
done
OUT=${OUT:-/tmp/yirage-bench}
mkdir -p "$OUT/kernels"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ -x "$BIN/run" ]; then
  RUN=("$BIN/run")
  LIBDIR=$BIN/lib
else
  RUN=()
  LIBDIR=$BIN
fi
yy() {  # a bundle's run takes a program name, a build dir takes a path
  if [ ${#RUN[@]} -gt 0 ]; then "${RUN[@]}" "$@"; else "$BIN/$1" "${@:2}"; fi
}
if [ ${#RUN[@]} -gt 0 ]; then CLIENT=("${RUN[@]}" yirage-client); else CLIENT=("$BIN/yirage-client"); fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
yy yirage-server --listen 127.0.0.1:0 --worker-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --db "$OUT/yirage.db" --local-workers none >"$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $WORKER $SERVER 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 100); do grep -q listening "$OUT/server.log" && break; sleep 0.1; done
C=$(grep -o 'client=[^ ]*' "$OUT/server.log" | cut -d= -f2)
W=$(grep -o 'worker=[^ ]*' "$OUT/server.log" | cut -d= -f2)
yy yirage-worker --scheduler "$W" --backend cuda --backend-dir "$LIBDIR" >"$OUT/worker.log" 2>&1 &
WORKER=$!
for _ in $(seq 100); do
  yy yirage-client --server "$C" workers 2>/dev/null | grep -q cuda && break
  sleep 0.2
done
yy yirage-client --server "$C" workers
CHIP=$(yy yirage-client --server "$C" workers --json |
  python3 -c 'import json,sys; w=[w for w in json.load(sys.stdin).get("workers",[]) if w.get("backend")=="cuda"]; print(w[0].get("chip_id","") if w else "")')
# The chip's HBM bandwidth, dense 16-bit and float32 peaks from the registry
# (memory.bandwidth_gbps, compute.peak_tflops_fp16 or _bf16, compute.peak_tflops_fp32);
# H200 figures where absent. The registry has no TF32 figure: half the 16-bit
# peak, as on A100, H100 and H200 tensor cores.
CHIP_JSON='{}'
if [ -n "$CHIP" ]; then
  CHIP_JSON=$(yy yirage-client --server "$C" chips get "$CHIP" --json 2>/dev/null || echo '{}')
fi
read -r BW PEAK16 PEAK32 PEAKTF32 < <(printf '%s' "$CHIP_JSON" | python3 -c '
import json, sys
try:
    chip = json.load(sys.stdin)
except ValueError:
    chip = {}
mem, comp = chip.get("memory") or {}, chip.get("compute") or {}
bw = mem.get("bandwidth_gbps") or 4800
p16 = comp.get("peak_tflops_fp16") or comp.get("peak_tflops_bf16") or 989
p32 = comp.get("peak_tflops_fp32") or 67
print(bw, p16, p32, p16 / 2)')
BW=${BW:-4800} PEAK16=${PEAK16:-989} PEAK32=${PEAK32:-67} PEAKTF32=${PEAKTF32:-494}
echo "worker chip: ${CHIP:-unknown}, HBM bandwidth ${BW} GB/s, peak ${PEAK16} TFLOPS 16-bit," \
  "${PEAK32} fp32, ${PEAKTF32} TF32 (registry; H200 figures where absent)"
echo '{}' >"$OUT/job_seconds.json"
record_seconds() {  # graph name, seconds: into $OUT/job_seconds.json
  python3 - "$OUT/job_seconds.json" "$1" "$2" <<'PY'
import json, sys
path, name, seconds = sys.argv[1:]
with open(path) as f:
    table = json.load(f)
table[name] = round(float(seconds), 2)
with open(path, "w") as f:
    json.dump(table, f, indent=1, sort_keys=True)
PY
}
DIRS=()
SKIPPED=()
for g in "${GRAPHS[@]}"; do
  name=$(basename "$g" .json)
  job_seconds=${JOB_SECONDS:-600}
  if [ -n "${SEARCH_UNTIL:-}" ]; then
    left=$((SEARCH_UNTIL - $(date +%s)))
    if [ "$left" -lt 5 ]; then SKIPPED+=("$name"); continue; fi
    [ "$left" -lt "$job_seconds" ] && job_seconds=$left
  fi
  gname=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("name", ""))' "$g" 2>/dev/null)
  [ -n "$gname" ] || gname=$name
  start=$(date +%s.%N)
  if ! timeout "$job_seconds" "${CLIENT[@]}" --server "$C" submit "$g" --backend cuda --budget-candidates "${BUDGET:-12}" --wait \
      >"$OUT/$name.submit.log" 2>&1; then
    record_seconds "$gname" "$(python3 -c "import time; print(time.time() - $start)")"
    echo "== $name: job failed"; tail -5 "$OUT/$name.submit.log"
    # A worker that is gone says why in its log.
    yy yirage-client --server "$C" workers 2>/dev/null | grep -q cuda ||
      { echo "-- the CUDA worker is gone; its log ends:"; tail -15 "$OUT/worker.log"; }
    continue
  fi
  wall=$(python3 -c "import time; print(time.time() - $start)")
  # The newest job of this graph; its seconds from submission to the end (the
  # server's timestamps), else the wall time seen here.
  read -r J secs < <(yy yirage-client --server "$C" list --json | python3 -c '
import json, sys
name, wall = sys.argv[1], float(sys.argv[2])
jobs = json.load(sys.stdin)["jobs"]
mine = [j for j in jobs if j.get("graph") == name] or jobs[:1]
j = max(mine, key=lambda j: j.get("created_unix", 0))
t0, t1 = j.get("created_unix") or 0, j.get("finished_unix") or 0
print(j["job_id"], t1 - t0 if t0 > 0 and t1 >= t0 else wall)' "$gname" "$wall")
  record_seconds "$gname" "$secs"
  echo "== $name: job $J done in $(printf '%.1f' "$secs") s"
  mkdir -p "$OUT/candidates"
  yy yirage-client --server "$C" candidates "$J" >"$OUT/candidates/$name.txt" 2>&1
  yy yirage-client --server "$C" candidates "$J" --json >"$OUT/candidates/$name.json" 2>/dev/null
  cut -c1-160 "$OUT/candidates/$name.txt" | head -11
  rm -rf "$OUT/kernels/$name"
  yy yirage-client --server "$C" kernel "$J" --out "$OUT/kernels/$name" && DIRS+=("$OUT/kernels/$name")
done
[ ${#SKIPPED[@]} -gt 0 ] && echo "skipped (SEARCH_UNTIL reached): ${SKIPPED[*]}"
if [ ${#DIRS[@]} -eq 0 ]; then echo "no kernel was exported" >&2; exit 1; fi
# The server and worker are done: stopped, so that their threads and the
# worker's CUDA context take nothing from the timing below.
kill $WORKER $SERVER 2>/dev/null; wait $WORKER $SERVER 2>/dev/null
echo "== exported kernels vs PyTorch (same process, same method)"
python3 "$(dirname "$0")/cuda_vs_torch.py" --graphs-dir "${GRAPH_DIRS[@]}" \
  --bandwidth-gbps "$BW" --peak-tflops "$PEAK16" --peak-tflops-fp32 "$PEAK32" \
  --peak-tflops-tf32 "$PEAKTF32" --job-seconds "$OUT/job_seconds.json" \
  --iters "${ITERS:-200}" ${PROFILE:+--profile} \
  --json "$OUT/results.json" --markdown "$OUT/table.md" "${DIRS[@]}" 2>&1 | tee "$OUT/table.txt"
