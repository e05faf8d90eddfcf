// Flash attention with the keys split across blocks (decode and short
// prefill: few query rows a head, many keys), on mma.sync (sm_80 on) or,
// WG, one warpgroup of Hopper's wgmma (sm_90a):
//   O = softmax(scale * Q K) V   Q [B][M][D], K [B][N][D] (KT) or
//   [B][D][N], V [B][N][DV], O [B][M][DV]
// Grid (ceil(M / BM), B, SPLITS): block (x, b, split) owns query rows
// [BM x, BM x + BM) of batch entry b and keys [NS split, NS split + NS).
// Warp (rw, kg) owns query rows [WR rw, WR rw + WR) of the block's (MT
// 16-row tiles, which share every K and V fragment) and every KG-th key
// tile from kg on; S, P and O live in registers in the m16n8k16 mma layouts
// (lane: rows lane/4 and lane/4 + 8, columns 2 (lane % 4) + {0, 1} of each
// 8-column block). Each pipeline step brings KG tiles of 64 keys (one per
// key group) through a STAGES-step cp.async ring in shared memory; the
// key groups' partial rows merge in shared memory at the end (or, pushed,
// in the cluster merge).
// MERGE_KIND says how the SPLITS key splits of a query tile merge:
//   0 one split, nothing to merge; 1 thread-block cluster of the splits
//   (each block pulls its rows from the others' shared memory); 2 partial
//   rows to the workspace `ws` ([SPLITS][B][M][DV + 2]: O, m, l), merged by
//   yr_attention_merge_splits in a second kernel (o is then float and
//   unused); 3 cluster, each block storing its partial rows into the
//   merging block's shared memory; 4 in the kernel through the workspace
//   (a cooperative launch keeps the grid co-resident).
// TMA: the K and V tiles arrive by TMA (sm_90a) instead of cp.async: one
// thread issues each step's copies of 64 x 64 boxes (tensor maps `tk` over
// K as [B N][D] (KT) or [B D][N] and `tv` over V as [B N][DV], 128-byte
// swizzle) on the stage's mbarrier, so the copy engine rather than the
// block's few threads keeps the keys in flight; the swizzle keeps ldmatrix
// free of bank conflicts without padded rows. Needs D and DV multiples of 64.
// Keys past N: NS * SPLITS is N rounded up to whole tiles (N itself where it
// is a multiple of 64); in the last tile, rows past N are copies of key N - 1
// (so every load stays inside K and V) and their scores are masked out of the
// softmax.
// REQUIRES: kernel_prelude.cuh, wgmma_helpers.cuh and wgmma_ops.cuh before
// this file; NS * SPLITS a multiple of 64 * KG * SPLITS within 64 keys past N
// (every tile holds a key); N a multiple of 8 unless KT; no TMA where the
// last tile is masked; a launch
// of RW * KG * 32 threads (in clusters of the SPLITS blocks along z for
// merges 1 and 3), dynamic shared memory as the backend's planner computes it.
#ifndef YR_ATTENTION_DECODE
#define YR_ATTENTION_DECODE

template <typename T, typename OT, int B, int M, int N, int D, int DV, int NS, int SPLITS, int RW,
          int MT, int KG, int STAGES, int MERGE_KIND, bool WG, bool KT, bool TMA = false>
