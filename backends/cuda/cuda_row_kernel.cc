// KERNEL_ROW kernels of the CUDA backend: row groups (elementwise ops,
// norms, softmax and reductions over the last axis, matmuls with their
// prologues and epilogues) in blocks of rows; see cuda_codegen.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
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
#include "backends/cuda/cuda_plan_context.h"
#include "core/row_group.h"

namespace yirage::backends::cuda {
namespace {

using core::Graph;
using core::OpInfo;
using core::OpType;
using core::TensorInfo;
using ::yirage::backends::BinaryExpr;
using ::yirage::backends::BroadcastStrides;
using ::yirage::backends::CeilDiv;
using ::yirage::backends::CommentText;
using ::yirage::backends::Numel;
using ::yirage::backends::OffsetExpr;
using ::yirage::backends::Slice;
using yirage::v1::KernelPlan;
using yirage::v1::Schedule;

// ---------------------------------------------------------------------------
// KERNEL_ROW
// ---------------------------------------------------------------------------

class RowKernelEmitter {
 public:
  RowKernelEmitter(PlanContext& ctx, const KernelPlan& kernel, int kernel_index,
                   std::vector<int> ops, core::RowGroupInfo info)
      : ctx_(ctx),
        g_(ctx.graph),
        kernel_(kernel),
        kernel_index_(kernel_index),
        ops_(std::move(ops)),
        info_(std::move(info)),
        s_(kernel.schedule()) {
    for (size_t j = 0; j < ops_.size(); ++j) group_pos_[g_.op(ops_[j]).output] = j;
  }

  absl::Status Emit(const std::vector<int>& outputs, bool inject_fault, Code* out) {
    // Kernels that store only reductions (a value a row) read their rows
    // past L1 (yr_ld16_once); kernels storing as much as they read keep
    // __ldg, which was the faster of the two there
    // (bench/micro/elementwise_store.cu, bench/micro/reduce_rows.cu).
    read_past_l1_ = std::all_of(outputs.begin(), outputs.end(),
                                [&](int t) { return info_.row_width[group_pos_.at(t)] == 1; });
    if (CanUseFlatElementwise()) return EmitFlatElementwise(outputs, inject_fault, out);
    if (CanUseGatherElements(outputs)) return EmitGatherElements(outputs, inject_fault, out);
    if (const SplitRows sr = PlanSplitRows(outputs); sr.splits > 1) {
      return EmitSplitRows(outputs, sr, inject_fault, out);
    }
    if (CanUseRegisterRows()) return EmitRegisterRows(outputs, inject_fault, out);
    Plan();
    const std::string name = KernelName(ctx_.plan_index, kernel_index_);
    std::vector<std::string> params;
    KernelLaunch launch = StartLaunch(outputs, &params);
    // Split-K workspaces: one float matrix per T matmul plus tile counters.
    if (split_ > 1) {
      for (size_t j = 0; j < ops_.size(); ++j) {
        if (f_[j] || g_.op(ops_[j]).type != OpType::kMatmul) continue;
        const int b = ctx_.AddBuffer(info_.num_rows * info_.row_width[j] * 4, true,
                                     absl::StrCat(name, " split-K sums of op ", j));
        params.push_back(absl::StrCat("float* __restrict__ ws", j));
        launch.args.push_back(ctx_.PlanBufferId(b));
      }
      const int b = ctx_.AddBuffer(grid_x_ * grid_y_ * 4, true, name + " split-K counters");
      params.push_back("unsigned* __restrict__ cnt");
      launch.args.push_back(ctx_.PlanBufferId(b));
    }
    if (arena_global_) {
      const int b =
          ctx_.AddBuffer(grid_x_ * grid_y_ * split_ * f_floats_ * 4, false, name + " row arena");
      params.push_back("float* __restrict__ arena");
      launch.args.push_back(ctx_.PlanBufferId(b));
    }
    launch.grid[0] = grid_x_;
    launch.grid[1] = grid_y_;
    launch.grid[2] = split_;
    launch.block = threads_;
    launch.smem_bytes = static_cast<int>(smem_bytes_);

    Code& c = *out;
    c.L("// kernel ", kernel_index_, " '", CommentText(kernel_.name()), "': KERNEL_ROW, ",
        info_.num_rows, " rows, BR ", br_, ", threads ", threads_, ", tile_n ", tn_, ", split_k ",
        split_, arena_global_ ? ", rows in global arena" : "");
    c.L("extern \"C\" __global__ void __launch_bounds__(", threads_, ") ", name, "(",
        absl::StrJoin(params, ", "), ") {");
    c.Open("{");
    c.L("extern __shared__ __align__(128) float yr_sm[];");
    c.L("const int tid = threadIdx.x;");
    c.L("const i64 r0 = (i64)blockIdx.x * ", br_, ";");
    c.L("const int nr = (int)(", info_.num_rows, "LL - r0 < ", br_, " ? ", info_.num_rows,
        "LL - r0 : ", br_, ");");
    c.L("const int n0 = (int)blockIdx.y * ", tn_, ";");
    c.L("(void)n0;");
    c.L("float* const red = yr_sm + ", red_off_, ";");
    c.L("(void)red;");
    if (arena_global_) {
      c.L("float* const fbase = arena + (((i64)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + "
          "blockIdx.x) * ",
          f_floats_, "LL;");
    } else {
      c.L("float* const fbase = yr_sm;");
    }
    for (size_t j = 0; j < ops_.size(); ++j) {
      if (f_[j]) {
        c.L("float* const b", j, " = fbase + ", off_[j], ";");
      } else {
        c.L("float* const tl", j, " = yr_sm + ", off_[j], ";");
      }
    }
    if (inject_fault) c.Line(FaultLine());
    EmitStaging(&c);
    for (size_t j = 0; j < ops_.size(); ++j) {
      if (f_[j]) EmitFullRowOp(j, &c);
    }
    EmitFullRowStores(outputs, &c);
    if (has_t_) EmitTilePhase(outputs, &c);
    c.Close();
    c.Line("}");
    ctx_.code->launches.push_back(std::move(launch));
    return absl::OkStatus();
  }

 private:
  // The launch record and parameters every row kernel starts with: its
  // inputs, then its outputs (dsts_ set for each).
  KernelLaunch StartLaunch(const std::vector<int>& outputs, std::vector<std::string>* params) {
    KernelLaunch launch;
    launch.name = KernelName(ctx_.plan_index, kernel_index_);
    for (const std::string& in : kernel_.inputs()) {
      ctx_.AddReadParam(g_.FindTensor(in), params, &launch.args);
    }
    for (int t : outputs) dsts_[t] = ctx_.AddWriteParams(t, params, &launch.args);
    return launch;
  }

  // ---- Register rows ----
  // A group of elementwise ops and last-axis norms/softmax, all as wide as
  // W, runs with the row in registers: thread t of a row owns its chunks t,
  // t + T, ... (a chunk is `vec` consecutive elements, one vector load and
  // store), every op is a loop over those registers, and the norms reduce
  // across the row's threads. No shared-memory row buffers, no pass waiting
  // on memory: what decode-sized norm chains need, and what short rows need
  // with several rows a block.
  static constexpr int kRegisterRowsMaxPerThread = 32;
  // The fewest K values a lane of a SIMT matmul tile sums (EmitMatmulTile):
  // two steps of the K loop's default unroll, so that a lane's dot outweighs
  // its shared atomic.
  static constexpr int64_t kMinKPerLane = 8;

  // How a row is spread over its threads.
  struct RegisterRowsLayout {
    int vec = 8;      // elements a chunk: 8 (16-byte loads), 4 or 1
    int threads = 0;  // threads a row
    int chunks = 0;   // chunks a thread
    int64_t row_chunks = 0;
    // The threads' last chunks run past the row: loads, reductions and
    // stores of a thread's last chunk are guarded.
    bool masked = false;
    int per_thread() const { return vec * chunks; }
  };

  // The widest chunk every row-contiguous operand, and the row itself,
  // start aligned to: 8 elements (16 bytes of a 16-bit type; two 16-byte
  // loads of floats), 4, else 1 (scalar loads, still coalesced: rows of
  // 255 floats start 4 bytes apart).
  int RegisterRowsVector(int64_t w) const {
    for (int vec : {8, 4}) {
      if (w % vec != 0) continue;
      bool aligned = true;
      for (size_t j = 0; j < ops_.size() && aligned; ++j) {
        const OpInfo& op = g_.op(ops_[j]);
        for (size_t slot = 0; slot < op.inputs.size() && aligned; ++slot) {
          if (info_.in_group[j][slot]) continue;
          std::vector<int64_t> space = info_.lead_dims;
          space.push_back(w);
          const std::vector<int64_t> strides = BroadcastStrides(RowShape(op.inputs[slot]), space);
          if (strides.back() != 1) continue;
          for (size_t d = 0; d + 1 < strides.size(); ++d) aligned &= strides[d] % vec == 0;
        }
      }
      if (aligned) return vec;
    }
    return 1;
  }

  // The register-rows layout for width `w`. Rows whose chunks divide over
  // the threads take no guards: chunks spread over up to 1024 threads, a
  // power of two where one divides the chunks, else the largest multiple of
  // 32 that does (hidden sizes such as 3584 or 14336 have 448 and 1792
  // chunks). Rows of 512 chunks or more take two chunks a thread: blocks of
  // 1024 threads fit one an SM beside their registers and leave HBM idle
  // while they reduce (softmax over 8192 columns, H200: 52 us with 1024
  // threads, 39 with 512). The schedule's warps, where set and they divide
  // the chunks into at most kRegisterRowsMaxPerThread values a thread,
  // override the rule. With several rows a block (block_rows > 1) a row
  // gets the fewest threads that hold it (a warp or less for rows up to
  // 1024 wide: no barriers), so that short rows do not pay one block launch
  // each. Other widths (1000, 255, any prime) take the same rules with the
  // threads' last chunk guarded. threads == 0: no layout holds the row.
  RegisterRowsLayout LayoutRegisterRows(int64_t w) const {
    RegisterRowsLayout l;
    l.vec = RegisterRowsVector(w);
    l.row_chunks = std::max<int64_t>(1, w / l.vec);
    const int64_t total = l.row_chunks;
    const int vec = l.vec;
    auto fits = [&](int t, bool exact) {
      if (t <= 0 || t > 1024 || (exact && total % t != 0)) return false;
      return CeilDiv(total, t) * vec <= kRegisterRowsMaxPerThread;
    };
    auto take = [&](int t) {
      l.threads = t;
      l.chunks = static_cast<int>(CeilDiv(total, t));
      l.masked = total % t != 0;
      return l;
    };
    // Thread counts a row's reductions take: powers of two up to a warp,
    // then whole warps.
    auto next = [](int t) { return t < 32 ? 2 * t : t + 32; };
    if (s_.block_rows() > 1) {
      for (bool exact : {true, false}) {
        for (int t = 1; t <= 1024; t = next(t)) {
          if (fits(t, exact)) return take(t);
        }
      }
      return l;
    }
    if (const int t = 32 * std::min(32, s_.warps()); fits(t, true)) return take(t);
    const int64_t spread = total >= 512 && total % 2 == 0 ? total / 2 : total;
    const int pow2 = static_cast<int>(std::clamp<int64_t>(FloorPow2(spread), 32, 1024));
    if (spread % pow2 == 0 && fits(pow2, true)) return take(pow2);
    for (int t = 1024; t >= 32; t -= 32) {
      if (spread % t == 0 && fits(t, true)) return take(t);
    }
    // Guarded: the schedule's warps where they leave no warp idle, else
    // whole warps over the spread.
    if (const int t = 32 * std::min(32, s_.warps()); t > 0 && t < total + 32 && fits(t, false)) {
      return take(t);
    }
    const int64_t guarded = total >= 512 ? CeilDiv(total, 2) : total;
    const int t = static_cast<int>(std::clamp<int64_t>(CeilDiv(guarded, 32) * 32, 32, 1024));
    if (fits(t, false)) return take(t);
    return l;
  }

  // The tensors the group's ops read from memory, each once, in first-use
  // order.
  std::vector<int> OutsideOperands() const { return OutsideOperandsOf(ops_.size()); }

  // The tensors ops [0, n) read from memory, each once, in first-use order.
  std::vector<int> OutsideOperandsOf(size_t n) const {
    std::vector<int> tensors;
    for (size_t j = 0; j < n; ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      for (size_t slot = 0; slot < op.inputs.size(); ++slot) {
        const int t = op.inputs[slot];
        if (info_.in_group[j][slot]) continue;
        if (std::find(tensors.begin(), tensors.end(), t) == tensors.end()) tensors.push_back(t);
      }
    }
    return tensors;
  }

  // Operand `slot` of group op j inside an item loop (flat, split rows):
  // the producer's registers v<p>[q], or the staged input in<t>[q].
  std::string ItemOperand(size_t j, int slot) const {
    const int t = g_.op(ops_[j]).inputs[slot];
    return info_.in_group[j][slot] ? absl::StrCat("v", group_pos_.at(t), "[q]")
                                   : absl::StrCat("in", t, "[q]");
  }

  // Whether group op j's value is rounded to 16 bits, so that its
  // exponentials and divisions take the hardware approximations (a few
  // float32 ulps, far below a 16-bit ulp), in every form.
  bool Approximate(size_t j) const {
    return core::DTypeSize(g_.tensor(g_.op(ops_[j]).output).dtype) == 2;
  }

  // Elementwise group op j's value, `operand`(slot) its operands (the scalar
  // of a binary op with one is its literal); 16-bit results approximate
  // (Approximate).
  template <typename Operand>
  std::string ElementwiseExpr(size_t j, Operand operand) const {
    const OpInfo& op = g_.op(ops_[j]);
    if (core::IsUnaryElementwise(op.type)) return UnaryExpr(op, operand(0), Approximate(j));
    return BinaryExpr(op.type, operand(0), op.has_scalar ? Lit(op.scalar) : operand(1));
  }

  // Elementwise group op j's value at item register q.
  std::string ItemElementwise(size_t j) const {
    return ElementwiseExpr(j, [&](int slot) { return ItemOperand(j, slot); });
  }

  // How an item of `vec` elements (4 or 8; its first element `e` a
  // multiple of vec) reads operand `t` of the flat space `shape`: 16 bytes
  // at an offset, 32 for 8 floats (the operand has the space's shape, or
  // varies along the last axis with a width that is a multiple of vec, so
  // the item is one aligned run), one element for the whole item (it is
  // constant along a last axis of such a width), or element by element (any
  // other broadcast).
  enum class ItemRead { kVector, kSplat, kElements };
  ItemRead ItemReadOf(int t, const std::vector<int64_t>& shape, int vec) const {
    if (vec != 8 && vec != 4) return ItemRead::kElements;
    const std::vector<int64_t>& ts = g_.tensor(t).shape;
    if (ts == shape) return ItemRead::kVector;
    if (shape.empty() || shape.back() % vec != 0) return ItemRead::kElements;
    const std::vector<int64_t> strides = BroadcastStrides(ts, shape);
    if (strides.back() == 1) return ItemRead::kVector;
    if (strides.back() == 0) return ItemRead::kSplat;
    return ItemRead::kElements;
  }

