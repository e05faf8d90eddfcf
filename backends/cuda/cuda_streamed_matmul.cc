#include "backends/cuda/cuda_streamed_matmul.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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

const char* StreamedMatmulSource() {
  // backends/cuda/streamed_matmul.cuh, embedded at build time: the device
  // code of every form (yr_streamed_matmul, yr_streamed_combine_splits,
  // yr_streamed_matmul_regs), which the kernels instantiate.
  return
#include "cuda_streamed_matmul.inc"
      ;
}

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
  const size_t ng = m.col_scales.size();
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
  std::vector<std::string> scale_names;
  for (size_t i = 0; i < ng; ++i) {
    params.push_back(absl::StrCat("const ", t, "* __restrict__ g", i));
    args.push_back(m.col_scales[i]);
    scale_names.push_back(absl::StrCat("g", i));
  }
  // The device code is streamed_matmul.cuh's templates (after the wgmma
  // templates its wgmma form calls; guarded, so a second streamed matmul in
  // the plan's source adds nothing); each kernel below instantiates one for
  // this chain.
  *source += WgmmaHelpersSource();
  *source += WgmmaOpsSource();
  *source += StreamedMatmulSource();
  auto flag = [](bool b) { return b ? "true" : "false"; };
  // The template call's operands: the weights the chain lacks are nullptr,
  // the column scales one yr_ptrs value, eps a literal.
  const std::string w2_arg = m.w2 >= 0 ? "w2" : "nullptr";
  const std::string scales_arg =
      absl::StrCat("yr_ptrs<", t, ", ", ng, ">{{", absl::StrJoin(scale_names, ", "), "}}");
  const std::string eps = CudaFloatLiteral(m.eps);
  const int epi = m.epilogue == core::StreamedMatmulMatch::Epilogue::kSiluMul ? 1 : 0;
  const std::string cluster_dims =
      p.cluster ? absl::StrCat("__cluster_dims__(1, ", p.splits, ", 1) ") : "";
  const bool split = p.splits > 1;
  if (p.form == StreamedMatmulPlan::kRegisters) {
    params.push_back(absl::StrCat(out_type, "* __restrict__ o"));
    args.push_back(out_arg);
    const bool global_sum = split && !p.cluster;
    params.push_back("float* __restrict__ ws");
    args.push_back(global_sum ? workspace_arg : out_arg);
    params.push_back("unsigned* __restrict__ cnt");
    args.push_back(global_sum ? counter_arg : out_arg);
    const int64_t bn = RegistersColumns(p);
    absl::StrAppend(source, "// streamed matmul, weights to registers: M=", p.m, " K=", p.k,
                    " N=", p.n, ", ", nw, " weight(s), ", p.splits, " K split(s), ", p.warps,
                    " warps, ", p.depth, " step(s) loaded ahead\n");
    absl::StrAppend(source, "extern \"C\" __global__ void __launch_bounds__(", p.warps * 32, ") ",
                    cluster_dims, name, "(", absl::StrJoin(params, ", "), ") {\n");
    absl::StrAppend(source, "  yr_streamed_matmul_regs<", t, ", ", out_type, ", ", p.m, ", ", p.k,
                    ", ", p.n, ", ", nw, ", ", p.splits, ", ", p.warps, ", ", bn == 64 ? 8 : 4,
                    ", ", p.depth, ", ", ng, ", ", flag(m.rms), ", ", epi, ", ", flag(p.cluster),
                    ">(x_in, w1, ", w2_arg, ", ", scales_arg, ", o, ws, cnt, ", eps, ");\n}\n");
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
  const std::string main_out = combine ? std::string("float") : out_type;
  params.push_back(absl::StrCat(main_out, "* __restrict__ o"));
  args.push_back(combine ? workspace_arg : out_arg);
  params.push_back("float* __restrict__ ws");
  args.push_back(combine ? workspace_arg : out_arg);
  const bool wgmma = p.form == StreamedMatmulPlan::kWgmma;
  const int threads = p.warps * 32;
  absl::StrAppend(source, "// streamed matmul", wgmma ? " (tensor cores: wgmma)" : "", ": M=", p.m,
                  " K=", p.k, " N=", p.n, ", ", nw, " weight(s), rank ", p.r, ", ", p.splits,
                  " K split(s)", combine ? " (combine kernel)" : (p.cluster ? " in a cluster" : ""),
                  ", ", p.stages, " stages, ", threads, " threads\n");
  absl::StrAppend(source, "extern \"C\" __global__ void __launch_bounds__(", threads, ") ",
                  cluster_dims, name, "(", absl::StrJoin(params, ", "), ") {\n");
  absl::StrAppend(
      source, "  yr_streamed_matmul<", t, ", ", main_out, ", ", p.m, ", ", p.m_tiles, ", ", p.k,
      ", ", p.n, ", ", nw, ", ", p.r, ", ", p.splits, ", ", p.stages, ", ", threads, ", ", ng, ", ",
      flag(wgmma), ", ", flag(m.rms), ", ", epi, ", ", flag(p.cluster), ">(x_in, w1, ", w2_arg,
      ", ", p.r > 0 ? "la, lb" : "nullptr, nullptr", ", ", scales_arg, ", o, ws, ", eps, ");\n}\n");
  KernelLaunch main;
  main.name = name;
  main.grid[0] = p.n / kTileN;
  main.grid[1] = p.splits;
  main.block = threads;
  main.smem_bytes = static_cast<int>(SmemBytes(p));
  main.args = args;
  launches->push_back(main);
  if (combine) {
    absl::StrAppend(source, "// adds the ", p.splits, " K splits of ", name,
                    " and applies its epilogue\n");
    absl::StrAppend(source, "extern \"C\" __global__ void __launch_bounds__(256) ", name,
                    "_combine(const float* __restrict__ ws, ", out_type, "* __restrict__ o) {\n");
    absl::StrAppend(source, "  yr_streamed_combine_splits<", out_type, ", ", p.m, ", ", p.k, ", ",
                    p.n, ", ", nw, ", ", p.splits, ", ", flag(m.rms), ", ", epi, ">(ws, o, ", eps,
                    ");\n}\n");
    KernelLaunch combine;
    combine.name = name + "_combine";
    combine.grid[0] = (p.m * p.n + 255) / 256;
    combine.block = 256;
    combine.args = {workspace_arg, out_arg};
    launches->push_back(combine);
  }
}

}  // namespace yirage::backends::cuda
