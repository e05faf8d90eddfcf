#include "backends/cuda/cuda_streamed_matmul.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "backends/codegen_util.h"
#include "backends/cuda/cuda_families.h"
#include "backends/cuda/cuda_wgmma.h"
#include "core/kernel_family.h"

namespace yirage::backends::cuda {
namespace {

using core::Graph;
using core::StreamedMatmulMatch;
using core::TensorInfo;

constexpr int kChunkK = 64;  // K rows per pipeline stage
constexpr int kTileN = 64;   // output columns per block
// The shared-memory form with its K splits summed by a combine kernel,
// never in a cluster.
constexpr int kSharedWorkspaceVariant = yirage::v1::StreamedMatmulSchedule::FORM_SHARED_COMBINE;

// Halves in one row of the low-rank A chunk: yr_swz<R> pads only ranks whose
// rows are not a power-of-two number of 16-byte chunks.
int64_t LowRankRowHalves(int r) {
  const int chunks = r / 8;
  return (chunks & (chunks - 1)) == 0 ? r : r + 8;
}

int64_t StageHalves(const StreamedMatmulPlan& p) {
  const int nw = p.match.w2 >= 0 ? 2 : 1;
  return int64_t{p.m_tiles} * 16 * kChunkK + nw * kChunkK * kTileN +
         (p.r > 0 ? kChunkK * LowRankRowHalves(p.r) : 0) +
         static_cast<int64_t>(p.match.col_scales.size()) * kChunkK;
}

int64_t SmemBytes(const StreamedMatmulPlan& p) {
  return (p.stages * StageHalves(p) + p.r * kTileN) * 2 + p.m_tiles * 16 * 4;
}

constexpr char kKernel[] = R"(
// streamed matmul@WGNOTE@: M=@M@ K=@K@ N=@N@, @NW@ weight(s), rank @R@, @SPLITS@ K split(s)@MERGE@, @STAGES@ stages, @NT@ threads
extern "C" __global__ void __launch_bounds__(@NT@) @CLUSTER_DIMS@ @NAME@(@PARAMS@) {
  typedef @T@ T;
  constexpr int M = @M@, MT = @MT@, MP = MT * 16, K = @K@, N = @N@, SPLITS = @SPLITS@, KS = K / SPLITS;
  constexpr int BK = 64, BN = 64, STAGES = @STAGES@, R = @R@, NW = @NW@;
  // Warps: 4 along N (16 columns each) times WM along M (MTW 16-row tiles each).
  constexpr int NT = @NT@, WM = NT / 128, MTW = MT / WM;
  static_assert(MT % WM == 0, "row tiles split evenly over the warps");
  // Unpadded rows, chunks swizzled by yr_swz (X and W rows are 128 bytes).
  constexpr int LX = BK, LW = BN, CA = R / 8, LA = (CA & (CA - 1)) == 0 ? R : R + 8;
  constexpr int NG = @NG@;
  // wgmma (WG): one warpgroup, X and the weights read by the tensor cores
  // straight from the stages, whose 128-byte swizzle (yr_swz) is the
  // hardware's; stages start on 1024-byte boundaries (X's 64 rows and the
  // weights' chunks are whole multiples of it).
  constexpr bool WG = @WG@;
  constexpr int STAGE = MP * LX + NW * BK * LW + (R > 0 ? BK * LA : 0) + NG * BK;
  static_assert(!WG || (NT == 128 && MP == 64 && R == 0 && NG == 0 && STAGE % 512 == 0),
                "wgmma form: one warpgroup, 64 rows, no low rank or column scales");
  constexpr int CHUNKS = KS / BK;
  constexpr int TPR = NT / MP, CPT = BK / TPR;  // prologue pass: threads per row, columns each
  extern __shared__ __align__(1024) unsigned char yr_smb[];
  T* const sm = reinterpret_cast<T*>(yr_smb);
  T* const bsm = sm + STAGES * STAGE;  // low rank: the block's B columns [R][BN], swizzled
  float* const rs_sm = reinterpret_cast<float*>(bsm + R * LW);
  (void)rs_sm; (void)bsm;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wn = warp & 3, mt0 = (warp >> 2) * MTW;
  const int li = lane & 7, lm = lane >> 3;
  const int n0 = blockIdx.x * BN, split = blockIdx.y;
  (void)split;
  const int kbase = split * KS;
  const unsigned long long policy = yr_stream_policy();  // the weights are read once
  // Rows M..MP-1 of every X stage stay zero.
  for (int x = tid; x < STAGES * (MP - M) * (BK / 8); x += NT) {
    const int st = x / ((MP - M) * (BK / 8)), rem = x % ((MP - M) * (BK / 8));
    *reinterpret_cast<uint4*>(sm + st * STAGE + (M + rem / (BK / 8)) * LX + (rem % (BK / 8)) * 8) =
        make_uint4(0, 0, 0, 0);
  }
#if @R@ > 0
  for (int x = tid; x < R * (BN / 8); x += NT) {
    const int r = x / (BN / 8), c = (x % (BN / 8)) * 8;
    yr_cp_async16_stream(bsm + yr_swz<BN>(r, c), lb + (i64)r * N + n0 + c, policy);
  }
#endif
  // Copies of chunk t into stage st: the weights (this block's columns) ...
  auto load_weights = [&](int t, int st) {
    T* const w1s = sm + st * STAGE + MP * LX;
    const int k0 = kbase + t * BK;
    for (int x = tid; x < BK * (BN / 8); x += NT) {
      const int r = x / (BN / 8), c = (x % (BN / 8)) * 8;
      yr_cp_async16_stream(w1s + yr_swz<BN>(r, c), w1 + (i64)(k0 + r) * N + n0 + c, policy);
#if @NW@ == 2
      yr_cp_async16_stream(w1s + BK * LW + yr_swz<BN>(r, c), w2 + (i64)(k0 + r) * N + n0 + c, policy);
#endif
    }
  };
  // ... the column scales' chunk, which rides in the same stage (no load on
  // the prologue's critical path) ...
  auto load_scales = [&](int t, int st) {
    (void)t; (void)st;
#if @NG@ > 0
    T* const gs = sm + st * STAGE + MP * LX + NW * BK * LW + (R > 0 ? BK * LA : 0);
    const int k0 = kbase + t * BK;
    (void)k0;
    if (tid < NG * (BK / 8)) {
      const int gi = tid / (BK / 8), c = (tid % (BK / 8)) * 8;
      @GCOPY@
    }
#endif
  };
  // ... and what every block reads: X, the low-rank A and the column scales.
  auto load_shared = [&](int t, int st) {
    T* const xs = sm + st * STAGE;
    T* const w1s = xs + MP * LX;
    const int k0 = kbase + t * BK;
    (void)w1s;
    for (int x = tid; x < M * (BK / 8); x += NT) {
      const int r = x / (BK / 8), c = (x % (BK / 8)) * 8;
      yr_cp_async16(xs + yr_swz<BK>(r, c), x_in + (i64)r * K + k0 + c);
    }
#if @R@ > 0
    T* const as = w1s + NW * BK * LW;
    for (int x = tid; x < BK * (R / 8); x += NT) {
      const int r = x / (R / 8), c = (x % (R / 8)) * 8;
      yr_cp_async16_stream(as + yr_swz<R>(r, c), la + (i64)(k0 + r) * R + c, policy);
    }
#endif
    load_scales(t, st);
  };
  // The shared operands' chunks per thread, through registers (below).
  constexpr int XPT = (M * (BK / 8) + NT - 1) / NT, APT = R > 0 ? (BK * (R / 8) + NT - 1) / NT : 0;
  if constexpr (CHUNKS <= STAGES - 1 && CHUNKS * (XPT + APT) <= 16) {
    // The whole K range fits the prologue: X and A are asked for first, as
    // plain loads into registers, then every weight copy goes out (one
    // group), then X and A go to their stages, so the first chunk's math
    // waits for its own weights only. (On an H200, LoRA in a harness: 5.8-5.9
    // us, against 6.24 with X and A copied after the weights and 7.0 with
    // them copied first; cp.async copies of X and A ahead of the weights
    // slowed the weights, loads into registers do not.)
    uint4 xa[CHUNKS][XPT + APT];
#pragma unroll
    for (int s = 0; s < CHUNKS; ++s) {
#pragma unroll
      for (int i = 0; i < XPT; ++i) {
        const int x = tid + i * NT, r = x / (BK / 8), c = (x % (BK / 8)) * 8;
        if (x < M * (BK / 8)) {
          xa[s][i] = __ldg(reinterpret_cast<const uint4*>(x_in + (i64)r * K + kbase + s * BK + c));
        }
      }
#if @R@ > 0
#pragma unroll
      for (int i = 0; i < APT; ++i) {
        const int x = tid + i * NT, r = x / (R / 8), c = (x % (R / 8)) * 8;
        if (x < BK * (R / 8)) {
          xa[s][XPT + i] = __ldg(reinterpret_cast<const uint4*>(la + (i64)(kbase + s * BK + r) * R + c));
        }
      }
#endif
    }
    for (int s = 0; s < CHUNKS; ++s) load_weights(s, s);
    for (int s = 0; s < CHUNKS; ++s) load_scales(s, s);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) yr_cp_async_commit();
#pragma unroll
    for (int s = 0; s < CHUNKS; ++s) {
      T* const xs = sm + s * STAGE;
#pragma unroll
      for (int i = 0; i < XPT; ++i) {
        const int x = tid + i * NT, r = x / (BK / 8), c = (x % (BK / 8)) * 8;
        if (x < M * (BK / 8)) *reinterpret_cast<uint4*>(xs + yr_swz<BK>(r, c)) = xa[s][i];
      }
#if @R@ > 0
      T* const as = xs + MP * LX + NW * BK * LW;
#pragma unroll
      for (int i = 0; i < APT; ++i) {
        const int x = tid + i * NT, r = x / (R / 8), c = (x % (R / 8)) * 8;
        if (x < BK * (R / 8)) *reinterpret_cast<uint4*>(as + yr_swz<R>(r, c)) = xa[s][XPT + i];
      }
#endif
    }
  } else if constexpr (CHUNKS <= STAGES - 1) {
    // As above with more of X than registers hold: every weight copy goes
    // out before the shared operands' copies.
    for (int s = 0; s < CHUNKS; ++s) load_weights(s, s);
    for (int s = 0; s < CHUNKS; ++s) load_shared(s, s);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) yr_cp_async_commit();
  } else {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      load_shared(s, s);
      load_weights(s, s);
      yr_cp_async_commit();
    }
  }
  float acc1[MTW][2][4], acc2[MTW][2][4];
