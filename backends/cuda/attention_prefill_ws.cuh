// Flash attention prefill on Hopper (sm_90a), warp-specialized:
//   O = softmax(scale * Q K^T) V   over [batch..., rows, D] tensors
// with the tensor layouts and semantics of yr_attention_prefill
// (attention_prefill.cuh), organized after FlashAttention-3's ideas:
// - Three warpgroups a block (384 threads): a producer warpgroup that only
//   copies (cp.async, 128-byte swizzled 64-column panels, as
//   yr_attention_prefill) each tile's 128 Q rows and the K and V tiles into
//   a STAGES-deep ring, and two consumer warpgroups of 64 query rows each.
//   The buffers run on mbarriers instead of block barriers: each has a
//   "full" barrier, which the producer's copies arrive on as they land
//   (cp.async.mbarrier.arrive.noinc), and an "empty" barrier, which each
//   consumer warp arrives on once it is done with the buffer. setmaxnreg
//   moves registers from the producer (24) to the consumers (240). With
//   TMA, one producer thread requests the same panels from 3-D tensor maps
//   instead, and the copy engine completes the "full" barriers.
// - Each consumer holds its Q rows in registers (wgmma's A fragments) where
//   D <= 128 and BN <= 128, so that S = Q K^T reads only K from shared
//   memory (for D = 256 or BN = 176 Q stays in shared memory: its fragments
//   would not fit the registers beside a 64 x 256 O or a 64 x 176 S), and
//   overlaps its softmax with
//   its own tensor-core work: step t issues S_t = Q K_t^T and
//   O += P_{t-1} V_{t-1} back to back, waits only for S_t, and computes P_t
//   (online softmax in base 2) while O's product runs. O is rescaled only
//   when a row's max grows by more than 2^8 (see yr_attn_ws_softmax).
// - The two consumers take turns issuing their products (two named
//   barriers, ping-pong), so that one's softmax runs under the other's
//   products and the tensor cores stay busy.
// - yr_attention_prefill_ws_persistent runs one block a multiprocessor over
//   many tiles: the producer loads the next tile while the consumers finish
//   this one, and a consumer issues the next tile's first S with this
//   tile's last O += P V and stores O under the other consumer's products.
// Query rows past `rows` read the last row and store nothing; keys past
// `keys` in the last tile read the last key and are masked out of the
// softmax (any key count; none: rows of NaN, like yr_attention_prefill).
// REQUIRES: kernel_prelude.cuh, wgmma_helpers.cuh and wgmma_ops.cuh before
// this file; D and DV 64, 128 or 256 (over 128: BN 64 or 80, at most 2
// stages); BN 64, 80, 128 or 176 (FlashAttention-3's key tiles are 176 for
// head dims up to 128 and 80 for 256: fewer steps for the same work; 176:
// D and DV at most 128, 2 stages); a launch of
// yr_attn_prefill_ws_threads() threads with __launch_bounds__(384, 1)
// (setmaxnreg needs the register cap) and
// yr_attn_prefill_ws_smem_bytes<...>() bytes of dynamic shared memory
// (at most 227 KB: BN 128 and D 128 allow 3 stages); grid (ceil(rows / 128),
// batch) for yr_attention_prefill_ws, (min(multiprocessors, batch *
// ceil(rows / 128))) for yr_attention_prefill_ws_persistent.
#ifndef YR_ATTENTION_PREFILL_WS
#define YR_ATTENTION_PREFILL_WS

template <typename T, int D, int DV, int BN, int STAGES>
__host__ __device__ constexpr int yr_attn_prefill_ws_smem_bytes() {
  // Q (128 rows), the ring, then the mbarriers: 4 a stage and 2 for Q.
  return (128 * D + STAGES * BN * (D + DV)) * 2 + (STAGES * 4 + 2) * 8;
}
__host__ __device__ constexpr int yr_attn_prefill_ws_threads() { return 384; }

