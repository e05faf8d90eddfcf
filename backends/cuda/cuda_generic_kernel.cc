// KERNEL_GENERIC kernels of the CUDA backend: one op each, a column
// reduction or plain loops over its output, or a chain of elementwise ops
// computed as the reduction, norm or softmax after them reads
// (core/generic_chain.h); see cuda_codegen.h.
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
#include "core/generic_chain.h"
#include "core/row_group.h"

namespace yirage::backends::cuda {
namespace {

using core::Graph;
using core::OpInfo;
using core::OpType;
using ::yirage::backends::BinaryExpr;
using ::yirage::backends::BroadcastStrides;
using ::yirage::backends::CeilDiv;
using ::yirage::backends::CommentText;
using ::yirage::backends::Numel;
using ::yirage::backends::OffsetExpr;
using ::yirage::backends::Slice;
using yirage::v1::KernelPlan;

// ---------------------------------------------------------------------------
// KERNEL_GENERIC
// ---------------------------------------------------------------------------

// `const float <prefix><t> = ...;` for the result t of each elementwise op
// of `ops`, in order; `outside(t)` names the value of a tensor no op of
// `ops` produces.
void EmitChainMath(const PlanContext& ctx, const std::vector<int>& ops, const std::string& prefix,
                   const std::function<std::string(int)>& outside, Code* code) {
  auto value = [&](int t) {
    const int producer = ctx.graph.tensor(t).producer;
    const bool inside = std::find(ops.begin(), ops.end(), producer) != ops.end();
    return inside ? absl::StrCat(prefix, t) : outside(t);
  };
  for (int id : ops) {
    const OpInfo& op = ctx.graph.op(id);
    const std::string v = core::IsUnaryElementwise(op.type)
                              ? UnaryExpr(op, value(op.inputs[0]))
                              : BinaryExpr(op.type, value(op.inputs[0]),
                                           op.has_scalar ? Lit(op.scalar) : value(op.inputs[1]));
    code->L("const float ", prefix, op.output, " = ", v, ";");
  }
}

// The prologue of a generic chain: the axis op's input, element by element,
// from the tensors the chain reads from memory (broadcast to its shape).
class ChainPrologue {
 public:
  // `ops`: the chain's elementwise ops in order (none: the input is read as
  // it is); `x`: the axis op's input.
  ChainPrologue(const PlanContext& ctx, std::vector<int> ops, int x)
      : ctx_(ctx), ops_(std::move(ops)), x_(x), space_(ctx.graph.tensor(x).shape) {
    for (int op : ops_) {
      for (int t : ctx_.graph.op(op).inputs) {
        const int producer = ctx_.graph.tensor(t).producer;
        const bool inside = std::find(ops_.begin(), ops_.end(), producer) != ops_.end();
        if (!inside && std::find(reads_.begin(), reads_.end(), t) == reads_.end()) {
          reads_.push_back(t);
        }
      }
    }
  }

  bool empty() const { return ops_.empty(); }

  // Elements a 16-byte vector: 8 where every tensor read is 16-bit, else 4.
  int VectorWidth() const {
    for (int t : reads_) {
      if (ElementsPer16Bytes(t) != 8) return 4;
    }
    return 8;
  }

  // `const float NAME = <the input at flat index E>;` as a lambda
  // `NAME(E)` of the kernel's parameters.
  void EmitLambda(const std::string& name, Code* code) const {
    code->Open(absl::StrCat("auto ", name, " = [&](const i64 e) -> float {"));
    for (int t : reads_) {
      code->L("const float a", t, " = yr_ld(", ctx_.Var(t), ", ", Offset(t, "e"), ");");
    }
    EmitChainMath(
        ctx_, ops_, "v", [](int t) { return absl::StrCat("a", t); }, code);
    code->L("return v", x_, ";");
    code->Close("};");
  }

  // The chain's value of the vectors at flat indices F0 .. F0 + vec - 1 of
  // `slots` rows of the reduced axis `axis` (F0 a multiple of vec, within one
  // row of the axis op's inner elements), in steps so that every row's
  // loads are in flight before the first is used. Each tensor is read as a
  // 16-byte vector kept raw (it runs along the vector), one value (constant
  // along it), or an element at a time (the rest); a tensor constant along
  // `axis` (a bias broadcast over the reduced rows) has one set of
  // registers, read once at any row's F0, the others one a row slot.
  //  - EmitReads(axis_constant = true, ...), once, then for the row slots
  //    EmitReads(false, ...): declarations, then each slot `u`'s loads;
  //  - EmitRowMath: `float OUT[vec]` of slot `u`.
  // Each step takes the RowReads of PlanRowReads(axis, vec).
  enum class ReadKind { kVector, kOne, kPerElement };
  struct Read {
    ReadKind kind;
    bool axis_constant;
  };
  using RowReads = std::map<int, Read>;  // by tensor of the reads
  RowReads PlanRowReads(int axis, int vec) const {
    RowReads plan;
    for (int t : reads_) {
      const std::vector<int64_t> strides = BroadcastStrides(ctx_.graph.tensor(t).shape, space_);
      const bool whole_rows = space_.back() % vec == 0;
      ReadKind kind = ReadKind::kPerElement;
      if (ElementsPer16Bytes(t) == vec &&
          (Contiguous(strides) || (whole_rows && strides.back() == 1))) {
        kind = ReadKind::kVector;
      } else if (whole_rows && strides.back() == 0) {
        kind = ReadKind::kOne;
      }
      plan[t] = {kind, strides[axis] == 0};
    }
    return plan;
  }