#if @WG@
  // Rows 16 * warp + lane / 4 (+ 8) of the block's 64 * NW columns (W1's,
  // then W2's): element (j, h, e) of the m64nNk16 fragment at 4 j + 2 h + e.
  float wacc[NW * 32];
#pragma unroll
  for (int i = 0; i < NW * 32; ++i) wacc[i] = 0.0f;
#endif
#if @R@ > 0
  float tacc[MTW][R / 8][4];
#endif
#pragma unroll
  for (int mt = 0; mt < MTW; ++mt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc1[mt][0][e] = acc1[mt][1][e] = acc2[mt][0][e] = acc2[mt][1][e] = 0.0f;
#if @R@ > 0
#pragma unroll
      for (int j = 0; j < R / 8; ++j) tacc[mt][j][e] = 0.0f;
#endif
    }
  }
  float ss = 0.0f;
  (void)ss; (void)acc2;
  for (int t = 0; t < CHUNKS; ++t) {
    yr_cp_async_wait<STAGES - 2>();
#if @WG@
    yr_fence_proxy_async();  // this thread's copies, visible to the tensor cores' reads
#endif
    __syncthreads();
    T* const xs = sm + (t % STAGES) * STAGE;
    const T* const w1s = xs + MP * LX;
#if @PREP@
    {
      // Prologue on the staged X chunk: sums of squares (rms) and column scales.
      const int row = tid / TPR, c0 = (tid % TPR) * CPT;
#if @NG@ > 0
      const T* const gs = w1s + NW * BK * LW + (R > 0 ? BK * LA : 0);
#endif
#pragma unroll 8
      for (int c = 0; c < CPT; ++c) {
        float xv = yr_ld(xs, yr_swz<BK>(row, c0 + c));
#if @RMS@
        ss += xv * xv;
#endif
#if @NG@ > 0
        xv *= @GSCALE@;
        yr_sth(xs + yr_swz<BK>(row, c0 + c), xv);
#endif
      }
    }
#if @NG@ > 0
    __syncthreads();  // the scaled X chunk is read by every warp
#endif
#endif
#if @WG@
    // Four k16 steps: X (K-major, rows 128 bytes apart in 8-row groups of
    // 1024) by the weights (N-major: W1's 64 columns, W2's 8 KiB on, each k
    // group of 8 rows 1024 bytes on). The previous chunk's group may still
    // run: it is waited for before its stage is refilled (below).
    yr_wg_fence();
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
      const unsigned long long da = yr_wg_desc(xs + ks * 16, 16, 1024);
      const unsigned long long db = yr_wg_desc(w1s + ks * 16 * LW, BK * LW * 2, 1024);
      @WGOP@(wacc, da, db);
    }
    yr_wg_commit();
    yr_wg_wait<1>();
#else
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
      unsigned af[MTW][4];
#pragma unroll
      for (int mt = 0; mt < MTW; ++mt) {
        yr_ldsm_x4(af[mt],
                   xs + yr_swz<BK>((mt0 + mt) * 16 + li + (lm & 1) * 8, ks * 16 + (lm >> 1) * 8));
      }
      unsigned bf[4];
      yr_ldsm_x4_t(bf, w1s + yr_swz<BN>(ks * 16 + li + (lm & 1) * 8, wn * 16 + (lm >> 1) * 8));
