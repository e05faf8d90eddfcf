// Hopper (sm_90a) GEMM, warp-specialized and persistent:
//   C[r, c] = epi(sum_k A[r, k] B[k, c], r, c), rounded to T on the store,
// A M x K row-major, B K x N row-major or (B_NK) N x K row-major (an
// nn.Linear weight), C M x N with row stride ldc; T __half or
// __nv_bfloat16, or float through TF32 tensor cores (B_NK only: wgmma reads
// tf32 operands K-major); float accumulation. After the design of CUTLASS's sm90
// warp-specialized kernels:
// - 384 threads: a producer warpgroup whose one thread issues the TMA copies
//   (setmaxnreg down to 40) and two consumer warpgroups issuing wgmma from
//   shared memory (setmaxnreg up to 232).
// - K steps of a 128-byte row (64 16-bit elements or 32 floats, four
//   wgmma k steps of 32 bytes): A's and B's tiles arrive by TMA with 128-byte swizzle
//   (the layout wgmma reads) in a STAGES-deep ring. Each stage has a "full"
//   mbarrier (the producer's expect_tx, completed by the copies' bytes) and
//   an "empty" one (an arrival from each consumer warpgroup that reads the
//   stage, in every block of the cluster that writes into it). A consumer
//   keeps one k step's wgmma group in flight and releases the stage before.
// - Cooperative (default): the consumers split a BM x BN tile by rows.
//   PINGPONG: each consumer takes every other tile whole, the two taking
//   turns through their main loops (named barriers), so that one's
//   epilogue runs under the other's products.
// - Clusters of CM x CN blocks (at most 2): they compute neighbouring tiles;
//   those sharing B's tile (CM = 2) load half of it each and multicast it to
//   both, likewise A's (CN = 2), halving the L2 reads of the shared operand.
// - Persistent: a grid of whole clusters, at most one block a
//   multiprocessor (see yr_gemm_sm90_grid); the cluster tiles go in groups
//   of GROUP cluster rows, column by column within a group, so that tiles
//   computed at the same time share A's and B's panels in L2.
// - Split-K (a runtime `splits` > 1) for the tiles of the last, partial
//   wave (all of them where there are fewer tiles than blocks): the units
//   of work are first the other cluster tiles whole, then each of the
//   `tail` last ones in `splits` K ranges, a tile's ranges consecutive, so
//   that the last wave runs more units of less work. Each split unit's
//   consumer warpgroup stores its
//   float accumulators to its slot of the workspace and counts itself in
//   its tile's counter; the last to arrive adds the others' partial sums
//   and runs the epilogue. Nobody waits for another block, so any number
//   of blocks may be resident at once; the last one leaves the counter
//   zero for the next launch.
// - Any M, N and K >= 1 with the TMA's rule that row strides be multiples
//   of 16 bytes: K % 8 == 0 (float: K % 4), and N % 8 == 0 for B K x N. Copies past the
//   edges read zeros (the K tail adds nothing); stores are bounds-checked.
// - A batch (a runtime `batch` > 1): `batch` products, each operand's
//   matrices consecutive (A batch * M rows, B_NK batch * N, B K x N
//   batch * K, C batch * M rows of ldc), the tiles of each product in turn.
//   Copies are of the operands' 2-D maps over all of them: a tile's rows
//   past M (or B_NK's past N) read the next product's, whose products land
//   in rows (columns) that are never stored; a K tail would add the next
//   product's rows of B K x N, so that form needs K a multiple of bk.
// - Gated (GATED, SwiGLU's shape): two B operands of one shape, B and B2;
//   a block's BN columns of products are BN / 2 of A @ B, then the same
//   BN / 2 of A @ B2, so that C's tiles are BN / 2 wide and each thread
//   holds both products of its elements (accumulator j and j + BN / 4).
//   The epilogue functor's `gate(p, p2)` combines them first.
// The epilogue functor: `float operator()(float acc, int row, int col)
// const`, called once for each element inside C (see yr_gemm_store); with
// GATED also `float gate(float p, float p2) const`.
// REQUIRES: kernel_prelude.cuh, wgmma_helpers.cuh and wgmma_ops.cuh before
// this file, and cuda.h, if at all, before it too; a
// kernel of yr_gemm_sm90_cfg::threads threads with
// __launch_bounds__(threads, 1) (setmaxnreg needs the register cap),
// cluster dimensions (cluster, 1, 1), smem_bytes of dynamic shared memory,
// a grid from yr_gemm_sm90_grid, and tensor maps as yr_gemm_sm90 says.
#ifndef YR_GEMM_SM90
#define YR_GEMM_SM90

