// The prefill attention kernels on their own (bench/micro/run.sh sm_90a
// attention_prefill): backends/cuda/attention_prefill.cuh (the block-
// synchronous kernel) and attention_prefill_ws.cuh (warp-specialized, one
// tile a block or persistent). Checks each variant against a float
// reference computed on the GPU from the same 16-bit inputs (output
// poisoned with NaN first; optionally a negative scale, or keys scaled up
// along the sequence so that the softmax's running max keeps moving), and
// times it by the benchmark's method (timing.cuh). Cases: [heads, rows, D]
// with keys = rows rounded up to whole key tiles (or g_keys), non-causal,
// scale +-1/sqrt(D).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "timing.cuh"

// clang-format off
#include "../../backends/cuda/kernel_prelude.cuh"
#include "../../backends/cuda/wgmma_helpers.cuh"
#include "../../backends/cuda/wgmma_ops.cuh"
#include "../../backends/cuda/attention_prefill.cuh"
#include "../../backends/cuda/attention_prefill_ws.cuh"
// clang-format on

template <typename T, int D, int BN, int WG, int STAGES, bool OVERLAP>
__global__ void __launch_bounds__(WG * 128, 1)
    Prefill(const T* q, const T* k, const T* v, T* o, int rows, int keys, float scale) {
  yr_attention_prefill<T, T, D, D, BN, WG, STAGES, OVERLAP>(q, k, v, o, rows, keys, scale);
}

// The warp-specialized kernel (attention_prefill_ws.cuh): one tile of 128
// rows a block, or persistent (a block a multiprocessor, looping over
// tiles); the public entry points, and the tile loop with its options
// (Q buffers, Q in registers, lazy rescale) for comparisons.
template <typename T, int D, int BN, int STAGES>
__global__ void __launch_bounds__(yr_attn_prefill_ws_threads(), 1)
    PrefillWs(const T* q, const T* k, const T* v, T* o, int rows, int keys, float scale) {
  yr_attention_prefill_ws<T, T, D, D, BN, STAGES>(q, k, v, o, rows, keys, scale);
}
template <typename T, int D, int BN, int STAGES>
__global__ void __launch_bounds__(yr_attn_prefill_ws_threads(), 1)
    PrefillWsPersistent(const T* q, const T* k, const T* v, T* o, int batch, int rows, int keys,
                        float scale) {
  yr_attention_prefill_ws_persistent<T, T, D, D, BN, STAGES>(q, k, v, o, batch, rows, keys, scale);
}
template <typename T, int D, int BN, int STAGES, bool PINGPONG, bool LAZY>
__global__ void __launch_bounds__(yr_attn_prefill_ws_threads(), 1)
    PrefillWsOpt(const T* q, const T* k, const T* v, T* o, int batch, int rows, int keys,
                 float scale) {
  yr_attention_prefill_ws_tiles<T, T, D, D, BN, STAGES, PINGPONG, LAZY>(
      q, k, v, o, rows, keys, scale, blockIdx.x, gridDim.x, batch * ((rows + 127) / 128));
}

// The persistent kernel with its tiles by TMA (tensor maps as
// cuda_attention.cc's BatchedPanelMap makes them).
template <typename T, int D, int BN, int STAGES>
__global__ void __launch_bounds__(yr_attn_prefill_ws_threads(), 1)
    PrefillWsTma(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                 const __grid_constant__ CUtensorMap tv, const T* q, const T* k, const T* v, T* o,
                 int batch, int rows, int keys, float scale) {
  yr_attention_prefill_ws_persistent<T, T, D, D, BN, STAGES, true>(q, k, v, o, batch, rows, keys,
                                                                   scale, &tq, &tk, &tv);
}