#pragma unroll
      for (int mt = 0; mt < MTW; ++mt) {
        yr_mma16816<T>(acc1[mt][0], af[mt], bf);
        yr_mma16816<T>(acc1[mt][1], af[mt], bf + 2);
      }
#if @NW@ == 2
      yr_ldsm_x4_t(bf, w1s + BK * LW +
                           yr_swz<BN>(ks * 16 + li + (lm & 1) * 8, wn * 16 + (lm >> 1) * 8));
#pragma unroll
      for (int mt = 0; mt < MTW; ++mt) {
        yr_mma16816<T>(acc2[mt][0], af[mt], bf);
        yr_mma16816<T>(acc2[mt][1], af[mt], bf + 2);
      }
#endif
#if @R@ > 0
      const T* const as = w1s + NW * BK * LW;
#pragma unroll
      for (int j = 0; j < R / 8; j += 2) {
        yr_ldsm_x4_t(bf, as + yr_swz<R>(ks * 16 + li + (lm & 1) * 8, (j + (lm >> 1)) * 8));
#pragma unroll
        for (int mt = 0; mt < MTW; ++mt) {
          yr_mma16816<T>(tacc[mt][j], af[mt], bf);
          yr_mma16816<T>(tacc[mt][j + 1], af[mt], bf + 2);
        }
      }
#endif
    }
#endif  // @WG@
    if (t + STAGES - 1 < CHUNKS) {
      load_shared(t + STAGES - 1, (t + STAGES - 1) % STAGES);
      load_weights(t + STAGES - 1, (t + STAGES - 1) % STAGES);
    }
    yr_cp_async_commit();
  }
  yr_cp_async_wait<0>();
#if @WG@
  yr_wg_wait<0>();
  yr_wg_fence_operands(wacc, NW * 32);
#endif
  // This thread's accumulator pair i of PAIRS (unrolled loops: constant
  // indices): its row, column in the block's tile, W1's pair, W2's pair.
  constexpr int PAIRS = WG ? BN / 4 : MTW * 4;
  auto pair_at = [&](int i, int& row, int& col, float& v0, float& v1, float& u0, float& u1) {
#if @WG@
    const int j = i >> 1, h = i & 1, a = 4 * j + 2 * h, b = (NW - 1) * 32 + a;
    row = warp * 16 + (lane >> 2) + 8 * h;
    col = j * 8 + 2 * (lane & 3);
    v0 = wacc[a]; v1 = wacc[a + 1]; u0 = wacc[b]; u1 = wacc[b + 1];
#else
    const int mt = i >> 2, nb = (i >> 1) & 1, h = i & 1;
    row = (mt0 + mt) * 16 + (lane >> 2) + 8 * h;
    col = wn * 16 + nb * 8 + 2 * (lane & 3);
    v0 = acc1[mt][nb][2 * h]; v1 = acc1[mt][nb][2 * h + 1];
    u0 = acc2[mt][nb][2 * h]; u1 = acc2[mt][nb][2 * h + 1];
#endif
  };
#if @R@ > 0
  __syncthreads();
  // Y += T B for the block's columns, T = X A straight from its registers.
#pragma unroll
  for (int kk = 0; kk < R / 16; ++kk) {
    unsigned bf[4];
    yr_ldsm_x4_t(bf, bsm + yr_swz<BN>(kk * 16 + li + (lm & 1) * 8, wn * 16 + (lm >> 1) * 8));
#pragma unroll
    for (int mt = 0; mt < MTW; ++mt) {
      unsigned pa[4];
      pa[0] = yr_pack2<T>(tacc[mt][2 * kk][0], tacc[mt][2 * kk][1]);
      pa[1] = yr_pack2<T>(tacc[mt][2 * kk][2], tacc[mt][2 * kk][3]);
      pa[2] = yr_pack2<T>(tacc[mt][2 * kk + 1][0], tacc[mt][2 * kk + 1][1]);
      pa[3] = yr_pack2<T>(tacc[mt][2 * kk + 1][2], tacc[mt][2 * kk + 1][3]);
      yr_mma16816<T>(acc1[mt][0], pa, bf);
      yr_mma16816<T>(acc1[mt][1], pa, bf + 2);
    }
  }
#endif
#if @RMS@
#pragma unroll
  for (int o = 1; o < TPR; o *= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
#endif
#if @CLUSTER@
  // The K splits are the blocks of one cluster: each block leaves its
  // partial tile (and its rows' sums of squares) in its shared memory, then
  // block `split` adds rows split * RPR.. of every block's tile through
  // distributed shared memory and applies the epilogue. (No workspace, no
  // second kernel.)
  constexpr int LR = BN + 4, RPR = MP / SPLITS;
  static_assert(NW * MP * LR + MP <= STAGES * STAGE / 2, "the partial tile fits in the ring");
  float* const red = reinterpret_cast<float*>(yr_smb);
  float* const red_ss = red + NW * MP * LR;
  (void)red_ss;
  __syncthreads();  // every warp is done with the ring
#pragma unroll
  for (int i = 0; i < PAIRS; ++i) {
    int row, col;
    float v0, v1, u0, u1;
    pair_at(i, row, col, v0, v1, u0, u1);
    *reinterpret_cast<float2*>(red + row * LR + col) = make_float2(v0, v1);
#if @NW@ == 2
    *reinterpret_cast<float2*>(red + (MP + row) * LR + col) = make_float2(u0, u1);
#endif
    (void)u0; (void)u1;
  }
#if @RMS@
  if (tid % TPR == 0) red_ss[tid / TPR] = ss;
#endif
  yr_cluster_sync();
  for (int e = tid; e < RPR * (BN / 4); e += NT) {
    const int row = split * RPR + e / (BN / 4), col = (e % (BN / 4)) * 4;
    if (row >= M) break;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f), u = v;
    float sq = 0.0f;
    (void)u; (void)sq;
#pragma unroll
    for (int q = 0; q < SPLITS; ++q) {
      const float4 a = yr_ld_cluster4(yr_smem_addr(red + row * LR + col), q);
      v.x += a.x; v.y += a.y; v.z += a.z; v.w += a.w;
#if @NW@ == 2
      const float4 b = yr_ld_cluster4(yr_smem_addr(red + (MP + row) * LR + col), q);
      u.x += b.x; u.y += b.y; u.z += b.z; u.w += b.w;
#endif
#if @RMS@
      sq += yr_ld_cluster1(yr_smem_addr(red_ss + row), q);
#endif
    }
    const i64 at = (i64)row * N + n0 + col;
    yr_st(o, at, yr_streamed_epilogue<@RMS@, @EPI@>(v.x, u.x, sq, K, @EPS@));
    yr_st(o, at + 1, yr_streamed_epilogue<@RMS@, @EPI@>(v.y, u.y, sq, K, @EPS@));
    yr_st(o, at + 2, yr_streamed_epilogue<@RMS@, @EPI@>(v.z, u.z, sq, K, @EPS@));
    yr_st(o, at + 3, yr_streamed_epilogue<@RMS@, @EPI@>(v.w, u.w, sq, K, @EPS@));
  }
  yr_cluster_sync();  // no block exits while another reads its tile
