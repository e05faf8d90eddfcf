// The K/V streams of split-KV decode attention, copies only (no math), by
// copy engine (bench/micro/run.sh): U units (batch x key/value heads), each
// with K and V of N keys x 128 16-bit elements, read through a ring of
// 64-key [K | V] tiles in shared memory, as attention_decode.cuh reads them
// (K given as [N][D]; rows padded by 8 elements). Timed like
// bench/cuda_vs_torch.py (timing.cuh); each row prints microseconds and the
// bytes over the time.
//   cp.async  - every thread copies 16-byte chunks, a group a step, STAGES-1
//               steps in flight (the decode kernel's form)
//   bulk rows - cp.async.bulk of each 256-byte row into its padded row, one
//               lane a row, completing on the stage's mbarrier (sm_90)
//   bulk tile - one cp.async.bulk of each whole 16 KiB K and V tile into
//               unpadded rows (sm_90)
// with a block a unit and key split (SPLITS blocks a unit, blockIdx.x the
// split, so that co-running blocks read neighbouring keys of one unit, or
// blockIdx.y the split, as the decode kernel's grid is laid out).
// Shape of llama3 8B decode at batch 16 (U = 128, N = 2048) and a tuned flat
// read of the same bytes for the floor.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "timing.cuh"

namespace {

constexpr int kD = 128, kBN = 64, kPad = 8, kLd = kD + kPad;

__device__ __forceinline__ unsigned SmemAddr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void CpAsync16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SmemAddr(dst)), "l"(src)
               : "memory");
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void MbarInit(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(count));
}
__device__ __forceinline__ void MbarExpect(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void MbarWait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra W;\n}\n" ::"r"(SmemAddr(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void Bulk(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(SmemAddr(dst)),
      "l"(src), "r"(bytes), "r"(SmemAddr(bar))
      : "memory");
}

// Folds a word of the stage into `acc` so the copies are used.
__device__ __forceinline__ unsigned Touch(const uint16_t* s) { return s[threadIdx.x * 8]; }

