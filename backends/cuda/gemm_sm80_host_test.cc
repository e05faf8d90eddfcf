// CPU-only (CI): gemm_sm80.cuh's template, compiled for the host and run on
// an emulation of the instructions it issues, against a float64 GEMM. The
// emulation runs a block's threads as threads of this process, one block
// after another: __syncthreads and the warp-wide instructions (ldmatrix,
// mma.sync, shuffles) meet at barriers; cp.async copies are queued in their
// commit groups and land only when a wait_group lets them, so a read of a
// stage before its wait sees stale data. The fragment layouts are the PTX
// ISA's for ldmatrix .m8n8 (.trans) and mma.m16n8k16 .row.col. It also
// checks the instructions' alignment rules and that every ldmatrix phase
// reads 8 different 16-byte bank groups (the swizzle's point). This checks
// the template's indexing, edges and pipeline order without a GPU; the GPU
// test (cuda_codegen_test.cc, graphs "mma_...") checks the real thing.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <thread>
#include <vector>

// The CUDA qualifiers mean nothing on the host (before the CUDA headers,
// which would define them as attributes GCC ignores with a warning).
#define __device__
#define __host__
#define __global__
#define __shared__
#define __launch_bounds__(...)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <vector_functions.h>

#include "gtest/gtest.h"