#else
#if @RMS@
#if @SPLITS@ == 1
  if (tid % TPR == 0) rs_sm[tid / TPR] = rsqrtf(ss / (float)K + @EPS@);
  __syncthreads();
#else
  if (blockIdx.x == 0 && tid % TPR == 0 && tid / TPR < M) ws[@SS_OFF@ + split * M + tid / TPR] = ss;
#endif
#endif
#pragma unroll
  for (int i = 0; i < PAIRS; ++i) {
    int row, col;
    float v0, v1, u0, u1;
    pair_at(i, row, col, v0, v1, u0, u1);
    if (row >= M) continue;
    col += n0;
    (void)u0; (void)u1;
#if @SPLITS@ == 1
#if @RMS@
    const float rs = rs_sm[row];
    v0 *= rs; v1 *= rs; u0 *= rs; u1 *= rs;
#endif
#if @EPI@ == 1
    v0 = yr_silu(v0) * u0;
    v1 = yr_silu(v1) * u1;
#endif
    yr_st(o, (i64)row * N + col, v0);
    yr_st(o, (i64)row * N + col + 1, v1);
#else
    *reinterpret_cast<float2*>(ws + ((i64)(split * NW) * M + row) * N + col) = make_float2(v0, v1);
#if @NW@ == 2
    *reinterpret_cast<float2*>(ws + ((i64)(split * NW + 1) * M + row) * N + col) =
        make_float2(u0, u1);
#endif
#endif
  }
#endif  // @CLUSTER@
}
)";

constexpr char kCombine[] = R"(
// adds the @SPLITS@ K splits of @NAME@ and applies its epilogue
extern "C" __global__ void __launch_bounds__(256) @NAME@_combine(const float* __restrict__ ws,
    @OT@* __restrict__ o) {
  constexpr int M = @M@, K = @K@, N = @N@, S = @SPLITS@, NW = @NW@;
  const i64 x = (i64)blockIdx.x * 256 + threadIdx.x;
  if (x >= (i64)M * N) return;
  const int row = (int)(x / N);
  float v = 0.0f, u = 0.0f;
  (void)u; (void)K;
#pragma unroll
  for (int s = 0; s < S; ++s) {
    v += ws[(i64)(s * NW) * M * N + x];
#if @NW@ == 2
    u += ws[(i64)(s * NW + 1) * M * N + x];
#endif
  }
  float ss = 0.0f;
#if @RMS@
#pragma unroll
  for (int s = 0; s < S; ++s) ss += ws[@SS_OFF@ + s * M + row];
#endif
  yr_st(o, x, yr_streamed_epilogue<@RMS@, @EPI@>(v, u, ss, K, @EPS@));
}
)";

