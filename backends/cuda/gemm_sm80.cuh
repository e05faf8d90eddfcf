// Ampere-style GEMM (sm_80 on: A100, the sm_86/sm_89 parts, and Hopper,
// where it serves tiles the warp-specialized kernel fills poorly):
//   C[r, c] = epi(sum_k A[r, k] B[k, c], r, c), rounded to T on the store,
// A M x K row-major, B K x N row-major or (B_NK) N x K row-major (an
// nn.Linear weight), C M x N with row stride ldc; T __half or
// __nv_bfloat16; float accumulation. After the design of CUTLASS's sm80
// multistage kernels:
// - A block of WARPS_M x WARPS_N warps computes a BM x BN tile, each warp
//   a (BM / WARPS_M) x (BN / WARPS_N) piece of m16n8k16 mma.sync products.
// - K steps of a 128-byte row (64 elements): A's and B's tiles arrive by
//   16-byte cp.async into a STAGES-deep ring of shared memory, STAGES - 1
//   steps ahead of the products; the 16-byte chunks of each 128-byte row
//   are XOR-swizzled by the row (yr_swz<64>), so that ldmatrix reads of 8
//   rows of one chunk column hit 8 different bank groups. B K x N lies in
//   64-column panels of K rows and is read by ldmatrix.trans.
// - Any M, N and K >= 1 with 16-byte chunks whole: K % 8 == 0, and
//   N % 8 == 0 for B K x N. Chunks past the edges are zero-filled (the K
//   tail adds nothing); stores are bounds-checked.
// - One block a tile, tiles in groups of GROUP tile rows, column by column
//   within a group, so that the tiles running at once share A's and B's
//   panels in L2. A batch (`batch` > 1): the products' operands
//   consecutive (A batch * M rows, B batch * K or batch * N rows, C batch *
//   M rows of ldc), the tiles of each product in turn; the epilogue's row
//   counts on over them (product p's row r is p * m + r).
// - Split-K (`split.splits` > 1, for products of fewer tiles than the chip
//   holds at once): each tile's K blocks in `splits` ranges, one block
//   each, the ranges of a tile consecutive in the grid. Every range stores
//   its float accumulators to its slot of the workspace (a thread's floats
//   4 at a time, the block's threads side by side) and counts itself in
//   its tile's counter; the last to arrive adds the others' and runs the
//   epilogue, and leaves the counter zero for the next launch. No block
//   waits for another.
// - Gated (GATED, SwiGLU's shape): two B operands of one shape, B and B2;
//   a tile's BN columns of products are BN / 2 of A @ B, then the same
//   BN / 2 of A @ B2, and each warp's piece holds the same columns of both
//   (its first NJ / 2 n8 blocks A @ B's, the rest A @ B2's), so that C's
//   tiles are BN / 2 wide and the functor's `gate(p, p2)` joins a thread's
//   two products before the epilogue.
// The epilogue functor as gemm_sm90.cuh's: `float operator()(float acc,
// int row, int col) const`, called once for each element inside C; with
// GATED also `float gate(float p, float p2) const`.
// REQUIRES: kernel_prelude.cuh before this file; a kernel of
// yr_gemm_sm80_cfg::threads threads, smem_bytes of dynamic shared memory
// and a grid of yr_gemm_sm80_grid blocks (with its splits).
#ifndef YR_GEMM_SM80
#define YR_GEMM_SM80

// One kernel's constants. BM, BN multiples of 16 per warp along M and of
// 32 along N (whole quads of n8 products for the 16-byte stores).
template <typename T, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool B_NK,
          int GROUP = 8, bool GATED = false>
