// Last-axis reductions (bench/micro/run.sh reduce_rows): an R x W fp16
// matrix summed along its rows into R floats, by launch shape, timed like
// bench/cuda_vs_torch.py (timing.cuh). A row is read by TPR threads (a warp
// or less with several rows a block: shuffles only; more: a shared-memory
// step), each keeping U 16-byte loads in flight a step. TPR = 1024, U = 2 is
// the register-rows kernel's shape for W = 16384. Loads are
// ld.global.nc.L1::no_allocate (yr_ld16_once), and for comparison __ldg,
// which allocates in L1. Every shape is checked against a float64 host sum
// before it is timed; prints µs and TB/s.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "timing.cuh"

__device__ __forceinline__ uint4 ldnc(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint4 ldg(const void* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

__device__ __forceinline__ float sum8(uint4 v) {
  const __half2* h = reinterpret_cast<const __half2*>(&v);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    s += f.x + f.y;
  }
  return s;
}

// Block: RPB rows of TPR threads. W % 8 == 0.
template <int TPR, int RPB, int U, bool kLdg = false>
__global__ void __launch_bounds__(TPR* RPB) rowsum(const __half* __restrict__ x, int rows, int w,
                                                   float* __restrict__ out) {
  __shared__ float red[RPB][TPR / 32 > 0 ? TPR / 32 : 1];
  const int t = threadIdx.x % TPR;
  const int rl = threadIdx.x / TPR;
  const long long r = (long long)blockIdx.x * RPB + rl;
  const bool live = r < rows;
  const uint4* p = reinterpret_cast<const uint4*>(x + (live ? r : 0) * (long long)w);
  const int chunks = w / 8;
  float acc[U];
#pragma unroll
  for (int u = 0; u < U; ++u) acc[u] = 0.f;
  for (int c0 = 0; c0 < chunks; c0 += TPR * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * TPR + t;
      v[u] = c >= chunks ? make_uint4(0, 0, 0, 0) : kLdg ? ldg(p + c) : ldnc(p + c);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] += sum8(v[u]);
  }
  float s = 0.f;
#pragma unroll
  for (int u = 0; u < U; ++u) s += acc[u];
  constexpr int kLanes = TPR < 32 ? TPR : 32;
#pragma unroll
  for (int o = kLanes / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if constexpr (TPR > 32) {
    const int wr = t / 32;
    if (t % 32 == 0) red[rl][wr] = s;
    __syncthreads();
    if (t < 32) {
      s = t < TPR / 32 ? red[rl][t] : 0.f;
#pragma unroll
      for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    }
  }
  if (live && t == 0) out[r] = s;
}

struct Shape {
  int rows, w;
};

int main() {
  const Shape shapes[] = {{4096, 16384}, {8192, 4096}, {65536, 1024}, {1024, 16384},
                          {256, 65536},  {64, 131072}, {16384, 8192}};
  for (const Shape& sh : shapes) {
    const size_t n = (size_t)sh.rows * sh.w;
    std::vector<__half> hx(n);
    uint32_t seed = 12345;
    for (size_t i = 0; i < n; ++i) {
      seed = seed * 1664525u + 1013904223u;
      hx[i] = __float2half(((seed >> 9) & 0x3fff) / 8192.0f - 1.0f);
    }
    std::vector<double> ref(sh.rows, 0.0);
    for (int r = 0; r < sh.rows; ++r)
      for (int c = 0; c < sh.w; ++c) ref[r] += __half2float(hx[(size_t)r * sh.w + c]);
    __half* dx;
    float* dout;
    CK(cudaMalloc(&dx, n * 2));
    CK(cudaMalloc(&dout, sh.rows * 4));
    CK(cudaMemcpy(dx, hx.data(), n * 2, cudaMemcpyHostToDevice));
    const double mb = n * 2.0 / 1e6;
    printf("== %d x %d fp16 (%.1f MB)\n", sh.rows, sh.w, mb);
    auto run = [&](const char* name, auto kernel, int tpr, int rpb, int u) {
      if (tpr * u * 8 > sh.w * 4 && tpr > 32) return;  // mostly idle threads
      const int grid = (sh.rows + rpb - 1) / rpb;
      auto launch = [&] { kernel<<<grid, tpr * rpb>>>(dx, sh.rows, sh.w, dout); };
      CK(cudaMemset(dout, 0, sh.rows * 4));
      launch();
      CK(cudaDeviceSynchronize());
      std::vector<float> got(sh.rows);
      CK(cudaMemcpy(got.data(), dout, sh.rows * 4, cudaMemcpyDeviceToHost));
      int bad = 0;
      for (int r = 0; r < sh.rows; ++r)
        if (std::fabs(got[r] - ref[r]) > 1e-3 * sh.w) ++bad;
      const float us = FlushedMedianUs(launch, 30, 3);
      printf("%-10s tpr %4d rows/blk %2d U %2d grid %6d: %8.2f us %5.2f TB/s%s\n", name, tpr, rpb,
             u, grid, us, mb / us, bad ? "  WRONG" : "");
    };
    run("register", rowsum<1024, 1, 2>, 1024, 1, 2);
    run("reg __ldg", rowsum<1024, 1, 2, true>, 1024, 1, 2);
    run("blk __ldg", rowsum<512, 1, 4, true>, 512, 1, 4);
    run("blk __ldg", rowsum<256, 1, 4, true>, 256, 1, 4);
    run("block", rowsum<1024, 1, 1>, 1024, 1, 1);
    run("block", rowsum<512, 1, 2>, 512, 1, 2);
    run("block", rowsum<512, 1, 4>, 512, 1, 4);
    run("block", rowsum<256, 1, 4>, 256, 1, 4);
    run("block", rowsum<256, 1, 8>, 256, 1, 8);
    run("block", rowsum<128, 1, 8>, 128, 1, 8);
    run("block", rowsum<128, 2, 8>, 128, 2, 8);
    run("block", rowsum<64, 4, 8>, 64, 4, 8);
    run("warp", rowsum<32, 4, 4>, 32, 4, 4);
    run("warp", rowsum<32, 4, 8>, 32, 4, 8);
    run("warp", rowsum<32, 8, 8>, 32, 8, 8);
    run("warp", rowsum<32, 8, 16>, 32, 8, 16);
    run("warp", rowsum<32, 16, 4>, 32, 16, 4);
    run("half", rowsum<16, 16, 8>, 16, 16, 8);
    CK(cudaFree(dx));
    CK(cudaFree(dout));
  }
  return 0;
}