// The producer warpgroup's copy of a BN x COLS tile (rows COLS apart in
// global memory) into 64-column swizzled panels: thread `tid` takes one
// 16-byte column chunk of rows STEP = 128 / (COLS / 8) apart. A row's
// swizzle is its index mod 8, so rows 8 apart share it: where STEP is under
// 8 (COLS 256: STEP 4) the thread's rows split into 8 / STEP interleaved
// passes of rows 8 apart, each with its own swizzle. Within a pass both
// addresses step by constants, written as immediate offsets from one base
// each (else the compiler keeps an address register a copy, past the
// producer's few registers).
template <int I, int DST_STEP, int SRC_STEP>
static __device__ __forceinline__ void yr_attn_ws_cp(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0+%2], [%1+%3], 16;\n" ::"r"(dst), "l"(src),
               "n"(I * DST_STEP), "n"(I * SRC_STEP)
               : "memory");
}
template <int... I>
struct yr_attn_ws_seq {};
template <int N, int... I>
struct yr_attn_ws_make_seq : yr_attn_ws_make_seq<N - 1, N - 1, I...> {};
template <int... I>
struct yr_attn_ws_make_seq<0, I...> {
  using type = yr_attn_ws_seq<I...>;
};
template <int DST_STEP, int SRC_STEP, int... I>
static __device__ __forceinline__ void yr_attn_ws_cps(unsigned dst, const void* src,
                                                      yr_attn_ws_seq<I...>) {
  (yr_attn_ws_cp<I, DST_STEP, SRC_STEP>(dst, src), ...);
}
template <typename T, int COLS, int BN>
static __device__ __forceinline__ void yr_attn_ws_load(T* dst, const T* src, int tid) {
  constexpr int CPR = COLS / 8;  // chunks a row
  constexpr int STEP = 128 / CPR;
  constexpr int PASSES = STEP < 8 ? 8 / STEP : 1;
  constexpr int PSTEP = STEP * PASSES;  // rows apart within a pass: a multiple of 8
  static_assert(PSTEP % 8 == 0 && BN % PSTEP == 0, "rows of a pass share their swizzle");
  const int cc = tid % CPR;
#pragma unroll
  for (int pass = 0; pass < PASSES; ++pass) {
    const int r0 = tid / CPR + pass * STEP;
    const unsigned d =
        yr_smem_addr(dst + (cc / 8) * BN * 64 + r0 * 64 + (((cc % 8) ^ (r0 % 8)) << 3));
    yr_attn_ws_cps<PSTEP * 64 * 2, PSTEP * COLS * 2>(
        d, src + r0 * COLS + cc * 8, typename yr_attn_ws_make_seq<BN / PSTEP>::type{});
  }
}

// The last tile's copy where the keys end inside it: rows past `last` read
// row `last` again. One 16-byte chunk column a thread as yr_attn_ws_load,
// rows in a loop (the producer's few registers).
template <typename T, int COLS, int BN>
static __device__ __forceinline__ void yr_attn_ws_load_last(T* dst, const T* src, int last,
                                                            int tid) {
  constexpr int CPR = COLS / 8;
  const int cc = tid % CPR;
  T* const d = dst + (cc / 8) * BN * 64;
  const T* const g = src + cc * 8;
#pragma unroll 1
  for (int r = tid / CPR; r < BN; r += 128 / CPR) {
    yr_cp_async16(d + yr_swz<64>(r, (cc % 8) * 8), g + static_cast<i64>(min(r, last)) * COLS);
  }
}