namespace yr_emu {

thread_local uint3 t_thread, t_block;
uint3 g_grid, g_block_dim;
std::barrier<>* g_sync = nullptr;  // the block's threads

// A warp's meeting point: each lane posts its operands, all meet, each
// reads what it needs, all meet again before the slots are reused.
struct Warp {
  Warp() : bar(32) {}
  std::barrier<> bar;
  unsigned long long word[32] = {};
  unsigned addr[32] = {};
  unsigned a[32][4] = {}, b[32][2] = {};
};
std::vector<std::unique_ptr<Warp>> g_warps;
Warp& MyWarp() { return *g_warps[t_thread.x / 32]; }
unsigned Lane() { return t_thread.x % 32; }

// Rule breaks seen (counted from every thread).
std::atomic<int> g_misaligned{0}, g_bank_conflicts{0}, g_out_of_smem{0};

struct Copy {
  unsigned char* dst;
  const unsigned char* src;
  bool valid;
};
thread_local std::vector<Copy> t_open;
thread_local std::deque<std::vector<Copy>> t_groups;

template <typename V>
V Exchange(V v, unsigned from_lane) {
  Warp& w = MyWarp();
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  w.word[Lane()] = bits;
  w.bar.arrive_and_wait();
  bits = w.word[from_lane];
  w.bar.arrive_and_wait();
  V out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace yr_emu

#define threadIdx (::yr_emu::t_thread)
#define blockIdx (::yr_emu::t_block)
#define gridDim (::yr_emu::g_grid)
#define blockDim (::yr_emu::g_block_dim)

// What the prelude's device-only code names (only parsed here).
template <typename T>
T __ldg(const T* p) {
  return *p;
}
template <typename V>
V __shfl_xor_sync(unsigned, V v, int lane_mask, int = 32) {
  return yr_emu::Exchange(v, yr_emu::Lane() ^ static_cast<unsigned>(lane_mask));
}
inline void __syncthreads() { yr_emu::g_sync->arrive_and_wait(); }
inline size_t __cvta_generic_to_shared(const void* p) { return reinterpret_cast<size_t>(p); }
inline float __expf(float x) { return expf(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
using std::max;
using std::min;

#include "backends/cuda/kernel_prelude.cuh"

// The kernel's shared memory (one block at a time).
alignas(1024) unsigned char yr_gemm80_smem_raw[232448];

// The instructions, emulated.
#define YR_GEMM80_HOST 1
template <typename T>
static void yr_gemm80_cp16(T* dst, const T* src, bool valid) {
  auto* d = reinterpret_cast<unsigned char*>(dst);
  if (d < yr_gemm80_smem_raw || d + 16 > yr_gemm80_smem_raw + sizeof yr_gemm80_smem_raw) {
    ++yr_emu::g_out_of_smem;
    return;
  }
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 ||
      (valid && reinterpret_cast<uintptr_t>(src) % 16 != 0)) {
    ++yr_emu::g_misaligned;
  }
  yr_emu::t_open.push_back({d, reinterpret_cast<const unsigned char*>(src), valid});
}
static void yr_gemm80_commit() {
  yr_emu::t_groups.push_back(std::move(yr_emu::t_open));
  yr_emu::t_open.clear();
}
template <int N>
static void yr_gemm80_wait() {
  while (yr_emu::t_groups.size() > static_cast<size_t>(N)) {
    for (const yr_emu::Copy& c : yr_emu::t_groups.front()) {
      if (c.valid) {
        std::memcpy(c.dst, c.src, 16);
      } else {
        std::memset(c.dst, 0, 16);
      }
    }
    yr_emu::t_groups.pop_front();
  }
}
static unsigned yr_gemm80_smem_addr(const void* p) {
  return static_cast<unsigned>(static_cast<const unsigned char*>(p) - yr_gemm80_smem_raw);
}
// ldmatrix .x4: lanes 8 j .. 8 j + 7 give the rows of matrix j; lane l
// receives, of each matrix, row l / 4's elements 2 (l % 4) and + 1 (with
// .trans: column l / 4's, i.e. those of the transposed matrix).
static void Ldsm(unsigned (&r)[4], unsigned addr, bool trans) {
  yr_emu::Warp& w = yr_emu::MyWarp();
  const unsigned lane = yr_emu::Lane();
  if (addr % 16 != 0) ++yr_emu::g_misaligned;
  w.addr[lane] = addr;
  w.bar.arrive_and_wait();
  if (lane == 0) {
    for (int j = 0; j < 4; ++j) {
      unsigned groups = 0;
      for (int i = 0; i < 8; ++i) groups |= 1u << ((w.addr[8 * j + i] / 16) % 8);
      if (groups != 0xffu) ++yr_emu::g_bank_conflicts;
    }
  }
  auto element = [&](int j, int row, int col) {
    uint16_t v;
    std::memcpy(&v, yr_gemm80_smem_raw + w.addr[8 * j + row] + 2 * col, 2);
    return static_cast<unsigned>(v);
  };
  for (int j = 0; j < 4; ++j) {
    const int g = lane / 4, c = 2 * (lane % 4);
    const unsigned lo = trans ? element(j, c, g) : element(j, g, c);
    const unsigned hi = trans ? element(j, c + 1, g) : element(j, g, c + 1);
    r[j] = lo | (hi << 16);
  }
  w.bar.arrive_and_wait();
}
static void yr_gemm80_ldsm(unsigned (&r)[4], unsigned addr) { Ldsm(r, addr, false); }
static void yr_gemm80_ldsm_t(unsigned (&r)[4], unsigned addr) { Ldsm(r, addr, true); }
// mma.m16n8k16 .row.col, float accumulators: lane l = 4 g + t holds
// A[g][2t..], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..] (a0..a3),
// B[2t..][g], B[2t+8..][g] (b0, b1; B is K x N) and C[g][2t..], C[g+8][2t..].
template <typename T>
static void yr_gemm80_mma(float* c, const unsigned* a, const unsigned* b) {
  yr_emu::Warp& w = yr_emu::MyWarp();
  const unsigned lane = yr_emu::Lane();
  for (int i = 0; i < 4; ++i) w.a[lane][i] = a[i];
  for (int i = 0; i < 2; ++i) w.b[lane][i] = b[i];
  w.bar.arrive_and_wait();
  auto A = [&](int row, int k) {
    const int l = 4 * (row % 8) + (k % 8) / 2;
    const float2 f = yr_unpack2<T>(w.a[l][(row / 8) + 2 * (k / 8)]);
    return k % 2 ? f.y : f.x;
  };
  auto B = [&](int k, int col) {
    const int l = 4 * col + (k % 8) / 2;
    const float2 f = yr_unpack2<T>(w.b[l][k / 8]);
    return k % 2 ? f.y : f.x;
  };
  const int g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    float sum = c[e];
    for (int k = 0; k < 16; ++k) sum += A(row, k) * B(k, col);
    c[e] = sum;
  }
  w.bar.arrive_and_wait();
}

// Split-K's global memory: plain stores and loads (blocks run one after
// another here), and the arrival as an atomic add.
static void yr_gemm80_store_cg(float4* p, float4 v) { *p = v; }
static float4 yr_gemm80_load_cg(const float4* p) { return *p; }
static void yr_gemm80_fence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static unsigned yr_gemm80_arrive(unsigned* counter) {
  return std::atomic_ref<unsigned>(*counter).fetch_add(1u);
}

#include "backends/cuda/gemm_sm80.cuh"

namespace yirage::backends::cuda {
namespace {

// Bias and ReLU on the product, then minus a residual: the epilogue reads
// its row (over the batch) and column. Gated: silu(A @ B) * (A @ B2) first.
template <typename T>
struct Epilogue {
  const T* bias;
  const T* residual;
  int n;
  float operator()(float v, int row, int col) const {
    return fmaxf(v + yr_ld(bias, col), 0.0f) - yr_ld(residual, static_cast<i64>(row) * n + col);
  }
  float gate(float p, float p2) const { return p / (1.0f + expf(-p)) * p2; }
};

template <typename T>
std::vector<T> Random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<T> v(n);
  for (T& x : v) yr_st(&x, 0, u(rng));
  return v;
}

// Runs the kernel of Cfg on `batch` products of (m, n, k) with C's row
// stride ldc > n, C poisoned (NaN) beforehand, and compares every element
// of C with the float64 result; elements past n in each row stay NaN.
template <class Cfg>
void Check(int m, int n, int k, int ldc, int batch = 1, int splits = 1) {
  using T = typename Cfg::elem;
  SCOPED_TRACE(::testing::Message() << "tile " << Cfg::bm << " x " << Cfg::bn << ", stages "
                                    << Cfg::stages << (Cfg::b_nk ? ", B [N, K]" : ", B [K, N]")
                                    << (Cfg::gated ? ", gated" : "") << ", M " << m << " N " << n
                                    << " K " << k << " batch " << batch << " splits " << splits);
  const std::vector<T> a = Random<T>(static_cast<size_t>(batch) * m * k, 1);
  const std::vector<T> b = Random<T>(static_cast<size_t>(batch) * n * k, 2);
  const std::vector<T> b2 = Random<T>(Cfg::gated ? static_cast<size_t>(batch) * n * k : 0, 5);
  const std::vector<T> bias = Random<T>(n, 3);
  const std::vector<T> residual = Random<T>(static_cast<size_t>(batch) * m * n, 4);
  std::vector<T> c(static_cast<size_t>(batch) * m * ldc);
  for (T& x : c) yr_st(&x, 0, NAN);
  yr_emu::g_misaligned = yr_emu::g_bank_conflicts = yr_emu::g_out_of_smem = 0;
  const Epilogue<T> epi{bias.data(), residual.data(), n};
  const long long blocks = yr_gemm_sm80_grid<Cfg>(m, n, batch, splits);
  const long long tiles = yr_gemm_sm80_tiles<Cfg>(m, n, batch);
  yr_emu::g_grid = {static_cast<unsigned>(blocks), 1, 1};
  yr_emu::g_block_dim = {Cfg::threads, 1, 1};
  ASSERT_LE(Cfg::smem_bytes, static_cast<int>(sizeof yr_gemm80_smem_raw));
  // Split-K: the workspace (poisoned) and the counters (zero before the
  // first launch); two launches, the second with the blocks in reverse
  // order (another range arrives last), on the counters the first left.
  std::vector<float> ws(splits > 1 ? tiles * splits * Cfg::bm * Cfg::bn : 0, NAN);
  std::vector<unsigned> flags(splits > 1 ? tiles : 0, 0u);
  const yr_gemm80_split split{splits, ws.data(), flags.data()};
  const int launches = splits > 1 ? 2 : 1;
  for (long long i = 0; i < launches * blocks; ++i) {
    const long long block = i < blocks ? i : 2 * blocks - 1 - i;
    std::memset(yr_gemm80_smem_raw, 0xcd, sizeof yr_gemm80_smem_raw);  // stale data
    std::barrier<> sync(Cfg::threads);
    yr_emu::g_sync = &sync;
    yr_emu::g_warps.clear();
    for (int w = 0; w < Cfg::warps; ++w)
      yr_emu::g_warps.push_back(std::make_unique<yr_emu::Warp>());
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < Cfg::threads; ++t) {
      threads.emplace_back([&, t] {
        yr_emu::t_thread = {t, 0, 0};
        yr_emu::t_block = {static_cast<unsigned>(block), 0, 0};
        yr_emu::t_open.clear();
        yr_emu::t_groups.clear();
        yr_gemm_sm80<Cfg, Epilogue<T>>(a.data(), b.data(), c.data(), m, n, k, ldc, epi, batch,
                                       Cfg::gated ? b2.data() : nullptr, split);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  EXPECT_EQ(yr_emu::g_misaligned.load(), 0);
  EXPECT_EQ(yr_emu::g_bank_conflicts.load(), 0) << "ldmatrix phases on one bank group";
  EXPECT_EQ(yr_emu::g_out_of_smem.load(), 0);
  EXPECT_EQ(std::count(flags.begin(), flags.end(), 0u), static_cast<long>(flags.size()))
      << "split-K counters left zero for the next launch";
  // The output's rounding (an ulp of the value) plus float accumulation's.
  const double rel = yr_is_half<T>::value ? 1.0 / 1024 : 1.0 / 128;
  int bad = 0, outside = 0;
  for (int p = 0; p < batch; ++p) {
    for (int r = 0; r < m; ++r) {
      for (int j = 0; j < ldc; ++j) {
        const float got = yr_ld(c.data(), (static_cast<i64>(p) * m + r) * ldc + j);
        if (j >= n) {
          outside += !std::isnan(got);
          continue;
        }
        auto product = [&](const std::vector<T>& bm) {
          double sum = 0;
          for (int i = 0; i < k; ++i) {
            const double x = yr_ld(a.data(), (static_cast<i64>(p) * m + r) * k + i);
            const double y = Cfg::b_nk ? yr_ld(bm.data(), (static_cast<i64>(p) * n + j) * k + i)
                                       : yr_ld(bm.data(), (static_cast<i64>(p) * k + i) * n + j);
            sum += x * y;
          }
          return sum;
        };
        double sum = product(b);
        if (Cfg::gated) sum = sum / (1.0 + std::exp(-sum)) * product(b2);
        const double want = std::max(sum + yr_ld(bias.data(), j), 0.0) -
                            yr_ld(residual.data(), (static_cast<i64>(p) * m + r) * n + j);
        if (!(std::fabs(got - want) <= 1e-3 + rel * std::fabs(want))) {
          if (bad < 5)
            ADD_FAILURE() << "C[" << p << "][" << r << "][" << j << "] = " << got << ", want "
                          << want;
          ++bad;
        }
      }
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(outside, 0) << "written past N";
}

// Every tile shape the backend's points use, M, N and K off the tiles (K 72
// and 136: a partial last stage; N 200), both layouts of B and both 16-bit
// types, several K steps around the ring (K 520: 9 steps through 3 or 4
// stages), 16-byte stores (N and ldc multiples of 8) and 2-byte ones.
TEST(GemmSm80HostTest, TilesEdgesAndLayoutsMatchFloat64) {
  Check<yr_gemm_sm80_cfg<__half, 64, 64, 2, 2, 4, true>>(100, 72, 520, 80);
  Check<yr_gemm_sm80_cfg<__half, 64, 64, 2, 2, 2, false>>(65, 136, 72, 137);
  Check<yr_gemm_sm80_cfg<__nv_bfloat16, 64, 128, 2, 2, 4, false>>(70, 200, 136, 200);
  Check<yr_gemm_sm80_cfg<__nv_bfloat16, 128, 128, 2, 2, 3, true>>(129, 100, 136, 101);
  Check<yr_gemm_sm80_cfg<__half, 128, 256, 2, 4, 3, false>>(130, 264, 72, 272);
}

// The gated form: a tile's products are half A @ B, half A @ B2 (B's
// rows or panels from either operand), C's tiles half as wide; N off the
// tiles, both layouts, both 128 and 256 products a tile, a batch.
TEST(GemmSm80HostTest, GatedPairsJoinBeforeTheEpilogue) {
  Check<yr_gemm_sm80_cfg<__half, 128, 128, 2, 2, 3, true, 8, true>>(129, 100, 136, 104);
  Check<yr_gemm_sm80_cfg<__nv_bfloat16, 64, 128, 2, 2, 4, false, 8, true>>(70, 136, 72, 136);
  Check<yr_gemm_sm80_cfg<__half, 128, 256, 2, 4, 3, false, 8, true>>(100, 200, 72, 201);
  Check<yr_gemm_sm80_cfg<__nv_bfloat16, 64, 128, 2, 2, 2, true, 8, true>>(40, 72, 136, 72, 2);
}

// Split-K: 2 and 3 ranges of a tile's K blocks (K 520: 9 blocks; K 72: 2
// blocks, so one of 3 ranges is empty and adds nothing), gated and batched
// tiles, both layouts; every range stores its partial sums and the last
// to arrive adds them and runs the epilogue.
TEST(GemmSm80HostTest, SplitKRangesAddUpInTheLastToArrive) {
  Check<yr_gemm_sm80_cfg<__half, 64, 64, 2, 2, 3, true>>(100, 72, 520, 80, 1, 2);
  Check<yr_gemm_sm80_cfg<__nv_bfloat16, 64, 128, 2, 2, 2, false>>(70, 136, 72, 137, 1, 3);
  Check<yr_gemm_sm80_cfg<__half, 128, 128, 2, 2, 3, false, 8, true>>(129, 104, 520, 107, 1, 3);
  Check<yr_gemm_sm80_cfg<__nv_bfloat16, 64, 64, 2, 2, 4, true>>(40, 72, 136, 72, 2, 2);
}

// A batch: each product's tiles read only its own rows of A and B (a tile
// past M or N, and B [K, N]'s K tail, stay within the product) and its own
// rows of the residual.
TEST(GemmSm80HostTest, BatchesKeepToTheirProducts) {
  Check<yr_gemm_sm80_cfg<__half, 64, 64, 2, 2, 3, false>>(40, 72, 136, 72, 3);
  Check<yr_gemm_sm80_cfg<__nv_bfloat16, 64, 64, 2, 2, 4, true>>(70, 40, 72, 41, 2);
}

}  // namespace
}  // namespace yirage::backends::cuda
