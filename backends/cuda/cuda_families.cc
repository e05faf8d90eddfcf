#include "backends/cuda/cuda_families.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_gemm.h"
#include "backends/cuda/cuda_plan_context.h"
#include "backends/cuda/cuda_streamed_matmul.h"

namespace yirage::backends::cuda {
namespace {

using yirage::v1::AttentionSchedule;
using yirage::v1::StreamedMatmulSchedule;

void Add16BitTypes(yirage::v1::MatchLimits* limits) {
  limits->add_dtypes(yirage::v1::FLOAT16);
  limits->add_dtypes(yirage::v1::BFLOAT16);
}

void AddStreamedPoint(yirage::v1::KernelFamily* family, StreamedMatmulSchedule::Form form,
                      int stages, int warps, const yirage::v1::MatchLimits* limits) {
  yirage::v1::SchedulePoint* point = family->add_points();
  StreamedMatmulSchedule* s = point->mutable_schedule()->mutable_streamed_matmul();
  s->set_form(form);
  s->set_stages(stages);
  s->set_warps(warps);
  const char* form_name = form == StreamedMatmulSchedule::FORM_REGISTERS ? "regs"
                          : form == StreamedMatmulSchedule::FORM_WGMMA   ? "wgmma"
                                                                         : "smem";
  std::string label = absl::StrCat(form_name, " stages ", stages);
  if (warps > 0) absl::StrAppend(&label, " warps ", warps);
  point->set_label(label);
  if (limits != nullptr) *point->mutable_limits() = *limits;
}

void AddAttentionPoint(yirage::v1::KernelFamily* family, AttentionSchedule::Merge merge, int rows,
                       int warps, int stages, int warp_rows, const yirage::v1::MatchLimits* limits,
                       bool tma = false) {
  yirage::v1::SchedulePoint* point = family->add_points();
  AttentionSchedule* s = point->mutable_schedule()->mutable_attention();
  s->set_merge(merge);
  s->set_block_rows(rows);
  s->set_warps(warps);
  s->set_stages(stages);
  s->set_warp_rows(warp_rows);
  s->set_tma(tma);
  std::string label = absl::StrCat(tma ? "TMA " : "", "stages ", stages);
  if (merge == AttentionSchedule::MERGE_WORKSPACE) absl::StrAppend(&label, " workspace");
  if (merge == AttentionSchedule::MERGE_CLUSTER_PULL) absl::StrAppend(&label, " pull");
  if (merge == AttentionSchedule::MERGE_IN_KERNEL) absl::StrAppend(&label, " in-kernel merge");
  if (rows > 0) absl::StrAppend(&label, " rows ", rows);
  if (warp_rows > 0) absl::StrAppend(&label, " warp_rows ", warp_rows);
  if (warp_rows == 64) absl::StrAppend(&label, " (wgmma)");
  if (warps > 0) absl::StrAppend(&label, " warps ", warps);
  point->set_label(label);
  if (limits != nullptr) *point->mutable_limits() = *limits;
  // The decode forms hold head dims up to 128.
  yirage::v1::MatchLimits* own = point->mutable_limits();
  if (own->max_head_dim() == 0 || own->max_head_dim() > 128) own->set_max_head_dim(128);
}

yirage::v1::SchedulePoint* AddPrefillPoint(yirage::v1::KernelFamily* family, int rows, int key_tile,
                                           int stages, bool overlap) {
  yirage::v1::SchedulePoint* point = family->add_points();
  AttentionSchedule* s = point->mutable_schedule()->mutable_attention();
  s->set_prefill(true);
  s->set_block_rows(rows);
  s->set_key_tile(key_tile);
  s->set_stages(stages);
  s->set_overlap(overlap);
  point->set_label(absl::StrCat("prefill rows ", rows, " keys ", key_tile, " stages ", stages,
                                overlap ? " overlap" : ""));
  *point->mutable_limits() = AttentionPrefillLimits(key_tile, rows, false);
  return point;
}

// The warp-specialized prefill form (128 query rows a tile, persistent; the
// planner ignores block_rows and overlap for it); `tma`: its tiles arrive by
// TMA instead of the producer warpgroup's cp.async copies.
void AddPrefillWsPoint(yirage::v1::KernelFamily* family, int key_tile, int stages,
                       bool tma = false) {
  yirage::v1::SchedulePoint* point = AddPrefillPoint(family, 0, key_tile, stages, false);
  point->mutable_schedule()->mutable_attention()->set_warp_specialized(true);
  point->mutable_schedule()->mutable_attention()->set_tma(tma);
  point->set_label(absl::StrCat("prefill warp-specialized keys ", key_tile, " stages ", stages,
                                tma ? " TMA" : ""));
  *point->mutable_limits() = AttentionPrefillLimits(key_tile, 0, true);
}

void AddGemmPoint(yirage::v1::KernelFamily* family, int tile_m, int tile_n, int stages,
                  bool pingpong, int cluster_m, int cluster_n, yirage::v1::DType dtype) {
  yirage::v1::SchedulePoint* point = family->add_points();
  *point->mutable_limits() = GemmSm90PointLimits(dtype);
  yirage::v1::GemmSchedule* s = point->mutable_schedule()->mutable_gemm();
  s->set_tile_m(tile_m);
  s->set_tile_n(tile_n);
  s->set_stages(stages);
  s->set_pingpong(pingpong);
  s->set_cluster_m(cluster_m);
  s->set_cluster_n(cluster_n);
  point->set_label(absl::StrCat(pingpong ? "ping-pong " : "", tile_m, "x", tile_n, " stages ",
                                stages, " cluster ", cluster_m, "x", cluster_n));
}

// The GEMM family's points (both dtype forms: `dtype` FLOAT16 for the
// 16-bit one, FLOAT32 for TF32).
void AddGemmPoints(yirage::v1::KernelFamily* gemm, yirage::v1::DType dtype) {
  // bench/micro/gemm.cu on an H200: cooperative 128 x 256 tiles in 2-block
  // clusters lead on large K; ping-pong 128 x 128 hides the epilogue where
  // K is short; the other two shapes are the runners-up.
  AddGemmPoint(gemm, 128, 256, 4, false, 2, 1, dtype);
  AddGemmPoint(gemm, 128, 128, 6, true, 2, 1, dtype);
  AddGemmPoint(gemm, 128, 256, 4, false, 1, 1, dtype);
  AddGemmPoint(gemm, 256, 128, 4, false, 1, 2, dtype);
  // Fewer tiles than multiprocessors (M of a few hundred rows): the
  // smaller tiles without a cluster, split-K where they do not fill the
  // chip; cooperative, so that a block with one tile has both consumers
  // at work (ping-pong gives a lone tile to one of them).
  AddGemmPoint(gemm, 128, 128, 6, true, 1, 1, dtype);
  AddGemmPoint(gemm, 128, 128, 6, false, 2, 1, dtype);
}

// The sm_80 form's points (gemm_sm80.cuh) that fit the target's shared
// memory, with what the cost model needs of them: the blocks a
// multiprocessor holds (by shared memory and by registers: about two a
// thread's accumulator plus 48, at most 255) and, on Hopper, where wgmma
// issues the same products faster, the share of its peak they reach.
void AddSm80GemmPoints(yirage::v1::KernelFamily* gemm, const CudaTarget& target) {
  struct Shape {
    int tile_m, tile_n, stages;
    // On sm_90: the shape's rate over the wgmma cooperative 128 x 256
    // tile's on a product that fills the chip (bench/micro/gemm.cu, the
    // mean over fp16 and bf16 and both B layouts at 4096^3 on an H200,
    // bench/RESULTS.md).
    double hopper_share;
  };
  // 128 x 256 for large products; 128 x 128 and the 64-row tiles for
  // products of few tiles, where smaller tiles fill more multiprocessors.
  const Shape shapes[] = {{128, 256, 3, 0.50},
                          {128, 128, 4, 0.32},
                          {128, 128, 3, 0.46},
                          {64, 128, 4, 0.41},
                          {64, 64, 4, 0.35}};
  const int64_t sm_smem = target.max_smem_per_block + 1024;  // the opt-in limit leaves 1 KB
  for (const Shape& sh : shapes) {
    const int64_t smem = GemmSm80SmemBytes(sh.tile_m, sh.tile_n, sh.stages);
    if (smem > target.max_smem_per_block) continue;
    // One 128 x 128 point: 3 stages where two blocks fit beside each other
    // (a lone block of four warps hides too little latency: 4 stages ran at
    // two thirds of the rate of 3 doubled up), or where 4 stages do not fit;
    // 4 stages otherwise.
    if (sh.tile_m == 128 && sh.tile_n == 128) {
      const bool three_doubles = sm_smem / GemmSm80SmemBytes(128, 128, 3) >= 2;
      const bool four_fits = GemmSm80SmemBytes(128, 128, 4) <= target.max_smem_per_block;
      if (sh.stages == 4 && three_doubles) continue;
      if (sh.stages == 3 && !three_doubles && four_fits) continue;
    }
    const int threads = GemmSm80Threads(sh.tile_m, sh.tile_n);
    const int accumulators = sh.tile_m * sh.tile_n / threads;
    const int64_t registers = std::min(255, 2 * accumulators + 48);
    const int64_t blocks =
        std::max<int64_t>(1, std::min<int64_t>(sm_smem / smem, 65536 / (threads * registers)));
    yirage::v1::SchedulePoint* point = gemm->add_points();
    yirage::v1::GemmSchedule* s = point->mutable_schedule()->mutable_gemm();
    s->set_mma_sync(true);
    s->set_tile_m(sh.tile_m);
    s->set_tile_n(sh.tile_n);
    s->set_stages(sh.stages);
    point->set_label(absl::StrCat("mma.sync ", sh.tile_m, "x", sh.tile_n, " stages ", sh.stages));
    *point->mutable_limits() = GemmLimits();
    // Gated pairs need warps 64 products wide (gemm_sm80.cuh).
    point->mutable_limits()->set_no_gate(sh.tile_n < 128);
    point->set_blocks_per_multiprocessor(static_cast<int>(blocks));
    // mma.sync does not reach wgmma's rate on sm_90.
    if (target.sm >= 90) point->set_matrix_share(sh.hopper_share);
  }
}

}  // namespace

yirage::v1::MatchLimits StreamedMatmulLimits() {
  yirage::v1::MatchLimits limits;
  limits.set_two_dimensional(true);
  limits.set_max_rows(64);
  limits.set_k_multiple(64);  // K rows per pipeline stage
  limits.set_n_multiple(64);  // output columns per block
  limits.set_rank_multiple(16);
  limits.set_max_rank(64);
  Add16BitTypes(&limits);
  return limits;
}

yirage::v1::MatchLimits StreamedRegistersLimits() {
  yirage::v1::MatchLimits limits;
  limits.set_max_rows(kStreamedRegistersMaxRows);
  limits.set_no_low_rank(true);
  limits.set_two_dimensional(true);
  return limits;
}

yirage::v1::MatchLimits StreamedWgmmaLimits() {
  // (With the rms prologue and column scales it verified but ran 3.5x
  // slower on an H200, so the form takes neither.)
  yirage::v1::MatchLimits limits;
  limits.set_no_low_rank(true);
  limits.set_no_prologue(true);
  limits.set_two_dimensional(true);
  return limits;
}

yirage::v1::MatchLimits AttentionLimits() {
  yirage::v1::MatchLimits limits;
  limits.set_head_dim_multiple(16);
  // Up to 128 for the decode forms (their points say so), up to 256 for the
  // prefill form's 64-key points.
  limits.set_max_head_dim(256);
  // Any key count: the last 64-key tile is masked. K given as [D, N] is
  // copied 16 bytes at a time, so its rows (N long) start 16-byte aligned.
  limits.set_keys_by_columns_multiple(8);
  limits.set_inputs_from_graph(true);
  Add16BitTypes(&limits);
  return limits;
}

yirage::v1::MatchLimits AttentionPrefillLimits(int key_tile, int rows, bool warp_specialized) {
  yirage::v1::MatchLimits limits;
  limits.set_head_dim_multiple(64);
  // Head dims over 128: 64-key tiles and at most two warpgroups of rows
  // (the warp-specialized form's two consumers).
  limits.set_max_head_dim(
      (key_tile == 64 || key_tile == 80) && (warp_specialized || rows <= 128) ? 256 : 128);
  // 80-key tiles: head dim 256 only (smaller ones take 64 or more keys).
  if (key_tile == 80) limits.set_head_dim(256);
  if (warp_specialized) limits.set_equal_head_dims(true);
  // A block takes 64 to 192 query rows; fewer rows a head are decode's.
  limits.set_min_query_rows(64);
  limits.set_keys_by_rows(true);
  return limits;
}

yirage::v1::MatchLimits AttentionWgmmaLimits() {
  yirage::v1::MatchLimits limits;
  limits.set_head_dim(64);
  return limits;
}

yirage::v1::BackendKernels DescribeKernels(const CudaTarget& target) {
  yirage::v1::BackendKernels kernels;
  kernels.set_backend("cuda");
  kernels.set_gpu(true);
  kernels.set_generic_prologue(true);  // cuda_generic_kernel.cc ChainPrologue, ChainEpilogue
  yirage::v1::RowKernels* row = kernels.mutable_row();
  row->set_flat_elementwise(true);
  row->set_threads_knob(true);
  // cuda_row_kernel.cc CanUseRegisterRows: rows of one width, at least 256
  // wide, no multiple required (chunks of 8, 4 or 1 elements, the last
  // guarded).
  row->set_register_row_min_width(256);
  row->set_register_row_multiple(1);
  // With several rows a block, a row takes the fewest threads that hold it
  // (CanUseRegisterRows: 64 wide and up).
  row->set_register_row_multi_min_width(64);
  // cuda_row_kernel.cc PlanSplitRows: 256 items of 8 elements a block.
  row->set_split_row_min_width(2048);
  // cuda_row_kernel.cc: rows at most kNarrowRowWidth wide, a thread a row.
  row->set_narrow_row_max_width(static_cast<int32_t>(kNarrowRowWidth));
  row->set_narrow_block_rows(kMaxNarrowBlockRows);
  // cuda_row_kernel.cc CanUseGatherElements: concat and slice groups of any
  // row count gather over their elements under PARALLEL_COLS.
  row->set_gather_cols(true);
  // cuBLASLt's heuristic ranks several algorithms; the top three are timed.
  kernels.mutable_library()->set_algorithms(3);
  if (target.sm < 80) return kernels;  // the families use cp.async and mma.sync

  yirage::v1::KernelFamily* streamed = kernels.add_families();
  streamed->set_name("streamed_matmul");
  streamed->set_pattern(yirage::v1::STREAMED_MATMUL);
  streamed->set_doc(
      "decode-shaped matmuls (M <= 64) reading their weights once, norm prologue and "
      "gated or low-rank epilogue fused");
  *streamed->mutable_limits() = StreamedMatmulLimits();
  // Shared-memory pipeline depths, as deep as shared memory per block holds
  // (a stage of a 64 x 64 chunk of one 16-bit weight and 16 rows of X).
  constexpr int64_t kStageBytes = (16 + 64) * 72 * 2;
  auto fits = [&](int stages) { return stages * kStageBytes <= target.max_smem_per_block; };
  for (int stages : {3, 6}) {
    if (!fits(stages)) continue;
    AddStreamedPoint(streamed, StreamedMatmulSchedule::FORM_SHARED, stages, 0, nullptr);
  }
  // The wgmma form (sm_90a only). H200, backend timing, 2 K splits in a
  // cluster: gated_mlp b8 25.3 us at 5 or 6 stages, 26.0 at 4, 29.4 at 3,
  // against 30.6 for the best mma.sync form; b1 (X padded from 8 rows to
  // 64) 24.2 against 25.1 for the registers form.
  if (target.sm == 90) {
    const yirage::v1::MatchLimits wgmma = StreamedWgmmaLimits();
    AddStreamedPoint(streamed, StreamedMatmulSchedule::FORM_WGMMA, 5, 0, &wgmma);
  }
  // Weights streamed to registers (decode shapes): steps loaded ahead and
  // block size; the backend sizes the K splits to fill the chip. 16-warp
  // blocks leave one split where the column tiles alone fill the chip, else
  // few splits summed in a cluster, so no pass adds splits through global
  // memory (H200, rms_norm_linear b1 / b8: 19.0 / 21.1 us against 20.0 /
  // 23.4 with 4 warps and 4 splits). (Measured on an H200 and dropped:
  // explicit K splits above the automatic ones for either form, and an L2
  // prefetch of the weights ahead of the register loads; all slower.)
  for (const auto& [depth, warps] :
       {std::pair{1, 0}, std::pair{2, 0}, std::pair{2, 8}, std::pair{2, 16}, std::pair{3, 0}}) {
    // Each warp takes at least two 16-row steps of K (4 warps by default).
    yirage::v1::MatchLimits registers = StreamedRegistersLimits();
    registers.set_k_multiple(2 * 16 * (warps > 0 ? warps : 4));
    AddStreamedPoint(streamed, StreamedMatmulSchedule::FORM_REGISTERS, depth, warps, &registers);
  }

  yirage::v1::KernelFamily* attention = kernels.add_families();
  attention->set_name("attention");
  attention->set_pattern(yirage::v1::ATTENTION);
  attention->set_doc(
      "flash attention with the keys split across blocks (decode), S and P in registers");
  *attention->mutable_limits() = AttentionLimits();
  // (The default: 64 query rows per block, one warp per 16 rows, 4 stages.)
  // Pipelines 3 and 6 deep; the block's keys split over 2 or 4 warps per row group (more warps on
  // short key ranges); 32-row warps (2 per 64 rows) in 2 key groups; the cluster merge pulling
  // remote rows rather than pushing them; the key splits merged through a workspace rather than a
  // cluster; 32-row warps in two-stage blocks small enough for two an SM, their splits merged in
  // the kernel (H200 harness, gqa_decode b8: 26.9 us against 27.4 for two splits in a cluster).
  // First, the warpgroup (wgmma) form (sm_90, D = DV = 64), merged in the kernel (H200, backend
  // timing, gqa_decode b8 / b1: 22.6 / 10.9 us against 26.4 / 10.9 for the best of the others), and
  // the same merge with 16-row warps for the other head dims. The backend sizes the key splits.
  // (Measured on an H200 and dropped, gqa_decode b1 / b8 against the best of these: 32-row
  // blocks 13.6 / 38.6 us against 12.1 / 29.2, 128-row 16.8 / 36.8, 256-row 25.3 / 43.9 (their
  // 8-block clusters do not fit the SMs at once); a software pipeline computing the next S during
  // the softmax, and the exponentials in f16x2: no gain.)
  using M = AttentionSchedule;
  // Few query rows a head (GQA decode: the query heads of one key/value
  // head): 32-row blocks of two warps, merged in the kernel or as the
  // backend chooses. H200, yirage-schedule-sweep, D = 128, M = 4 / 7 / 4:
  // llama3 b16 48.9 / qwen b8 31.9 / llama3 b1 20.3 us merged in the kernel
  // from 3 stages, 49.0 / 33.2 / 22.4 from 2, against 56.7 / 34.9 / 21.3
  // for the best 64-row points. First, so that small budgets time them.
  // Many query rows a head (prefill), on sm_90: the warp-specialized form
  // (D = DV; 128-key tiles for head dims up to 128, 64 for those over), then
  // warpgroups of wgmma over every key. First, so that small budgets time
  // them where they apply. FlashAttention-3's key tiles (176 for head dims
  // up to 128, 80 for 256) come after our 128 and 64: on an H100 they lost
  // to them at every suite prefill shape (D = 128: 43.3 / 131.7 us against
  // 38.8 / 114.5 for n = 1024 / 2048; D = 256: 43.5 against 42.6), since
  // here a 176-key S leaves no registers for Q's fragments. Each leading
  // point has a TMA twin (FlashAttention-3's copies: one thread's requests
  // in place of the producer warpgroup's), timed right after it.
  if (target.sm == 90) {
    AddPrefillWsPoint(attention, 128, 3);
    AddPrefillWsPoint(attention, 128, 3, true);
    AddPrefillWsPoint(attention, 128, 2);
    AddPrefillWsPoint(attention, 64, 2);
    AddPrefillWsPoint(attention, 64, 2, true);
    AddPrefillWsPoint(attention, 176, 2);  // head dims up to 128
    AddPrefillWsPoint(attention, 80, 2);   // head dim 256
    AddPrefillPoint(attention, 128, 128, 3, true);
    AddPrefillPoint(attention, 128, 128, 2, false);
    AddPrefillPoint(attention, 192, 64, 3, true);
    AddPrefillPoint(attention, 128, 64, 4, true);
    AddPrefillPoint(attention, 64, 64, 3, true);  // two blocks an SM
    AddPrefillPoint(attention, 192, 128, 2, false);
  }
  yirage::v1::MatchLimits few_rows;
  few_rows.set_max_query_rows(32);
  // With TMA copies (sm_90, head dims multiples of 64) the copy engine
  // keeps the keys in flight where the cp.async of a 64-thread block could
  // not: 16-row blocks of two key groups (H200, yirage-schedule-sweep,
  // D = 128, M = 4 / 7 / 4: llama3 b16 45.6 / qwen b8 29.7 / llama3 b1
  // 19.1 us against 48.8 / 31.9 / 20.4 for the best of the points below;
  // 32-row blocks of 2 x 2 warps 45.5 / 30.7; the cluster merge 49.1 /
  // 38.6). First, so that small budgets time them.
  if (target.sm == 90) {
    yirage::v1::MatchLimits tma = few_rows;
    tma.set_head_dim_multiple(64);
    tma.set_keys_multiple(64);  // no masked last tile (see PlanAttention)
    AddAttentionPoint(attention, M::MERGE_IN_KERNEL, 16, 2, 4, 0, &tma, true);
    AddAttentionPoint(attention, M::MERGE_AUTO, 16, 2, 4, 0, &tma, true);
    AddAttentionPoint(attention, M::MERGE_IN_KERNEL, 32, 4, 4, 0, &tma, true);
  }
  AddAttentionPoint(attention, M::MERGE_IN_KERNEL, 32, 2, 3, 0, &few_rows);
  AddAttentionPoint(attention, M::MERGE_AUTO, 32, 2, 2, 0, &few_rows);
  for (int stages : {3, 6}) {
    if (fits(stages)) AddAttentionPoint(attention, M::MERGE_AUTO, 0, 0, stages, 0, nullptr);
  }
  if (target.sm == 90) {
    const yirage::v1::MatchLimits wgmma = AttentionWgmmaLimits();
    // (With TMA copies, gqa_decode b1 / b8: 11.0 / 22.7 us against 10.7 / 22.4.)
    AddAttentionPoint(attention, M::MERGE_IN_KERNEL, 64, 4, 4, 64, &wgmma);
  }
  AddAttentionPoint(attention, M::MERGE_IN_KERNEL, 64, 4, 4, 0, nullptr);
  AddAttentionPoint(attention, M::MERGE_AUTO, 64, 8, 3, 0, nullptr);
  AddAttentionPoint(attention, M::MERGE_CLUSTER_PULL, 64, 8, 3, 0, nullptr);
  AddAttentionPoint(attention, M::MERGE_AUTO, 64, 16, 2, 0, nullptr);
  AddAttentionPoint(attention, M::MERGE_AUTO, 64, 4, 4, 32, nullptr);
  AddAttentionPoint(attention, M::MERGE_WORKSPACE, 64, 4, 4, 0, nullptr);
  AddAttentionPoint(attention, M::MERGE_IN_KERNEL, 64, 4, 2, 32, nullptr);

  if (target.sm >= 80 && target.sm != 90) {
    // Ampere and Ada (and later parts the Hopper kernel does not run on):
    // the sm_80 form alone.
    yirage::v1::KernelFamily* gemm = kernels.add_families();
    gemm->set_name("gemm");
    gemm->set_pattern(yirage::v1::GEMM);
    gemm->set_doc(
        "matmuls and batched matmuls above decode sizes with their elementwise epilogue fused "
        "(bias, activations, scales, residuals): cp.async, ldmatrix and mma.sync (sm_80 on)");
    *gemm->mutable_limits() = GemmLimits();
    AddSm80GemmPoints(gemm, target);
  }
  if (target.sm == 90) {
    yirage::v1::KernelFamily* gemm = kernels.add_families();
    gemm->set_name("gemm");
    gemm->set_pattern(yirage::v1::GEMM);
    gemm->set_doc(
        "matmuls and batched matmuls above decode sizes with their elementwise epilogue fused "
        "(bias, activations, scales, residuals): TMA, wgmma, warp-specialized and persistent "
        "(sm_90); the sm_80 form (mma.sync) for products of few tiles");
    *gemm->mutable_limits() = GemmLimits();
    AddGemmPoints(gemm, yirage::v1::FLOAT16);
    AddSm80GemmPoints(gemm, target);
    // The same kernel on float32 through TF32 (a stage holds half the K of
    // a 16-bit one, in the same bytes), where the job's tolerance allows.
    yirage::v1::KernelFamily* tf32 = kernels.add_families();
    tf32->set_name("gemm_tf32");
    tf32->set_pattern(yirage::v1::GEMM);
    tf32->set_doc(
        "float32 matmuls with B given as [N, K] (nn.Linear weights) on TF32 tensor cores where "
        "the job's rtol is at least 1e-3, their elementwise epilogue fused: the gemm family's "
        "kernel (sm_90)");
    *tf32->mutable_limits() = GemmTf32Limits();
    AddGemmPoints(tf32, yirage::v1::FLOAT32);
  }
  return kernels;
}

}  // namespace yirage::backends::cuda