// Split-K's arguments: the last `tail` cluster tiles (0 or more than there
// are: all) in `splits` K ranges each (1: none); `ws`: splits x BM x BN
// floats for each block of those cluster tiles (tail x cluster of them);
// `flags`: two counters for each, zero before the first launch.
struct yr_gemm_split {
  int splits = 1;
  int tail = 0;
  float* ws = nullptr;
  unsigned* flags = nullptr;
};

// The default epilogue: the accumulator as it is.
struct yr_gemm_store {
  __device__ __forceinline__ float operator()(float v, int, int) const { return v; }
};

// One GEMM kernel's constants. BM x BN: a block's tile (cooperative: the
// consumers take BM / 2 rows each; PINGPONG: BM rows each, every other
// tile); BM a multiple of 128 (cooperative) or 64, BN 64, 128 or 256 (one
// wgmma's N); at most 128 accumulators a consumer thread.
template <typename T, int BM, int BN, int STAGES, bool B_NK, bool PINGPONG = false, int CM = 1,
          int CN = 1, int GROUP = 8, bool GATED = false>
struct yr_gemm_sm90_cfg {
  using elem = T;
  // K elements a stage: a 128-byte row (64 16-bit elements, 32 floats).
  static constexpr int bm = BM, bn = BN, bk = 128 / static_cast<int>(sizeof(T));
  static constexpr int stages = STAGES, cm = CM, cn = CN;
  static constexpr int group = GROUP;
  static constexpr bool b_nk = B_NK, pingpong = PINGPONG, gated = GATED;
  static constexpr int on = GATED ? BN / 2 : BN;  // C's columns a tile
  static constexpr int cluster = CM * CN;
  static constexpr int threads = 384;
  static constexpr int wm = PINGPONG ? BM : BM / 2;  // a consumer's rows
  static constexpr int mi = wm / 64;                 // its m64 wgmmas a k16 step
  static constexpr int a_stage = BM * 128;  // bytes a stage
  static constexpr int b_stage = BN * 128;
  // TMA boxes {bk columns, rows}: a block copies 1 / CN of A's tile rows
  // and 1 / CM of B's tile (its rows for B_NK, of each operand's half when
  // GATED; its 64-column panels of the 64 rows of K for B K x N).
  static constexpr int a_box_rows = BM / CN;
  static constexpr int b_box_rows = B_NK ? BN / (GATED ? 2 : 1) / CM : 64;
  // The ring (1024-aligned for the swizzle: 1024 bytes of slack), then
  // the full and empty mbarriers, then a word for each consumer (split-K's
  // "last to arrive").
  static constexpr int smem_bytes = 1024 + STAGES * (a_stage + b_stage) + 2 * STAGES * 8 + 16;
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "T: __half, __nv_bfloat16 or float (TF32)");
  static_assert(sizeof(T) == 2 || B_NK, "float (TF32): B given as N x K (wgmma reads tf32 K-major)");
  static_assert(wm % 64 == 0 && mi >= 1, "BM: a multiple of 64 rows a consumer");
  static_assert(BN == 64 || BN == 128 || BN == 256, "BN: 64, 128 or 256");
  static_assert(mi * BN / 2 <= 128, "at most 128 accumulators a thread");
  static_assert((CM == 1 || CM == 2) && (CN == 1 || CN == 2) && CM * CN <= 2,
                "clusters of at most 2 blocks");
  static_assert(B_NK || (BN / 64) % CM == 0, "B K x N: whole 64-column panels a block");
  static_assert(a_box_rows % 8 == 0 && a_box_rows <= 256 && b_box_rows <= 256, "TMA boxes");
  static_assert(STAGES >= 2, "at least two stages");
  static_assert(!GATED || BN >= 128, "GATED: BN 128 or 256 (whole 64-column halves)");
  static_assert(smem_bytes <= 227 * 1024, "shared memory: at most 227 KB");
};

