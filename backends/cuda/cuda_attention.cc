#include "backends/cuda/cuda_attention.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "backends/codegen_util.h"
#include "backends/cuda/cuda_families.h"
#include "backends/cuda/cuda_wgmma.h"
#include "core/kernel_family.h"

namespace yirage::backends::cuda {
namespace {

using core::Graph;
using core::OpInfo;
using core::OpType;
using core::TensorInfo;

constexpr int kTileN = 64;            // keys per tile
constexpr int kMaxClusterSplits = 8;  // portable cluster size
constexpr int kMaxSpinSplits = 16;    // in-kernel merge: each thread holds every split's values
constexpr int kMaxWarps = 16;         // 512 threads: 128 registers a thread

// The kernel template; @NAME@-style placeholders are replaced below.
constexpr char kAttentionKernel[] = R"(
// attention: B=@B@ M=@M@ N=@N@ D=@D@ DV=@DV@, @SPLITS@ key split(s) of @NS@ keys; @RW@ row warps of
// @WR@ rows x @KG@ key group(s), @STAGES@ stages; splits merge: @MERGE@.
// Warp (rw, kg) owns query rows [WR rw, WR rw + WR) of the block's (MT
// 16-row tiles, which share every K and V fragment) and every KG-th key
// tile from kg on; S, P and O live in registers in the m16n8k16 mma layouts
// (lane: rows lane/4 and lane/4 + 8, columns 2 (lane % 4) + {0, 1} of each
// 8-column block). Each pipeline step brings KG tiles of 64 keys (one per
// key group) through a @STAGES@-step cp.async ring in shared memory; the
// key groups' partial rows merge in shared memory at the end (or, pushed,
// in the cluster merge).
extern "C" __global__ void @CLUSTER_ATTR@__launch_bounds__(@RW@ * @KG@ * 32) @NAME@(
    const @T@* __restrict__ q, const @T@* __restrict__ k, const @T@* __restrict__ v,
    @OT@* __restrict__ o, float* __restrict__ ws) {
  typedef @T@ T;
  constexpr int M = @M@, N = @N@, D = @D@, DV = @DV@, NS = @NS@, BN = 64;
  constexpr int RW = @RW@, KG = @KG@, MT = @MT@, NT = RW * KG * 32, WR = 16 * MT, BM = WR * RW;
  constexpr int STAGES = @STAGES@;
  // merged (@MERGE_KIND@): 0 none, 1 cluster pull, 2 workspace, 3 cluster push, 4 in-kernel
  constexpr int SPLITS = @SPLITS@;
  // WG: one warpgroup multiplies with wgmma straight from shared memory;
  // Q, K and V tiles (rows of 64 16-bit elements) take the 128-byte swizzle
  // (yr_swz<64>) from 1024-byte boundaries instead of padded rows.
  constexpr bool WG = @WG@;
  static_assert(!WG || (D == 64 && DV == 64 && RW == 4 && KG == 1 && MT == 1), "warpgroup form");
  constexpr int PAD = WG ? 0 : 8;
  constexpr int LQ = D + PAD, LV = DV + PAD;
  constexpr int LK = @KT@ ? D + PAD : BN + PAD;
  constexpr int KSIZE = @KT@ ? BN * (D + PAD) : D * (BN + PAD);
  constexpr int VSIZE = BN * LV, TILE = KSIZE + VSIZE;
  // Element (r, c) of a Q, K or V tile whose rows are `ld` elements apart.
  auto at = [](int r, int c, int ld) -> int {
    if constexpr (WG) {
      return yr_swz<64>(r, c);
    } else {
      return r * ld + c;
    }
  };
  constexpr int STEPS = NS / BN / KG;
  constexpr int LP = DV + 4;  // partial rows in shared memory: O, m, l, pad (16-byte rows)
  extern __shared__ __align__(1024) unsigned char yr_smb[];
  T* const sq = reinterpret_cast<T*>(yr_smb);
  T* const skv = sq + BM * LQ;  // STAGES steps of KG [K tile | V tile]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int rw = warp % RW, kg = warp / RW;
  const int m0 = blockIdx.x * BM, b = blockIdx.y, split = blockIdx.z;
  (void)ws; (void)split; (void)o; (void)SPLITS; (void)kg; (void)LP;
  const T* const qb = q + ((i64)b * M + m0) * D;
  const T* const kb = k + (i64)b * D * N;
  const T* const vb = v + (i64)b * N * DV;
  const int key0 = split * NS;
  for (int x = tid; x < BM * D / 8; x += NT) {
    const int r = x / (D / 8), c = (x % (D / 8)) * 8;
    if (m0 + r < M) {
      yr_cp_async16(sq + at(r, c, LQ), qb + (i64)r * D + c);
    } else {
      *reinterpret_cast<uint4*>(sq + at(r, c, LQ)) = make_uint4(0, 0, 0, 0);
    }
  }
  // Tile copies in 16-byte chunks: each thread's chunks of a tile sit at
  // fixed offsets (rows kr + i * KRS of K, vr + i * VRS of V), so a step
  // costs one address add per chunk.
  constexpr int KROWS = @KT@ ? BN : D, KRC = (@KT@ ? D : BN) / 8;  // K tile rows, chunks a row
  constexpr int KSTRIDE = @KT@ ? D : N;                           // elements between K rows
  constexpr int VRC = DV / 8, KRS = NT / KRC, VRS = NT / VRC;
  const int kr = tid / KRC, kc = (tid % KRC) * 8, vr = tid / VRC, vc = (tid % VRC) * 8;
  const T* const kthread = kb + (i64)kr * KSTRIDE + kc;
  const T* const vthread = vb + (i64)vr * DV + vc;
  // Step st: tiles st * KG + g (g < KG) into slots g of ring stage `stage`.
  auto load_step = [&](int st, int stage) {
#pragma unroll
    for (int g = 0; g < KG; ++g) {
      T* const sk = skv + (stage * KG + g) * TILE;
      T* const sv = sk + KSIZE;
      const int n0 = key0 + (st * KG + g) * BN;
      const T* const kt = kthread + (@KT@ ? (i64)n0 * D : (i64)n0);
      const T* const vt = vthread + (i64)n0 * DV;
#pragma unroll
      for (int i = 0; i < (KROWS + KRS - 1) / KRS; ++i) {
        if (KROWS % KRS == 0 || kr + i * KRS < KROWS) {
          yr_cp_async16(sk + at(kr + i * KRS, kc, LK), kt + (i64)i * KRS * KSTRIDE);
        }
      }
#pragma unroll
      for (int i = 0; i < (BN + VRS - 1) / VRS; ++i) {
        if (BN % VRS == 0 || vr + i * VRS < BN) {
          yr_cp_async16(sv + at(vr + i * VRS, vc, LV), vt + (i64)i * VRS * DV);
        }
      }
    }
  };
  // Q rides in the first group; STAGES - 1 steps in flight before the loop.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < STEPS) load_step(s, s);
    yr_cp_async_commit();
  }
  const int li = lane & 7, lm = lane >> 3;  // ldmatrix: row within matrix, matrix
  unsigned qa[MT][D / 16][4];
  float oacc[MT][DV / 8][4];
  float m_run[MT][2], l_run[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int j = 0; j < DV / 8; ++j) {
      oacc[mt][j][0] = oacc[mt][j][1] = oacc[mt][j][2] = oacc[mt][j][3] = 0.0f;
    }
    m_run[mt][0] = m_run[mt][1] = -__int_as_float(0x7f800000);
    l_run[mt][0] = l_run[mt][1] = 0.0f;
  }
  auto load_q = [&]() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        yr_ldsm_x4(qa[mt][ks],
                   sq + (rw * WR + mt * 16 + li + (lm & 1) * 8) * LQ + ks * 16 + (lm >> 1) * 8);
      }
    }
  };
  // S of step t (this warp's tile of it) into s.