// Form kRegisters: each warp streams its K range of W straight into
// registers (16 rows x V columns per lane per step) and feeds the tensor
// cores with W^T as the A operand (the rows of A are W's columns), X as the
// B operand. Lane (g = lane / 4, c = lane % 4) loads rows 4c..4c+3 of the
// step, columns V*g..V*g+V-1; byte permutes pair two rows of one column into
// an A register (the K order inside a step is permuted the same way for A
// and B, which a sum does not notice). No shared memory until the end:
// the block's warps add their partial tiles there, and with K splits the
// last block of a column tile to finish (a counter per tile) adds the
// splits' partial sums in order and applies the epilogue, or, where the
// splits are one cluster, each block adds its share of the elements from
// every block's shared memory.
constexpr char kRegsKernel[] = R"(
// streamed matmul, weights to registers: M=@M@ K=@K@ N=@N@, @NW@ weight(s), @SPLITS@ K split(s), @WB@ warps, @DEPTH@ step(s) loaded ahead
extern "C" __global__ void __launch_bounds__(@WB@ * 32) @CLUSTER_DIMS@ @NAME@(@PARAMS@) {
  typedef @T@ T;
  constexpr int M = @M@, MT = (M + 7) / 8, MP = MT * 8, K = @K@, N = @N@, SPLITS = @SPLITS@;
  constexpr int KS = K / SPLITS, WB = @WB@, KW = KS / WB, STEPS = KW / 16;
  constexpr int V = @V@, NF = V / 2, BN = 8 * V, TILES = N / BN;
  constexpr int NW = @NW@, DEPTH = @DEPTH@, NBUF = DEPTH + 1, NG = @NG@;
  (void)TILES;
  extern __shared__ __align__(16) float yr_rsm[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int tile = blockIdx.x, split = blockIdx.y, n0 = tile * BN;
  const int k0 = split * KS + warp * KW + 4 * c;  // this lane's first row
  const T* const w1p = w1 + (i64)k0 * N + n0 + V * g;
#if @NW@ == 2
  const T* const w2p = w2 + (i64)k0 * N + n0 + V * g;
#endif
  const T* const xp = x_in + (i64)g * K + k0;
  const unsigned long long policy = yr_stream_policy();  // the weights are read once
  unsigned wr[NBUF][NW][4][NF];
  unsigned xr[NBUF][MT][2];
#if @NG@ > 0
  unsigned gr[NBUF][NG][2];
#endif
  auto load = [&](int b, int s) {
    const i64 off = (i64)(16 * s) * N;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      yr_ldg_stream(wr[b][0][i], w1p + off + (i64)i * N, policy);
#if @NW@ == 2
      yr_ldg_stream(wr[b][1][i], w2p + off + (i64)i * N, policy);
#endif
    }
#pragma unroll
    for (int tt = 0; tt < MT; ++tt) {
      if (tt * 8 + g < M) {
        const uint2 v = __ldg(reinterpret_cast<const uint2*>(xp + (i64)tt * 8 * K + 16 * s));
        xr[b][tt][0] = v.x;
        xr[b][tt][1] = v.y;
      } else {
        xr[b][tt][0] = xr[b][tt][1] = 0u;
      }
    }
#if @NG@ > 0
    @GLOAD@
#endif
  };
  float acc[NW][NF][MT][4];
#pragma unroll
  for (int w = 0; w < NW; ++w)
#pragma unroll
    for (int q = 0; q < NF; ++q)
#pragma unroll
      for (int tt = 0; tt < MT; ++tt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[w][q][tt][e] = 0.0f;
  float ss[MT];
#pragma unroll
  for (int tt = 0; tt < MT; ++tt) ss[tt] = 0.0f;
  (void)ss;
#pragma unroll
  for (int s = 0; s < DEPTH; ++s) {
    if (s < STEPS) load(s, s);
  }
#pragma unroll
  for (int s = 0; s < STEPS; ++s) {
    if (s + DEPTH < STEPS) load((s + DEPTH) % NBUF, s + DEPTH);
    const int b = s % NBUF;
    unsigned bf[MT][2];
#pragma unroll
    for (int tt = 0; tt < MT; ++tt) {
#if @PREP@
      const float2 x01 = yr_unpack2<T>(xr[b][tt][0]), x23 = yr_unpack2<T>(xr[b][tt][1]);
#endif
#if @RMS@
      ss[tt] += x01.x * x01.x + x01.y * x01.y + x23.x * x23.x + x23.y * x23.y;
#endif
#if @NG@ > 0
      float2 s01 = make_float2(1.0f, 1.0f), s23 = make_float2(1.0f, 1.0f);
#pragma unroll
      for (int gi = 0; gi < NG; ++gi) {
        const float2 a = yr_unpack2<T>(gr[b][gi][0]), d = yr_unpack2<T>(gr[b][gi][1]);
        s01.x *= a.x; s01.y *= a.y; s23.x *= d.x; s23.y *= d.y;
      }
      bf[tt][0] = yr_pack2<T>(x01.x * s01.x, x01.y * s01.y);
      bf[tt][1] = yr_pack2<T>(x23.x * s23.x, x23.y * s23.y);
#else
      bf[tt][0] = xr[b][tt][0];
      bf[tt][1] = xr[b][tt][1];
#endif
    }
#pragma unroll
    for (int w = 0; w < NW; ++w) {
#pragma unroll
      for (int q = 0; q < NF; ++q) {
        unsigned a[4];
        a[0] = __byte_perm(wr[b][w][0][q], wr[b][w][1][q], 0x5410);
        a[1] = __byte_perm(wr[b][w][0][q], wr[b][w][1][q], 0x7632);
        a[2] = __byte_perm(wr[b][w][2][q], wr[b][w][3][q], 0x5410);
        a[3] = __byte_perm(wr[b][w][2][q], wr[b][w][3][q], 0x7632);
#pragma unroll
        for (int tt = 0; tt < MT; ++tt) yr_mma16816<T>(acc[w][q][tt], a, bf[tt]);
      }
    }
  }
  // The warps' partial tiles [WB][NW][MP][BN] and sums of squares [WB][MP].
  float* const part = yr_rsm;
  float* const ssm = part + WB * NW * MP * BN;
  (void)ssm;
#pragma unroll
  for (int w = 0; w < NW; ++w)
#pragma unroll
    for (int q = 0; q < NF; ++q)
#pragma unroll
      for (int tt = 0; tt < MT; ++tt) {
        float* const p = part + ((warp * NW + w) * MP + tt * 8 + 2 * c) * BN + V * g + 2 * q;
        p[0] = acc[w][q][tt][0];
        p[BN] = acc[w][q][tt][1];
        p[1] = acc[w][q][tt][2];
        p[BN + 1] = acc[w][q][tt][3];
      }
#if @RMS@
#pragma unroll
  for (int tt = 0; tt < MT; ++tt) {
    float v = ss[tt];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    if (c == 0) ssm[warp * MP + tt * 8 + g] = v;
  }
#endif
  __syncthreads();
  auto finish = [&](int tok, int col, float v, float u, float sq) {
    v = yr_streamed_epilogue<@RMS@, @EPI@>(v, u, sq, K, @EPS@);
    yr_st(o, (i64)tok * N + n0 + col, v);
  };
  (void)finish;
#if @SPLITS@ > 1 && !@CLUSTER@
  __shared__ unsigned yr_last;
#endif
#if @CLUSTER@
  // This block's sums over its warps: [NW][M][BN], then its rows' sums of
  // squares [M], past the warps' tiles.
  float* const red = ssm + WB * MP;
#endif
  for (int e = threadIdx.x; e < M * BN; e += WB * 32) {
    const int tok = e / BN, col = e % BN;
    float v = 0.0f, u = 0.0f, sq = 0.0f;
    (void)u; (void)sq;
#pragma unroll
    for (int wp = 0; wp < WB; ++wp) {
      v += part[((wp * NW) * MP + tok) * BN + col];
#if @NW@ == 2
      u += part[((wp * NW + 1) * MP + tok) * BN + col];
#endif
#if @RMS@
      sq += ssm[wp * MP + tok];
#endif
    }
#if @SPLITS@ == 1
    finish(tok, col, v, u, sq);
#elif @CLUSTER@
    red[e] = v;
#if @NW@ == 2
    red[M * BN + e] = u;
#endif
#if @RMS@
    if (col == 0) red[NW * M * BN + tok] = sq;
#endif
#else
    ws[((i64)(split * NW) * M + tok) * N + n0 + col] = v;
#if @NW@ == 2
    ws[((i64)(split * NW + 1) * M + tok) * N + n0 + col] = u;
#endif
#if @RMS@
    if (col == 0) ws[@SS_OFF@ + ((i64)split * TILES + tile) * M + tok] = sq;
#endif
#endif
  }
#if @CLUSTER@
  // The K splits of this column tile are one cluster (at most one block per
  // SM): block `split` adds elements [split * EPB, (split + 1) * EPB) of
  // every block's sums in order, through distributed shared memory, and
  // applies the epilogue. (No workspace, no fence and counter round trips.)
  constexpr int EPB = (M * BN + SPLITS - 1) / SPLITS;
  yr_cluster_sync();
  for (int e = split * EPB + threadIdx.x; e < (split + 1) * EPB && e < M * BN; e += WB * 32) {
    const int tok = e / BN, col = e % BN;
    float v = 0.0f, u = 0.0f, sq = 0.0f;
    (void)u; (void)sq;
#pragma unroll
    for (int q = 0; q < SPLITS; ++q) {
      v += yr_ld_cluster1(yr_smem_addr(red + e), q);
#if @NW@ == 2
      u += yr_ld_cluster1(yr_smem_addr(red + M * BN + e), q);
#endif
#if @RMS@
      sq += yr_ld_cluster1(yr_smem_addr(red + NW * M * BN + tok), q);
#endif
    }
    finish(tok, col, v, u, sq);
  }
  yr_cluster_sync();  // no block exits while another reads its sums
#elif @SPLITS@ > 1
  // The last block of this column tile to finish adds the splits in order.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) yr_last = atomicAdd(cnt + tile, 1u) == SPLITS - 1 ? 1u : 0u;
  __syncthreads();
  if (yr_last == 0u) return;
  __threadfence();
  for (int e = threadIdx.x; e < M * BN; e += WB * 32) {
    const int tok = e / BN, col = e % BN;
    float v = 0.0f, u = 0.0f, sq = 0.0f;
    (void)u; (void)sq;
#pragma unroll 4
    for (int sp = 0; sp < SPLITS; ++sp) {
      v += __ldcg(ws + ((i64)(sp * NW) * M + tok) * N + n0 + col);
#if @NW@ == 2
      u += __ldcg(ws + ((i64)(sp * NW + 1) * M + tok) * N + n0 + col);
#endif
#if @RMS@
      sq += __ldcg(ws + @SS_OFF@ + ((i64)sp * TILES + tile) * M + tok);
#endif
    }
    finish(tok, col, v, u, sq);
  }
  if (threadIdx.x == 0) cnt[tile] = 0u;  // ready for the next launch
#endif
}
)";