  // Declares the registers of the tensors whose axis_constant is
  // `axis_constant` (`slots` of them each where not).
  void EmitDeclarations(const RowReads& plan, bool axis_constant, int slots, int vec,
                        Code* code) const {
    const std::string dims = axis_constant ? "" : absl::StrCat("[", slots, "]");
    for (int t : reads_) {
      const Read& read = plan.at(t);
      if (read.axis_constant != axis_constant) continue;
      switch (read.kind) {
        case ReadKind::kVector:
          code->L("uint4 raw", t, dims, ";");
          break;
        case ReadKind::kOne:
          code->L("float a", t, dims, ";");
          break;
        case ReadKind::kPerElement:
          code->L("float a", t, dims, "[", vec, "];");
          break;
      }
    }
  }

  // Loads, at flat index `f0`, the tensors whose axis_constant is
  // `axis_constant` into their registers (slot `u` where not constant).
  void EmitLoads(const RowReads& plan, bool axis_constant, const std::string& f0, int vec,
                 const std::string& u, Code* code) const {
    for (int t : reads_) {
      const Read& read = plan.at(t);
      if (read.axis_constant != axis_constant) continue;
      const std::string slot = Slot(read, u);
      switch (read.kind) {
        case ReadKind::kVector:
          code->L("raw", t, slot, " = yr_ld16_once(", ctx_.Var(t), " + ", Offset(t, f0), ");");
          break;
        case ReadKind::kOne:
          code->L("a", t, slot, " = yr_ld(", ctx_.Var(t), ", ", Offset(t, f0), ");");
          break;
        case ReadKind::kPerElement:
          code->L("#pragma unroll");
          code->L("for (int k = 0; k < ", vec, "; ++k) a", t, slot, "[k] = yr_ld(", ctx_.Var(t),
                  ", ", Offset(t, absl::StrCat(f0, " + k")), ");");
          break;
      }
    }
  }

  void EmitRowMath(const RowReads& plan, int vec, const std::string& u, const std::string& out,
                   Code* code) const {
    code->L("float ", out, "[", vec, "];");
    code->Open("{");
    for (int t : reads_) {
      const Read& read = plan.at(t);
      if (read.kind != ReadKind::kVector) continue;
      code->L("float a", t, "[", vec, "];");
      code->L("yr_stage16(a", t, ", raw", t, Slot(read, u), ", ", ctx_.Var(t), ");");
    }
    code->L("#pragma unroll");
    code->Open(absl::StrCat("for (int k = 0; k < ", vec, "; ++k) {"));
    EmitChainMath(
        ctx_, ops_, "v",
        [&](int t) {
          const Read& read = plan.at(t);
          if (read.kind == ReadKind::kVector) return absl::StrCat("a", t, "[k]");
          const std::string v = absl::StrCat("a", t, Slot(read, u));
          return read.kind == ReadKind::kOne ? v : v + "[k]";
        },
        code);
    code->L(out, "[k] = v", x_, ";");
    code->Close();
    code->Close();
  }

 private:
  // The index of slot `u` in a tensor's registers: none where constant.
  static std::string Slot(const Read& read, const std::string& u) {
    return read.axis_constant ? "" : absl::StrCat("[", u, "]");
  }

  int ElementsPer16Bytes(int t) const { return ctx_.ReadType(t) == "float" ? 4 : 8; }

  bool Contiguous(const std::vector<int64_t>& strides) const {
    return strides == BroadcastStrides(space_, space_);
  }

  std::string Offset(int t, const std::string& e) const {
    return OffsetExpr(space_, BroadcastStrides(ctx_.graph.tensor(t).shape, space_), e,
                      Numel(space_) < (int64_t{1} << 31));
  }

  const PlanContext& ctx_;
  std::vector<int> ops_;
  int x_;
  std::vector<int64_t> space_;
  std::vector<int> reads_;
};

// The epilogue of a generic chain: elementwise ops on the axis op's
// result, applied to each value as it is stored.
class ChainEpilogue {
 public:
  ChainEpilogue(const PlanContext& ctx, std::vector<int> ops, int axis_output)
      : ctx_(ctx), ops_(std::move(ops)), axis_output_(axis_output) {}

  bool empty() const { return ops_.empty(); }
  // The tensor the kernel writes.
  int output() const { return ops_.empty() ? axis_output_ : ctx_.graph.op(ops_.back()).output; }

  // Replaces the float variable `v`, the axis op's result at flat index
  // `index` of its output, by the chain's value there.
  void Emit(const std::string& index, const std::string& v, Code* code) const {
    if (ops_.empty()) return;
    const std::vector<int64_t>& space = ctx_.graph.tensor(axis_output_).shape;
    code->Open("{");
    code->L("const float w", axis_output_, " = ", v, ";");
    EmitChainMath(
        ctx_, ops_, "w",
        [&](int t) {
          if (t == axis_output_) return absl::StrCat("w", t);
          return absl::StrCat("yr_ld(", ctx_.Var(t), ", ",
                              OffsetExpr(space, BroadcastStrides(ctx_.graph.tensor(t).shape, space),
                                         index, Numel(space) < (int64_t{1} << 31)),
                              ")");
        },
        code);
    code->L(v, " = w", output(), ";");
    code->Close();
  }

