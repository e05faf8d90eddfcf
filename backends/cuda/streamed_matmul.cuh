// Streamed matmuls (cuda_streamed_matmul.h): decode-shaped GEMMs that read
// each weight from memory once,
//   Y = epilogue(prologue(X) W1 [, prologue(X) W2] [+ (X A) B])
// with X [M, K] (M <= 64), the weights W1, W2 [K, N], A [K, R] and B [R, N]
// row-major. The backend instantiates one template per chain from a short
// extern "C" kernel of its own:
//   yr_streamed_matmul<...>          the shared-memory form: chunks of X and
//                                    the weights through a cp.async ring,
//                                    mma.m16n8k16 or (WG) wgmma;
//   yr_streamed_combine_splits<...>  that form's K splits added from the
//                                    workspace, with the epilogue;
//   yr_streamed_matmul_regs<...>     the weights streamed into registers.
// Their template parameters: T the 16-bit input type (__half or
// __nv_bfloat16), OT the output's type; M, K, N the shapes; NW the weights
// (1, or 2: W1 and W2 of the gated silu(X W1) * (X W2), EPI 1); SPLITS the K
// ranges (blockIdx.y), each split's K / SPLITS rows; RMS the rms norm's row
// scale 1 / sqrt(mean(X^2) + eps), applied after the matmul
// (yr_streamed_epilogue); NG the column scales, scales.p[0 .. NG) ([K]
// each, multiplied into X's columns); CLUSTER: the SPLITS blocks of a column
// tile are one thread-block cluster (1, SPLITS, 1), which adds its partial
// sums through distributed shared memory. w2 is read only when NW is 2, la
// and lb only when R > 0: the kernel passes nullptr for the ones it lacks.
// eps is the norm's epsilon (a literal in the kernel's call).
// REQUIRES: kernel_prelude.cuh, wgmma_helpers.cuh and wgmma_ops.cuh before
// this file.
#ifndef YR_STREAMED_MATMUL
#define YR_STREAMED_MATMUL

// NG pointers (a kernel's parameters g0 .. g{NG-1}), passed as one value.
template <typename T, int NG>
struct yr_ptrs {
  const T* p[NG > 0 ? NG : 1];
};

// The shared-memory form (kShared; kWgmma with WG). Block: NT threads, 4
// warps along its 64 output columns (16 each) times NT / 128 along its
// MT * 16 rows (MT 16-row tiles: 1, 2 or 4; rows M.. are zero); grid
// (N / 64, SPLITS), block y one split of K. The block streams 64-row chunks
// of X and of every weight (and the low-rank A's, and the column scales')
// through a STAGES-deep cp.async ring in shared memory and multiplies them
// with mma.m16n8k16 (float accumulation, operands by ldmatrix) or, WG, one
// warpgroup's wgmma.mma_async straight from the stages. Column scales
// multiply the staged X chunk; the rms row scale is applied after the
// matmul (the norm's reduction runs in the matmul's pass). The low-rank
// T = X A (rank R, a multiple of 16 up to 64; R > 0 needs SPLITS 1) is
// accumulated in the same pass and multiplied by the block's B columns at
// the end. With one split the block applies the epilogue and stores Y to o;
// with more, a CLUSTER adds the splits' tiles in distributed shared memory
// and stores Y, else every split writes float partial sums to ws
// ([SPLITS][NW][M][N], then the sums of squares [SPLITS][M]) for
// yr_streamed_combine_splits. Weights stream under an L2 evict-first policy
// (read once).
// REQUIRES: K a multiple of 64 * SPLITS, N of 64; a launch of NT threads
// with the backend's dynamic shared memory (the ring, B's columns, the
// rows' scales), 1024-byte aligned.
template <typename T, typename OT, int M, int MT, int K, int N, int NW, int R, int SPLITS,
          int STAGES, int NT, int NG, bool WG, bool RMS, int EPI, bool CLUSTER>