#if @WG@
  // The warpgroup's S (64 x 64) with wgmma: Q K-major, K's tile K-major
  // ([keys][D]) or N-major ([D][keys]); waits for every earlier group too,
  // so the last step's O += P V is done before O is rescaled. (Measured on
  // an H200 and dropped: S of step t + 1 issued before step t's softmax,
  // two S buffers and copies one step further ahead; it verified, but
  // gqa_decode b8 took 23.6 us at 4 stages against 22.6, 32.3 at 3.)
  auto qk = [&](int t, float (&s)[MT][BN / 8][4]) {
    const T* const sk = skv + ((t % STAGES) * KG + kg) * TILE;
    float* const sf = &s[0][0][0];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) sf[i] = 0.0f;
    yr_wg_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const unsigned long long da = yr_wg_desc(sq + ks * 16, 16, 1024);
      const unsigned long long db = yr_wg_desc(sk + (@KT@ ? ks * 16 : ks * 16 * LK), 16, 1024);
      @WG_QK@(sf, da, db);
    }
    yr_wg_commit();
    yr_wg_wait<0>();
    yr_wg_fence_operands(sf, BN / 2);
    yr_wg_fence_operands(&oacc[0][0][0], DV / 2);
  };
#else
  auto qk = [&](int t, float (&s)[MT][BN / 8][4]) {
    const T* const sk = skv + ((t % STAGES) * KG + kg) * TILE;
    // S = Q K: WR x 64 per warp.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
    }
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
      for (int nb = 0; nb < BN / 8; nb += 2) {
        unsigned bf[4];
#if @KT@
        yr_ldsm_x4(bf, sk + ((nb + (lm >> 1)) * 8 + li) * LK + ks * 16 + (lm & 1) * 8);
#else
        yr_ldsm_x4_t(bf, sk + (ks * 16 + li + (lm & 1) * 8) * LK + (nb + (lm >> 1)) * 8);
#endif
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          yr_mma16816<T>(s[mt][nb], qa[mt][ks], bf);
          yr_mma16816<T>(s[mt][nb + 1], qa[mt][ks], bf + 2);
        }
      }
    }
  };
