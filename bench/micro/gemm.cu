// The GEMM on its own (bench/micro/run.sh sm_90a gemm):
// backends/cuda/gemm_sm90.cuh's variants and gemm_sm80.cuh's (the mma.sync
// form, "mma..."), each checked against a
// float64-accumulating GPU reference on odd shapes (M 1, 7, 129, 4093; N not
// a multiple of the tile; K not a multiple of 64; both 16-bit types; B
// K x N and N x K), with C poisoned (NaN) before the launch, a row stride
// past N and guard rows (every element inside written, none outside), then
// timed next to cuBLAS (cublasGemmEx, float accumulation) by the
// benchmark's method (timing.cuh) on random data.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "timing.cuh"

// clang-format off
#include "../../backends/cuda/kernel_prelude.cuh"
#include "../../backends/cuda/wgmma_helpers.cuh"
#include "../../backends/cuda/wgmma_ops.cuh"
#include "../../backends/cuda/gemm_sm90.cuh"
#include "../../backends/cuda/gemm_sm80.cuh"
// clang-format on

#define CU(x)                                               \
  do {                                                      \
    CUresult r = (x);                                       \
    if (r != CUDA_SUCCESS) {                                \
      const char* s = nullptr;                              \
      cuGetErrorString(r, &s);                              \
      printf("cu err %s line %d\n", s ? s : "?", __LINE__); \
      exit(1);                                              \
    }                                                       \
  } while (0)
#define CB(x)                                              \
  do {                                                     \
    cublasStatus_t s = (x);                                \
    if (s != CUBLAS_STATUS_SUCCESS) {                      \
      printf("cublas err %d line %d\n", (int)s, __LINE__); \
      exit(1);                                             \
    }                                                      \
  } while (0)

// The wrapper the backend would emit around the body.
template <class Cfg, class Epi>
__global__ void __launch_bounds__(384, 1)
    Gemm(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b,
         typename Cfg::elem* c, int m, int n, int k, int ldc, Epi epi, yr_gemm_split split) {
  yr_gemm_sm90<Cfg, Epi>(a, b, c, m, n, k, ldc, epi, split);
}

// Bias add and ReLU: an epilogue that reads its column.
template <typename T>
struct BiasRelu {
  const T* bias;
  __device__ float operator()(float v, int, int col) const {
    return fmaxf(v + yr_ld(bias, col), 0.0f);
  }
};

template <typename T>
const char* TypeName() {
  return yr_is_half<T>::value ? "fp16" : "bf16";
}
template <typename T>
cudaDataType_t CudaType() {
  return yr_is_half<T>::value ? CUDA_R_16F : CUDA_R_16BF;
}

