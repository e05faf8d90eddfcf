// Reductions over a middle axis (bench/micro/run.sh reduce_columns): an
// O x D x I fp16 tensor summed over D into O x I floats, by launch shape,
// timed like bench/cuda_vs_torch.py (timing.cuh). The kernel is the shape of
// the CUDA backend's column reduction (cuda_generic_kernel.cc): a block takes
// CX 16-byte column vectors of one slab and RY row lanes, each lane keeping U
// loads in flight; the rows of a slab split over S blocks, whose partials the
// last block of a tile to finish (a per-tile counter) adds in split order.
// The backend chooses S for about 32 blocks a multiprocessor; this times S
// for 4 to 64 blocks a multiprocessor, U and the block size, and a flat read of the same
// bytes (every thread summing 16-byte loads, one wave) as the floor of the
// method. Every shape is checked against a float64 host sum before it is timed.
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

__device__ __forceinline__ void add8(float* acc, uint4 v) {
  const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    acc[2 * i] += f.x;
    acc[2 * i + 1] += f.y;
  }
}

// grid (O * tiles, S); I % 8 == 0, CX * 8 <= I.
template <int CX, int RY, int U>
__global__ void __launch_bounds__(CX* RY)
    colsum(const __half* __restrict__ x, int d, int inner, int rows_per, int splits,
           float* __restrict__ ws, unsigned* __restrict__ counters, float* __restrict__ out,
           long long total) {
  __shared__ float part[RY][CX * 8];
  __shared__ unsigned last_block;
  const int cv = inner / 8;
  const int tiles = (cv + CX - 1) / CX;
  const int cxi = threadIdx.x % CX, ryi = threadIdx.x / CX;
  const long long o = blockIdx.x / tiles;
  const int cb = (blockIdx.x % tiles) * CX;
  const int r0 = blockIdx.y * rows_per;
  const int r1 = min(r0 + rows_per, d);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (cb + cxi < cv) {
    const __half* p = x + o * (long long)d * inner + (long long)(cb + cxi) * 8;
    for (int r = r0 + ryi; r < r1; r += RY * U) {
      uint4 raw[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (r + u * RY < r1) raw[u] = ldnc(p + (long long)(r + u * RY) * inner);
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (r + u * RY < r1) add8(acc, raw[u]);
    }
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) part[ryi][cxi * 8 + k] = acc[k];
  __syncthreads();
  for (int e = threadIdx.x; e < CX * 8; e += CX * RY) {
    const long long col = (long long)cb * 8 + e;
    if (col >= inner) continue;
    float v = part[0][e];
    for (int y = 1; y < RY; ++y) v += part[y][e];
    if (splits == 1) {
      out[o * inner + col] = v;
    } else {
      ws[((long long)blockIdx.y * (total / inner) + o) * inner + col] = v;
    }
  }
  if (splits == 1) return;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(&counters[blockIdx.x], 1u) == splits - 1u;
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  for (int e = threadIdx.x; e < CX * 8; e += CX * RY) {
    const long long col = (long long)cb * 8 + e;
    if (col >= inner) continue;
    const float* w = ws + o * inner + col;
    float v = __ldcg(w);
    for (int s = 1; s < splits; ++s) v += __ldcg(w + s * total);
    out[o * inner + col] = v;
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = 0u;
}

// The floor: one wave of blocks reading `n` halves flat, 16 bytes a load,
// U loads in flight; one float a block stored.
template <int U>
__global__ void __launch_bounds__(512) flatsum(const __half* __restrict__ x, long long n,
                                               float* __restrict__ out) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const long long vecs = n / 8;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < vecs; i += stride * U) {
    uint4 raw[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * stride < vecs) raw[u] = ldnc(x + (i + u * stride) * 8);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * stride < vecs) add8(acc, raw[u]);
  }
  float s = 0;
  for (int k = 0; k < 8; ++k) s += acc[k];
  if (s == 12345.678f) out[blockIdx.x] = s;  // keeps the loads
}

struct Problem {
  int o, d, inner;
  __half* x;
  float* ws;
  unsigned* counters;
  float* out;
  std::vector<double> want;
};

