// Shared by the microbenchmarks of bench/micro: error checks and the timing
// method of bench/cuda_vs_torch.py (the L2 flushed by a 512 MiB write before
// each launch, the GPU idle ~100 us so that the launch is queued, CUDA events
// around it, the median).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                      \
  do {                                                             \
    cudaError_t e = (x);                                           \
    if (e != cudaSuccess) {                                        \
      printf("err %s line %d\n", cudaGetErrorString(e), __LINE__); \
      exit(1);                                                     \
    }                                                              \
  } while (0)

// Spins one thread for `cycles` clocks (0: an empty kernel, the method's floor).
__global__ void IdleKernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// Median microseconds of `launch` over `iters` timed calls after `warmup`.
template <typename F>
float FlushedMedianUs(F&& launch, int iters, int warmup) {
  static char* flush = nullptr;
  constexpr size_t kFlushBytes = size_t{512} << 20;
  static cudaEvent_t e0, e1;
  if (flush == nullptr) {
    CK(cudaMalloc(&flush, kFlushBytes));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
  }
  for (int i = 0; i < warmup; ++i) launch();
  CK(cudaDeviceSynchronize());
  std::vector<float> times;
  for (int i = 0; i < iters; ++i) {
    CK(cudaMemsetAsync(flush, i & 255, kFlushBytes));
    IdleKernel<<<1, 1>>>(200000);
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    times.push_back(ms * 1000);
  }
  CK(cudaGetLastError());
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}