#endif
  // The online softmax of S (in s) of step t, then O += P V.
  auto softmax_pv = [&](int t, float (&s)[MT][BN / 8][4]) {
    const T* const sv = skv + ((t % STAGES) * KG + kg) * TILE + KSIZE;
    // Online softmax in base 2: m is the running row max of S * scale *
    // log2(e), so P = exp2(S * scale * log2(e) - m) is one FFMA and one
    // exp2 per element. Rows h = 0 (lane/4) and h = 1 (lane/4 + 8) of each
    // 16-row tile. (fmaxf drops a NaN of S from the max, but its exp2
    // carries it into the sums.)
    const float kLog2Scale = @SCALE@ * 1.4426950408889634f;
    unsigned pk[MT][BN / 8][2];  // P, 16-bit pairs: the mma A fragments
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -__int_as_float(0x7f800000);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[mt][j][2 * h], s[mt][j][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // The max of S scaled (a negative scale turns S's max into the min).
        float mn = __int_as_float(0x7f800000);
        if (kLog2Scale < 0.0f) {
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) mn = fminf(mn, fminf(s[mt][j][2 * h], s[mt][j][2 * h + 1]));
          mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, 1));
          mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, 2));
        }
        const float m_new = fmaxf(m_run[mt][h], (kLog2Scale < 0.0f ? mn : mx) * kLog2Scale);
        const float alpha = yr_exp2(m_run[mt][h] - m_new);
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const float e0 = yr_exp2(fmaf(s[mt][j][2 * h], kLog2Scale, -m_new));
          const float e1 = yr_exp2(fmaf(s[mt][j][2 * h + 1], kLog2Scale, -m_new));
          sum += e0 + e1;
          pk[mt][j][h] = yr_pack2<T>(e0, e1);
        }
        l_run[mt][h] = l_run[mt][h] * alpha + sum;  // this lane's columns; summed at the end
        m_run[mt][h] = m_new;
#pragma unroll
        for (int j = 0; j < DV / 8; ++j) {
          oacc[mt][j][2 * h] *= alpha;
          oacc[mt][j][2 * h + 1] *= alpha;
        }
      }
    }
    // O += P V, P straight from the S registers; each V fragment serves
    // the warp's MT row tiles.
#if @WG@
    // wgmma with P as the A fragments (each warp's 16 rows) and V's tile
    // N-major; not waited for here (the next S, or the end, waits).
    yr_wg_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const unsigned pa[4] = {pk[0][2 * kk][0], pk[0][2 * kk][1], pk[0][2 * kk + 1][0],
                              pk[0][2 * kk + 1][1]};
      @WG_PV@(&oacc[0][0][0], pa, yr_wg_desc(sv + kk * 16 * LV, 16, 1024));
    }
    yr_wg_commit();
#else
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
#pragma unroll
      for (int nb = 0; nb < DV / 8; nb += 2) {
        unsigned bf[4];
        yr_ldsm_x4_t(bf, sv + (kk * 16 + li + (lm & 1) * 8) * LV + (nb + (lm >> 1)) * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const unsigned pa[4] = {pk[mt][2 * kk][0], pk[mt][2 * kk][1], pk[mt][2 * kk + 1][0],
                                  pk[mt][2 * kk + 1][1]};
          yr_mma16816<T>(oacc[mt][nb], pa, bf);
          yr_mma16816<T>(oacc[mt][nb + 1], pa, bf + 2);
        }
      }
    }
#endif
  };
  // In step t, after the wait for it: step t has landed for every thread,
  // and every warp is done with step t - 1, whose stage the load of step
  // t + STAGES - 1 refills.
  auto refill = [&](int t) {
#if @WG@
    // The tensor cores' reads of step t - 1's stage (O += P V) end before
    // it is refilled; this thread's copies of step t become visible to them.
    yr_wg_wait<0>();
    yr_wg_fence_operands(&oacc[0][0][0], DV / 2);
    yr_fence_proxy_async();
#endif
    __syncthreads();
    if (t + STAGES - 1 < STEPS) load_step(t + STAGES - 1, (t + STAGES - 1) % STAGES);
    yr_cp_async_commit();
  };
  for (int t = 0; t < STEPS; ++t) {
    yr_cp_async_wait<STAGES - 2>();
    refill(t);
    if (!WG && t == 0) load_q();
    float s[MT][BN / 8][4];
    qk(t, s);
    softmax_pv(t, s);
  }
#if @WG@
  yr_wg_wait<0>();
  yr_wg_fence_operands(&oacc[0][0][0], DV / 2);
#endif
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l_run[mt][h] += __shfl_xor_sync(0xffffffffu, l_run[mt][h], 1);
      l_run[mt][h] += __shfl_xor_sync(0xffffffffu, l_run[mt][h], 2);
    }
  }
  const int qd = lane & 3;