static __device__ __forceinline__ void yr_attention_decode(
    const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, OT* __restrict__ o,
    float* __restrict__ ws, float scale, const CUtensorMap* tk = nullptr,
    const CUtensorMap* tv = nullptr) {
  constexpr int BN = 64;
  constexpr int NT = RW * KG * 32, WR = 16 * MT, BM = WR * RW;
  // WG: one warpgroup multiplies with wgmma straight from shared memory;
  // Q, K and V tiles (rows of 64 16-bit elements) take the 128-byte swizzle
  // (yr_swz<64>) from 1024-byte boundaries instead of padded rows.
  static_assert(!WG || (D == 64 && DV == 64 && RW == 4 && KG == 1 && MT == 1), "warpgroup form");
  static_assert(!TMA || (D % 64 == 0 && DV % 64 == 0 && (long long)B * N < (1ll << 31) &&
                         (long long)B * D < (1ll << 31)),
                "TMA form");
  constexpr bool TAIL = (long long)NS * SPLITS != N;  // the last tile masked
  static_assert(NS % (BN * KG) == 0 && (long long)NS * SPLITS >= N &&
                    (long long)NS * SPLITS - N < BN && (KT || N % 8 == 0) && !(TAIL && TMA),
                "key tiles");
  constexpr int PAD = WG ? 0 : 8, KVPAD = WG || TMA ? 0 : 8;
  constexpr int LQ = D + PAD, LV = DV + KVPAD;
  constexpr int LK = KT ? D + KVPAD : BN + KVPAD;
  constexpr int KSIZE = KT ? BN * (D + KVPAD) : D * (BN + KVPAD);
  constexpr int VSIZE = BN * LV, TILE = KSIZE + VSIZE;
  // Element (r, c) of Q's rows.
  auto at_q = [](int r, int c) -> int {
    if constexpr (WG) {
      return yr_swz<64>(r, c);
    } else {
      return r * LQ + c;
    }
  };
  // Element (r, c) of a K or V tile whose rows are `ld` elements apart;
  // swizzled, the tile is panels of 64 columns, each of 64-element rows of
  // 128 bytes (TMA's 128-byte swizzle of a 64 x 64 box is yr_swz<64>; a
  // [D][64] tile of K is D / 64 such boxes one after another).
  auto at = [](int r, int c, int ld) -> int {
    if constexpr (WG || TMA) {
      return (c >> 6) * (BN * 64) + yr_swz<64>(r, c & 63);
    } else {
      return r * ld + c;
    }
  };
  constexpr int STEPS = NS / BN / KG;
  constexpr int LP = DV + 4;  // partial rows in shared memory: O, m, l, pad (16-byte rows)
  extern __shared__ __align__(1024) unsigned char yr_smb[];
  T* const sq = reinterpret_cast<T*>(yr_smb);
  // TMA: the ring's mbarriers after Q, the ring from a 1024-byte boundary
  // (the swizzle's period).
  constexpr int QBYTES = BM * LQ * 2;
  constexpr int RING_AT = TMA ? (QBYTES + 8 * STAGES + 1023) / 1024 * 1024 : QBYTES;
  unsigned long long* const bars = reinterpret_cast<unsigned long long*>(yr_smb + QBYTES);
  T* const skv = reinterpret_cast<T*>(yr_smb + RING_AT);  // STAGES steps of KG [K tile | V tile]
  (void)bars;
  (void)tk;
  (void)tv;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int rw = warp % RW, kg = warp / RW;
  const int m0 = blockIdx.x * BM, b = blockIdx.y, split = blockIdx.z;
  (void)ws;
  (void)split;
  (void)o;
  (void)SPLITS;
  (void)kg;
  (void)LP;
  const T* const qb = q + ((i64)b * M + m0) * D;
  const T* const kb = k + (i64)b * D * N;
  const T* const vb = v + (i64)b * N * DV;
  const int key0 = split * NS;
  for (int x = tid; x < BM * D / 8; x += NT) {
    const int r = x / (D / 8), c = (x % (D / 8)) * 8;
    if (m0 + r < M) {
      yr_cp_async16(sq + at_q(r, c), qb + (i64)r * D + c);
    } else {
      *reinterpret_cast<uint4*>(sq + at_q(r, c)) = make_uint4(0, 0, 0, 0);
    }
  }
  // Tile copies in 16-byte chunks: each thread's chunks of a tile sit at
  // fixed offsets (rows kr + i * KRS of K, vr + i * VRS of V), so a step
  // costs one address add per chunk.
  constexpr int KROWS = KT ? BN : D, KRC = (KT ? D : BN) / 8;  // K tile rows, chunks a row
  constexpr int KSTRIDE = KT ? D : N;                          // elements between K rows
  constexpr int VRC = DV / 8, KRS = NT / KRC, VRS = NT / VRC;
  const int kr = tid / KRC, kc = (tid % KRC) * 8, vr = tid / VRC, vc = (tid % VRC) * 8;
  const T* const kthread = kb + (i64)kr * KSTRIDE + kc;
  const T* const vthread = vb + (i64)vr * DV + vc;
  // Step st: tiles st * KG + g (g < KG) into slots g of ring stage `stage`.
  // TMA: one thread issues the step's panels, their bytes counted on the
  // stage's mbarrier.
  auto load_step = [&](int st, int stage) {
    if constexpr (TMA) {
      yr_mbar_arrive_expect_tx(&bars[stage], KG * TILE * 2);
#pragma unroll
      for (int g = 0; g < KG; ++g) {
        T* const sk = skv + (stage * KG + g) * TILE;
        const int n0 = key0 + (st * KG + g) * BN, row = b * N + n0;
#pragma unroll
        for (int p = 0; p < D / 64; ++p) {
          if constexpr (KT) {
            yr_tma_load_2d(sk + p * BN * 64, tk, p * 64, row, &bars[stage]);
          } else {
            yr_tma_load_2d(sk + p * 64 * BN, tk, n0, b * D + p * 64, &bars[stage]);
          }
        }
#pragma unroll
        for (int p = 0; p < DV / 64; ++p) {
          yr_tma_load_2d(sk + KSIZE + p * BN * 64, tv, p * 64, row, &bars[stage]);
        }
      }
      return;
    }
#pragma unroll
    for (int g = 0; g < KG; ++g) {
      T* const sk = skv + (stage * KG + g) * TILE;
      T* const sv = sk + KSIZE;
      const int n0 = key0 + (st * KG + g) * BN;
      if constexpr (TAIL) {
        if (n0 + BN > N) {
          // The last tile: keys past N repeat key N - 1 (whole 8-key chunks
          // of K as [D][N], as N is a multiple of 8), masked in S.
#pragma unroll
          for (int i = 0; i < (KROWS + KRS - 1) / KRS; ++i) {
            if (KROWS % KRS == 0 || kr + i * KRS < KROWS) {
              const T* const src = KT ? kb + (i64)min(n0 + kr + i * KRS, N - 1) * D + kc
                                      : kb + (i64)(kr + i * KRS) * N + min(n0 + kc, N - 8);
              yr_cp_async16(sk + at(kr + i * KRS, kc, LK), src);
            }
          }
#pragma unroll
          for (int i = 0; i < (BN + VRS - 1) / VRS; ++i) {
            if (BN % VRS == 0 || vr + i * VRS < BN) {
              yr_cp_async16(sv + at(vr + i * VRS, vc, LV),
                            vb + (i64)min(n0 + vr + i * VRS, N - 1) * DV + vc);
            }
          }
          continue;
        }
      }
      const T* const kt = kthread + (KT ? (i64)n0 * D : (i64)n0);
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
  if constexpr (TMA) {
    yr_cp_async_commit();
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < STAGES; ++s) yr_mbar_init(&bars[s], 1);
      yr_fence_mbar_init();
      yr_prefetch_tmap(tk);
      yr_prefetch_tmap(tv);
    }
    __syncthreads();
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < STAGES - 1; ++s) {
        if (s < STEPS) load_step(s, s);
      }
    }
  } else {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < STEPS) load_step(s, s);
      yr_cp_async_commit();
    }
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
  // WG: the warpgroup's S (64 x 64) with wgmma: Q K-major, K's tile K-major
  // ([keys][D]) or N-major ([D][keys]); waits for every earlier group too,
  // so the last step's O += P V is done before O is rescaled (docs/cuda-kernels.md
  // has what issuing S one step earlier measured).
  auto qk = [&](int t, float(&s)[MT][BN / 8][4]) {
    const T* const sk = skv + ((t % STAGES) * KG + kg) * TILE;
    if constexpr (WG) {
      float* const sf = &s[0][0][0];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) sf[i] = 0.0f;
      yr_wg_fence();
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        const unsigned long long da = yr_wg_desc(sq + ks * 16, 16, 1024);
        const unsigned long long db = yr_wg_desc(sk + (KT ? ks * 16 : ks * 16 * LK), 16, 1024);
        yr_wgmma_ss<64, T, !KT>(sf, da, db);
      }
      yr_wg_commit();
      yr_wg_wait<0>();
      yr_wg_fence_operands(sf, BN / 2);
      yr_wg_fence_operands(&oacc[0][0][0], DV / 2);
    } else {
      // S = Q K: WR x 64 per warp.
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
        }
      }
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
        for (int nb = 0; nb < BN / 8; nb += 2) {
          unsigned bf[4];
          if constexpr (KT) {
            yr_ldsm_x4(bf, sk + at((nb + (lm >> 1)) * 8 + li, ks * 16 + (lm & 1) * 8, LK));
          } else {
            yr_ldsm_x4_t(bf, sk + at(ks * 16 + li + (lm & 1) * 8, (nb + (lm >> 1)) * 8, LK));
          }
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            yr_mma16816<T>(s[mt][nb], qa[mt][ks], bf);
            yr_mma16816<T>(s[mt][nb + 1], qa[mt][ks], bf + 2);
          }
        }
      }
    }
  };
  // The online softmax of S (in s) of step t, then O += P V.
  auto softmax_pv = [&](int t, float(&s)[MT][BN / 8][4]) {
    const T* const sv = skv + ((t % STAGES) * KG + kg) * TILE + KSIZE;
    // Online softmax in base 2: m is the running row max of S * scale *
    // log2(e), so P = exp2(S * scale * log2(e) - m) is one FFMA and one
    // exp2 per element. Rows h = 0 (lane/4) and h = 1 (lane/4 + 8) of each
    // 16-row tile. (fmaxf drops a NaN of S from the max, but its exp2
    // carries it into the sums.)
    const float kLog2Scale = scale * 1.4426950408889634f;
    unsigned pk[MT][BN / 8][2];  // P, 16-bit pairs: the mma A fragments
    // Keys of this warp's tile that exist (columns from `lim` on are past
    // N): their S leaves the row's max (and min) alone and their P is 0.
    int lim = BN;
    (void)lim;
    if constexpr (TAIL) {
      lim = min(BN, N - (key0 + (t * KG + kg) * BN));
      if (lim < BN) {
        const float none = kLog2Scale > 0.0f   ? -__int_as_float(0x7f800000)
                           : kLog2Scale < 0.0f ? __int_as_float(0x7f800000)
                                               : 0.0f;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int c = j * 8 + 2 * (lane & 3);
            if (c >= lim) s[mt][j][0] = s[mt][j][2] = none;
            if (c + 1 >= lim) s[mt][j][1] = s[mt][j][3] = none;
          }
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -__int_as_float(0x7f800000);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
          mx = fmaxf(mx, fmaxf(s[mt][j][2 * h], s[mt][j][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // The max of S scaled (a negative scale turns S's max into the min).
        float mn = __int_as_float(0x7f800000);
        if (kLog2Scale < 0.0f) {
#pragma unroll
          for (int j = 0; j < BN / 8; ++j)
            mn = fminf(mn, fminf(s[mt][j][2 * h], s[mt][j][2 * h + 1]));
          mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, 1));
          mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, 2));
        }
        const float m_new = fmaxf(m_run[mt][h], (kLog2Scale < 0.0f ? mn : mx) * kLog2Scale);
        const float alpha = yr_exp2(m_run[mt][h] - m_new);
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          float e0 = yr_exp2(fmaf(s[mt][j][2 * h], kLog2Scale, -m_new));
          float e1 = yr_exp2(fmaf(s[mt][j][2 * h + 1], kLog2Scale, -m_new));
          if constexpr (TAIL) {
            const int c = j * 8 + 2 * (lane & 3);
            if (c >= lim) e0 = 0.0f;
            if (c + 1 >= lim) e1 = 0.0f;
          }
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
    if constexpr (WG) {
      // wgmma with P as the A fragments (each warp's 16 rows) and V's tile
      // N-major; not waited for here (the next S, or the end, waits).
      yr_wg_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        const unsigned pa[4] = {pk[0][2 * kk][0], pk[0][2 * kk][1], pk[0][2 * kk + 1][0],
                                pk[0][2 * kk + 1][1]};
        yr_wgmma_rs<64, T, true>(&oacc[0][0][0], pa, yr_wg_desc(sv + kk * 16 * LV, 16, 1024));
      }
      yr_wg_commit();
    } else {
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
#pragma unroll
        for (int nb = 0; nb < DV / 8; nb += 2) {
          unsigned bf[4];
          yr_ldsm_x4_t(bf, sv + at(kk * 16 + li + (lm & 1) * 8, (nb + (lm >> 1)) * 8, LV));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            const unsigned pa[4] = {pk[mt][2 * kk][0], pk[mt][2 * kk][1], pk[mt][2 * kk + 1][0],
                                    pk[mt][2 * kk + 1][1]};
            yr_mma16816<T>(oacc[mt][nb], pa, bf);
            yr_mma16816<T>(oacc[mt][nb + 1], pa, bf + 2);
          }
        }
      }
    }
  };
  // In step t, after the wait for it: step t has landed for every thread,
  // and every warp is done with step t - 1, whose stage the load of step
  // t + STAGES - 1 refills.
  auto refill = [&](int t) {
    if constexpr (WG) {
      // The tensor cores' reads of step t - 1's stage (O += P V) end before
      // it is refilled; this thread's copies of step t become visible to them.
      yr_wg_wait<0>();
      yr_wg_fence_operands(&oacc[0][0][0], DV / 2);
      yr_fence_proxy_async();
    }
    __syncthreads();
    if constexpr (TMA) {
      if (tid == 0 && t + STAGES - 1 < STEPS) load_step(t + STAGES - 1, (t + STAGES - 1) % STAGES);
    } else {
      if (t + STAGES - 1 < STEPS) load_step(t + STAGES - 1, (t + STAGES - 1) % STAGES);
      yr_cp_async_commit();
    }
  };
  for (int t = 0; t < STEPS; ++t) {
    if constexpr (TMA) {
      if (t == 0) yr_cp_async_wait<0>();  // Q
      yr_mbar_wait(&bars[t % STAGES], (t / STAGES) & 1);
    } else {
      yr_cp_async_wait<STAGES - 2>();
    }
    refill(t);
    if (!WG && t == 0) load_q();
    float s[MT][BN / 8][4];
    qk(t, s);
    softmax_pv(t, s);
  }
  if constexpr (WG) {
    yr_wg_wait<0>();
    yr_wg_fence_operands(&oacc[0][0][0], DV / 2);
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l_run[mt][h] += __shfl_xor_sync(0xffffffffu, l_run[mt][h], 1);
      l_run[mt][h] += __shfl_xor_sync(0xffffffffu, l_run[mt][h], 2);
    }
  }
  const int qd = lane & 3;
  if constexpr (MERGE_KIND == 3) {
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
  } else {
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
    if constexpr (KG > 1 || MERGE_KIND == 1) {
      yr_cp_async_wait<0>();
      __syncthreads();
    }
    if constexpr (KG > 1) {
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
      if constexpr (MERGE_KIND == 1) {
        __syncthreads();  // the cluster's partial rows reuse the space
      }
    }
    if constexpr (MERGE_KIND == 1) {
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
    } else if constexpr (MERGE_KIND == 4) {
      // In-kernel merge: the grid is co-resident (a cooperative launch), so
      // every split leaves its partial rows in the workspace [SPLITS][B][M][LW],
      // arrives at its query tile's counter (past the partials; it only grows,
      // SPLITS a launch) and waits for the tile's other splits; then block
      // `split` merges rows [split * RPB, (split + 1) * RPB). No second kernel,
      // no cluster size limit.
      {
        constexpr int RPB = BM / SPLITS, LW = DV + 4;
        constexpr i64 SLOT = (i64)B * M * LW;
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
    } else {
      if (kg != 0) return;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int gm = m0 + rw * WR + mt * 16 + (lane >> 2) + 8 * h;
          if (gm >= M) continue;
          if constexpr (MERGE_KIND == 0) {
            const float inv = 1.0f / l_run[mt][h];
            OT* const out = o + ((i64)b * M + gm) * DV;
#pragma unroll
            for (int j = 0; j < DV / 8; ++j) {
              yr_st(out, j * 8 + 2 * qd, oacc[mt][j][2 * h] * inv);
              yr_st(out, j * 8 + 2 * qd + 1, oacc[mt][j][2 * h + 1] * inv);
            }
          } else {
            write_partial_row(ws + (((i64)split * B + b) * M + gm) * (DV + 2), mt, h);
          }
        }
      }
    }
  }
}

// Merges the SPLITS key splits that yr_attention_decode (MERGE_KIND 2) left
// in `ws`: one thread per output element, 256 threads a block.
template <typename OT, int B, int M, int DV, int S>
static __device__ __forceinline__ void yr_attention_merge_splits(const float* __restrict__ ws,
                                                                 OT* __restrict__ o) {
  const i64 x = (i64)blockIdx.x * 256 + threadIdx.x;
  if (x >= (i64)B * M * DV) return;
  const i64 rowi = x / DV;
  const int c = (int)(x % DV);
  constexpr i64 stride = (i64)B * M * (DV + 2);
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

#endif  // YR_ATTENTION_DECODE