// Warps per SM the automatic K split of kRegisters kernels aims to keep
// resident at once (one wave): at the bench shapes they take 78-94
// registers a thread (ptxas, sm_90a), room for 21-24 warps; 16 leaves
// headroom for other shapes.
constexpr int kRegistersWarpsPerSm = 16;

// Output columns per kRegisters block: a warp's lanes load 16 bytes (8
// columns) of a row each; 8 bytes above 16 rows of X, which need twice the
// accumulators.
int64_t RegistersColumns(const StreamedMatmulPlan& p) { return p.m <= 16 ? 64 : 32; }

int64_t RegistersSmemBytes(const StreamedMatmulPlan& p) {
  const int nw = p.match.w2 >= 0 ? 2 : 1;
  const int64_t mp = (p.m + 7) / 8 * 8;
  const int64_t bn = RegistersColumns(p);
  // The warps' partial tiles and sums of squares; with a cluster merge also
  // the block's sums that the other blocks read.
  return (p.warps * nw * mp * bn + p.warps * mp + (p.cluster ? nw * p.m * bn + p.m : 0)) * 4;
}

// The kRegisters plan of `base` (shapes and match filled in), or nullopt
// when the form does not apply: M <= 32, no low-rank branch, N a multiple
// of the block's columns, K a multiple of 16 * warps * splits.
std::optional<StreamedMatmulPlan> PlanRegisters(
    StreamedMatmulPlan p, const CudaTarget& target,
    const yirage::v1::StreamedMatmulSchedule& schedule) {
  p.form = StreamedMatmulPlan::kRegisters;
  const int64_t bn = RegistersColumns(p);
  // (64 rows need 255 registers a thread and ran 25-40% slower than the
  // shared-memory form on an H200: 45-51 us against 37 for gated_mlp b8.
  // Two blocks of 32 rows each, reading the same weights (the second
  // mostly from L2), ran 44-57 us against 37.)
  if (p.m > kStreamedRegistersMaxRows || p.r > 0 || p.n % bn != 0) return std::nullopt;
  p.warps = schedule.warps() > 0 ? schedule.warps() : 4;
  if (p.warps > 16 || p.k % (16 * p.warps) != 0) return std::nullopt;
  const int nw = p.match.w2 >= 0 ? 2 : 1;
  // Steps loaded ahead: deeper for one weight (fewer registers per step).
  p.depth = schedule.stages() > 0 ? std::clamp(schedule.stages(), 1, 4) : (nw == 2 ? 1 : 2);
  if (RegistersSmemBytes(p) > target.max_smem_per_block) return std::nullopt;
  const int64_t tiles = p.n / bn;
  // Steps per warp: at least 2, at most 64 (the loop is unrolled whole).
  auto steps = [&](int64_t s) { return p.k / (16 * p.warps * s); };
  auto splits_ok = [&](int64_t s) {
    return s >= 1 && p.k % (16 * p.warps * s) == 0 && steps(s) >= 2 && steps(s) <= 64;
  };
  if (schedule.split_k() > 0 && splits_ok(schedule.split_k())) {
    p.splits = schedule.split_k();
  } else {
    // The most splits whose warps are all resident at once (one wave).
    // (The last block of a column tile adds the splits through global memory:
    // 2-4 us of the kernel on an H200. Adding them in a thread-block cluster
    // instead measured slower where the grid has several blocks per SM:
    // gated_mlp b1 26.5 us against 25.3, rms_norm_linear b8 30.1 against
    // 23.4, rms_norm_linear b1 19.8 against 20.1.)
    const int64_t resident = int64_t{target.sm_count} * kRegistersWarpsPerSm;
    p.splits = 0;
    for (int64_t s = 1; s <= 64; s *= 2) {
      if (!splits_ok(s)) continue;
      if (p.splits == 0 || tiles * s * p.warps <= resident) p.splits = static_cast<int>(s);
    }
    if (p.splits == 0) return std::nullopt;
  }
  // The splits of a column tile as one thread-block cluster (sm_90, at most
  // 8) where 16-warp blocks fill the SMs at most once, so that every
  // cluster is resident at once, adding the splits through distributed
  // shared memory (gated_mlp b1 on an H200, bench/gpu_bench.sh: 24.7 us
  // against 25.2 through global memory; with several blocks an SM the
  // cluster merge measured slower, above). The launch then asks for over
  // half an SM's shared memory, so that no two blocks of a cluster share
  // an SM.
  p.cluster = target.sm >= 90 && p.warps >= 16 && p.splits >= 2 && p.splits <= 8 &&
              tiles * p.splits <= target.sm_count;
  p.launch_smem = RegistersSmemBytes(p);
  if (p.cluster) p.launch_smem = std::max(p.launch_smem, target.max_smem_per_block / 2 + 1024);
  if (p.launch_smem > target.max_smem_per_block) return std::nullopt;
  return p;
}

}  // namespace