// Uniform [-1, 1) from a hash of (seed, index).
template <typename T>
__global__ void Fill(T* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 0x9E3779B1u ^ (unsigned)(i >> 32) * 0x85EBCA77u ^ seed;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    x *= 0x297A2D39u;
    x ^= x >> 15;
    yr_st(p, (i64)i, (float)(x >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}
template <typename T>
void FillRandom(T* p, size_t n, unsigned seed) {
  Fill<T><<<1024, 256>>>(p, n, seed);
  CK(cudaGetLastError());
}

// C[r, c] = sum_k A[r, k] B[k, c] in float64, one thread an element.
template <typename T, bool B_NK>
__global__ void Reference(const T* a, const T* b, double* out, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = blockIdx.y;
  if (col >= n) return;
  double s = 0;
  for (int i = 0; i < k; ++i) {
    const double x = yr_ld(a, (i64)r * k + i);
    const double y = B_NK ? yr_ld(b, (i64)col * k + i) : yr_ld(b, (i64)i * n + col);
    s += x * y;
  }
  out[(i64)r * n + col] = s;
}

static int g_sms = 0;

CUtensorMap MakeMap(const void* ptr, CUtensorMapDataType dt, uint64_t inner, uint64_t outer,
                    uint32_t box_inner, uint32_t box_outer) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {inner * 2};
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t estr[2] = {1, 1};
  CU(cuTensorMapEncodeTiled(&map, dt, 2, const_cast<void*>(ptr), dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

// One variant, ready to launch on one problem: its tensor maps, grid and
// split-K workspace (Free() releases it).
template <class Cfg, class Epi = yr_gemm_store>
struct Launch {
  using T = typename Cfg::elem;
  CUtensorMap ma, mb;
  T* c;
  int m, n, k, ldc, grid;
  Epi epi;
  yr_gemm_split split;
  Launch(const T* a, const T* b, T* c_, int m_, int n_, int k_, int ldc_, Epi e = Epi(),
         int splits = 1)
      : c(c_), m(m_), n(n_), k(k_), ldc(ldc_), epi(e) {
    split.splits = splits;
    const CUtensorMapDataType dt =
        yr_is_half<T>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    ma = MakeMap(a, dt, k, m, 64, Cfg::a_box_rows);
    mb = Cfg::b_nk ? MakeMap(b, dt, k, n, 64, Cfg::b_box_rows) : MakeMap(b, dt, n, k, 64, 64);
    auto kern = Gemm<Cfg, Epi>;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::smem_bytes));
    static int max_clusters = 0;  // per instantiation
    if (max_clusters == 0) {
      if (Cfg::cluster == 1) {
        max_clusters = g_sms;
      } else {
        cudaLaunchConfig_t lc = Config(g_sms / Cfg::cluster * Cfg::cluster);
        cudaLaunchAttribute attr;
        Cluster(&lc, &attr);
        CK(cudaOccupancyMaxActiveClusters(&max_clusters, kern, &lc));
      }
    }
    // Split-K on the last, partial wave's cluster tiles (all of them where
    // the waves come out whole), as the planner does.
    const int ctiles = yr_gemm_sm90_cluster_tiles<Cfg>(m, n);
    split.tail = ctiles % max_clusters;
    if (splits > 1) {
      const size_t tiles =
          (size_t)yr_gemm_sm90_split_tiles(ctiles, splits, split.tail) * Cfg::cluster;
      CK(cudaMalloc(&split.ws, tiles * splits * Cfg::bm * Cfg::bn * sizeof(float)));
      CK(cudaMalloc(&split.flags, tiles * 2 * sizeof(unsigned)));
      CK(cudaMemset(split.flags, 0, tiles * 2 * sizeof(unsigned)));
    }
    grid = yr_gemm_sm90_grid<Cfg>(m, n, max_clusters, splits, split.tail);
  }
  void Free() {
    if (split.ws) CK(cudaFree(split.ws));
    if (split.flags) CK(cudaFree(split.flags));
  }
  cudaLaunchConfig_t Config(int blocks) const {
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(blocks);
    lc.blockDim = dim3(Cfg::threads);
    lc.dynamicSmemBytes = Cfg::smem_bytes;
    lc.stream = 0;
    return lc;
  }
  static void Cluster(cudaLaunchConfig_t* lc, cudaLaunchAttribute* attr) {
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = Cfg::cluster;
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    lc->attrs = attr;
    lc->numAttrs = 1;
  }
  void operator()() const {
    cudaLaunchConfig_t lc = Config(grid);
    cudaLaunchAttribute attr;
    if (Cfg::cluster > 1) Cluster(&lc, &attr);
    CK(cudaLaunchKernelEx(&lc, Gemm<Cfg, Epi>, ma, mb, c, m, n, k, ldc, epi, split));
  }
};

// The sm_80 form's wrapper and launch (a block a tile, or a K range of one
// with `splits` > 1: every tile split alike).
template <class Cfg, class Epi>
__global__ void __launch_bounds__(Cfg::threads)
    Gemm80(const typename Cfg::elem* a, const typename Cfg::elem* b, typename Cfg::elem* c, int m,
           int n, int k, int ldc, Epi epi, yr_gemm80_split split) {
  yr_gemm_sm80<Cfg, Epi>(a, b, c, m, n, k, ldc, epi, 1, nullptr, split);
}

template <class Cfg, class Epi = yr_gemm_store>
struct Launch80 {
  using T = typename Cfg::elem;
  const T *a, *b;
  T* c;
  int m, n, k, ldc, grid;
  Epi epi;
  yr_gemm80_split split;
  Launch80(const T* a_, const T* b_, T* c_, int m_, int n_, int k_, int ldc_, Epi e = Epi(),
           int splits = 1)
      : a(a_), b(b_), c(c_), m(m_), n(n_), k(k_), ldc(ldc_), epi(e) {
    CK(cudaFuncSetAttribute(Gemm80<Cfg, Epi>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            Cfg::smem_bytes));
    split.splits = splits;
    if (splits > 1) {
      const size_t tiles = static_cast<size_t>(yr_gemm_sm80_tiles<Cfg>(m, n));
      CK(cudaMalloc(&split.ws, tiles * splits * Cfg::bm * Cfg::bn * sizeof(float)));
      CK(cudaMalloc(&split.flags, tiles * sizeof(unsigned)));
      CK(cudaMemset(split.flags, 0, tiles * sizeof(unsigned)));
    }
    grid = static_cast<int>(yr_gemm_sm80_grid<Cfg>(m, n, 1, splits));
  }
  void Free() {
    if (split.ws) CK(cudaFree(split.ws));
    if (split.flags) CK(cudaFree(split.flags));
  }
  void operator()() const {
    Gemm80<Cfg, Epi><<<grid, Cfg::threads, Cfg::smem_bytes>>>(a, b, c, m, n, k, ldc, epi, split);
    CK(cudaGetLastError());
  }
};

template <class Cfg>
struct IsSm80 : std::false_type {};
template <typename T, int BM, int BN, int WM, int WN, int S, bool NK, int G>
struct IsSm80<yr_gemm_sm80_cfg<T, BM, BN, WM, WN, S, NK, G>> : std::true_type {};
template <class Cfg, class Epi = yr_gemm_store>
using LaunchOf = std::conditional_t<IsSm80<Cfg>::value, Launch80<Cfg, Epi>, Launch<Cfg, Epi>>;

// Row-major C = A B through cuBLAS's column-major GEMM: C^T = B^T A^T.
template <typename T, bool B_NK>
void CublasGemm(cublasHandle_t h, const T* a, const T* b, T* c, int m, int n, int k) {
  const float one = 1.0f, zero = 0.0f;
  CB(cublasGemmEx(h, B_NK ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, CudaType<T>(),
                  B_NK ? k : n, a, CudaType<T>(), k, &zero, c, CudaType<T>(), n, CUBLAS_COMPUTE_32F,
                  CUBLAS_GEMM_DEFAULT));
}

static int g_fail = 0, g_pass = 0;

template <typename T>
float ToFloat(T v) {
  return static_cast<float>(v);
}

// Checks variant Cfg on (m, n, k) against the reference, with C's row
// stride ldc > n and 2 guard rows, all poisoned with NaN first; BIAS: the
// bias + ReLU epilogue; `splits` > 1: split-K, launched twice (the
// counters the first leaves must serve the second).
template <class Cfg, bool BIAS = false>
void Check(const char* name, int m, int n, int k, int ldc, int splits = 1) {
  using T = typename Cfg::elem;
  constexpr bool B_NK = Cfg::b_nk;
  T *a, *b, *c, *bias;
  double* ref;
  CK(cudaMalloc(&a, (size_t)m * k * sizeof(T)));
  CK(cudaMalloc(&b, (size_t)n * k * sizeof(T)));
  CK(cudaMalloc(&bias, (size_t)n * sizeof(T)));
  CK(cudaMalloc(&c, (size_t)(m + 2) * ldc * sizeof(T)));
  CK(cudaMalloc(&ref, (size_t)m * n * sizeof(double)));
  static unsigned seed = 1;
  FillRandom(a, (size_t)m * k, seed++);
  FillRandom(b, (size_t)n * k, seed++);
  FillRandom(bias, (size_t)n, seed++);
  CK(cudaMemset(c, 0xff, (size_t)(m + 2) * ldc * sizeof(T)));
  Reference<T, B_NK><<<dim3((n + 127) / 128, m), 128>>>(a, b, ref, m, n, k);
  CK(cudaGetLastError());
  if constexpr (BIAS) {
    LaunchOf<Cfg, BiasRelu<T>> l(a, b, c, m, n, k, ldc, BiasRelu<T>{bias}, splits);
    for (int i = 0; i < (splits > 1 ? 2 : 1); ++i) l();
    CK(cudaDeviceSynchronize());
    l.Free();
  } else {
    LaunchOf<Cfg> l(a, b, c, m, n, k, ldc, yr_gemm_store(), splits);
    for (int i = 0; i < (splits > 1 ? 2 : 1); ++i) l();
    CK(cudaDeviceSynchronize());
    l.Free();
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<T> hc((size_t)(m + 2) * ldc), hbias(n);
  std::vector<double> hr((size_t)m * n);
  CK(cudaMemcpy(hc.data(), c, hc.size() * sizeof(T), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hr.data(), ref, hr.size() * sizeof(double), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hbias.data(), bias, n * sizeof(T), cudaMemcpyDeviceToHost));
  // The output's rounding (an ulp of |ref|) plus float accumulation's.
  const double rel = yr_is_half<T>::value ? 1.0 / 1024 : 1.0 / 128;
  const double abs_tol = 1e-3;
  size_t bad = 0, outside = 0;
  double max_err = 0, num = 0, den = 0;
  for (int r = 0; r < m + 2; ++r) {
    for (int j = 0; j < ldc; ++j) {
      const float got = ToFloat(hc[(size_t)r * ldc + j]);
      if (r >= m || j >= n) {
        if (!std::isnan(got)) ++outside;  // written outside C
        continue;
      }
      double want = hr[(size_t)r * n + j];
      if (BIAS) want = std::max(want + ToFloat(hbias[j]), 0.0);
      const double e = std::fabs(got - want);
      if (!(e <= abs_tol + rel * std::fabs(want))) ++bad;
      if (!(e <= max_err)) max_err = e;
      num += e * e;
      den += want * want;
    }
  }
  const bool ok = bad == 0 && outside == 0;
  ok ? ++g_pass : ++g_fail;
  printf(
      "%-4s %-20s %-2s %s M %5d N %4d K %5d ldc %4d split %d: %s max_err %.2e rel_l2 %.2e "
      "bad %zu outside %zu\n",
      ok ? "PASS" : "FAIL", name, B_NK ? "NK" : "KN", TypeName<T>(), m, n, k, ldc, splits,
      BIAS ? "bias+relu" : "", max_err, std::sqrt(num / std::max(den, 1e-300)), bad, outside);
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(bias));
  CK(cudaFree(c));
  CK(cudaFree(ref));
}

// Times variant Cfg on (m, n, k) next to cuBLAS, and compares the two
// results (max |ours - cuBLAS| over max |cuBLAS|).
struct Timed {
  char line[256];
};
static std::vector<Timed> g_table;

template <typename T>
__global__ void MaxDiff(const T* x, const T* y, size_t n, float* out) {
  float d = 0, s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float a = yr_ld(x, (i64)i), b = yr_ld(y, (i64)i);
    d = fmaxf(d, fabsf(a - b));
    if (a != a) d = INFINITY;
    s = fmaxf(s, fabsf(b));
  }
  atomicMax(reinterpret_cast<int*>(out), __float_as_int(d));
  atomicMax(reinterpret_cast<int*>(out + 1), __float_as_int(s));
}

template <class Cfg>
void Time(cublasHandle_t h, const char* name, int m, int n, int k, int splits = 1, int iters = 30) {
  using T = typename Cfg::elem;
  constexpr bool B_NK = Cfg::b_nk;
  T *a, *b, *c, *cref;
  float* diff;
  CK(cudaMalloc(&a, (size_t)m * k * sizeof(T)));
  CK(cudaMalloc(&b, (size_t)n * k * sizeof(T)));
  CK(cudaMalloc(&c, (size_t)m * n * sizeof(T)));
  CK(cudaMalloc(&cref, (size_t)m * n * sizeof(T)));
  CK(cudaMalloc(&diff, 2 * sizeof(float)));
  FillRandom(a, (size_t)m * k, 11);
  FillRandom(b, (size_t)n * k, 12);
  CK(cudaMemset(c, 0xff, (size_t)m * n * sizeof(T)));
  CK(cudaMemset(diff, 0, 2 * sizeof(float)));
  LaunchOf<Cfg> ours(a, b, c, m, n, k, n, yr_gemm_store(), splits);
  auto theirs = [&] { CublasGemm<T, B_NK>(h, a, b, cref, m, n, k); };
  const float us = FlushedMedianUs(ours, iters, 3);
  const float us_ref = FlushedMedianUs(theirs, iters, 3);
  MaxDiff<T><<<1024, 256>>>(c, cref, (size_t)m * n, diff);
  CK(cudaGetLastError());
  float hd[2];
  CK(cudaMemcpy(hd, diff, sizeof hd, cudaMemcpyDeviceToHost));
  const double flops = 2.0 * m * n * k;
  Timed t;
  snprintf(t.line, sizeof t.line,
           "%-20s %-2s %s %5d %5d %5d s%-2d grid %3d | %8.1f us %6.1f TF/s | cuBLAS %8.1f us "
           "%6.1f TF/s | %.3f | diff %.1e",
           name, B_NK ? "NK" : "KN", TypeName<T>(), m, n, k, splits, ours.grid, us,
           flops / us * 1e-6, us_ref, flops / us_ref * 1e-6, us_ref / us,
           hd[0] / std::max(hd[1], 1e-30f));
  printf("%s\n", t.line);
  fflush(stdout);
  g_table.push_back(t);
  ours.Free();
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(c));
  CK(cudaFree(cref));
  CK(cudaFree(diff));
}