// The cluster tiles of all `batch` products.
template <class Cfg>
__host__ __device__ constexpr int yr_gemm_sm90_cluster_tiles(int m, int n, int batch = 1) {
  return batch * (((m + Cfg::bm - 1) / Cfg::bm + Cfg::cm - 1) / Cfg::cm) *
         (((n + Cfg::on - 1) / Cfg::on + Cfg::cn - 1) / Cfg::cn);
}

// Split-K's tiles: the cluster tiles that `splits` > 1 applies to, of the
// `ctiles` (yr_gemm_split's rule for `tail`).
__host__ __device__ constexpr int yr_gemm_sm90_split_tiles(int ctiles, int splits, int tail) {
  return splits <= 1 ? 0 : (tail > 0 && tail < ctiles ? tail : ctiles);
}

// The persistent grid: whole clusters, no more than fit at once
// (`max_clusters`, from cudaOccupancyMaxActiveClusters) or have units of
// work (the whole cluster tiles and the split ones' ranges).
template <class Cfg>
__host__ __device__ constexpr int yr_gemm_sm90_grid(int m, int n, int max_clusters, int splits = 1,
                                                    int tail = 0, int batch = 1) {
  const int ctiles = yr_gemm_sm90_cluster_tiles<Cfg>(m, n, batch);
  const int split = yr_gemm_sm90_split_tiles(ctiles, splits, tail);
  const int units = ctiles - split + split * (splits > 1 ? splits : 1);
  return (units < max_clusters ? units : max_clusters) * Cfg::cluster;
}

// An arrival on a split-K counter: adds 1 and returns the count before,
// acquiring what the blocks that arrived earlier released (their stores
// before their fence) and releasing this thread's.
static __device__ __forceinline__ unsigned yr_gemm_atomic_arrive(unsigned* p) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(old) : "l"(p) : "memory");
  return old;
}