#if @MERGE_KIND@ == 3
  // Push: every warp stores its partial rows (O, then m and l) into the
  // inbox [SPLITS * KG][RPB][LP] of the cluster block that merges them
  // (block r merges rows [r * RPB, (r + 1) * RPB)), past the ring, so that
  // blocks still in their loop are not disturbed; one cluster barrier, then
  // each block merges its rows from its own shared memory.
  {
    constexpr int RPB = BM / SPLITS, SLOTS = SPLITS * KG;
    float* const inbox = reinterpret_cast<float*>(skv + STAGES * KG * TILE);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = rw * WR + mt * 16 + (lane >> 2) + 8 * h;
        const unsigned at = yr_cluster_addr(
            yr_smem_addr(inbox + ((split * KG + kg) * RPB + row % RPB) * LP), row / RPB);
#pragma unroll
        for (int j = 0; j < DV / 8; ++j) {
          yr_st_cluster2(at + (j * 8 + 2 * qd) * 4, oacc[mt][j][2 * h], oacc[mt][j][2 * h + 1]);
        }
        if (qd == 0) yr_st_cluster2(at + DV * 4, m_run[mt][h], l_run[mt][h]);
      }
    }
    yr_cluster_sync();
    for (int x = tid; x < RPB * (DV / 4); x += NT) {
      const int r = x / (DV / 4), c = (x % (DV / 4)) * 4;
      const int gm = m0 + split * RPB + r;
      if (gm >= M) continue;
      float mx = -__int_as_float(0x7f800000);
#pragma unroll
      for (int s2 = 0; s2 < SLOTS; ++s2) mx = fmaxf(mx, inbox[(s2 * RPB + r) * LP + DV]);
      float den = 0.0f;
      float4 num = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int s2 = 0; s2 < SLOTS; ++s2) {
        const float* const w = inbox + (s2 * RPB + r) * LP;
        const float e = yr_exp2(w[DV] - mx);
        den += e * w[DV + 1];
        const float4 ov = *reinterpret_cast<const float4*>(w + c);
        num.x += e * ov.x;
        num.y += e * ov.y;
        num.z += e * ov.z;
        num.w += e * ov.w;
      }
      const float inv = 1.0f / den;
      const i64 at = ((i64)b * M + gm) * DV + c;
      yr_st(o, at, num.x * inv);
      yr_st(o, at + 1, num.y * inv);
      yr_st(o, at + 2, num.z * inv);
      yr_st(o, at + 3, num.w * inv);
    }
    // No second barrier: every remote store landed before the first one.
  }
#else
  float* const part = reinterpret_cast<float*>(skv);  // over the drained ring
  (void)part;
  // This lane's share of one partial row (O, then m and l) at `w`: tile mt,
  // half h (rows lane / 4 and lane / 4 + 8).
  auto write_partial_row = [&](float* w, int mt, int h) {
#pragma unroll
    for (int j = 0; j < DV / 8; ++j) {
      *reinterpret_cast<float2*>(w + j * 8 + 2 * qd) =
          make_float2(oacc[mt][j][2 * h], oacc[mt][j][2 * h + 1]);
    }
    if (qd == 0) {
      w[DV] = m_run[mt][h];
      w[DV + 1] = l_run[mt][h];
    }
  };
  (void)write_partial_row;
  // This warp's partial rows at their rows of the BM rows [BM][LP] from row
  // `row0` of `part` on.
  auto store_partial = [&](int row0) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        write_partial_row(part + (row0 + rw * WR + mt * 16 + (lane >> 2) + 8 * h) * LP, mt, h);
      }
    }
  };
  (void)store_partial;
  // Stores o[at .. at + 3]: the merge of the splits' partials of one row
  // (ml: m in base-2 units and l; os: four columns of O).
  auto merge_store = [&](const float2(&ml)[SPLITS], const float4(&os)[SPLITS], i64 at) {
    float mx = ml[0].x;
#pragma unroll
    for (int s2 = 1; s2 < SPLITS; ++s2) mx = fmaxf(mx, ml[s2].x);
    float den = 0.0f;
    float4 num = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s2 = 0; s2 < SPLITS; ++s2) {
      const float e = yr_exp2(ml[s2].x - mx);
      den += e * ml[s2].y;
      num.x += e * os[s2].x;
      num.y += e * os[s2].y;
      num.z += e * os[s2].z;
      num.w += e * os[s2].w;
    }
    const float inv = 1.0f / den;
    yr_st(o, at, num.x * inv);
    yr_st(o, at + 1, num.y * inv);
    yr_st(o, at + 2, num.z * inv);
    yr_st(o, at + 3, num.w * inv);
  };
  (void)merge_store;
#if @KG@ > 1 || @MERGE_KIND@ == 1
  yr_cp_async_wait<0>();
  __syncthreads();
#endif
#if @KG@ > 1
  // Key groups 1.. hand their partial rows [KG - 1][BM][LP] to group 0.
  if (kg > 0) store_partial((kg - 1) * BM);
  __syncthreads();
  if (kg == 0) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = rw * WR + mt * 16 + (lane >> 2) + 8 * h;
        float m_new = m_run[mt][h];
#pragma unroll
        for (int g = 1; g < KG; ++g) m_new = fmaxf(m_new, part[((g - 1) * BM + row) * LP + DV]);
        const float a0 = yr_exp2(m_run[mt][h] - m_new);
        l_run[mt][h] *= a0;
#pragma unroll
        for (int j = 0; j < DV / 8; ++j) {
          oacc[mt][j][2 * h] *= a0;
          oacc[mt][j][2 * h + 1] *= a0;
        }
#pragma unroll
        for (int g = 1; g < KG; ++g) {
          const float* const w = part + ((g - 1) * BM + row) * LP;
          const float ag = yr_exp2(w[DV] - m_new);
          l_run[mt][h] += ag * w[DV + 1];
#pragma unroll
          for (int j = 0; j < DV / 8; ++j) {
            const float2 pv = *reinterpret_cast<const float2*>(w + j * 8 + 2 * qd);
            oacc[mt][j][2 * h] += ag * pv.x;
            oacc[mt][j][2 * h + 1] += ag * pv.y;
          }
        }
        m_run[mt][h] = m_new;
      }
    }
  }
#if @MERGE_KIND@ == 1
  __syncthreads();  // the cluster's partial rows reuse the space