 private:
  const PlanContext& ctx_;
  std::vector<int> ops_;
  int axis_output_;
};

// A reduction over an axis with contiguous elements after it (inner > 1: a
// middle or the first axis): `outer` slabs of d rows of `inner` columns. A
// block takes kColumnVectors 16-byte column vectors of one slab and its
// remaining threads as row lanes; each thread accumulates its vector over
// the rows of its lane with kColumnUnroll loads in flight, then the lanes
// combine in shared memory. Where slabs and column tiles give the chip too
// few blocks, the rows split over more: each writes its partials to a
// workspace and the last block of a tile to finish (a per-tile counter)
// combines them, in split order, and stores the output, which saves the
// launch of a second, combining kernel. False (nothing emitted) for shapes
// it does not take.
bool EmitColumnReduction(PlanContext& ctx, const KernelPlan& kernel, int kernel_index, int op_id,
                         const ChainPrologue& prologue, const ChainEpilogue& epilogue,
                         bool inject_fault, Code* code) {
  constexpr int kThreads = 256;
  constexpr int kColumnVectors = 32;
  constexpr int kColumnUnroll = 4;
  const Graph& g = ctx.graph;
  const OpInfo& op = g.op(op_id);
  if (!core::IsReduction(op.type)) return false;
  const int in = op.inputs[0];
  const std::vector<int64_t>& shape = g.tensor(in).shape;
  const int64_t outer = Numel(Slice(shape, 0, op.axis));
  const int64_t d = shape[op.axis];
  const int64_t inner = Numel(Slice(shape, op.axis + 1, shape.size()));
  const int vec = prologue.empty() ? (ctx.ReadType(in) == "float" ? 4 : 8) : prologue.VectorWidth();
  if (inner < vec || inner % vec != 0) return false;
  const int64_t cv = inner / vec;
  // Row lanes: as many as the block has threads beside kColumnVectors
  // column vectors, fewer (down to one, with no combine in shared memory)
  // where the axis gives each lane fewer than kColumnUnroll rows, the
  // block's threads then taking more column vectors: a max over 5 rows
  // would leave 3 of 8 lanes idle.
  int ry = kThreads / static_cast<int>(std::min<int64_t>(kColumnVectors, cv));
  while (ry > 1 && static_cast<int64_t>(ry) * kColumnUnroll > d) ry /= 2;
  const int cx = static_cast<int>(std::min<int64_t>(kThreads / ry, cv));
  const int block = cx * ry;
  const int64_t col_tiles = CeilDiv(cv, cx);
  const int64_t tiles = outer * col_tiles;
  // About 32 blocks an SM in all (four rounds of the 8 that fit), each
  // lane taking at least kColumnUnroll rows of its split.
  const int64_t sms = std::max(1, ctx.target.sm_count);
  int64_t splits = std::clamp<int64_t>(CeilDiv(32 * sms, tiles), 1,
                                       std::max<int64_t>(1, d / (int64_t{ry} * kColumnUnroll)));
  const int64_t rows_per = CeilDiv(d, splits);
  splits = CeilDiv(d, rows_per);
  // Loads in flight a lane: kColumnUnroll, or all of a lane's rows where
  // they are at most twice that (a max over 5 rows: one round of 5 loads,
  // not 4 and then 1).
  const int64_t lane_rows = CeilDiv(rows_per, ry);
  const int unroll = lane_rows <= 2 * kColumnUnroll
                         ? static_cast<int>(std::max<int64_t>(1, lane_rows))
                         : kColumnUnroll;
  const int64_t total = outer * inner;
  const bool mx = op.type == OpType::kReduceMax;
  const std::string init = mx ? "-__int_as_float(0x7f800000)" : "0.0f";
  auto combine = [&](const std::string& a, const std::string& b) {
    return mx ? absl::StrCat("yr_max(", a, ", ", b, ")") : absl::StrCat(a, " + ", b);
  };
  const std::string finish = op.type == OpType::kReduceMean ? absl::StrCat(" / ", d, ".0f") : "";
  const std::string name = KernelName(ctx.plan_index, kernel_index);
  int ws_arg = -1;
  int counter_arg = -1;
  if (splits > 1) {
    ws_arg = ctx.PlanBufferId(
        ctx.AddBuffer(splits * total * 4, false, name + " column reduction partials"));
    // Zero before the first launch; the last block of each tile resets its own.
    counter_arg =
        ctx.PlanBufferId(ctx.AddBuffer(tiles * 4, true, name + " column reduction tile counters"));
  }
  KernelLaunch launch;
  launch.name = name;
  launch.block = block;
  launch.grid[0] = tiles;
  launch.grid[1] = splits;
  std::vector<std::string> params;
  if (prologue.empty() && epilogue.empty()) {
    ctx.AddReadParam(in, &params, &launch.args);
  } else {
    for (const std::string& t : kernel.inputs()) {
      ctx.AddReadParam(g.FindTensor(t), &params, &launch.args);
    }
  }
  if (splits > 1) {
    params.push_back("float* __restrict__ ws");
    launch.args.push_back(ws_arg);
    params.push_back("unsigned* __restrict__ counters");
    launch.args.push_back(counter_arg);
  }
  const std::vector<std::string> dsts =
      ctx.AddWriteParams(epilogue.output(), &params, &launch.args);
  code->L("// kernel ", kernel_index, " '", CommentText(kernel.name()), "': KERNEL_GENERIC ",
          CommentText(op.name), " = ", std::string(core::OpTypeName(op.type)), " ",
          core::ShapeToString(g.tensor(op.output).shape), ", column reduction (", outer, " x ", d,
          " x ", inner, ": ", cx, " column vectors x ", ry, " row lanes, ", splits,
          " row split(s))");
  code->L("extern \"C\" __global__ void __launch_bounds__(", block, ") ", name, "(",
          absl::StrJoin(params, ", "), ") {");
  code->Open("{");
  if (ry > 1 || splits > 1) code->L("__shared__ float part[", ry, "][", cx * vec, "];");
  if (inject_fault) code->Line(FaultLine());
  code->L("const int cxi = threadIdx.x % ", cx, ", ryi = threadIdx.x / ", cx, ";");
  code->L("const i64 o = blockIdx.x / ", col_tiles, "LL;");
  code->L("const i64 cb = (blockIdx.x % ", col_tiles, "LL) * ", cx, ";  // first column vector");
  code->L("const i64 r0 = (i64)blockIdx.y * ", rows_per, "LL;");
  code->L("const i64 r1 = r0 + ", rows_per, "LL < ", d, "LL ? r0 + ", rows_per, "LL : ", d, "LL;");
  code->L("float acc[", vec, "];");
  code->L("#pragma unroll");
  code->L("for (int k = 0; k < ", vec, "; ++k) acc[k] = ", init, ";");
  code->Open(absl::StrCat("if (cb + cxi < ", cv, "LL) {"));
  if (!prologue.empty()) {
    // The chain's value of each element, computed from registers once every
    // row's loads of a round are in flight.
    const std::string col0 = absl::StrCat("(cb + cxi) * ", vec);
    auto row_f0 = [&](const std::string& row) {
      return absl::StrCat("(o * ", d, "LL + ", row, ") * ", inner, "LL + ", col0);
    };
    const ChainPrologue::RowReads reads = prologue.PlanRowReads(op.axis, vec);
    prologue.EmitDeclarations(reads, true, 1, vec, code);
    prologue.EmitLoads(reads, true, row_f0("r0"), vec, "", code);
    code->Open(absl::StrCat("for (i64 r = r0 + ryi; r < r1; r += ", ry * unroll, ") {"));
    prologue.EmitDeclarations(reads, false, unroll, vec, code);
    code->L("#pragma unroll");
    code->Open(absl::StrCat("for (int u = 0; u < ", unroll, "; ++u) {"));
    code->Open(absl::StrCat("if (r + u * ", ry, " < r1) {"));
    prologue.EmitLoads(reads, false, row_f0(absl::StrCat("r + u * ", ry)), vec, "u", code);
    code->Close();
    code->Close();
    code->L("#pragma unroll");
    code->Open(absl::StrCat("for (int u = 0; u < ", unroll, "; ++u) {"));
    code->L("if (r + u * ", ry, " >= r1) break;");
    prologue.EmitRowMath(reads, vec, "u", "f", code);
    code->L("#pragma unroll");
    code->L("for (int k = 0; k < ", vec, "; ++k) acc[k] = ", combine("acc[k]", "f[k]"), ";");
    code->Close();
    code->Close();
  } else {
    code->L("const ", ctx.ReadType(in), "* const p = ", ctx.Var(in), " + o * ", d * inner,
            "LL + (cb + cxi) * ", vec, ";");
    code->Open(absl::StrCat("for (i64 r = r0 + ryi; r < r1; r += ", ry * unroll, ") {"));
    code->L("uint4 raw[", unroll, "];");
    code->L("#pragma unroll");
    code->L("for (int u = 0; u < ", unroll, "; ++u) {");
    code->L("  if (r + u * ", ry, " < r1) raw[u] = yr_ld16_once(p + (r + u * ", ry, ") * ", inner,
            "LL);");
    code->L("}");
    code->L("#pragma unroll");
    code->Open(absl::StrCat("for (int u = 0; u < ", unroll, "; ++u) {"));
    code->L("if (r + u * ", ry, " >= r1) break;");
    code->L("float f[", vec, "];");
    code->L("yr_stage16(f, raw[u], p);");
    code->L("#pragma unroll");
    code->L("for (int k = 0; k < ", vec, "; ++k) acc[k] = ", combine("acc[k]", "f[k]"), ";");
    code->Close();
    code->Close();
  }
  if (ry == 1 && splits == 1) {
    // One lane: each thread holds its vector's results.
    code->L("#pragma unroll");
    code->Open(absl::StrCat("for (int k = 0; k < ", vec, "; ++k) {"));
    code->L("const i64 col = (cb + cxi) * ", vec, " + k;");
    code->L("float v = acc[k]", finish, ";");
    epilogue.Emit(absl::StrCat("o * ", inner, "LL + col"), "v", code);
    EmitStores(dsts, absl::StrCat("o * ", inner, "LL + col"), "v", code);
    code->Close();
    code->Close();
    code->Close();
    code->Line("}");
    ctx.code->launches.push_back(std::move(launch));
    return true;
  }
  code->Close();
  code->L("#pragma unroll");
  code->L("for (int k = 0; k < ", vec, "; ++k) part[ryi][cxi * ", vec, " + k] = acc[k];");
  code->L("__syncthreads();");
  code->Open(absl::StrCat("for (int e = threadIdx.x; e < ", cx * vec, "; e += ", block, ") {"));
  code->L("const i64 col = cb * ", vec, " + e;");
  code->L("if (col >= ", inner, "LL) continue;");
  code->L("float v = part[0][e];");
  code->L("for (int y = 1; y < ", ry, "; ++y) v = ", combine("v", "part[y][e]"), ";");
  if (splits > 1) {
    code->L("ws[((i64)blockIdx.y * ", outer, "LL + o) * ", inner, "LL + col] = v;");
  } else {
    code->L("v = v", finish, ";");
    epilogue.Emit(absl::StrCat("o * ", inner, "LL + col"), "v", code);
    EmitStores(dsts, absl::StrCat("o * ", inner, "LL + col"), "v", code);
  }
  code->Close();
  if (splits > 1) {
    // The last of the tile's `splits` blocks to finish combines their
    // partials (in split order) and stores the output.
    code->L("__shared__ unsigned last_block;");
    code->L("__threadfence();");
    code->L("__syncthreads();");
    code->L("if (threadIdx.x == 0) last_block = atomicAdd(&counters[blockIdx.x], 1u) == ",
            splits - 1, "u ? 1u : 0u;");
    code->L("__syncthreads();");
    code->L("if (last_block == 0u) return;");
    code->L("__threadfence();");
    code->Open(absl::StrCat("for (int e = threadIdx.x; e < ", cx * vec, "; e += ", block, ") {"));
    code->L("const i64 col = cb * ", vec, " + e;");
    code->L("if (col >= ", inner, "LL) continue;");
    code->L("const float* const w = ws + o * ", inner, "LL + col;");
    code->L("float v = __ldcg(w);");
    code->L("for (int s = 1; s < ", splits,
            "; ++s) v = ", combine("v", absl::StrCat("__ldcg(w + s * ", total, "LL)")), ";");
    code->L("v = v", finish, ";");
    epilogue.Emit(absl::StrCat("o * ", inner, "LL + col"), "v", code);
    EmitStores(dsts, absl::StrCat("o * ", inner, "LL + col"), "v", code);
    code->Close();
    code->L("if (threadIdx.x == 0) counters[blockIdx.x] = 0u;  // ready for the next launch");
  }
  code->Close();
  code->Line("}");
  ctx.code->launches.push_back(std::move(launch));
  return true;
}

// A softmax lane's elements read before any is used (EmitAxisLanes).
constexpr int kSoftmaxChunk = 4;

// Norms, softmax and reductions over an axis (any axis: the first, a middle
// one, the last, or one followed only by size-1 dims) as `outer` slabs of d
// rows of `inner` columns. Each output column (o, n) takes `lanes` threads
// along the axis, next to `cx` neighbouring columns: the cx columns make the
// loads coalesce where inner > 1, the lanes where inner is 1 (a row
// contiguous in memory, which one thread a column would walk alone). Lanes
// combine through warp shuffles, then shared memory across the unit's warps;
// norms and softmax read the row again for each of their passes (from L1 or
// L2). The block is 256 threads: units of cx x lanes threads, all powers of
// two. Takes every shape; the plain loop form remains for elementwise ops,
// concat, slice and matmul.
void EmitAxisLanes(PlanContext& ctx, const KernelPlan& kernel, int kernel_index, int op_id,
                   const ChainPrologue& prologue, const ChainEpilogue& epilogue, bool inject_fault,
                   Code* code) {
  constexpr int kThreads = kGenericThreads;
  const Graph& g = ctx.graph;
  const OpInfo& op = g.op(op_id);
  const int in = op.inputs[0];
  const std::vector<int64_t>& shape = g.tensor(in).shape;
  const int64_t outer = Numel(Slice(shape, 0, op.axis));
  const int64_t d = shape[op.axis];
  const int64_t inner = Numel(Slice(shape, op.axis + 1, shape.size()));
  auto pow2_floor = [](int64_t v) {
    int64_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
  };
  auto pow2_ceil = [](int64_t v) {
    int64_t p = 1;
    while (p < v) p *= 2;
    return p;
  };
  // About 8 elements a lane; fewer columns a unit (down to 8: 32-byte
  // sectors still fill) while the grid would leave SMs idle.
  const int64_t sms = std::max(1, ctx.target.sm_count);
  int64_t cx = std::min<int64_t>(32, pow2_floor(inner));
  int64_t lanes = 1, col_tiles = 1, per_block = 1, blocks = 1;
  for (;;) {
    lanes = std::min<int64_t>(kThreads / cx, pow2_ceil(CeilDiv(d, 8)));
    col_tiles = CeilDiv(inner, cx);
    per_block = kThreads / (cx * lanes);
    blocks = CeilDiv(outer * col_tiles, per_block);
    if (cx <= 8 || blocks >= 2 * sms) break;
    cx /= 2;
  }
  const int64_t unit = cx * lanes;                  // threads a unit
  const int64_t warps = unit > 32 ? unit / 32 : 1;  // warps a unit
  const int64_t units = outer * col_tiles;
  const std::string name = KernelName(ctx.plan_index, kernel_index);
  KernelLaunch launch;
  launch.name = name;
  launch.block = kThreads;
  launch.grid[0] = blocks;
  std::vector<std::string> params;
  for (const std::string& t : kernel.inputs()) {
    ctx.AddReadParam(g.FindTensor(t), &params, &launch.args);
  }
  const std::vector<std::string> dsts =
      ctx.AddWriteParams(epilogue.output(), &params, &launch.args);
  const std::vector<int64_t>& out = g.tensor(op.output).shape;
  code->L("// kernel ", kernel_index, " '", CommentText(kernel.name()), "': KERNEL_GENERIC ",
          CommentText(op.name), " = ", std::string(core::OpTypeName(op.type)), " ",
          core::ShapeToString(out), ", lanes along the axis (", outer, " x ", d, " x ", inner, ": ",
          cx, " columns x ", lanes, " lanes a unit, ", per_block, " unit(s) a block)");
  code->L("extern \"C\" __global__ void __launch_bounds__(", kThreads, ") ", name, "(",
          absl::StrJoin(params, ", "), ") {");
  code->Open("{");
  if (inject_fault) code->Line(FaultLine());
  const bool pair = op.type == OpType::kSoftmax;
  if (warps > 1) {
    code->L("__shared__ float red0[", kThreads / 32, "][", cx, "];");
    if (pair) code->L("__shared__ float red1[", kThreads / 32, "][", cx, "];");
  }
  code->L("const int cxi = threadIdx.x % ", cx, ";");
  code->L("const int ryi = (threadIdx.x / ", cx, ") % ", lanes, ";");
  code->L("const int ul = threadIdx.x / ", unit, ";");
  code->L("const i64 u = (i64)blockIdx.x * ", per_block, " + ul;");
  code->L("const i64 o = u / ", col_tiles, "LL;");
  code->L("const i64 n = (u % ", col_tiles, "LL) * ", cx, " + cxi;");
  code->L("const bool live = u < ", units, "LL && n < ", inner, "LL;");
  code->L("const i64 base = o * ", d * inner, "LL + n;");
  // The element of row `c` (a variable) of this column; with a prologue the
  // chain's value, computed as it is read (each pass of a norm or softmax
  // computes it again).
  if (!prologue.empty()) prologue.EmitLambda("yr_x", code);
  auto element = [&](const std::string& c) {
    return prologue.empty()
               ? absl::StrCat("yr_ld(", ctx.Var(in), ", base + ", c, " * ", inner, "LL)")
               : absl::StrCat("yr_x(base + ", c, " * ", inner, "LL)");
  };
  const std::string x = element("c");
  // Lanes of no column start past the end (no `if` between a loop and its
  // unroll pragma).
  code->L("const i64 c0 = live ? (i64)ryi : ", d, "LL;");
  const std::string loop = absl::StrCat("for (i64 c = c0; c < ", d, "LL; c += ", lanes, ")");
  // Combines `v` (and `w`, for softmax's pair) over the unit's lanes of
  // this column; every lane of the unit ends with the result.
  auto combine_lanes = [&](const std::string& how) {
    // how: "sum", "max" or "softmax" (v = running max, w = sum below it).
    auto merge = [&](const std::string& a, const std::string& b, const std::string& a2,
                     const std::string& b2) {
      if (how == "sum") return absl::StrCat(a, " += ", b, ";");
      if (how == "max") return absl::StrCat(a, " = yr_max(", a, ", ", b, ");");
      return absl::StrCat("{ const float m_ = yr_max(", a, ", ", b, "); ", a2, " = (", a,
                          " == m_ ? ", a2, " : ", a2, " * expf(", a, " - m_)) + (", b, " == m_ ? ",
                          b2, " : ", b2, " * expf(", b, " - m_)); ", a, " = m_; }");
    };
    const int64_t span = std::min<int64_t>(unit, 32);
    for (int64_t off = cx; off < span; off *= 2) {
      code->Open("{");
      code->L("const float v2 = __shfl_xor_sync(0xffffffffu, v, ", off, ");");
      if (pair) code->L("const float w2 = __shfl_xor_sync(0xffffffffu, w, ", off, ");");
      code->L(merge("v", "v2", "w", "w2"));
      code->Close();
    }
    if (warps > 1) {
      // The unit is `warps` whole warps; lanes 0..cx-1 of each hold its columns.
      code->L("__syncthreads();  // red0/red1 free from the previous combine");
      code->L("if ((threadIdx.x & 31) < ", cx, ") {");
      code->L("  red0[threadIdx.x / 32][threadIdx.x & 31] = v;");
      if (pair) code->L("  red1[threadIdx.x / 32][threadIdx.x & 31] = w;");
      code->L("}");
      code->L("__syncthreads();");
      code->L("v = red0[ul * ", warps, "][cxi];");
      if (pair) code->L("w = red1[ul * ", warps, "][cxi];");
      code->Open(absl::StrCat("for (int y = 1; y < ", warps, "; ++y) {"));
      code->L("const float v2 = red0[ul * ", warps, " + y][cxi];");
      if (pair) code->L("const float w2 = red1[ul * ", warps, " + y][cxi];");
      code->L(merge("v", "v2", "w", "w2"));
      code->Close();
    }
  };
  auto store = [&](const std::string& index, const std::string& value) {
    EmitStores(dsts, index, value, code);
  };
  // The flat index of row c of this column, for the norms' stores.
  const std::string q = "base + c * " + std::to_string(inner) + "LL";
  auto norm_store = [&](const std::string& value) {
    code->L("#pragma unroll 4");
    code->Open(absl::StrCat(loop, " {"));
    code->L("const i64 q = ", q, ";");
    std::string v = value;
    for (size_t k = 1; k < op.inputs.size(); ++k) {
      const int t = op.inputs[k];
      const std::string p = absl::StrCat("yr_ld(", ctx.Var(t), ", ",
                                         OffsetExpr(out, BroadcastStrides(g.tensor(t).shape, out),
                                                    "q", Numel(out) < (int64_t{1} << 31)),
                                         ")");
      v = k == 1 ? absl::StrCat("(", v, ") * ", p) : absl::StrCat(v, " + ", p);
    }
    code->L("float y = ", v, ";");
    epilogue.Emit("q", "y", code);
    store("q", "y");
    code->Close();
  };
  if (core::IsReduction(op.type)) {
    const bool mx = op.type == OpType::kReduceMax;
    code->L("float v = ", mx ? "-__int_as_float(0x7f800000)" : "0.0f", ";");
    code->L("#pragma unroll 4");
    code->L(loop, " v = ", mx ? absl::StrCat("yr_max(v, ", x, ")") : absl::StrCat("v + ", x), ";");
    combine_lanes(mx ? "max" : "sum");
    if (op.type == OpType::kReduceMean) code->L("v = v / ", d, ".0f;");
    code->Open("if (live && ryi == 0) {");
    epilogue.Emit(absl::StrCat("o * ", inner, "LL + n"), "v", code);
    store(absl::StrCat("o * ", inner, "LL + n"), "v");
    code->Close();
  } else if (op.type == OpType::kSoftmax) {
    // The running max v and the sum w of exp(x - v), a lane's elements
    // kSoftmaxChunk at a time: their loads all in flight before the first is
    // used (an element at a time, each waited on memory in turn), one
    // rescale a chunk. A lane that has seen only -inf keeps w 0.
    code->L("float v = -__int_as_float(0x7f800000), w = 0.0f;");
    code->Open(absl::StrCat("for (i64 c = c0; c < ", d, "LL; c += ", lanes * kSoftmaxChunk, ") {"));
    code->L("float xs[", kSoftmaxChunk, "];");
    code->L("#pragma unroll");
    code->Open(absl::StrCat("for (int k = 0; k < ", kSoftmaxChunk, "; ++k) {"));
    code->L("const i64 ck = c + k * ", lanes, ";");
    code->L("xs[k] = ck < ", d, "LL ? ", element("ck"), " : -__int_as_float(0x7f800000);");
    code->Close();
    code->L("float m = xs[0];");
    code->L("#pragma unroll");
    code->L("for (int k = 1; k < ", kSoftmaxChunk, "; ++k) m = yr_max(m, xs[k]);");
    code->L("if (m > v) { w *= expf(v - m); v = m; }");
    code->L("#pragma unroll");
    code->L("for (int k = 0; k < ", kSoftmaxChunk,
            "; ++k) w += v == -__int_as_float(0x7f800000) ? 0.0f : expf(xs[k] - v);");
    code->Close();
    combine_lanes("softmax");
    code->L("const float inv = 1.0f / w;");
    norm_store(absl::StrCat("expf(", x, " - v) * inv"));
  } else {
    // The norms: a pass summing `term` of each element xv along the axis,
    // combined over the unit's lanes into v.
    auto sum_pass = [&](const std::string& term) {
      code->L("v = 0.0f;");
      code->L("#pragma unroll 4");
      code->Open(absl::StrCat(loop, " {"));
      code->L("const float xv = ", x, ";");
      code->L("v += ", term, ";");
      code->Close();
      combine_lanes("sum");
    };
    code->L("float v;");
    std::string centered = "xv";  // rms_norm scales x itself
    if (op.type == OpType::kLayerNorm) {
      // The mean, then the squared deviations from it (two passes: the
      // one-pass variance cancels where |mean| >> std).
      sum_pass("xv");
      code->L("const float mean = v / ", d, ".0f;");
      centered = "(xv - mean)";
    }
    sum_pass(absl::StrCat(centered, " * ", centered));
    code->L("const float inv = 1.0f / sqrtf(v / ", d, ".0f + ", Lit(op.eps), ");");
    norm_store(absl::StrCat(op.type == OpType::kLayerNorm ? absl::StrCat("(", x, " - mean)") : x,
                            " * inv"));
  }
  code->Close();
  code->Line("}");
  ctx.code->launches.push_back(std::move(launch));
}

}  // namespace

void EmitGenericKernel(PlanContext& ctx, const KernelPlan& kernel, int kernel_index,
                       const std::vector<int>& ops, bool inject_fault, Code* code) {
  const Graph& g = ctx.graph;
  // A chain: elementwise ops before and after one axis op (the plan's
  // validation has accepted it).
  core::GenericChain chain{{}, ops.front(), {}};
  if (ops.size() > 1) {
    absl::StatusOr<core::GenericChain> analyzed = core::AnalyzeGenericChain(g, ops);
    if (!analyzed.ok()) {  // ResolvePlan refuses such kernels; fail the plan, not silently
      code->L("#error \"", CommentText(std::string(analyzed.status().message())), "\"");
      return;
    }
    chain = *std::move(analyzed);
  }
  const int op_id = chain.axis_op;
  const OpInfo& op = g.op(op_id);
  const ChainPrologue prologue(ctx, chain.prologue, op.inputs[0]);
  const ChainEpilogue epilogue(ctx, chain.epilogue, op.output);
  if (EmitColumnReduction(ctx, kernel, kernel_index, op_id, prologue, epilogue, inject_fault,
                          code)) {
    return;
  }
  if (core::IsReduction(op.type) || core::IsNormOrSoftmax(op.type)) {
    EmitAxisLanes(ctx, kernel, kernel_index, op_id, prologue, epilogue, inject_fault, code);
    return;
  }
  const std::vector<int64_t>& out = g.tensor(op.output).shape;
  const std::string name = KernelName(ctx.plan_index, kernel_index);
  KernelLaunch launch;
  launch.name = name;
  launch.block = kGenericThreads;
  std::vector<std::string> params;
  for (const std::string& in : kernel.inputs()) {
    ctx.AddReadParam(g.FindTensor(in), &params, &launch.args);
  }
  const std::vector<std::string> dsts = ctx.AddWriteParams(op.output, &params, &launch.args);
  auto ld = [&](int t, const std::string& index) {
    return absl::StrCat("yr_ld(", ctx.Var(t), ", ", index, ")");
  };
  auto axis_view = [&](const std::vector<int64_t>& shape, int64_t* outer, int64_t* d,
                       int64_t* inner) {
    *outer = Numel(Slice(shape, 0, op.axis));
    *d = shape[op.axis];
    *inner = Numel(Slice(shape, op.axis + 1, shape.size()));
  };
  Code body;
  int64_t total = Numel(out);
  if (core::IsElementwise(op.type)) {
    body.Open(absl::StrCat("for (i64 e = i0; e < ", total, "LL; e += step) {"));
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const int t = op.inputs[k];
      body.L("const float x", k, " = ",
             ld(t, OffsetExpr(out, BroadcastStrides(g.tensor(t).shape, out), "e",
                              total < (int64_t{1} << 31))),
             ";");
    }
    std::string value;
    if (core::IsUnaryElementwise(op.type)) {
      value = UnaryExpr(op, "x0");
    } else {
      if (op.has_scalar) body.L("const float x1 = ", Lit(op.scalar), ";");
      value = BinaryExpr(op.type, "x0", "x1");
    }
    body.L("const float v = ", value, ";");
    EmitStores(dsts, "e", "v", &body);
    body.Close();
  } else if (op.type == OpType::kConcat || op.type == OpType::kSlice) {
    // Copies of runs of `inner` elements: 4 at a time where runs are whole
    // vectors (a concat of KV caches along the sequence axis), so that the
    // index arithmetic and the memory requests are a quarter.
    int64_t outer, dout, inner;
    axis_view(out, &outer, &dout, &inner);
    const int vw = inner % 4 == 0 ? 4 : 1;
    body.Open(
        absl::StrCat("for (i64 e = i0 * ", vw, "; e < ", total, "LL; e += step * ", vw, ") {"));
    body.L("const i64 o = e / ", dout * inner, "LL;");
    body.L("const i64 c = (e / ", inner, "LL) % ", dout, "LL;");
    body.L("const i64 n = e % ", inner, "LL;");
    body.L("float v[", vw, "];");
    auto copy = [&](int t, const std::string& index) {
      if (vw == 4) return absl::StrCat("yr_ld4(", ctx.Var(t), " + ", index, ", v);");
      return absl::StrCat("v[0] = yr_ld(", ctx.Var(t), ", ", index, ");");
    };
    if (op.type == OpType::kConcat) {
      int64_t off = 0;
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        const int t = op.inputs[k];
        const int64_t dk = g.tensor(t).shape[op.axis];
        body.L(k == 0 ? "" : "else ",
               k + 1 < op.inputs.size() ? absl::StrCat("if (c < ", off + dk, "LL) ") : "",
               copy(t, absl::StrCat("(o * ", dk, "LL + (c - ", off, "LL)) * ", inner, "LL + n")));
        off += dk;
      }
    } else {
      const int64_t din = g.tensor(op.inputs[0]).shape[op.axis];
      body.L(copy(op.inputs[0], absl::StrCat("(o * ", din, "LL + ", op.slice_start, "LL + c) * ",
                                             inner, "LL + n")));
    }
    for (const std::string& dst : dsts) {
      body.L(vw == 4 ? absl::StrCat("yr_st4(", dst, ", e, v);")
                     : absl::StrCat("yr_st(", dst, ", e, v[0]);"));
    }
    body.Close();
    total /= vw;  // the grid covers vectors
  } else if (op.type == OpType::kMatmul) {
    const std::vector<int64_t>& a = g.tensor(op.inputs[0]).shape;
    const std::vector<int64_t>& b = g.tensor(op.inputs[1]).shape;
    const int64_t k = a.back();
    const int64_t n = out.back();
    const std::vector<int64_t> lead = Slice(out, 0, out.size() - 1);
    std::vector<int64_t> a_lead = BroadcastStrides(Slice(a, 0, a.size() - 1), lead);
    for (int64_t& st : a_lead) st *= k;
    std::vector<int64_t> b_lead =
        BroadcastStrides(Slice(b, 0, b.size() - 2), Slice(out, 0, out.size() - 2));
    for (int64_t& st : b_lead) st *= k * n;
    b_lead.push_back(0);
    body.Open(absl::StrCat("for (i64 e = i0; e < ", total, "LL; e += step) {"));
    body.L("const i64 r = e / ", n, "LL;");
    body.L("const i64 c = e % ", n, "LL;");
    body.L("const ", ctx.ReadType(op.inputs[0]), "* const pa = ", ctx.Var(op.inputs[0]), " + ",
           OffsetExpr(lead, a_lead, "r"), ";");
    body.L("const ", ctx.ReadType(op.inputs[1]), "* const pb = ", ctx.Var(op.inputs[1]), " + ",
           OffsetExpr(lead, b_lead, "r"), ";");
    body.L("float acc = 0.0f;");
    body.L("for (i64 kk = 0; kk < ", k, "; ++kk) acc = fmaf(yr_ld(pa, kk), yr_ld(pb, ",
           op.transpose_b ? absl::StrCat("c * ", k, "LL + kk") : absl::StrCat("kk * ", n, "LL + c"),
           "), acc);");
    EmitStores(dsts, "e", "acc", &body);
    body.Close();
  }
  const int64_t blocks = std::max<int64_t>(
      1, std::min<int64_t>(CeilDiv(total, kGenericThreads), int64_t{ctx.target.sm_count} * 16));
  launch.grid[0] = blocks;
  code->L("// kernel ", kernel_index, " '", CommentText(kernel.name()), "': KERNEL_GENERIC ",
          CommentText(op.name), " = ", std::string(core::OpTypeName(op.type)), " ",
          core::ShapeToString(out));
  code->L("extern \"C\" __global__ void __launch_bounds__(", kGenericThreads, ") ", name, "(",
          absl::StrJoin(params, ", "), ") {");
  code->Open("{");
  code->L("const i64 i0 = (i64)blockIdx.x * blockDim.x + threadIdx.x;");
  code->L("const i64 step = (i64)gridDim.x * blockDim.x;");
  if (inject_fault) code->Line(FaultLine());
  code->Line(body.str());
  code->Close();
  code->Line("}");
  ctx.code->launches.push_back(std::move(launch));
}

}  // namespace yirage::backends::cuda
