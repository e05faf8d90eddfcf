
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
#endif