// The variants: cooperative 128 x 256 (cluster 2 x 1 sharing B, none, 1 x 2
// sharing A; 2 x 1 in groups of 16 cluster rows), cooperative 256 x 128
// (1 x 2 sharing A), ping-pong 128 x 128 (2 x 1, none).
template <typename T, bool B_NK>
using Coop256C21 = yr_gemm_sm90_cfg<T, 128, 256, 4, B_NK, false, 2, 1>;
template <typename T, bool B_NK>
using Coop256C11 = yr_gemm_sm90_cfg<T, 128, 256, 4, B_NK, false, 1, 1>;
template <typename T, bool B_NK>
using Coop256C12 = yr_gemm_sm90_cfg<T, 128, 256, 4, B_NK, false, 1, 2>;
template <typename T, bool B_NK>
using Coop256x128C12 = yr_gemm_sm90_cfg<T, 256, 128, 4, B_NK, false, 1, 2>;
template <typename T, bool B_NK>
using Ping128C21 = yr_gemm_sm90_cfg<T, 128, 128, 6, B_NK, true, 2, 1>;
template <typename T, bool B_NK>
using Ping128C11 = yr_gemm_sm90_cfg<T, 128, 128, 6, B_NK, true, 1, 1>;
template <typename T, bool B_NK>
using Coop256C21G16 = yr_gemm_sm90_cfg<T, 128, 256, 4, B_NK, false, 2, 1, 16>;
// The sm_80 form at the backend's points: 64 x 64 pieces a warp (32 along a
// 64 axis).
template <typename T, bool B_NK>
using Mma128x256 = yr_gemm_sm80_cfg<T, 128, 256, 2, 4, 3, B_NK>;
template <typename T, bool B_NK>
using Mma128x128S4 = yr_gemm_sm80_cfg<T, 128, 128, 2, 2, 4, B_NK>;
template <typename T, bool B_NK>
using Mma128x128S3 = yr_gemm_sm80_cfg<T, 128, 128, 2, 2, 3, B_NK>;
template <typename T, bool B_NK>
using Mma64x128 = yr_gemm_sm80_cfg<T, 64, 128, 2, 2, 4, B_NK>;
template <typename T, bool B_NK>
using Mma64x64 = yr_gemm_sm80_cfg<T, 64, 64, 2, 2, 4, B_NK>;

