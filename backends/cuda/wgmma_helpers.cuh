
#ifndef YR_WGMMA_HELPERS
#define YR_WGMMA_HELPERS
// Shared-memory matrix descriptor: start address, leading and stride byte
// offsets (in 16-byte units), 128-byte swizzle.
static __device__ __forceinline__ unsigned long long yr_wg_desc(const void* p, unsigned lbo,
                                                                unsigned sbo) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  return (unsigned long long)((a & 0x3FFFFu) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
static __device__ __forceinline__ void yr_wg_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void yr_wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
static __device__ __forceinline__ void yr_wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
static __device__ __forceinline__ void yr_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
static __device__ __forceinline__ void yr_wg_fence_operands(float* d, int n) {
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Scores of columns from `tail` on (keys past the end in an attention's
// last tile) out of a softmax's max: -inf, or +inf under a negative scale
// (whose min is the max). s is a 64 x N accumulator (N / 2 floats a thread:
// this lane's columns are 8 j + 2 (lane % 4) + e at s[4 j + 2 h + e]); the
// caller zeroes those columns' exponentials.
template <int N>
static __device__ __forceinline__ void yr_wg_mask_tail(float* s, int tail, float scale) {
  const float out = scale < 0.0f ? __int_as_float(0x7f800000) : -__int_as_float(0x7f800000);
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    const int c = 8 * j + 2 * (lane % 4);
    if (c >= tail) s[4 * j] = s[4 * j + 2] = out;
    if (c + 1 >= tail) s[4 * j + 1] = s[4 * j + 3] = out;
  }
}
#ifndef __cuda_cuda_h__
// NVRTC has no cuda.h: the driver's opaque tensor map (128 bytes, which
// the host fills with cuTensorMapEncodeTiled).
typedef struct CUtensorMap_st {
  alignas(64) unsigned long long opaque[16];
} CUtensorMap;
#endif

// TMA (cp.async.bulk.tensor) and the mbarrier operations around it.
// Shared addresses are CTA-relative; in a cluster, a multicast copy lands
// at the same offset in each block of `mask` and completes the mbarrier at
// the same offset in each. `tmap`: the generic address of a CUtensorMap
// (a __grid_constant__ kernel parameter, or global memory).
static __device__ __forceinline__ void yr_mbar_arrive_expect_tx(unsigned long long* bar,
                                                                unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(bar))),
               "r"(bytes)
               : "memory");
}
// An arrival on the mbarrier at `bar`'s offset in cluster block `rank`,
// with the default release.cta semantics (what a consumer releasing a
// buffer to the copy engine needs; .release.cluster costs a MEMBAR.GPU).
static __device__ __forceinline__ void yr_mbar_arrive_cluster(unsigned long long* bar,
                                                              unsigned rank) {
  asm volatile(
      "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(
          static_cast<unsigned>(__cvta_generic_to_shared(bar))),
      "r"(rank)
      : "memory");
}
// Makes mbarrier.init visible to the copy engine and the cluster's other
// blocks (before the block or cluster barrier that publishes them).
static __device__ __forceinline__ void yr_fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
static __device__ __forceinline__ void yr_prefetch_tmap(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(tmap))
               : "memory");
}
// The box at (c0, c1) (innermost coordinate first; past the tensor's edges
// it reads zeros) to `dst`, its bytes counted on `bar`.
static __device__ __forceinline__ void yr_tma_load_2d(void* dst, const void* tmap, int c0, int c1,
                                                      unsigned long long* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
      "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(c0), "r"(c1),
      "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar)))
      : "memory");
}
// The box at (c0, c1, c2) of a 3-D tensor map (innermost first; past any
// dim's edge it reads zeros, so a batch entry's box never reads the next's).
static __device__ __forceinline__ void yr_tma_load_3d(void* dst, const void* tmap, int c0, int c1,
                                                      int c2, unsigned long long* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          static_cast<unsigned>(__cvta_generic_to_shared(dst))),
      "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(c0), "r"(c1), "r"(c2),
      "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar)))
      : "memory");
}
static __device__ __forceinline__ void yr_tma_load_2d_multicast(void* dst, const void* tmap, int c0,
                                                                int c1, unsigned long long* bar,
                                                                unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(
          static_cast<unsigned>(__cvta_generic_to_shared(dst))),
      "l"(reinterpret_cast<unsigned long long>(tmap)), "r"(c0), "r"(c1),
      "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))), "h"(mask)
      : "memory");
}
// mbarriers (shared memory, 8 bytes each), named barriers and setmaxnreg.
static __device__ __forceinline__ void yr_mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(yr_smem_addr(bar)), "r"(count)
               : "memory");
}
static __device__ __forceinline__ void yr_mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(yr_smem_addr(bar))
               : "memory");
}
// Spins until the phase of parity `parity` has completed.
static __device__ __forceinline__ void yr_mbar_wait(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred p;\nYR_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra YR_MBAR_WAIT;\n}\n" ::"r"(yr_smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// An arrival on `bar` once all of this thread's earlier cp.async copies have
// landed (the barrier's expected count includes it: noinc).
static __device__ __forceinline__ void yr_cp_async_mbar_arrive(unsigned long long* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(yr_smem_addr(bar))
               : "memory");
}
static __device__ __forceinline__ void yr_named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
static __device__ __forceinline__ void yr_named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
template <int N>
static __device__ __forceinline__ void yr_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
static __device__ __forceinline__ void yr_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
#endif
