// HBM read floor and access patterns (bench/micro/run.sh): how fast this GPU
// reads 2 x 4096 x 4096 fp16 weights (gated_mlp's 64 MiB) when timed like
// bench/cuda_vs_torch.py times kernels (CUDA events around one launch, the
// L2 flushed by a 256 MiB write before each, median of 20):
//   flat    - a grid-stride read of 16-byte vectors (U loads in flight a thread)
//   tiles64 - the streamed matmul's registers form: each warp reads 16-row
//             steps of 64 (or 128) columns of both weights, K split across
//             warps and blocks
//   rows256 - warps reading 512-byte row segments
// Prints time and TB/s per pattern and launch shape; the empty kernel is
// the floor of the method.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "timing.cuh"

__global__ void flushk(int4* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = make_int4((int)i, 1, 2, 3);
}
__device__ __forceinline__ uint4 lds(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 ldplain(const void* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

template <int U>
__global__ void flat(const uint4* __restrict__ p, size_t n, unsigned* out) {
  unsigned acc = 0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      v[u] = (i + u * stride < n) ? lds(p + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// Our pattern: two K x N weights; block = WB warps over a 8*VL*8-col tile... lane (g,c):
// cols tile*BN + VL*8*g .. (VL 16B loads across columns), rows 4c..4c+3 of each 16-row step.
// Per warp: KW rows. U steps loaded, then consumed.
template <int VL, int U, int NWT>
__global__ void tiles(const uint16_t* __restrict__ w1, const uint16_t* __restrict__ w2, int K,
                      int N, int splits, int WB, unsigned* out) {
  const int BN = 64 * VL;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int KS = K / splits, KW = KS / WB, STEPS = KW / 16;
  const int tile = blockIdx.x, split = blockIdx.y;
  const int k0 = split * KS + warp * KW + 4 * c;
  const uint16_t* p1 = w1 + (size_t)k0 * N + tile * BN + 8 * VL * g;
  const uint16_t* p2 = w2 + (size_t)k0 * N + tile * BN + 8 * VL * g;
  unsigned acc = 0;
  for (int s = 0; s < STEPS; s += U) {
    uint4 v[U][NWT][4][VL];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < VL; ++j) {
          const size_t off = (size_t)(16 * (s + u) + i) * N + 8 * j;
          v[u][0][i][j] = lds(p1 + off);
          if (NWT == 2) v[u][NWT - 1][i][j] = lds(p2 + off);
        }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int w = 0; w < NWT; ++w)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < VL; ++j)
            acc ^= v[u][w][i][j].x ^ v[u][w][i][j].y ^ v[u][w][i][j].z ^ v[u][w][i][j].w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// Row-major wide pattern: a warp reads whole 512B row segments (lane = 16 B of one row).
template <int U, int NWT>
__global__ void rows(const uint16_t* __restrict__ w1, const uint16_t* __restrict__ w2, int K, int N,
                     int splits, int WB, unsigned* out) {
  const int BN = 256;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int KS = K / splits, KW = KS / WB;
  const int tile = blockIdx.x, split = blockIdx.y;
  const int k0 = split * KS + warp * KW;
  const uint16_t* p1 = w1 + (size_t)k0 * N + tile * BN + 8 * lane;
  const uint16_t* p2 = w2 + (size_t)k0 * N + tile * BN + 8 * lane;
  unsigned acc = 0;
  for (int r = 0; r < KW; r += U) {
    uint4 v[U][NWT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      v[u][0] = lds(p1 + (size_t)(r + u) * N);
      if (NWT == 2) v[u][NWT - 1] = lds(p2 + (size_t)(r + u) * N);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int w = 0; w < NWT; ++w) acc ^= v[u][w].x ^ v[u][w].y ^ v[u][w].z ^ v[u][w].w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

int main() {
  const int K = 4096, N = 4096;
  const size_t wbytes = (size_t)K * N * 2;
  uint16_t *w1, *w2;
  unsigned* out;
  int4* fl;
  CK(cudaMalloc(&w1, 2 * wbytes));
  w2 = w1 + (size_t)K * N;
  CK(cudaMemset(w1, 1, 2 * wbytes));
  CK(cudaMalloc(&out, 64));
  const size_t fbytes = 256ull << 20;
  CK(cudaMalloc(&fl, fbytes));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  auto timeit = [&](const char* name, auto launch, double bytes) {
    std::vector<float> ts;
    for (int it = 0; it < 25; ++it) {
      flushk<<<1024, 256>>>(fl, fbytes / 16);
      cudaEventRecord(e0);
      launch();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      if (it >= 5) ts.push_back(ms * 1000);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end());
    float med = ts[ts.size() / 2];
    printf("%-44s %8.2f us  %6.2f TB/s\n", name, med, bytes / med / 1e6);
  };
  auto empty = [&]() { flushk<<<1, 32>>>(fl, 0); };
  timeit("empty kernel", empty, 0);
  const size_t n16 = 2 * wbytes / 16;
  char nm[128];
  for (int bpsm : {4, 8, 16, 32}) {
    int blocks = sms * bpsm;
    snprintf(nm, sizeof nm, "flat U4 256thr %d blk/sm", bpsm);
    timeit(
        nm, [&] { flat<4><<<blocks, 256>>>((const uint4*)w1, n16, out); }, 2.0 * wbytes);
    snprintf(nm, sizeof nm, "flat U8 256thr %d blk/sm", bpsm);
    timeit(
        nm, [&] { flat<8><<<blocks, 256>>>((const uint4*)w1, n16, out); }, 2.0 * wbytes);
  }
  // tiles pattern, VL=1 (64 cols), like ours: 64 tiles x splits, WB warps
  for (int WB : {4, 8})
    for (int splits : {2, 4, 8, 16}) {
      dim3 grid(N / 64, splits);
      int steps = K / splits / WB / 16;
      if (steps < 2) continue;
      snprintf(nm, sizeof nm, "tiles64 U2 WB%d S%d (blk/sm %.1f)", WB, splits,
               grid.x * grid.y / (double)sms);
      timeit(
          nm, [&] { tiles<1, 2, 2><<<grid, WB * 32>>>(w1, w2, K, N, splits, WB, out); },
          2.0 * wbytes);
      if (steps >= 4) {
        snprintf(nm, sizeof nm, "tiles64 U4 WB%d S%d", WB, splits);
        timeit(
            nm, [&] { tiles<1, 4, 2><<<grid, WB * 32>>>(w1, w2, K, N, splits, WB, out); },
            2.0 * wbytes);
      }
      dim3 grid2(N / 128, splits);
      snprintf(nm, sizeof nm, "tiles128 U2 WB%d S%d", WB, splits);
      timeit(
          nm, [&] { tiles<2, 2, 2><<<grid2, WB * 32>>>(w1, w2, K, N, splits, WB, out); },
          2.0 * wbytes);
    }
  for (int WB : {4, 8})
    for (int splits : {4, 8, 16, 32}) {
      dim3 grid(N / 256, splits);
      snprintf(nm, sizeof nm, "rows256 U8 WB%d S%d (blk/sm %.1f)", WB, splits,
               grid.x * grid.y / (double)sms);
      timeit(
          nm, [&] { rows<8, 2><<<grid, WB * 32>>>(w1, w2, K, N, splits, WB, out); }, 2.0 * wbytes);
    }
  return 0;
}
