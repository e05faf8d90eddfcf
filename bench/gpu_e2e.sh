#!/usr/bin/env bash
# On a GPU host, from the repository root, with a bundle made here by
#   ../shared/tools/bundle.sh .devbundle build/bin/{yirage-server,yirage-worker,yirage-client,cuda_backend_tests,libyirage_backend_cuda.so,libyirage_backend_cpu.so}
# runs (1) the CUDA backend's GPU tests and (2) the whole system: a server, a
# CUDA worker, and jobs for the benchmark graphs, printing each job and its
# candidates. Output also goes to $OUT (or /tmp/yirage-gpu).
#   bench/gpu_e2e.sh [BUNDLE] [GRAPH_GLOB] [BUDGET]
# Environment: TEST_FILTER (gtest filter of part 1), TEST_SECONDS, JOB_SECONDS,
# SKIP_E2E=1 (part 1 only), e.g. the benchmark lines alone:
#   TEST_FILTER='*BenchmarkGraphsVerifyAndTime*' SKIP_E2E=1 bench/gpu_e2e.sh
set -uo pipefail
B=$(cd "${1:-.devbundle}" && pwd)
GLOB=${2:-examples/graphs/bench/*_b1.json}
BUDGET=${3:-8}
LOG=${OUT:-/tmp/yirage-gpu}
mkdir -p "$LOG"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export YIRAGE_CUDA_BACKEND_LIB=$B/lib/libyirage_backend_cuda.so
export YIRAGE_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
echo "== probe"
"$B/run" yirage-worker --backend cuda --backend-dir "$B/lib" --probe | tee "$LOG/probe.json"
echo "== CUDA backend GPU tests"
# BenchmarkGraphsVerifyAndTime compiles 40 candidates per bench graph (NVRTC,
# minutes in all) and prints one "BENCH <graph> best_us=... baseline_us=..."
# line per graph; they are collected in $LOG/bench.txt.
timeout "${TEST_SECONDS:-900}" "$B/run" cuda_backend_tests --gtest_color=no \
  --gtest_filter="${TEST_FILTER:-*Gpu*:CudaBackendTest.*-*CandidatesCompileTest*}" 2>&1 |
  grep -vE '^\[2026|^Running main' | tee "$LOG/cuda_tests.log" | tail -80
echo "== per-graph best plan vs baseline plan (us; PyTorch H200 numbers: ../shared/reference/h200-torch-baselines.csv)"
grep '^BENCH ' "$LOG/cuda_tests.log" | tee "$LOG/bench.txt"
grep -E '^\[  (FAILED|PASSED) ' "$LOG/cuda_tests.log" | sort | uniq -c
[ "${SKIP_E2E:-0}" = 1 ] && exit 0
echo "== end to end: server + CUDA worker"
"$B/run" yirage-server --listen 127.0.0.1:0 --worker-listen 127.0.0.1:0 \
  --metrics-listen 127.0.0.1:0 --db "$LOG/yirage.db" --local-workers none >"$LOG/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do grep -q listening "$LOG/server.log" && break; sleep 0.1; done
C=$(grep -o 'client=[^ ]*' "$LOG/server.log" | cut -d= -f2)
W=$(grep -o 'worker=[^ ]*' "$LOG/server.log" | cut -d= -f2)
"$B/run" yirage-worker --scheduler "$W" --backend cuda --backend-dir "$B/lib" >"$LOG/worker.log" 2>&1 &
WORKER=$!
sleep 2
"$B/run" yirage-client --server "$C" workers
for g in $GLOB; do
  echo "== $g"
  timeout "${JOB_SECONDS:-240}" "$B/run" yirage-client --server "$C" submit "$g" --backend cuda \
    --budget-candidates "$BUDGET" --wait
  J=$("$B/run" yirage-client --server "$C" list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["job_id"])')
  "$B/run" yirage-client --server "$C" candidates "$J" | cut -c1-200
done
kill $WORKER $SERVER 2>/dev/null
wait 2>/dev/null
tail -20 "$LOG/worker.log"
