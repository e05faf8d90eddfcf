#include "backends/cuda/cuda_codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/code_writer.h"
#include "backends/codegen_util.h"
#include "backends/cuda/cuda_attention.h"
#include "backends/cuda/cuda_cublaslt.h"
#include "backends/cuda/cuda_gemm.h"
#include "backends/cuda/cuda_plan_context.h"
#include "backends/cuda/cuda_streamed_matmul.h"
#include "core/library_matmul.h"
#include "core/plan_resolution.h"
#include "core/row_group.h"
#include "nlohmann/json.hpp"

namespace yirage::backends::cuda {
namespace {

using core::Graph;
using ::yirage::backends::CommentText;
using yirage::v1::KernelPlan;
using yirage::v1::Schedule;

// The buffer id a family kernel writes tensor `t` to: its plan buffer or
// its one graph output slot; nullopt when it has more destinations than one.
std::optional<int> SingleDestination(const PlanContext& ctx, int t) {
  const bool scratch = ctx.scratch_buffer[t] >= 0;
  if (ctx.out_position[t].size() + (scratch ? 1 : 0) != 1) return std::nullopt;
  return scratch ? ctx.PlanBufferId(ctx.scratch_buffer[t])
                 : ctx.graph.num_inputs() + ctx.out_position[t][0];
}

// A fused attention kernel (cuda_attention.h) for `kernel`, when its output
// has one destination; false (nothing emitted) otherwise.
bool EmitAttentionKernel(PlanContext& ctx, const KernelPlan& kernel, int kernel_index,
                         const AttentionPattern& attention, Code* code) {
  const int t = attention.out;
  const std::optional<int> out_arg = SingleDestination(ctx, t);
  if (!out_arg.has_value()) return false;
  const std::string out_type =
      ctx.scratch_buffer[t] >= 0 ? ctx.ScratchType(t) : CType(ctx.graph.tensor(t).dtype);
  const yirage::v1::AttentionSchedule& knobs = kernel.schedule().attention();
  AttentionConfig config = PlanAttention(attention, ctx.target, knobs);
  // The decode forms hold head dims up to 128; wider ones only the prefill
  // form, which the defaults (the backend's choice) take where it applies.
  if (!config.prefill && (attention.d > 128 || attention.dv > 128)) {
    if (knobs.ByteSizeLong() != 0) return false;
    yirage::v1::AttentionSchedule wide;
    wide.set_prefill(true);
    wide.set_block_rows(64);
    wide.set_key_tile(64);
    wide.set_stages(3);
    wide.set_overlap(true);
    config = PlanAttention(attention, ctx.target, wide);
    if (!config.prefill) return false;
  }
  const std::string name = KernelName(ctx.plan_index, kernel_index);
  int workspace_arg = -1;
  if (const int64_t bytes = AttentionWorkspaceBytes(attention, config); bytes > 0) {
    // The in-kernel merge's tile counters start at zero (and stay multiples
    // of the split count between launches).
    workspace_arg = ctx.PlanBufferId(
        ctx.AddBuffer(bytes, config.spin_merge,
                      name + (config.spin_merge ? " attention split partials and tile counters"
                                                : " attention split partials")));
  }
  if (config.prefill && config.warp_specialized) {
    code->L("// kernel ", kernel_index, " '", CommentText(kernel.name()),
            "': fused attention, warp-specialized prefill form (a producer warpgroup, two "
            "consumer warpgroups of 64 query rows on wgmma taking turns, online softmax), ",
            config.blocks, " persistent blocks, every key in tiles of ", config.key_tile,
            " through ", config.stages, " stages", config.tma ? " of TMA copies" : "");
  } else if (config.prefill) {
    code->L("// kernel ", kernel_index, " '", CommentText(kernel.name()),
            "': fused attention, prefill form (wgmma, ", config.row_warps / 4,
            " warpgroup(s) of 64 query rows, online softmax), every key in tiles of ",
            config.key_tile, " through ", config.stages, " stages",
            config.overlap ? ", S issued behind O += P V" : "");
  } else {
    code->L("// kernel ", kernel_index, " '", CommentText(kernel.name()),
            "': fused attention (tensor cores: ",
            config.wgmma ? "wgmma.m64n64k16, one warpgroup" : "mma.m16n8k16", ", online softmax), ",
            config.splits, " key split(s)",
            config.cluster_merge ? " merged in a cluster"
            : config.spin_merge  ? " merged in the kernel (cooperative launch)"
                                 : "",
            ", ", config.row_warps, " row warps",
            config.warp_rows == 16 ? "" : absl::StrCat(" of ", config.warp_rows, " rows"), " x ",
            config.key_groups, " key group(s), ", config.stages, " stages",
            config.tma ? " of TMA copies" : "",
            config.push_merge ? ", rows pushed to the merging block" : "");
  }
  std::string source;
  EmitAttention(attention, config, name, attention.q, attention.k, attention.v, *out_arg, out_type,
                workspace_arg, &source, &ctx.code->launches);
  code->Line(source);
  return true;
}

// A streamed matmul kernel (cuda_streamed_matmul.h) for `kernel`, when its
// output has one destination; false (nothing emitted) otherwise.
bool EmitStreamedMatmulKernel(PlanContext& ctx, const KernelPlan& kernel, int kernel_index,
                              const StreamedMatmulPlan& plan, Code* code) {
  const int t = plan.match.out;
  const std::optional<int> out_arg = SingleDestination(ctx, t);
  if (!out_arg.has_value()) return false;
  const std::string out_type =
      ctx.scratch_buffer[t] >= 0 ? ctx.ScratchType(t) : CType(ctx.graph.tensor(t).dtype);
  const std::string name = KernelName(ctx.plan_index, kernel_index);
  int workspace_arg = -1, counter_arg = -1;
  if (const int64_t bytes = StreamedMatmulWorkspaceBytes(plan); bytes > 0) {
    workspace_arg = ctx.PlanBufferId(ctx.AddBuffer(bytes, false, name + " split-K partial sums"));
  }
  if (const int64_t bytes = StreamedMatmulCounterBytes(plan); bytes > 0) {
    counter_arg = ctx.PlanBufferId(ctx.AddBuffer(bytes, true, name + " split-K tile counters"));
  }
  code->L("// kernel ", kernel_index, " '", CommentText(kernel.name()),
          "': ", StreamedMatmulSummary(plan));
  std::string source;
  EmitStreamedMatmul(plan, name, *out_arg, out_type, workspace_arg, counter_arg, &source,
                     &ctx.code->launches);
  code->Line(source);
  return true;
}

// A GEMM kernel (cuda_gemm.h) for `kernel`, when its output has one
// destination; false (nothing emitted) otherwise.
bool EmitGemmKernel(PlanContext& ctx, const KernelPlan& kernel, int kernel_index,
                    const GemmPlan& plan, Code* code) {
  // (A scratch output is native: a plan buffer in the tensor's dtype.)
  const std::optional<int> out_arg = SingleDestination(ctx, plan.match.out);
  if (!out_arg.has_value()) return false;
  const std::string name = KernelName(ctx.plan_index, kernel_index);
  int workspace_arg = -1, counter_arg = -1;
  if (const int64_t bytes = GemmWorkspaceBytes(plan); bytes > 0) {
    workspace_arg = ctx.PlanBufferId(ctx.AddBuffer(bytes, false, name + " split-K partial sums"));
  }
  if (const int64_t bytes = GemmCounterBytes(plan); bytes > 0) {
    counter_arg = ctx.PlanBufferId(ctx.AddBuffer(bytes, true, name + " split-K tile counters"));
  }
  code->L("// kernel ", kernel_index, " '", CommentText(kernel.name()), "': ", GemmSummary(plan));
  std::string source;
  EmitGemm(
      plan, ctx.graph, name, *out_arg, workspace_arg, counter_arg,
      [&ctx](int t) { return ctx.ReadArg(t); }, &source, &ctx.code->launches);
  code->Line(source);
  return true;
}

// A KERNEL_LIBRARY kernel: one cuBLASLt call (cuda_cublaslt.h), no device
// code; the source gets a comment saying what it calls.
absl::Status EmitLibraryMatmul(PlanContext& ctx, const KernelPlan& kernel, int kernel_index,
                               const core::LibraryMatmul& lm, Code* code) {
  const Graph& g = ctx.graph;
  const int t = lm.out;
  const bool scratch = ctx.scratch_buffer[t] >= 0;
  if (ctx.out_position[t].size() + (scratch ? 1 : 0) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("a library matmul writes one destination; '",
                                                   g.tensor(t).name, "' has ",
                                                   ctx.out_position[t].size() + (scratch ? 1 : 0)));
  }
  LibraryMatmulCall call;
  call.dtype = g.tensor(lm.a).dtype;
  // float32 graphs take TF32 tensor cores only where their tolerance allows.
  call.tf32 = call.dtype == yirage::v1::FLOAT32 && g.proto().tolerance().rtol() >= kTf32MinRtol;
  call.transpose_b = lm.transpose_b;
  call.batch = lm.batch;
  call.m = lm.m;
  call.n = lm.n;
  call.k = lm.k;
  call.a_batch_stride = lm.a_batch_stride;
  call.b_batch_stride = lm.b_batch_stride;
  call.alpha = static_cast<float>(lm.alpha);
  call.residual = lm.residual >= 0;
  call.bias = lm.bias >= 0;
  call.activation = lm.activation == core::LibraryActivation::kRelu       ? 1
                    : lm.activation == core::LibraryActivation::kGeluTanh ? 2
                                                                          : 0;
  call.algo = kernel.schedule().library().algorithm();
  call.workspace_bytes = kCublasLtWorkspaceBytes;
  const int d =
      scratch ? ctx.PlanBufferId(ctx.scratch_buffer[t]) : g.num_inputs() + ctx.out_position[t][0];
  KernelLaunch launch;
  launch.name = absl::StrCat(KernelName(ctx.plan_index, kernel_index), "_cublaslt");
  launch.args = {ctx.ReadArg(lm.a),
                 ctx.ReadArg(lm.b),
                 call.residual ? lm.residual : d,
                 call.bias ? lm.bias : d,
                 d,
                 ctx.PlanBufferId(ctx.AddBuffer(call.workspace_bytes, false,
                                                launch.name + " cuBLASLt workspace"))};
  launch.library = call;
  ctx.code->launches.push_back(std::move(launch));
  code->L("// kernel ", kernel_index, " '", CommentText(kernel.name()), "': cuBLASLt ",
          CommentText(core::DescribeLibraryMatmul(g, lm)), ", algorithm ", call.algo + 1,
          " of its heuristic (a library call, no device code)");
  return absl::OkStatus();
}

}  // namespace

