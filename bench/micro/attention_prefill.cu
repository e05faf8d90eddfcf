// The prefill attention kernel of backends/cuda/attention_prefill.cuh on its
// own (bench/micro/run.sh sm_90a attention_prefill): checks each variant
// against a float reference computed on the GPU from the same 16-bit
// inputs, and times it by the benchmark's method (timing.cuh). Cases:
// [heads, rows, D] with keys = rows rounded up to whole key tiles,
// non-causal, scale 1/sqrt(D).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "timing.cuh"

// clang-format off
#include "../../backends/cuda/kernel_prelude.cuh"
#include "../../backends/cuda/wgmma_helpers.cuh"
#include "../../backends/cuda/wgmma_ops.cuh"
#include "../../backends/cuda/attention_prefill.cuh"
// clang-format on

template <typename T, int D, int BN, int WG, int STAGES, bool OVERLAP>
__global__ void __launch_bounds__(WG * 128, 1)
    Prefill(const T* q, const T* k, const T* v, T* o, int rows, int keys, float scale) {
  yr_attention_prefill<T, T, D, D, BN, WG, STAGES, OVERLAP>(q, k, v, o, rows, keys, scale);
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
  float acc[128];
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

template <typename T, int D, int BN, int WG, int STAGES, bool OVERLAP>
void Run(const char* tname, int heads, int rows) {
  const int keys = (rows + BN - 1) / BN * BN;  // whole key tiles
  const size_t n = (size_t)heads * std::max(rows, keys) * D;
  std::vector<T> hq(n), hk(n), hv(n);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) {
    hq[i] = T(dist(rng));
    hk[i] = T(dist(rng));
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
  CK(cudaMemset(o, 0, n * sizeof(T)));
  const float scale = 1.0f / std::sqrt((float)D);
  Reference<T><<<(heads * rows + 127) / 128, 128>>>(q, k, v, ref, heads, rows, keys, D, scale);
  CK(cudaGetLastError());
  constexpr int smem = yr_attn_prefill_smem_bytes<T, D, D, BN, WG, STAGES>();
  auto kern = Prefill<T, D, BN, WG, STAGES, OVERLAP>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid((rows + WG * 64 - 1) / (WG * 64), heads);
  auto launch = [&] { kern<<<grid, WG * 128, smem>>>(q, k, v, o, rows, keys, scale); };
  launch();
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
  const float us = FlushedMedianUs(launch, 30, 3);
  const double flops = 4.0 * heads * (double)rows * keys * D;
  printf(
      "%-5s h%-3d n%-5d D%-3d BN%-3d WG%d S%d %s smem %6d: %s max_err %.4f bad %zu  %8.2f us %6.1f "
      "TFLOP/s\n",
      tname, heads, rows, D, BN, WG, STAGES, OVERLAP ? "ovl" : "seq", smem,
      bad == 0 ? "OK  " : "FAIL", max_err, bad, us, flops / us * 1e-6);
  CK(cudaFree(q));
  CK(cudaFree(k));
  CK(cudaFree(v));
  CK(cudaFree(o));
  CK(cudaFree(ref));
}

int main() {
  // Odd row counts (rows past the end of the last block), both loops:
  // sequential, and S issued behind O += P V (three or more stages).
  Run<__half, 128, 128, 2, 2, false>("fp16", 2, 200);
  Run<__half, 128, 128, 2, 3, true>("fp16", 2, 300);
  Run<__half, 64, 64, 1, 2, false>("fp16", 3, 333);
  Run<__nv_bfloat16, 128, 64, 3, 3, true>("bf16", 2, 129);
  Run<__nv_bfloat16, 64, 64, 2, 4, true>("bf16", 2, 77);
  // The suite's prefill shapes (llama3 8b: 32 heads, D 128).
  Run<__half, 128, 128, 2, 2, false>("fp16", 32, 1024);
  Run<__half, 128, 128, 2, 3, true>("fp16", 32, 1024);
  Run<__half, 128, 64, 2, 3, true>("fp16", 32, 1024);
  Run<__half, 128, 64, 2, 4, true>("fp16", 32, 1024);
  Run<__half, 128, 64, 1, 3, true>("fp16", 32, 1024);
  Run<__half, 128, 64, 3, 3, true>("fp16", 32, 1024);
  Run<__half, 128, 128, 3, 2, false>("fp16", 32, 1024);
  Run<__nv_bfloat16, 128, 128, 2, 2, false>("bf16", 32, 2048);
  Run<__nv_bfloat16, 128, 128, 2, 3, true>("bf16", 32, 2048);
  Run<__nv_bfloat16, 128, 64, 2, 4, true>("bf16", 32, 2048);
  Run<__nv_bfloat16, 128, 64, 1, 3, true>("bf16", 32, 2048);
  Run<__nv_bfloat16, 128, 64, 3, 3, true>("bf16", 32, 2048);
  Run<__nv_bfloat16, 128, 128, 3, 2, false>("bf16", 32, 2048);
  return 0;
}