// Online softmax of one step's S (64 x BN, the wgmma accumulator layout) in
// base 2, in place: S becomes exp2(S * log2_scale - m), with the running
// max m and (this lane's part of the) sum l of each thread's two rows, and
// the factor alpha by which O must be scaled before this step's P V is
// added. LAZY: m moves only when the max grows by more than 8 (P then stays
// under 2^8, exact in 16 bits relative to its size, and l and O share the
// stale m), so that alpha is mostly 1 and O's rescale can be skipped.
// Columns from `tail` on (the last step's keys past the end) are left out:
// out of the max (yr_wg_mask_tail) and exponentials of 0 whatever the
// scale. This lane's columns are 8 j + 2 (lane % 4) + e at s[4 j + 2 h + e].
template <int BN, bool LAZY>
static __device__ __forceinline__ void yr_attn_ws_softmax(float* s, float* m_run, float* l_run,
                                                          float* alpha, float log2_scale,
                                                          int tail = BN) {
  const int lane = threadIdx.x % 32;
  if (tail < BN) yr_wg_mask_tail<BN>(s, tail, log2_scale);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -__int_as_float(0x7f800000);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
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
    const float m_max = fmaxf(m_run[h], (log2_scale < 0.0f ? mn : mx) * log2_scale);
    float m_new = m_max;
    if constexpr (LAZY) {
      // -inf + 8 is -inf: the first step always moves m.
      m_new = m_max > m_run[h] + 8.0f ? m_max : m_run[h];
      alpha[h] = m_new == m_run[h] ? 1.0f : yr_exp2(m_run[h] - m_new);
    } else {
      alpha[h] = yr_exp2(m_run[h] - m_new);
    }
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      float e0 = yr_exp2(fmaf(s[4 * j + 2 * h], log2_scale, -m_new));
      float e1 = yr_exp2(fmaf(s[4 * j + 2 * h + 1], log2_scale, -m_new));
      if (tail < BN) {
        const int c = 8 * j + 2 * (lane % 4);
        e0 = c < tail ? e0 : 0.0f;
        e1 = c + 1 < tail ? e1 : 0.0f;
      }
      sum += e0 + e1;
      s[4 * j + 2 * h] = e0;
      s[4 * j + 2 * h + 1] = e1;
    }
    l_run[h] = l_run[h] * alpha[h] + sum;
    m_run[h] = m_new;
  }
}

// P (16-bit pairs, the A fragments of O += P V) from the softmax's S.
template <typename T, int BN>
static __device__ __forceinline__ void yr_attn_ws_pack(unsigned* p, const float* s) {
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    p[2 * j] = yr_pack2<T>(s[4 * j], s[4 * j + 1]);
    p[2 * j + 1] = yr_pack2<T>(s[4 * j + 2], s[4 * j + 3]);
  }
}

// Descriptor arithmetic: the start address sits in the low 14 bits (in
// 16-byte units) and shared addresses stay under 256 KB, so a descriptor of
// p + off is the descriptor of p plus off / 16.
template <typename T>
static __device__ __forceinline__ unsigned long long yr_attn_ws_desc_add(unsigned long long d,
                                                                         int elems) {
  return d + static_cast<unsigned long long>(elems * static_cast<int>(sizeof(T)) / 16);
}

// S (64 x BN) = Q K^T, issued and committed: Q from registers (qa, the
// D / 16 A fragments), K's tile K-major (dk: the descriptor of its first
// panel).
template <typename T, int D, int BN>
static __device__ __forceinline__ void yr_attn_ws_qk(float* s, const unsigned (*qa)[4],
                                                     unsigned long long dk) {
  yr_wg_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    yr_wgmma_rs<BN, T, false>(
        s, qa[ks], yr_attn_ws_desc_add<T>(dk, (ks / 4) * BN * 64 + (ks % 4) * 16), ks > 0);
  }
  yr_wg_commit();
}

// S (64 x BN) = Q K^T with Q from shared memory (sq_c: this consumer's 64
// rows of the first of Q's 64-column panels, panels BM rows apart), for
// head dims whose Q fragments would not fit the registers. Issued and
// committed.
template <typename T, int D, int BN, int BM>
static __device__ __forceinline__ void yr_attn_ws_qk_smem(float* s, const T* sq_c,
                                                          unsigned long long dk) {
  yr_wg_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const unsigned long long da = yr_wg_desc(sq_c + (ks / 4) * BM * 64 + (ks % 4) * 16, 16, 1024);
    yr_wgmma_ss<BN, T, false>(s, da, yr_attn_ws_desc_add<T>(dk, (ks / 4) * BN * 64 + (ks % 4) * 16),
                              ks > 0);
  }
  yr_wg_commit();
}

