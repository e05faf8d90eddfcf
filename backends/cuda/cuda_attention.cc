#include "backends/cuda/cuda_attention.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

// 64-key tiles over the keys; the last one is masked where the keys end
// inside it.
int64_t KeyTiles(const AttentionPattern& a) { return (a.n + kTileN - 1) / kTileN; }

// A K and a V tile of the decode form; the TMA form's rows are unpadded.
int64_t TileBytes(const AttentionPattern& a, const AttentionConfig& c) {
  const int pad = c.tma ? 0 : 8;
  const int64_t ksize = a.transpose_k ? kTileN * (a.d + pad) : a.d * (kTileN + pad);
  return (ksize + kTileN * (a.dv + pad)) * 2;
}

// Bytes before the decode form's ring: Q's rows, and with TMA the ring's
// mbarriers, up to a 1024-byte boundary (attention_decode.cuh's RING_AT).
int64_t QueryBytes(const AttentionPattern& a, const AttentionConfig& c) {
  const int64_t q = RowsPerBlock(c) * (a.d + 8) * 2;
  return c.tma ? (q + 8 * c.stages + 1023) / 1024 * 1024 : q;
}

int64_t SmemBytes(const AttentionPattern& a, const AttentionConfig& c) {
  if (c.prefill) {
    const int64_t bytes =
        (RowsPerBlock(c) * a.d + int64_t{c.stages} * c.key_tile * (a.d + a.dv)) * 2;
    // The warp-specialized form's mbarriers: four a stage and two for Q.
    return c.warp_specialized ? bytes + (int64_t{c.stages} * 4 + 2) * 8 : bytes;
  }
  const int64_t ring = int64_t{c.stages} * c.key_groups * TileBytes(a, c);
  const int64_t rows = RowsPerBlock(c) * (a.dv + 4) * 4;
  // Pushed: every key group's partial rows of the cluster, past the ring.
  if (c.push_merge) return QueryBytes(a, c) + ring + c.key_groups * rows;
  // Partial rows (the key groups', then the cluster's) over the drained ring.
  const int64_t partial = std::max<int64_t>(c.key_groups - 1, c.cluster_merge ? 1 : 0) * rows;
  return QueryBytes(a, c) + std::max(ring, partial);
}

}  // namespace

