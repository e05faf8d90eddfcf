// L2 policy of a streamed weight read (bench/micro/run.sh): the streamed
// matmul's shared-memory form reads tiles of two 4096 x 4096 fp16 weights
// (gated_mlp's 64 MiB) with cp.async into a ring of shared-memory stages,
// and nothing else (no math), timed like bench/cuda_vs_torch.py times
// kernels (the L2 flushed by a 512 MiB write before each launch, the GPU
// idle ~100 us so that the launch is queued, CUDA events around it, median
// of 60):
//   default     - cp.async.cg, the default L2 policy
//   evict_first - cp.async.cg with an L2::cache_hint from
//                 createpolicy.fractional.L2::evict_first (what the backend
//                 emits for weights, cuda_codegen.cc yr_cp_async16_stream)
//   flat        - a grid-stride read of 16-byte vectors with ld.global.cs
// for several tile shapes (K rows x N columns of each weight per stage, K
// splits across blocks). The empty kernel is the floor of the method.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "timing.cuh"

typedef long long i64;
constexpr int kK = 4096, kN = 4096;

__device__ __forceinline__ unsigned SharedAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

template <bool kEvictFirst>
__device__ __forceinline__ void Copy16(void* dst, const void* src, unsigned long long policy) {
  if (kEvictFirst) {
    asm volatile(
        "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(SharedAddress(dst)),
        "l"(src), "l"(policy)
        : "memory");
  } else {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SharedAddress(dst)), "l"(src)
                 : "memory");
  }
}

// Block (tile, split) streams rows [split * K / SPLITS, ...) x columns
// [tile * BN, ...) of both weights through STAGES stages of BK rows.
template <bool kEvictFirst, int BK, int BN, int SPLITS, int STAGES, int NT>
__global__ void __launch_bounds__(NT, 1)
    stream_tiles(const __half* __restrict__ w1, const __half* __restrict__ w2, unsigned* sink) {
  constexpr int KS = kK / SPLITS, CHUNKS = KS / BK, LW = BN + 8, STAGE = 2 * BK * LW;
  extern __shared__ __align__(128) unsigned char smem[];
  __half* const sm = reinterpret_cast<__half*>(smem);
  unsigned long long policy = 0;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  const int tid = threadIdx.x, n0 = blockIdx.x * BN, kbase = blockIdx.y * KS;
  auto load = [&](int t, int st) {
    __half* const s = sm + st * STAGE;
    const int k0 = kbase + t * BK;
#pragma unroll
    for (int x = tid; x < BK * (BN / 8); x += NT) {
      const int r = x / (BN / 8), c = (x % (BN / 8)) * 8;
      Copy16<kEvictFirst>(s + r * LW + c, w1 + (i64)(k0 + r) * kN + n0 + c, policy);
      Copy16<kEvictFirst>(s + BK * LW + r * LW + c, w2 + (i64)(k0 + r) * kN + n0 + c, policy);
    }
  };
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < CHUNKS) load(s, s);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
  unsigned acc = 0;
  for (int t = 0; t < CHUNKS; ++t) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2) : "memory");
    __syncthreads();
    if (t + STAGES - 1 < CHUNKS) load(t + STAGES - 1, (t + STAGES - 1) % STAGES);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    acc += reinterpret_cast<const unsigned*>(sm + (t % STAGES) * STAGE)[tid];
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void flat_read(const uint4* p, i64 n, unsigned* sink) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;
       i += (i64)gridDim.x * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc.x ^= v.x;
    acc.y ^= v.y;
    acc.z ^= v.z;
    acc.w ^= v.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x12345678u) *sink = 1;
}

// The method of bench/cuda_vs_torch.py, median of 60 after 3.
template <typename F>
float MedianUs(F launch) {
  return FlushedMedianUs(launch, 60, 3);
}

__half *g_w1, *g_w2;
unsigned* g_sink;

template <bool kEvictFirst, int BK, int BN, int SPLITS, int STAGES, int NT>
void Run() {
  constexpr int smem = STAGES * 2 * BK * (BN + 8) * 2;
  auto k = stream_tiles<kEvictFirst, BK, BN, SPLITS, STAGES, NT>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(kN / BN, SPLITS);
  const float us = MedianUs([&] { k<<<grid, NT, smem>>>(g_w1, g_w2, g_sink); });
  printf(
      "%-12s rows %3d cols %3d splits %2d stages %d threads %3d blocks %4d: %7.2f us  %5.2f TB/s\n",
      kEvictFirst ? "evict_first" : "default", BK, BN, SPLITS, STAGES, NT, grid.x * grid.y, us,
      2.0 * kK * kN * 2 / (us * 1e-6) / 1e12);
}

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  const i64 elems = i64{kK} * kN;
  CK(cudaMalloc(&g_w1, elems * 2 * 2));
  g_w2 = g_w1 + elems;
  CK(cudaMemset(g_w1, 0x3c, elems * 2 * 2));
  CK(cudaMalloc(&g_sink, 4));
  printf("empty kernel: %.2f us\n", MedianUs([&] { IdleKernel<<<1, 1>>>(0); }));
  printf("flat read:    %.2f us\n", MedianUs([&] {
           flat_read<<<132 * 4, 1024>>>(reinterpret_cast<const uint4*>(g_w1), elems * 2 * 2 / 16,
                                        g_sink);
         }));
  // The gated_mlp b8 kernel's tiles (64 x 64, 2 splits, 8 warps), then other
  // shapes.
  Run<false, 64, 64, 2, 4, 256>();
  Run<true, 64, 64, 2, 4, 256>();
  Run<false, 64, 64, 2, 8, 256>();
  Run<true, 64, 64, 2, 8, 256>();
  Run<false, 64, 128, 4, 4, 256>();
  Run<true, 64, 128, 4, 4, 256>();
  Run<false, 32, 256, 8, 5, 512>();
  Run<true, 32, 256, 8, 5, 512>();
  Run<false, 64, 64, 8, 4, 256>();
  Run<true, 64, 64, 8, 4, 256>();
  return 0;
}