#endif
#endif
#if @MERGE_KIND@ == 1
  // Partial rows [BM][LP] (O, then m and l); the cluster's blocks are the
  // splits of this query tile, and block `split` merges rows
  // [split * RPB, (split + 1) * RPB) from all of them, 4 columns a thread.
  constexpr int RPB = BM / SPLITS;
  if (kg == 0) store_partial(0);
  yr_cluster_sync();
  for (int x = tid; x < RPB * (DV / 4); x += NT) {
    const int r = split * RPB + x / (DV / 4), c = (x % (DV / 4)) * 4;
    if (m0 + r >= M) continue;
    const unsigned row = yr_smem_addr(part + r * LP);
    float2 ml[SPLITS];
    float4 os[SPLITS];
#pragma unroll
    for (int s2 = 0; s2 < SPLITS; ++s2) {
      ml[s2] = yr_ld_cluster2(row + DV * 4, s2);
      os[s2] = yr_ld_cluster4(row + c * 4, s2);
    }
    merge_store(ml, os, ((i64)b * M + m0 + r) * DV + c);
  }
  yr_cluster_sync();  // the other blocks' reads of this block's rows are done
#elif @MERGE_KIND@ == 4
  // In-kernel merge: the grid is co-resident (a cooperative launch), so
  // every split leaves its partial rows in the workspace [SPLITS][B][M][LW],
  // arrives at its query tile's counter (past the partials; it only grows,
  // SPLITS a launch) and waits for the tile's other splits; then block
  // `split` merges rows [split * RPB, (split + 1) * RPB). No second kernel,
  // no cluster size limit. (On an H200, gqa_decode b1 in 16 splits: 11.0
  // us in a harness, against 12.3 for 8 splits merged in a cluster.)
  {
    constexpr int RPB = BM / SPLITS, LW = DV + 4;
    constexpr i64 SLOT = (i64)@B@ * M * LW;
    unsigned* const cnt =
        reinterpret_cast<unsigned*>(ws + SPLITS * SLOT) + b * gridDim.x + blockIdx.x;
    if (kg == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int gm = m0 + rw * WR + mt * 16 + (lane >> 2) + 8 * h;
          if (gm < M) write_partial_row(ws + split * SLOT + ((i64)b * M + gm) * LW, mt, h);
        }
      }
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      const unsigned old = atomicAdd(cnt, 1u);
      const unsigned target = old - old % SPLITS + SPLITS;
      unsigned now;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(now) : "l"(cnt) : "memory");
      } while ((int)(now - target) < 0);
    }
    __syncthreads();
    for (int x = tid; x < RPB * (DV / 4); x += NT) {
      const int r = split * RPB + x / (DV / 4), c = (x % (DV / 4)) * 4;
      if (m0 + r >= M) continue;
      const float* const w0 = ws + ((i64)b * M + m0 + r) * LW;
      float2 ml[SPLITS];
      float4 os[SPLITS];
#pragma unroll
      for (int s2 = 0; s2 < SPLITS; ++s2) {
        ml[s2] = __ldcg(reinterpret_cast<const float2*>(w0 + s2 * SLOT + DV));
        os[s2] = __ldcg(reinterpret_cast<const float4*>(w0 + s2 * SLOT + c));
      }
      merge_store(ml, os, ((i64)b * M + m0 + r) * DV + c);
    }
  }
#else
  if (kg != 0) return;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gm = m0 + rw * WR + mt * 16 + (lane >> 2) + 8 * h;
      if (gm >= M) continue;
#if @MERGE_KIND@ == 0
      const float inv = 1.0f / l_run[mt][h];
      @OT@* const out = o + ((i64)b * M + gm) * DV;
#pragma unroll
      for (int j = 0; j < DV / 8; ++j) {
        yr_st(out, j * 8 + 2 * qd, oacc[mt][j][2 * h] * inv);
        yr_st(out, j * 8 + 2 * qd + 1, oacc[mt][j][2 * h + 1] * inv);
      }
#else
      write_partial_row(ws + (((i64)split * @B@ + b) * M + gm) * (DV + 2), mt, h);
#endif
    }
  }
#endif
#endif  // @MERGE_KIND@ == 3
}
)";

constexpr char kMergeKernel[] = R"(
// merges the @SPLITS@ key splits of @NAME@: one thread per output element
extern "C" __global__ void __launch_bounds__(256) @NAME@_merge(const float* __restrict__ ws,
    @OT@* __restrict__ o) {
  constexpr int M = @M@, DV = @DV@, S = @SPLITS@;
  const i64 x = (i64)blockIdx.x * 256 + threadIdx.x;
  if (x >= (i64)@B@ * M * DV) return;
  const i64 rowi = x / DV;
  const int c = (int)(x % DV);
  constexpr i64 stride = (i64)@B@ * M * (DV + 2);
  const float* w = ws + rowi * (DV + 2);
  float mx = -__int_as_float(0x7f800000);
#pragma unroll 4
  for (int s = 0; s < S; ++s) mx = fmaxf(mx, w[s * stride + DV]);
  float num = 0.0f, den = 0.0f;
#pragma unroll 4
  for (int s = 0; s < S; ++s) {
    const float e = yr_exp2(w[s * stride + DV] - mx);  // m in base-2 units
    num += e * w[s * stride + c];
    den += e * w[s * stride + DV + 1];
  }
  yr_st(o, x, num / den);
}
)";

std::string CTypeOf(yirage::v1::DType t) {
  return t == yirage::v1::BFLOAT16 ? "__nv_bfloat16" : "__half";
}

}  // namespace