  // The element offset in operand `t` of element `var` of the space `shape`.
  std::string ItemOffset(int t, const std::vector<int64_t>& shape, const std::string& var) const {
    const bool narrow = Numel(shape) < (int64_t{1} << 31);
    return OffsetExpr(shape, BroadcastStrides(g_.tensor(t).shape, shape), var, narrow);
  }

  // Stages operand `t` of item `u` (element `e` of the space `shape`) into
  // in<t>[vec]: from its 16-byte loads raw<t>[u] (ItemRead::kVector), one
  // load for all (kSplat), else element by element.
  void EmitStageItem(int t, ItemRead read, const std::vector<int64_t>& shape, int vec,
                     Code& c) const {
    c.L("float in", t, "[", vec, "];");
    if (read == ItemRead::kVector) {
      c.L("yr_stage16(in", t, ", raw", t, "[u][0], ", ctx_.Var(t), ");");
      if (ctx_.ReadType(t) == "float" && vec == 8) {
        c.L("yr_stage16(in", t, " + 4, raw", t, "[u][1], ", ctx_.Var(t), ");");
      }
      return;
    }
    if (read == ItemRead::kSplat) {
      c.L("{");
      c.L("  const float x = yr_ld(", ctx_.Var(t), ", ", ItemOffset(t, shape, "e"), ");");
      c.L("  #pragma unroll");
      c.L("  for (int q = 0; q < ", vec, "; ++q) in", t, "[q] = x;");
      c.L("}");
      return;
    }
    c.L("#pragma unroll");
    c.L("for (int q = 0; q < ", vec, "; ++q) in", t, "[q] = yr_ld(", ctx_.Var(t), ", ",
        ItemOffset(t, shape, "e + q"), ");");
  }

  // Stores each output's item registers at element `e`.
  void EmitItemStores(const std::vector<int>& outputs, int vec, Code& c) {
    for (int t : outputs) {
      const size_t j = group_pos_.at(t);
      for (const std::string& d : dsts_[t]) {
        if (vec == 8) {
          c.L("yr_st8(", d, " + e, v", j, ");");
        } else if (vec == 4) {
          c.L("yr_st4(", d, ", e, v", j, ");");
        } else {
          c.L("yr_st(", d, ", e, v", j, "[0]);");
        }
      }
    }
  }

  // Elementwise groups whose ops all have the group's full shape run as one
  // flat, grid-stride kernel over the elements (items of 8 a thread, or 4
  // where every operand and output is float32: one 16-byte load or store an
  // operand; broadcast operands indexed), whatever the row schedule: the
  // grid is sized from the chip.
  bool CanUseFlatElementwise() const {
    const std::vector<int64_t>& shape = g_.tensor(g_.op(ops_[0]).output).shape;
    for (int op : ops_) {
      if (!core::IsElementwise(g_.op(op).type)) return false;
      if (g_.tensor(g_.op(op).output).shape != shape) return false;
    }
    return true;
  }

  // Items a thread loads before it computes any: the
  // schedule's unroll where set, else 2. The grid covers the items in one
  // round (no grid-stride cap) and 16-bit results take the approximate
  // exponential and division. H200, silu over 4096 x 16384 bf16: 77.3 us
  // with a grid of 16 blocks an SM striding, 68.5 in one round (2 items a
  // thread; 71.8 with 4); silu(a) * b 256 x 14336: 10.7 us accurate, 10.1
  // approximate.
  int FlatElementwiseUnroll(int full_operands) const {
    if (s_.unroll() > 1) return std::min(s_.unroll(), 8);
    return full_operands > 0 ? 2 : 1;
  }

  // Whether the kernel reads `operands` and writes `outputs` (its plan
  // buffers and graph outputs) as floats only.
  bool AllFloat(const std::vector<int>& operands, const std::vector<int>& outputs) const {
    for (int t : operands) {
      if (ctx_.ReadType(t) != "float") return false;
    }
    for (int t : outputs) {
      if (ctx_.scratch_buffer[t] >= 0 && ctx_.ScratchType(t) != "float") return false;
      if (!ctx_.out_position[t].empty() && g_.tensor(t).dtype != yirage::v1::FLOAT32) return false;
    }
    return true;
  }

  absl::Status EmitFlatElementwise(const std::vector<int>& outputs, bool inject_fault, Code* out) {
    const std::vector<int64_t>& shape = g_.tensor(g_.op(ops_[0]).output).shape;
    const int64_t total = Numel(shape);
    // Items of 8 elements (4 where every access is a float: one 16-byte
    // access instead of two 16 bytes apart, the faster on an H100 over 104
    // MB, bench/micro/fp32_items.cu) over the largest multiple of the item
    // (16-byte loads and stores: every buffer starts 16-byte aligned), the
    // last elements one a thread after them.
    const std::vector<int> operands = OutsideOperands();
    const int item = AllFloat(operands, outputs) ? 4 : 8;
    const int vec = total >= item ? item : 1;
    const int64_t bulk = total / vec * vec;
    const int64_t tail = total - bulk;
    const int64_t items = bulk / vec;
    int vector_operands = 0;
    for (int t : operands) vector_operands += ItemReadOf(t, shape, vec) == ItemRead::kVector;
    const int unroll = vec > 1 ? FlatElementwiseUnroll(vector_operands) : 1;
    constexpr int kThreads = 256;
    const int64_t blocks = std::clamp<int64_t>(
        CeilDiv(items, kThreads * static_cast<int64_t>(unroll)), 1, (int64_t{1} << 31) - 1);
    const std::string name = KernelName(ctx_.plan_index, kernel_index_);
    std::vector<std::string> params;
    KernelLaunch launch = StartLaunch(outputs, &params);
    launch.grid[0] = blocks;
    launch.block = kThreads;
    Code& c = *out;
    c.L("// kernel ", kernel_index_, " '", CommentText(kernel_.name()), "': KERNEL_ROW, ", total,
        " elements, flat elementwise (", vec, " a thread, unroll ", unroll, ", ", blocks,
        " blocks, grid-stride", tail > 0 ? absl::StrCat(", the last ", tail, " one a thread") : "",
        ")");
    c.L("extern \"C\" __global__ void __launch_bounds__(", kThreads, ") ", name, "(",
        absl::StrJoin(params, ", "), ") {");
    c.Open("{");
    if (inject_fault) c.Line(FaultLine());
    c.L("const i64 stride = (i64)gridDim.x * ", kThreads, ";");
    c.L("for (i64 it0 = (i64)blockIdx.x * ", kThreads, " + threadIdx.x; it0 < ", items,
        "LL; it0 += stride * ", unroll, ") {");
    c.Open("{");
    // Round: every item's 16-byte operands loaded raw (kept packed until
    // used), then each item computed and stored.
    for (int t : operands) {
      if (ItemReadOf(t, shape, vec) == ItemRead::kVector)
        c.L("uint4 raw", t, "[", unroll, "][", ctx_.ReadType(t) == "float" && vec == 8 ? 2 : 1,
            "];");
    }
    // Opens the loop over a round's items, `e` the item's first element.
    auto open_items = [&] {
      c.L("#pragma unroll");
      c.L("for (int u = 0; u < ", unroll, "; ++u) {");
      c.Open("{");
      c.L("const i64 e = (it0 + u * stride) * ", vec, ";");
      c.L("if (e >= ", bulk, "LL) break;");
    };
    open_items();
    for (int t : operands) {
      if (ItemReadOf(t, shape, vec) != ItemRead::kVector) continue;
      const std::string at = absl::StrCat(ctx_.Var(t), " + ", ItemOffset(t, shape, "e"));
      c.L("raw", t, "[u][0] = __ldg(reinterpret_cast<const uint4*>(", at, "));");
      if (ctx_.ReadType(t) == "float" && vec == 8) {
        c.L("raw", t, "[u][1] = __ldg(reinterpret_cast<const uint4*>(", at, " + 4));");
      }
    }
    c.Close();
    c.Line("}");
    open_items();
    for (int t : operands) EmitStageItem(t, ItemReadOf(t, shape, vec), shape, vec, c);
    EmitItemOps(vec, c);
    EmitItemStores(outputs, vec, c);
    c.Close();
    c.Line("}");
    c.Close();
    c.Line("}");
    if (tail > 0) {
      c.L("if (blockIdx.x == 0 && threadIdx.x < ", tail, ") {");
      c.Open("{");
      c.L("const i64 e = ", bulk, "LL + threadIdx.x;");
      for (int t : operands) EmitStageItem(t, ItemRead::kElements, shape, 1, c);
      EmitItemOps(1, c);
      EmitItemStores(outputs, 1, c);
      c.Close();
      c.Line("}");
    }
    c.Close();
    c.Line("}");
    ctx_.code->launches.push_back(std::move(launch));
    return absl::OkStatus();
  }

  // The group's ops over an item's `vec` registers: v<j>[vec] from the
  // staged operands in<t> and earlier ops' registers.
  void EmitItemOps(int vec, Code& c) const {
    for (size_t j = 0; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      c.L("float v", j, "[", vec, "];  // ", CommentText(op.name), " = ",
          std::string(core::OpTypeName(op.type)));
      c.L("#pragma unroll");
      c.L("for (int q = 0; q < ", vec, "; ++q) v", j, "[q] = ", ItemElementwise(j), ";");
    }
  }

  // Kernel input t's shape in the row space (per-row ops: core/row_group.h
  // rule 5).
  std::vector<int64_t> RowShape(int t) const { return core::RowSpaceShape(g_, info_, t); }

  // ---- Gather elements ----
  // Groups of concats and slices along the row (and elementwise ops): every
  // output element is an expression of input elements at shifted columns,
  // so the kernel runs over output elements, the grid sized from the chip,
  // and each op is a device lambda of (row, column) that calls its
  // producers at the columns it reads. The whole-row form would stage each
  // row in one block: one block for a rank-1 concat of 16M elements. For
  // rows fewer than about four blocks an SM; with more, whole rows keep the
  // chip busy and load 16 bytes at a time, and the gather runs where the
  // schedule is PARALLEL_COLS and it takes 8 columns a thread
  // (RowKernels.gather_cols: the search times both).
  bool CanUseGatherElements(const std::vector<int>& outputs) const {
    if (info_.num_rows >= 4 * static_cast<int64_t>(std::max(1, ctx_.target.sm_count)) &&
        (s_.parallel() != yirage::v1::PARALLEL_COLS || !GatherVectors(outputs))) {
      return false;
    }
    bool moves = false;
    for (int op : ops_) {
      const OpType type = g_.op(op).type;
      if (type == OpType::kConcat || type == OpType::kSlice) {
        moves = true;
      } else if (!core::IsElementwise(type)) {
        return false;
      }
    }
    return moves;
  }

  // Reads tensor `t` (a kernel input) at row `r`, column `c` of the space
  // [lead..., w], broadcasting where its dims are 1.
  std::string RowSpaceLoad(int t, int64_t w, const std::string& r, const std::string& c) const {
    std::vector<int64_t> space = info_.lead_dims;
    space.push_back(w);
    const std::vector<int64_t> strides = BroadcastStrides(RowShape(t), space);
    const std::vector<int64_t> lead(strides.begin(), strides.end() - 1);
    std::string at = info_.lead_dims.empty() ? "0LL" : OffsetExpr(info_.lead_dims, lead, r);
    if (strides.back() != 0) absl::StrAppend(&at, " + (", c, ") * ", strides.back(), "LL");
    return absl::StrCat("yr_ld(", ctx_.Var(t), ", ", at, ")");
  }

  // Operand `slot` of group op j at row `r`, column `c` of the op's input
  // space (width `w`); group producers are the lambdas named `prefix`<p>.
  std::string GatherOperand(size_t j, int slot, int64_t w, const std::string& r,
                            const std::string& c, const std::string& prefix = "f") const {
    const int t = g_.op(ops_[j]).inputs[slot];
    if (!info_.in_group[j][slot]) return RowSpaceLoad(t, w, r, c);
    const size_t p = group_pos_.at(t);
    return absl::StrCat(prefix, p, "(", r, ", ", info_.row_width[p] == 1 ? "0" : c, ")");
  }

  // Columns a gather item takes: 4 where every read and write is a float
  // (one 16-byte access, as flat elementwise kernels), else 8.
  int GatherWidth(const std::vector<int>& outputs) const {
    return AllFloat(OutsideOperands(), outputs) ? 4 : 8;
  }

  // Whether the group gathers GatherWidth (gw) consecutive columns at a
  // time: one row (the last total % gw elements one a thread), or rows
  // whose every output is a multiple of gw wide, so that an item never
  // straddles two rows. Pieces and slice starts may fall anywhere: an item
  // within one concat piece is one call of it (loads checked for alignment
  // at run time), one that straddles two pieces is taken column by column.
  // An op reads a group producer of one column only where it is one column
  // itself.
  bool GatherVectors(const std::vector<int>& outputs) const {
    const int gw = GatherWidth(outputs);
    for (int t : outputs) {
      const int64_t w = info_.row_width[group_pos_.at(t)];
      if (info_.num_rows > 1 ? w % gw != 0 : w < gw) return false;
    }
    for (size_t j = 0; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      for (size_t slot = 0; slot < op.inputs.size(); ++slot) {
        if (!info_.in_group[j][slot]) continue;
        if (info_.row_width[group_pos_.at(op.inputs[slot])] == 1 && info_.row_width[j] != 1)
          return false;
      }
    }
    return true;
  }

  // Fills `dst`[gw] with operand `slot` of group op j at row `r`, columns
  // `c`..`c`+gw-1 of the op's input space (width `w`; c + gw <= w).
  void EmitGatherOperandN(int gw, size_t j, int slot, int64_t w, const std::string& r,
                          const std::string& c, const std::string& dst, Code& code) const {
    const int t = g_.op(ops_[j]).inputs[slot];
    if (info_.in_group[j][slot]) {
      code.L("f", group_pos_.at(t), "(", r, ", ", c, ", ", dst, ");");
      return;
    }
    std::vector<int64_t> space = info_.lead_dims;
    space.push_back(w);
    const std::vector<int64_t> strides = BroadcastStrides(RowShape(t), space);
    const std::vector<int64_t> lead(strides.begin(), strides.end() - 1);
    const bool narrow = info_.num_rows * w < (int64_t{1} << 31);
    std::string at = info_.lead_dims.empty() ? "0LL" : OffsetExpr(info_.lead_dims, lead, r, narrow);
    if (strides.back() == 0) {
      code.L("{ const float s_ = yr_ld(", ctx_.Var(t), ", ", at, "); for (int q = 0; q < ", gw,
             "; ++q) ", dst, "[q] = s_; }");
      return;
    }
    code.L("yr_ld", gw, "_any(", ctx_.Var(t), " + ", at, " + (", c, "), ", dst, ");");
  }