template <int CX, int RY, int U>
void Time(Problem& p, int sms, int per_sm, const char* why) {
  // Splits for about per_sm blocks a multiprocessor (the backend: 32, each
  // lane taking at least 4 rows), at most 256.
  const int cv = p.inner / 8;
  const int tiles = p.o * ((cv + CX - 1) / CX);
  int splits = std::max(1, std::min({(per_sm * sms + tiles - 1) / tiles,
                                     std::max(1, p.d / (RY * 4)), 256}));
  const int rows_per = (p.d + splits - 1) / splits;
  splits = (p.d + rows_per - 1) / rows_per;
  const long long total = (long long)p.o * p.inner;
  auto launch = [&] {
    colsum<CX, RY, U><<<dim3(tiles, splits), CX * RY>>>(p.x, p.d, p.inner, rows_per, splits, p.ws,
                                                        p.counters, p.out, total);
  };
  CK(cudaMemset(p.out, 0, total * 4));
  launch();
  CK(cudaDeviceSynchronize());
  std::vector<float> got(total);
  CK(cudaMemcpy(got.data(), p.out, total * 4, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (long long i = 0; i < total; ++i) {
    worst = std::max(worst, std::fabs(got[i] - p.want[i]) / (1 + std::fabs(p.want[i])));
  }
  if (worst > 1e-3) {
    printf("CX %d RY %d U %d S %d: WRONG (relative error %.3g)\n", CX, RY, U, splits, worst);
    exit(1);
  }
  const float us = FlushedMedianUs(launch, 50, 5);
  const double bytes = (double)p.o * p.d * p.inner * 2;
  printf("  CX %2d RY %2d (%4d threads) U %d S %3d (%5d blocks, %5.1f a SM)  %8.2f us  %5.2f TB/s  %s\n",
         CX, RY, CX * RY, U, splits, tiles * splits, (double)tiles * splits / sms, us,
         bytes / us / 1e6, why);
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int shapes[][3] = {{128, 4096, 256}, {16, 4096, 4096}, {1, 65536, 1024}};
  for (const auto& s : shapes) {
    Problem p{s[0], s[1], s[2]};
    const long long n = (long long)p.o * p.d * p.inner;
    std::vector<__half> h(n);
    p.want.assign((size_t)p.o * p.inner, 0.0);
    uint32_t seed = 12345;
    for (long long i = 0; i < n; ++i) {
      seed = seed * 1664525u + 1013904223u;
      const float v = ((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
      h[i] = __float2half(v);
      const long long o = i / ((long long)p.d * p.inner), c = i % p.inner;
      p.want[o * p.inner + c] += (double)__half2float(h[i]);
    }
    CK(cudaMalloc(&p.x, n * 2));
    CK(cudaMemcpy(p.x, h.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&p.ws, (size_t)256 * p.o * p.inner * 4));
    CK(cudaMalloc(&p.counters, 1 << 20));
    CK(cudaMemset(p.counters, 0, 1 << 20));
    CK(cudaMalloc(&p.out, (size_t)p.o * p.inner * 4 + 4 * 65536));
    printf("== sum over D of %d x %d x %d fp16 (%.1f MB), %d SMs\n", p.o, p.d, p.inner,
           n * 2 / 1e6, sms);
    for (int u : {4, 8}) {
      auto flat = [&] {
        if (u == 4) flatsum<4><<<sms * 4, 512>>>(p.x, n, p.out);
        else flatsum<8><<<sms * 4, 512>>>(p.x, n, p.out);
      };
      const float us = FlushedMedianUs(flat, 50, 5);
      printf("  flat read, U %d, one wave                                     %8.2f us  %5.2f TB/s\n",
             u, us, n * 2 / us / 1e6);
    }
    Time<32, 8, 4>(p, sms, 32, "(the backend's shape)");
    for (int per_sm : {4, 8, 16, 64}) Time<32, 8, 4>(p, sms, per_sm, "");
    for (int per_sm : {8, 16, 32}) {
      Time<32, 8, 8>(p, sms, per_sm, "");
      Time<32, 8, 2>(p, sms, per_sm, "");
      Time<32, 16, 4>(p, sms, per_sm, "");
      Time<32, 16, 2>(p, sms, per_sm, "");
      Time<16, 16, 4>(p, sms, per_sm, "");
      Time<32, 32, 2>(p, sms, per_sm, "");
    }
    CK(cudaFree(p.x));
    CK(cudaFree(p.ws));
    CK(cudaFree(p.counters));
    CK(cudaFree(p.out));
  }
  return 0;
}
