// Flash attention for many query rows a head (prefill), on Hopper's
// warpgroup MMA (sm_90a):
//   O = softmax(scale * Q K^T) V   over [batch..., rows, D] tensors
// Block: WG warpgroups of 64 query rows each (WG * 64 rows of one batch
// entry), looping over all keys in tiles of BN. Q (the block's rows), and
// K and V tiles in a STAGES-deep cp.async ring, live in shared memory in
// panels of 64 columns, 128-byte swizzled (yr_swz<64>), the layout wgmma's
// descriptors read: S = Q K^T with A and B K-major, O += P V with P from
// the S registers (converted to 16 bits in place) and V MN-major. The
// softmax is online in base 2 (running row max m and sum l; O rescaled
// when m grows); S and P never leave the registers. OVERLAP (three or more
// stages) issues S of each step behind the previous step's O += P V, so the
// tensor cores go from one to the other without waiting for the block's
// barrier, with one barrier a step.
//
// Query rows past `rows` read the last row and store nothing; keys past
// `keys` in the last tile read the last key and are masked out of the
// softmax (any key count).
// REQUIRES: kernel_prelude.cuh, wgmma_helpers.cuh and wgmma_ops.cuh before
// this file; D and DV multiples of 64, at most 128 each, or at most 256
// with BN 64 and WG at most 2 (the registers of a 64 x 256 O); BN 64 or 128; a
// launch of WG * 128 threads with yr_attn_prefill_smem_bytes<...>() bytes of
// dynamic shared memory, grid (ceil(rows / (WG * 64)), batch).
#ifndef YR_ATTENTION_PREFILL
#define YR_ATTENTION_PREFILL

template <typename T, int D, int DV, int BN, int WG, int STAGES>
__host__ __device__ constexpr int yr_attn_prefill_smem_bytes() {
  return (WG * 64 * D + STAGES * BN * (D + DV)) * 2;
}

// Copies a tile of `nrows` rows (row r from src + min(r, last) * ld) of
// COLS 16-bit columns into panels of 64 columns, swizzled; every thread of
// the block takes every NT-th 16-byte chunk.
template <typename T, int COLS, int NT>
static __device__ __forceinline__ void yr_attn_load_tile(T* dst, const T* src, int nrows, int last,
                                                         i64 ld) {
  constexpr int CHUNKS_PER_ROW = COLS / 8;
  const int chunks = nrows * CHUNKS_PER_ROW;
  for (int i = threadIdx.x; i < chunks; i += NT) {
    const int r = i / CHUNKS_PER_ROW;
    const int c = (i % CHUNKS_PER_ROW) * 8;
    const int panel = c / 64;
    const int rr = r < last ? r : last;
    yr_cp_async16(dst + panel * nrows * 64 + yr_swz<64>(r, c % 64), src + rr * ld + c);
  }
}

// S (64 x BN, this warpgroup's rows) = Q K^T, issued and committed (not
// waited for): Q's rows and K's tile K-major, in panels of 64 columns.
template <typename T, int D, int BN, int BM>
static __device__ __forceinline__ void yr_attn_qk(float* s, const T* sq_wg, const T* sk) {
  yr_wg_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const int panel = ks / 4;
    const unsigned long long da = yr_wg_desc(sq_wg + panel * BM * 64 + (ks % 4) * 16, 16, 1024);
    const unsigned long long db = yr_wg_desc(sk + panel * BN * 64 + (ks % 4) * 16, 16, 1024);
    yr_wgmma_ss<BN, T, false>(s, da, db, ks > 0);
  }
  yr_wg_commit();
}