std::optional<StreamedMatmulPlan> PlanStreamedMatmul(const Graph& g, const std::vector<int>& ops,
                                                     const std::vector<int>& outputs,
                                                     const CudaTarget& target,
                                                     const yirage::v1::Schedule& full_schedule) {
  const yirage::v1::StreamedMatmulSchedule& schedule = full_schedule.streamed_matmul();
  const int requested_splits = schedule.split_k();
  const int requested_stages = schedule.stages();
  if (target.sm < 80) return std::nullopt;
  std::optional<StreamedMatmulMatch> match = core::MatchStreamedMatmul(g, ops);
  if (!match.has_value() || outputs.size() != 1 || outputs[0] != match->out) return std::nullopt;
  // The family's limits (2-D 16-bit operands of one dtype, M <= 64, K and
  // N multiples of the chunk and tile, rank a multiple of 16 up to 64).
  if (!core::WithinLimits(StreamedMatmulLimits(), yirage::v1::STREAMED_MATMUL, g, ops)) {
    return std::nullopt;
  }
  StreamedMatmulPlan p;
  p.match = *match;
  const TensorInfo& x = g.tensor(match->x);
  const TensorInfo& w1 = g.tensor(match->w1);
  p.dtype = x.dtype;
  p.m = x.shape[0];
  p.k = x.shape[1];
  p.n = w1.shape[1];
  if (w1.shape[0] != p.k) return std::nullopt;
  if (match->b >= 0) {
    const TensorInfo& a = g.tensor(match->a);
    const TensorInfo& b = g.tensor(match->b);
    p.r = a.shape[1];
    if (a.shape[0] != p.k || b.shape[0] != p.r || b.shape[1] != p.n) return std::nullopt;
  }
  if (match->w2 >= 0 && g.tensor(match->w2).shape != w1.shape) return std::nullopt;
  for (int t : match->col_scales) {
    if (g.tensor(t).shape != std::vector<int64_t>{p.k}) return std::nullopt;
  }
  p.m_tiles = p.m <= 16 ? 1 : (p.m <= 32 ? 2 : 4);
  const int variant = schedule.form();
  // kWgmma: sm_90 (wgmma is sm_90a's alone) and the form's limits
  // (cuda_families.h); one warpgroup per block, X padded to 64 rows.
  // Elsewhere FORM_WGMMA plans as FORM_AUTO, which the caller refuses.
  const bool wgmma = variant == StreamedMatmulPlan::kWgmma && target.sm == 90 &&
                     core::WithinLimits(StreamedWgmmaLimits(), yirage::v1::STREAMED_MATMUL, g, ops);
  if (variant != StreamedMatmulPlan::kShared && variant != kSharedWorkspaceVariant && !wgmma) {
    if (std::optional<StreamedMatmulPlan> regs = PlanRegisters(p, target, schedule);
        regs.has_value()) {
      return regs;
    }
    // Not applicable: the shared-memory form (the plan says which it got).
  }
  if (wgmma) {
    p.form = StreamedMatmulPlan::kWgmma;
    p.m_tiles = 4;
  }
  p.stages = requested_stages >= 2 ? std::min(requested_stages, 8) : 4;
  while (p.stages > 2 && SmemBytes(p) > target.max_smem_per_block) --p.stages;
  if (SmemBytes(p) > target.max_smem_per_block) return std::nullopt;
  // Warps: 4 along the block's 64 columns times 1, 2 or 4 along its rows.
  // 64 rows default to 8 warps (gated_mlp b8 on an H200: 31.4 us against
  // 32.6 with 4 warps and 34.3 with 16, the cluster form below).
  p.warps = p.m_tiles == 4 ? 8 : 4;
  if (const int w = schedule.warps(); (w == 4 || w == 8 || w == 16) && p.m_tiles % (w / 4) == 0) {
    p.warps = w;
  }
  if (p.form == StreamedMatmulPlan::kWgmma) p.warps = 4;
  const int64_t tiles = p.n / kTileN;
  auto splits_ok = [&](int64_t s) { return p.k % (kChunkK * s) == 0 && p.k / s >= 2 * kChunkK; };
  // K splits as one thread-block cluster (sm_90), summed through distributed
  // shared memory: at most 8 (the portable cluster size), and a grid of at
  // most one block per SM so that every cluster is resident at once. (On an
  // H200, 4-block clusters of a 256-block grid ran 39.1 us against 31.4 for
  // 2-block clusters of 128 blocks.)
  const bool workspace_merge = variant == kSharedWorkspaceVariant;
  auto cluster_ok = [&](int64_t s) {
    return target.sm >= 90 && !workspace_merge && s >= 2 && s <= 8 && tiles * s <= target.sm_count;
  };
  if (p.r > 0) {
    p.splits = 1;  // T = X A needs all of K in the block
  } else if (requested_splits > 0 && splits_ok(requested_splits)) {
    p.splits = requested_splits;
  } else if (p.m_tiles == 4 && cluster_ok(2) && splits_ok(2)) {
    // 64 rows: one wave of cluster splits, as many as fit.
    p.splits = 2;
    while (cluster_ok(2 * p.splits) && splits_ok(2 * p.splits)) p.splits *= 2;
  } else {
    p.splits = 1;
    // As many blocks as fit on the SMs at once (shared memory), at most two
    // per SM; one for 64-row problems, whose partial sums would otherwise
    // outweigh the benefit.
    const int64_t resident = std::clamp<int64_t>(
        (target.max_smem_per_block + 1024) / (SmemBytes(p) + 1024), 1, p.m_tiles >= 4 ? 1 : 2);
    const int64_t want = resident * int64_t{target.sm_count};
    while (tiles * p.splits < want && splits_ok(2 * p.splits) &&
           p.k / (2 * p.splits) >= 4 * kChunkK) {
      p.splits *= 2;
    }
  }
  // The cluster merge leaves each block's float partial tile in its ring
  // (the kernel's static_assert holds it to the same bound).
  const int nw = p.match.w2 >= 0 ? 2 : 1;
  const int64_t tile_bytes = (int64_t{nw} * p.m_tiles * 16 * (kTileN + 4) + p.m_tiles * 16) * 4;
  p.cluster = cluster_ok(p.splits) && tile_bytes <= p.stages * StageHalves(p) * 2;
  return p;
}

int64_t StreamedMatmulWorkspaceBytes(const StreamedMatmulPlan& p) {
  if (p.splits <= 1 || p.cluster) return 0;
  const int nw = p.match.w2 >= 0 ? 2 : 1;
  if (p.form == StreamedMatmulPlan::kRegisters) {
    const int64_t tiles = p.n / RegistersColumns(p);
    return (int64_t{p.splits} * nw * p.m * p.n + int64_t{p.splits} * tiles * p.m) * 4;
  }
  return (int64_t{p.splits} * nw * p.m * p.n + int64_t{p.splits} * p.m) * 4;
}

int64_t StreamedMatmulCounterBytes(const StreamedMatmulPlan& p) {
  if (p.form != StreamedMatmulPlan::kRegisters || p.splits <= 1 || p.cluster) return 0;
  return p.n / RegistersColumns(p) * 4;
}

std::string StreamedMatmulSummary(const StreamedMatmulPlan& p) {
  if (p.form == StreamedMatmulPlan::kRegisters) {
    return absl::StrCat("streamed matmul (weights to registers, tensor cores: mma.m16n8k16), ",
                        p.splits, " K split(s)", p.cluster ? " in a cluster" : "", ", ", p.warps,
                        " warps, ", p.depth, " step(s) loaded ahead");
  }
  return absl::StrCat("streamed matmul (tensor cores: ",
                      p.form == StreamedMatmulPlan::kWgmma ? "wgmma.m64nNk16" : "mma.m16n8k16",
                      ", cp.async pipeline), ", p.splits, " K split(s)",
                      p.splits > 1 ? (p.cluster ? " in a cluster" : " and a combine kernel") : "",
                      ", ", p.stages, " stages, ", p.warps, " warps");
}