struct yr_gemm_sm80_cfg {
  using elem = T;
  static constexpr int bm = BM, bn = BN, bk = 64, stages = STAGES, group = GROUP;
  static constexpr bool b_nk = B_NK, gated = GATED;
  static constexpr int on = GATED ? BN / 2 : BN;  // C's columns a tile
  static constexpr int warps_m = WARPS_M, warps_n = WARPS_N;
  static constexpr int warps = WARPS_M * WARPS_N, threads = 32 * warps;
  static constexpr int wm = BM / WARPS_M, wn = BN / WARPS_N;  // a warp's piece
  static constexpr int mi = wm / 16, nj = wn / 8;             // its m16 rows, n8 columns
  static constexpr int a_stage = BM * bk, b_stage = BN * bk;  // elements a stage
  // The ring, then a word (split-K's "last to arrive").
  static constexpr int smem_bytes = STAGES * (a_stage + b_stage) * 2 + 16;
  static_assert(sizeof(T) == 2, "T: __half or __nv_bfloat16");
  static_assert(wm % 16 == 0 && wn % 32 == 0, "a warp's piece: m16 rows, 32-column quads");
  static_assert(B_NK || BN % 64 == 0, "B K x N: whole 64-column panels");
  static_assert(mi * nj * 4 <= 128, "at most 128 accumulators a thread");
  static_assert(STAGES >= 2, "at least two stages");
  static_assert((BM * 8) % threads == 0 && (BN * 8) % threads == 0, "whole chunks a thread");
  static_assert(!GATED || (wn % 64 == 0 && (B_NK || on % 64 == 0)),
                "GATED: 32-column quads of each product a warp, whole panels a half");
};

// Split-K's arguments: `splits` K ranges a tile (1: none); `ws`: splits x
// BM x BN floats a tile of all products; `flags`: a counter a tile, zero
// before the first launch.
struct yr_gemm80_split {
  int splits = 1;
  float* ws = nullptr;
  unsigned* flags = nullptr;
};

// The tiles of all `batch` products.
template <class Cfg>
__host__ __device__ constexpr long long yr_gemm_sm80_tiles(int m, int n, int batch = 1) {
  return static_cast<long long>(batch) * ((m + Cfg::bm - 1) / Cfg::bm) *
         ((n + Cfg::on - 1) / Cfg::on);
}

// The grid: a block for each K range of each tile.
template <class Cfg>
__host__ __device__ constexpr long long yr_gemm_sm80_grid(int m, int n, int batch = 1,
                                                          int splits = 1) {
  return yr_gemm_sm80_tiles<Cfg>(m, n, batch) * (splits > 1 ? splits : 1);
}