std::string CudaFloatLiteral(double value) {
  return ::yirage::backends::FloatLiteral(value, "__int_as_float(0x7fc00000)",
                                          "__int_as_float(0x7f800000)",
                                          "__int_as_float(0xff800000)");
}

std::string KernelName(int plan, int kernel) { return absl::StrCat("yr_p", plan, "_k", kernel); }

yirage::v1::LaunchManifest LaunchManifestOf(const PlanCode& code) {
  yirage::v1::LaunchManifest manifest;
  for (const PlanBuffer& b : code.buffers) {
    yirage::v1::LaunchManifest::Buffer* buffer = manifest.add_buffers();
    buffer->set_bytes(b.bytes);
    buffer->set_zero_init(b.zero_init);
    buffer->set_what(b.what);
  }
  for (const KernelLaunch& l : code.launches) {
    yirage::v1::LaunchManifest::Launch* launch = manifest.add_launches();
    launch->set_name(l.name);
    for (int a : l.args) launch->add_args(a);
    if (l.library.has_value()) {
      *launch->mutable_library() = LibraryCallManifest(*l.library);
      continue;
    }
    for (int64_t g : l.grid) launch->add_grid(g);
    launch->set_block(l.block);
    launch->set_smem_bytes(l.smem_bytes);
    launch->set_cooperative(l.cooperative);
    for (const TensorMapArg& t : l.tensor_maps) {
      yirage::v1::LaunchManifest::TensorMap* map = launch->add_tensor_maps();
      map->set_buffer(t.buffer);
      map->set_data_type(t.data_type);
      for (int64_t d : t.dims) map->add_dims(d);
      map->set_stride_bytes(t.stride_bytes);
      map->set_batch_stride_bytes(t.batch_stride_bytes);
      for (int b : t.box) map->add_box(b);
      map->set_swizzle("CU_TENSOR_MAP_SWIZZLE_128B");
    }
  }
  return manifest;
}

