#!/usr/bin/env bash
# GPU check of the CUDA backend: the cuda_backend_tests binary (NVRTC compile
# checks, numerics against the float64 reference, fault isolation, timing, the
# ten benchmark graphs) plus the probe JSON.
#
# The GPU host has no gRPC/protobuf: pack everything here, run it there.
#
#   bench/gpu_check.sh pack [BUILD_DIR] [OUT]   # here (defaults build-cuda, build-cuda/gpu_bundle)
#   bench/gpu_check.sh run [OUT] [GTEST_FILTER] # on the GPU host, from the repository root
#
# pack bundles cuda_backend_tests and libyirage_backend_cuda.so with their
# shared libraries (../shared/tools/bundle.sh), debug info stripped; OUT sits
# under build-cuda/ (git-ignored), so ship it with the device tool's carry.
# With PACK_NVRTC=1 it also packs NVRTC (libnvrtc + builtins, ~115 MB) and the
# toolkit headers NVRTC needs, for a GPU host without a CUDA toolkit.
# run uses the host's toolkit when it has one (CUDA_HOME or /usr/local/cuda with
# include/cuda_fp16.h and lib64/libnvrtc.so.*), else the packed copies; the
# driver (libcuda.so.1) always comes from the host.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
case "$mode" in
  pack)
    build=${2:-$repo/build-cuda}
    out=${3:-$repo/build-cuda/gpu_bundle}
    cuda=${CUDA_HOME:-/usr/local/cuda}
    bundle=${BUNDLE_SH:-$repo/../shared/tools/bundle.sh}
    rm -rf "$out"
    "$bundle" "$out" "$build/bin/cuda_backend_tests" "$build/bin/libyirage_backend_cuda.so"
    chmod u+w "$out"/bin/* "$out"/lib/*
    strip --strip-debug "$out"/bin/* "$out"/lib/* 2>/dev/null || true
    if [ "${PACK_NVRTC:-0}" = 1 ]; then
      mkdir -p "$out/cuda/lib64"
      nvrtc=$(ls "$cuda"/lib64/libnvrtc.so.[0-9]* | grep -v alt | sort -V | tail -1)
      builtins=$(ls "$cuda"/lib64/libnvrtc-builtins.so.[0-9]* | grep -v alt | sort -V | tail -1)
      cp -L "$nvrtc" "$builtins" "$out/cuda/lib64/"
      cp -rL "$cuda/include" "$out/cuda/include"
    fi
    du -sh "$out" | awk '{print "packed: " $1}'
    ;;
  run)
    out=${2:-$repo/build-cuda/gpu_bundle}
    filter=${3:-*}
    out=$(cd "$out" && pwd)
    host_cuda=${CUDA_HOME:-/usr/local/cuda}
    if [ -e "$host_cuda/include/cuda_fp16.h" ] && ls "$host_cuda"/lib64/libnvrtc.so.* >/dev/null 2>&1; then
      export CUDA_HOME=$host_cuda
    elif [ -d "$out/cuda/lib64" ]; then
      export CUDA_HOME=$out/cuda
      export YIRAGE_NVRTC_LIBRARY=$(ls "$out"/cuda/lib64/libnvrtc.so.* | head -1)
      export LD_LIBRARY_PATH="$out/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    else
      echo "no CUDA toolkit (NVRTC + headers) on this host: set CUDA_HOME or pack with PACK_NVRTC=1" >&2
      exit 1
    fi
    export YIRAGE_CUDA_BACKEND_LIB=$out/lib/libyirage_backend_cuda.so
    export YIRAGE_SOURCE_DIR=$repo
    echo "== host"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || true
    echo "CUDA_HOME=$CUDA_HOME"
    echo "== probe"
    "$out/run" cuda_backend_tests --gtest_filter='CudaBackendTest.Probe*' 2>&1 | grep '\[ probe' || true
    echo "== tests ($filter)"
    "$out/run" cuda_backend_tests --gtest_filter="$filter" --gtest_color=no 2>&1 |
      grep -v '^Running main' | cut -c1-2000
    ;;
  *)
    sed -n '2,19p' "$0"
    exit 2
    ;;
esac
