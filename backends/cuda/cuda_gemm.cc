#include "backends/cuda/cuda_gemm.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/codegen_util.h"
#include "backends/cuda/cuda_plan_context.h"
#include "backends/cuda/cuda_wgmma.h"
#include "core/kernel_family.h"

namespace yirage::backends::cuda {
namespace {

const char* GemmSource() {
  // backends/cuda/gemm_sm90.cuh, embedded at build time.
  return
#include "cuda_gemm_sm90.inc"
      ;
}

const char* GemmSm80Source() {
  // backends/cuda/gemm_sm80.cuh, embedded at build time.
  return
#include "cuda_gemm_sm80.inc"
      ;
}

// The sm_80 form's K elements a stage (yr_gemm_sm80_cfg::bk).
constexpr int64_t kSm80StageK = 64;
// A warp's piece of the sm_80 form's tile along an axis: 64 where the tile
// is at least 128, else 32 (yr_gemm_sm80_cfg: m16 rows, 32-column quads,
// at most 128 accumulators a thread).
int Sm80WarpPiece(int tile) { return tile >= 128 ? 64 : 32; }

// yr_gemm_sm90_cfg::smem_bytes: the ring (1024-aligned; a stage holds a
// 128-byte row of K for each of the tile's rows of A and B), its
// mbarriers, a word a consumer.
int64_t RingBytes(int tile_m, int tile_n, int stages) {
  return 1024 + int64_t{stages} * (tile_m + tile_n) * 128 + 2 * int64_t{stages} * 8 + 16;
}

// Element bytes and K elements a stage (yr_gemm_sm90_cfg::bk).
int64_t ElemBytes(yirage::v1::DType dtype) { return dtype == yirage::v1::FLOAT32 ? 4 : 2; }
int64_t StageK(yirage::v1::DType dtype) { return 128 / ElemBytes(dtype); }

// Split-K's K ranges have at least this many K blocks (a stage's K): with
// fewer, writing and adding a range's float partial sums (a tile of
// floats) costs about what its products save.
constexpr int64_t kMinKBlocksPerSplit = 16;
// More ranges than this add partial sums without filling more of the chip.
constexpr int64_t kMaxSplits = 16;

}  // namespace

int64_t GemmSm80SmemBytes(int tile_m, int tile_n, int stages) {
  return int64_t{stages} * (tile_m + tile_n) * kSm80StageK * 2 + 16;
}

int GemmSm80Threads(int tile_m, int tile_n) {
  return 32 * (tile_m / Sm80WarpPiece(tile_m)) * (tile_n / Sm80WarpPiece(tile_n));
}

yirage::v1::MatchLimits GemmLimits() {
  yirage::v1::MatchLimits limits;
  limits.add_dtypes(yirage::v1::FLOAT16);
  limits.add_dtypes(yirage::v1::BFLOAT16);
  limits.set_k_multiple(8);
  limits.set_b_kn_n_multiple(8);
  // Fewer rows are the streamed matmul's (decode shapes read the weights once).
  limits.set_min_rows(65);
  return limits;
}

yirage::v1::MatchLimits GemmSm90PointLimits(yirage::v1::DType dtype) {
  yirage::v1::MatchLimits limits;
  limits.set_batch_kn_k_multiple(StageK(dtype));
  return limits;
}

yirage::v1::MatchLimits GemmTf32Limits() {
  yirage::v1::MatchLimits limits;
  limits.add_dtypes(yirage::v1::FLOAT32);
  limits.set_b_by_rows(true);  // wgmma reads tf32 operands K-major only
  limits.set_min_rtol(kTf32MinRtol);
  limits.set_k_multiple(4);  // TMA: A's and B's rows in multiples of 16 bytes
  limits.set_min_rows(65);
  return limits;
}

namespace {

// A plan of either form holding the chain's match and dtype, or nullopt
// where `ops` are no GEMM chain or the output is not in A's dtype (both
// kernels store A's).
std::optional<GemmPlan> MatchedPlan(const core::Graph& graph, const std::vector<int>& ops,
                                    yirage::v1::DType out_dtype) {
  std::optional<core::GemmMatch> match = core::MatchGemm(graph, ops);
  if (!match.has_value()) return std::nullopt;
  GemmPlan plan;
  plan.match = *std::move(match);
  plan.dtype = graph.tensor(plan.match.a).dtype;
  if (out_dtype != plan.dtype) return std::nullopt;
  return plan;
}

std::optional<GemmPlan> PlanGemmSm80(const core::Graph& graph, const std::vector<int>& ops,
                                     yirage::v1::DType out_dtype, const CudaTarget& target,
                                     const yirage::v1::GemmSchedule& knobs) {
  // cp.async, ldmatrix and mma.sync with 16-bit operands: sm_80 on.
  if (target.sm < 80 || !core::WithinLimits(GemmLimits(), yirage::v1::GEMM, graph, ops)) {
    return std::nullopt;
  }
  std::optional<GemmPlan> matched = MatchedPlan(graph, ops, out_dtype);
  if (!matched.has_value()) return std::nullopt;
  GemmPlan plan = *std::move(matched);
  plan.mma_sync = true;
  plan.pingpong = false;
  plan.cluster_m = plan.cluster_n = 1;
  plan.tile_m = knobs.tile_m() != 0 ? knobs.tile_m() : 128;
  plan.tile_n = knobs.tile_n() != 0 ? knobs.tile_n() : 128;
  plan.stages = knobs.stages() != 0 ? knobs.stages() : 3;
  if ((plan.tile_m != 64 && plan.tile_m != 128) ||
      (plan.tile_n != 64 && plan.tile_n != 128 && plan.tile_n != 256)) {
    return std::nullopt;
  }
  if (knobs.pingpong() || knobs.cluster_m() > 1 || knobs.cluster_n() > 1 || plan.stages < 2) {
    return std::nullopt;
  }
  plan.warps_m = plan.tile_m / Sm80WarpPiece(plan.tile_m);
  plan.warps_n = plan.tile_n / Sm80WarpPiece(plan.tile_n);
  // Gated: a warp holds the same 32-column quads of both products, so its
  // piece is 64 products wide (tile_n 128 or 256).
  const bool gated = plan.match.b2 >= 0;
  if (gated && Sm80WarpPiece(plan.tile_n) != 64) return std::nullopt;
  plan.smem_bytes = GemmSm80SmemBytes(plan.tile_m, plan.tile_n, plan.stages);
  if (plan.smem_bytes > target.max_smem_per_block) return std::nullopt;
  const int64_t tiles = plan.match.batch * CeilDiv(plan.match.m, plan.tile_m) *
                        CeilDiv(plan.match.n, plan.tile_n / (gated ? 2 : 1));
  // 32-bit rows, columns and block indices (the template's int math).
  constexpr int64_t kLimit = (int64_t{1} << 31) - 1;
  if (tiles > kLimit || plan.match.batch * plan.match.m > kLimit ||
      plan.match.batch * plan.match.n > kLimit || plan.match.k > kLimit) {
    return std::nullopt;
  }
  // Split-K: the knobs' ranges, or where the tiles are fewer than the
  // multiprocessors as many as fill them, each of at least
  // kMinKBlocksPerSplit K blocks. Every tile is split alike (a block a
  // range; there is no persistent wave to balance).
  const int64_t kblocks = CeilDiv(plan.match.k, kSm80StageK);
  if (knobs.split_k() < 0 || knobs.split_k() > std::min(kblocks, kMaxSplits)) return std::nullopt;
  if (knobs.split_k() != 0) {
    plan.splits = knobs.split_k();
  } else if (tiles < target.sm_count) {
    plan.splits = static_cast<int>(std::max<int64_t>(
        1, std::min({target.sm_count / tiles, kblocks / kMinKBlocksPerSplit, kMaxSplits})));
  }
  plan.split_tiles = plan.splits > 1 ? tiles : 0;
  if (tiles * plan.splits > kLimit) return std::nullopt;
  plan.blocks = tiles * plan.splits;
  return plan;
}

}  // namespace

std::optional<GemmPlan> PlanGemm(const core::Graph& graph, const std::vector<int>& ops,
                                 yirage::v1::DType out_dtype, const CudaTarget& target,
                                 const yirage::v1::GemmSchedule& knobs) {
  // The sm_80 form where asked for, and by default off Hopper.
  // (TMA, wgmma and setmaxnreg, the Hopper form's, are sm_90a only.)
  if (knobs.mma_sync() || target.sm != 90) {
    return PlanGemmSm80(graph, ops, out_dtype, target, knobs);
  }
  if (!core::WithinLimits(GemmLimits(), yirage::v1::GEMM, graph, ops) &&
      !core::WithinLimits(GemmTf32Limits(), yirage::v1::GEMM, graph, ops)) {
    return std::nullopt;
  }
  std::optional<GemmPlan> matched = MatchedPlan(graph, ops, out_dtype);
  if (!matched.has_value()) return std::nullopt;
  GemmPlan plan = *std::move(matched);
  // The kernel's rows, columns and K rows over the batch in 32-bit
  // coordinates (TMA's); B [K, N]'s K tail would read the next product's
  // rows (gemm_sm90.cuh).
  const int64_t batch = plan.match.batch;
  constexpr int64_t kCoordLimit = int64_t{1} << 31;
  if (batch * plan.match.m >= kCoordLimit || batch * plan.match.n >= kCoordLimit ||
      batch * plan.match.k >= kCoordLimit) {
    return std::nullopt;
  }
  if (batch > 1 && !plan.match.transpose_b && plan.match.k % StageK(plan.dtype) != 0) {
    return std::nullopt;
  }
  if (knobs.tile_m() != 0) plan.tile_m = knobs.tile_m();
  if (knobs.tile_n() != 0) plan.tile_n = knobs.tile_n();
  if (knobs.stages() != 0) plan.stages = knobs.stages();
  plan.pingpong = knobs.pingpong();
  if (knobs.cluster_m() != 0 || knobs.cluster_n() != 0) {
    plan.cluster_m = std::max(1, knobs.cluster_m());
    plan.cluster_n = std::max(1, knobs.cluster_n());
  }
  // The template's instantiations (gemm_sm90.cuh's static_asserts): a
  // consumer's rows whole m64 wgmmas, at most 128 accumulators a thread.
  const bool tiles_ok = plan.pingpong
                            ? plan.tile_m == 128 && plan.tile_n == 128
                            : (plan.tile_m == 128 && (plan.tile_n == 128 || plan.tile_n == 256)) ||
                                  (plan.tile_m == 256 && plan.tile_n == 128);
  if (!tiles_ok) return std::nullopt;
  if (plan.cluster_m < 1 || plan.cluster_n < 1 || plan.cluster_m * plan.cluster_n > 2) {
    return std::nullopt;
  }
  // A cluster's second block along an axis of one tile would compute
  // nothing: the cluster turns to the other axis where that has tiles and
  // B's panels allow it, else it is one block.
  const int64_t tiles_m = CeilDiv(plan.match.m, plan.tile_m);
  // Gated: a tile's tile_n products are tile_n / 2 of C's columns.
  const bool gated = plan.match.b2 >= 0;
  if (gated && plan.tile_n < 128) return std::nullopt;
  const int64_t tiles_n = CeilDiv(plan.match.n, plan.tile_n / (gated ? 2 : 1));
  if (plan.cluster_m == 2 && tiles_m < 2) {
    plan.cluster_m = 1;
    plan.cluster_n = tiles_n >= 2 ? 2 : 1;
  } else if (plan.cluster_n == 2 && tiles_n < 2) {
    plan.cluster_n = 1;
    plan.cluster_m =
        tiles_m >= 2 && (plan.match.transpose_b || (plan.tile_n / 64) % 2 == 0) ? 2 : 1;
  }
  if (!plan.match.transpose_b && (plan.tile_n / 64) % plan.cluster_m != 0) return std::nullopt;
  if (plan.stages < 2) return std::nullopt;
  plan.smem_bytes = RingBytes(plan.tile_m, plan.tile_n, plan.stages);
  if (plan.smem_bytes > target.max_smem_per_block) return std::nullopt;
  // Persistent: at most one block a multiprocessor, whole clusters. The
  // units of work are the cluster tiles, whole but for those of the last,
  // partial wave (all of them where there are fewer than fit at once),
  // which split-K cuts into K ranges so that the last wave's units are
  // more and shorter.
  const int cluster = plan.cluster_m * plan.cluster_n;
  const int64_t ctiles =
      batch * CeilDiv(tiles_m, plan.cluster_m) * CeilDiv(tiles_n, plan.cluster_n);
  const int64_t max_clusters = std::max(1, target.sm_count / cluster);
  const int64_t kblocks = CeilDiv(plan.match.k, StageK(plan.dtype));
  if (knobs.split_k() < 0 || knobs.split_k() > std::min(kblocks, kMaxSplits)) return std::nullopt;
  const int64_t last_wave = ctiles % max_clusters;
  if (knobs.split_k() != 0) {
    plan.splits = knobs.split_k();
    plan.split_tiles = plan.splits > 1 ? (last_wave > 0 ? last_wave : ctiles) : 0;
  } else if (last_wave > 0) {
    plan.splits = static_cast<int>(std::max<int64_t>(
        1, std::min({max_clusters / last_wave, kblocks / kMinKBlocksPerSplit, kMaxSplits})));
    plan.split_tiles = plan.splits > 1 ? last_wave : 0;
  }
  const int64_t units = ctiles + plan.split_tiles * (plan.splits - 1);
  plan.blocks = std::min(units, max_clusters) * cluster;
  return plan;
}

int64_t GemmWorkspaceBytes(const GemmPlan& plan) {
  return plan.split_tiles * plan.cluster_m * plan.cluster_n * plan.splits * plan.tile_m *
         plan.tile_n * 4;
}

int64_t GemmCounterBytes(const GemmPlan& plan) {
  return plan.split_tiles * plan.cluster_m * plan.cluster_n * 2 * 4;
}

std::string GemmSummary(const GemmPlan& p) {
  if (p.mma_sync) {
    return absl::StrCat("GEMM (cp.async, mma.sync; tile ", p.tile_m, " x ", p.tile_n, ", ",
                        p.stages, " stages, ",
                        p.splits > 1 ? absl::StrCat("split-K ", p.splits, ", ") : "", p.warps_m,
                        " x ", p.warps_n, " warps, ", p.blocks, " blocks), ",
                        p.match.batch > 1 ? absl::StrCat("batch ", p.match.batch, " x ") : "", "M ",
                        p.match.m, ", N ", p.match.n, ", K ", p.match.k,
                        p.match.b2 >= 0 ? ", gated (two B, one C tile of tile_n / 2 columns)" : "",
                        ", epilogue of ", p.match.epilogue.size(), " ops");
  }
  return absl::StrCat(
      "Hopper GEMM (TMA, wgmma; ", p.pingpong ? "ping-pong" : "cooperative", ", tile ", p.tile_m,
      " x ", p.tile_n, ", ", p.stages, " stages, cluster ", p.cluster_m, " x ", p.cluster_n,
      p.splits > 1 ? absl::StrCat(", split-K ", p.splits, " on ", p.split_tiles, " cluster tiles")
                   : "",
      ", ", p.blocks, " blocks), ",
      p.match.batch > 1 ? absl::StrCat("batch ", p.match.batch, " x ") : "", "M ", p.match.m,
      ", N ", p.match.n, ", K ", p.match.k,
      p.match.b2 >= 0 ? ", gated (two B, one C tile of tile_n / 2 columns)" : "", ", epilogue of ",
      p.match.epilogue.size(), " ops");
}

namespace {

// A step's expression of the running value `v`: a unary op, or a binary
// one with `other` (a tensor's read; empty: the step's constant).
std::string StepExpr(const core::GemmMatch::Step& step, const std::string& v,
                     const std::string& other = "") {
  if (step.operand == core::GemmMatch::Step::Operand::kNone) {
    core::OpInfo op;
    op.type = step.type;
    op.gelu_tanh = step.gelu_tanh;
    return UnaryExpr(op, v, /*fast=*/true);
  }
  const std::string o = other.empty() ? Lit(step.scalar) : other;
  return step.value_first ? BinaryExpr(step.type, v, o) : BinaryExpr(step.type, o, v);
}

}  // namespace

void EmitGemm(const GemmPlan& plan, const core::Graph& graph, const std::string& name, int out_arg,
              int workspace_arg, int counter_arg, const std::function<int(int)>& read_arg,
              std::string* source, std::vector<KernelLaunch>* launches) {
  const core::GemmMatch& m = plan.match;
  const std::string t = CType(plan.dtype);
  if (plan.mma_sync) {
    *source += GemmSm80Source();
  } else {
    *source += WgmmaHelpersSource();
    *source += WgmmaOpsSource();
    *source += GemmSource();
  }
  // The epilogue: each step on the float accumulator, in the chain's order,
  // its tensors read in their own dtype.
  std::string members, params, inits, body;
  std::vector<int> operand_args;
  for (size_t i = 0; i < m.epilogue.size(); ++i) {
    const core::GemmMatch::Step& step = m.epilogue[i];
    std::string other;  // a tensor's read; empty for a constant or a unary op
    using Operand = core::GemmMatch::Step::Operand;
    if (step.operand == Operand::kRow || step.operand == Operand::kFull) {
      const std::string field = absl::StrCat("t", i);
      const std::string type = CType(graph.tensor(step.tensor).dtype);
      absl::StrAppend(&members, "  const ", type, "* __restrict__ ", field, ";\n");
      absl::StrAppend(&params, ", const ", type, "* __restrict__ ", field);
      absl::StrAppend(&inits, inits.empty() ? "" : ", ", field);
      other = step.operand == Operand::kRow
                  ? absl::StrCat("static_cast<float>(", field, "[col])")
                  : absl::StrCat("static_cast<float>(", field, "[static_cast<long long>(row) * ",
                                 m.n, " + col])");
      operand_args.push_back(read_arg(step.tensor));
    }
    absl::StrAppend(&body, "    v = ", StepExpr(step, "v", other), ";\n");
  }
  const bool gated = m.b2 >= 0;
  std::string gate;
  if (gated) {
    // The two products' chains, then their join.
    std::string lines;
    for (const core::GemmMatch::Step& step : m.gate) {
      absl::StrAppend(&lines, "    p = ", StepExpr(step, "p"), ";\n");
    }
    for (const core::GemmMatch::Step& step : m.up) {
      absl::StrAppend(&lines, "    p2 = ", StepExpr(step, "p2"), ";\n");
    }
    gate = absl::StrCat(
        "  __device__ __forceinline__ float gate(float p, float p2) const {\n", lines,
        "    return ",
        m.join_gate_first ? BinaryExpr(m.join, "p", "p2") : BinaryExpr(m.join, "p2", "p"),
        ";\n  }\n");
  }
  const std::string epi = name + "_epi";
  absl::StrAppend(source, "struct ", epi, " {\n", members, gate,
                  "  __device__ __forceinline__ float operator()(float v, int row, int col) const "
                  "{\n    (void)row;\n    (void)col;\n",
                  body, "    return v;\n  }\n};\n");
  if (plan.mma_sync) {
    const bool split = plan.splits > 1;
    const int threads = 32 * plan.warps_m * plan.warps_n;
    // Two blocks a multiprocessor where a thread's accumulators allow it.
    const int min_blocks = plan.tile_m * plan.tile_n / threads <= 64 ? 2 : 1;
    absl::StrAppend(
        source, "extern \"C\" __global__ void __launch_bounds__(", threads, ", ", min_blocks, ") ",
        name, "(", t, "* __restrict__ c", params, ", const ", t, "* __restrict__ a, const ", t,
        "* __restrict__ b", gated ? absl::StrCat(", const ", t, "* __restrict__ b2") : "",
        split ? ", float* __restrict__ ws, unsigned* __restrict__ flags" : "",
        ") {\n  yr_gemm_sm80<yr_gemm_sm80_cfg<", t, ", ", plan.tile_m, ", ", plan.tile_n, ", ",
        plan.warps_m, ", ", plan.warps_n, ", ", plan.stages, ", ", m.transpose_b ? "true" : "false",
        ", ", plan.group, ", ", gated ? "true" : "false", ">, ", epi, ">(a, b, c, ", m.m, ", ", m.n,
        ", ", m.k, ", ", m.n, ", ", epi, "{", inits, "}, ", m.batch, gated ? ", b2" : ", nullptr",
        split ? absl::StrCat(", yr_gemm80_split{", plan.splits, ", ws, flags}") : "", ");\n}\n");
    KernelLaunch launch;
    launch.name = name;
    launch.grid[0] = plan.blocks;
    launch.block = threads;
    launch.smem_bytes = static_cast<int>(plan.smem_bytes);
    launch.args.push_back(out_arg);
    launch.args.insert(launch.args.end(), operand_args.begin(), operand_args.end());
    launch.args.push_back(read_arg(m.a));
    launch.args.push_back(read_arg(m.b));
    if (gated) launch.args.push_back(read_arg(m.b2));
    if (split) {
      launch.args.push_back(workspace_arg);
      launch.args.push_back(counter_arg);
    }
    launches->push_back(launch);
    return;
  }
  const std::string cfg = absl::StrCat(
      "yr_gemm_sm90_cfg<", t, ", ", plan.tile_m, ", ", plan.tile_n, ", ", plan.stages, ", ",
      m.transpose_b ? "true" : "false", ", ", plan.pingpong ? "true" : "false", ", ",
      plan.cluster_m, ", ", plan.cluster_n, ", ", plan.group, ", ", gated ? "true" : "false", ">");
  const int cluster = plan.cluster_m * plan.cluster_n;
  const bool split = plan.splits > 1;
  absl::StrAppend(
      source, "extern \"C\" __global__ void __launch_bounds__(384, 1) ",
      cluster > 1 ? absl::StrCat("__cluster_dims__(", cluster, ", 1, 1) ") : "", name,
      "(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b, ",
      gated ? "const __grid_constant__ CUtensorMap b2, " : "", t, "* __restrict__ c", params,
      split ? ", float* __restrict__ ws, unsigned* __restrict__ flags" : "", ") {\n  yr_gemm_sm90<",
      cfg, ", ", epi, ">(a, b, c, ", m.m, ", ", m.n, ", ", m.k, ", ", m.n, ", ", epi, "{", inits,
      "}",
      split ? absl::StrCat(", yr_gemm_split{", plan.splits, ", ", plan.split_tiles, ", ws, flags}")
            : ", yr_gemm_split()",
      gated ? ", &b2" : ", nullptr", ", ", m.batch, ");\n}\n");
  KernelLaunch launch;
  launch.name = name;
  launch.grid[0] = plan.blocks;
  launch.block = 384;
  launch.smem_bytes = static_cast<int>(plan.smem_bytes);
  launch.args.push_back(out_arg);
  launch.args.insert(launch.args.end(), operand_args.begin(), operand_args.end());
  if (split) {
    launch.args.push_back(workspace_arg);
    launch.args.push_back(counter_arg);
  }
  // A: dims {K, M}, box {a stage's K, tile rows a block copies}; B: [N, K]
  // like A, or [K, N] in 64-column panels of 64 rows (16-bit types only).
  // A batch's products follow each other along the outer dim.
  const int64_t elem = ElemBytes(plan.dtype);
  const int bk = static_cast<int>(StageK(plan.dtype));
  TensorMapArg a;
  a.buffer = read_arg(m.a);
  a.data_type = TmaDataType(plan.dtype);
  a.dims = {m.k, m.batch * m.m};
  a.stride_bytes = m.k * elem;
  a.box = {bk, plan.tile_m / plan.cluster_n};
  TensorMapArg b;
  b.buffer = read_arg(m.b);
  b.data_type = a.data_type;
  if (m.transpose_b) {
    b.dims = {m.k, m.batch * m.n};
    b.stride_bytes = m.k * elem;
    b.box = {bk, plan.tile_n / (gated ? 2 : 1) / plan.cluster_m};
  } else {
    b.dims = {m.n, m.batch * m.k};
    b.stride_bytes = m.n * elem;
    b.box = {64, 64};
  }
  launch.tensor_maps = {a, b};
  if (gated) {
    TensorMapArg b2 = b;
    b2.buffer = read_arg(m.b2);
    launch.tensor_maps.push_back(b2);
  }
  launches->push_back(launch);
}

}  // namespace yirage::backends::cuda
