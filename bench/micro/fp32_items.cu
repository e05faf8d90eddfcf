// float32 items of the flat and gather row kernels (bench/micro/run.sh
// fp32_items): how many floats a thread's item holds. The kernels take 8
// elements an item whatever the type (16 bytes of a 16-bit type); for floats
// that is two 16-byte accesses 32 bytes apart across a warp's lanes. Timed
// like bench/cuda_vs_torch.py (timing.cuh), each output checked:
//  - y = x - z over 8,688,284 floats (a flat binary op);
//  - a concat of three [1000, 1000] floats along the last axis: the gather
//    form (row and column of each item, the piece chosen per item), and a
//    block a row copying each piece 16 bytes a thread.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "timing.cuh"

// Items of V floats (4: one 16-byte access; 8: two, 16 bytes apart within a
// thread), U items a thread in flight, the grid covering the items once.
template <int V, int U>
__global__ void __launch_bounds__(256) sub(const float* __restrict__ x, const float* __restrict__ z,
                                           float* __restrict__ y, long long items) {
  const long long stride = (long long)gridDim.x * 256;
  for (long long i0 = (long long)blockIdx.x * 256 + threadIdx.x; i0 < items; i0 += stride * U) {
    float4 a[U][V / 4], b[U][V / 4];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = i0 + u * stride;
      if (i >= items) break;
#pragma unroll
      for (int h = 0; h < V / 4; ++h) {
        a[u][h] = __ldg(reinterpret_cast<const float4*>(x + i * V) + h);
        b[u][h] = __ldg(reinterpret_cast<const float4*>(z + i * V) + h);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = i0 + u * stride;
      if (i >= items) break;
#pragma unroll
      for (int h = 0; h < V / 4; ++h) {
        reinterpret_cast<float4*>(y + i * V)[h] =
            make_float4(a[u][h].x - b[u][h].x, a[u][h].y - b[u][h].y, a[u][h].z - b[u][h].z,
                        a[u][h].w - b[u][h].w);
      }
    }
  }
}

// The gather form: item e of V floats at row e / W, column e % W, read from
// the piece holding that column (pieces of P columns; P a multiple of V).
template <int V, int U>
__global__ void __launch_bounds__(256)
    gather(const float* __restrict__ p0, const float* __restrict__ p1, const float* __restrict__ p2,
           float* __restrict__ y, long long items, unsigned w, unsigned p) {
  const long long stride = (long long)gridDim.x * 256;
  for (long long i0 = (long long)blockIdx.x * 256 + threadIdx.x; i0 < items; i0 += stride * U) {
    float4 v[U][V / 4];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = i0 + u * stride;
      if (i >= items) break;
      const unsigned e = (unsigned)(i * V), r = e / w, c = e % w;
      const float* src = c < p       ? p0 + r * p + c
                         : c < 2 * p ? p1 + r * p + c - p
                                     : p2 + r * p + c - 2 * p;
#pragma unroll
      for (int h = 0; h < V / 4; ++h) v[u][h] = __ldg(reinterpret_cast<const float4*>(src) + h);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = i0 + u * stride;
      if (i >= items) break;
#pragma unroll
      for (int h = 0; h < V / 4; ++h) reinterpret_cast<float4*>(y + i * V)[h] = v[u][h];
    }
  }
}

// A block a row: thread t copies 16-byte chunks t, t + 256, ... of each piece.
__global__ void __launch_bounds__(256)
    row_copy(const float* __restrict__ p0, const float* __restrict__ p1,
             const float* __restrict__ p2, float* __restrict__ y, int p) {
  const int chunks = p / 4;
  const long long r = blockIdx.x;
  float4 v[3][4];
  const float* ps[3] = {p0, p1, p2};
#pragma unroll
  for (int s = 0; s < 3; ++s) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int c = threadIdx.x + k * 256;
      if (c < chunks) v[s][k] = __ldg(reinterpret_cast<const float4*>(ps[s] + r * p) + c);
    }
  }
#pragma unroll
  for (int s = 0; s < 3; ++s) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int c = threadIdx.x + k * 256;
      if (c < chunks) reinterpret_cast<float4*>(y + r * 3 * p + s * p)[c] = v[s][k];
    }
  }
}

// Runs `launch` once into `y` (n floats, poisoned first) and counts the
// sampled elements `wrong` finds off, then times it; one line of output.
template <typename Launch, typename Wrong>
void Report(const char* label, float* y, long long n, double mb, Launch launch, Wrong wrong) {
  CK(cudaMemset(y, 0xff, n * 4));
  launch();
  CK(cudaDeviceSynchronize());
  std::vector<float> hy(n);
  CK(cudaMemcpy(hy.data(), y, n * 4, cudaMemcpyDeviceToHost));
  const long long bad = wrong(hy);
  const float us = FlushedMedianUs(launch, 30, 3);
  printf("%-44s: %8.2f us %5.2f TB/s%s\n", label, us, mb / us, bad ? "  WRONG" : "");
}