static __device__ __forceinline__ void yr_streamed_matmul(
    const T* __restrict__ x_in, const T* __restrict__ w1, const T* __restrict__ w2,
    const T* __restrict__ la, const T* __restrict__ lb, yr_ptrs<T, NG> scales, OT* __restrict__ o,
    float* __restrict__ ws, float eps) {
  constexpr int MP = MT * 16, KS = K / SPLITS;
  constexpr int BK = 64, BN = 64;
  // The prologue (on the staged X chunks): sums of squares, column scales.
  constexpr bool PREP = RMS || NG > 0;
  // Where the sums of squares start in the workspace.
  constexpr i64 SS_OFF = (i64)SPLITS * NW * M * N;
  // Warps: 4 along N (16 columns each) times WM along M (MTW 16-row tiles each).
  constexpr int WM = NT / 128, MTW = MT / WM;
  static_assert(MT % WM == 0, "row tiles split evenly over the warps");
  // Unpadded rows, chunks swizzled by yr_swz (X and W rows are 128 bytes).
  constexpr int LX = BK, LW = BN, CA = R / 8, LA = (CA & (CA - 1)) == 0 ? R : R + 8;
  // wgmma (WG): one warpgroup, X and the weights read by the tensor cores
  // straight from the stages, whose 128-byte swizzle (yr_swz) is the
  // hardware's; stages start on 1024-byte boundaries (X's 64 rows and the
  // weights' chunks are whole multiples of it).
  constexpr int STAGE = MP * LX + NW * BK * LW + (R > 0 ? BK * LA : 0) + NG * BK;
  static_assert(!WG || (NT == 128 && MP == 64 && R == 0 && NG == 0 && STAGE % 512 == 0),
                "wgmma form: one warpgroup, 64 rows, no low rank or column scales");
  constexpr int CHUNKS = KS / BK;
  constexpr int TPR = NT / MP, CPT = BK / TPR;  // prologue pass: threads per row, columns each
  extern __shared__ __align__(1024) unsigned char yr_smb[];
  T* const sm = reinterpret_cast<T*>(yr_smb);
  T* const bsm = sm + STAGES * STAGE;  // low rank: the block's B columns [R][BN], swizzled
  float* const rs_sm = reinterpret_cast<float*>(bsm + R * LW);
  (void)rs_sm;
  (void)bsm;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wn = warp & 3, mt0 = (warp >> 2) * MTW;
  const int li = lane & 7, lm = lane >> 3;
  const int n0 = blockIdx.x * BN, split = blockIdx.y;
  (void)split;
  const int kbase = split * KS;
  const unsigned long long policy = yr_stream_policy();  // the weights are read once
  // Rows M..MP-1 of every X stage stay zero.
  if constexpr (MP > M) {
    for (int x = tid; x < STAGES * (MP - M) * (BK / 8); x += NT) {
      const int st = x / ((MP - M) * (BK / 8)), rem = x % ((MP - M) * (BK / 8));
      *reinterpret_cast<uint4*>(sm + st * STAGE + (M + rem / (BK / 8)) * LX +
                                (rem % (BK / 8)) * 8) = make_uint4(0, 0, 0, 0);
    }
  }
  if constexpr (R > 0) {
    for (int x = tid; x < R * (BN / 8); x += NT) {
      const int r = x / (BN / 8), c = (x % (BN / 8)) * 8;
      yr_cp_async16_stream(bsm + yr_swz<BN>(r, c), lb + (i64)r * N + n0 + c, policy);
    }
  }
  // Copies of chunk t into stage st: the weights (this block's columns) ...
  auto load_weights = [&](int t, int st) {
    T* const w1s = sm + st * STAGE + MP * LX;
    const int k0 = kbase + t * BK;
    for (int x = tid; x < BK * (BN / 8); x += NT) {
      const int r = x / (BN / 8), c = (x % (BN / 8)) * 8;
      yr_cp_async16_stream(w1s + yr_swz<BN>(r, c), w1 + (i64)(k0 + r) * N + n0 + c, policy);
      if constexpr (NW == 2) {
        yr_cp_async16_stream(w1s + BK * LW + yr_swz<BN>(r, c), w2 + (i64)(k0 + r) * N + n0 + c,
                             policy);
      }
    }
  };
  // ... the column scales' chunk, which rides in the same stage (no load on
  // the prologue's critical path) ...
  auto load_scales = [&](int t, int st) {
    (void)t;
    (void)st;
    if constexpr (NG > 0) {
      T* const gs = sm + st * STAGE + MP * LX + NW * BK * LW + (R > 0 ? BK * LA : 0);
      const int k0 = kbase + t * BK;
      (void)k0;
      if (tid < NG * (BK / 8)) {
        const int gi = tid / (BK / 8), c = (tid % (BK / 8)) * 8;
#pragma unroll
        for (int i = 0; i < NG; ++i) {
          if (gi == i) yr_cp_async16(gs + i * BK + c, scales.p[i] + k0 + c);
        }
      }
    }
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
    if constexpr (R > 0) {
      T* const as = w1s + NW * BK * LW;
      for (int x = tid; x < BK * (R / 8); x += NT) {
        const int r = x / (R / 8), c = (x % (R / 8)) * 8;
        yr_cp_async16_stream(as + yr_swz<R>(r, c), la + (i64)(k0 + r) * R + c, policy);
      }
    }
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
      if constexpr (R > 0) {
#pragma unroll
        for (int i = 0; i < APT; ++i) {
          const int x = tid + i * NT, r = x / (R / 8), c = (x % (R / 8)) * 8;
          if (x < BK * (R / 8)) {
            xa[s][XPT + i] =
                __ldg(reinterpret_cast<const uint4*>(la + (i64)(kbase + s * BK + r) * R + c));
          }
        }
      }
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
      if constexpr (R > 0) {
        T* const as = xs + MP * LX + NW * BK * LW;
#pragma unroll
        for (int i = 0; i < APT; ++i) {
          const int x = tid + i * NT, r = x / (R / 8), c = (x % (R / 8)) * 8;
          if (x < BK * (R / 8)) *reinterpret_cast<uint4*>(as + yr_swz<R>(r, c)) = xa[s][XPT + i];
        }
      }
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
  // WG: rows 16 * warp + lane / 4 (+ 8) of the block's 64 * NW columns (W1's,
  // then W2's): element (j, h, e) of the m64nNk16 fragment at 4 j + 2 h + e.
  float wacc[WG ? NW * 32 : 1];
  (void)wacc;
  if constexpr (WG) {
#pragma unroll
    for (int i = 0; i < NW * 32; ++i) wacc[i] = 0.0f;
  }
  // R > 0: T = X A, this warp's rows.
  float tacc[MTW][R > 0 ? R / 8 : 1][4];
  (void)tacc;
#pragma unroll
  for (int mt = 0; mt < MTW; ++mt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc1[mt][0][e] = acc1[mt][1][e] = acc2[mt][0][e] = acc2[mt][1][e] = 0.0f;
      if constexpr (R > 0) {
#pragma unroll
        for (int j = 0; j < R / 8; ++j) tacc[mt][j][e] = 0.0f;
      }
    }
  }
  float ss = 0.0f;
  (void)ss;
  (void)acc2;
  for (int t = 0; t < CHUNKS; ++t) {
    yr_cp_async_wait<STAGES - 2>();
    if constexpr (WG) {
      yr_fence_proxy_async();  // this thread's copies, visible to the tensor cores' reads
    }
    __syncthreads();
    T* const xs = sm + (t % STAGES) * STAGE;
    const T* const w1s = xs + MP * LX;
    if constexpr (PREP) {
      {
        // Prologue on the staged X chunk: sums of squares (rms) and column scales.
        const int row = tid / TPR, c0 = (tid % TPR) * CPT;
        const T* const gs = w1s + NW * BK * LW + (R > 0 ? BK * LA : 0);
        (void)gs;
#pragma unroll 8
        for (int c = 0; c < CPT; ++c) {
          float xv = yr_ld(xs, yr_swz<BK>(row, c0 + c));
          if constexpr (RMS) ss += xv * xv;
          if constexpr (NG > 0) {
            float scale = yr_ld(gs, c0 + c);
#pragma unroll
            for (int i = 1; i < NG; ++i) scale *= yr_ld(gs, i * BK + c0 + c);
            xv *= scale;
            yr_sth(xs + yr_swz<BK>(row, c0 + c), xv);
          }
        }
      }
      if constexpr (NG > 0) {
        __syncthreads();  // the scaled X chunk is read by every warp
      }
    }
    if constexpr (WG) {
      // Four k16 steps: X (K-major, rows 128 bytes apart in 8-row groups of
      // 1024) by the weights (N-major: W1's 64 columns, W2's 8 KiB on, each k
      // group of 8 rows 1024 bytes on). The previous chunk's group may still
      // run: it is waited for before its stage is refilled (below).
      yr_wg_fence();
#pragma unroll
      for (int ks = 0; ks < BK / 16; ++ks) {
        const unsigned long long da = yr_wg_desc(xs + ks * 16, 16, 1024);
        const unsigned long long db = yr_wg_desc(w1s + ks * 16 * LW, BK * LW * 2, 1024);
        yr_wgmma_ss<NW * 64, T, true>(wacc, da, db);
      }
      yr_wg_commit();
      yr_wg_wait<1>();
    } else {
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
        if constexpr (NW == 2) {
          yr_ldsm_x4_t(
              bf, w1s + BK * LW + yr_swz<BN>(ks * 16 + li + (lm & 1) * 8, wn * 16 + (lm >> 1) * 8));
#pragma unroll
          for (int mt = 0; mt < MTW; ++mt) {
            yr_mma16816<T>(acc2[mt][0], af[mt], bf);
            yr_mma16816<T>(acc2[mt][1], af[mt], bf + 2);
          }
        }
        if constexpr (R > 0) {
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
        }
      }
    }
    if (t + STAGES - 1 < CHUNKS) {
      load_shared(t + STAGES - 1, (t + STAGES - 1) % STAGES);
      load_weights(t + STAGES - 1, (t + STAGES - 1) % STAGES);
    }
    yr_cp_async_commit();
  }
  yr_cp_async_wait<0>();
  if constexpr (WG) {
    yr_wg_wait<0>();
    yr_wg_fence_operands(wacc, NW * 32);
  }
  // This thread's accumulator pair i of PAIRS (unrolled loops: constant
  // indices): its row, column in the block's tile, W1's pair, W2's pair.
  constexpr int PAIRS = WG ? BN / 4 : MTW * 4;
  auto pair_at = [&](int i, int& row, int& col, float& v0, float& v1, float& u0, float& u1) {
    if constexpr (WG) {
      const int j = i >> 1, h = i & 1, a = 4 * j + 2 * h, b = (NW - 1) * 32 + a;
      row = warp * 16 + (lane >> 2) + 8 * h;
      col = j * 8 + 2 * (lane & 3);
      v0 = wacc[a];
      v1 = wacc[a + 1];
      u0 = wacc[b];
      u1 = wacc[b + 1];
    } else {
      const int mt = i >> 2, nb = (i >> 1) & 1, h = i & 1;
      row = (mt0 + mt) * 16 + (lane >> 2) + 8 * h;
      col = wn * 16 + nb * 8 + 2 * (lane & 3);
      v0 = acc1[mt][nb][2 * h];
      v1 = acc1[mt][nb][2 * h + 1];
      u0 = acc2[mt][nb][2 * h];
      u1 = acc2[mt][nb][2 * h + 1];
    }
  };
  if constexpr (R > 0) {
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
  }
  if constexpr (RMS) {
#pragma unroll
    for (int o = 1; o < TPR; o *= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  }
  if constexpr (CLUSTER) {
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
      if constexpr (NW == 2) {
        *reinterpret_cast<float2*>(red + (MP + row) * LR + col) = make_float2(u0, u1);
      }
      (void)u0;
      (void)u1;
    }
    if constexpr (RMS) {
      if (tid % TPR == 0) red_ss[tid / TPR] = ss;
    }
    yr_cluster_sync();
    for (int e = tid; e < RPR * (BN / 4); e += NT) {
      const int row = split * RPR + e / (BN / 4), col = (e % (BN / 4)) * 4;
      if (row >= M) break;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f), u = v;
      float sq = 0.0f;
      (void)u;
      (void)sq;
#pragma unroll
      for (int q = 0; q < SPLITS; ++q) {
        const float4 a = yr_ld_cluster4(yr_smem_addr(red + row * LR + col), q);
        v.x += a.x;
        v.y += a.y;
        v.z += a.z;
        v.w += a.w;
        if constexpr (NW == 2) {
          const float4 b = yr_ld_cluster4(yr_smem_addr(red + (MP + row) * LR + col), q);
          u.x += b.x;
          u.y += b.y;
          u.z += b.z;
          u.w += b.w;
        }
        if constexpr (RMS) sq += yr_ld_cluster1(yr_smem_addr(red_ss + row), q);
      }
      const i64 at = (i64)row * N + n0 + col;
      yr_st(o, at, yr_streamed_epilogue<RMS, EPI>(v.x, u.x, sq, K, eps));
      yr_st(o, at + 1, yr_streamed_epilogue<RMS, EPI>(v.y, u.y, sq, K, eps));
      yr_st(o, at + 2, yr_streamed_epilogue<RMS, EPI>(v.z, u.z, sq, K, eps));
      yr_st(o, at + 3, yr_streamed_epilogue<RMS, EPI>(v.w, u.w, sq, K, eps));
    }
    yr_cluster_sync();  // no block exits while another reads its tile
  } else {
    if constexpr (RMS) {
      if constexpr (SPLITS == 1) {
        if (tid % TPR == 0) rs_sm[tid / TPR] = rsqrtf(ss / (float)K + eps);
        __syncthreads();
      } else {
        if (blockIdx.x == 0 && tid % TPR == 0 && tid / TPR < M) {
          ws[SS_OFF + split * M + tid / TPR] = ss;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < PAIRS; ++i) {
      int row, col;
      float v0, v1, u0, u1;
      pair_at(i, row, col, v0, v1, u0, u1);
      if (row >= M) continue;
      col += n0;
      (void)u0;
      (void)u1;
      if constexpr (SPLITS == 1) {
        if constexpr (RMS) {
          const float rs = rs_sm[row];
          v0 *= rs;
          v1 *= rs;
          u0 *= rs;
          u1 *= rs;
        }
        if constexpr (EPI == 1) {
          v0 = yr_silu(v0) * u0;
          v1 = yr_silu(v1) * u1;
        }
        yr_st(o, (i64)row * N + col, v0);
        yr_st(o, (i64)row * N + col + 1, v1);
      } else {
        *reinterpret_cast<float2*>(ws + ((i64)(split * NW) * M + row) * N + col) =
            make_float2(v0, v1);
        if constexpr (NW == 2) {
          *reinterpret_cast<float2*>(ws + ((i64)(split * NW + 1) * M + row) * N + col) =
              make_float2(u0, u1);
        }
      }
    }
  }
}

// Adds the SPLITS K splits that yr_streamed_matmul (CLUSTER false) left in
// ws and applies the epilogue: one output element a thread.
// REQUIRES: a launch of 256 threads a block, ceil(M * N / 256) blocks.
template <typename OT, int M, int K, int N, int NW, int SPLITS, bool RMS, int EPI>
static __device__ __forceinline__ void yr_streamed_combine_splits(const float* __restrict__ ws,
                                                                  OT* __restrict__ o, float eps) {
  constexpr int S = SPLITS;
  constexpr i64 SS_OFF = (i64)SPLITS * NW * M * N;
  const i64 x = (i64)blockIdx.x * 256 + threadIdx.x;
  if (x >= (i64)M * N) return;
  const int row = (int)(x / N);
  float v = 0.0f, u = 0.0f;
  (void)u;
#pragma unroll
  for (int s = 0; s < S; ++s) {
    v += ws[(i64)(s * NW) * M * N + x];
    if constexpr (NW == 2) u += ws[(i64)(s * NW + 1) * M * N + x];
  }
  float ss = 0.0f;
  if constexpr (RMS) {
#pragma unroll
    for (int s = 0; s < S; ++s) ss += ws[SS_OFF + s * M + row];
  }
  yr_st(o, x, yr_streamed_epilogue<RMS, EPI>(v, u, ss, K, eps));
}

// The weights-to-registers form (kRegisters). Each warp streams its K range
// of W straight into registers (16 rows x V columns per lane per step,
// DEPTH steps loaded ahead) and feeds the tensor cores with W^T as the A
// operand (the rows of A are W's columns), X as the B operand. Lane
// (g = lane / 4, c = lane % 4) loads rows 4c..4c+3 of the step, columns
// V*g..V*g+V-1; byte permutes pair two rows of one column into an A register
// (the K order inside a step is permuted the same way for A and B, which a
// sum does not notice). No shared memory until the end: the block's warps
// add their partial tiles there, and with K splits the last block of a
// column tile to finish (a counter per tile in cnt) adds the splits' partial
// sums (ws) in order and applies the epilogue, or, where the splits are one
// cluster, each block adds its share of the elements from every block's
// shared memory.
// Block: WB warps, each KS / WB rows of its split's KS; grid (N / (8 V),
// SPLITS). V is 8 (64 columns a block) or 4 (32 columns; M > 16); M <= 32.
// REQUIRES: K a multiple of 16 * WB * SPLITS, N of 8 V; a launch of WB * 32
// threads with the backend's dynamic shared memory (the warps' tiles and
// sums of squares, with CLUSTER the block's sums); with SPLITS > 1 and no
// CLUSTER, ws of [SPLITS][NW][M][N] floats and then the sums of squares
// [SPLITS][N / (8 V)][M], and cnt one zero counter a column tile (left zero).
template <typename T, typename OT, int M, int K, int N, int NW, int SPLITS, int WB, int V,
          int DEPTH, int NG, bool RMS, int EPI, bool CLUSTER>
static __device__ __forceinline__ void yr_streamed_matmul_regs(
    const T* __restrict__ x_in, const T* __restrict__ w1, const T* __restrict__ w2,
    yr_ptrs<T, NG> scales, OT* __restrict__ o, float* __restrict__ ws, unsigned* __restrict__ cnt,
    float eps) {
  constexpr int MT = (M + 7) / 8, MP = MT * 8;
  constexpr int KS = K / SPLITS, KW = KS / WB, STEPS = KW / 16;
  constexpr int NF = V / 2, BN = 8 * V, TILES = N / BN;
  constexpr int NBUF = DEPTH + 1;
  constexpr i64 SS_OFF = (i64)SPLITS * NW * M * N;
  (void)TILES;
  (void)SS_OFF;
  (void)cnt;
  extern __shared__ __align__(16) float yr_rsm[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int tile = blockIdx.x, split = blockIdx.y, n0 = tile * BN;
  const int k0 = split * KS + warp * KW + 4 * c;  // this lane's first row
  const T* const w1p = w1 + (i64)k0 * N + n0 + V * g;
  const T* const w2p = NW == 2 ? w2 + (i64)k0 * N + n0 + V * g : nullptr;
  (void)w2p;
  const T* const xp = x_in + (i64)g * K + k0;
  const unsigned long long policy = yr_stream_policy();  // the weights are read once
  unsigned wr[NBUF][NW][4][NF];
  unsigned xr[NBUF][MT][2];
  unsigned gr[NBUF][NG > 0 ? NG : 1][2];
  (void)gr;
  auto load = [&](int b, int s) {
    const i64 off = (i64)(16 * s) * N;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      yr_ldg_stream(wr[b][0][i], w1p + off + (i64)i * N, policy);
      if constexpr (NW == 2) yr_ldg_stream(wr[b][1][i], w2p + off + (i64)i * N, policy);
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
    if constexpr (NG > 0) {
#pragma unroll
      for (int i = 0; i < NG; ++i) {
        const uint2 v = __ldg(reinterpret_cast<const uint2*>(scales.p[i] + k0 + 16 * s));
        gr[b][i][0] = v.x;
        gr[b][i][1] = v.y;
      }
    }
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
      // The prologue (rms, column scales) on X's values as floats.
      const float2 x01 = yr_unpack2<T>(xr[b][tt][0]), x23 = yr_unpack2<T>(xr[b][tt][1]);
      (void)x01;
      (void)x23;
      if constexpr (RMS) {
        ss[tt] += x01.x * x01.x + x01.y * x01.y + x23.x * x23.x + x23.y * x23.y;
      }
      if constexpr (NG > 0) {
        float2 s01 = make_float2(1.0f, 1.0f), s23 = make_float2(1.0f, 1.0f);
#pragma unroll
        for (int gi = 0; gi < NG; ++gi) {
          const float2 a = yr_unpack2<T>(gr[b][gi][0]), d = yr_unpack2<T>(gr[b][gi][1]);
          s01.x *= a.x;
          s01.y *= a.y;
          s23.x *= d.x;
          s23.y *= d.y;
        }
        bf[tt][0] = yr_pack2<T>(x01.x * s01.x, x01.y * s01.y);
        bf[tt][1] = yr_pack2<T>(x23.x * s23.x, x23.y * s23.y);
      } else {
        bf[tt][0] = xr[b][tt][0];
        bf[tt][1] = xr[b][tt][1];
      }
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
  if constexpr (RMS) {
#pragma unroll
    for (int tt = 0; tt < MT; ++tt) {
      float v = ss[tt];
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      if (c == 0) ssm[warp * MP + tt * 8 + g] = v;
    }
  }
  __syncthreads();
  auto finish = [&](int tok, int col, float v, float u, float sq) {
    v = yr_streamed_epilogue<RMS, EPI>(v, u, sq, K, eps);
    yr_st(o, (i64)tok * N + n0 + col, v);
  };
  (void)finish;
  // CLUSTER: this block's sums over its warps, [NW][M][BN], then its rows'
  // sums of squares [M], past the warps' tiles.
  float* const red = ssm + WB * MP;
  (void)red;
  for (int e = threadIdx.x; e < M * BN; e += WB * 32) {
    const int tok = e / BN, col = e % BN;
    float v = 0.0f, u = 0.0f, sq = 0.0f;
    (void)u;
    (void)sq;
#pragma unroll
    for (int wp = 0; wp < WB; ++wp) {
      v += part[((wp * NW) * MP + tok) * BN + col];
      if constexpr (NW == 2) u += part[((wp * NW + 1) * MP + tok) * BN + col];
      if constexpr (RMS) sq += ssm[wp * MP + tok];
    }
    if constexpr (SPLITS == 1) {
      finish(tok, col, v, u, sq);
    } else if constexpr (CLUSTER) {
      red[e] = v;
      if constexpr (NW == 2) red[M * BN + e] = u;
      if constexpr (RMS) {
        if (col == 0) red[NW * M * BN + tok] = sq;
      }
    } else {
      ws[((i64)(split * NW) * M + tok) * N + n0 + col] = v;
      if constexpr (NW == 2) ws[((i64)(split * NW + 1) * M + tok) * N + n0 + col] = u;
      if constexpr (RMS) {
        if (col == 0) ws[SS_OFF + ((i64)split * TILES + tile) * M + tok] = sq;
      }
    }
  }
  if constexpr (CLUSTER) {
    // The K splits of this column tile are one cluster (at most one block per
    // SM): block `split` adds elements [split * EPB, (split + 1) * EPB) of
    // every block's sums in order, through distributed shared memory, and
    // applies the epilogue. (No workspace, no fence and counter round trips.)
    constexpr int EPB = (M * BN + SPLITS - 1) / SPLITS;
    yr_cluster_sync();
    for (int e = split * EPB + threadIdx.x; e < (split + 1) * EPB && e < M * BN; e += WB * 32) {
      const int tok = e / BN, col = e % BN;
      float v = 0.0f, u = 0.0f, sq = 0.0f;
      (void)u;
      (void)sq;
#pragma unroll
      for (int q = 0; q < SPLITS; ++q) {
        v += yr_ld_cluster1(yr_smem_addr(red + e), q);
        if constexpr (NW == 2) u += yr_ld_cluster1(yr_smem_addr(red + M * BN + e), q);
        if constexpr (RMS) sq += yr_ld_cluster1(yr_smem_addr(red + NW * M * BN + tok), q);
      }
      finish(tok, col, v, u, sq);
    }
    yr_cluster_sync();  // no block exits while another reads its sums
  } else if constexpr (SPLITS > 1) {
    // The last block of this column tile to finish adds the splits in order.
    __shared__ unsigned yr_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) yr_last = atomicAdd(cnt + tile, 1u) == SPLITS - 1 ? 1u : 0u;
    __syncthreads();
    if (yr_last == 0u) return;
    __threadfence();
    for (int e = threadIdx.x; e < M * BN; e += WB * 32) {
      const int tok = e / BN, col = e % BN;
      float v = 0.0f, u = 0.0f, sq = 0.0f;
      (void)u;
      (void)sq;
#pragma unroll 4
      for (int sp = 0; sp < SPLITS; ++sp) {
        v += __ldcg(ws + ((i64)(sp * NW) * M + tok) * N + n0 + col);
        if constexpr (NW == 2) u += __ldcg(ws + ((i64)(sp * NW + 1) * M + tok) * N + n0 + col);
        if constexpr (RMS) sq += __ldcg(ws + SS_OFF + ((i64)sp * TILES + tile) * M + tok);
      }
      finish(tok, col, v, u, sq);
    }
    if (threadIdx.x == 0) cnt[tile] = 0u;  // ready for the next launch
  }
}

#endif
