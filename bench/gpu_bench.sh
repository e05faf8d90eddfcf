#!/usr/bin/env bash
# The CUDA benchmark, one command on a GPU host (from the repository root):
# starts a server and a CUDA worker, optimizes each benchmark graph
# (examples/graphs/bench: five graphs at b = 1 and b = 8), exports each job's
# kernel with `yirage-client kernel`, then times every exported kernel
# against PyTorch eager and torch.compile in one process
# (bench/cuda_vs_torch.py) and prints the table.
#   bench/gpu_bench.sh [BIN_DIR] [GRAPHS...]
# BIN_DIR holds yirage-server, yirage-worker, yirage-client and
# libyirage_backend_cuda.so (default build/bin), or is a bundle made by
# ../shared/tools/bundle.sh (with a `run` launcher). Environment:
#   BUDGET      candidates evaluated per job (default 12)
#   JOB_SECONDS time limit per job (default 600)
#   OUT         where logs, kernels and results go (default /tmp/yirage-bench)
#   ITERS       timed calls per measurement (default 200)
#   PROFILE=1   also print each kernel's GPU time per call (torch.profiler)
set -uo pipefail
BIN=$(cd "${1:-build/bin}" && pwd)
shift || true
GRAPHS=("$@")
[ ${#GRAPHS[@]} -eq 0 ] && GRAPHS=(examples/graphs/bench/*_b1.json examples/graphs/bench/*_b8.json)
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
BW=4800
if [ -n "$CHIP" ]; then
  BW=$(yy yirage-client --server "$C" chips get "$CHIP" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["memory"]["bandwidth_gbps"])')
fi
echo "worker chip: ${CHIP:-unknown}, HBM bandwidth ${BW} GB/s (registry)"
DIRS=()
for g in "${GRAPHS[@]}"; do
  name=$(basename "$g" .json)
  start=$SECONDS
  if ! timeout "${JOB_SECONDS:-600}" "${CLIENT[@]}" --server "$C" submit "$g" --backend cuda --budget-candidates "${BUDGET:-12}" --wait \
      >"$OUT/$name.submit.log" 2>&1; then
    echo "== $name: job failed"; tail -5 "$OUT/$name.submit.log"; continue
  fi
  J=$(yy yirage-client --server "$C" list --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["job_id"])')
  echo "== $name: job $J done in $((SECONDS - start)) s"
  yy yirage-client --server "$C" candidates "$J" | cut -c1-160 | head -11
  rm -rf "$OUT/kernels/$name"
  yy yirage-client --server "$C" kernel "$J" --out "$OUT/kernels/$name" && DIRS+=("$OUT/kernels/$name")
done
echo "== exported kernels vs PyTorch (same process, same method)"
python3 "$(dirname "$0")/cuda_vs_torch.py" --bandwidth-gbps "$BW" --iters "${ITERS:-200}" ${PROFILE:+--profile} \
  --json "$OUT/results.json" "${DIRS[@]}" 2>&1 | tee "$OUT/table.txt"