// O += P V: k-step kk covers keys 16 kk .. 16 kk + 15; V MN-major (dv: its
// descriptor, 64-column panels BN rows apart). Issued and committed.
template <typename T, int DV, int BN>
static __device__ __forceinline__ void yr_attn_ws_pv(float* o, const unsigned* p,
                                                     unsigned long long dv) {
  yr_wg_fence();
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    const unsigned pa[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    yr_wgmma_rs<DV, T, true>(o, pa, yr_attn_ws_desc_add<T>(dv, kk * 16 * 64), true);
  }
  yr_wg_commit();
}

template <int DV, bool LAZY>
static __device__ __forceinline__ void yr_attn_ws_scale(float* o, const float* alpha) {
  if (LAZY && !__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) return;
#pragma unroll
  for (int j = 0; j < DV / 8; ++j) {
    o[4 * j] *= alpha[0];
    o[4 * j + 1] *= alpha[0];
    o[4 * j + 2] *= alpha[1];
    o[4 * j + 3] *= alpha[1];
  }
}

static __device__ __forceinline__ void yr_attn_ws_st2(float* p, float a, float b) {
  *reinterpret_cast<float2*>(p) = make_float2(a, b);
}
template <typename T>
static __device__ __forceinline__ void yr_attn_ws_st2(T* p, float a, float b) {
  *reinterpret_cast<unsigned*>(p) = yr_pack2<T>(a, b);
}

// The kernel body over tiles of 128 query rows of one batch entry: tile
// `first`, first + stride, ... below batch * ceil(rows / 128), entry-major.
// Each consumer keeps its 64 Q rows in registers (A fragments, loaded
// once a tile, after which Q's buffer is free for the producer to load the
// next tile's), so that S = Q K^T reads only K from shared memory. The
// consumers' loop runs over all steps of all their tiles: the first S of a
// tile is issued with the last O += P V of the tile before, and that
// tile's O is stored while the other consumer's products run.
// PINGPONG: the consumers take turns issuing their products. LAZY: see
// yr_attn_ws_softmax. TMA: one producer thread requests Q, K and V as
// 64-column boxes of the 3-D tensor maps tq ({D, rows, batch}, box {64,
// 128, 1}), tk and tv ({D, keys, batch}, box {64, BN, 1}), 128-byte
// swizzled, instead of the warpgroup's cp.async copies: rows past a batch
// entry's end read zeros (masked out of the softmax, or never stored). All
// counters (ring stage, its round's parity) run on across tiles.
template <typename T, typename OutT, int D, int DV, int BN, int STAGES, bool PINGPONG, bool LAZY,
          bool TMA = false>