void EmitStreamedMatmul(const StreamedMatmulPlan& p, const std::string& name, int out_arg,
                        const std::string& out_type, int workspace_arg, int counter_arg,
                        std::string* source, std::vector<KernelLaunch>* launches) {
  const StreamedMatmulMatch& m = p.match;
  const std::string t = p.dtype == yirage::v1::BFLOAT16 ? "__nv_bfloat16" : "__half";
  const int nw = m.w2 >= 0 ? 2 : 1;
  std::vector<std::string> params = {absl::StrCat("const ", t, "* __restrict__ x_in"),
                                     absl::StrCat("const ", t, "* __restrict__ w1")};
  std::vector<int> args = {m.x, m.w1};
  if (m.w2 >= 0) {
    params.push_back(absl::StrCat("const ", t, "* __restrict__ w2"));
    args.push_back(m.w2);
  }
  if (p.r > 0) {
    params.push_back(absl::StrCat("const ", t, "* __restrict__ la"));
    params.push_back(absl::StrCat("const ", t, "* __restrict__ lb"));
    args.push_back(m.a);
    args.push_back(m.b);
  }
  std::vector<std::string> gscale, gcopy;
  for (size_t i = 0; i < m.col_scales.size(); ++i) {
    params.push_back(absl::StrCat("const ", t, "* __restrict__ g", i));
    args.push_back(m.col_scales[i]);
    gscale.push_back(absl::StrCat("yr_ld(gs, ", i * kChunkK, " + c0 + c)"));
    gcopy.push_back(absl::StrCat("if (gi == ", i, ") yr_cp_async16(gs + ", i * kChunkK, " + c, g",
                                 i, " + k0 + c);"));
  }
  const bool split = p.splits > 1;
  if (p.form == StreamedMatmulPlan::kRegisters) {
    std::vector<std::string> gload;
    for (size_t i = 0; i < m.col_scales.size(); ++i) {
      gload.push_back(absl::StrCat("{ const uint2 v = __ldg(reinterpret_cast<const uint2*>(g", i,
                                   " + k0 + 16 * s)); gr[b][", i, "][0] = v.x; gr[b][", i,
                                   "][1] = v.y; }"));
    }
    params.push_back(absl::StrCat(out_type, "* __restrict__ o"));
    args.push_back(out_arg);
    const bool global_sum = split && !p.cluster;
    params.push_back("float* __restrict__ ws");
    args.push_back(global_sum ? workspace_arg : out_arg);
    params.push_back("unsigned* __restrict__ cnt");
    args.push_back(global_sum ? counter_arg : out_arg);
    const int64_t bn = RegistersColumns(p);
    const std::vector<std::pair<std::string, std::string>> subst = {
        {"@NAME@", name},
        {"@PARAMS@", absl::StrJoin(params, ", ")},
        {"@T@", t},
        {"@M@", absl::StrCat(p.m)},
        {"@K@", absl::StrCat(p.k)},
        {"@N@", absl::StrCat(p.n)},
        {"@NW@", absl::StrCat(nw)},
        {"@SPLITS@", absl::StrCat(p.splits)},
        {"@WB@", absl::StrCat(p.warps)},
        {"@V@", bn == 64 ? "8" : "4"},
        {"@DEPTH@", absl::StrCat(p.depth)},
        {"@PREP@", (m.rms || !m.col_scales.empty()) ? "1" : "0"},
        {"@RMS@", m.rms ? "1" : "0"},
        {"@EPS@", CudaFloatLiteral(m.eps)},
        {"@NG@", absl::StrCat(m.col_scales.size())},
        {"@GLOAD@", absl::StrJoin(gload, "\n    ")},
        {"@EPI@",
         absl::StrCat(m.epilogue == core::StreamedMatmulMatch::Epilogue::kSiluMul ? 1 : 0)},
        {"@SS_OFF@", absl::StrCat(int64_t{p.splits} * nw * p.m * p.n, "LL")},
        {"@CLUSTER@", p.cluster ? "1" : "0"},
        {"@CLUSTER_DIMS@", p.cluster ? absl::StrCat("__cluster_dims__(1, ", p.splits, ", 1)") : ""},
    };
    *source += absl::StrReplaceAll(kRegsKernel, subst);
    KernelLaunch main;
    main.name = name;
    main.grid[0] = p.n / bn;
    main.grid[1] = p.splits;
    main.block = p.warps * 32;
    main.smem_bytes = static_cast<int>(p.launch_smem);
    main.args = args;
    launches->push_back(main);
    return;
  }
  const bool combine = split && !p.cluster;
  params.push_back(absl::StrCat(combine ? std::string("float") : out_type, "* __restrict__ o"));
  args.push_back(combine ? workspace_arg : out_arg);
  params.push_back("float* __restrict__ ws");
  args.push_back(combine ? workspace_arg : out_arg);
  const int64_t ss_off = int64_t{p.splits} * nw * p.m * p.n;
  const int epi = m.epilogue == core::StreamedMatmulMatch::Epilogue::kSiluMul ? 1 : 0;
  const bool wgmma = p.form == StreamedMatmulPlan::kWgmma;
  const bool bf16 = p.dtype == yirage::v1::BFLOAT16;
  if (wgmma) {
    *source += WgmmaHelpersSource();
    *source += WgmmaOpsSource();
  }
  const std::vector<std::pair<std::string, std::string>> subst = {
      {"@WG@", wgmma ? "1" : "0"},
      {"@WGOP@", WgmmaOpName(nw * kTileN, bf16, false, true)},
      {"@WGNOTE@", wgmma ? " (tensor cores: wgmma)" : ""},
      {"@NAME@", name},
      {"@PARAMS@", absl::StrJoin(params, ", ")},
      {"@T@", t},
      {"@OT@", out_type},
      {"@M@", absl::StrCat(p.m)},
      {"@MT@", absl::StrCat(p.m_tiles)},
      {"@K@", absl::StrCat(p.k)},
      {"@N@", absl::StrCat(p.n)},
      {"@R@", absl::StrCat(p.r)},
      {"@NW@", absl::StrCat(nw)},
      {"@SPLITS@", absl::StrCat(p.splits)},
      {"@STAGES@", absl::StrCat(p.stages)},
      {"@PREP@", (m.rms || !m.col_scales.empty()) ? "1" : "0"},
      {"@RMS@", m.rms ? "1" : "0"},
      {"@EPS@", CudaFloatLiteral(m.eps)},
      {"@NG@", absl::StrCat(m.col_scales.size())},
      {"@GSCALE@", gscale.empty() ? "1.0f" : absl::StrJoin(gscale, " * ")},
      {"@GCOPY@", absl::StrJoin(gcopy, " ")},
      {"@EPI@", absl::StrCat(epi)},
      {"@SS_OFF@", absl::StrCat(ss_off, "LL")},
      {"@NT@", absl::StrCat(p.warps * 32)},
      {"@CLUSTER@", p.cluster ? "1" : "0"},
      {"@CLUSTER_DIMS@", p.cluster ? absl::StrCat("__cluster_dims__(1, ", p.splits, ", 1)") : ""},
      {"@MERGE@", combine ? " (combine kernel)" : (p.cluster ? " in a cluster" : "")},
  };
  *source += absl::StrReplaceAll(kKernel, subst);
  KernelLaunch main;
  main.name = name;
  main.grid[0] = p.n / kTileN;
  main.grid[1] = p.splits;
  main.block = p.warps * 32;
  main.smem_bytes = static_cast<int>(SmemBytes(p));
  main.args = args;
  launches->push_back(main);
  if (combine) {
    *source += absl::StrReplaceAll(kCombine, subst);
    KernelLaunch combine;
    combine.name = name + "_combine";
    combine.grid[0] = (p.m * p.n + 255) / 256;
    combine.block = 256;
    combine.args = {workspace_arg, out_arg};
    launches->push_back(combine);
  }
}

}  // namespace yirage::backends::cuda
