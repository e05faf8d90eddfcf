// The memory bound of bench/cuda_vs_torch.py: a kernel that only reads N
// 16-byte vectors from HBM, as fast as this GPU reads them. A grid-stride loop
// with U independent non-caching 16-byte loads in flight per thread (the form
// of bench/micro/hbm_read_patterns.cu's `flat`, the fastest read measured
// there); the launch shape (threads, blocks per SM) and U are searched by the
// benchmark, which keeps the fastest. The loads are folded into one word that
// is stored only if it equals a value no input makes, so nothing is optimized
// away and the kernel writes (almost) nothing.
// Compiled by CuPy (NVRTC); instantiated by name as hbm_read<U>.

__device__ __forceinline__ uint4 hbm_read_load(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <int U>
__global__ void hbm_read(const uint4* __restrict__ p, unsigned long long n, unsigned* out) {
  unsigned acc = 0;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  // Full rounds: U loads issued before any is used.
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = hbm_read_load(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = hbm_read_load(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}
