#!/usr/bin/env bash
# Device microbenchmarks behind the CUDA notes in README.md, on a GPU host with
# nvcc (from the repository root):   bench/micro/run.sh [ARCH [NAME...]]
# (ARCH default sm_90a; NAMEs: some of the benchmarks below, default all)
#   hbm_read_patterns - the HBM read floor of gated_mlp's weights, and the
#                       streamed matmul's access pattern, timed like the bench
#   mma_sync_peak     - mma.sync.m16n8k16 fp16/fp32 throughput
#   l2_policy_stream  - the streamed matmul's cp.async weight tiles under the
#                       default and the evict-first L2 policy
#   smem_fill         - LoRA's shared-memory fill (copy order, swizzled or
#                       padded rows) and attention streams by key splits
#   l2_flush_writeback - what the benchmark's L2 flush (a 512 MiB write)
#                       costs the next kernel: its dirty lines' write-back
#   attention_prefill - backends/cuda/attention_prefill.cuh and
#                       attention_prefill_ws.cuh on their own: checked
#                       against a GPU reference, timed (sm_90a)
#   gemm              - backends/cuda/gemm_sm90.cuh's variants checked
#                       against a GPU reference on odd shapes, timed next
#                       to cuBLAS (sm_90a; links the driver and cuBLAS)
#   reduce_rows       - last-axis sums by threads a row, rows a block and
#                       loads in flight, over short to very long rows
#   elementwise_store - a flat relu by load and store cache policy
#   reduce_columns    - middle-axis sums by row splits, loads in flight and
#                       block shape, next to a flat read of the same bytes
#   decode_streams    - split-KV decode attention's K/V streams by copy
#                       engine (cp.async, bulk copies), split count and grid order
#   fp32_items        - float32 items of the flat and gather kernels: 8 floats
#                       (two 16-byte accesses) or 4 a thread's item
set -euo pipefail
ARCH=${1:-sm_90a}
shift || true
ALL=(hbm_read_patterns mma_sync_peak l2_policy_stream smem_fill l2_flush_writeback attention_prefill
  gemm reduce_rows elementwise_store decode_streams reduce_columns fp32_items)
# Extra link flags of the benchmarks that need libraries.
declare -A LIBS=([gemm]="-lcuda -lcublas" [attention_prefill]="-lcuda")
NAMES=("$@")
[ ${#NAMES[@]} -eq 0 ] && NAMES=("${ALL[@]}")
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
dir=$(cd "$(dirname "$0")" && pwd)
for b in "${NAMES[@]}"; do
  [ -f "$dir/$b.cu" ] || { echo "no benchmark $b (one of: ${ALL[*]})" >&2; exit 2; }
  # shellcheck disable=SC2086  # LIBS holds several flags
  "$NVCC" -O3 -std=c++17 -gencode "arch=compute_${ARCH#sm_},code=$ARCH" -o "$OUT/$b" "$dir/$b.cu" \
    ${LIBS[$b]:-}
  echo "== $b"
  "$OUT/$b"
done