// "NAME V v U u grid g", the label of a grid-stride variant.
std::string Label(const char* name, int v, int u, long long grid) {
  char buf[96];
  snprintf(buf, sizeof buf, "%s V %d U %d grid %lld", name, v, u, grid);
  return buf;
}

long long GridOf(long long items, int u) { return (items + 256LL * u - 1) / (256LL * u); }

int main() {
  {
    const long long n = 8688284;  // a multiple of 4, not of 8: the tail is left out
    float *dx, *dz, *dy;
    CK(cudaMalloc(&dx, n * 4));
    CK(cudaMalloc(&dz, n * 4));
    CK(cudaMalloc(&dy, n * 4));
    std::vector<float> hx(n), hz(n);
    for (long long i = 0; i < n; ++i) {
      hx[i] = (float)(i % 13);
      hz[i] = (float)(i % 7);
    }
    CK(cudaMemcpy(dx, hx.data(), n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dz, hz.data(), n * 4, cudaMemcpyHostToDevice));
    const double mb = n * 12.0 / 1e6;
    printf("== y = x - z over %lld floats (%.1f MB moved)\n", n, mb);
    auto run = [&](const char* name, auto kernel, int v, int u) {
      const long long items = n / v, grid = GridOf(items, u);
      Report(
          Label(name, v, u, grid).c_str(), dy, n, mb,
          [&] { kernel<<<(unsigned)grid, 256>>>(dx, dz, dy, items); },
          [&](const std::vector<float>& hy) {
            long long bad = 0;
            for (long long i = 0; i < items * v; i += 97) bad += hy[i] != hx[i] - hz[i];
            return bad;
          });
    };
    run("items of 8 (as now)", sub<8, 2>, 8, 2);
    run("items of 8", sub<8, 1>, 8, 1);
    run("items of 4", sub<4, 4>, 4, 4);
    run("items of 4", sub<4, 2>, 4, 2);
    run("items of 4", sub<4, 1>, 4, 1);
    CK(cudaFree(dx));
    CK(cudaFree(dz));
    CK(cudaFree(dy));
  }
  {
    const int rows = 1000, p = 1000, w = 3 * p;
    const long long n = (long long)rows * w;
    float *d[3], *dy;
    std::vector<float> h[3];
    for (int s = 0; s < 3; ++s) {
      CK(cudaMalloc(&d[s], (size_t)rows * p * 4));
      h[s].resize((size_t)rows * p);
      for (size_t i = 0; i < h[s].size(); ++i) h[s][i] = (float)(s * 100 + i % 31);
      CK(cudaMemcpy(d[s], h[s].data(), h[s].size() * 4, cudaMemcpyHostToDevice));
    }
    CK(cudaMalloc(&dy, n * 4));
    const double mb = n * 8.0 / 1e6;
    printf("== concat of 3 x [%d, %d] floats along the last axis (%.1f MB moved)\n", rows, p, mb);
    auto wrong = [&](const std::vector<float>& hy) {
      long long bad = 0;
      for (long long e = 0; e < n; e += 89) {
        const long long r = e / w, c = e % w, s = c / p;
        bad += hy[e] != h[s][r * p + c % p];
      }
      return bad;
    };
    auto run = [&](const char* name, auto kernel, int v, int u) {
      const long long items = n / v, grid = GridOf(items, u);
      Report(
          Label(name, v, u, grid).c_str(), dy, n, mb,
          [&] {
            kernel<<<(unsigned)grid, 256>>>(d[0], d[1], d[2], dy, items, (unsigned)w, (unsigned)p);
          },
          wrong);
    };
    run("gather, items of 8 (as now)", gather<8, 2>, 8, 2);
    run("gather, items of 4", gather<4, 4>, 4, 4);
    run("gather, items of 4", gather<4, 2>, 4, 2);
    run("gather, items of 4", gather<4, 1>, 4, 1);
    Report(
        "a block a row, 16 B chunks", dy, n, mb,
        [&] { row_copy<<<rows, 256>>>(d[0], d[1], d[2], dy, p); }, wrong);
    Report(
        "three cudaMemcpy2D", dy, n, mb,
        [&] {
          for (int s = 0; s < 3; ++s) {
            CK(cudaMemcpy2DAsync(dy + s * p, w * 4, d[s], p * 4, p * 4, rows,
                                 cudaMemcpyDeviceToDevice));
          }
        },
        wrong);
  }
  return 0;
}