// Variants run: those named in a comma-separated list (all if empty).
static const char* g_only = "";
bool Selected(const char* name) {
  if (!*g_only) return true;
  const size_t len = strlen(name);
  for (const char* p = g_only; (p = strstr(p, name)) != nullptr; p += len) {
    if ((p == g_only || p[-1] == ',') && (p[len] == ',' || p[len] == 0)) return true;
  }
  return false;
}

// Every check of variant Cfg: M 1, 7, 129, 4093 with N 200 and K 72, 4000;
// then several tiles both ways with odd tile counts (a cluster's second
// block past the edge), with and without the bias + ReLU epilogue; then
// more tiles than blocks.
template <class Cfg>
void CheckVariant(const char* name) {
  if (!Selected(name)) return;
  for (int m : {1, 7, 129, 4093}) {
    for (int k : {72, 4000}) {
      Check<Cfg>(name, m, 200, k, m % 2 ? 203 : 208);  // odd strides: the 2-byte stores
    }
  }
  Check<Cfg>(name, 389, 1288, 136, 1296);
  Check<Cfg, true>(name, 389, 1288, 136, 1296);
  Check<Cfg, true>(name, 129, 200, 72, 203);
  // More tiles than blocks: the persistent loop (ping-pong's turns, the
  // ring's rounds across tiles), with 16-byte and 2-byte stores.
  Check<Cfg>(name, 4093, 2000, 136, 2008);
  Check<Cfg, true>(name, 2047, 1000, 200, 1003);
  // Split-K: 2 and 3 ranges, a range with no K block (K 72: 2 blocks, 3
  // ranges), more tiles than blocks (whole tiles first, then the last,
  // partial wave's tiles split).
  Check<Cfg>(name, 129, 200, 4000, 203, 2);
  Check<Cfg, true>(name, 389, 1288, 4000, 1296, 3);
  Check<Cfg>(name, 7, 200, 72, 208, 3);
  Check<Cfg, true>(name, 2047, 1000, 1000, 1003, 2);
  Check<Cfg>(name, 4093, 2000, 1000, 2008, 2);
}