// MODE 0 cp.async, 1 bulk rows, 2 bulk tile. SPLIT_X: the split is blockIdx.x.
template <int MODE, int STAGES, bool SPLIT_X>
__global__ void Stream(const uint16_t* __restrict__ k, const uint16_t* __restrict__ v, int n,
                       int splits, unsigned* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kTileElems = MODE == 2 ? kBN * kD : kBN * kLd;
  uint16_t* ring = reinterpret_cast<uint16_t*>(smem);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + 2 * STAGES * kTileElems * 2);
  const int split = SPLIT_X ? blockIdx.x : blockIdx.y;
  const int unit = SPLIT_X ? blockIdx.y : blockIdx.x;
  const int ns = n / splits, steps = ns / kBN;
  const uint16_t* kb = k + ((int64_t)unit * n + (int64_t)split * ns) * kD;
  const uint16_t* vb = v + ((int64_t)unit * n + (int64_t)split * ns) * kD;
  const int tid = threadIdx.x, nt = blockDim.x;
  if (MODE != 0 && tid == 0) {
    for (int s = 0; s < STAGES; ++s) MbarInit(&bars[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  auto load = [&](int st) {
    uint16_t* sk = ring + (st % STAGES) * 2 * kTileElems;
    uint16_t* sv = sk + kTileElems;
    const uint16_t* gk = kb + (int64_t)st * kBN * kD;
    const uint16_t* gv = vb + (int64_t)st * kBN * kD;
    if constexpr (MODE == 0) {
      for (int c = tid; c < kBN * kD / 8; c += nt) {
        const int r = c / (kD / 8), col = (c % (kD / 8)) * 8;
        CpAsync16(sk + r * kLd + col, gk + r * kD + col);
        CpAsync16(sv + r * kLd + col, gv + r * kD + col);
      }
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    } else if constexpr (MODE == 1) {
      if (tid < 32) {
        if (tid == 0) MbarExpect(&bars[st % STAGES], 2 * kBN * kD * 2);
        __syncwarp();
        for (int r = tid; r < kBN; r += 32) {
          Bulk(sk + r * kLd, gk + r * kD, kD * 2, &bars[st % STAGES]);
          Bulk(sv + r * kLd, gv + r * kD, kD * 2, &bars[st % STAGES]);
        }
      }
    } else {
      if (tid == 0) {
        MbarExpect(&bars[st % STAGES], 2 * kBN * kD * 2);
        Bulk(sk, gk, kBN * kD * 2, &bars[st % STAGES]);
        Bulk(sv, gv, kBN * kD * 2, &bars[st % STAGES]);
      }
    }
  };
  for (int s = 0; s < STAGES - 1 && s < steps; ++s) load(s);
  if (MODE == 0) {
    for (int s = steps; s < STAGES - 1; ++s) asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
  unsigned acc = 0;
  for (int t = 0; t < steps; ++t) {
    if constexpr (MODE == 0) {
      CpAsyncWait<STAGES - 2>();
    } else {
      MbarWait(&bars[t % STAGES], (t / STAGES) & 1);
    }
    __syncthreads();  // every thread's copies of step t landed; step t - 1 is done with
    if (t + STAGES - 1 < steps) {
      load(t + STAGES - 1);
    } else if (MODE == 0) {
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    acc ^= Touch(ring + (t % STAGES) * 2 * kTileElems);
  }
  if (acc == 0x9e37u) out[0] = acc;
}

template <int MODE, int STAGES, bool SPLIT_X>
void Run(const char* name, const uint16_t* k, const uint16_t* v, int units, int n, int splits,
         int threads, unsigned* out, double bytes) {
  const int tile = MODE == 2 ? kBN * kD : kBN * kLd;
  const int smem = 2 * STAGES * tile * 2 + STAGES * 8;
  CK(cudaFuncSetAttribute(Stream<MODE, STAGES, SPLIT_X>,
                          cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid = SPLIT_X ? dim3(splits, units) : dim3(units, splits);
  const float us = FlushedMedianUs(
      [&] { Stream<MODE, STAGES, SPLIT_X><<<grid, threads, smem>>>(k, v, n, splits, out); }, 50, 3);
  printf("%-10s stages %d splits %2d (%s) threads %3d: %8.2f us  %6.2f TB/s\n", name, STAGES,
         splits, SPLIT_X ? "x" : "y", threads, us, bytes / us / 1e6);
}

template <int STAGES>
void Sweep(const uint16_t* k, const uint16_t* v, int units, int n, unsigned* out, double bytes) {
  for (int splits : {1, 2, 4, 8}) {
    Run<0, STAGES, false>("cp.async", k, v, units, n, splits, 64, out, bytes);
    Run<0, STAGES, false>("cp.async", k, v, units, n, splits, 256, out, bytes);
    Run<1, STAGES, false>("bulk rows", k, v, units, n, splits, 64, out, bytes);
    Run<2, STAGES, false>("bulk tile", k, v, units, n, splits, 64, out, bytes);
    Run<2, STAGES, true>("bulk tile", k, v, units, n, splits, 64, out, bytes);
  }
}

}  // namespace

int main() {
  for (auto [units, n] : {std::pair{128, 2048}, std::pair{64, 4096}}) {
    const size_t elems = (size_t)units * n * kD;
    uint16_t *k, *v;
    unsigned* out;
    CK(cudaMalloc(&k, elems * 2));
    CK(cudaMalloc(&v, elems * 2));
    CK(cudaMalloc(&out, 4));
    CK(cudaMemset(k, 1, elems * 2));
    CK(cudaMemset(v, 1, elems * 2));
    const double bytes = 2.0 * elems * 2;
    printf("units %d, keys %d, D %d: %.1f MB of K and V\n", units, n, kD, bytes / 1e6);
    Sweep<2>(k, v, units, n, out, bytes);
    Sweep<4>(k, v, units, n, out, bytes);
    CK(cudaFree(k));
    CK(cudaFree(v));
    CK(cudaFree(out));
  }
  return 0;
}
