// Flat elementwise kernels (bench/micro/run.sh elementwise_store): relu over
// N fp16 values, out of place, in the flat form of the row kernels (each
// thread loads U items of 8 values before it computes any, the grid covers
// the items in one round), by load kind (__ldg or L1::no_allocate) and store
// kind (plain, st.global.cs: evict-first, L1::no_allocate), timed like
// bench/cuda_vs_torch.py (timing.cuh). Prints µs and the TB/s of the bytes
// read and written; each variant's output is checked.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "timing.cuh"

__device__ __forceinline__ uint4 ld_once(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

template <int kStore>
__device__ __forceinline__ void st(void* p, uint4 v) {
  if constexpr (kStore == 0) {
    *reinterpret_cast<uint4*>(p) = v;
  } else if constexpr (kStore == 1) {
    __stcs(reinterpret_cast<uint4*>(p), v);
  } else {
    asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x),
                 "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  }
}

__device__ __forceinline__ uint4 relu8(uint4 v) {
  __half2* h = reinterpret_cast<__half2*>(&v);
  const __half2 z = __float2half2_rn(0.f);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __hmax2(h[i], z);
  return v;
}

template <bool kLdg, int kStore, int U>
__global__ void __launch_bounds__(256) relu(const uint4* __restrict__ x, uint4* __restrict__ y,
                                            long long items) {
  const long long stride = (long long)gridDim.x * 256;
  for (long long i0 = (long long)blockIdx.x * 256 + threadIdx.x; i0 < items; i0 += stride * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = i0 + u * stride;
      if (i < items) v[u] = kLdg ? __ldg(x + i) : ld_once(x + i);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = i0 + u * stride;
      if (i < items) st<kStore>(y + i, relu8(v[u]));
    }
  }
}

int main() {
  const long long sizes[] = {16LL * 16384 * 1024, 4096LL * 16384, 256LL * 14336};
  for (long long n : sizes) {
    const long long items = n / 8;
    std::vector<__half> hx(n);
    for (long long i = 0; i < n; ++i) hx[i] = __float2half((int)(i % 17) - 8.0f);
    uint4 *dx, *dy;
    CK(cudaMalloc(&dx, n * 2));
    CK(cudaMalloc(&dy, n * 2));
    CK(cudaMemcpy(dx, hx.data(), n * 2, cudaMemcpyHostToDevice));
    const double mb = n * 4.0 / 1e6;  // read and written
    printf("== relu over %lld fp16 (%.1f MB moved)\n", n, mb);
    auto run = [&](const char* name, auto kernel, int u) {
      const long long grid = (items + 256LL * u - 1) / (256LL * u);
      auto launch = [&] { kernel<<<(unsigned)grid, 256>>>(dx, dy, items); };
      CK(cudaMemset(dy, 0xff, n * 2));
      launch();
      CK(cudaDeviceSynchronize());
      std::vector<__half> hy(n);
      CK(cudaMemcpy(hy.data(), dy, n * 2, cudaMemcpyDeviceToHost));
      long long bad = 0;
      for (long long i = 0; i < n; i += 997) {
        const float want = (int)(i % 17) - 8.0f;
        if (__half2float(hy[i]) != (want > 0 ? want : 0)) ++bad;
      }
      const float us = FlushedMedianUs(launch, 30, 3);
      printf("%-24s U %d grid %8lld: %8.2f us %5.2f TB/s%s\n", name, u, grid, us, mb / us,
             bad ? "  WRONG" : "");
    };
    run("ldg, plain store", relu<true, 0, 2>, 2);
    run("once, plain store", relu<false, 0, 2>, 2);
    run("once, st.cs", relu<false, 1, 2>, 2);
    run("once, st no_allocate", relu<false, 2, 2>, 2);
    run("ldg, plain store", relu<true, 0, 4>, 4);
    run("once, plain store", relu<false, 0, 4>, 4);
    run("once, st.cs", relu<false, 1, 4>, 4);
    run("once, plain store", relu<false, 0, 1>, 1);
    run("once, st.cs", relu<false, 1, 1>, 1);
    CK(cudaFree(dx));
    CK(cudaFree(dy));
  }
  return 0;
}