template <typename T, bool B_NK>
void CheckAll() {
  CheckVariant<Coop256C21<T, B_NK>>("coop128x256_c2x1");
  CheckVariant<Coop256C11<T, B_NK>>("coop128x256_c1x1");
  CheckVariant<Coop256C12<T, B_NK>>("coop128x256_c1x2");
  CheckVariant<Coop256x128C12<T, B_NK>>("coop256x128_c1x2");
  CheckVariant<Ping128C21<T, B_NK>>("ping128x128_c2x1");
  CheckVariant<Ping128C11<T, B_NK>>("ping128x128_c1x1");
  CheckVariant<Coop256C21G16<T, B_NK>>("coop128x256_c2x1_g16");
  CheckVariant<Mma128x256<T, B_NK>>("mma128x256");
  CheckVariant<Mma128x128S4<T, B_NK>>("mma128x128_s4");
  CheckVariant<Mma128x128S3<T, B_NK>>("mma128x128_s3");
  CheckVariant<Mma64x128<T, B_NK>>("mma64x128");
  CheckVariant<Mma64x64<T, B_NK>>("mma64x64");
}

template <class Cfg>
void TimeVariant(cublasHandle_t h, const char* name, int m, int n, int k, int splits = 1) {
  if (Selected(name)) Time<Cfg>(h, name, m, n, k, splits);
}