// The kernel body. `a`, `b`: tensor maps of A (dims {K, M}, box {bk,
// a_box_rows}) and B (B_NK: dims {K, N}, box {bk, b_box_rows}; else dims
// {N, K}, box {64, 64}), 128-byte swizzle, zeros out of bounds; `a` and
// `b` must be the kernel's __grid_constant__ parameters; `split` as
// yr_gemm_split says, the grid from yr_gemm_sm90_grid with its splits.
// GATED: `b2` B2's tensor map, like B's (a __grid_constant__ parameter
// too); `n` C's columns (each operand's N). `batch`: products (above); the
// maps' dims then cover all of them, and the epilogue's row counts on
// over them (product p's row r is p * m + r).
template <class Cfg, class Epi = yr_gemm_store>
static __device__ __forceinline__ void yr_gemm_sm90(const CUtensorMap& a, const CUtensorMap& b,
                                                    typename Cfg::elem* __restrict__ c, int m,
                                                    int n, int k, int ldc, Epi epi = Epi(),
                                                    yr_gemm_split split = yr_gemm_split(),
                                                    const CUtensorMap* b2 = nullptr,
                                                    int batch = 1) {
  using T = typename Cfg::elem;
  constexpr int BM = Cfg::bm, BN = Cfg::bn, STAGES = Cfg::stages, CM = Cfg::cm, CN = Cfg::cn;
  constexpr int ON = Cfg::on;  // C's columns a tile
  constexpr bool GATED = Cfg::gated;
  constexpr int CS = Cfg::cluster, MI = Cfg::mi, WM = Cfg::wm;
  constexpr bool B_NK = Cfg::b_nk, PINGPONG = Cfg::pingpong;
  extern __shared__ __align__(1024) unsigned char yr_gemm_smem_raw[];
  unsigned char* const smem =
      yr_gemm_smem_raw + ((1024u - (yr_smem_addr(yr_gemm_smem_raw) & 1023u)) & 1023u);
  unsigned char* const sa = smem;                          // stage s at s * a_stage
  unsigned char* const sb = smem + STAGES * Cfg::a_stage;  // stage s at s * b_stage
  unsigned long long* const full =
      reinterpret_cast<unsigned long long*>(sb + STAGES * Cfg::b_stage);
  unsigned long long* const empty = full + STAGES;
  int* const last_flag = reinterpret_cast<int*>(empty + STAGES);  // one a consumer

  // Read through a shuffle, so that the compiler sees it uniform in each
  // warp (wgmma under a branch it takes for divergent gets serialized).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + ON - 1) / ON;
  const int ctiles_m = (tiles_m + CM - 1) / CM, ctiles_n = (tiles_n + CN - 1) / CN;
  const int ptiles = ctiles_m * ctiles_n;  // a product's
  const int ctiles = batch * ptiles;
  constexpr int BK = Cfg::bk;
  const int kblocks = (k + BK - 1) / BK;
  // Units of work: the first `whole` cluster tiles a unit each, then the
  // split ones' S ranges: unit u >= whole is range (u - whole) % S, K
  // blocks [kb_begin(u), kb_end(u)), of cluster tile whole + (u - whole) / S.
  const int S = split.splits > 1 ? split.splits : 1;
  const int whole = ctiles - yr_gemm_sm90_split_tiles(ctiles, S, split.tail);
  const int units = whole + (ctiles - whole) * S;
  auto unit_tile = [&](int u) { return u < whole ? u : whole + (u - whole) / S; };
  auto kb_begin = [&](int u) {
    return u < whole ? 0 : static_cast<int>(static_cast<i64>((u - whole) % S) * kblocks / S);
  };
  auto kb_end = [&](int u) {
    return u < whole ? kblocks
                     : static_cast<int>(static_cast<i64>((u - whole) % S + 1) * kblocks / S);
  };
  // Blocks of a cluster are consecutive in x: rank blockIdx.x % CS.
  const int rank = CS > 1 ? static_cast<int>(blockIdx.x % CS) : 0;
  const int rm = CM > 1 ? rank : 0, rn = CN > 1 ? rank : 0;
  const int cluster0 = blockIdx.x / CS, clusters = gridDim.x / CS;
  // Cluster tile t: product t / ptiles, then groups of GROUP cluster rows,
  // column-major inside.
  auto tile_of = [&](int t, int& bt, int& tm, int& tn) {
    bt = t / ptiles;
    t -= bt * ptiles;
    const int per_group = Cfg::group * ctiles_n;
    const int g = t / per_group;
    const int first = g * Cfg::group;
    const int rows = min(ctiles_m - first, Cfg::group);
    const int r = t - g * per_group;
    tm = (first + r % rows) * CM + rm;
    tn = (r / rows) * CN + rn;
  };

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      yr_mbar_init(&full[s], 1);
      yr_mbar_init(&empty[s], (PINGPONG ? 1 : 2) * CS);
    }
    yr_fence_mbar_init();
  }
  if constexpr (CS > 1) {
    yr_cluster_sync();  // the barriers of every block, before any copy or remote arrival
  } else {
    __syncthreads();
  }

  if (wg == 0) {
    // Producer: the ring's positions run on over all tiles; a fresh
    // mbarrier counts as having completed the phase before its first, so
    // the first round's waits on "empty" pass at once.
    yr_setmaxnreg_dec<40>();
    if (threadIdx.x != 0) return;
    yr_prefetch_tmap(&a);
    yr_prefetch_tmap(&b);
    if constexpr (GATED) yr_prefetch_tmap(b2);
    unsigned pos = 0;
    for (int u = cluster0; u < units; u += clusters) {
      int bt, tm, tn;
      tile_of(unit_tile(u), bt, tm, tn);
      const int kb1 = kb_end(u);
      for (int kb = kb_begin(u); kb < kb1; ++kb, ++pos) {
        const int st = pos % STAGES;
        yr_mbar_wait(&empty[st], ((pos / STAGES) & 1) ^ 1);
        yr_mbar_arrive_expect_tx(&full[st], Cfg::a_stage + Cfg::b_stage);
        const int kc = kb * BK;
        unsigned char* const da = sa + st * Cfg::a_stage + rn * Cfg::a_box_rows * 128;
        const int ra = bt * m + tm * BM + rn * Cfg::a_box_rows;
        if constexpr (CN > 1) {
          yr_tma_load_2d_multicast(da, &a, kc, ra, &full[st], 3);
        } else {
          yr_tma_load_2d(da, &a, kc, ra, &full[st]);
        }
        if constexpr (B_NK) {
          // GATED: B's rows of the tile, then B2's.
#pragma unroll
          for (int h = 0; h < (GATED ? 2 : 1); ++h) {
            const CUtensorMap* const mb = h == 0 ? &b : b2;
            unsigned char* const db =
                sb + st * Cfg::b_stage + (h * ON + rm * Cfg::b_box_rows) * 128;
            const int rb = bt * n + tn * ON + rm * Cfg::b_box_rows;
            if constexpr (CM > 1) {
              yr_tma_load_2d_multicast(db, mb, kc, rb, &full[st], 3);
            } else {
              yr_tma_load_2d(db, mb, kc, rb, &full[st]);
            }
          }
        } else {
          constexpr int P = BN / 64 / CM;  // panels a block
#pragma unroll
          for (int p = rm * P; p < rm * P + P; ++p) {
            // GATED: the first ON / 64 panels are B's, the rest B2's.
            const int h = GATED && p * 64 >= ON ? 1 : 0;
            const CUtensorMap* const mb = h == 0 ? &b : b2;
            unsigned char* const db = sb + st * Cfg::b_stage + p * 64 * 128;
            const int cb = tn * ON + p * 64 - h * ON;
            if constexpr (CM > 1) {
              yr_tma_load_2d_multicast(db, mb, cb, bt * k + kc, &full[st], 3);
            } else {
              yr_tma_load_2d(db, mb, cb, bt * k + kc, &full[st]);
            }
          }
        }
      }
    }
    if constexpr (CS > 1) {
      // Every stage released once more: no arrival from the other block is
      // still on its way to this block's barriers when it exits.
      for (int i = 0; i < STAGES; ++i, ++pos) {
        yr_mbar_wait(&empty[pos % STAGES], ((pos / STAGES) & 1) ^ 1);
      }
    }
  } else {
    yr_setmaxnreg_inc<232>();
    const int cw = wg - 1;  // consumer
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    const int row_off = PINGPONG ? 0 : cw * WM;  // the consumer's rows in the tile
    // Descriptors of stage 0: A and B_NK K-major (8-row groups 1024 bytes
    // apart; a k16 step is 32 bytes on), B K x N MN-major (64-column panels
    // 64 * 128 bytes apart, 8 rows of K 1024; a k16 step is 16 rows on).
    const unsigned long long da0 = yr_wg_desc(sa, 16, 1024);
    const unsigned long long db0 = yr_wg_desc(sb, B_NK ? 16 : 64 * 128, 1024);
    auto release = [&](int st) {
      if (tid == 0) {
        if constexpr (CS > 1) {
#pragma unroll
          for (int r = 0; r < CS; ++r) yr_mbar_arrive_cluster(&empty[st], r);
        } else {
          yr_mbar_arrive(&empty[st]);
        }
      }
    };
    // Ping-pong: the consumers take turns through their main loops (named
    // barriers 1 + c: consumer c's turn). A consumer's waits on "full" must
    // not run more than a round of the ring ahead of the copies (a parity
    // wait cannot tell rounds two apart), so consumer c starts its tile's
    // waits only once the other has waited on all of its own tile's. Each
    // turn passed is taken: consumer 1 lets consumer 0 go first if the
    // block has a tile, and the block's last tile passes no turn.
    const int local_tiles = cluster0 < units ? (units - cluster0 + clusters - 1) / clusters : 0;
    if (PINGPONG && cw == 1 && local_tiles > 0) yr_named_arrive(1, 256);
    float acc[MI][BN / 2];
    unsigned pos = 0;
    int local = 0;  // the block's tile count
    for (int u = cluster0; u < units; u += clusters, ++local) {
      const int kb0 = kb_begin(u), kb1 = kb_end(u);
      if (PINGPONG && (local & 1) != cw) {  // the other consumer's tile
        pos += kb1 - kb0;
        continue;
      }
      if (PINGPONG) yr_named_sync(1 + cw, 256);
      int bt, tm, tn;
      tile_of(unit_tile(u), bt, tm, tn);
      // This product's rows of C; the epilogue's rows count on over the batch.
      T* const cbase = c + static_cast<i64>(bt) * m * ldc;
      const int row_base = bt * m;
#pragma unroll
      for (int i = 0; i < MI; ++i) {
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) acc[i][j] = 0.0f;
      }
      int prev = 0;
      for (int kb = kb0; kb < kb1; ++kb, ++pos) {
        const int st = pos % STAGES;
        yr_mbar_wait(&full[st], (pos / STAGES) & 1);
        const unsigned long long da = da0 + (st * Cfg::a_stage + row_off * 128) / 16;
        const unsigned long long db = db0 + st * Cfg::b_stage / 16;
        yr_wg_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
          for (int i = 0; i < MI; ++i) {
            yr_wgmma_ss<BN, T, !B_NK>(acc[i], da + (i * 64 * 128 + kk * 32) / 16,
                                      db + (B_NK ? kk * 32 : kk * 16 * 128) / 16);
          }
        }
        yr_wg_commit();
        if (kb > kb0) {
          yr_wg_wait<1>();
          release(prev);
        }
        prev = st;
      }
      if (PINGPONG && local + 1 < local_tiles) yr_named_arrive(2 - cw, 256);
      // Unconditional (a no-op with no group in flight): ptxas then sees
      // every path to the accumulators' reads pass a wait, and injects none.
      yr_wg_wait<0>();
      if (kb1 > kb0) release(prev);