std::optional<AttentionPattern> MatchAttention(const Graph& g, const std::vector<int>& ops,
                                               const std::vector<int>& outputs) {
  std::optional<AttentionPattern> a = core::MatchAttention(g, ops);
  if (!a.has_value() || outputs.size() != 1 || outputs[0] != a->out) return std::nullopt;
  if (!core::WithinLimits(AttentionLimits(), yirage::v1::ATTENTION, g, ops)) return std::nullopt;
  return a;
}

namespace {

int64_t RowsPerBlock(const AttentionConfig& c) { return int64_t{c.warp_rows} * c.row_warps; }

int64_t TileBytes(const AttentionPattern& a) {
  const int64_t ksize = a.transpose_k ? kTileN * (a.d + 8) : a.d * (kTileN + 8);
  return (ksize + kTileN * (a.dv + 8)) * 2;
}

int64_t SmemBytes(const AttentionPattern& a, const AttentionConfig& c) {
  if (c.prefill) return (RowsPerBlock(c) * a.d + int64_t{c.stages} * c.key_tile * (a.d + a.dv)) * 2;
  const int64_t ring = int64_t{c.stages} * c.key_groups * TileBytes(a);
  const int64_t rows = RowsPerBlock(c) * (a.dv + 4) * 4;
  // Pushed: every key group's partial rows of the cluster, past the ring.
  if (c.push_merge) return RowsPerBlock(c) * (a.d + 8) * 2 + ring + c.key_groups * rows;
  // Partial rows (the key groups', then the cluster's) over the drained ring.
  const int64_t partial = std::max<int64_t>(c.key_groups - 1, c.cluster_merge ? 1 : 0) * rows;
  return RowsPerBlock(c) * (a.d + 8) * 2 + std::max(ring, partial);
}

}  // namespace

