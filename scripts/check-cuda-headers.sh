#!/usr/bin/env bash
# The CUDA device sources (backends/cuda/*.cuh) compile with nvcc on their
# own: every header for sm_90a and sm_80 (to PTX: the front end parses the
# templates; nvcc has no -fsyntax-only), and the prefill attention
# templates (both forms) instantiated for sm_90a through ptxas (bench/micro/attention_prefill.cu,
# every variant it runs). Exit 77 (a ctest skip) where there is no nvcc.
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ]; then
  echo "check-cuda-headers: no nvcc (set NVCC): skipped"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Every header after the prelude, in the order the backend emits them.
{
  echo '#include "backends/cuda/kernel_prelude.cuh"'
  echo '#include "backends/cuda/wgmma_helpers.cuh"'
  for f in backends/cuda/*.cuh; do
    case "$f" in */kernel_prelude.cuh|*/wgmma_helpers.cuh) ;; *) echo "#include \"$f\"" ;; esac
  done
} >"$tmp/all.cu"
for arch in sm_80 sm_90a; do
  "$NVCC" -std=c++17 -I. -ptx -arch="$arch" "$tmp/all.cu" -o "$tmp/all_$arch.ptx"
  echo "check-cuda-headers: every header parses for $arch"
done
"$NVCC" -std=c++17 -O1 -gencode arch=compute_90a,code=sm_90a -c \
  bench/micro/attention_prefill.cu -o "$tmp/attention_prefill.o"
echo "check-cuda-headers: the prefill templates compile for sm_90a (every benchmarked variant)"