static __device__ __forceinline__ void yr_attention_prefill_ws_tiles(
    const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, OutT* __restrict__ o,
    int rows, int keys, float scale, int first, int stride, int tiles,
    const CUtensorMap* tq = nullptr, const CUtensorMap* tk = nullptr,
    const CUtensorMap* tv = nullptr) {
  static_assert(D % 64 == 0 && DV % 64 == 0 && D <= 256 && DV <= 256, "D, DV: 64, 128 or 256");
  static_assert(BN == 64 || BN == 80 || BN == 128 || BN == 176, "BN: 64, 80, 128 or 176");
  static_assert((D <= 128 && DV <= 128) || BN == 64 || BN == 80,
                "head dims over 128: BN 64 or 80 (a 64 x 256 O is 128 registers a thread)");
  // Q's fragments in registers (D / 4 a thread) where they fit beside O and
  // S: not beside a 64 x 256 O, nor beside the 88 registers of a 64 x 176 S.
  constexpr bool QREG = D <= 128 && BN <= 128;
  static_assert(STAGES >= 2, "at least two stages");
  static_assert(yr_attn_prefill_ws_smem_bytes<T, D, DV, BN, STAGES>() <= 227 * 1024,
                "shared memory: at most 227 KB");
  constexpr int BM = 128;
  extern __shared__ __align__(1024) unsigned char yr_smem_raw[];
  T* const sq = reinterpret_cast<T*>(yr_smem_raw);
  T* const skv = sq + BM * D;  // stage s: K at s * BN * (D + DV), then V
  unsigned long long* const full_k =
      reinterpret_cast<unsigned long long*>(skv + STAGES * BN * (D + DV));
  unsigned long long* const full_v = full_k + STAGES;
  unsigned long long* const empty_k = full_v + STAGES;
  unsigned long long* const empty_v = empty_k + STAGES;
  unsigned long long* const full_q = empty_v + STAGES;
  unsigned long long* const empty_q = full_q + 1;
  const int wg = threadIdx.x / 128;
  const int tid = threadIdx.x % 128;
  const int steps = (keys + BN - 1) / BN;
  const int tail = keys - (steps - 1) * BN;  // keys of the last step, 1 to BN
  const int row_blocks = (rows + BM - 1) / BM;

  // "full": each producer thread's copies, or the TMA thread's one arrival
  // with the bytes it expects.
  constexpr unsigned FULL_COUNT = TMA ? 1 : 128;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      yr_mbar_init(&full_k[s], FULL_COUNT);
      yr_mbar_init(&full_v[s], FULL_COUNT);
      yr_mbar_init(&empty_k[s], 8);  // each consumer warp
      yr_mbar_init(&empty_v[s], 8);
    }
    yr_mbar_init(full_q, FULL_COUNT);
    yr_mbar_init(empty_q, 8);
    if constexpr (TMA) yr_fence_mbar_init();  // visible to the copy engine
  }
  __syncthreads();

  if (steps == 0) {  // no keys: 0 / 0, as yr_attention_prefill gives
    if (wg == 0) return;
    const int c = wg - 1;
    const float nan = __int_as_float(0x7fc00000);
    for (int tile = first; tile < tiles; tile += stride) {
      const i64 batch = tile / row_blocks;
      const int row0 = (tile % row_blocks) * BM;
      for (int i = tid; i < 64 * DV; i += 128) {
        const int r = row0 + 64 * c + i / DV;
        if (r < rows) yr_st(o + (batch * rows + r) * DV, i % DV, nan);
      }
    }
    return;
  }
  if (wg == 0) {
    // Producer: each tile's Q, then K and V of each step; a buffer is
    // refilled once both consumers are done with what it holds. A fresh
    // mbarrier counts as having completed the phase before its first, so
    // the first round's waits on "empty" pass at once.
    yr_setmaxnreg_dec<24>();
    int st = 0;
    unsigned round = 0;  // parity of the ring's round
    unsigned qround = 0;
    if constexpr (TMA) {
      if (tid != 0) return;
      yr_prefetch_tmap(tq);
      yr_prefetch_tmap(tk);
      yr_prefetch_tmap(tv);
      for (int tile = first; tile < tiles; tile += stride) {
        const int batch = tile / row_blocks;
        const int row0 = (tile % row_blocks) * BM;
        yr_mbar_wait(empty_q, qround ^ 1);
        yr_mbar_arrive_expect_tx(full_q, BM * D * sizeof(T));
#pragma unroll
        for (int p = 0; p < D / 64; ++p)
          yr_tma_load_3d(sq + p * BM * 64, tq, p * 64, row0, batch, full_q);
        qround ^= 1;
        for (int t = 0; t < steps; ++t) {
          T* const sk = skv + st * BN * (D + DV);
          yr_mbar_wait(&empty_k[st], round ^ 1);
          yr_mbar_arrive_expect_tx(&full_k[st], BN * D * sizeof(T));
#pragma unroll
          for (int p = 0; p < D / 64; ++p) {
            yr_tma_load_3d(sk + p * BN * 64, tk, p * 64, t * BN, batch, &full_k[st]);
          }
          yr_mbar_wait(&empty_v[st], round ^ 1);
          yr_mbar_arrive_expect_tx(&full_v[st], BN * DV * sizeof(T));
#pragma unroll
          for (int p = 0; p < DV / 64; ++p) {
            yr_tma_load_3d(sk + BN * D + p * BN * 64, tv, p * 64, t * BN, batch, &full_v[st]);
          }
          if (++st == STAGES) {
            st = 0;
            round ^= 1;
          }
        }
      }
    } else {
      for (int tile = first; tile < tiles; tile += stride) {
        const i64 batch = tile / row_blocks;
        const int row0 = (tile % row_blocks) * BM;
        yr_mbar_wait(empty_q, qround ^ 1);
        {
          constexpr int CPR = D / 8;
          const int cc = tid % CPR;
          T* const dq = sq + (cc / 8) * BM * 64;
          const T* const gq = q + batch * rows * D + cc * 8;
#pragma unroll 1
          for (int r = tid / CPR; r < BM; r += 128 / CPR) {
            const int rr = min(row0 + r, rows - 1);
            yr_cp_async16(dq + yr_swz<64>(r, (cc % 8) * 8), gq + static_cast<i64>(rr) * D);
          }
          yr_cp_async_mbar_arrive(full_q);
        }
        qround ^= 1;
        const T* const kb = k + batch * keys * D;
        const T* const vb = v + batch * keys * DV;
        for (int t = 0; t < steps; ++t) {
          T* const sk = skv + st * BN * (D + DV);
          const bool part = t == steps - 1 && tail < BN;
          yr_mbar_wait(&empty_k[st], round ^ 1);
          if (part) {
            yr_attn_ws_load_last<T, D, BN>(sk, kb + static_cast<i64>(t) * BN * D, tail - 1, tid);
          } else {
            yr_attn_ws_load<T, D, BN>(sk, kb + static_cast<i64>(t) * BN * D, tid);
          }
          yr_cp_async_mbar_arrive(&full_k[st]);
          yr_mbar_wait(&empty_v[st], round ^ 1);
          if (part) {
            yr_attn_ws_load_last<T, DV, BN>(sk + BN * D, vb + static_cast<i64>(t) * BN * DV,
                                            tail - 1, tid);
          } else {
            yr_attn_ws_load<T, DV, BN>(sk + BN * D, vb + static_cast<i64>(t) * BN * DV, tid);
          }
          yr_cp_async_mbar_arrive(&full_v[st]);
          if (++st == STAGES) {
            st = 0;
            round ^= 1;
          }
        }
      }
      yr_cp_async_wait<0>();
    }
  } else {
    // Consumers: c takes rows row0 + 64 c .. + 63 of each tile.
    yr_setmaxnreg_inc<240>();
    const int c = wg - 1;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const float log2_scale = scale * 1.4426950408889634f;
    // Ping-pong: consumer c issues its products after barrier 1 + c, then
    // lets the other go (barrier 2 - c). Consumer 1 lets consumer 0 go
    // first and skips its very last pass: each barrier sees as many
    // arrivals as waits.
    auto turn_wait = [&] {
      if constexpr (PINGPONG) yr_named_sync(1 + c, 256);
    };
    auto turn_pass = [&] {
      if constexpr (PINGPONG) yr_named_arrive(2 - c, 256);
    };
    if (c == 1) turn_pass();
    auto release = [&](unsigned long long* bar) {
      if (lane == 0) yr_mbar_arrive(bar);
    };
    // Descriptors of stage 0's K and V.
    const unsigned long long dk0 = yr_wg_desc(skv, 16, 1024);
    const unsigned long long dv0 = yr_wg_desc(skv + BN * D, BN * 128, 1024);
    auto desc_k = [&](int stage) { return yr_attn_ws_desc_add<T>(dk0, stage * BN * (D + DV)); };
    auto desc_v = [&](int stage) { return yr_attn_ws_desc_add<T>(dv0, stage * BN * (D + DV)); };
    float oacc[DV / 2];
    // Normalizes O by the row sums l and stores this thread's two rows.
    auto store = [&](const float* l_sum, i64 batch, int row0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float l = l_sum[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float inv = 1.0f / l;
        const int r = row0 + 64 * c + warp * 16 + lane / 4 + 8 * h;
        if (r >= rows) continue;
        OutT* const orow = o + (batch * rows + r) * DV;
#pragma unroll
        for (int j = 0; j < DV / 8; ++j) {
          yr_attn_ws_st2(orow + 8 * j + 2 * (lane % 4), oacc[4 * j + 2 * h] * inv,
                         oacc[4 * j + 2 * h + 1] * inv);
        }
      }
    };
    unsigned qa[QREG ? D / 16 : 1][4];
    const T* const sq_c = sq + c * 64 * 64;  // this consumer's rows of Q's first panel
    float m_run[2], l_run[2], alpha[2];
    unsigned p[BN / 4];
    int st = 0;
    unsigned round = 0;
    unsigned qround = 0;
    // Q fragments of warp w's rows 16 w .. 16 w + 15: lanes 0-7 address
    // rows 0-7 of the k-step's columns 0-7, lanes 8-15 rows 8-15, lanes
    // 16-31 the same for columns 8-15 (the m16n8k16 A fragment order).
    // Without QREG the products read Q from shared memory, which is
    // released once the tile's last S is done (after_s).
    auto load_q = [&] {
      yr_mbar_wait(full_q, qround);
      qround ^= 1;
      if constexpr (QREG) {
        const int r = 64 * c + 16 * warp + (lane % 8) + 8 * ((lane / 8) % 2);
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
          yr_ldsm_x4(qa[ks],
                     sq + (ks / 4) * BM * 64 + yr_swz<64>(r, (ks % 4) * 16 + 8 * (lane / 16)));
        }
        release(empty_q);
      }
    };
    auto qk = [&](float* s, unsigned long long dk) {
      if constexpr (QREG) {
        yr_attn_ws_qk<T, D, BN>(s, qa, dk);
      } else {
        yr_attn_ws_qk_smem<T, D, BN, BM>(s, sq_c, dk);
      }
    };
    // After S of step t is done: without QREG, Q's buffer is free after
    // the tile's last S.
    auto after_s = [&](int t) {
      if constexpr (!QREG) {
        if (t == steps - 1) release(empty_q);
      }
    };
    if (first >= tiles) return;
    // The first step: S alone.
    i64 batch_o = first / row_blocks;  // the tile that O accumulates
    int row0_o = (first % row_blocks) * BM;
    load_q();
    {
      float s[BN / 2];
      yr_mbar_wait(&full_k[st], round);
      if constexpr (!TMA) yr_fence_proxy_async();  // cp.async wrote it
      turn_wait();
      qk(s, desc_k(st));
      turn_pass();
      yr_wg_wait<0>();
      yr_wg_fence_operands(s, BN / 2);
      release(&empty_k[st]);
      after_s(0);
      m_run[0] = m_run[1] = -__int_as_float(0x7f800000);
      l_run[0] = l_run[1] = 0.0f;
      yr_attn_ws_softmax<BN, LAZY>(s, m_run, l_run, alpha, log2_scale, steps == 1 ? tail : BN);
#pragma unroll
      for (int i = 0; i < DV / 2; ++i) oacc[i] = 0.0f;
      yr_attn_ws_pack<T, BN>(p, s);
    }
    // Every later step, over all tiles: S of step t of `tile`, with the
    // step before's O += P V (the last one of the tile before when t is 0).
    int st_prev = st;
    unsigned round_prev = round;
    if (++st == STAGES) {
      st = 0;
      round ^= 1;
    }
    int tile = first;
    int t = 1;
    if (t == steps) {
      t = 0;
      tile += stride;
    }
    while (tile < tiles) {
      if (t == 0) load_q();  // every product that read the last tile's Q is done
      float s[BN / 2];
      yr_mbar_wait(&full_k[st], round);
      yr_mbar_wait(&full_v[st_prev], round_prev);
      if constexpr (!TMA) yr_fence_proxy_async();  // cp.async wrote it
      turn_wait();
      qk(s, desc_k(st));
      yr_attn_ws_scale<DV, LAZY>(oacc, alpha);
      yr_attn_ws_pv<T, DV, BN>(oacc, p, desc_v(st_prev));
      turn_pass();
      yr_wg_wait<1>();
      yr_wg_fence_operands(s, BN / 2);
      release(&empty_k[st]);
      after_s(t);
      float l_done[2];  // at a tile's first step: the tile before's sums
      if (t == 0) {
        l_done[0] = l_run[0];
        l_done[1] = l_run[1];
        m_run[0] = m_run[1] = -__int_as_float(0x7f800000);
        l_run[0] = l_run[1] = 0.0f;
      }
      yr_attn_ws_softmax<BN, LAZY>(s, m_run, l_run, alpha, log2_scale, t == steps - 1 ? tail : BN);
      yr_wg_wait<0>();
      yr_wg_fence_operands(oacc, DV / 2);
      release(&empty_v[st_prev]);
      if (t == 0) {  // the tile before is done: store it, start this one's O
        store(l_done, batch_o, row0_o);
#pragma unroll
        for (int i = 0; i < DV / 2; ++i) oacc[i] = 0.0f;
        batch_o = tile / row_blocks;
        row0_o = (tile % row_blocks) * BM;
      }
      yr_attn_ws_pack<T, BN>(p, s);
      st_prev = st;
      round_prev = round;
      if (++st == STAGES) {
        st = 0;
        round ^= 1;
      }
      if (++t == steps) {
        t = 0;
        tile += stride;
      }
    }
    {  // the last step's P V, and the last tile's store
      yr_mbar_wait(&full_v[st_prev], round_prev);
      if constexpr (!TMA) yr_fence_proxy_async();  // cp.async wrote it
      turn_wait();
      yr_attn_ws_scale<DV, LAZY>(oacc, alpha);
      yr_attn_ws_pv<T, DV, BN>(oacc, p, desc_v(st_prev));
      if (c == 0) turn_pass();
      yr_wg_wait<0>();
      yr_wg_fence_operands(oacc, DV / 2);
      store(l_run, batch_o, row0_o);
    }
  }
}