template <typename T, typename OutT, int D, int DV, int BN, int WG, int STAGES, bool OVERLAP>
static __device__ __forceinline__ void yr_attention_prefill(const T* __restrict__ q,
                                                            const T* __restrict__ k,
                                                            const T* __restrict__ v,
                                                            OutT* __restrict__ o, int rows,
                                                            int keys, float scale) {
  static_assert(D % 64 == 0 && DV % 64 == 0 && D <= 256 && DV <= 256, "D, DV: 64, 128 or 256");
  static_assert((D <= 128 && DV <= 128) || (BN == 64 && WG <= 2),
                "head dims over 128: BN 64 and at most two warpgroups");
  static_assert(BN == 64 || BN == 128, "BN: 64 or 128");
  static_assert(STAGES >= 2 && (!OVERLAP || STAGES >= 3),
                "at least two stages; three with the overlap");
  constexpr int NT = WG * 128;
  constexpr int BM = WG * 64;
  extern __shared__ __align__(1024) unsigned char yr_smem_raw[];
  T* const sq = reinterpret_cast<T*>(yr_smem_raw);
  T* const skv = sq + BM * D;  // stage s: K at s * BN * (D + DV), then V
  const int wg = threadIdx.x / 128;
  const int warp = (threadIdx.x / 32) % 4;
  const int lane = threadIdx.x % 32;
  const int row0 = blockIdx.x * BM;
  const i64 batch = blockIdx.y;
  const T* const qb = q + (batch * rows + row0) * D;
  const T* const kb = k + batch * keys * D;
  const T* const vb = v + batch * keys * DV;
  const int q_last = rows - 1 - row0;  // rows past it read it again
  const int steps = (keys + BN - 1) / BN;
  const int tail = keys - (steps - 1) * BN;  // keys of the last step, 1 to BN

  auto load_kv = [&](int t) {
    T* const sk = skv + (t % STAGES) * BN * (D + DV);
    const int last = (t == steps - 1 ? tail : BN) - 1;  // rows past it read it again
    yr_attn_load_tile<T, D, NT>(sk, kb + static_cast<i64>(t) * BN * D, BN, last, D);
    yr_attn_load_tile<T, DV, NT>(sk + BN * D, vb + static_cast<i64>(t) * BN * DV, BN, last, DV);
  };
  // Steps in flight: with the overlap a step's stage is refilled two steps
  // later (by then every warp has waited for its readers), else the step
  // after (once O += P V has been waited for).
  constexpr int AHEAD = OVERLAP ? STAGES - 2 : STAGES - 1;
  yr_attn_load_tile<T, D, NT>(sq, qb, BM, q_last, D);
  load_kv(0);
  yr_cp_async_commit();
#pragma unroll
  for (int s = 1; s < AHEAD; ++s) {
    if (s < steps) load_kv(s);
    yr_cp_async_commit();
  }

  // Rows warp * 16 + lane / 4 (h = 0) and + 8 (h = 1) of this warpgroup's 64.
  float oacc[DV / 2];
#pragma unroll
  for (int i = 0; i < DV / 2; ++i) oacc[i] = 0.0f;
  float m_run[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)};
  float l_run[2] = {0.0f, 0.0f};
  const float log2_scale = scale * 1.4426950408889634f;
  const T* const sq_wg = sq + wg * 64 * 64;  // this warpgroup's rows in each panel

  for (int t = 0; t < steps; ++t) {
    const T* const sk = skv + (t % STAGES) * BN * (D + DV);
    const T* const sv = sk + BN * D;
    float s[BN / 2];
    yr_cp_async_wait<AHEAD - 1>();
    yr_fence_proxy_async();  // this thread's copies, visible to the tensor cores
    if constexpr (!OVERLAP) {
      // O += P V of step t - 1 ends before its stage is refilled.
      yr_wg_wait<0>();
      yr_wg_fence_operands(oacc, DV / 2);
    }
    // With the overlap the stage refilled is step t - 2's, whose readers
    // ended before each warp's wait in step t - 1.
    __syncthreads();
    if (t + AHEAD < steps) load_kv(t + AHEAD);
    yr_cp_async_commit();
    // With the overlap, S is issued behind O += P V of step t - 1.
    yr_attn_qk<T, D, BN, BM>(s, sq_wg, sk);
    yr_wg_wait<0>();
    yr_wg_fence_operands(s, BN / 2);
    yr_wg_fence_operands(oacc, DV / 2);

    // The last step's keys past `keys`: out of the max (or of the min)
    // here, and their exponentials zero below. This lane's columns are
    // 8 j + 2 (lane % 4) + e at s[4 j + 2 h + e].
    const bool masked = tail < BN && t == steps - 1;
    if (masked) yr_wg_mask_tail<BN>(s, tail, log2_scale);
    // Online softmax of this warp's two rows per lane quad.
    unsigned p[BN / 4];  // P in 16-bit pairs, the A fragments of O += P V
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -__int_as_float(0x7f800000);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
        mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      float mn = __int_as_float(0x7f800000);
      if (log2_scale < 0.0f) {  // a negative scale makes S's min the max
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
          mn = fminf(mn, fminf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
        mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, 1));
        mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, 2));
      }
      const float m_new = fmaxf(m_run[h], (log2_scale < 0.0f ? mn : mx) * log2_scale);
      const float alpha = yr_exp2(m_run[h] - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int c = 8 * j + 2 * (lane % 4);
        float e0 = yr_exp2(fmaf(s[4 * j + 2 * h], log2_scale, -m_new));
        float e1 = yr_exp2(fmaf(s[4 * j + 2 * h + 1], log2_scale, -m_new));
        if (masked) {
          e0 = c < tail ? e0 : 0.0f;
          e1 = c + 1 < tail ? e1 : 0.0f;
        }
        sum += e0 + e1;
        p[2 * j + h] = yr_pack2<T>(e0, e1);
      }
      l_run[h] = l_run[h] * alpha + sum;  // this lane's columns; the quad sums at the end
      m_run[h] = m_new;
#pragma unroll
      for (int j = 0; j < DV / 8; ++j) {
        oacc[4 * j + 2 * h] *= alpha;
        oacc[4 * j + 2 * h + 1] *= alpha;
      }
    }
    // O += P V: k-step kk covers keys 16 kk .. 16 kk + 15, the S tiles
    // 2 kk and 2 kk + 1; V MN-major, 64-column panels BN rows apart.
    yr_wg_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const unsigned pa[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
      yr_wgmma_rs<DV, T, true>(oacc, pa, yr_wg_desc(sv + kk * 16 * 64, BN * 128, 1024), true);
    }
    yr_wg_commit();
  }
  yr_wg_wait<0>();
  yr_wg_fence_operands(oacc, DV / 2);

  // Normalize and store this thread's two rows.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = l_run[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = 1.0f / l;
    const int r = row0 + wg * 64 + warp * 16 + lane / 4 + 8 * h;
    if (r >= rows) continue;
    OutT* const orow = o + (batch * rows + r) * DV;
#pragma unroll
    for (int j = 0; j < DV / 8; ++j) {
      const int c = 8 * j + 2 * (lane % 4);
      yr_st(orow, c, oacc[4 * j + 2 * h] * inv);
      yr_st(orow, c + 1, oacc[4 * j + 2 * h + 1] * inv);
    }
  }
}

#endif