  // The gather form's ops as device lambdas of gw columns:
  // f<j>(r, c, out) fills out[gw] with op j's row r, columns c..c+gw-1;
  // the scalar lambdas s<j> (EmitGatherLambdas) take columns that straddle
  // two concat pieces.
  void EmitGatherLambdasN(int gw, Code& c) const {
    for (size_t j = 0; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      const int64_t w = info_.row_width[j];
      c.L("// ", CommentText(op.name), " = ", std::string(core::OpTypeName(op.type)));
      c.Open(absl::StrCat("auto f", j, " = [&](i64 r, i64 c, float* o) {"));
      c.L("(void)r;");
      if (op.type == OpType::kSlice) {
        const int64_t in_w = g_.tensor(op.inputs[0]).shape.back();
        EmitGatherOperandN(gw, j, 0, in_w, "r", absl::StrCat("c + ", op.slice_start), "o", c);
      } else if (op.type == OpType::kConcat) {
        int64_t off = 0;
        for (size_t k = 0; k < op.inputs.size(); ++k) {
          const int64_t wk = g_.tensor(op.inputs[k]).shape.back();
          if (wk >= gw) {
            c.Open(absl::StrCat("if (", off > 0 ? absl::StrCat("c >= ", off, "LL && ") : "", "c + ",
                                gw, " <= ", off + wk, "LL) {"));
            EmitGatherOperandN(gw, j, static_cast<int>(k), wk, "r", absl::StrCat("c - ", off), "o",
                               c);
            c.L("return;");
            c.Close();
          }
          off += wk;
        }
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", gw, "; ++q) o[q] = s", j, "(r, c + q);");
      } else {
        c.L("float a[", gw, "];");
        EmitGatherOperandN(gw, j, 0, w, "r", "c", "a", c);
        std::string value;
        if (core::IsUnaryElementwise(op.type)) {
          value = UnaryExpr(op, "a[q]", Approximate(j));
        } else if (op.has_scalar) {
          value = BinaryExpr(op.type, "a[q]", Lit(op.scalar));
        } else {
          c.L("float b[", gw, "];");
          EmitGatherOperandN(gw, j, 1, w, "r", "c", "b", c);
          value = BinaryExpr(op.type, "a[q]", "b[q]");
        }
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", gw, "; ++q) o[q] = ", value, ";");
      }
      c.Close("};");
    }
  }

  absl::Status EmitGatherElements(const std::vector<int>& outputs, bool inject_fault, Code* out) {
    constexpr int kThreads = 256;
    const bool vectors = GatherVectors(outputs);
    const int vec = vectors ? GatherWidth(outputs) : 1;
    // Items loaded before any is computed, as flat elementwise kernels; four
    // of 4 floats by default (bench/micro/fp32_items.cu's concat: the
    // fastest there, with two close behind).
    const int unroll = !vectors ? 1 : vec == 4 && s_.unroll() <= 1 ? 4 : FlatElementwiseUnroll(1);
    int64_t most = 1;
    for (int t : outputs) most = std::max(most, info_.num_rows * info_.row_width[group_pos_.at(t)]);
    const int64_t sms = std::max(1, ctx_.target.sm_count);
    // An item a thread covers the elements in one round (as flat
    // elementwise kernels: a grid capped at 16 blocks an SM that strides was
    // slower there); one a thread, the capped grid strides.
    const int64_t blocks =
        vectors ? std::clamp<int64_t>(CeilDiv(most / vec, int64_t{kThreads} * unroll), 1,
                                      (int64_t{1} << 31) - 1)
                : std::clamp<int64_t>(CeilDiv(most, kThreads), 1, 16 * sms);
    const std::string name = KernelName(ctx_.plan_index, kernel_index_);
    std::vector<std::string> params;
    KernelLaunch launch = StartLaunch(outputs, &params);
    launch.grid[0] = blocks;
    launch.block = kThreads;
    Code& c = *out;
    c.L("// kernel ", kernel_index_, " '", CommentText(kernel_.name()), "': KERNEL_ROW, ",
        info_.num_rows, " rows, gather elements (", vec, " a thread",
        vectors ? absl::StrCat(", unroll ", unroll) : "", ", ", blocks, " blocks, grid-stride)");
    c.L("extern \"C\" __global__ void __launch_bounds__(", kThreads, ") ", name, "(",
        absl::StrJoin(params, ", "), ") {");
    c.Open("{");
    if (inject_fault) c.Line(FaultLine());
    if (vectors) {
      EmitGatherLambdas(c, "s");
      EmitGatherLambdasN(vec, c);
    } else {
      EmitGatherLambdas(c, "f");
    }
    c.L("const i64 step = (i64)gridDim.x * ", kThreads, ";");
    for (int t : outputs) {
      const size_t j = group_pos_.at(t);
      const int64_t w = info_.row_width[j];
      const int64_t total = info_.num_rows * w;
      // Row and column of element e, 32-bit where the elements allow.
      const bool narrow = total < (int64_t{1} << 31);
      const std::string x = narrow ? "(unsigned)e" : "e";
      const std::string k = narrow ? "u" : "LL";
      const std::string rc =
          absl::StrCat("const i64 r = ", x, " / ", w, k, ", col = ", x, " % ", w, k, ";");
      if (!vectors) {
        c.Open(absl::StrCat("for (i64 e = (i64)blockIdx.x * ", kThreads, " + threadIdx.x; e < ",
                            total, "LL; e += step) {"));
        c.L(rc);
        c.L("const float v = f", j, "(r, col);");
        EmitStores(dsts_[t], "e", "v", &c);
        c.Close();
        continue;
      }
      // Rounds of `unroll` items a thread: every item computed before
      // any is stored, so that their loads are in flight together.
      const int64_t items = total / vec;
      c.Open(absl::StrCat("for (i64 it0 = (i64)blockIdx.x * ", kThreads, " + threadIdx.x; it0 < ",
                          items, "LL; it0 += step * ", unroll, ") {"));
      c.L("float v[", unroll, "][", vec, "];");
      c.L("#pragma unroll");
      c.Open(absl::StrCat("for (int u = 0; u < ", unroll, "; ++u) {"));
      c.L("const i64 e = (it0 + u * step) * ", vec, ";");
      c.L("if (e >= ", items * vec, "LL) break;");
      c.L(rc);
      c.L("f", j, "(r, col, v[u]);");
      c.Close();
      c.L("#pragma unroll");
      c.Open(absl::StrCat("for (int u = 0; u < ", unroll, "; ++u) {"));
      c.L("const i64 e = (it0 + u * step) * ", vec, ";");
      c.L("if (e >= ", items * vec, "LL) break;");
      for (const std::string& d : dsts_[t]) {
        if (vec == 8) {
          c.L("yr_st8(", d, " + e, v[u]);");
        } else {
          c.L("yr_st4(", d, ", e, v[u]);");
        }
      }
      c.Close();
      c.Close();
      if (total % vec != 0) {
        // One row (GatherVectors): its last elements one a thread.
        c.Open(absl::StrCat("if (blockIdx.x == 0 && threadIdx.x < ", total % vec, ") {"));
        c.L("const i64 e = ", items * vec, "LL + threadIdx.x;");
        c.L("const float s_ = s", j, "(0, e);");
        EmitStores(dsts_[t], "e", "s_", &c);
        c.Close();
      }
    }
    c.Close();
    c.Line("}");
    ctx_.code->launches.push_back(std::move(launch));
    return absl::OkStatus();
  }

  // The gather form's ops as device lambdas of one element: `prefix`<j>(r,
  // c) is op j's row r, column c.
  void EmitGatherLambdas(Code& c, const std::string& prefix) const {
    for (size_t j = 0; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      const int64_t w = info_.row_width[j];
      auto operand = [&](int slot, int64_t width, const std::string& col) {
        return GatherOperand(j, slot, width, "r", col, prefix);
      };
      c.L("// ", CommentText(op.name), " = ", std::string(core::OpTypeName(op.type)));
      c.Open(absl::StrCat("auto ", prefix, j, " = [&](i64 r, i64 c) -> float {"));
      c.L("(void)r;");
      c.L("(void)c;");
      if (op.type == OpType::kSlice) {
        const int64_t in_w = g_.tensor(op.inputs[0]).shape.back();
        c.L("return ", operand(0, in_w, absl::StrCat("c + ", op.slice_start)), ";");
      } else if (op.type == OpType::kConcat) {
        int64_t off = 0;
        for (size_t k = 0; k < op.inputs.size(); ++k) {
          const int64_t wk = g_.tensor(op.inputs[k]).shape.back();
          const std::string v = operand(static_cast<int>(k), wk, absl::StrCat("c - ", off));
          if (k + 1 < op.inputs.size()) {
            c.L("if (c < ", off + wk, "LL) return ", v, ";");
          } else {
            c.L("return ", v, ";");
          }
          off += wk;
        }
      } else {
        c.L("return ", ElementwiseExpr(j, [&](int slot) { return operand(slot, w, "c"); }), ";");
      }
      c.Close("};");
    }
  }

  // ---- Split rows ----
  // Rows too few and too long for a block each (a sum over one row of 2M
  // elements, a softmax over a vocabulary-wide row: one block reading it
  // all) split into ranges of at least kSplitRowItems items (8 elements, a
  // round of the block's threads) a block, for about four blocks an SM:
  // rows of a few hundred KB are latency-bound, and more blocks keep more
  // loads in flight. 16-byte loads read past L1, kSplitRowUnroll items in
  // flight a thread. Two forms:
  //  - a last-axis reduction after elementwise ops of its input's shape: a
  //    block reduces its range to a partial, and the last block of the row
  //    to finish (a per-row counter, left zero) reduces the row's partials,
  //    in a fixed order, and stores the result;
  //  - one norm or softmax among elementwise ops of its shape: a first
  //    kernel stores each range's statistics (softmax: max and the sum of
  //    exponentials below it; layer_norm: count, mean and squared
  //    deviations, merged as Chan et al.; rms_norm: the sum of squares),
  //    a second combines the row's statistics in a fixed order in every
  //    block, computes its range again and stores it.
  static constexpr int kSplitRowThreads = 256;
  static constexpr int kSplitRowUnroll = 4;
  static constexpr int64_t kSplitRowItems = kSplitRowThreads;

  // The split-row form of the group: the shape of the row space, the op
  // whose statistics need the whole row (the reduction or the norm), and
  // blocks a row (1: the group does not run in split rows).
  struct SplitRows {
    std::vector<int64_t> shape;
    size_t stat_op = 0;
    int64_t splits = 1;
    size_t post = 0;  // elementwise ops after the reduction (the group's last)
  };

  SplitRows PlanSplitRows(const std::vector<int>& outputs) const {
    SplitRows sr;
    size_t reduction = ops_.size();
    for (size_t j = 0; j < ops_.size(); ++j) {
      if (core::IsReduction(g_.op(ops_[j]).type)) reduction = j;
    }
    if (reduction < ops_.size()) {
      if (info_.row_width[reduction] != 1) return sr;
      // Elementwise ops on the row's result may follow (width 1: the last
      // block applies them as it stores); the outputs are among them.
      for (size_t j = reduction + 1; j < ops_.size(); ++j) {
        const OpInfo& op = g_.op(ops_[j]);
        if (!core::IsElementwise(op.type) || info_.row_width[j] != 1) return sr;
        for (size_t slot = 0; slot < op.inputs.size(); ++slot) {
          if (info_.in_group[j][slot] && group_pos_.at(op.inputs[slot]) < reduction) return sr;
        }
      }
      for (int t : outputs) {
        if (group_pos_.at(t) < reduction) return sr;
      }
      sr.stat_op = reduction;
      sr.post = ops_.size() - reduction - 1;
    } else {
      int norms = 0;
      for (size_t j = 0; j < ops_.size(); ++j) {
        if (core::IsNormOrSoftmax(g_.op(ops_[j]).type)) {
          sr.stat_op = j;
          ++norms;
        }
      }
      if (norms != 1) return sr;
    }
    sr.shape = g_.tensor(g_.op(ops_[sr.stat_op]).inputs[0]).shape;
    for (size_t j = 0; j < ops_.size() - sr.post; ++j) {
      if (j == sr.stat_op) continue;
      const OpInfo& op = g_.op(ops_[j]);
      if (!core::IsElementwise(op.type) || g_.tensor(op.output).shape != sr.shape) return sr;
    }
    const int64_t width = sr.shape.back();
    const int64_t vec = width % 8 == 0 ? 8 : 1;
    const int64_t sms = std::max(1, ctx_.target.sm_count);
    const int64_t splits =
        std::min(CeilDiv(4 * sms, info_.num_rows), width / (kSplitRowItems * vec));
    // A norm reads its rows twice over two launches: only worth it where a
    // block a row leaves most of the chip idle, or where register rows do
    // not hold the row (the whole-row form then stages it in memory).
    if (core::IsReduction(g_.op(ops_[sr.stat_op]).type)) {
      if (splits >= 2) sr.splits = splits;
    } else if (splits >= 8 || (splits >= 3 && !CanUseRegisterRows())) {
      sr.splits = splits;
    }
    return sr;
  }

  // Whether operand `t` of the row space `shape` loads 16 bytes at a time:
  // contiguous along the row, rows starting 16-byte aligned.
  bool SplitVectorOperand(int t, const std::vector<int64_t>& shape, int vec) const {
    if (vec != 8) return false;
    const std::vector<int64_t> strides = BroadcastStrides(g_.tensor(t).shape, shape);
    if (strides.back() != 1) return false;
    for (size_t d = 0; d + 1 < strides.size(); ++d) {
      if (strides[d] % 8 != 0) return false;
    }
    return true;
  }