AttentionConfig PlanAttention(const AttentionPattern& a, const CudaTarget& target,
                              const yirage::v1::AttentionSchedule& schedule) {
  using Merge = yirage::v1::AttentionSchedule;
  AttentionConfig c;
  if (schedule.prefill()) {
    // 176- and 80-key tiles in the warp-specialized form only (with Q in
    // shared memory beside S and O).
    const bool ws = schedule.warp_specialized();
    const int kt = schedule.key_tile();
    c.key_tile = kt == 128 || (ws && (kt == 176 || kt == 80)) ? kt : 64;
    const int rows = schedule.block_rows();
    // Head dims over 128 (up to 256) hold a 64 x DV O a warpgroup: tiles of
    // 64 keys (80 warp-specialized) and at most two warpgroups (128 rows),
    // within the registers; 176- and 128-key tiles are for head dims up to
    // 128, 80-key tiles for those over.
    const bool wide = a.d > 128 || a.dv > 128;
    const bool wide_tile = c.key_tile == 64 || c.key_tile == 80;
    const bool applies = target.sm == 90 && a.transpose_k && a.d % 64 == 0 && a.dv % 64 == 0 &&
                         a.d <= 256 && a.dv <= 256 &&
                         (wide ? wide_tile && (rows != 192 || ws) : c.key_tile != 80);
    if (!applies) return c;
    // The warp-specialized form is checked on the device with D = DV only.
    // Both forms mask the last tile where the keys end inside it.
    if (schedule.warp_specialized() && a.d != a.dv) return c;
    c.prefill = true;
    c.warp_specialized = schedule.warp_specialized();
    c.warp_rows = 16;
    c.row_warps = c.warp_specialized ? 8 : (rows == 64 || rows == 192 ? rows : 128) / 16;
    c.stages = schedule.stages() >= 2 && schedule.stages() <= 8 ? schedule.stages() : 2;
    while (c.stages > 2 && SmemBytes(a, c) > target.max_smem_per_block) --c.stages;
    if (SmemBytes(a, c) > target.max_smem_per_block) {
      c.prefill = false;
      c.warp_specialized = false;
    }
    // The overlap refills two steps later.
    c.overlap = !c.warp_specialized && schedule.overlap() && c.stages >= 3;
    // The warp-specialized form's tiles may arrive by TMA (3-D tensor maps,
    // one box row a key or query row of one batch entry).
    c.tma = c.warp_specialized && schedule.tma();
    if (c.warp_specialized) {
      c.blocks = std::min<int64_t>(a.batch * ((a.m + 127) / 128), std::max(1, target.sm_count));
    }
    return c;
  }
  c.warp_rows = schedule.warp_rows() == 32 ? 32 : 16;
  c.wgmma = schedule.warp_rows() == 64 && target.sm == 90 && a.d == 64 && a.dv == 64;
  // TMA's boxes past a batch entry's last key would read the next entry's
  // keys, so a masked last tile takes cp.async copies (which repeat the last
  // key) instead.
  c.tma = schedule.tma() && target.sm == 90 && a.d % 64 == 0 && a.dv % 64 == 0 &&
          a.n % kTileN == 0 && a.batch * std::max(a.n, a.d) < (int64_t{1} << 31);
  // 32-row warps hold twice the S and O registers (about 230 a thread):
  // at most 256 threads a block.
  const int max_warps = c.warp_rows == 32 ? kMaxWarps / 2 : kMaxWarps;
  const int rows = schedule.block_rows();
  const bool rows_ok =
      (rows == 16 || rows == 32 || rows == 64 || rows == 128 || rows == 256) && rows >= c.warp_rows;
  c.row_warps = (rows_ok ? rows : 64) / c.warp_rows;
  if (c.wgmma) c.row_warps = 4;  // one warpgroup, one key group
  const int w = schedule.warps();
  if (!c.wgmma && w > 0 && w % c.row_warps == 0 && w <= max_warps) {
    const int groups = w / c.row_warps;
    if (groups == 1 || groups == 2 || groups == 4) c.key_groups = groups;
  }
  while (KeyTiles(a) % c.key_groups != 0) c.key_groups /= 2;  // whole steps
  // Fewer key groups where even a two-stage ring of theirs does not fit
  // (D = 128: 35 KiB a tile).
  auto fits_two_stages = [&] {
    AttentionConfig two = c;
    two.stages = 2;
    return SmemBytes(a, two) <= target.max_smem_per_block;
  };
  while (c.key_groups > 1 && !fits_two_stages()) c.key_groups /= 2;
  c.stages = schedule.stages() >= 2 && schedule.stages() <= 8 ? schedule.stages() : 4;
  const int64_t steps = KeyTiles(a) / c.key_groups;  // with one split
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

namespace {

const char* AttentionDecodeSource() {
  // backends/cuda/attention_decode.cuh, embedded at build time.
  return
#include "cuda_attention_decode.inc"
      ;
}

const char* AttentionPrefillSource() {
  // backends/cuda/attention_prefill.cuh, embedded at build time.
  return
#include "cuda_attention_prefill.inc"
      ;
}

const char* AttentionPrefillWsSource() {
  // backends/cuda/attention_prefill_ws.cuh, embedded at build time.
  return
#include "cuda_attention_prefill_ws.inc"
      ;
}

// The parameter list every attention kernel of the family takes; the
// tensor maps named in `maps` (TensorMapArg, in that order) come first.
std::string KernelParams(const std::string& t, const std::string& out_type,
                         const std::vector<std::string>& maps = {}) {
  std::string params = "(";
  for (const std::string& m : maps) {
    absl::StrAppend(&params, "const __grid_constant__ CUtensorMap ", m, ", ");
  }
  return absl::StrCat(params, "const ", t, "* __restrict__ q, const ", t,
                      "* __restrict__ k, const ", t, "* __restrict__ v, ", out_type,
                      "* __restrict__ o, float* __restrict__ ws)");
}

// A 2-D tensor map over `rows` rows of `cols` 16-bit elements in boxes of
// 64 x 64 (a K or V tile's panel: K as [B N][D] or [B D][N], V as [B N][DV]).
TensorMapArg PanelMap(int buffer, yirage::v1::DType dtype, int64_t cols, int64_t rows) {
  TensorMapArg m;
  m.buffer = buffer;
  m.data_type = TmaDataType(dtype);
  m.dims = {cols, rows};
  m.stride_bytes = cols * 2;
  m.box = {64, 64};
  return m;
}

// A 3-D tensor map over `batch` entries of `rows` rows of `cols` 16-bit
// elements in boxes of 64 columns x `box_rows` rows of one entry (the
// warp-specialized prefill form's Q, K and V tiles: past an entry's last
// row the box reads zeros, not the next entry's rows).
TensorMapArg BatchedPanelMap(int buffer, yirage::v1::DType dtype, int64_t cols, int64_t rows,
                             int64_t batch, int box_rows) {
  TensorMapArg m = PanelMap(buffer, dtype, cols, rows);
  m.dims.push_back(batch);
  m.batch_stride_bytes = rows * m.stride_bytes;
  m.box = {64, box_rows, 1};
  return m;
}

}  // namespace

void EmitAttention(const AttentionPattern& a, const AttentionConfig& config,
                   const std::string& name, int q_arg, int k_arg, int v_arg, int out_arg,
                   const std::string& out_type, int workspace_arg, std::string* source,
                   std::vector<KernelLaunch>* launches) {
  if (config.prefill && config.warp_specialized) {
    // attention_prefill_ws.cuh's persistent template: one block a
    // multiprocessor (at most), each over every gridDim.x-th 128-row tile.
    *source += WgmmaHelpersSource();
    *source += WgmmaOpsSource();
    *source += AttentionPrefillWsSource();
    absl::StrAppend(source, "extern \"C\" __global__ void __launch_bounds__(384, 1) ", name,
                    KernelParams(CTypeOf(a.dtype), out_type,
                                 config.tma ? std::vector<std::string>{"tq", "tk", "tv"}
                                            : std::vector<std::string>{}),
                    " {\n", "  (void)ws;\n  yr_attention_prefill_ws_persistent<", CTypeOf(a.dtype),
                    ", ", out_type, ", ", a.d, ", ", a.dv, ", ", config.key_tile, ", ",
                    config.stages, ", ", config.tma ? "true" : "false", ">(q, k, v, o, ", a.batch,
                    ", ", a.m, ", ", a.n, ", ", CudaFloatLiteral(a.scale),
                    config.tma ? ", &tq, &tk, &tv" : "", ");\n}\n");
    KernelLaunch main;
    main.name = name;
    main.grid[0] = config.blocks;
    main.block = 384;
    main.smem_bytes = static_cast<int>(SmemBytes(a, config));
    main.args = {q_arg, k_arg, v_arg, out_arg, out_arg};
    if (config.tma) {
      main.tensor_maps = {BatchedPanelMap(q_arg, a.dtype, a.d, a.m, a.batch, 128),
                          BatchedPanelMap(k_arg, a.dtype, a.d, a.n, a.batch, config.key_tile),
                          BatchedPanelMap(v_arg, a.dtype, a.dv, a.n, a.batch, config.key_tile)};
    }
    launches->push_back(main);
    return;
  }
  if (config.prefill) {
    // The device code is attention_prefill.cuh's template; the kernel
    // instantiates it for this chain.
    *source += WgmmaHelpersSource();
    *source += WgmmaOpsSource();
    *source += AttentionPrefillSource();
    const int threads = 32 * config.row_warps;
    absl::StrAppend(source, "extern \"C\" __global__ void __launch_bounds__(", threads, ", 1) ",
                    name, KernelParams(CTypeOf(a.dtype), out_type), " {\n",
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
  const int64_t ns = KeyTiles(a) * kTileN / splits;  // the last split's last tile masked
  const bool workspace = splits > 1 && !config.cluster_merge && !config.spin_merge;
  const int merge_kind = splits == 1             ? 0
                         : config.spin_merge     ? 4
                         : !config.cluster_merge ? 2
                         : config.push_merge     ? 3
                                                 : 1;
  // The device code is attention_decode.cuh's template; the kernel (and
  // the merge kernel of merge 2) instantiates it for this chain.
  *source += WgmmaHelpersSource();
  *source += WgmmaOpsSource();
  *source += AttentionDecodeSource();
  const std::string t = CTypeOf(a.dtype);
  const std::string main_out = workspace ? std::string("float") : out_type;
  const int threads = 32 * config.row_warps * config.key_groups;
  const char* merge_text =
      merge_kind == 0   ? "none"
      : merge_kind == 1 ? "thread-block cluster (distributed shared memory)"
      : merge_kind == 3 ? "thread-block cluster (rows pushed to the merging block)"
      : merge_kind == 4 ? "in the kernel, through the workspace (cooperative launch)"
                        : "workspace + merge kernel";
  absl::StrAppend(
      source, "// attention: B=", a.batch, " M=", a.m, " N=", a.n, " D=", a.d, " DV=", a.dv, ", ",
      splits, " key split(s) of ", ns, " keys",
      a.n % kTileN != 0 ? absl::StrCat(" (the last ", ns * splits - a.n, " masked)") : "", "; ",
      config.row_warps, " row warps of ", config.warp_rows, " rows x ", config.key_groups,
      " key group(s), ", config.stages, " stages", config.tma ? " (TMA)" : "",
      "; splits merge: ", merge_text, ".\n");
  absl::StrAppend(
      source, "extern \"C\" __global__ void ",
      merge_kind == 1 || merge_kind == 3 ? absl::StrCat("__cluster_dims__(1, 1, ", splits, ") ")
                                         : std::string(),
      "__launch_bounds__(", threads, ") ", name,
      KernelParams(t, main_out,
                   config.tma ? std::vector<std::string>{"tk", "tv"} : std::vector<std::string>{}),
      " {\n  yr_attention_decode<", t, ", ", main_out, ", ", a.batch, ", ", a.m, ", ", a.n, ", ",
      a.d, ", ", a.dv, ", ", ns, ", ", splits, ", ", config.row_warps, ", ", config.warp_rows / 16,
      ", ", config.key_groups, ", ", config.stages, ", ", merge_kind, ", ",
      config.wgmma ? "true" : "false", ", ", a.transpose_k ? "true" : "false", ", ",
      config.tma ? "true" : "false", ">(q, k, v, o, ws, ", CudaFloatLiteral(a.scale),
      config.tma ? ", &tk, &tv" : "", ");\n}\n");
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
  if (config.tma) {
    main.tensor_maps = {a.transpose_k ? PanelMap(k_arg, a.dtype, a.d, a.batch * a.n)
                                      : PanelMap(k_arg, a.dtype, a.n, a.batch * a.d),
                        PanelMap(v_arg, a.dtype, a.dv, a.batch * a.n)};
  }
  launches->push_back(main);
  if (workspace) {
    absl::StrAppend(source, "// merges the ", splits, " key splits of ", name,
                    "\nextern \"C\" __global__ void __launch_bounds__(256) ", name,
                    "_merge(const float* __restrict__ ws, ", out_type,
                    "* __restrict__ o) {\n  yr_attention_merge_splits<", out_type, ", ", a.batch,
                    ", ", a.m, ", ", a.dv, ", ", splits, ">(ws, o);\n}\n");
    KernelLaunch merge;
    merge.name = name + "_merge";
    merge.grid[0] = (a.batch * a.m * a.dv + 255) / 256;
    merge.block = 256;
    merge.args = {workspace_arg, out_arg};
    launches->push_back(merge);
  }
}

}  // namespace yirage::backends::cuda