#pragma unroll
      for (int i = 0; i < MI; ++i) yr_wg_fence_operands(acc[i], BN / 2);

      if (u >= whole) {
        // Split-K: this unit's partial sums to its slot (a thread's floats
        // 4 at a time, the warpgroup's threads side by side), then the
        // arrival; the last of the tile's S units to arrive adds the
        // others' and goes on to the epilogue, the rest are done. A
        // cluster's block whose tile lies past C's edge (it loaded its half
        // of the shared operand for the other) has no slot and no output.
        if (tm >= tiles_m || tn >= tiles_n) continue;
        constexpr int NT = PINGPONG ? 128 : 256;  // threads holding the tile
        const int slot = PINGPONG ? tid : cw * 128 + tid;
        const int range = (u - whole) % S;
        const i64 slot_tile = static_cast<i64>(unit_tile(u) - whole) * CS + rank;
        float4* const ws = reinterpret_cast<float4*>(split.ws) + slot_tile * S * (BM * BN / 4);
        float4* const mine = ws + range * (BM * BN / 4);
#pragma unroll
        for (int i = 0; i < MI; ++i) {
#pragma unroll
          for (int j = 0; j < BN / 2; j += 4) {
            __stcg(mine + (i * (BN / 8) + j / 4) * NT + slot,
                   make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
          }
        }
        yr_named_sync(3 + cw, 128);  // the warpgroup's stores, before its arrival
        if (tid == 0) {
          unsigned* const flag = split.flags + slot_tile * 2 + (PINGPONG ? 0 : cw);
          __threadfence();
          const bool last = yr_gemm_atomic_arrive(flag) == static_cast<unsigned>(S - 1);
          if (last) *flag = 0u;  // every unit of the tile has arrived: zero for the next launch
          last_flag[cw] = last;
        }
        yr_named_sync(3 + cw, 128);
        if (!last_flag[cw]) continue;
        __threadfence();
        for (int p = 0; p < S; ++p) {
          if (p == range) continue;
          const float4* const theirs = ws + p * (BM * BN / 4);
#pragma unroll
          for (int i = 0; i < MI; ++i) {
#pragma unroll
            for (int j = 0; j < BN / 2; j += 4) {
              const float4 v = __ldcg(theirs + (i * (BN / 8) + j / 4) * NT + slot);
              acc[i][j] += v.x;
              acc[i][j + 1] += v.y;
              acc[i][j + 2] += v.z;
              acc[i][j + 3] += v.w;
            }
          }
        }
      }

      // GATED: column c's two products are accumulators 4 (c / 8) + c % 2
      // (+ 2 for row + 8) and those BN / 4 on; their gate goes to the first.
      if constexpr (GATED) {
#pragma unroll
        for (int i = 0; i < MI; ++i) {
#pragma unroll
          for (int j = 0; j < BN / 4; ++j) acc[i][j] = epi.gate(acc[i][j], acc[i][j + BN / 4]);
        }
      }

      // Epilogue: thread (warp, lane) holds rows 16 warp + lane / 4 (+ 8)
      // of each m64 slice, columns 8 j + 2 (lane % 4) (+ 1). Where the tile
      // is whole in N and C's rows are 16-byte aligned, each quad of lanes
      // transposes the words of 4 consecutive j, so that a lane stores 8
      // consecutive columns at once (whole 32-byte sectors); elsewhere a
      // pair is one 4-byte store where aligned, else two.
      const int q = lane % 4;
      const int col0 = tn * ON + 2 * q;
      if constexpr (sizeof(T) == 4) {
        // float: a pair is one 8-byte store where aligned (a quad's four
        // pairs fill a 32-byte sector), else two.
        const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(cbase) % 8 == 0);
#pragma unroll
        for (int i = 0; i < MI; ++i) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = tm * BM + row_off + i * 64 + warp * 16 + lane / 4 + 8 * h;
            if (r >= m) continue;
            float* const crow = reinterpret_cast<float*>(cbase) + static_cast<i64>(r) * ldc;
#pragma unroll
            for (int j = 0; j < ON / 8; ++j) {
              const int col = col0 + 8 * j;
              const float v0 = acc[i][4 * j + 2 * h], v1 = acc[i][4 * j + 2 * h + 1];
              if (pairs && col + 1 < n) {
                *reinterpret_cast<float2*>(crow + col) =
                    make_float2(epi(v0, row_base + r, col), epi(v1, row_base + r, col + 1));
              } else {
                if (col < n) crow[col] = epi(v0, row_base + r, col);
                if (col + 1 < n) crow[col + 1] = epi(v1, row_base + r, col + 1);
              }
            }
          }
        }
      } else if ((ldc % 8 == 0) && (reinterpret_cast<unsigned long long>(cbase) % 16 == 0) &&
                 tn * ON + ON <= n) {
#pragma unroll
        for (int i = 0; i < MI; ++i) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = tm * BM + row_off + i * 64 + warp * 16 + lane / 4 + 8 * h;
            const bool in = r < m;  // the same for the quad; the warp shuffles together
            T* const crow = cbase + static_cast<i64>(r) * ldc + tn * ON + 8 * q;
#pragma unroll
            for (int jb = 0; jb < ON / 32; ++jb) {
              unsigned v[4];
#pragma unroll
              for (int jj = 0; jj < 4; ++jj) {
                const int j = 4 * jb + jj, col = col0 + 8 * j;
                v[jj] = in ? yr_pack2<T>(epi(acc[i][4 * j + 2 * h], row_base + r, col),
                                         epi(acc[i][4 * j + 2 * h + 1], row_base + r, col + 1))
                           : 0u;
              }
              yr_gemm_quad_transpose(v, q);
              if (in)
                *reinterpret_cast<uint4*>(crow + 32 * jb) = make_uint4(v[0], v[1], v[2], v[3]);
            }
          }
        }
      } else {
        const bool pairs = (ldc % 2 == 0) && (reinterpret_cast<unsigned long long>(cbase) % 4 == 0);
#pragma unroll
        for (int i = 0; i < MI; ++i) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = tm * BM + row_off + i * 64 + warp * 16 + lane / 4 + 8 * h;
            if (r >= m) continue;
            T* const crow = cbase + static_cast<i64>(r) * ldc;
#pragma unroll
            for (int j = 0; j < ON / 8; ++j) {
              const int col = col0 + 8 * j;
              const float v0 = acc[i][4 * j + 2 * h], v1 = acc[i][4 * j + 2 * h + 1];
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
}

#endif
