// Shared-memory fills of decode kernels (bench/micro/run.sh), copies only (no
// math), timed like bench/cuda_vs_torch.py times kernels: the L2 flushed by a
// 512 MiB write before each launch, the GPU idle ~100 us so that the launch
// is queued, CUDA events around it, median of 100. Each row prints its time
// and its ratio to the first row of its part.
//
// 1. LoRA's fill (X 16 x 256, W 256 x 4096, A 256 x 16, fp16; 64 blocks of
//    64 columns, every chunk in flight at once, as the streamed matmul's
//    shared-memory form issues it when the ring holds all of K):
//      swizzled, weights first    - the order from 87dbd0c to 585ed30 (the
//                                   backend now loads X and A into
//                                   registers first, then copies the weights)
//      swizzled, chunk by chunk   - each chunk's X, W and A copies in turn,
//                                   a group a chunk (the order before 87dbd0c)
//      padded, chunk by chunk     - rows padded by 8 halves (before 2b59d89)
//    In a harness on an H200 (2026-11-30: the generated kernel itself, with
//    its math) the three measured 6.2-6.4, 7.0 and 7.0 us. This file, copies
//    only, measured 5.02, 5.47 and 6.18 us there (an empty kernel 2.85).
// 2. Attention-shaped streams (gqa_decode b1: K and V of 2 x 4096 keys x 64,
//    fp16, each key slice read by 4 blocks of query rows): the same bytes
//    through a 4-stage ring of 64-key tiles, with 8, 16 or 32 key splits
//    (64, 128 or 256 blocks, 128, 64 or 32 KiB each). Whether the time
//    follows the bytes per block says whether more splits (a merge beyond
//    one 8-block cluster) would pay. On the H200: 7.01, 5.70 and 5.06 us;
//    gqa_decode b1 now takes 16 splits merged in the kernel.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "timing.cuh"

namespace {

__device__ __forceinline__ unsigned SmemAddr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void Copy16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SmemAddr(dst)), "l"(src)
               : "memory");
}
__device__ __forceinline__ void Commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void WaitGroups() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Offset of element (r, c) in rows of W halves: swizzled 16-byte chunks
// (the backend's yr_swz for power-of-two chunk counts) or padded rows.
template <int W, bool kSwizzle>
__device__ __forceinline__ int Offset(int r, int c) {
  if constexpr (kSwizzle) {
    constexpr int C = W / 8, RPL = C >= 8 ? 1 : 8 / C;
    return r * W + ((((c >> 3) ^ (r / RPL)) & (C - 1)) << 3) + (c & 7);
  } else {
    return r * (W + 8) + c;
  }
}

// Keeps the fill observable: one element per thread to global memory.
__device__ __forceinline__ void Touch(const __half* sm, __half* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = sm[threadIdx.x * 8];
}

constexpr int kM = 16, kK = 256, kN = 4096, kR = 16, kBk = 64, kBn = 64, kChunks = kK / kBk;

// LoRA: stage t holds X[:, t*64..], W[t*64.., n0..n0+64), A[t*64.., :].
template <bool kSwizzle, bool kWeightsFirst>
__global__ void __launch_bounds__(128)
    LoraFill(const __half* x, const __half* w, const __half* a, __half* out) {
  extern __shared__ __align__(128) __half sm[];
  constexpr int LX = kSwizzle ? kBk : kBk + 8, LW = kSwizzle ? kBn : kBn + 8;
  constexpr int LA = kSwizzle ? kR : kR + 8;
  constexpr int kStage = kM * LX + kBk * LW + kBk * LA;
  const int n0 = blockIdx.x * kBn;
  auto weights = [&](int t) {
    __half* ws = sm + t * kStage + kM * LX;
    for (int i = threadIdx.x; i < kBk * (kBn / 8); i += 128) {
      const int r = i / (kBn / 8), c = (i % (kBn / 8)) * 8;
      Copy16(ws + Offset<kBn, kSwizzle>(r, c), w + (long long)(t * kBk + r) * kN + n0 + c);
    }
  };
  auto copy_x = [&](int t) {
    __half* xs = sm + t * kStage;
    for (int i = threadIdx.x; i < kM * (kBk / 8); i += 128) {
      const int r = i / (kBk / 8), c = (i % (kBk / 8)) * 8;
      Copy16(xs + Offset<kBk, kSwizzle>(r, c), x + r * kK + t * kBk + c);
    }
  };
  auto copy_a = [&](int t) {
    __half* as = sm + t * kStage + kM * LX + kBk * LW;
    for (int i = threadIdx.x; i < kBk * (kR / 8); i += 128) {
      const int r = i / (kR / 8), c = (i % (kR / 8)) * 8;
      Copy16(as + Offset<kR, kSwizzle>(r, c), a + (t * kBk + r) * kR + c);
    }
  };
  if constexpr (kWeightsFirst) {
    for (int t = 0; t < kChunks; ++t) weights(t);
    for (int t = 0; t < kChunks; ++t) {
      copy_x(t);
      copy_a(t);
    }
    Commit();
  } else {
    for (int t = 0; t < kChunks; ++t) {
      copy_x(t);
      weights(t);
      copy_a(t);
      Commit();
    }
  }
  WaitGroups<0>();
  __syncthreads();
  Touch(sm, out);
}