AttentionConfig PlanAttention(const AttentionPattern& a, const CudaTarget& target,
                              const yirage::v1::AttentionSchedule& schedule) {
  using Merge = yirage::v1::AttentionSchedule;
  AttentionConfig c;
  if (schedule.prefill()) {
    c.key_tile = schedule.key_tile() == 128 ? 128 : 64;
    const bool applies = target.sm == 90 && a.transpose_k && a.d % 64 == 0 && a.dv % 64 == 0 &&
                         a.d <= 128 && a.dv <= 128 && a.n % c.key_tile == 0;
    if (!applies) return c;
    const int rows = schedule.block_rows();
    c.prefill = true;
    c.warp_rows = 16;
    c.row_warps = (rows == 64 || rows == 192 ? rows : 128) / 16;
    c.stages = schedule.stages() >= 2 && schedule.stages() <= 8 ? schedule.stages() : 2;
    while (c.stages > 2 && SmemBytes(a, c) > target.max_smem_per_block) --c.stages;
    if (SmemBytes(a, c) > target.max_smem_per_block) c.prefill = false;
    c.overlap = schedule.overlap() && c.stages >= 3;  // the overlap refills two steps later
    return c;
  }
  c.warp_rows = schedule.warp_rows() == 32 ? 32 : 16;
  c.wgmma = schedule.warp_rows() == 64 && target.sm == 90 && a.d == 64 && a.dv == 64;
  // 32-row warps hold twice the S and O registers (about 230 a thread):
  // at most 256 threads a block.
  const int max_warps = c.warp_rows == 32 ? kMaxWarps / 2 : kMaxWarps;
  const int rows = schedule.block_rows();
  const bool rows_ok =
      (rows == 32 || rows == 64 || rows == 128 || rows == 256) && rows >= c.warp_rows;
  c.row_warps = (rows_ok ? rows : 64) / c.warp_rows;
  if (c.wgmma) c.row_warps = 4;  // one warpgroup, one key group
  const int w = schedule.warps();
  if (!c.wgmma && w > 0 && w % c.row_warps == 0 && w <= max_warps) {
    const int groups = w / c.row_warps;
    if (groups == 1 || groups == 2 || groups == 4) c.key_groups = groups;
  }
  while ((a.n / kTileN) % c.key_groups != 0) c.key_groups /= 2;  // whole steps
  // Fewer key groups where even a two-stage ring of theirs does not fit
  // (D = 128: 35 KiB a tile).
  auto fits_two_stages = [&] {
    AttentionConfig two = c;
    two.stages = 2;
    return SmemBytes(a, two) <= target.max_smem_per_block;
  };
  while (c.key_groups > 1 && !fits_two_stages()) c.key_groups /= 2;
  c.stages = schedule.stages() >= 2 && schedule.stages() <= 8 ? schedule.stages() : 4;
  const int64_t steps = a.n / kTileN / c.key_groups;  // with one split
  const bool cluster_ok = target.sm >= 90 && schedule.merge() != Merge::MERGE_WORKSPACE;
  auto fits_cluster = [&](int64_t s) {
    return cluster_ok && s > 1 && s <= kMaxClusterSplits && RowsPerBlock(c) % s == 0;
  };
  const int64_t units = (a.m + RowsPerBlock(c) - 1) / RowsPerBlock(c) * a.batch;
  const int64_t threads = 32 * int64_t{c.row_warps} * c.key_groups;
  // Blocks an SM holds at the current shared memory: by it and by threads,
  // and, `with_registers`, by registers at the most a thread may take (255;
  // the compiler is free to use them).
  auto blocks_per_sm = [&](bool with_registers) {
    int64_t n =
        std::min((target.max_smem_per_block + 1024) / (SmemBytes(a, c) + 1024), 2048 / threads);
    if (with_registers) n = std::min(n, 65536 / (threads * 256));
    return std::clamp<int64_t>(n, 1, 32);
  };
  if (schedule.split_k() > 0) {
    c.splits = steps % schedule.split_k() == 0 ? schedule.split_k() : 1;
    c.cluster_merge = fits_cluster(c.splits);
  } else {
    // One full wave at the kernel's occupancy (shared memory and threads per
    // SM; 90% of it counts as full). A cluster merges the splits where they
    // are few and the grid stays within one block per SM, half of that
    // for clusters above 4: a cluster's blocks run in one GPC at once, and
    // larger cluster grids ran longer than the workspace merge on an H200
    // (gqa_decode b8: 4-block clusters of 64-row blocks, two per SM, 53.6
    // us against 35.6; 8-block clusters of 256-row blocks, 50.8 against
    // 43.9).
    c.cluster_merge = cluster_ok;
    while (c.stages > 2 && SmemBytes(a, c) > target.max_smem_per_block) --c.stages;
    const int64_t wave = int64_t{target.sm_count} * blocks_per_sm(false) * 9 / 10;
    c.splits = 1;
    while (units * c.splits < wave && steps % (2 * c.splits) == 0 && 2 * c.splits <= 64) {
      c.splits *= 2;
    }
    c.cluster_merge = false;
    if (cluster_ok && c.splits > 1) {
      int64_t s = std::min<int64_t>(c.splits, kMaxClusterSplits);
      auto fits_grid = [&](int64_t n) { return units * n * (n > 4 ? 2 : 1) <= target.sm_count; };
      while (s > 1 && !fits_grid(s)) s /= 2;
      if (fits_cluster(s) && (s == c.splits || fits_grid(kMaxClusterSplits))) {
        c.splits = static_cast<int>(s);
        c.cluster_merge = true;
      }
    }
  }
  while (c.stages > 2 && SmemBytes(a, c) > target.max_smem_per_block) --c.stages;
  // The in-kernel merge (MERGE_IN_KERNEL asks for it; a cooperative launch keeps
  // the grid co-resident): where the grid fits the chip at the kernel's
  // occupancy, with whole pipeline steps and query rows for every split.
  // Automatic splits take it where a cluster would have merged fewer
  // splits than the chip wants (see the kernel's comment), with the split
  // count that gives every block an SM of its own.
  const int64_t resident = int64_t{target.sm_count} * blocks_per_sm(true);
  auto spin_fits = [&](int64_t s) {
    return target.sm >= 70 && s > 1 && s <= kMaxSpinSplits && RowsPerBlock(c) % s == 0 &&
           steps % s == 0 && units * s <= resident;
  };
  if (schedule.merge() == Merge::MERGE_IN_KERNEL) {
    // The requested split, or the most the chip holds at once.
    int64_t s = c.splits;
    if (schedule.split_k() <= 0) {
      s = 1;
      while (spin_fits(2 * s)) s *= 2;
    }
    if (spin_fits(s)) {
      c.splits = static_cast<int>(s);
      c.spin_merge = true;
      c.cluster_merge = false;
    }
  } else if (schedule.split_k() <= 0 && schedule.merge() != Merge::MERGE_WORKSPACE &&
             c.splits > 1) {
    int64_t s = 1;
    while (units * s * 2 <= target.sm_count && spin_fits(2 * s)) s *= 2;
    if (c.cluster_merge ? s > c.splits : s == c.splits) {
      c.splits = static_cast<int>(s);
      c.spin_merge = true;
      c.cluster_merge = false;
    }
  }
  // The push merge where its receiving rows fit beside the ring (on an
  // H200, gqa_decode b8 with 64-row blocks of 4 key groups and 2 splits:
  // 29.1 us against 30.5 pulling).
  if (c.cluster_merge && schedule.merge() != Merge::MERGE_CLUSTER_PULL) {
    AttentionConfig push = c;
    push.push_merge = true;
    if (SmemBytes(a, push) <= target.max_smem_per_block) c = push;
  }
  return c;
}

int64_t AttentionWorkspaceBytes(const AttentionPattern& a, const AttentionConfig& c) {
  if (c.spin_merge) {
    // Partial rows of 16 bytes' multiple, then a counter per query tile.
    const int64_t tiles = (a.m + RowsPerBlock(c) - 1) / RowsPerBlock(c) * a.batch;
    return int64_t{c.splits} * a.batch * a.m * (a.dv + 4) * 4 + tiles * 4;
  }
  return c.splits > 1 && !c.cluster_merge ? int64_t{c.splits} * a.batch * a.m * (a.dv + 2) * 4 : 0;
}

const char* AttentionPrefillSource() {
  // backends/cuda/attention_prefill.cuh, embedded at build time.
  return
#include "cuda_attention_prefill.inc"
      ;
}