template <typename T, bool B_NK>
void TimeAll(cublasHandle_t h, int m, int n, int k, int splits = 1) {
  TimeVariant<Coop256C21<T, B_NK>>(h, "coop128x256_c2x1", m, n, k, splits);
  TimeVariant<Coop256C11<T, B_NK>>(h, "coop128x256_c1x1", m, n, k, splits);
  TimeVariant<Coop256C12<T, B_NK>>(h, "coop128x256_c1x2", m, n, k, splits);
  TimeVariant<Coop256x128C12<T, B_NK>>(h, "coop256x128_c1x2", m, n, k, splits);
  TimeVariant<Ping128C21<T, B_NK>>(h, "ping128x128_c2x1", m, n, k, splits);
  TimeVariant<Ping128C11<T, B_NK>>(h, "ping128x128_c1x1", m, n, k, splits);
  TimeVariant<Coop256C21G16<T, B_NK>>(h, "coop128x256_c2x1_g16", m, n, k, splits);
  TimeVariant<Mma128x256<T, B_NK>>(h, "mma128x256", m, n, k, splits);
  TimeVariant<Mma128x128S4<T, B_NK>>(h, "mma128x128_s4", m, n, k, splits);
  TimeVariant<Mma128x128S3<T, B_NK>>(h, "mma128x128_s3", m, n, k, splits);
  TimeVariant<Mma64x128<T, B_NK>>(h, "mma64x128", m, n, k, splits);
  TimeVariant<Mma64x64<T, B_NK>>(h, "mma64x64", m, n, k, splits);
}