  // The loop of a split-row block over its columns [c0, c1) of row `row`
  // (variables in scope): each item's `operands` (those ops [0, n) read
  // from outside the group, and more) loaded (the
  // whole round's 16-byte loads first), the elementwise ops among them
  // computed into v<j>[vec] (the op at `special`, if below n, by
  // `special_value`, an expression of q), then `body`.
  template <typename Body>
  void EmitSplitItems(const std::vector<int64_t>& shape, int vec, const std::vector<int>& operands,
                      size_t n, size_t special, const std::string& special_value, Body body,
                      Code& c) const {
    const int64_t width = shape.back();
    constexpr int kThreads = kSplitRowThreads;
    constexpr int kUnroll = kSplitRowUnroll;
    auto offset = [&](int t) {
      if (g_.tensor(t).shape == shape) return std::string("e");
      return OffsetExpr(shape, BroadcastStrides(g_.tensor(t).shape, shape), "e");
    };
    c.L("for (i64 cb = c0 + threadIdx.x * ", vec, "; cb < c1; cb += ", kThreads * kUnroll * vec,
        ") {");
    c.Open("{");
    for (int t : operands) {
      if (SplitVectorOperand(t, shape, vec))
        c.L("uint4 raw", t, "[", kUnroll, "][", ctx_.ReadType(t) == "float" ? 2 : 1, "];");
    }
    auto open_items = [&] {
      c.L("#pragma unroll");
      c.L("for (int u = 0; u < ", kUnroll, "; ++u) {");
      c.Open("{");
      c.L("const i64 col = cb + u * ", kThreads * vec, ";");
      c.L("if (col >= c1) break;");
      c.L("const i64 e = row * ", width, "LL + col;");
    };
    open_items();
    for (int t : operands) {
      if (!SplitVectorOperand(t, shape, vec)) continue;
      const std::string at = absl::StrCat(ctx_.Var(t), " + ", offset(t));
      c.L("raw", t, "[u][0] = yr_ld16_once(", at, ");");
      if (ctx_.ReadType(t) == "float") c.L("raw", t, "[u][1] = yr_ld16_once(", at, " + 4);");
    }
    c.Close();
    c.Line("}");
    open_items();
    for (int t : operands) {
      EmitStageItem(t, SplitVectorOperand(t, shape, vec) ? ItemRead::kVector : ItemRead::kElements,
                    shape, vec, c);
    }
    for (size_t j = 0; j < n; ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      c.L("float v", j, "[", vec, "];  // ", CommentText(op.name), " = ",
          std::string(core::OpTypeName(op.type)));
      c.L("#pragma unroll");
      c.L("for (int q = 0; q < ", vec, "; ++q) v", j,
          "[q] = ", j == special ? special_value : ItemElementwise(j), ";");
    }
    body();
    c.Close();
    c.Line("}");
    c.Close();
    c.Line("}");
  }

  // Stores the row's result `v` of op `first` (a reduction) and the values
  // of the width-1 elementwise ops after it at `row`, each output where it
  // is one: their kernel inputs are read at the row (RowShape).
  void EmitRowResults(size_t first, const std::string& v, Code* out) const {
    Code& c = *out;
    c.L("const float r", first, " = ", v, ";");
    auto operand = [&](size_t j, int slot) {
      const int t = g_.op(ops_[j]).inputs[slot];
      if (info_.in_group[j][slot]) return absl::StrCat("r", group_pos_.at(t));
      return RowSpaceLoad(t, 1, "row", "0");  // the row space [lead..., 1]
    };
    for (size_t j = first + 1; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      c.L("const float r", j, " = ", ElementwiseExpr(j, [&](int slot) { return operand(j, slot); }),
          ";  // ", CommentText(op.name), " = ", std::string(core::OpTypeName(op.type)));
    }
    for (size_t j = first; j < ops_.size(); ++j) {
      const auto it = dsts_.find(g_.op(ops_[j]).output);
      if (it != dsts_.end()) EmitStores(it->second, "row", absl::StrCat("r", j), &c);
    }
  }