// The instructions the kernel issues, each in one wrapper, so that a host
// emulation (gemm_sm80_host_test.cc: CI checks the template's indexing
// without a GPU) can define YR_GEMM80_HOST and supply its own.
#ifndef YR_GEMM80_HOST
// A 16-byte cp.async that reads `valid ? 16 : 0` bytes of `src` and fills
// the rest of `dst` with zeros (src must be a mapped address either way).
template <typename T>
static __device__ __forceinline__ void yr_gemm80_cp16(T* dst, const T* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
static __device__ __forceinline__ void yr_gemm80_commit() { yr_cp_async_commit(); }
template <int N>
static __device__ __forceinline__ void yr_gemm80_wait() {
  yr_cp_async_wait<N>();
}
static __device__ __forceinline__ unsigned yr_gemm80_smem_addr(const void* p) {
  return yr_smem_addr(p);
}
// ldmatrix (x4, and transposed) at a shared address.
static __device__ __forceinline__ void yr_gemm80_ldsm(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
static __device__ __forceinline__ void yr_gemm80_ldsm_t(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
template <typename T>
static __device__ __forceinline__ void yr_gemm80_mma(float* c, const unsigned* a,
                                                     const unsigned* b) {
  yr_mma16816<T>(c, a, b);
}
// Split-K: partial sums through L2 (past L1), a GPU-wide fence, and an
// arrival on a tile's counter that returns the count before it.
static __device__ __forceinline__ void yr_gemm80_store_cg(float4* p, float4 v) { __stcg(p, v); }
static __device__ __forceinline__ float4 yr_gemm80_load_cg(const float4* p) { return __ldcg(p); }
static __device__ __forceinline__ void yr_gemm80_fence() { __threadfence(); }
static __device__ __forceinline__ unsigned yr_gemm80_arrive(unsigned* counter) {
  return atomicAdd(counter, 1u);
}
#endif

template <class Cfg, class Epi>
static __device__ __forceinline__ void yr_gemm_sm80(
    const typename Cfg::elem* __restrict__ a, const typename Cfg::elem* __restrict__ b,
    typename Cfg::elem* __restrict__ c, int m, int n, int k, int ldc, Epi epi, int batch = 1,
    const typename Cfg::elem* __restrict__ b2 = nullptr,
    yr_gemm80_split split = yr_gemm80_split()) {
  using T = typename Cfg::elem;
  constexpr int BM = Cfg::bm, BN = Cfg::bn, BK = Cfg::bk, STAGES = Cfg::stages;
  constexpr int THREADS = Cfg::threads, MI = Cfg::mi, NJ = Cfg::nj;
  constexpr bool B_NK = Cfg::b_nk, GATED = Cfg::gated;
  constexpr int ON = Cfg::on;  // C's columns a tile
  extern __shared__ __align__(128) unsigned char yr_gemm80_smem_raw[];
  T* const sa = reinterpret_cast<T*>(yr_gemm80_smem_raw);  // stage s at s * a_stage
  T* const sb = sa + STAGES * Cfg::a_stage;                // stage s at s * b_stage

  // The tile: product, then groups of GROUP tile rows, column-major inside.
  const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + ON - 1) / ON;
  const int ptiles = tiles_m * tiles_n;
  const int S = split.splits > 1 ? split.splits : 1;
  const int tile = static_cast<int>(blockIdx.x) / S, range = static_cast<int>(blockIdx.x) % S;
  int t = tile;
  const int bt = t / ptiles;
  if (bt >= batch) return;
  t -= bt * ptiles;
  const int per_group = Cfg::group * tiles_n;
  const int first = (t / per_group) * Cfg::group;
  const int rows = min(tiles_m - first, Cfg::group);
  const int r_in = t - (t / per_group) * per_group;
  const int tm = first + r_in % rows, tn = r_in / rows;
  const int row0 = tm * BM, col0 = tn * ON;
  const T* const ab = a + static_cast<i64>(bt) * m * k;
  const T* const bb = b + static_cast<i64>(bt) * k * n;
  const T* const bb2 = GATED ? b2 + static_cast<i64>(bt) * k * n : bb;
  T* const cb = c + static_cast<i64>(bt) * m * ldc;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int kblocks = (k + BK - 1) / BK;
  // This block's K blocks: [kb0, kb0 + nk).
  const int kb0 = static_cast<int>(static_cast<i64>(range) * kblocks / S);
  const int nk = static_cast<int>(static_cast<i64>(range + 1) * kblocks / S) - kb0;

  // One K step's copies: A's BM rows and B's BN rows (B_NK) or BK rows of
  // BN columns, 16-byte chunks, each thread a fixed share. GATED: the
  // tile's products' columns c >= ON are B2's column c - ON.
  auto load = [&](int stage, int kb) {
    const int k0 = kb * BK;
    T* const da = sa + stage * Cfg::a_stage;
#pragma unroll
    for (int i = 0; i < BM * 8 / THREADS; ++i) {
      const int id = tid + i * THREADS, r = id / 8, ch = id % 8;
      const int gr = row0 + r, gk = k0 + ch * 8;
      const bool ok = gr < m && gk < k;
      yr_gemm80_cp16(da + yr_swz<64>(r, ch * 8), ok ? ab + static_cast<i64>(gr) * k + gk : ab, ok);
    }
    T* const db = sb + stage * Cfg::b_stage;
    if constexpr (B_NK) {
#pragma unroll
      for (int i = 0; i < BN * 8 / THREADS; ++i) {
        const int id = tid + i * THREADS, r = id / 8, ch = id % 8;
        const bool second = GATED && r >= ON;
        const T* const src = second ? bb2 : bb;
        const int gn = col0 + r - (second ? ON : 0), gk = k0 + ch * 8;
        const bool ok = gn < n && gk < k;
        yr_gemm80_cp16(db + yr_swz<64>(r, ch * 8), ok ? src + static_cast<i64>(gn) * k + gk : bb,
                       ok);
      }
    } else {
      constexpr int CH = BN / 8;  // chunks a K row
#pragma unroll
      for (int i = 0; i < BN * 8 / THREADS; ++i) {
        const int id = tid + i * THREADS, r = id / CH, cc = id % CH;
        const bool second = GATED && cc * 8 >= ON;
        const T* const src = second ? bb2 : bb;
        const int gk = k0 + r, gn = col0 + cc * 8 - (second ? ON : 0);
        const bool ok = gk < k && gn < n;
        yr_gemm80_cp16(db + (cc / 8) * (BK * 64) + yr_swz<64>(r, (cc % 8) * 8),
                       ok ? src + static_cast<i64>(gk) * n + gn : bb, ok);
      }
    }
  };

  float acc[MI][NJ][4];
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }
  }
  // The first STAGES - 1 steps in flight (a group each, empty past K).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nk) load(s, kb0 + s);
    yr_gemm80_commit();
  }
  const int wm0 = (warp / Cfg::warps_n) * Cfg::wm;
  // The warp's first column of C in the tile, and the tile's column of its
  // n8 block j (GATED: the first NJ / 2 blocks A @ B's, the rest A @ B2's,
  // of the same columns).
  const int wc0 = (warp % Cfg::warps_n) * (GATED ? Cfg::wn / 2 : Cfg::wn);
  auto block_col = [&](int j) {
    return GATED && j >= NJ / 2 ? ON + wc0 + 8 * (j - NJ / 2) : wc0 + 8 * j;
  };
  for (int kb = 0; kb < nk; ++kb) {
    // Step kb's group has landed (STAGES - 2 later ones may be in flight),
    // and every warp is past step kb - 1, whose stage the next copy fills.
    yr_gemm80_wait<STAGES - 2>();
    __syncthreads();
    if (kb + STAGES - 1 < nk) load((kb + STAGES - 1) % STAGES, kb0 + kb + STAGES - 1);
    yr_gemm80_commit();
    const T* const ta = sa + (kb % STAGES) * Cfg::a_stage;
    const T* const tb = sb + (kb % STAGES) * Cfg::b_stage;
    // Shared addresses of this thread's ldmatrix rows at k16 step 0; step
    // kk's are those XOR kk * 32 bytes (a stage is 128-byte aligned and a
    // row's 16-byte chunk index is XOR-swizzled: yr_swz<64>).
    const unsigned a0 = yr_gemm80_smem_addr(ta), b0 = yr_gemm80_smem_addr(tb);
    unsigned fa[MI], fb[NJ / 2];
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      fa[i] = a0 + 2 * yr_swz<64>(wm0 + i * 16 + lane % 16, (lane / 16) * 8);
    }