void EmitAttention(const AttentionPattern& a, const AttentionConfig& config,
                   const std::string& name, int q_arg, int k_arg, int v_arg, int out_arg,
                   const std::string& out_type, int workspace_arg, std::string* source,
                   std::vector<KernelLaunch>* launches) {
  if (config.prefill) {
    // The device code is attention_prefill.cuh's template; the kernel
    // instantiates it for this chain.
    *source += WgmmaHelpersSource();
    *source += WgmmaOpsSource();
    *source += AttentionPrefillSource();
    const int threads = 32 * config.row_warps;
    absl::StrAppend(source, "extern \"C\" __global__ void __launch_bounds__(", threads, ", 1) ",
                    name, "(const ", CTypeOf(a.dtype), "* __restrict__ q, const ", CTypeOf(a.dtype),
                    "* __restrict__ k, const ", CTypeOf(a.dtype), "* __restrict__ v, ", out_type,
                    "* __restrict__ o, float* __restrict__ ws) {\n",
                    "  (void)ws;\n  yr_attention_prefill<", CTypeOf(a.dtype), ", ", out_type, ", ",
                    a.d, ", ", a.dv, ", ", config.key_tile, ", ", config.row_warps / 4, ", ",
                    config.stages, ", ", config.overlap ? "true" : "false", ">(q, k, v, o, ", a.m,
                    ", ", a.n, ", ", CudaFloatLiteral(a.scale), ");\n}\n");
    KernelLaunch main;
    main.name = name;
    main.grid[0] = (a.m + RowsPerBlock(config) - 1) / RowsPerBlock(config);
    main.grid[1] = a.batch;
    main.block = threads;
    main.smem_bytes = static_cast<int>(SmemBytes(a, config));
    main.args = {q_arg, k_arg, v_arg, out_arg, out_arg};
    launches->push_back(main);
    return;
  }
  const int splits = config.splits;
  const int64_t ns = a.n / splits;
  const bool workspace = splits > 1 && !config.cluster_merge && !config.spin_merge;
  const int merge_kind = splits == 1             ? 0
                         : config.spin_merge     ? 4
                         : !config.cluster_merge ? 2
                         : config.push_merge     ? 3
                                                 : 1;
  const bool bf16 = a.dtype == yirage::v1::BFLOAT16;
  if (config.wgmma) {
    *source += WgmmaHelpersSource();
    *source += WgmmaOpsSource();
  }
  const std::vector<std::pair<std::string, std::string>> subst = {
      {"@WG@", config.wgmma ? "1" : "0"},
      {"@WG_QK@", WgmmaOpName(64, bf16, false, !a.transpose_k)},
      {"@WG_PV@", WgmmaOpName(64, bf16, true, true)},
      {"@NAME@", name},
      {"@T@", CTypeOf(a.dtype)},
      {"@OT@", workspace ? std::string("float") : out_type},
      {"@B@", absl::StrCat(a.batch)},
      {"@M@", absl::StrCat(a.m)},
      {"@N@", absl::StrCat(a.n)},
      {"@D@", absl::StrCat(a.d)},
      {"@DV@", absl::StrCat(a.dv)},
      {"@NS@", absl::StrCat(ns)},
      {"@SPLITS@", absl::StrCat(splits)},
      {"@RW@", absl::StrCat(config.row_warps)},
      {"@MT@", absl::StrCat(config.warp_rows / 16)},
      {"@WR@", absl::StrCat(config.warp_rows)},
      {"@KG@", absl::StrCat(config.key_groups)},
      {"@STAGES@", absl::StrCat(config.stages)},
      {"@MERGE_KIND@", absl::StrCat(merge_kind)},
      {"@MERGE@", merge_kind == 0   ? "none"
                  : merge_kind == 1 ? "thread-block cluster (distributed shared memory)"
                  : merge_kind == 3 ? "thread-block cluster (rows pushed to the merging block)"
                  : merge_kind == 4 ? "in the kernel, through the workspace (cooperative launch)"
                                    : "workspace + merge kernel"},
      {"@CLUSTER_ATTR@", merge_kind == 1 || merge_kind == 3
                             ? absl::StrCat("__cluster_dims__(1, 1, ", splits, ") ")
                             : ""},
      {"@KT@", a.transpose_k ? "1" : "0"},
      {"@SCALE@", CudaFloatLiteral(a.scale)},
  };
  *source += absl::StrReplaceAll(kAttentionKernel, subst);
  KernelLaunch main;
  main.name = name;
  main.grid[0] = (a.m + RowsPerBlock(config) - 1) / RowsPerBlock(config);
  main.grid[1] = a.batch;
  main.grid[2] = splits;
  main.block = 32 * config.row_warps * config.key_groups;
  main.smem_bytes = static_cast<int>(SmemBytes(a, config));
  main.args = {q_arg, k_arg, v_arg, workspace ? workspace_arg : out_arg,
               workspace || config.spin_merge ? workspace_arg : out_arg};
  main.cooperative = config.spin_merge;
  launches->push_back(main);
  if (workspace) {
    std::vector<std::pair<std::string, std::string>> merge_subst = subst;
    for (auto& [key, value] : merge_subst) {
      if (key == "@OT@") value = out_type;
    }
    *source += absl::StrReplaceAll(kMergeKernel, merge_subst);
    KernelLaunch merge;
    merge.name = name + "_merge";
    merge.grid[0] = (a.batch * a.m * a.dv + 255) / 256;
    merge.block = 256;
    merge.args = {workspace_arg, out_arg};
    launches->push_back(merge);
  }
}

}  // namespace yirage::backends::cuda