std::string CudaCodegen::Prelude() {
  // backends/cuda/kernel_prelude.cuh, embedded at build time (cmake/embed_text.cmake).
  return
#include "cuda_prelude.inc"
      ;
}

absl::StatusOr<PlanCode> CudaCodegen::GeneratePlan(const yirage::v1::Plan& plan, int index,
                                                   bool inject_fault) const {
  if (!plan.has_graph()) return GeneratePlanFor(graph_, plan, index, inject_fault);
  // A rewritten plan: its kernels name the ops of its own graph, which must
  // keep the job graph's inputs and outputs so the buffers match.
  absl::StatusOr<Graph> own = Graph::FromProto(plan.graph());
  if (!own.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.graph is invalid: ", own.status().message()));
  }
  if (absl::Status s = core::CheckSameSignature(graph_, *own); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.graph does not keep the job graph's inputs and outputs: ", s.message()));
  }
  return GeneratePlanFor(*own, plan, index, inject_fault);
}

absl::StatusOr<PlanCode> CudaCodegen::GeneratePlanFor(const Graph& g, const yirage::v1::Plan& plan,
                                                      int index, bool inject_fault) const {
  const int num_tensors = g.num_tensors();
  auto kernel_label = [&](int k) {
    return absl::StrCat("kernel ", k, " ('", plan.kernels(k).name(), "')");
  };
  absl::StatusOr<core::ResolvedPlan> resolved = core::ResolvePlan(g, plan);
  if (!resolved.ok()) return resolved.status();
  const std::vector<std::vector<int>>& kernel_ops = resolved->kernel_ops;
  const std::vector<std::vector<int>>& kernel_outputs = resolved->kernel_outputs;
  const std::vector<bool>& read_by_kernel = resolved->read_by_kernel;

  PlanCode result;
  PlanContext ctx{g, target_, index, static_cast<int>(g.outputs().size()), {}, {}, &result, {}};
  ctx.scratch_buffer.assign(num_tensors, -1);
  ctx.out_position.assign(num_tensors, {});
  ctx.native.assign(num_tensors, false);
  // Library calls read A and B and write D in the graph's dtype.
  std::vector<std::optional<core::LibraryMatmul>> library(plan.kernels_size());
  for (int k = 0; k < plan.kernels_size(); ++k) {
    if (plan.kernels(k).kind() != yirage::v1::KERNEL_LIBRARY) continue;
    absl::StatusOr<core::LibraryMatmul> lm = core::MatchLibraryMatmul(g, kernel_ops[k]);
    if (!lm.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(kernel_label(k), ": ", lm.status().message()));
    }
    for (int t : {lm->a, lm->b, lm->out}) ctx.native[t] = true;
    library[k] = *std::move(lm);
  }
  // GEMM kernels store their output in its own dtype too.
  std::vector<std::optional<GemmPlan>> gemms(plan.kernels_size());
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const yirage::v1::Schedule& schedule = plan.kernels(k).schedule();
    if (!schedule.has_gemm() || (inject_fault && k == 0) || kernel_outputs[k].size() != 1) {
      continue;
    }
    const int t = kernel_outputs[k][0];
    gemms[k] = PlanGemm(g, kernel_ops[k], g.tensor(t).dtype, target_, schedule.gemm());
    if (!gemms[k].has_value()) continue;
    ctx.native[t] = true;
    // Its operands from earlier kernels too (TMA copies them as they are).
    const core::GemmMatch& m = gemms[k]->match;
    std::vector<int> read = {m.a, m.b, m.b2};
    for (const core::GemmMatch::Step& step : m.epilogue) read.push_back(step.tensor);
    for (int r : read) {
      if (r >= 0 && g.tensor(r).producer >= 0) ctx.native[r] = true;
    }
  }
  for (int t = g.num_inputs(); t < num_tensors; ++t) {
    if (read_by_kernel[t] && !(ctx.native[t] && g.tensor(t).is_graph_output)) {
      const int64_t element = ctx.native[t] ? core::DTypeSize(g.tensor(t).dtype) : 4;
      ctx.scratch_buffer[t] = ctx.AddBuffer(g.tensor(t).num_elements() * element, false,
                                            absl::StrCat("tensor '", g.tensor(t).name, "'"));
    }
  }
  for (size_t slot = 0; slot < g.outputs().size(); ++slot) {
    ctx.out_position[g.outputs()[slot]].push_back(static_cast<int>(slot));
  }
  Code code;
  code.L("// ---- plan ", index, ": ", CommentText(plan.description()), " ----");
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const KernelPlan& kernel = plan.kernels(k);
    const bool fault = inject_fault && k == 0;
    if (kernel.kind() == yirage::v1::KERNEL_GENERIC) {
      EmitGenericKernel(ctx, kernel, k, kernel_ops[k], fault, &code);
      continue;
    }
    if (library[k].has_value()) {
      if (absl::Status s = EmitLibraryMatmul(ctx, kernel, k, *library[k], &code); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(kernel_label(k), ": ", s.message()));
      }
      continue;
    }
    // A family's kernel where the schedule names the family
    // (cuda_families.h). Its defaults are the backend's choice, which is the
    // row kernel below where the family's kernel does not fit; knobs the
    // family cannot run are refused, never replaced.
    const yirage::v1::Schedule& schedule = kernel.schedule();
    if (schedule.has_attention() && !fault) {
      const yirage::v1::AttentionSchedule& knobs = schedule.attention();
      std::optional<AttentionPattern> attention =
          target_.sm >= 80 ? MatchAttention(g, kernel_ops[k], kernel_outputs[k]) : std::nullopt;
      const bool defaults = knobs.ByteSizeLong() == 0;
      if (attention.has_value()) {
        if (knobs.warp_rows() == 64 && !PlanAttention(*attention, target_, knobs).wgmma) {
          return absl::InvalidArgumentError(
              absl::StrCat(kernel_label(k),
                           ": schedule.attention.warp_rows 64 (the wgmma form) needs sm_90 "
                           "and D = DV = 64; this is sm_",
                           target_.sm, " with D ", attention->d, ", DV ", attention->dv));
        }
        if (knobs.tma() && !knobs.prefill() && !PlanAttention(*attention, target_, knobs).tma) {
          return absl::InvalidArgumentError(absl::StrCat(
              kernel_label(k),
              ": schedule.attention.tma needs sm_90, D and DV multiples of 64 and keys a "
              "multiple of 64; this is sm_",
              target_.sm, " with D ", attention->d, ", DV ", attention->dv, ", ", attention->n,
              " keys"));
        }
        if (knobs.prefill() && !PlanAttention(*attention, target_, knobs).prefill) {
          return absl::InvalidArgumentError(absl::StrCat(
              kernel_label(k),
              ": schedule.attention.prefill needs sm_90, K given as [.., N, D], D and DV "
              "multiples of 64 up to 128, or up to 256 with key_tile 64 and block_rows 64 or "
              "128 (warp-specialized: equal, up to 128, keys a multiple of the key tile (",
              knobs.key_tile() == 128 ? 128 : 64,
              ")) and the block within shared memory; this is sm_", target_.sm, " with D ",
              attention->d, ", DV ", attention->dv, ", ", attention->n, " keys",
              attention->transpose_k ? "" : ", K given as [.., D, N]"));
        }
        if (EmitAttentionKernel(ctx, kernel, k, *attention, &code)) continue;
      }
      if (!defaults) {
        return absl::InvalidArgumentError(
            absl::StrCat(kernel_label(k),
                         ": schedule.attention is set but the fused attention kernel "
                         "does not take this chain on sm_",
                         target_.sm,
                         " (16-bit graph inputs, D and DV "
                         "multiples of 16 up to 128, or of 64 up to 256 in the prefill form; K "
                         "given as [.., D, N]: keys a multiple of 8)"));
      }
    } else if (schedule.has_gemm() && !fault) {
      const yirage::v1::GemmSchedule& knobs = schedule.gemm();
      if (gemms[k].has_value() && EmitGemmKernel(ctx, kernel, k, *gemms[k], &code)) continue;
      if (knobs.ByteSizeLong() != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            kernel_label(k), ": schedule.gemm (", knobs.ShortDebugString(),
            ") does not apply to this chain on sm_", target_.sm,
            " (sm_90; 16-bit graph inputs of one dtype, an output in that dtype written once, "
            "M above 64, K and N multiples of 8; tiles 128 x 128, 128 x 256 or 256 x 128, "
            "ping-pong only 128 x 128; clusters of at most 2 blocks; split_k at most the 64-deep "
            "K blocks and 16)"));
      }
    } else if (schedule.has_streamed_matmul() && !fault) {
      using Form = yirage::v1::StreamedMatmulSchedule;
      const Form::Form form = schedule.streamed_matmul().form();
      std::optional<StreamedMatmulPlan> streamed =
          PlanStreamedMatmul(g, kernel_ops[k], kernel_outputs[k], target_, schedule);
      if (streamed.has_value()) {
        const bool form_ok =
            form == Form::FORM_AUTO ||
            (form == Form::FORM_REGISTERS && streamed->form == StreamedMatmulPlan::kRegisters) ||
            (form == Form::FORM_WGMMA && streamed->form == StreamedMatmulPlan::kWgmma) ||
            ((form == Form::FORM_SHARED || form == Form::FORM_SHARED_COMBINE) &&
             streamed->form == StreamedMatmulPlan::kShared);
        if (!form_ok) {
          return absl::InvalidArgumentError(absl::StrCat(
              kernel_label(k), ": schedule.streamed_matmul.form ", Form::Form_Name(form),
              " does not apply to this chain on sm_", target_.sm,
              " (weights to registers: X of at most ", kStreamedRegistersMaxRows,
              " rows, no low-rank branch, K and N fitting the blocks; wgmma: sm_90, no "
              "low-rank branch, no prologue)"));
        }
        if (EmitStreamedMatmulKernel(ctx, kernel, k, *streamed, &code)) continue;
      }
      if (schedule.streamed_matmul().ByteSizeLong() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(kernel_label(k),
                         ": schedule.streamed_matmul is set but the streamed matmul kernel "
                         "does not take this chain on sm_",
                         target_.sm,
                         " (16-bit X [M <= 64, K] and "
                         "weights, K and N multiples of 64, rank a multiple of 16 up to 64)"));
      }
    }
    absl::StatusOr<core::RowGroupInfo> info = core::AnalyzeRowGroup(g, kernel_ops[k]);
    if (!info.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kernel_label(k), ": ", info.status().message()));
    }
    if (absl::Status s = EmitRowKernel(ctx, kernel, k, kernel_ops[k], *std::move(info),
                                       kernel_outputs[k], fault, &code);
        !s.ok()) {
      return s;
    }
  }
  result.source = code.str();
  return result;
}

}  // namespace yirage::backends::cuda