// Few tiles: a shape's variants with 1 to 8 K ranges.
template <typename T, bool B_NK>
void TimeSplits(cublasHandle_t h, int m, int n, int k) {
  for (int s : {1, 2, 3, 4, 6, 8}) TimeAll<T, B_NK>(h, m, n, k, s);
}

// gemm [check|time|split|all [VARIANT,VARIANT...]] (split: the few-tile shapes
// under 1 to 4 K ranges)
int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "all";
  if (argc > 2) g_only = argv[2];
  const bool check = strcmp(mode, "time") != 0 && strcmp(mode, "split") != 0;
  const bool time = strcmp(mode, "check") != 0 && strcmp(mode, "split") != 0;
  const bool split = strcmp(mode, "split") == 0 || strcmp(mode, "all") == 0;
  CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d multiprocessors, L2 %d MB\n", prop.name, g_sms, prop.l2CacheSize >> 20);
  if (check) {
    CheckAll<__half, false>();
    CheckAll<__half, true>();
    CheckAll<__nv_bfloat16, false>();
    CheckAll<__nv_bfloat16, true>();
  }
  if (time) {
    cublasHandle_t h;
    CB(cublasCreate(&h));
    TimeAll<__half, false>(h, 4096, 4096, 4096);
    TimeAll<__half, true>(h, 4096, 4096, 4096);
    TimeAll<__nv_bfloat16, false>(h, 4096, 4096, 4096);
    TimeAll<__nv_bfloat16, true>(h, 4096, 4096, 4096);
    TimeAll<__half, true>(h, 8192, 8192, 8192);
    TimeAll<__half, true>(h, 4096, 4096, 1024);
    TimeAll<__half, true>(h, 16384, 4096, 4096);
    TimeAll<__nv_bfloat16, false>(h, 8192, 8192, 8192);
    CB(cublasDestroy(h));
  }
  if (split) {
    cublasHandle_t h;
    CB(cublasCreate(&h));
    // Fewer tiles than multiprocessors: M 128 (one tile row), 256, 512.
    TimeSplits<__half, true>(h, 128, 16384, 4096);
    TimeSplits<__half, true>(h, 128, 4096, 4096);
    TimeSplits<__half, true>(h, 256, 4096, 8192);
    TimeSplits<__half, false>(h, 512, 2048, 8192);
    TimeSplits<__half, true>(h, 128, 4096, 16384);
    // A partial last wave: 144 tiles of 128 x 256 (72 clusters on 66),
    // 288 of 128 x 128.
    TimeSplits<__half, true>(h, 1024, 4608, 3584);
    TimeSplits<__half, true>(h, 2048, 3072, 4096);
    CB(cublasDestroy(h));
  }
  if (time || split) {
    printf("\n%-20s %-2s %-4s %5s %5s %5s\n", "variant", "B", "type", "M", "N", "K");
    for (const Timed& t : g_table) printf("%s\n", t.line);
  }
  if (check) printf("checks: %d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