// One tile a block: grid (ceil(rows / 128), batch).
template <typename T, typename OutT, int D, int DV, int BN, int STAGES>
static __device__ __forceinline__ void yr_attention_prefill_ws(const T* __restrict__ q,
                                                               const T* __restrict__ k,
                                                               const T* __restrict__ v,
                                                               OutT* __restrict__ o, int rows,
                                                               int keys, float scale) {
  const int tiles = gridDim.x * gridDim.y;
  yr_attention_prefill_ws_tiles<T, OutT, D, DV, BN, STAGES, true, true>(
      q, k, v, o, rows, keys, scale, blockIdx.y * gridDim.x + blockIdx.x, tiles, tiles);
}

// Persistent: grid (min(tiles, multiprocessors)), tiles = batch *
// ceil(rows / 128), each block taking every gridDim.x-th tile; the
// producer loads the next tile's Q and first K and V tiles while the
// consumers finish this one. yr_attn_prefill_ws_smem_bytes<...>() bytes.
// TMA: see yr_attention_prefill_ws_tiles (tq, tk, tv: __grid_constant__
// kernel parameters).
template <typename T, typename OutT, int D, int DV, int BN, int STAGES, bool TMA = false>
static __device__ __forceinline__ void yr_attention_prefill_ws_persistent(
    const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, OutT* __restrict__ o,
    int batch, int rows, int keys, float scale, const CUtensorMap* tq = nullptr,
    const CUtensorMap* tk = nullptr, const CUtensorMap* tv = nullptr) {
  yr_attention_prefill_ws_tiles<T, OutT, D, DV, BN, STAGES, true, true, TMA>(
      q, k, v, o, rows, keys, scale, blockIdx.x, gridDim.x, batch * ((rows + 127) / 128), tq, tk,
      tv);
}

#endif