  absl::Status EmitSplitRows(const std::vector<int>& outputs, const SplitRows& sr,
                             bool inject_fault, Code* out) {
    const OpInfo& stat = g_.op(ops_[sr.stat_op]);
    const std::vector<int64_t>& shape = sr.shape;
    const int64_t width = shape.back();
    const int64_t rows = info_.num_rows;
    // One row whose width is no multiple of 8 (a sum over 1999101
    // elements): 8 elements a thread up to its last multiple of 8 (the row
    // starts aligned), then one a thread over the rest. Ranges start at
    // multiples of 8 either way. `vec` is the items' width where the
    // bodies below are emitted.
    const bool tail = width % 8 != 0 && rows == 1;
    int vec = width % 8 == 0 || tail ? 8 : 1;
    const int64_t vend = width / 8 * 8;
    const int64_t chunk = CeilDiv(CeilDiv(width, sr.splits), vec) * vec;
    const int64_t splits = CeilDiv(width, chunk);
    const bool reduce = core::IsReduction(stat.type);
    // Floats of statistics a range.
    const int nstat = stat.type == OpType::kLayerNorm ? 3 : stat.type == OpType::kSoftmax ? 2 : 1;
    const std::string name = KernelName(ctx_.plan_index, kernel_index_);
    const int ws = ctx_.AddBuffer(rows * splits * nstat * 4, false, name + " split-row partials");
    constexpr int kThreads = kSplitRowThreads;
    const std::string x = ItemOperand(sr.stat_op, 0);
    Code& c = *out;
    // A range's items: EmitSplitItems over [c0, c1), or with a tail its
    // 8-wide items below `vend` and then its single ones.
    auto items = [&](const std::vector<int>& operands, size_t n, size_t special,
                     const std::string& special_value, const std::function<void()>& body) {
      if (!tail) {
        EmitSplitItems(shape, vec, operands, n, special, special_value, body, c);
        return;
      }
      c.L("const i64 c1v = c1 < ", vend, "LL ? c1 : ", vend, "LL;");
      c.L("const i64 c0t = c0 > ", vend, "LL ? c0 : ", vend, "LL;");
      c.Open("{");
      c.L("const i64 c1 = c1v;");
      vec = 8;
      EmitSplitItems(shape, vec, operands, n, special, special_value, body, c);
      c.Close();
      c.Open("{");
      c.L("const i64 c0 = c0t;");
      vec = 1;
      EmitSplitItems(shape, vec, operands, n, special, special_value, body, c);
      c.Close();
      vec = 8;
    };
    auto open_kernel = [&](const std::string& kname, const std::vector<std::string>& params,
                           const std::string& what) {
      c.L("// kernel ", kernel_index_, " '", CommentText(kernel_.name()), "': KERNEL_ROW, ", rows,
          " row(s) of ", width, ", split rows, ", what, " (", splits, " blocks a row of ", chunk,
          " elements, ", vec, " a thread, unroll ", kSplitRowUnroll, ")");
      c.L("extern \"C\" __global__ void __launch_bounds__(", kThreads, ") ", kname, "(",
          absl::StrJoin(params, ", "), ") {");
      c.Open("{");
      c.L("__shared__ float red[", kThreads / 32, "];");
      if (inject_fault) c.Line(FaultLine());
      c.L("const i64 row = blockIdx.y;");
      c.L("const i64 c0 = (i64)blockIdx.x * ", chunk, "LL;");
      c.L("const i64 c1 = c0 + ", chunk, "LL < ", width, "LL ? c0 + ", chunk, "LL : ", width,
          "LL;");
    };
    auto close_kernel = [&](KernelLaunch launch) {
      c.Close();
      c.Line("}");
      launch.grid[0] = splits;
      launch.grid[1] = rows;
      launch.block = kThreads;
      ctx_.code->launches.push_back(std::move(launch));
    };
    const std::string ninf = "-__int_as_float(0x7f800000)";
    const std::string part = absl::StrCat("ws + (row * ", splits, "LL + blockIdx.x) * ", nstat);

    // First (or only) kernel: each range's statistics.
    std::vector<std::string> params;
    KernelLaunch launch = StartLaunch(reduce ? outputs : std::vector<int>{}, &params);
    if (!reduce) launch.name = name + "_stats";
    params.push_back("float* __restrict__ ws");
    launch.args.push_back(ctx_.PlanBufferId(ws));
    if (reduce) {
      const int cnt = ctx_.AddBuffer(rows * 4, true, name + " split-row counters");
      params.push_back("unsigned* __restrict__ cnt");
      launch.args.push_back(ctx_.PlanBufferId(cnt));
    }
    open_kernel(launch.name, params, reduce ? "reduction" : "statistics");
    const bool mx = stat.type == OpType::kReduceMax;
    if (reduce) {
      c.L("float acc = ", mx ? ninf : "0.0f", ";");
    } else if (stat.type == OpType::kSoftmax) {
      c.L("float m = ", ninf, ", s = 0.0f;");
    } else if (stat.type == OpType::kLayerNorm) {
      c.L("float n = 0.0f, mean = 0.0f, m2 = 0.0f;");
    } else {
      c.L("float ss = 0.0f;");
    }
    std::vector<int> stat_operands = OutsideOperandsOf(sr.stat_op);
    if (!info_.in_group[sr.stat_op][0]) {
      const int t = stat.inputs[0];
      if (std::find(stat_operands.begin(), stat_operands.end(), t) == stat_operands.end())
        stat_operands.push_back(t);
    }
    items(stat_operands, sr.stat_op, sr.stat_op, "", [&] {
      if (reduce) {
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", vec,
            "; ++q) acc = ", mx ? absl::StrCat("yr_max(acc, ", x, ")") : absl::StrCat("acc + ", x),
            ";");
      } else if (stat.type == OpType::kSoftmax) {
        // Online: the sum is kept relative to the running max, rescaled
        // once an item.
        c.Open("{");
        c.L("float mn = m;");
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", vec, "; ++q) mn = yr_max(mn, ", x, ");");
        c.Open(absl::StrCat("if (mn != ", ninf, ") {"));
        c.L("s *= expf(m - mn);");
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", vec, "; ++q) s += expf(", x, " - mn);");
        c.Close();
        c.L("m = mn;");
        c.Close();
      } else if (stat.type == OpType::kLayerNorm) {
        // The item's mean and squared deviations, merged into the thread's.
        c.Open("{");
        c.L("float s8 = 0.0f, q8 = 0.0f;");
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", vec, "; ++q) s8 += ", x, ";");
        c.L("const float m8 = s8 / ", vec, ".0f;");
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", vec, "; ++q) q8 += (", x, " - m8) * (", x, " - m8);");
        c.L("const float nn = n + ", vec, ".0f, d = m8 - mean;");
        c.L("mean += d * (", vec, ".0f / nn);");
        c.L("m2 += q8 + d * d * (n * ", vec, ".0f / nn);");
        c.L("n = nn;");
        c.Close();
      } else {
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", vec, "; ++q) ss += ", x, " * ", x, ";");
      }
    });
    if (reduce) {
      const std::string fn = mx ? "yr_gmax" : "yr_gsum";
      c.L("acc = ", fn, "<", kThreads, ">(acc, red);");
      c.L("__shared__ unsigned last_block;");
      c.L("if (threadIdx.x == 0) *(", part, ") = acc;");
      c.L("__threadfence();");
      c.L("__syncthreads();");
      c.L("if (threadIdx.x == 0) last_block = atomicAdd(&cnt[row], 1u) == ", splits - 1,
          "u ? 1u : 0u;");
      c.L("__syncthreads();");
      c.L("if (last_block == 0u) return;");
      c.L("__threadfence();");
      c.L("// the row's partials, each thread a fixed subset, then the block");
      c.L("float v = ", mx ? ninf : "0.0f", ";");
      c.L("for (int p = threadIdx.x; p < ", splits, "; p += ", kThreads,
          ") v = ", mx ? "yr_max(v, " : "v + (", "__ldcg(ws + row * ", splits, "LL + p));");
      c.L("v = ", fn, "<", kThreads, ">(v, red);");
      c.Open("if (threadIdx.x == 0) {");
      if (stat.type == OpType::kReduceMean) c.L("v = v / ", width, ".0f;");
      EmitRowResults(sr.stat_op, "v", &c);
      c.L("cnt[row] = 0u;  // ready for the next launch");
      c.Close();
      close_kernel(std::move(launch));
      return absl::OkStatus();
    }
    if (stat.type == OpType::kSoftmax) {
      c.L("const float bm = yr_gmax<", kThreads, ">(m, red);");
      c.L("const float bs = yr_gsum<", kThreads, ">(m == ", ninf,
          " ? 0.0f : s * expf(m - bm), red);");
      c.L("if (threadIdx.x == 0) { float* p = ", part, "; p[0] = bm; p[1] = bs; }");
    } else if (stat.type == OpType::kLayerNorm) {
      c.L("const float bn = yr_gsum<", kThreads, ">(n, red);");
      c.L("const float bmean = bn > 0.0f ? yr_gsum<", kThreads, ">(n * mean, red) / bn : 0.0f;");
      c.L("const float bm2 = yr_gsum<", kThreads,
          ">(m2 + n * (mean - bmean) * (mean - bmean), red);");
      c.L("if (threadIdx.x == 0) { float* p = ", part, "; p[0] = bn; p[1] = bmean; p[2] = bm2; }");
    } else {
      c.L("ss = yr_gsum<", kThreads, ">(ss, red);");
      c.L("if (threadIdx.x == 0) *(", part, ") = ss;");
    }
    close_kernel(std::move(launch));

    // Second kernel: the row's statistics, then the range again, stored.
    std::vector<std::string> params2;
    KernelLaunch apply = StartLaunch(outputs, &params2);
    params2.push_back("const float* __restrict__ ws");
    apply.args.push_back(ctx_.PlanBufferId(ws));
    open_kernel(apply.name, params2, "apply");
    c.L("// the row's statistics, each thread a fixed subset, then the block");
    c.L("const float* const rs = ws + row * ", splits * nstat, "LL;");
    std::string value;
    if (stat.type == OpType::kSoftmax) {
      c.L("float pm = ", ninf, ";");
      c.L("for (int p = threadIdx.x; p < ", splits, "; p += ", kThreads,
          ") pm = yr_max(pm, rs[2 * p]);");
      c.L("const float rm = yr_gmax<", kThreads, ">(pm, red);");
      c.L("float ps = 0.0f;");
      c.L("for (int p = threadIdx.x; p < ", splits, "; p += ", kThreads,
          ") ps += rs[2 * p] == ", ninf, " ? 0.0f : rs[2 * p + 1] * expf(rs[2 * p] - rm);");
      c.L("const float inv = 1.0f / yr_gsum<", kThreads, ">(ps, red);");
      value = absl::StrCat("expf(", x, " - rm) * inv");
    } else if (stat.type == OpType::kLayerNorm) {
      c.L("float pw = 0.0f;");
      c.L("for (int p = threadIdx.x; p < ", splits, "; p += ", kThreads,
          ") pw += rs[3 * p] * rs[3 * p + 1];");
      c.L("const float mean = yr_gsum<", kThreads, ">(pw, red) / ", width, ".0f;");
      c.L("float pv = 0.0f;");
      c.L("for (int p = threadIdx.x; p < ", splits, "; p += ", kThreads,
          ") pv += rs[3 * p + 2] + rs[3 * p] * (rs[3 * p + 1] - mean) * (rs[3 * p + 1] - mean);");
      c.L("const float inv = 1.0f / sqrtf(yr_gsum<", kThreads, ">(pv, red) / ", width, ".0f + ",
          Lit(stat.eps), ");");
      value = absl::StrCat("(", x, " - mean) * inv");
    } else {
      c.L("float pss = 0.0f;");
      c.L("for (int p = threadIdx.x; p < ", splits, "; p += ", kThreads, ") pss += rs[p];");
      c.L("const float inv = 1.0f / sqrtf(yr_gsum<", kThreads, ">(pss, red) / ", width, ".0f + ",
          Lit(stat.eps), ");");
      value = absl::StrCat(x, " * inv");
    }
    if (stat.type != OpType::kSoftmax) {
      if (stat.inputs.size() > 1)
        value = absl::StrCat("(", value, ") * ", ItemOperand(sr.stat_op, 1));
      if (stat.inputs.size() > 2) value = absl::StrCat(value, " + ", ItemOperand(sr.stat_op, 2));
    }
    items(OutsideOperandsOf(ops_.size()), ops_.size(), sr.stat_op, value,
          [&] { EmitItemStores(outputs, vec, c); });
    close_kernel(std::move(apply));
    return absl::OkStatus();
  }

  // The row width a register-rows kernel walks: its ops' widths, a
  // reduction's being the width it reads.
  int64_t RegisterRowsWidth() const {
    int64_t w = 0;
    for (size_t j = 0; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      w = std::max(w, core::IsReduction(op.type) ? g_.tensor(op.inputs[0]).shape.back()
                                                 : info_.row_width[j]);
    }
    return w;
  }

  // Rows a register-rows block holds: the schedule's block_rows, at most the
  // group's rows, and at most 8192 values a block (1024 threads of 8, 256 of
  // 32), so that two blocks an SM fit the register file without spills.
  int RegisterRowsPerBlock(const RegisterRowsLayout& l) const {
    const int64_t per = l.per_thread();
    const int tpr = l.threads;
    const int64_t max_threads = std::min<int64_t>(1024, std::max<int64_t>(tpr, 8192 / per));
    return static_cast<int>(std::clamp<int64_t>(
        std::min<int64_t>(std::max(1, s_.block_rows()), max_threads / tpr), 1, info_.num_rows));
  }

  bool CanUseRegisterRows() const {
    if (s_.parallel() != yirage::v1::PARALLEL_ROWS) return false;
    const int64_t w = RegisterRowsWidth();
    if (w < (s_.block_rows() > 1 ? 64 : 256)) return false;
    for (size_t j = 0; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      // A last-axis sum, mean or max reduces the row to one value (width 1),
      // which later ops of the group may broadcast.
      const bool reduce = core::IsReduction(op.type) && info_.row_width[j] == 1 &&
                          g_.tensor(op.inputs[0]).shape.back() == w;
      if (info_.row_width[j] != w && !reduce) return false;
      const bool norm = op.type == OpType::kRmsNorm || op.type == OpType::kLayerNorm ||
                        op.type == OpType::kSoftmax;
      if (!core::IsElementwise(op.type) && !norm && !reduce) return false;
      for (size_t slot = 0; slot < op.inputs.size(); ++slot) {
        if (info_.in_group[j][slot]) {
          // A reduction reads a full row; a width-1 value feeds only
          // elementwise ops (broadcast), not another reduction or a norm.
          const bool scalar_in = info_.row_width[group_pos_.at(op.inputs[slot])] == 1;
          if (scalar_in && !core::IsElementwise(op.type)) return false;
          continue;
        }
        const int t = op.inputs[slot];
        std::vector<int64_t> space = info_.lead_dims;
        space.push_back(w);
        const std::vector<int64_t> strides = BroadcastStrides(RowShape(t), space);
        const int64_t cs = strides.back();
        if (cs != 0 && cs != 1) return false;
      }
    }
    return LayoutRegisterRows(w).threads > 0;
  }

  // Reads operand `slot` of group op j as register q's value, given the
  // per-tensor register arrays already loaded.
  std::string RegisterOperand(size_t j, int slot, const std::string& q) const {
    const OpInfo& op = g_.op(ops_[j]);
    const int t = op.inputs[slot];
    if (info_.in_group[j][slot]) {
      const size_t src = group_pos_.at(t);
      // A reduction's one value, broadcast along the row.
      if (info_.row_width[src] == 1) return absl::StrCat("v", src, "[0]");
      return absl::StrCat("v", src, "[", q, "]");
    }
    return absl::StrCat("in", t, "[", q, "]");
  }

  absl::Status EmitRegisterRows(const std::vector<int>& outputs, bool inject_fault, Code* out) {
    const int64_t w = RegisterRowsWidth();
    // `threads` is the threads of one row; a block holds `rows` rows.
    const RegisterRowsLayout l = LayoutRegisterRows(w);
    const int threads = l.threads;
    const int vec = l.vec;
    const int rows = RegisterRowsPerBlock(l);
    const int chunks = l.chunks;
    const int per = l.per_thread();
    // Registers below `full` hold columns of the row in every thread; the
    // last chunk's (masked layouts) only where `tail_ok`.
    const int full = l.masked ? vec * (chunks - 1) : per;
    const std::string name = KernelName(ctx_.plan_index, kernel_index_);
    std::vector<std::string> params;
    KernelLaunch launch = StartLaunch(outputs, &params);
    launch.grid[0] = CeilDiv(info_.num_rows, rows);
    launch.block = threads * rows;
    launch.smem_bytes = 64 * 4;
    Code& c = *out;
    c.L("// kernel ", kernel_index_, " '", CommentText(kernel_.name()), "': KERNEL_ROW, ",
        info_.num_rows, " rows, register rows (", w, " wide, threads ", threads, ", ", per,
        " per thread in chunks of ", vec, l.masked ? ", last chunk guarded" : "", ", ", rows,
        " rows a block)");
    c.L("extern \"C\" __global__ void __launch_bounds__(", threads * rows, ") ", name, "(",
        absl::StrJoin(params, ", "), ") {");
    c.Open("{");
    c.L("extern __shared__ __align__(128) float yr_sm[];");
    c.L("float* const red = yr_sm;");
    if (rows == 1) {
      c.L("const int tid = threadIdx.x;");
      c.L("const i64 r = blockIdx.x;");
      c.L("const bool live = true;");
    } else {
      // A block's last rows past the group's end compute its last row again
      // (they reach the block's barriers) and store nothing.
      c.L("const int tid = threadIdx.x % ", threads, ";");
      c.L("const i64 r_own = (i64)blockIdx.x * ", rows, " + threadIdx.x / ", threads, ";");
      c.L("const bool live = r_own < ", info_.num_rows, "LL;");
      c.L("const i64 r = live ? r_own : ", info_.num_rows - 1, "LL;");
    }
    c.L("(void)r;");
    c.L("(void)live;");
    if (l.masked) {
      c.L("const bool tail_ok = ", chunks - 1, " * ", threads, " + tid < ", l.row_chunks, ";");
    }
    // The guard of register q in loops that reduce over the row.
    auto guarded = [&](const std::string& stmt) {
      return l.masked ? absl::StrCat("if (q < ", full, " || tail_ok) ", stmt) : stmt;
    };
    if (inject_fault) c.Line(FaultLine());
    // Register q holds column (q / vec * T + tid) * vec + q % vec.
    // Every outside operand, loaded once, all loads before any use.
    for (int t : OutsideOperands()) {
      std::vector<int64_t> space = info_.lead_dims;
      space.push_back(w);
      const std::vector<int64_t> strides = BroadcastStrides(RowShape(t), space);
      const std::vector<int64_t> lead(strides.begin(), strides.end() - 1);
      const std::string row_off = OffsetExpr(info_.lead_dims, lead, "r");
      c.L("float in", t, "[", per, "];");
      if (strides.back() == 0) {
        c.L("{ const float s = yr_ld(", ctx_.Var(t), ", ", row_off, ");");
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", per, "; ++q) in", t, "[q] = s; }");
        continue;
      }
      // An operand every row shares (a norm's weight) is read by every
      // block and stays in L1.
      const bool shared = std::all_of(lead.begin(), lead.end(), [](int64_t s) { return s == 0; });
      const bool is_float = ctx_.ReadType(t) == "float";
      for (int ch = 0; ch < chunks; ++ch) {
        const bool tail = l.masked && ch == chunks - 1;
        const std::string col = absl::StrCat("(", ch, " * ", threads, " + tid) * ", vec);
        const std::string at = absl::StrCat(ctx_.Var(t), " + ", row_off, " + ", col);
        std::string load;
        if (vec == 1) {
          load = absl::StrCat("in", t, "[", ch, "] = yr_ld(", ctx_.Var(t), ", ", row_off, " + ",
                              col, ");");
        } else if (vec == 4) {
          load = absl::StrCat("yr_ld4(", at, ", in", t, " + ", ch * 4, ");");
        } else if (read_past_l1_ && !shared) {
          load = absl::StrCat("yr_ld8_once(", at, ", in", t, " + ", ch * 8, ");");
        } else if (is_float) {
          load = absl::StrCat("yr_ld4(", at, ", in", t, " + ", ch * 8, "); yr_ld4(", at, " + 4, in",
                              t, " + ", ch * 8 + 4, ");");
        } else {
          load = absl::StrCat("yr_ld8(", at, ", in", t, " + ", ch * 8, ");");
        }
        if (tail) {
          // Past the row: zeros, which no reduction reads and no store writes.
          c.L("if (tail_ok) { ", load, " } else { for (int e = 0; e < ", vec, "; ++e) in", t, "[",
              ch * vec, " + e] = 0.0f; }");
        } else {
          c.L(load);
        }
      }
    }
    for (size_t j = 0; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      const std::string v = absl::StrCat("v", j);
      c.L("// ", CommentText(op.name), " = ", std::string(core::OpTypeName(op.type)));
      if (!core::IsReduction(op.type)) c.L("float ", v, "[", per, "];");
      const std::string x = RegisterOperand(j, 0, "q");
      if (core::IsElementwise(op.type)) {
        const std::string value =
            ElementwiseExpr(j, [&](int slot) { return RegisterOperand(j, slot, "q"); });
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", per, "; ++q) ", v, "[q] = ", value, ";");
        continue;
      }
      if (core::IsReduction(op.type)) {
        const bool mx = op.type == OpType::kReduceMax;
        c.L("float ", v, "[1];");
        c.Open("{");
        c.L("float acc = ", mx ? "-__int_as_float(0x7f800000)" : "0.0f", ";");
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", per, "; ++q) ",
            guarded(absl::StrCat("acc = ", mx ? "yr_max(acc, " : "acc + (", x, ");")));
        c.L(v, "[0] = ", mx ? "yr_gmax<" : "yr_gsum<", threads, ">(acc, red)",
            op.type == OpType::kReduceMean ? absl::StrCat(" / ", w, ".0f") : "", ";");
        c.Close();
        continue;
      }
      c.Open("{");
      if (op.type == OpType::kSoftmax) {
        c.L("float mx = -__int_as_float(0x7f800000);");
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", per, "; ++q) ",
            guarded(absl::StrCat("mx = yr_max(mx, ", x, ");")));
        c.L("mx = yr_gmax<", threads, ">(mx, red);");
        c.L("float sum = 0.0f;");
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", per, "; ++q) { ", v, "[q] = expf(", x, " - mx); ",
            guarded(absl::StrCat("sum += ", v, "[q];")), " }");
        c.L("const float inv = 1.0f / yr_gsum<", threads, ">(sum, red);");
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", per, "; ++q) ", v, "[q] *= inv;");
      } else {
        std::string value;
        if (op.type == OpType::kRmsNorm) {
          c.L("float ss = 0.0f;");
          c.L("#pragma unroll");
          c.L("for (int q = 0; q < ", per, "; ++q) ",
              guarded(absl::StrCat("ss += ", x, " * ", x, ";")));
          c.L("ss = yr_gsum<", threads, ">(ss, red);");
          c.L("const float inv = 1.0f / sqrtf(ss / ", w, ".0f + ", Lit(op.eps), ");");
          value = absl::StrCat(x, " * inv");
        } else {
          c.L("float sum = 0.0f;");
          c.L("#pragma unroll");
          c.L("for (int q = 0; q < ", per, "; ++q) ", guarded(absl::StrCat("sum += ", x, ";")));
          c.L("const float mean = yr_gsum<", threads, ">(sum, red) / ", w, ".0f;");
          c.L("float var = 0.0f;");
          c.L("#pragma unroll");
          c.L("for (int q = 0; q < ", per, "; ++q) ",
              guarded(absl::StrCat("var += (", x, " - mean) * (", x, " - mean);")));
          c.L("var = yr_gsum<", threads, ">(var, red);");
          c.L("const float inv = 1.0f / sqrtf(var / ", w, ".0f + ", Lit(op.eps), ");");
          value = absl::StrCat("(", x, " - mean) * inv");
        }
        if (op.inputs.size() > 1)
          value = absl::StrCat("(", value, ") * ", RegisterOperand(j, 1, "q"));
        if (op.inputs.size() > 2) value = absl::StrCat(value, " + ", RegisterOperand(j, 2, "q"));
        c.L("#pragma unroll");
        c.L("for (int q = 0; q < ", per, "; ++q) ", v, "[q] = ", value, ";");
      }
      c.Close();
    }
    for (int t : outputs) {
      const size_t j = group_pos_.at(t);
      for (const std::string& d : dsts_[t]) {
        if (info_.row_width[j] == 1) {
          c.L("if (live && tid == 0) yr_st(", d, ", r, v", j, "[0]);");
          continue;
        }
        for (int ch = 0; ch < chunks; ++ch) {
          const std::string when =
              l.masked && ch == chunks - 1 ? "if (live && tail_ok) " : "if (live) ";
          const std::string at =
              absl::StrCat("r * ", w, "LL + (", ch, " * ", threads, " + tid) * ", vec);
          if (vec == 8) {
            c.L(when, "yr_st8(", d, " + ", at, ", v", j, " + ", ch * 8, ");");
          } else if (vec == 4) {
            c.L(when, "yr_st4(", d, ", ", at, ", v", j, " + ", ch * 4, ");");
          } else {
            c.L(when, "yr_st(", d, ", ", at, ", v", j, "[", ch, "]);");
          }
        }
      }
    }
    c.Close();
    c.Line("}");
    ctx_.code->launches.push_back(std::move(launch));
    return absl::OkStatus();
  }

  // Chooses phases, block shape and memory layout.
  void Plan() {
    const size_t n = ops_.size();
    f_.assign(n, false);
    for (int j = static_cast<int>(n) - 1; j >= 0; --j) {
      const OpInfo& op = g_.op(ops_[j]);
      // Width-1 ops are computed whole too, so the tile phase only holds ops
      // as wide as its tiles walk.
      if (IsRowWise(op.type) || info_.row_width[j] == 1) f_[j] = true;
      for (size_t s = 0; s < op.inputs.size(); ++s) {
        if (!info_.in_group[j][s]) continue;
        const bool full = f_[j] || IsRowWise(op.type) || (op.type == OpType::kMatmul && s == 0);
        if (full) f_[group_pos_.at(op.inputs[s])] = true;
      }
    }
    // The tile phase splits a row's columns over blocks that each redo the
    // whole-row phase: worth it for a matmul's N tiles only. Without one, a
    // group with whole-row ops (a norm, softmax or reduction followed by
    // elementwise ops) computes everything in whole rows, once.
    const bool any_full = std::find(f_.begin(), f_.end(), true) != f_.end();
    bool tile_matmul = false;
    for (size_t j = 0; j < n; ++j) {
      tile_matmul = tile_matmul || (!f_[j] && g_.op(ops_[j]).type == OpType::kMatmul);
    }
    if (any_full && !tile_matmul) f_.assign(n, true);
    int64_t t_width = 0;
    int64_t min_k = 1LL << 40;
    bool t_matmul = false;
    for (size_t j = 0; j < n; ++j) {
      if (f_[j]) continue;
      has_t_ = true;
      t_width = std::max(t_width, info_.row_width[j]);
      const OpInfo& op = g_.op(ops_[j]);
      if (op.type == OpType::kMatmul) {
        t_matmul = true;
        min_k = std::min(min_k, g_.tensor(op.inputs[0]).shape.back());
      }
    }
    const int warps = s_.warps() > 0 ? std::min(32, s_.warps()) : (t_matmul ? 4 : 8);
    const int64_t rows = info_.num_rows;
    // The SIMT sizing.
    auto simt = [&] {
      tc_ = false;
      arena_global_ = false;
      threads_ = 32 * warps;
      int64_t br = s_.parallel() == yirage::v1::PARALLEL_COLS
                       ? rows
                       : (s_.block_rows() > 0 ? s_.block_rows() : kDefaultBlockRows);
      bool narrow = !t_matmul && !has_t_;
      for (size_t j = 0; j < ops_.size() && narrow; ++j) {
        const std::vector<int64_t>& in = g_.tensor(g_.op(ops_[j]).inputs[0]).shape;
        narrow =
            info_.row_width[j] <= kNarrowRowWidth && (in.empty() || in.back() <= kNarrowRowWidth);
      }
      br = std::max<int64_t>(
          1, std::min<int64_t>({br, rows, narrow ? kMaxNarrowBlockRows : kMaxBlockRows}));
      // Few blocks (decode-sized row kernels): widen them so that every
      // thread holds a few elements of its rows, up to 1024 threads.
      if (!t_matmul && s_.warps() == 0 && CeilDiv(rows, br) < ctx_.target.sm_count) {
        int64_t widest = 1;
        for (int64_t w : info_.row_width) widest = std::max(widest, w);
        threads_ = static_cast<int>(
            std::clamp<int64_t>(FloorPow2(std::max<int64_t>(1, br * widest / 4)), threads_, 1024));
      }
      tn_ = 1;
      if (has_t_) {
        int64_t tn = s_.tile_n() > 0 ? s_.tile_n() : kDefaultTileN;
        tn = std::max<int64_t>(1, std::min(tn, t_width));
        while (CeilDiv(t_width, tn) > 65535) tn *= 2;  // grid.y limit
        tn_ = static_cast<int>(tn);
      }
      split_ = 1;
      if (t_matmul && s_.split_k() > 1) {
        split_ =
            static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(s_.split_k(), min_k / 16)));
      }
      // Shared memory: shrink BR until it fits, then move F rows to global memory.
      for (;;) {
        Layout(br);
        if (smem_bytes_ <= ctx_.target.max_smem_per_block || br == 1) break;
        br = std::max<int64_t>(1, br / 2);
      }
      if (smem_bytes_ > ctx_.target.max_smem_per_block) {
        arena_global_ = true;
        Layout(br);
      }
    };
    if (!(t_matmul && PlanTensorCores(t_width))) simt();
    grid_x_ = CeilDiv(rows, br_);
    grid_y_ = has_t_ ? CeilDiv(t_width, tn_) : 1;
    tpr_ = std::max(1, std::min(threads_, FloorPow2(std::max<int64_t>(1, threads_ / br_))));
    PlanStaging();
  }

  // Row staging: the kernel inputs that the F ops (other than matmuls) read
  // whole dense rows of are copied into shared memory first, every thread's
  // 16-byte loads of every such tensor issued before any is used. Without
  // it each row pass waits on memory in turn, which dominates decode-sized
  // row kernels (few rows, few blocks). Only when the rows fit beside the
  // rest of the layout in shared memory. A block's rows are one run of the
  // tensor, copied 16 bytes at a time: rows of any width whose block of
  // rows is a multiple of 16 bytes (64 rows of 33 floats), so that every
  // block's run starts aligned.
  void PlanStaging() {
    stage_off_.clear();
    if (arena_global_) return;
    std::vector<int> staged;
    for (size_t j = 0; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      if (!f_[j] || op.type == OpType::kMatmul) continue;
      for (size_t slot = 0; slot < op.inputs.size(); ++slot) {
        const int t = op.inputs[slot];
        if (info_.in_group[j][slot]) continue;
        const TensorInfo& ti = g_.tensor(t);
        std::vector<int64_t> dense = info_.lead_dims;
        dense.push_back(ti.shape.back());
        const int per16 = ctx_.ReadType(t) == "float" ? 4 : 8;  // elements per 16 bytes
        if (ti.shape != dense || (br_ * ti.shape.back()) % per16 != 0) continue;
        if (std::find(staged.begin(), staged.end(), t) == staged.end()) staged.push_back(t);
      }
    }
    int64_t at = smem_bytes_ / 4;
    for (int t : staged) {
      at = (at + 7) / 8 * 8;
      stage_off_[t] = at;
      at += br_ * g_.tensor(t).shape.back();
    }
    if (staged.empty() || at * 4 > ctx_.target.max_smem_per_block) {
      stage_off_.clear();
      return;
    }
    smem_bytes_ = at * 4;
  }

  void EmitStaging(Code* c) {
    if (stage_off_.empty()) return;
    int64_t rounds_total = 0;
    c->L("// staged rows (", stage_off_.size(), " tensor(s)): every load in flight first");
    for (const auto& [t, off] : stage_off_) {
      c->L("float* const sg", t, " = yr_sm + ", off, ";");
      const int per16 = ctx_.ReadType(t) == "float" ? 4 : 8;
      rounds_total = std::max(rounds_total, br_ * g_.tensor(t).shape.back() / per16);
    }
    // 16-byte loads per thread per tensor per round: enough for one round,
    // at most 4 (registers).
    const int kPerThread =
        static_cast<int>(std::clamp<int64_t>(CeilDiv(rounds_total, threads_), 1, 4));
    c->Open(absl::StrCat("for (int base = tid; base < ", rounds_total,
                         "; base += ", kPerThread * threads_, ") {"));
    // Vector v of the block's run is copied where it lies within the
    // block's nr rows; a last partial block's rows may end inside a
    // vector, whose elements are copied one a thread after the loop.
    for (const auto& [t, off] : stage_off_) {
      const int per16 = ctx_.ReadType(t) == "float" ? 4 : 8;
      const int64_t w = g_.tensor(t).shape.back();
      const int64_t total = br_ * w / per16;
      c->L("uint4 rg", t, "[", kPerThread, "];");
      for (int p = 0; p < kPerThread; ++p) {
        c->L("if (base + ", p * threads_, " < ", total, " && (base + ", p * threads_, " + 1) * ",
             per16, " <= nr * ", w, ") rg", t, "[", p,
             "] = ", read_past_l1_ ? "yr_ld16_once(" : "__ldg(", "reinterpret_cast<const uint4*>(",
             ctx_.Var(t), " + r0 * ", w, ") + base + ", p * threads_, ");");
      }
    }
    for (const auto& [t, off] : stage_off_) {
      const int per16 = ctx_.ReadType(t) == "float" ? 4 : 8;
      const int64_t w = g_.tensor(t).shape.back();
      const int64_t total = br_ * w / per16;
      for (int p = 0; p < kPerThread; ++p) {
        c->L("if (base + ", p * threads_, " < ", total, " && (base + ", p * threads_, " + 1) * ",
             per16, " <= nr * ", w, ") yr_stage16(sg", t, " + (base + ", p * threads_, ") * ",
             per16, ", rg", t, "[", p, "], ", ctx_.Var(t), ");");
      }
    }
    c->Close();
    for (const auto& [t, off] : stage_off_) {
      const int per16 = ctx_.ReadType(t) == "float" ? 4 : 8;
      const int64_t w = g_.tensor(t).shape.back();
      if (w % per16 == 0) continue;  // rows end on vectors
      c->L("for (int e = nr * ", w, " / ", per16, " * ", per16, " + tid; e < nr * ", w,
           "; e += ", threads_, ") sg", t, "[e] = yr_ld(", ctx_.Var(t), ", r0 * ", w, " + e);");
    }
    c->L("__syncthreads();");
  }

  // Tensor-core tile phase (see the file comment). True when every T matmul
  // fits it and a shape fits shared memory; then sets the block shape.
  bool PlanTensorCores(int64_t t_width) {
    if (ctx_.target.sm < 80) return false;
    const int64_t rows = info_.num_rows;
    tc_k_ = -1;
    tc_b_dtype_ = yirage::v1::DTYPE_UNSPECIFIED;
    for (size_t j = 0; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      if (f_[j] || op.type != OpType::kMatmul) continue;
      const TensorInfo& b = g_.tensor(op.inputs[1]);
      const int64_t k = g_.tensor(op.inputs[0]).shape.back();
      if (b.producer >= 0 || !Is16Bit(b.dtype) || op.transpose_b || b.shape.size() != 2) {
        return false;
      }
      if (info_.row_width[j] != t_width || k % kTcChunkK != 0) return false;
      if (tc_k_ >= 0 && (k != tc_k_ || b.dtype != tc_b_dtype_)) return false;
      tc_k_ = k;
      tc_b_dtype_ = b.dtype;
    }
    if (tc_k_ < 0) return false;
    // Every row of a skinny problem in one block, so B streams from memory once.
    const int64_t br = std::min<int64_t>(rows, kMaxBlockRows);
    const int64_t want_tn = s_.tile_n() > 0 ? s_.tile_n() : 128;
    const int stages = s_.stages() >= 2 ? std::min(s_.stages(), 8) : 4;
    // First shapes that leave room for two blocks per SM, then any that fits.
    for (const int64_t budget :
         {ctx_.target.max_smem_per_block / 2, ctx_.target.max_smem_per_block}) {
      for (const int64_t tn : {int64_t{128}, int64_t{64}}) {
        if (tn > std::max<int64_t>(64, want_tn) || t_width % tn != 0) continue;
        if (CeilDiv(t_width, tn) > 65535) continue;
        for (int st = stages; st >= 2; --st) {
          for (const bool arena : {false, true}) {
            tc_ = true;
            arena_global_ = arena;
            tn_ = static_cast<int>(tn);
            threads_ = 32 * static_cast<int>(tn / 16);
            tc_stages_ = st;
            tc_mp_ = static_cast<int>(CeilDiv(br, 16) * 16);
            // split-K: explicit, or enough blocks for two per SM when M is small.
            const int64_t tiles = CeilDiv(rows, br) * (t_width / tn);
            int64_t split = s_.split_k() > 0 ? s_.split_k() : 1;
            if (s_.split_k() == 0 && rows <= kMaxBlockRows && !arena) {
              while (tiles * split < 2 * ctx_.target.sm_count && tc_k_ / (2 * split) >= 128) {
                split *= 2;
              }
            }
            split = std::max<int64_t>(1, std::min<int64_t>(split, tc_k_ / kTcChunkK));
            tc_kc_ = CeilDiv(CeilDiv(tc_k_, split), kTcChunkK) * kTcChunkK;
            // Shared A slices must fit: more split when automatic.
            while (s_.split_k() == 0 && tc_kc_ > kTcChunkK &&
                   tc_mp_ * (tc_kc_ + 8) * 2 > 96 * 1024) {
              tc_kc_ = CeilDiv(tc_kc_ / 2, kTcChunkK) * kTcChunkK;
            }
            split_ = static_cast<int>(CeilDiv(tc_k_, tc_kc_));
            Layout(br);
            if (smem_bytes_ <= budget) return true;
          }
        }
      }
    }
    tc_ = false;
    arena_global_ = false;
    return false;
  }

  void Layout(int64_t br) {
    br_ = static_cast<int>(br);
    const int64_t align = tc_ ? 8 : 4;  // floats: 32 bytes for WMMA pointers
    auto up = [&](int64_t v) { return (v + align - 1) / align * align; };
    int64_t f = 0;
    int64_t sm = 0;
    off_.assign(ops_.size(), 0);
    for (size_t j = 0; j < ops_.size(); ++j) {
      if (!f_[j]) continue;
      off_[j] = f;
      f += up(br * info_.row_width[j]);
    }
    f_floats_ = f;
    if (!arena_global_) sm = f;
    for (size_t j = 0; j < ops_.size(); ++j) {
      if (f_[j]) continue;
      off_[j] = sm;
      const bool mm = g_.op(ops_[j]).type == OpType::kMatmul;
      sm += up((tc_ && mm ? tc_mp_ : br) * tn_);
    }
    red_off_ = sm;
    sm += 64;  // reduction scratch and the split-K flag
    if (tc_) {
      // Per distinct A operand: [MP][KC + 8] 16-bit; per matmul: B stages of
      // [kTcChunkK][TN + 8] 16-bit.
      a_off_.clear();
      b_off_.assign(ops_.size(), 0);
      for (size_t j = 0; j < ops_.size(); ++j) {
        const OpInfo& op = g_.op(ops_[j]);
        if (f_[j] || op.type != OpType::kMatmul) continue;
        if (!a_off_.count(op.inputs[0])) {
          a_off_[op.inputs[0]] = sm;
          sm += up((tc_mp_ * (tc_kc_ + 8) + 1) / 2);
        }
        b_off_[j] = sm;
        sm += up(int64_t{tc_stages_} * kTcChunkK * (tn_ + 8) / 2);
      }
    }
    smem_bytes_ = sm * 4;
  }

  bool InF(int t) const {
    auto it = group_pos_.find(t);
    return it != group_pos_.end() && f_[it->second];
  }

  // Expression reading operand `slot` of group op j at block row `i` (int
  // expr), global row `r` (i64 expr) and column `c` (int expr); the operand is
  // indexed in the space [lead..., w].
  std::string Operand(size_t j, int slot, int64_t w, const std::string& i, const std::string& r,
                      const std::string& c) const {
    const OpInfo& op = g_.op(ops_[j]);
    const int t = op.inputs[slot];
    if (info_.in_group[j][slot]) {
      const size_t src = group_pos_.at(t);
      const int64_t ws = info_.row_width[src];
      if (f_[src]) {
        return ws == 1 ? absl::StrCat("b", src, "[", i, "]")
                       : absl::StrCat("b", src, "[(", i, ") * ", ws, " + (", c, ")]");
      }
      return ws == 1 ? absl::StrCat("tl", src, "[(", i, ") * ", tn_, "]")
                     : absl::StrCat("tl", src, "[(", i, ") * ", tn_, " + (", c, ") - n0]");
    }
    if (auto st = stage_off_.find(t); st != stage_off_.end() && g_.tensor(t).shape.back() == w) {
      return absl::StrCat("sg", t, "[(", i, ") * ", w, " + (", c, ")]");
    }
    std::vector<int64_t> space = info_.lead_dims;
    space.push_back(w);
    const std::vector<int64_t> strides = BroadcastStrides(RowShape(t), space);
    const size_t l = info_.lead_dims.size();
    const std::vector<int64_t> lead(strides.begin(), strides.begin() + l);
    std::string off = OffsetExpr(info_.lead_dims, lead, r);
    const int64_t cs = strides[l];
    if (cs != 0) {
      off = absl::StrCat(off, " + (i64)(", c, ")", cs == 1 ? "" : absl::StrCat(" * ", cs));
    }
    return absl::StrCat("yr_ld(", ctx_.Var(t), ", ", off, ")");
  }

  std::string ElementwiseValue(size_t j, int64_t w, const std::string& i, const std::string& r,
                               const std::string& c) const {
    return ElementwiseExpr(j, [&](int slot) { return Operand(j, slot, w, i, r, c); });
  }

  // Opens the row-group loop used by row reductions: TPR threads per row.
  void OpenRowGroups(Code* c) {
    c->Open(absl::StrCat("for (int i0 = 0; i0 < ", br_, "; i0 += ", threads_ / tpr_, ") {"));
    c->L("const int i = i0 + tid / ", tpr_, ";");
    c->L("const int g = tid % ", tpr_, ";");
    c->L("const bool ok = i < nr;");
    c->L("const i64 r = r0 + i;");
    c->L("(void)r;");
  }

  void EmitFullRowOp(size_t j, Code* c) {
    const OpInfo& op = g_.op(ops_[j]);
    const int64_t w = info_.row_width[j];
    const std::string q = absl::StrCat("b", j);
    c->L("// ", CommentText(op.name), " = ", std::string(core::OpTypeName(op.type)),
         " (full rows, ", w, " wide)");
    if (core::IsElementwise(op.type)) {
      c->Open(absl::StrCat("for (int x = tid; x < nr * ", w, "; x += ", threads_, ") {"));
      c->L("const int i = x / ", w, ";");
      c->L("const int c = x % ", w, ";");
      c->L("const i64 r = r0 + i;");
      c->L("(void)r; (void)c;");
      c->L(q, "[x] = ", ElementwiseValue(j, w, "i", "r", "c"), ";");
      c->Close();
    } else if (op.type == OpType::kConcat) {
      int64_t off = 0;
      for (int s = 0; s < static_cast<int>(op.inputs.size()); ++s) {
        const int64_t ds = g_.tensor(op.inputs[s]).shape.back();
        c->Open(absl::StrCat("for (int x = tid; x < nr * ", ds, "; x += ", threads_, ") {"));
        c->L("const int i = x / ", ds, ";");
        c->L("const int c = x % ", ds, ";");
        c->L("const i64 r = r0 + i;");
        c->L("(void)r;");
        c->L(q, "[i * ", w, " + ", off, " + c] = ", Operand(j, s, ds, "i", "r", "c"), ";");
        c->Close();
        off += ds;
      }
    } else if (op.type == OpType::kSlice) {
      const int64_t d = g_.tensor(op.inputs[0]).shape.back();
      c->Open(absl::StrCat("for (int x = tid; x < nr * ", w, "; x += ", threads_, ") {"));
      c->L("const int i = x / ", w, ";");
      c->L("const int c = x % ", w, " + ", op.slice_start, ";");
      c->L("const i64 r = r0 + i;");
      c->L("(void)r;");
      c->L(q, "[x] = ", Operand(j, 0, d, "i", "r", "c"), ";");
      c->Close();
    } else if (core::IsReduction(op.type)) {
      const int64_t d = g_.tensor(op.inputs[0]).shape.back();
      const std::string x = Operand(j, 0, d, "i", "r", "c");
      OpenRowGroups(c);
      const bool mx = op.type == OpType::kReduceMax;
      c->L("float acc = ", mx ? "-__int_as_float(0x7f800000)" : "0.0f", ";");
      c->L("if (ok) for (int c = g; c < ", d, "; c += ", tpr_,
           ") acc = ", mx ? absl::StrCat("yr_max(acc, ", x, ")") : absl::StrCat("acc + ", x), ";");
      c->L("acc = ", mx ? "yr_gmax<" : "yr_gsum<", tpr_, ">(acc, red);");
      c->L("if (ok && g == 0) ", q, "[i] = acc",
           op.type == OpType::kReduceMean ? absl::StrCat(" / ", d, ".0f") : "", ";");
      c->Close();
    } else if (op.type == OpType::kMatmul) {
      const int64_t n = w;
      const int64_t tile = std::min<int64_t>(n, std::max(tn_, 128));
      c->Open(absl::StrCat("for (int nf = 0; nf < ", n, "; nf += ", tile, ") {"));
      const int64_t k = g_.tensor(op.inputs[0]).shape.back();
      EmitMatmulTile(
          j, "nf", tile, "0", absl::StrCat(k), k,
          [&](const std::string& i, const std::string& cc) {
            return absl::StrCat(q, "[(", i, ") * ", n, " + ", cc, "]");
          },
          c);
      c->Close();
    } else {
      // rms_norm, layer_norm, softmax over the row.
      std::vector<std::string> x;
      for (int s = 0; s < static_cast<int>(op.inputs.size()); ++s) {
        x.push_back(Operand(j, s, w, "i", "r", "c"));
      }
      const std::string qi = absl::StrCat(q, "[i * ", w, " + c]");
      const std::string loop = absl::StrCat("for (int c = g; c < ", w, "; c += ", tpr_, ")");
      OpenRowGroups(c);
      if (op.type == OpType::kSoftmax) {
        c->L("float mx = -__int_as_float(0x7f800000);");
        c->L("if (ok) ", loop, " mx = yr_max(mx, ", x[0], ");");
        c->L("mx = yr_gmax<", tpr_, ">(mx, red);");
        c->L("float sum = 0.0f;");
        c->Open(absl::StrCat("if (ok) ", loop, " {"));
        c->L("const float e = expf(", x[0], " - mx);");
        c->L(qi, " = e;");
        c->L("sum += e;");
        c->Close();
        c->L("sum = yr_gsum<", tpr_, ">(sum, red);");
        c->L("const float inv = 1.0f / sum;");
        c->L("if (ok) ", loop, " ", qi, " *= inv;");
      } else {
        std::string value;
        if (op.type == OpType::kRmsNorm) {
          c->L("float ss = 0.0f;");
          c->Open(absl::StrCat("if (ok) ", loop, " {"));
          c->L("const float v = ", x[0], ";");
          c->L("ss += v * v;");
          c->Close();
          c->L("ss = yr_gsum<", tpr_, ">(ss, red);");
          c->L("const float inv = 1.0f / sqrtf(ss / ", w, ".0f + ", Lit(op.eps), ");");
          value = absl::StrCat(x[0], " * inv");
        } else {
          c->L("float sum = 0.0f;");
          c->L("if (ok) ", loop, " sum += ", x[0], ";");
          c->L("const float mean = yr_gsum<", tpr_, ">(sum, red) / ", w, ".0f;");
          c->L("float var = 0.0f;");
          c->Open(absl::StrCat("if (ok) ", loop, " {"));
          c->L("const float dv = ", x[0], " - mean;");
          c->L("var += dv * dv;");
          c->Close();
          c->L("var = yr_gsum<", tpr_, ">(var, red);");
          c->L("const float inv = 1.0f / sqrtf(var / ", w, ".0f + ", Lit(op.eps), ");");
          value = absl::StrCat("(", x[0], " - mean) * inv");
        }
        if (x.size() > 1) value = absl::StrCat("(", value, ") * ", x[1]);
        if (x.size() > 2) value = absl::StrCat(value, " + ", x[2]);
        c->L("if (ok) ", loop, " ", qi, " = ", value, ";");
      }
      c->Close();
    }
    c->L("__syncthreads();");
  }

  // Sets dst(i, c), for the block's br_ rows i (zero past nr) and B columns
  // c in [cbeg, cbeg + ncols) (clipped to N), to the product of A's rows
  // with B over K range [ka, kb), `k_extent` values at most; ends with
  // __syncthreads().
  //
  // Threads split the tile's column groups, then K (lanes that sum partial
  // dots into the destination with shared atomics), then the block's rows.
  // A lane takes at least kMinKPerLane values of K: a short K (a matmul by a
  // 7 x 7 weight) is not spread over lanes that would sit idle, and the
  // threads left over take rows instead. One lane along K stores its dots
  // without the zeroing pass and the atomics.
  template <typename Dst>
  void EmitMatmulTile(size_t j, const std::string& cbeg, int64_t ncols, const std::string& ka,
                      const std::string& kb, int64_t k_extent, Dst dst, Code* c) {
    const OpInfo& op = g_.op(ops_[j]);
    const int ta = op.inputs[0];
    const int tb = op.inputs[1];
    const TensorInfo& b = g_.tensor(tb);
    const int64_t k = g_.tensor(ta).shape.back();
    const int64_t n = info_.row_width[j];
    const size_t l = info_.lead_dims.size();
    // B's batch offset per row: batch dims broadcast, the M dim does not move B.
    std::vector<int64_t> b_lead =
        BroadcastStrides(Slice(b.shape, 0, b.shape.size() - 2), Slice(info_.lead_dims, 0, l - 1));
    for (int64_t& st : b_lead) st *= k * n;
    b_lead.push_back(0);
    const bool b_fixed =
        std::all_of(b_lead.begin(), b_lead.end(), [](int64_t st) { return st == 0; });
    const int64_t m = l > 0 ? info_.lead_dims.back() : 1;
    const bool shared_b = b_fixed || m % br_ == 0;
    int rb = shared_b ? br_ : 1;
    // Vector width along N (row-major B) from the dtype, the hint and the
    // accumulator budget.
    int v = 1;
    if (!op.transpose_b) {
      const bool half = b.producer < 0 && Is16Bit(b.dtype);
      v = half ? 8 : 4;
      if (s_.vector_width() > 0) v = std::min(v, FloorPow2(s_.vector_width()));
      while (v > 1 && (n % v != 0 || ncols % v != 0 || rb * v > kMaxAccumulators)) v /= 2;
      if (v != 1 && v != 8 && v != 4) v = 1;
      if (v == 8 && !half) v = 4;
    }
    // B^T: a lane reads kv consecutive K values of its B row at once (16
    // bytes of floats or of a 16-bit type, else 8 bytes of 4 halves) where
    // K allows; the K ranges start at multiples of 16.
    int kv = 1;
    if (op.transpose_b) {
      const bool half = ctx_.ReadType(tb) != "float";
      kv = half && k % 8 == 0 ? 8 : k % 4 == 0 ? 4 : 1;
    }
    const int64_t groups = ncols / v;  // column groups
    const int64_t kl =
        std::clamp<int64_t>(k_extent / kMinKPerLane, 1, std::max<int64_t>(1, threads_ / groups));
    // Row lanes: the threads that column groups and K lanes leave, over the
    // block's rows (shared B: each lane a run of rb rows; else one row a step).
    int64_t rl = 1;
    if (kl * groups <= threads_) {
      rl = std::min<int64_t>(threads_ / (kl * groups), br_);
      if (shared_b) {
        rb = static_cast<int>(CeilDiv(br_, rl));
        rl = CeilDiv(br_, rb);
      }
    }
    const int64_t ng = rl > 1 ? groups : threads_ / kl;
    const bool atomic = kl > 1;
    const int unroll = s_.unroll() > 0 ? s_.unroll() : 4;
    c->Open("{");
    if (atomic) {
      c->Open(absl::StrCat("for (int x = tid; x < ", br_ * ncols, "; x += ", threads_, ") {"));
      c->L("const int i = x / ", ncols, ";");
      c->L("const int cc = (", cbeg, ") + x % ", ncols, ";");
      c->L("if (cc < ", n, ") ", dst("i", "cc"), " = 0.0f;");
      c->Close();
      c->L("__syncthreads();");
    }
    // Lane order, fastest first: K then groups (B^T: a lane's K values are
    // contiguous in B), groups then K (row-major B: coalesced along N); row
    // lanes last.
    if (op.transpose_b) {
      c->L("const int kl = tid % ", kl, ";");
      c->L("const int g0 = tid / ", kl, " % ", ng, ";");
    } else {
      c->L("const int g0 = tid % ", ng, ";");
      c->L("const int kl = tid / ", ng, " % ", kl, ";");
    }
    c->L("const int rl = tid / ", kl * ng, ";");
    c->Open(
        absl::StrCat("if (rl < ", rl, ") for (int gi = g0; gi < ", groups, "; gi += ", ng, ") {"));
    c->L("const int cb = (", cbeg, ") + gi * ", v, ";");
    c->Open(absl::StrCat("if (cb < ", n, ") for (int ib = rl * ", rb, "; ib < ", br_,
                         "; ib += ", rl * rb, ") {"));
    c->L("const i64 rb = r0 + ib;");
    c->L("const ", ctx_.ReadType(tb), "* const pb = ", ctx_.Var(tb), " + ",
         OffsetExpr(info_.lead_dims, b_lead, "rb"), ";");
    c->L("float acc[", rb, "][", v, "];");
    c->L("#pragma unroll");
    c->L("for (int u = 0; u < ", rb, "; ++u) {");
    c->L("#pragma unroll");
    c->L("  for (int e = 0; e < ", v, "; ++e) acc[u][e] = 0.0f;");
    c->L("}");
    c->L("#pragma unroll ", unroll);
    c->Open(absl::StrCat("for (int kk = (", ka, ") + kl", kv > 1 ? absl::StrCat(" * ", kv) : "",
                         "; kk < (", kb, "); kk += ", kl * kv, ") {"));
    if (kv > 1) {
      // B^T, kv K values a step: one vector load, kv products a row.
      c->L("float bk[", kv, "];");
      c->L("yr_ld", kv, "(pb + (i64)cb * ", k, " + kk, bk);");
      c->L("#pragma unroll");
      c->Open(absl::StrCat("for (int u = 0; u < ", rb, "; ++u) {"));
      c->L("const int ia = ib + u;");
      c->L("#pragma unroll");
      c->Open(absl::StrCat("for (int e = 0; e < ", kv, "; ++e) {"));
      c->L("const float av = ia < nr ? ", Operand(j, 0, k, "ia", "(r0 + ia)", "(kk + e)"),
           " : 0.0f;");
      c->L("acc[u][0] = fmaf(av, bk[e], acc[u][0]);");
      c->Close();
      c->Close();
    } else {
      c->L("float bv[", v, "];");
      if (op.transpose_b) {
        c->L("bv[0] = yr_ld(pb, (i64)cb * ", k, " + kk);");
      } else if (v == 1) {
        c->L("bv[0] = yr_ld(pb, (i64)kk * ", n, " + cb);");
      } else {
        c->L("yr_ld", v, "(pb + (i64)kk * ", n, " + cb, bv);");
      }
      c->L("#pragma unroll");
      c->Open(absl::StrCat("for (int u = 0; u < ", rb, "; ++u) {"));
      c->L("const int ia = ib + u;");
      c->L("const float av = ia < nr ? ", Operand(j, 0, k, "ia", "(r0 + ia)", "kk"), " : 0.0f;");
      c->L("#pragma unroll");
      c->L("for (int e = 0; e < ", v, "; ++e) acc[u][e] = fmaf(av, bv[e], acc[u][e]);");
      c->Close();
    }
    c->Close();
    c->L("#pragma unroll");
    c->Open(absl::StrCat("for (int u = 0; u < ", rb, "; ++u) {"));
    c->L("const int ia = ib + u;");
    c->L("#pragma unroll");
    if (atomic) {
      c->L("for (int e = 0; e < ", v, "; ++e) if (ia < nr && cb + e < ", n, ") atomicAdd(&",
           dst("ia", "cb + e"), ", acc[u][e]);");
    } else {
      // Rows past nr get their zero dots, as the zeroing pass would leave them.
      c->L("for (int e = 0; e < ", v, "; ++e) if (ia < ", br_, " && cb + e < ", n, ") ",
           dst("ia", "cb + e"), " = acc[u][e];");
    }
    c->Close();
    c->Close();
    c->Close();
    c->L("__syncthreads();");
    c->Close();
  }

  // Every T matmul's [MP x TN] tile over this block's K slice with tensor
  // cores (WMMA 16x16x16, float accumulate): the A rows of the slice are staged
  // once in shared memory as 16-bit; B streams through a cp.async pipeline of
  // tc_stages_ chunks of kTcChunkK rows (16-byte copies); warp w owns columns
  // [16w, 16w + 16) of the tile and all MP rows. Leaves the float tiles tl<j>
  // (MP rows, stride TN) in shared memory; ends with __syncthreads().
  void EmitTensorCoreTiles(Code* c) {
    const std::string ty = CType(tc_b_dtype_);
    const int64_t lda = tc_kc_ + 8;
    const int64_t ldb = tn_ + 8;
    std::vector<size_t> mms;
    for (size_t j = 0; j < ops_.size(); ++j) {
      if (!f_[j] && g_.op(ops_[j]).type == OpType::kMatmul) mms.push_back(j);
    }
    c->L("// tensor cores: ", mms.size(), " matmul tile(s), K ", tc_k_, ", slice ", tc_kc_,
         ", B chunks of ", kTcChunkK, " x ", tn_, ", ", tc_stages_, " stages");
    c->Open("{");
    c->L("using namespace nvcuda;");
    c->L("const int kbeg = ", split_ > 1 ? absl::StrCat("(int)blockIdx.z * ", tc_kc_) : "0", ";");
    c->L("const int klen = min(", tc_kc_, ", ", tc_k_, " - kbeg);");
    c->L("const int nch = klen / ", kTcChunkK, ";");
    c->L("const int warp = tid >> 5;");
    // Stage A slices.
    for (const auto& [t, off] : a_off_) {
      size_t j = 0;
      for (size_t q : mms) {
        if (g_.op(ops_[q]).inputs[0] == t) j = q;
      }
      c->L(ty, "* const as", t, " = reinterpret_cast<", ty, "*>(yr_sm + ", off, ");");
      c->Open(absl::StrCat("for (int x = tid; x < ", tc_mp_ * tc_kc_, "; x += ", threads_, ") {"));
      c->L("const int i = x / ", tc_kc_, ";");
      c->L("const int kk = x % ", tc_kc_, ";");
      c->L("float v = 0.0f;");
      c->L("if (i < nr && kk < klen) v = ", Operand(j, 0, tc_k_, "i", "(r0 + i)", "(kbeg + kk)"),
           ";");
      c->L("yr_sth(as", t, " + i * ", lda, " + kk, v);");
      c->Close();
    }
    for (size_t j : mms) {
      const int tb = g_.op(ops_[j]).inputs[1];
      c->L(ty, "* const bs", j, " = reinterpret_cast<", ty, "*>(yr_sm + ", b_off_[j], ");");
      c->L("const ", ty, "* const gb", j, " = ", ctx_.Var(tb), " + (i64)kbeg * ",
           info_.row_width[j], " + n0;");
    }
    // Issues chunk `ch` into stage `st` (every thread, then one commit).
    const int64_t vecs = int64_t{kTcChunkK} * tn_ / 8;
    c->Open("auto issue = [&](int ch, int st) {");
    c->Open("if (ch < nch) {");
    c->Open(absl::StrCat("for (int v = tid; v < ", vecs, "; v += ", threads_, ") {"));
    c->L("const int row = v / ", tn_ / 8, ";");
    c->L("const int col = (v % ", tn_ / 8, ") * 8;");
    for (size_t j : mms) {
      c->L("yr_cp_async16(bs", j, " + (st * ", kTcChunkK, " + row) * ", ldb, " + col, gb", j,
           " + (i64)(ch * ", kTcChunkK, " + row) * ", info_.row_width[j], " + col);");
    }
    c->Close();
    c->Close();
    c->L("yr_cp_async_commit();");
    c->Close("};");
    const int mt = tc_mp_ / 16;
    for (size_t j : mms) {
      c->L("wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc", j, "[", mt, "];");
      c->L("#pragma unroll");
      c->L("for (int m = 0; m < ", mt, "; ++m) wmma::fill_fragment(acc", j, "[m], 0.0f);");
    }
    c->L("__syncthreads();  // A staged");
    c->L("for (int s = 0; s < ", tc_stages_ - 1, "; ++s) issue(s, s);");
    c->Open("for (int ch = 0; ch < nch; ++ch) {");
    c->L("issue(ch + ", tc_stages_ - 1, ", (ch + ", tc_stages_ - 1, ") % ", tc_stages_, ");");
    c->L("yr_cp_async_wait<", tc_stages_ - 1, ">();");
    c->L("__syncthreads();");
    c->L("const int st = ch % ", tc_stages_, ";");
    c->L("#pragma unroll");
    c->Open(absl::StrCat("for (int ks = 0; ks < ", kTcChunkK / 16, "; ++ks) {"));
    for (size_t j : mms) {
      const int ta = g_.op(ops_[j]).inputs[0];
      c->Open("{");
      c->L("wmma::fragment<wmma::matrix_b, 16, 16, 16, ", ty, ", wmma::row_major> fb;");
      c->L("wmma::load_matrix_sync(fb, bs", j, " + (st * ", kTcChunkK, " + ks * 16) * ", ldb,
           " + warp * 16, ", ldb, ");");
      c->L("#pragma unroll");
      c->Open(absl::StrCat("for (int m = 0; m < ", mt, "; ++m) {"));
      c->L("wmma::fragment<wmma::matrix_a, 16, 16, 16, ", ty, ", wmma::row_major> fa;");
      c->L("wmma::load_matrix_sync(fa, as", ta, " + m * ", 16 * lda, " + ch * ", kTcChunkK,
           " + ks * 16, ", lda, ");");
      c->L("wmma::mma_sync(acc", j, "[m], fa, fb, acc", j, "[m]);");
      c->Close();
      c->Close();
    }
    c->Close();
    c->L("__syncthreads();  // the stage is free again");
    c->Close();
    c->L("yr_cp_async_wait<0>();");
    for (size_t j : mms) {
      c->L("#pragma unroll");
      c->L("for (int m = 0; m < ", mt, "; ++m) wmma::store_matrix_sync(tl", j, " + m * ", 16 * tn_,
           " + warp * 16, acc", j, "[m], ", tn_, ", wmma::mem_row_major);");
    }
    c->L("__syncthreads();");
    c->Close();
  }

  void EmitFullRowStores(const std::vector<int>& outputs, Code* c) {
    bool any = false;
    for (int t : outputs) {
      const size_t j = group_pos_.at(t);
      if (f_[j] && !dsts_[t].empty()) any = true;
    }
    if (!any) return;
    c->Open("if (blockIdx.y == 0 && blockIdx.z == 0) {");
    for (int t : outputs) {
      const size_t j = group_pos_.at(t);
      if (!f_[j] || dsts_[t].empty()) continue;
      const int64_t w = info_.row_width[j];
      c->L("// store ", CommentText(g_.tensor(t).name));
      if (w % 4 == 0) {
        // 4 values a store (16 bytes of floats, 8 of a 16-bit type): the
        // block's rows start at multiples of 4 in the block buffer and in
        // the destination (every buffer starts 16-byte aligned).
        c->Open(absl::StrCat("for (int x = tid * 4; x < nr * ", w, "; x += ", threads_ * 4, ") {"));
        for (const std::string& d : dsts_[t]) {
          c->L("yr_st4(", d, ", r0 * ", w, " + x, b", j, " + x);");
        }
      } else {
        c->Open(absl::StrCat("for (int x = tid; x < nr * ", w, "; x += ", threads_, ") {"));
        EmitStores(dsts_[t], absl::StrCat("r0 * ", w, " + x"), absl::StrCat("b", j, "[x]"), c);
      }
      c->Close();
    }
    c->Close();
  }

  void EmitTilePhase(const std::vector<int>& outputs, Code* c) {
    c->L("// ---- tile phase: columns [n0, n0 + ", tn_, ") ----");
    auto tile_loop = [&](int64_t w) {
      c->Open(absl::StrCat("for (int x = tid; x < ", br_ * tn_, "; x += ", threads_, ") {"));
      c->L("const int i = x / ", tn_, ";");
      c->L("const int cc = x % ", tn_, ";");
      c->L("const int c = ", w == 1 ? "0" : "n0 + cc", ";");
      c->L("const i64 r = r0 + i;");
      c->L("(void)r;");
      c->L("if (i >= nr || ", w == 1 ? "cc != 0" : absl::StrCat("c >= ", w), ") continue;");
    };
    // Matmuls first (their A operands are F or memory), summing over this
    // block's K slice.
    if (tc_) EmitTensorCoreTiles(c);
    for (size_t j = 0; j < ops_.size() && !tc_; ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      if (f_[j] || op.type != OpType::kMatmul) continue;
      const int64_t k = g_.tensor(op.inputs[0]).shape.back();
      const int64_t kc = CeilDiv(CeilDiv(k, split_), 16) * 16;
      c->L("// ", CommentText(op.name), " = matmul tile, K ", k, split_ > 1 ? " split" : "");
      const std::string ka = split_ > 1 ? absl::StrCat("(int)blockIdx.z * ", kc) : "0";
      const std::string kb = split_ > 1
                                 ? absl::StrCat("min(", k, ", ((int)blockIdx.z + 1) * ", kc, ")")
                                 : absl::StrCat(k);
      const std::string tl = absl::StrCat("tl", j);
      EmitMatmulTile(
          j, "n0", tn_, ka, kb, split_ > 1 ? kc : k,
          [&](const std::string& i, const std::string& cc) {
            return absl::StrCat(tl, "[(", i, ") * ", tn_, " + (", cc, ") - n0]");
          },
          c);
    }
    if (split_ > 1) {
      c->L("// split-K: add this block's partial tiles; the last block of the tile goes on");
      for (size_t j = 0; j < ops_.size(); ++j) {
        if (f_[j] || g_.op(ops_[j]).type != OpType::kMatmul) continue;
        const int64_t n = info_.row_width[j];
        tile_loop(n);
        c->L("atomicAdd(&ws", j, "[r * ", n, " + c], tl", j, "[x]);");
        c->Close();
      }
      c->L("__threadfence();");
      c->L("__syncthreads();");
      c->L("int* const last = (int*)(red + 32);");
      c->Open("if (tid == 0) {");
      c->L("const unsigned prev = atomicAdd(&cnt[blockIdx.x * gridDim.y + blockIdx.y], 1u);");
      c->L("*last = prev == gridDim.z - 1;");
      c->Close();
      c->L("__syncthreads();");
      c->L("if (!*last) return;");
      c->L("__threadfence();");
      for (size_t j = 0; j < ops_.size(); ++j) {
        if (f_[j] || g_.op(ops_[j]).type != OpType::kMatmul) continue;
        const int64_t n = info_.row_width[j];
        tile_loop(n);
        c->L("tl", j, "[x] = __ldcg(&ws", j, "[r * ", n, " + c]);");
        c->L("__stcg(&ws", j, "[r * ", n, " + c], 0.0f);");
        c->Close();
      }
      c->L("if (tid == 0) cnt[blockIdx.x * gridDim.y + blockIdx.y] = 0u;");
      c->L("__syncthreads();");
    }
    for (size_t j = 0; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      if (f_[j] || op.type == OpType::kMatmul) continue;
      const int64_t w = info_.row_width[j];
      c->L("// ", CommentText(op.name), " = ", std::string(core::OpTypeName(op.type)), " (tile)");
      tile_loop(w);
      c->L("tl", j, "[x] = ", ElementwiseValue(j, w, "i", "r", "c"), ";");
      c->Close();
      c->L("__syncthreads();");
    }
    for (int t : outputs) {
      const size_t j = group_pos_.at(t);
      if (f_[j] || dsts_[t].empty()) continue;
      const int64_t w = info_.row_width[j];
      c->L("// store ", CommentText(g_.tensor(t).name));
      if (w == 1) c->Open("if (blockIdx.y == 0) {");
      tile_loop(w);
      EmitStores(dsts_[t], absl::StrCat("r * ", w, " + c"), absl::StrCat("tl", j, "[x]"), c);
      c->Close();
      if (w == 1) c->Close();
    }
  }

  PlanContext& ctx_;
  const Graph& g_;
  const KernelPlan& kernel_;
  const int kernel_index_;
  const std::vector<int> ops_;
  const core::RowGroupInfo info_;
  const Schedule& s_;
  std::map<int, size_t> group_pos_;
  std::map<int, std::vector<std::string>> dsts_;
  // Set by Emit: the kernel stores only reductions.
  bool read_past_l1_ = false;
  std::vector<bool> f_;
  std::vector<int64_t> off_;
  bool has_t_ = false;
  bool arena_global_ = false;
  int threads_ = 128;
  int br_ = 1;
  int tn_ = 1;
  int tpr_ = 32;
  int split_ = 1;
  int64_t f_floats_ = 0;
  int64_t red_off_ = 0;
  int64_t smem_bytes_ = 0;
  int64_t grid_x_ = 1;
  int64_t grid_y_ = 1;
  // Tensor-core tile phase.
  bool tc_ = false;
  int64_t tc_k_ = -1;  // K of every T matmul
  yirage::v1::DType tc_b_dtype_ = yirage::v1::DTYPE_UNSPECIFIED;
  int tc_stages_ = 4;
  int tc_mp_ = 16;                // block rows rounded up to 16
  int64_t tc_kc_ = 0;             // K slice per block (multiple of kTcChunkK)
  std::map<int, int64_t> a_off_;  // A tensor -> its staged 16-bit slice (float offset)
  std::vector<int64_t> b_off_;    // per T matmul: its B stages (float offset)
  // Row staging (PlanStaging): tensor -> float offset of its [BR][W] rows.
  std::map<int, int64_t> stage_off_;
};

}  // namespace

absl::Status EmitRowKernel(PlanContext& ctx, const KernelPlan& kernel, int kernel_index,
                           const std::vector<int>& ops, core::RowGroupInfo info,
                           const std::vector<int>& outputs, bool inject_fault, Code* code) {
  RowKernelEmitter emitter(ctx, kernel, kernel_index, ops, std::move(info));
  return emitter.Emit(outputs, inject_fault, code);
}

}  // namespace yirage::backends::cuda