#pragma unroll
    for (int j = 0; j < NJ; j += 2) {
      // Matrices (k 0-7, n 0-7), (k 8-15, n 0-7), then the same of the
      // next 8 columns: b0, b1 of n8 block j, then of j + 1.
      const int w = lane / 8, nb = block_col(j) + (w / 2) * 8;
      fb[j / 2] =
          B_NK ? b0 + 2 * yr_swz<64>(nb + lane % 8, (w % 2) * 8)
               : b0 + 2 * ((nb / 64) * (BK * 64) + yr_swz<64>((w % 2) * 8 + lane % 8, nb % 64));
    }
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      unsigned af[MI][4], bf[NJ][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) yr_gemm80_ldsm(af[i], fa[i] ^ (kk * 32));
#pragma unroll
      for (int j = 0; j < NJ; j += 2) {
        unsigned r[4];
        // B K x N: step kk is 16 rows of K on, 2048 bytes (no XOR: the
        // swizzle's row bits repeat every 8 rows).
        if constexpr (B_NK) {
          yr_gemm80_ldsm(r, fb[j / 2] ^ (kk * 32));
        } else {
          yr_gemm80_ldsm_t(r, fb[j / 2] + kk * 16 * 128);
        }
        bf[j][0] = r[0];
        bf[j][1] = r[1];
        bf[j + 1][0] = r[2];
        bf[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < MI; ++i) {
#pragma unroll
        for (int j = 0; j < NJ; ++j) yr_gemm80_mma<T>(acc[i][j], af[i], bf[j]);
      }
    }
  }
  yr_gemm80_wait<0>();

  if (S > 1) {
    // Split-K: this range's partial sums to its slot, then the arrival;
    // the last of the tile's S ranges to arrive adds the others' and goes
    // on to the epilogue, the rest are done.
    constexpr int F4 = MI * NJ;  // float4s a thread
    float4* const ws =
        reinterpret_cast<float4*>(split.ws) + static_cast<i64>(tile) * S * F4 * THREADS;
#pragma unroll
    for (int i = 0; i < MI; ++i) {
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        yr_gemm80_store_cg(ws + (static_cast<i64>(range) * F4 + i * NJ + j) * THREADS + tid,
                           make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]));
      }
    }
    int& last = *reinterpret_cast<int*>(yr_gemm80_smem_raw + Cfg::smem_bytes - 16);
    yr_gemm80_fence();  // this thread's partial sums, before the block's arrival
    __syncthreads();
    if (tid == 0) {
      const unsigned before = yr_gemm80_arrive(split.flags + tile);
      last = before == static_cast<unsigned>(S - 1);
      if (last) split.flags[tile] = 0u;  // all arrived: zero for the next launch
    }
    __syncthreads();
    if (!last) return;
    yr_gemm80_fence();
    for (int p = 0; p < S; ++p) {
      if (p == range) continue;
#pragma unroll
      for (int i = 0; i < MI; ++i) {
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const float4 v =
              yr_gemm80_load_cg(ws + (static_cast<i64>(p) * F4 + i * NJ + j) * THREADS + tid);
          acc[i][j][0] += v.x;
          acc[i][j][1] += v.y;
          acc[i][j][2] += v.z;
          acc[i][j][3] += v.w;
        }
      }
    }
  }

  // GATED: each element's two products joined, into the first NJ / 2 blocks.
  constexpr int NO = GATED ? NJ / 2 : NJ;  // n8 blocks of C a warp
  if constexpr (GATED) {
#pragma unroll
    for (int i = 0; i < MI; ++i) {
#pragma unroll
      for (int j = 0; j < NO; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = epi.gate(acc[i][j][e], acc[i][j + NO][e]);
      }
    }
  }

  // Epilogue: lane (g, q) = (lane / 4, lane % 4) holds rows g (+ 8) of each
  // m16 piece, columns 8 j + 2 q (+ 1) past the warp's first. Where a
  // quad's 32 columns are inside C and C's rows 16-byte aligned, the quad
  // transposes the words of 4 consecutive j, so that a lane stores 8
  // consecutive columns at once (whole 32-byte sectors); elsewhere a pair
  // is one 4-byte store where aligned, else two.
  const int g = lane / 4, q = lane % 4;
  const int row_base = bt * m;
  const bool wide = ldc % 8 == 0 && reinterpret_cast<unsigned long long>(cb) % 16 == 0;
  const bool pairs = ldc % 2 == 0 && reinterpret_cast<unsigned long long>(cb) % 4 == 0;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + wm0 + i * 16 + g + 8 * h;
      const bool in = r < m;  // the same for the quad; the warp shuffles together
      T* const crow = cb + static_cast<i64>(r) * ldc;