// Attention: block (unit, split) streams keys [split*NS, (split+1)*NS) of its
// batch's K (64 x 4096, keys contiguous per row of d) and V (4096 x 64)
// through a ring of kStages stages of 64-key K and V tiles.
constexpr int kD = 64, kKeys = 4096, kBatch = 2, kUnits = 4, kTile = 64, kStages = 4;
template <int kSplits>
__global__ void __launch_bounds__(128)
    AttentionFill(const __half* k, const __half* v, __half* out) {
  extern __shared__ __align__(128) __half sm[];
  constexpr int NS = kKeys / kSplits, kSteps = NS / kTile, kStage = 2 * kTile * kD;
  const int batch = blockIdx.y, split = blockIdx.z;
  const __half* kb = k + (long long)batch * kD * kKeys;
  const __half* vb = v + (long long)batch * kKeys * kD;
  auto load = [&](int s) {
    __half* ks = sm + (s % kStages) * kStage;
    __half* vs = ks + kTile * kD;
    const int key0 = split * NS + s * kTile;
    for (int i = threadIdx.x; i < kD * (kTile / 8); i += 128) {  // K: d rows of 64 keys
      const int r = i / (kTile / 8), c = (i % (kTile / 8)) * 8;
      Copy16(ks + Offset<kTile, true>(r, c), kb + (long long)r * kKeys + key0 + c);
    }
    for (int i = threadIdx.x; i < kTile * (kD / 8); i += 128) {  // V: 64 keys of d
      const int r = i / (kD / 8), c = (i % (kD / 8)) * 8;
      Copy16(vs + Offset<kD, true>(r, c), vb + (long long)(key0 + r) * kD + c);
    }
  };
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < kSteps) load(s);
    Commit();
  }
  float acc = 0.0f;
  for (int s = 0; s < kSteps; ++s) {
    WaitGroups<kStages - 2>();
    __syncthreads();
    acc += __half2float(sm[(s % kStages) * kStage + threadIdx.x * 8]);
    __syncthreads();  // the stage is free before it is refilled
    if (s + kStages - 1 < kSteps) load(s + kStages - 1);
    Commit();
  }
  out[((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * 128 + threadIdx.x] =
      __float2half(acc);
}

template <typename Kernel>
void SetSmem(Kernel kernel, int bytes) {
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

int LoraSmem(bool swizzle) {
  const int lx = swizzle ? kBk : kBk + 8, lw = swizzle ? kBn : kBn + 8, la = swizzle ? kR : kR + 8;
  return kChunks * (kM * lx + kBk * lw + kBk * la) * 2;
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  __half *x, *w, *a, *k, *v, *out;
  CK(cudaMalloc(&x, kM * kK * 2));
  CK(cudaMalloc(&w, (size_t)kK * kN * 2));
  CK(cudaMalloc(&a, kK * kR * 2));
  CK(cudaMalloc(&k, (size_t)kBatch * kD * kKeys * 2));
  CK(cudaMalloc(&v, (size_t)kBatch * kKeys * kD * 2));
  CK(cudaMalloc(&out, 1 << 20));
  CK(cudaMemset(x, 0, kM * kK * 2));
  CK(cudaMemset(w, 0, (size_t)kK * kN * 2));
  CK(cudaMemset(a, 0, kK * kR * 2));
  CK(cudaMemset(k, 0, (size_t)kBatch * kD * kKeys * 2));
  CK(cudaMemset(v, 0, (size_t)kBatch * kKeys * kD * 2));
  const float empty = FlushedMedianUs([] { IdleKernel<<<1, 32>>>(0); }, 100, 5);
  printf("empty kernel                        %7.2f us\n", empty);

  printf("-- LoRA fill: 64 blocks, X, W and A of all 4 chunks in flight\n");
  struct LoraRow {
    const char* name;
    void (*kernel)(const __half*, const __half*, const __half*, __half*);
    bool swizzle;
  };
  const LoraRow lora[] = {
      {"swizzled, weights first", LoraFill<true, true>, true},
      {"swizzled, chunk by chunk", LoraFill<true, false>, true},
      {"padded, chunk by chunk", LoraFill<false, false>, false},
  };
  float lora_base = 0.0f;
  for (const LoraRow& row : lora) {
    const int smem = LoraSmem(row.swizzle);
    SetSmem(row.kernel, smem);
    const float us =
        FlushedMedianUs([&] { row.kernel<<<kN / kBn, 128, smem>>>(x, w, a, out); }, 100, 5);
    if (lora_base == 0.0f) lora_base = us;
    printf("%-36s%7.2f us  %5.2fx of the first row\n", row.name, us, us / lora_base);
  }

  printf("-- gqa_decode b1 streams: 4 x 2 query blocks, 4-stage ring of 64-key K and V tiles\n");
  struct AttnRow {
    const char* name;
    void (*kernel)(const __half*, const __half*, __half*);
    int splits;
  };
  const AttnRow attn[] = {
      {"8 splits (64 blocks, 128 KiB each)", AttentionFill<8>, 8},
      {"16 splits (128 blocks, 64 KiB each)", AttentionFill<16>, 16},
      {"32 splits (256 blocks, 32 KiB each)", AttentionFill<32>, 32},
  };
  float attn_base = 0.0f;
  for (const AttnRow& row : attn) {
    const int smem = kStages * 2 * kTile * kD * 2;
    SetSmem(row.kernel, smem);
    const dim3 grid(kUnits, kBatch, row.splits);
    const float us = FlushedMedianUs([&] { row.kernel<<<grid, 128, smem>>>(k, v, out); }, 100, 5);
    if (attn_base == 0.0f) attn_base = us;
    printf("%-36s%7.2f us  %5.2fx of 8 splits\n", row.name, us, us / attn_base);
  }
  return 0;
}
