#!/usr/bin/env bash
# One device call's worth of GPU checks and benchmarks, from the repository
# root of a GPU host, over a bundle made here by ../shared/tools/bundle.sh
# (yirage-server, yirage-worker, yirage-client, cuda_backend_tests,
# libyirage_backend_cuda.so, libyirage_core.so; extra graph files in
# BUNDLE/g):
#   bench/device_steps.sh [BUNDLE]          (default .devbundle)
# Environment:
#   STEPS    steps in order (default "tests prefill bench8 micro"):
#            tests   - CudaCodegenGpuTest.EveryPlanKindMatchesReference once a
#                      YIRAGE_CASE_FILTER of FILTERS, then
#                      TooMuchSharedMemoryFailsOnlyItsPlan,
#                      CudaBackendGpuTest.LibraryPlansMatchReference and the
#                      timing tests (CudaBackendGpuTest.Timing*)
#            tests2  - the same over FILTERS2, without the last two tests
#            prefill - bench/gpu_bench.sh --suite suite over PCASES
#                      (default "attention_prefill gqa_prefill"), BUDGET=PBUDGET (12)
#            bench8  - bench/gpu_bench.sh over BUNDLE/g/*.json at BUDGET=8
#            suite   - bench/gpu_bench.sh --suite suite over SCASES (default:
#                      every suite case), BUDGET=SBUDGET (8)
#            bench   - bench/gpu_bench.sh --suite bench (the ten benchmark
#                      cases), BUDGET=SBUDGET (8)
#            micro   - bench/micro/run.sh sm_90a MICRO (default fp32_items)
#            profile - Nsight Compute (ncu --set full) over the prefill
#                      attention kernels at the suite's shapes
#                      (bench/micro/attention_prefill.cu, PREFILL_PROFILE=1):
#                      the text report in OUT/profile.log, its summary printed
#   LIMIT    seconds for all steps (default 560): a step that would start
#            with less than 30 s left is skipped, and each is cut at the limit;
#            the benchmark steps stop starting jobs after SEARCH_SHARE_PCT
#            (default 60) percent of their time, so that what was searched is still timed
#   OUT      where logs go (the device tool's $OUT); everything but *.txt
#            is packed into OUT/all.tgz at the end (the tool brings back few files)
# Each step prints its result as it ends, so a call cut short still says
# how far it got.
set -u
B=${1:-.devbundle}
OUT=${OUT:-/tmp/yirage-device}
mkdir -p "$OUT"
START=$(date +%s)
LIMIT=${LIMIT:-560}
left() { echo $((LIMIT - ($(date +%s) - START))); }
# When a benchmark step with L seconds left stops starting jobs.
search_until() { echo $(($(date +%s) + ${1} * ${SEARCH_SHARE_PCT:-60} / 100)); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv | tee "$OUT/gpu.txt"
# The test binary looks for the backend and the sources under the build
# folder it was built in unless told.
export YIRAGE_CUDA_BACKEND_LIB=$PWD/$B/lib/libyirage_backend_cuda.so YIRAGE_SOURCE_DIR=$PWD
for s in ${STEPS:-tests prefill bench8 micro}; do
  L=$(left)
  [ "$L" -lt 30 ] && { echo "skip $s (time)"; continue; }
  echo "=== step $s ($L s left) $(date +%T)"
  case $s in
    tests | tests2)
      filters=${FILTERS:-prefill column generic_chains matmul axis_lanes norm rows gather flat}
      [ "$s" = tests2 ] && filters=${FILTERS2:-}
      for f in $filters; do
        L=$(left)
        [ "$L" -lt 40 ] && { echo "skip filter $f"; continue; }
        T0=$(date +%s)
        YIRAGE_CASE_FILTER=$f timeout $((L - 20)) "$B/run" cuda_backend_tests \
          --gtest_filter=CudaCodegenGpuTest.EveryPlanKindMatchesReference >"$OUT/t_$f.log" 2>&1
        echo "filter $f rc $? $(($(date +%s) - T0)) s: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/t_$f.log" | head -2 | tr '\n' ' ')"
      done
      [ "$s" = tests2 ] && continue
      timeout 120 "$B/run" cuda_backend_tests \
        --gtest_filter='CudaCodegenGpuTest.TooMuchSharedMemoryFailsOnlyItsPlan' >"$OUT/t_smem.log" 2>&1
      echo "smem rc $?"
      tail -3 "$OUT/t_smem.log"
      timeout 180 "$B/run" cuda_backend_tests \
        --gtest_filter='CudaBackendGpuTest.LibraryPlansMatchReference:CudaBackendGpuTest.Timing*' \
        >"$OUT/t_library.log" 2>&1
      echo "library rc $?"
      tail -3 "$OUT/t_library.log"
      ;;
    prefill)
      # shellcheck disable=SC2086  # PCASES holds several names
      SEARCH_UNTIL=$(search_until "$L") OUT=$OUT/p BUDGET=${PBUDGET:-12} ITERS=50 JOB_SECONDS=90 timeout $((L - 10)) \
        bench/gpu_bench.sh "$B" --suite suite ${PCASES:-attention_prefill gqa_prefill} >"$OUT/prefill.log" 2>&1
      echo "prefill rc $?"
      cat "$OUT/p/table.txt" 2>/dev/null
      ;;
    bench8)
      SEARCH_UNTIL=$(search_until "$L") OUT=$OUT/b BUDGET=8 ITERS=30 JOB_SECONDS=45 timeout $((L - 10)) \
        bench/gpu_bench.sh "$B" "$B"/g/*.json >"$OUT/bench8.log" 2>&1
      echo "bench8 rc $?"
      cat "$OUT/b/table.txt" 2>/dev/null
      ;;
    suite | bench)
      cases=""
      [ "$s" = suite ] && cases=${SCASES:-}
      # shellcheck disable=SC2086  # SCASES may name several cases
      SEARCH_UNTIL=$(search_until "$L") OUT=$OUT/$s BUDGET=${SBUDGET:-8} ITERS=30 JOB_SECONDS=60 timeout $((L - 10)) \
        bench/gpu_bench.sh "$B" --suite "$s" $cases >"$OUT/$s.log" 2>&1
      echo "$s rc $?"
      cat "$OUT/$s/table.txt" 2>/dev/null
      ;;
    micro)
      # shellcheck disable=SC2086  # MICRO may name several benchmarks
      timeout $((L - 5)) bench/micro/run.sh sm_90a ${MICRO:-fp32_items} >"$OUT/micro.log" 2>&1
      echo "micro rc $?"
      tail -75 "$OUT/micro.log"
      ;;
    profile)
      ncu=$(command -v ncu)
      for c in /usr/local/cuda/bin/ncu /usr/local/cuda/nsight-compute*/ncu /opt/nvidia/nsight-compute/*/ncu; do
        [ -z "$ncu" ] && [ -x "$c" ] && ncu=$c
      done
      if [ -z "$ncu" ]; then
        echo "profile: no ncu on this host"
        continue
      fi
      d=$(mktemp -d)
      nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
      "$nvcc" -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -lineinfo -o "$d/ap" \
        bench/micro/attention_prefill.cu -lcuda >"$OUT/profile_build.log" 2>&1 ||
        { echo "profile: build failed"; tail -5 "$OUT/profile_build.log"; continue; }
      # The stall reasons as metrics (the text report prints the section
      # bodies' tables, not their charts).
      PREFILL_PROFILE=1 timeout $((L - 10)) "$ncu" --set full -k regex:PrefillWs \
        --metrics 'regex:smsp__warp_issue_stalled_.*_per_warp_active\.pct$' \
        --import-source yes "$d/ap" >"$OUT/profile.log" 2>&1
      echo "profile rc $?"
      grep -E "==(PROF|ERROR|WARNING)==|PrefillWs|Duration|Throughput|Issue Slots Busy|Warp Cycles Per|Registers Per|Achieved Occupancy|Stall|stall|Pipe|Shared Memory|Bank|issue_stalled" \
        "$OUT/profile.log" | head -200
      rm -rf "$d"
      ;;
    *) echo "unknown step $s" ;;
  esac
done
echo "done $(($(date +%s) - START)) s"
# The archive is written beside OUT, then moved in (written inside, tar
# saw the folder change under it and the clean-up below did not run).
tgz=$(mktemp "${TMPDIR:-/tmp}/yirage-device.XXXXXX")
# The benchmark's SQLite files are left out: they may still change as its
# server exits, which makes tar fail.
tar czf "$tgz" --exclude='yirage.db*' -C "$OUT" . && chmod 644 "$tgz" && mv "$tgz" "$OUT/all.tgz" &&
  cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name all.tgz ! -name "*.txt" -exec rm -rf {} +