#pragma unroll
      for (int jb = 0; jb < NO / 4; ++jb) {
        const int cq = col0 + wc0 + jb * 32;  // the quad's first column
        if (wide && cq + 32 <= n) {
          unsigned v[4];
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) {
            const int j = 4 * jb + jj, col = cq + 8 * jj + 2 * q;
            v[jj] = in ? yr_pack2<T>(epi(acc[i][j][2 * h], row_base + r, col),
                                     epi(acc[i][j][2 * h + 1], row_base + r, col + 1))
                       : 0u;
          }
          yr_gemm_quad_transpose(v, q);
          if (in) *reinterpret_cast<uint4*>(crow + cq + 8 * q) = make_uint4(v[0], v[1], v[2], v[3]);
        } else if (in) {
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) {
            const int j = 4 * jb + jj, col = cq + 8 * jj + 2 * q;
            const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
            if (pairs && col + 1 < n) {
              *reinterpret_cast<unsigned*>(crow + col) =
                  yr_pack2<T>(epi(v0, row_base + r, col), epi(v1, row_base + r, col + 1));
            } else {
              if (col < n) yr_st(crow, col, epi(v0, row_base + r, col));
              if (col + 1 < n) yr_st(crow, col + 1, epi(v1, row_base + r, col + 1));
            }
          }
        }
      }
    }
  }
}

#endif