#define CU(x)                                                          \
  do {                                                                 \
    CUresult rc_ = (x);                                                \
    if (rc_ != CUDA_SUCCESS) {                                         \
      fprintf(stderr, "%s:%d: %s: %d\n", __FILE__, __LINE__, #x, rc_); \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

// A {cols, rows, batch} tensor map in boxes of 64 columns x box_rows rows.
template <typename T>
CUtensorMap BatchedMap(const T* ptr, int cols, int rows, int batch, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {(cuuint64_t)cols, (cuuint64_t)rows, (cuuint64_t)batch};
  const cuuint64_t strides[2] = {(cuuint64_t)cols * 2, (cuuint64_t)rows * cols * 2};
  const cuuint32_t box[3] = {64, (cuuint32_t)box_rows, 1};
  const cuuint32_t estr[3] = {1, 1, 1};
  const CUtensorMapDataType dt = sizeof(T) == 2 && std::is_same_v<T, __half>
                                     ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                     : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  CU(cuTensorMapEncodeTiled(&map, dt, 3, const_cast<T*>(ptr), dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

// One thread per (batch, row): scores in float, softmax, O.
template <typename T>
__global__ void Reference(const T* q, const T* k, const T* v, float* o, int batches, int rows,
                          int keys, int d, float scale) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)batches * rows) return;
  const long long b = i / rows;
  const T* qr = q + i * d;
  float m = -INFINITY, l = 0;
  extern __shared__ float unused[];
  (void)unused;
  float acc[256];
  for (int c = 0; c < d; ++c) acc[c] = 0;
  for (int j = 0; j < keys; ++j) {
    const T* kr = k + (b * keys + j) * d;
    float s = 0;
    for (int c = 0; c < d; ++c) s += yr_ld(qr, c) * yr_ld(kr, c);
    s *= scale;
    const float mn = fmaxf(m, s);
    const float a = expf(m - mn), e = expf(s - mn);
    l = l * a + e;
    const T* vr = v + (b * keys + j) * d;
    for (int c = 0; c < d; ++c) acc[c] = acc[c] * a + e * yr_ld(vr, c);
    m = mn;
  }
  for (int c = 0; c < d; ++c) o[i * d + c] = acc[c] / l;
}

// Keys of the next checks where nonzero (else rows rounded up to whole key
// tiles): keys off the tiles exercise the masked last tile.
static int g_keys = 0;
// PREFILL_PROFILE set: one launch a variant, untimed, for a profiler
// (bench/device_steps.sh's profile step runs this binary under ncu).
static bool g_profile = false;

// Checks one variant (`launch(q, k, v, o, rows, keys, scale)`) against the
// reference on fresh random inputs (scale sign `sign` / sqrt(D)), with the
// output poisoned (NaN) before the checked launch, then times it. `ramp`
// scales key j by 1 + 4 j / keys, so that the scores' running max keeps
// growing (the softmax's rescales run).
template <typename T, int D, typename Launch>
void Check(const char* tname, int heads, int rows, int bn, const char* label, int smem, float sign,
           bool ramp, Launch&& launch_fn) {
  const int keys = g_keys > 0 ? g_keys : (rows + bn - 1) / bn * bn;
  const size_t n = (size_t)heads * std::max(rows, keys) * D;
  std::vector<T> hq(n), hk(n), hv(n);
  static std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) {
    hq[i] = T(dist(rng));
    const float f = ramp ? 1.0f + 4.0f * (float)(i / D % std::max(rows, keys)) / keys : 1.0f;
    hk[i] = T(dist(rng) * f);
    hv[i] = T(dist(rng));
  }
  T *q, *k, *v, *o;
  float* ref;
  CK(cudaMalloc(&q, n * sizeof(T)));
  CK(cudaMalloc(&k, n * sizeof(T)));
  CK(cudaMalloc(&v, n * sizeof(T)));
  CK(cudaMalloc(&o, n * sizeof(T)));
  CK(cudaMalloc(&ref, n * sizeof(float)));
  CK(cudaMemcpy(q, hq.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(k, hk.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(v, hv.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemset(o, 0xff, n * sizeof(T)));  // NaN where nothing is written
  const float scale = sign / std::sqrt((float)D);
  Reference<T><<<(heads * rows + 127) / 128, 128>>>(q, k, v, ref, heads, rows, keys, D, scale);
  CK(cudaGetLastError());
  auto launch = [&] { launch_fn(q, k, v, o, rows, keys, scale); };
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  const size_t nq = (size_t)heads * rows * D;  // outputs
  std::vector<T> ho(nq);
  std::vector<float> hr(nq);
  CK(cudaMemcpy(ho.data(), o, nq * sizeof(T), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hr.data(), ref, nq * sizeof(float), cudaMemcpyDeviceToHost));
  double max_err = 0;
  size_t bad = 0;
  for (size_t i = 0; i < nq; ++i) {
    const double e = std::fabs((double)static_cast<float>(ho[i]) - hr[i]);
    if (!(e <= 2e-2 + 2e-2 * std::fabs(hr[i]))) ++bad;
    if (!(e <= max_err)) max_err = e;
  }
  const float us = g_profile ? 0.0f : FlushedMedianUs(launch, 30, 3);
  const double flops = 4.0 * heads * (double)rows * keys * D;
  printf(
      "%-5s h%-3d n%-5d D%-3d %-30s%4s%5s smem %6d: %s max_err %.4f bad %zu %8.2f us %6.1f "
      "TFLOP/s\n",
      tname, heads, rows, D, label, sign < 0 ? "neg" : "", ramp ? "ramp" : "", smem,
      bad == 0 ? "OK  " : "FAIL", max_err, bad, us, flops / us * 1e-6);
  CK(cudaFree(q));
  CK(cudaFree(k));
  CK(cudaFree(v));
  CK(cudaFree(o));
  CK(cudaFree(ref));
}

template <typename T, int D, int BN, int WG, int STAGES, bool OVERLAP>
void Run(const char* tname, int heads, int rows) {
  constexpr int smem = yr_attn_prefill_smem_bytes<T, D, D, BN, WG, STAGES>();
  auto kern = Prefill<T, D, BN, WG, STAGES, OVERLAP>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid((rows + WG * 64 - 1) / (WG * 64), heads);
  char label[64];
  snprintf(label, sizeof label, "old BN%d WG%d S%d %s", BN, WG, STAGES, OVERLAP ? "ovl" : "seq");
  Check<T, D>(tname, heads, rows, BN, label, smem, 1.0f, false,
              [&](const T* q, const T* k, const T* v, T* o, int r, int keys, float scale) {
                kern<<<grid, WG * 128, smem>>>(q, k, v, o, r, keys, scale);
              });
}

// The persistent grid of `kern` (given `smem` bytes of shared memory):
// a block a multiprocessor, at most one a tile of 128 rows.
template <typename Kernel>
int PersistentGrid(Kernel kern, int smem, int heads, int rows) {
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  return std::min(sms, heads * ((rows + 127) / 128));
}

// PERSISTENT: the persistent entry point, else one tile a block.
template <typename T, int D, int BN, int STAGES, bool PERSISTENT = false>
void RunWs(const char* tname, int heads, int rows, float sign = 1.0f, bool ramp = false) {
  constexpr int smem = yr_attn_prefill_ws_smem_bytes<T, D, D, BN, STAGES>();
  char label[64];
  snprintf(label, sizeof label, "ws  BN%d S%d%s", BN, STAGES, PERSISTENT ? " persistent" : "");
  if constexpr (PERSISTENT) {
    auto kern = PrefillWsPersistent<T, D, BN, STAGES>;
    const int grid = PersistentGrid(kern, smem, heads, rows);
    Check<T, D>(tname, heads, rows, BN, label, smem, sign, ramp,
                [&](const T* q, const T* k, const T* v, T* o, int r, int keys, float scale) {
                  kern<<<grid, yr_attn_prefill_ws_threads(), smem>>>(q, k, v, o, heads, r, keys,
                                                                     scale);
                });
  } else {
    auto kern = PrefillWs<T, D, BN, STAGES>;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const dim3 grid((rows + 127) / 128, heads);
    Check<T, D>(tname, heads, rows, BN, label, smem, sign, ramp,
                [&](const T* q, const T* k, const T* v, T* o, int r, int keys, float scale) {
                  kern<<<grid, yr_attn_prefill_ws_threads(), smem>>>(q, k, v, o, r, keys, scale);
                });
  }
}

// The persistent kernel with TMA copies.
template <typename T, int D, int BN, int STAGES>
void RunWsTma(const char* tname, int heads, int rows, float sign = 1.0f, bool ramp = false) {
  constexpr int smem = yr_attn_prefill_ws_smem_bytes<T, D, D, BN, STAGES>();
  char label[64];
  snprintf(label, sizeof label, "ws  BN%d S%d persistent TMA", BN, STAGES);
  auto kern = PrefillWsTma<T, D, BN, STAGES>;
  const int grid = PersistentGrid(kern, smem, heads, rows);
  Check<T, D>(tname, heads, rows, BN, label, smem, sign, ramp,
              [&](const T* q, const T* k, const T* v, T* o, int r, int keys, float scale) {
                const CUtensorMap mq = BatchedMap(q, D, r, heads, 128);
                const CUtensorMap mk = BatchedMap(k, D, keys, heads, BN);
                const CUtensorMap mv = BatchedMap(v, D, keys, heads, BN);
                kern<<<grid, yr_attn_prefill_ws_threads(), smem>>>(mq, mk, mv, q, k, v, o, heads, r,
                                                                   keys, scale);
              });
}

// The tile loop with explicit options, persistent.
template <typename T, int D, int BN, int STAGES, bool PINGPONG, bool LAZY>
void RunWsOpt(const char* tname, int heads, int rows, float sign = 1.0f, bool ramp = false) {
  constexpr int smem = yr_attn_prefill_ws_smem_bytes<T, D, D, BN, STAGES>();
  char label[64];
  snprintf(label, sizeof label, "ws  BN%d S%d persistent%s%s", BN, STAGES, PINGPONG ? "" : " nopp",
           LAZY ? "" : " eager");
  auto kern = PrefillWsOpt<T, D, BN, STAGES, PINGPONG, LAZY>;
  const int grid = PersistentGrid(kern, smem, heads, rows);
  Check<T, D>(tname, heads, rows, BN, label, smem, sign, ramp,
              [&](const T* q, const T* k, const T* v, T* o, int r, int keys, float scale) {
                kern<<<grid, yr_attn_prefill_ws_threads(), smem>>>(q, k, v, o, heads, r, keys,
                                                                   scale);
              });
}

int main() {
  if (std::getenv("PREFILL_PROFILE") != nullptr) {
    // The suite's prefill shapes in the variants the search picks there.
    g_profile = true;
    RunWs<__half, 128, 128, 3, true>("fp16", 32, 1024);
    RunWsTma<__half, 128, 128, 3>("fp16", 32, 1024);
    RunWs<__nv_bfloat16, 128, 128, 3, true>("bf16", 32, 2048);
    g_keys = 1000;
    RunWs<__nv_bfloat16, 256, 64, 2, true>("bf16", 16, 1000);
    RunWsTma<__nv_bfloat16, 256, 64, 2>("bf16", 16, 1000);
    return 0;
  }
  // The warp-specialized kernel at odd row counts (rows past the end of the
  // last block; a block whose second consumer has no rows), a negative
  // scale; persistent over more tiles than multiprocessors (blocks with
  // different tile counts).
  RunWs<__half, 128, 128, 2>("fp16", 2, 200);
  RunWs<__nv_bfloat16, 128, 64, 3>("bf16", 2, 129);
  RunWs<__half, 64, 64, 4>("fp16", 3, 333);
  RunWs<__half, 64, 128, 2>("fp16", 3, 333, -1.0f);
  RunWs<__nv_bfloat16, 64, 64, 2>("bf16", 2, 77);
  RunWs<__nv_bfloat16, 128, 128, 3>("bf16", 2, 129, -1.0f);
  RunWs<__half, 128, 128, 2, true>("fp16", 2, 200);
  RunWs<__nv_bfloat16, 64, 64, 3, true>("bf16", 2, 77, -1.0f);
  RunWs<__nv_bfloat16, 128, 64, 3, true>("bf16", 45, 777);
  RunWs<__half, 128, 128, 3, true>("fp16", 45, 777, -1.0f);
  RunWs<__half, 64, 128, 2, true>("fp16", 45, 333);
  RunWsOpt<__nv_bfloat16, 128, 128, 2, false, false>("bf16", 45, 777, -1.0f);
  // TMA copies: rows past the end of an entry (zeros from the copy engine),
  // several entries, more tiles than multiprocessors.
  RunWsTma<__half, 128, 128, 2>("fp16", 2, 200);
  RunWsTma<__nv_bfloat16, 64, 64, 3>("bf16", 3, 77, -1.0f);
  RunWsTma<__half, 128, 128, 3>("fp16", 45, 777, -1.0f, true);
  RunWsTma<__nv_bfloat16, 128, 176, 2>("bf16", 45, 777);
  // 176-key tiles (Q in shared memory): odd rows, keys in whole tiles,
  // D 64 and 128, a negative scale, persistent over more tiles than SMs.
  RunWs<__half, 128, 176, 2>("fp16", 2, 200);
  RunWs<__nv_bfloat16, 64, 176, 2, true>("bf16", 3, 333, -1.0f);
  RunWs<__nv_bfloat16, 128, 176, 2, true>("bf16", 45, 777, 1.0f, true);
  // Growing scores: the lazy rescale's moves.
  RunWs<__half, 128, 128, 2>("fp16", 2, 200, 1.0f, true);
  RunWs<__nv_bfloat16, 64, 64, 3, true>("bf16", 3, 333, -1.0f, true);
  RunWs<__half, 128, 64, 3, true>("fp16", 4, 1024, 1.0f, true);
  RunWs<__nv_bfloat16, 128, 128, 2, true>("bf16", 40, 2048, 1.0f, true);
  // The suite's prefill shapes (llama3 8b: 32 heads, D 128): the old
  // kernel's best variants, then the new one.
  Run<__half, 128, 128, 2, 3, true>("fp16", 32, 1024);
  RunWs<__half, 128, 128, 2>("fp16", 32, 1024);
  RunWs<__half, 128, 128, 3>("fp16", 32, 1024);
  RunWs<__half, 128, 128, 2, true>("fp16", 32, 1024);
  RunWs<__half, 128, 128, 3, true>("fp16", 32, 1024);
  RunWsTma<__half, 128, 128, 3>("fp16", 32, 1024);
  RunWsTma<__half, 128, 128, 2>("fp16", 32, 1024);
  RunWs<__half, 128, 64, 4, true>("fp16", 32, 1024);
  RunWsOpt<__half, 128, 128, 2, true, false>("fp16", 32, 1024);
  RunWs<__half, 128, 176, 2>("fp16", 32, 1024);
  RunWs<__half, 128, 176, 2, true>("fp16", 32, 1024);
  Run<__nv_bfloat16, 128, 128, 3, 2, false>("bf16", 32, 2048);
  RunWs<__nv_bfloat16, 128, 128, 2>("bf16", 32, 2048);
  RunWs<__nv_bfloat16, 128, 128, 3>("bf16", 32, 2048);
  RunWs<__nv_bfloat16, 128, 128, 2, true>("bf16", 32, 2048);
  RunWs<__nv_bfloat16, 128, 128, 3, true>("bf16", 32, 2048);
  RunWsTma<__nv_bfloat16, 128, 128, 3>("bf16", 32, 2048);
  RunWs<__nv_bfloat16, 128, 64, 4, true>("bf16", 32, 2048);
  RunWsOpt<__nv_bfloat16, 128, 128, 2, true, false>("bf16", 32, 2048);
  RunWs<__nv_bfloat16, 128, 176, 2>("bf16", 32, 2048);
  RunWs<__nv_bfloat16, 128, 176, 2, true>("bf16", 32, 2048);
  // Keys off the tiles (the masked last tile) in the warp-specialized form,
  // and head dim 256 (Q from shared memory): checks, then Gemma-2's
  // prefill shape (16 heads, 1000 tokens) in both kernels.
  g_keys = 300;
  RunWs<__half, 128, 128, 2>("fp16", 2, 200);
  RunWs<__nv_bfloat16, 64, 64, 3, true>("bf16", 3, 200, -1.0f);
  RunWs<__nv_bfloat16, 256, 64, 2>("bf16", 2, 200);
  RunWs<__half, 256, 64, 2, true>("fp16", 3, 333, -1.0f, true);
  RunWs<__half, 128, 176, 2, true>("fp16", 3, 200, -1.0f, true);
  RunWs<__nv_bfloat16, 256, 80, 2>("bf16", 2, 200);
  RunWs<__half, 256, 80, 2, true>("fp16", 3, 333, -1.0f, true);
  RunWsTma<__half, 128, 128, 2>("fp16", 2, 200);
  RunWsTma<__nv_bfloat16, 256, 64, 2>("bf16", 3, 333, -1.0f, true);
  g_keys = 1000;
  Run<__nv_bfloat16, 256, 64, 2, 2, false>("bf16", 16, 1000);
  Run<__nv_bfloat16, 256, 64, 1, 3, true>("bf16", 16, 1000);
  RunWs<__nv_bfloat16, 256, 64, 2>("bf16", 16, 1000);
  RunWs<__nv_bfloat16, 256, 64, 2, true>("bf16", 16, 1000);
  RunWsTma<__nv_bfloat16, 256, 64, 2>("bf16", 16, 1000);
  RunWs<__nv_bfloat16, 256, 80, 2>("bf16", 16, 1000);
  RunWs<__nv_bfloat16, 256, 80, 2, true>("bf16", 16, 1000);
  RunWs<__half, 128, 128, 2, true>("fp16", 32, 1000);
  return 0;
}
