#include "backends/cpu/cpu_codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/code_writer.h"
#include "backends/codegen_util.h"
#include "core/generic_chain.h"
#include "core/kernel_family.h"
#include "core/library_matmul.h"
#include "core/plan_resolution.h"
#include "core/row_group.h"

namespace yirage::backends::cpu {
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

constexpr int64_t kDefaultBlockRows = 8;
constexpr int64_t kDefaultTileN = 256;
constexpr int64_t kDefaultTileK = 256;
constexpr int64_t kMaxGenericTileN = 1024;  // stack accumulator of GENERIC matmuls

using Code = ::yirage::backends::CodeWriter;

std::string CType(yirage::v1::DType dtype) {
  switch (dtype) {
    case yirage::v1::FLOAT16:
      return "yr_f16";
    case yirage::v1::BFLOAT16:
      return "yr_bf16";
    default:
      return "float";
  }
}

// A float literal for generated code.
std::string Lit(double value) {
  return ::yirage::backends::FloatLiteral(value, "__builtin_nanf(\"\")", "__builtin_inff()",
                                          "(-__builtin_inff())");
}

std::string UnaryExpr(const OpInfo& op, const std::string& x) {
  switch (op.type) {
    case OpType::kNeg:
      return absl::StrCat("(-", x, ")");
    case OpType::kExp:
      return absl::StrCat("yr_expf(", x, ")");
    case OpType::kLog:
      return absl::StrCat("logf(", x, ")");
    case OpType::kSqrt:
      return absl::StrCat("sqrtf(", x, ")");
    case OpType::kRsqrt:
      return absl::StrCat("(1.0f / sqrtf(", x, "))");
    case OpType::kSquare:
      return absl::StrCat("(", x, " * ", x, ")");
    case OpType::kAbs:
      return absl::StrCat("fabsf(", x, ")");
    case OpType::kRelu:
      return absl::StrCat("(", x, " > 0.0f ? ", x, " : 0.0f)");
    case OpType::kSigmoid:
      return absl::StrCat("(1.0f / (1.0f + yr_expf(-", x, ")))");
    case OpType::kTanh:
      return absl::StrCat("yr_tanhf(", x, ")");
    case OpType::kSilu:
      return absl::StrCat("(", x, " / (1.0f + yr_expf(-", x, ")))");
    case OpType::kGelu:
      if (op.gelu_tanh) {
        return absl::StrCat("(0.5f * ", x, " * (1.0f + yr_tanhf(0.7978845608028654f * (", x,
                            " + 0.044715f * ", x, " * ", x, " * ", x, "))))");
      }
      return absl::StrCat("(0.5f * ", x, " * (1.0f + yr_erff(", x, " * 0.7071067811865476f)))");
    default:
      return "";
  }
}

// "#pragma omp simd[ simdlen(w)][ clause]" honoring the vector width hint.
std::string Simd(const Schedule& schedule, std::string_view clause = "") {
  std::string s = "#pragma omp simd";
  const int w = schedule.vector_width();
  if (w > 1 && (w & (w - 1)) == 0) absl::StrAppend(&s, " simdlen(", w, ")");
  if (!clause.empty()) absl::StrAppend(&s, " ", std::string(clause));
  return s;
}

// "#pragma GCC unroll u" honoring the unroll hint, or "".
std::string Unroll(const Schedule& schedule) {
  return schedule.unroll() > 1 ? absl::StrCat("#pragma GCC unroll ", schedule.unroll()) : "";
}

// Per-plan state shared by the kernel emitters.
struct PlanContext {
  const Graph& graph;
  std::string prefix;                          // "yr_p<i>_"
  std::vector<bool> scratch;                   // per tensor: float32 scratch buffer
  std::vector<std::vector<int>> out_position;  // per tensor: graph output slots
  Code statics;                                // static variables
  Code init;                                   // body of _init
  Code fini;                                   // body of _fini
  bool blas = false;                           // _init opens OpenBLAS
  std::map<int, std::string> float_copies;     // per 16-bit input: its float32 copy

  // Variable addressing tensor `t` in memory for reading.
  std::string Var(int t) const { return absl::StrCat("t", t); }
  // Element type of Var(t).
  std::string ReadType(int t) const {
    return graph.tensor(t).producer < 0 ? CType(graph.tensor(t).dtype) : "float";
  }
  // Destinations (variable names) a kernel writes tensor `t` to.
  std::vector<std::string> Destinations(int t) const {
    std::vector<std::string> out;
    if (scratch[t]) out.push_back(Var(t));
    for (int slot : out_position[t]) out.push_back(absl::StrCat("o", slot));
    return out;
  }
  // Declares a static float buffer of `count` floats, allocated by _init.
  std::string AddBuffer(const std::string& name, int64_t count) {
    const std::string var = absl::StrCat(prefix, name);
    statics.L("static float* ", var, " = nullptr;");
    init.L(var, " = yr_alloc_floats(", count, ");");
    init.L("if (", var, " == nullptr) return 1;");
    fini.L("yr_free(", var, ");");
    fini.L(var, " = nullptr;");
    return var;
  }
};

void EmitStores(const std::vector<std::string>& dsts, const std::string& index,
                const std::string& value, Code* code) {
  for (const std::string& d : dsts) code->L("yr_st(", d, ", ", index, ", ", value, ");");
}

// Reduces `d` contiguous values, `at(c)` reading the one at column c, into
// `acc` (declared here: float for max, double for sums). 64 independent
// lanes (four AVX-512 or eight AVX2 vectors) keep the adds from waiting on
// each other: one vector accumulator is bound by the add's latency, not by
// the loads. Sums add float pieces of 1024 columns (16 terms a lane) into a
// double: one float sum of thousands of terms can miss a float64 reference
// near zero by more than the tolerance.
void EmitLaneReduction(bool max, int64_t d,
                       const std::function<std::string(const std::string&)>& at,
                       const std::string& acc, Code* code) {
  const std::string op_init = max ? "-__builtin_inff()" : "0.0f";
  auto combine = [max](const std::string& into, const std::string& x) {
    return max ? absl::StrCat(into, " = yr_max(", into, ", ", x, ");")
               : absl::StrCat(into, " += ", x, ";");
  };
  code->L(max ? "float " : "double ", acc, " = ", max ? "-__builtin_inff()" : "0.0", ";");
  code->Open(absl::StrCat("for (int64_t c0 = 0; c0 < ", d, "; c0 += 1024) {"));
  code->L("const int64_t c1 = c0 + 1024 < ", d, " ? c0 + 1024 : ", d, ";");
  code->L("float lanes[64];");
  code->L("for (int l = 0; l < 64; ++l) lanes[l] = ", op_init, ";");
  code->L("int64_t c = c0;");
  code->Open("for (; c + 64 <= c1; c += 64) {");
  code->L("#pragma omp simd");
  code->L("for (int l = 0; l < 64; ++l) ", combine("lanes[l]", at("c + l")));
  code->Close();
  code->L("float part = ", op_init, ";");
  code->L("for (; c < c1; ++c) ", combine("part", at("c")));
  code->L("#pragma omp simd reduction(", max ? "yr_max" : "+", ":part)");
  code->L("for (int l = 0; l < 64; ++l) ", combine("part", "lanes[l]"));
  code->L(combine(acc, "part"));
  code->Close();
}

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

  absl::Status Emit(const std::vector<int>& outputs, Code* code) {
    if (CanUseFlatElementwise()) return EmitFlatElementwise(outputs, code);
    const int64_t rows = info_.num_rows;
    cols_ = s_.parallel() == yirage::v1::PARALLEL_COLS;
    const int64_t br =
        cols_ ? rows
              : std::min<int64_t>(rows, s_.block_rows() > 0 ? s_.block_rows() : kDefaultBlockRows);
    // Block buffer layout (floats, 64-byte aligned slots).
    std::vector<int64_t> offset(ops_.size());
    int64_t arena = 0;
    for (size_t j = 0; j < ops_.size(); ++j) {
      offset[j] = arena;
      arena += (br * info_.row_width[j] + 15) / 16 * 16;
    }
    // Allocated by GeneratePlan: `arena` floats (COLS) or one arena per thread.
    const std::string buf = absl::StrCat(ctx_.prefix, "k", kernel_index_);
    code->Open("{");
    code->L("// kernel ", kernel_index_, " '", CommentText(kernel_.name()), "': KERNEL_ROW ",
            cols_ ? "PARALLEL_COLS" : "PARALLEL_ROWS", ", ", rows, " rows, block_rows ", br);
    if (cols_) {
      for (size_t j = 0; j < ops_.size(); ++j) {
        code->L("float* const b", j, " = ", buf, " + ", offset[j], ";");
      }
      code->Open(absl::StrCat("#pragma omp parallel num_threads(", ctx_.prefix, "nt)"));
      code->Open("{");
      code->L("const int64_t r0 = 0;");
      code->L("const int64_t nr = ", rows, ";");
      for (size_t j = 0; j < ops_.size(); ++j) EmitOp(j, code);
      EmitStoreAll(outputs, code);
      code->Close();
      code->Close("");
    } else {
      code->L("#pragma omp parallel num_threads(", ctx_.prefix, "nt)");
      code->Open("{");
      code->L("float* const arena = ", buf, " + (int64_t)omp_get_thread_num() * ", arena, ";");
      for (size_t j = 0; j < ops_.size(); ++j) {
        code->L("float* const b", j, " = arena + ", offset[j], ";");
      }
      const int64_t blocks = (rows + br - 1) / br;
      code->L("#pragma omp for schedule(static)");
      code->Open(absl::StrCat("for (int64_t blk = 0; blk < ", blocks, "; ++blk) {"));
      code->L("const int64_t r0 = blk * ", br, ";");
      code->L("const int64_t nr = ", rows, " - r0 < ", br, " ? ", rows, " - r0 : ", br, ";");
      for (size_t j = 0; j < ops_.size(); ++j) EmitOp(j, code);
      EmitStoreAll(outputs, code);
      code->Close();
      code->Close();
    }
    code->Close();
    return absl::OkStatus();
  }

 private:
  // Declares `name` pointing at row r (block row i) of operand `slot` of group
  // op j, as seen in `space` (the shape the op indexes the operand in, whose
  // leading dims are the group's lead dims). Returns whether the column stride
  // is 1 (else 0: broadcast along the row).
  bool OperandRow(size_t j, int slot, const std::vector<int64_t>& space, const std::string& name,
                  Code* code, const std::string& iv = "i", const std::string& rv = "r") {
    const OpInfo& op = g_.op(ops_[j]);
    const int t = op.inputs[slot];
    if (info_.in_group[j][slot]) {
      const size_t src = group_pos_.at(t);
      const int64_t w = info_.row_width[src];
      code->L("const float* const ", name, " = b", src, " + ", iv, " * ", w, ";");
      return w != 1;
    }
    const std::vector<int64_t> strides = BroadcastStrides(core::RowSpaceShape(g_, info_, t), space);
    const size_t l = info_.lead_dims.size();
    const std::vector<int64_t> lead_strides(strides.begin(), strides.begin() + l);
    code->L("const ", ctx_.ReadType(t), "* const ", name, " = ", ctx_.Var(t), " + ",
            OffsetExpr(info_.lead_dims, lead_strides, rv), ";");
    return strides[l] != 0;
  }

  std::vector<int64_t> Space(int64_t width) const {
    std::vector<int64_t> s = info_.lead_dims;
    s.push_back(width);
    return s;
  }

  static std::string At(const std::string& p, bool stride) {
    return absl::StrCat("yr_ld(", p, stride ? ", c)" : ", 0)");
  }

  // Opens the per-row loop (ROWS: all rows of the block; COLS: work-shared).
  void OpenRows(Code* code) {
    if (cols_) code->L("#pragma omp for schedule(static)");
    code->Open("for (int64_t i = 0; i < nr; ++i) {");
    code->L("const int64_t r = r0 + i;");
    code->L("(void)r;");
  }

  int64_t ChunkCols() const { return s_.tile_n() > 0 ? s_.tile_n() : kDefaultTileN; }

  // Opens a loop over (row, column chunk) defining r, i, c0, c1.
  void OpenRowCols(int64_t width, Code* code) {
    if (!cols_) {
      code->Open("for (int64_t i = 0; i < nr; ++i) {");
      code->L("const int64_t r = r0 + i;");
      code->L("(void)r;");
      code->L("const int64_t c0 = 0, c1 = ", width, ";");
      return;
    }
    const int64_t chunk = ChunkCols();
    const int64_t chunks = (width + chunk - 1) / chunk;
    code->L("#pragma omp for collapse(2) schedule(static)");
    code->Line("for (int64_t i = 0; i < nr; ++i)");
    code->Open(absl::StrCat("for (int64_t cb = 0; cb < ", chunks, "; ++cb) {"));
    code->L("const int64_t r = r0 + i;");
    code->L("(void)r;");
    code->L("const int64_t c0 = cb * ", chunk, ";");
    code->L("const int64_t c1 = c0 + ", chunk, " < ", width, " ? c0 + ", chunk, " : ", width, ";");
  }

  void EmitOp(size_t j, Code* code) {
    const OpInfo& op = g_.op(ops_[j]);
    const int64_t w = info_.row_width[j];
    code->L("// ", CommentText(op.name), " = ", std::string(core::OpTypeName(op.type)), " [rows, ",
            w, "]");
    if (core::IsElementwise(op.type)) {
      OpenRowCols(w, code);
      const std::vector<int64_t> space = Space(w);
      std::vector<std::string> x;
      for (int s = 0; s < static_cast<int>(op.inputs.size()); ++s) {
        const std::string p = absl::StrCat("p", s);
        x.push_back(At(p, OperandRow(j, s, space, p, code)));
      }
      code->L("float* const q = b", j, " + i * ", w, ";");
      code->Line(Simd(s_));
      code->Open("for (int64_t c = c0; c < c1; ++c) {");
      code->L("const float x0 = ", x[0], ";");
      if (core::IsUnaryElementwise(op.type)) {
        code->L("q[c] = ", UnaryExpr(op, "x0"), ";");
      } else {
        code->L("const float x1 = ", op.has_scalar ? Lit(op.scalar) : x[1], ";");
        code->L("q[c] = ", BinaryExpr(op.type, "x0", "x1"), ";");
      }
      code->Close();
      code->Close();
      return;
    }
    if (op.type == OpType::kMatmul) {
      EmitMatmul(j, code);
      return;
    }
    OpenRows(code);
    code->L("float* const q = b", j, " + i * ", w, ";");
    if (core::IsReduction(op.type)) {
      const std::vector<int64_t>& in = g_.tensor(op.inputs[0]).shape;
      const int64_t d = in.back();
      OperandRow(j, 0, in, "p0", code);
      const bool max = op.type == OpType::kReduceMax;
      EmitLaneReduction(
          max, d, [](const std::string& c) { return absl::StrCat("yr_ld(p0, ", c, ")"); }, "acc",
          code);
      code->L("q[0] = (float)(acc",
              op.type == OpType::kReduceMean ? absl::StrCat(" / ", d, ".0") : "", ");");
    } else if (op.type == OpType::kRmsNorm || op.type == OpType::kLayerNorm ||
               op.type == OpType::kSoftmax) {
      const std::vector<int64_t> space = Space(w);
      std::vector<std::string> x;
      for (int s = 0; s < static_cast<int>(op.inputs.size()); ++s) {
        const std::string p = absl::StrCat("p", s);
        x.push_back(At(p, OperandRow(j, s, space, p, code)));
      }
      EmitRowNorm(op, w, x, "c", code);
    } else if (op.type == OpType::kConcat) {
      int64_t off = 0;
      for (int s = 0; s < static_cast<int>(op.inputs.size()); ++s) {
        const std::vector<int64_t>& in = g_.tensor(op.inputs[s]).shape;
        const std::string p = absl::StrCat("p", s);
        const bool stride = OperandRow(j, s, in, p, code);
        code->Line(Simd(s_));
        code->L("for (int64_t c = 0; c < ", in.back(), "; ++c) q[", off, " + c] = ", At(p, stride),
                ";");
        off += in.back();
      }
    } else if (op.type == OpType::kSlice) {
      const std::vector<int64_t>& in = g_.tensor(op.inputs[0]).shape;
      const bool stride = OperandRow(j, 0, in, "p0", code);
      code->Line(Simd(s_));
      code->L("for (int64_t c = 0; c < ", w, "; ++c) q[c] = ",
              stride ? absl::StrCat("yr_ld(p0, c + ", op.slice_start, ")") : "yr_ld(p0, 0)", ";");
    }
    code->Close();
  }

  // Statistic pass(es) then the output pass of rms_norm / layer_norm /
  // softmax over one row of `w` elements; x[k] reads operand k at column c.
  void EmitRowNorm(const OpInfo& op, int64_t w, const std::vector<std::string>& x,
                   const std::string& c, Code* code) {
    (void)c;
    const std::string wf = absl::StrCat(w, ".0f");
    if (op.type == OpType::kSoftmax) {
      code->L("float mx = -__builtin_inff();");
      code->Line(Simd(s_, "reduction(yr_max:mx)"));
      code->L("for (int64_t c = 0; c < ", w, "; ++c) mx = yr_max(mx, ", x[0], ");");
      code->L("float sum = 0.0f;");
      code->Line(Simd(s_, "reduction(+:sum)"));
      code->Open(absl::StrCat("for (int64_t c = 0; c < ", w, "; ++c) {"));
      code->L("const float e = yr_expf(", x[0], " - mx);");
      code->L("q[c] = e;");
      code->L("sum += e;");
      code->Close();
      code->L("const float inv = 1.0f / sum;");
      code->Line(Simd(s_));
      code->L("for (int64_t c = 0; c < ", w, "; ++c) q[c] *= inv;");
      return;
    }
    std::string value;
    if (op.type == OpType::kRmsNorm) {
      code->L("float ss = 0.0f;");
      code->Line(Simd(s_, "reduction(+:ss)"));
      code->Open(absl::StrCat("for (int64_t c = 0; c < ", w, "; ++c) {"));
      code->L("const float v = ", x[0], ";");
      code->L("ss += v * v;");
      code->Close();
      code->L("const float inv = 1.0f / sqrtf(ss / ", wf, " + ", Lit(op.eps), ");");
      value = absl::StrCat(x[0], " * inv");
    } else {
      code->L("float sum = 0.0f;");
      code->Line(Simd(s_, "reduction(+:sum)"));
      code->L("for (int64_t c = 0; c < ", w, "; ++c) sum += ", x[0], ";");
      code->L("const float mean = sum / ", wf, ";");
      code->L("float var = 0.0f;");
      code->Line(Simd(s_, "reduction(+:var)"));
      code->Open(absl::StrCat("for (int64_t c = 0; c < ", w, "; ++c) {"));
      code->L("const float d = ", x[0], " - mean;");
      code->L("var += d * d;");
      code->Close();
      code->L("const float inv = 1.0f / sqrtf(var / ", wf, " + ", Lit(op.eps), ");");
      value = absl::StrCat("(", x[0], " - mean) * inv");
    }
    if (x.size() > 1) value = absl::StrCat("(", value, ") * ", x[1]);
    if (x.size() > 2) value = absl::StrCat(value, " + ", x[2]);
    code->Line(Simd(s_));
    code->L("for (int64_t c = 0; c < ", w, "; ++c) q[c] = ", value, ";");
  }

  void EmitMatmul(size_t j, Code* code) {
    const OpInfo& op = g_.op(ops_[j]);
    const std::vector<int64_t>& a = g_.tensor(op.inputs[0]).shape;
    const std::vector<int64_t>& b = g_.tensor(op.inputs[1]).shape;
    const std::vector<int64_t>& out = g_.tensor(op.output).shape;
    const int64_t k = a.back();
    const int64_t n = out.back();
    const int64_t tn = std::min(n, s_.tile_n() > 0 ? s_.tile_n() : kDefaultTileN);
    const int64_t tk = std::min(k, s_.tile_k() > 0 ? s_.tile_k() : kDefaultTileK);
    const int64_t ntiles = (n + tn - 1) / tn;
    const size_t l = info_.lead_dims.size();
    // B's batch offset per row: batch dims broadcast, the M dim does not move B.
    std::vector<int64_t> b_lead = BroadcastStrides(Slice(b, 0, b.size() - 2), Slice(out, 0, l - 1));
    for (int64_t& s : b_lead) s *= k * n;
    b_lead.push_back(0);
    const int tb = op.inputs[1];

    if (cols_) code->L("#pragma omp for schedule(static)");
    code->Open(absl::StrCat("for (int64_t nt = 0; nt < ", ntiles, "; ++nt) {"));
    code->L("const int64_t n0 = nt * ", tn, ";");
    code->L("const int64_t nn = n0 + ", tn, " < ", n, " ? ", tn, " : ", n, " - n0;");
    code->Open("for (int64_t i = 0; i < nr; ++i) {");
    code->L("float* const q = b", j, " + i * ", n, " + n0;");
    code->Line(Simd(s_));
    code->L("for (int64_t x = 0; x < nn; ++x) q[x] = 0.0f;");
    code->Close();
    code->Open(absl::StrCat("for (int64_t k0 = 0; k0 < ", k, "; k0 += ", tk, ") {"));
    code->L("const int64_t k1 = k0 + ", tk, " < ", k, " ? k0 + ", tk, " : ", k, ";");
    const bool shared_b =
        std::all_of(b_lead.begin(), b_lead.end(), [](int64_t st) { return st == 0; });
    if (!op.transpose_b && shared_b) {
      // Every row reads the same B: four rows per pass over the B tile, so
      // each loaded (and converted) B element feeds four FMAs.
      constexpr int kRows = 4;
      code->L("int64_t i = 0;");
      code->Open(absl::StrCat("for (; i + ", kRows, " <= nr; i += ", kRows, ") {"));
      for (int u = 0; u < kRows; ++u) {
        const std::string iv = absl::StrCat("i", u);
        code->L("const int64_t ", iv, " = i + ", u, ";");
        const std::string rv = absl::StrCat("rr", u);  // not r0: the block's first row
        code->L("const int64_t ", rv, " = r0 + ", iv, ";");
        code->L("(void)", rv, ";");
        OperandRow(j, 0, Space(k), absl::StrCat("pa", u), code, iv, rv);
        code->L("float* __restrict const q", u, " = b", j, " + ", iv, " * ", n, " + n0;");
      }
      code->L("const ", ctx_.ReadType(tb), "* const pb = ", ctx_.Var(tb), ";");
      const std::string unroll = Unroll(s_);
      if (!unroll.empty()) code->Line(unroll);
      code->Open("for (int64_t kk = k0; kk < k1; ++kk) {");
      for (int u = 0; u < kRows; ++u) code->L("const float a", u, " = yr_ld(pa", u, ", kk);");
      code->L("const ", ctx_.ReadType(tb), "* const bk = pb + kk * ", n, " + n0;");
      code->Line(Simd(s_));
      code->Open("for (int64_t x = 0; x < nn; ++x) {");
      code->L("const float bv = yr_ld(bk, x);");
      for (int u = 0; u < kRows; ++u) code->L("q", u, "[x] += a", u, " * bv;");
      code->Close();
      code->Close();
      code->Close();
      code->Open("for (; i < nr; ++i) {");
    } else {
      code->Open("for (int64_t i = 0; i < nr; ++i) {");
    }
    code->L("const int64_t r = r0 + i;");
    code->L("(void)r;");
    OperandRow(j, 0, Space(k), "pa", code);
    code->L("const ", ctx_.ReadType(tb), "* const pb = ", ctx_.Var(tb), " + ",
            OffsetExpr(info_.lead_dims, b_lead, "r"), ";");
    code->L("float* const q = b", j, " + i * ", n, " + n0;");
    if (!op.transpose_b) {
      const std::string unroll = Unroll(s_);
      if (!unroll.empty()) code->Line(unroll);
      code->Open("for (int64_t kk = k0; kk < k1; ++kk) {");
      code->L("const float av = yr_ld(pa, kk);");
      code->L("const ", ctx_.ReadType(tb), "* const bk = pb + kk * ", n, " + n0;");
      code->Line(Simd(s_));
      code->L("for (int64_t x = 0; x < nn; ++x) q[x] += av * yr_ld(bk, x);");
      code->Close();
    } else {
      code->Open("for (int64_t x = 0; x < nn; ++x) {");
      code->L("const ", ctx_.ReadType(tb), "* const bn = pb + (n0 + x) * ", k, ";");
      code->L("float acc = 0.0f;");
      code->Line(Simd(s_, "reduction(+:acc)"));
      code->L("for (int64_t kk = k0; kk < k1; ++kk) acc += yr_ld(pa, kk) * yr_ld(bn, kk);");
      code->L("q[x] += acc;");
      code->Close();
    }
    code->Close();
    code->Close();
    code->Close();
  }

  // A chain of elementwise ops over one shape whose outside operands all
  // have that shape: one vector loop over every element, the chain in
  // registers, each result stored where it is needed (no block buffers, no
  // second pass to store them).
  bool CanUseFlatElementwise() const {
    const std::vector<int64_t>& shape = g_.tensor(g_.op(ops_[0]).output).shape;
    for (int id : ops_) {
      const OpInfo& op = g_.op(id);
      if (!core::IsElementwise(op.type) || g_.tensor(op.output).shape != shape) return false;
      for (int t : op.inputs) {
        if (!group_pos_.contains(t) && g_.tensor(t).shape != shape) return false;
      }
    }
    return true;
  }

  absl::Status EmitFlatElementwise(const std::vector<int>& outputs, Code* code) {
    const std::vector<int64_t>& shape = g_.tensor(g_.op(ops_[0]).output).shape;
    int64_t total = 1;
    for (int64_t d : shape) total *= d;
    code->Open("{");
    code->L("// kernel ", kernel_index_, " '", CommentText(kernel_.name()), "': KERNEL_ROW, ",
            total, " elements, flat elementwise");
    code->L("#pragma omp parallel for simd schedule(static) num_threads(", ctx_.prefix, "nt)");
    code->Open(absl::StrCat("for (int64_t e = 0; e < ", total, "; ++e) {"));
    for (size_t j = 0; j < ops_.size(); ++j) {
      const OpInfo& op = g_.op(ops_[j]);
      std::vector<std::string> x;
      for (int t : op.inputs) {
        x.push_back(group_pos_.contains(t) ? absl::StrCat("v", group_pos_.at(t))
                                           : absl::StrCat("yr_ld(", ctx_.Var(t), ", e)"));
      }
      std::string value;
      if (core::IsUnaryElementwise(op.type)) {
        value = UnaryExpr(op, x[0]);
      } else {
        value = BinaryExpr(op.type, x[0], op.has_scalar ? Lit(op.scalar) : x[1]);
      }
      code->L("const float v", j, " = ", value, ";");
    }
    for (int t : outputs) {
      EmitStores(ctx_.Destinations(t), "e", absl::StrCat("v", group_pos_.at(t)), code);
    }
    code->Close();
    code->Close();
    return absl::OkStatus();
  }

  void EmitStoreAll(const std::vector<int>& outputs, Code* code) {
    for (int t : outputs) {
      const size_t j = group_pos_.at(t);
      const int64_t w = info_.row_width[j];
      const std::vector<std::string> dsts = ctx_.Destinations(t);
      if (dsts.empty()) continue;
      code->L("// store ", CommentText(g_.tensor(t).name));
      OpenRowCols(w, code);
      code->L("const float* const q = b", j, " + i * ", w, ";");
      code->L("const int64_t base = r * ", w, ";");
      code->Line(Simd(s_));
      code->Open("for (int64_t c = c0; c < c1; ++c) {");
      EmitStores(dsts, "base + c", "q[c]", code);
      code->Close();
      code->Close();
    }
  }

  PlanContext& ctx_;
  const Graph& g_;
  const KernelPlan& kernel_;
  const int kernel_index_;
  const std::vector<int> ops_;
  const core::RowGroupInfo info_;
  const Schedule& s_;
  std::map<int, size_t> group_pos_;  // tensor id -> position of its producer in the group
  bool cols_ = false;
};

// ---------------------------------------------------------------------------
// KERNEL_GENERIC
// ---------------------------------------------------------------------------

// `ops`: one op, or a generic chain (core/generic_chain.h): elementwise ops
// before the axis op, computed by a lambda of the flat index where the axis
// op reads its input, and elementwise ops after it, applied to each value
// before it is stored.
void EmitGenericKernel(PlanContext& ctx, const KernelPlan& kernel, int kernel_index,
                       const std::vector<int>& ops, Code* code) {
  const Graph& g = ctx.graph;
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
  const std::vector<int>& prologue = chain.prologue;
  const std::vector<int>& epilogue = chain.epilogue;
  const Schedule& s = kernel.schedule();
  const std::vector<int64_t>& out = g.tensor(op.output).shape;
  const std::vector<std::string> dsts = ctx.Destinations(g.op(ops.back()).output);
  // The value of tensor t inside the chain's math: a chain result's
  // variable, else a load at `index` of the space `shape`.
  auto chain_value = [&](int t, const std::vector<int>& chain, const std::string& prefix,
                         const std::vector<int64_t>& shape, const std::string& index) {
    const int producer = g.tensor(t).producer;
    if (std::find(chain.begin(), chain.end(), producer) != chain.end() ||
        (prefix == "w" && t == op.output)) {
      return absl::StrCat(prefix, t);
    }
    return absl::StrCat("yr_ld(", ctx.Var(t), ", ",
                        OffsetExpr(shape, BroadcastStrides(g.tensor(t).shape, shape), index), ")");
  };
  auto chain_math = [&](const std::vector<int>& chain, const std::string& prefix,
                        const std::vector<int64_t>& shape, const std::string& index, Code* c) {
    for (int id : chain) {
      const OpInfo& e = g.op(id);
      const std::string a = chain_value(e.inputs[0], chain, prefix, shape, index);
      const std::string v =
          core::IsUnaryElementwise(e.type)
              ? UnaryExpr(e, a)
              : BinaryExpr(e.type, a,
                           e.has_scalar ? Lit(e.scalar)
                                        : chain_value(e.inputs[1], chain, prefix, shape, index));
      c->L("const float ", prefix, e.output, " = ", v, ";");
    }
  };
  // Replaces float `v` (the axis op's result at `index`) by the chain's value.
  auto apply_epilogue = [&](const std::string& index, Code* c) {
    if (epilogue.empty()) return;
    c->L("const float w", op.output, " = v;");
    chain_math(epilogue, "w", out, index, c);
    c->L("v = w", g.op(ops.back()).output, ";");
  };
  const std::string par =
      absl::StrCat("#pragma omp parallel for schedule(static) num_threads(", ctx.prefix, "nt)");
  const std::string par2 = absl::StrCat(
      "#pragma omp parallel for collapse(2) schedule(static) num_threads(", ctx.prefix, "nt)");
  code->Open("{");
  code->L("// kernel ", kernel_index, " '", CommentText(kernel.name()), "': KERNEL_GENERIC ",
          CommentText(op.name), " = ", std::string(core::OpTypeName(op.type)), " ",
          core::ShapeToString(out), prologue.empty() ? "" : " (with the ops before it)",
          epilogue.empty() ? "" : " (with the ops after it)");
  if (!prologue.empty()) {
    const std::vector<int64_t>& in_shape = g.tensor(op.inputs[0]).shape;
    code->Open("auto yr_x = [&](const int64_t e) -> float {");
    chain_math(prologue, "v", in_shape, "e", code);
    code->L("return v", op.inputs[0], ";");
    code->Close("};");
  }
  // Reads tensor t at `index`; the axis op's input through the prologue.
  auto ld = [&](int t, const std::string& index) {
    if (!prologue.empty() && t == op.inputs[0]) return absl::StrCat("yr_x(", index, ")");
    return absl::StrCat("yr_ld(", ctx.Var(t), ", ", index, ")");
  };
  // [outer, D, inner] view of the op's (first) input around op.axis.
  auto axis_view = [&](const std::vector<int64_t>& shape, int64_t* outer, int64_t* d,
                       int64_t* inner) {
    *outer = Numel(Slice(shape, 0, op.axis));
    *d = shape[op.axis];
    *inner = Numel(Slice(shape, op.axis + 1, shape.size()));
  };

  if (core::IsElementwise(op.type)) {
    code->Line(par);
    code->Open(absl::StrCat("for (int64_t e = 0; e < ", Numel(out), "; ++e) {"));
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const int t = op.inputs[k];
      code->L("const float x", k, " = ",
              ld(t, OffsetExpr(out, BroadcastStrides(g.tensor(t).shape, out), "e")), ";");
    }
    std::string value;
    if (core::IsUnaryElementwise(op.type)) {
      value = UnaryExpr(op, "x0");
    } else {
      if (op.has_scalar) code->L("const float x1 = ", Lit(op.scalar), ";");
      value = BinaryExpr(op.type, "x0", "x1");
    }
    code->L("const float v = ", value, ";");
    EmitStores(dsts, "e", "v", code);
    code->Close();
  } else if (core::IsReduction(op.type)) {
    int64_t outer, d, inner;
    axis_view(g.tensor(op.inputs[0]).shape, &outer, &d, &inner);
    // Sums add float partials of a few terms into a double: a float sum of
    // thousands of terms can miss a float64 reference near zero by more than
    // the tolerance, and converting every term to double halves the vector
    // width.
    const bool max = op.type == OpType::kReduceMax;
    const std::string acc_type = max ? "float" : "double";
    const std::string init = max ? "-__builtin_inff()" : "0.0";
    const std::string scale = op.type == OpType::kReduceMean ? absl::StrCat(" / ", d, ".0") : "";
    if (inner == 1) {
      // The reduced axis is contiguous: one vector reduction per output.
      code->Line(par);
      code->Open(absl::StrCat("for (int64_t o = 0; o < ", outer, "; ++o) {"));
      EmitLaneReduction(
          max, d,
          [&](const std::string& c) { return ld(op.inputs[0], absl::StrCat("o * ", d, " + ", c)); },
          "acc", code);
      code->L("float v = (float)(acc", scale, ");");
      apply_epilogue("o", code);
      EmitStores(dsts, "o", "v", code);
      code->Close();
    } else {
      // A middle or leading axis: each task sums whole rows of up to 256
      // contiguous columns into a local accumulator, reading the input once
      // in order (one strided walk per output would touch every line d times).
      const int64_t nb = std::min<int64_t>(inner, 256);
      const int64_t chunks = (inner + nb - 1) / nb;
      code->Line(par2);
      code->L("for (int64_t o = 0; o < ", outer, "; ++o)");
      code->Open(absl::StrCat("for (int64_t chunk = 0; chunk < ", chunks, "; ++chunk) {"));
      code->L("const int64_t n0 = chunk * ", nb, ";");
      if (chunks == 1) {
        code->L("const int64_t nn = ", inner, ";");  // a constant trip count vectorizes whole
      } else {
        code->L("const int64_t nn = ", inner, " - n0 < ", nb, " ? ", inner, " - n0 : ", nb, ";");
      }
      code->L(acc_type, " acc[", nb, "];");
      code->L("for (int64_t j = 0; j < nn; ++j) acc[j] = ", init, ";");
      const std::string x = ld(op.inputs[0], "base + j");
      if (max) {
        code->Open(absl::StrCat("for (int64_t c = 0; c < ", d, "; ++c) {"));
        code->L("const int64_t base = (o * ", d, " + c) * ", inner, " + n0;");
        code->L("#pragma omp simd");
        code->L("for (int64_t j = 0; j < nn; ++j) acc[j] = yr_max(acc[j], ", x, ");");
        code->Close();
      } else {
        // Float partials over 16 rows at a time, added into the doubles.
        code->Open(absl::StrCat("for (int64_t c0 = 0; c0 < ", d, "; c0 += 16) {"));
        code->L("const int64_t c1 = c0 + 16 < ", d, " ? c0 + 16 : ", d, ";");
        code->L("float part[", nb, "];");
        code->L("for (int64_t j = 0; j < nn; ++j) part[j] = 0.0f;");
        code->Open("for (int64_t c = c0; c < c1; ++c) {");
        code->L("const int64_t base = (o * ", d, " + c) * ", inner, " + n0;");
        code->L("#pragma omp simd");
        code->L("for (int64_t j = 0; j < nn; ++j) part[j] += ", x, ";");
        code->Close();
        code->L("#pragma omp simd");
        code->L("for (int64_t j = 0; j < nn; ++j) acc[j] += part[j];");
        code->Close();
      }
      code->Open("for (int64_t j = 0; j < nn; ++j) {");
      code->L("float v = (float)(acc[j]", scale, ");");
      apply_epilogue(absl::StrCat("o * ", inner, " + n0 + j"), code);
      EmitStores(dsts, absl::StrCat("o * ", inner, " + n0 + j"), "v", code);
      code->Close();
      code->Close();
    }
  } else if (op.type == OpType::kRmsNorm || op.type == OpType::kLayerNorm ||
             op.type == OpType::kSoftmax) {
    int64_t outer, d, inner;
    axis_view(out, &outer, &d, &inner);
    const std::string e = absl::StrCat("(o * ", d, " + c) * ", inner, " + n");
    const std::string x = ld(op.inputs[0], e);
    const std::string df = absl::StrCat(d, ".0f");
    code->Line(par2);
    code->L("for (int64_t o = 0; o < ", outer, "; ++o)");
    code->Open(absl::StrCat("for (int64_t n = 0; n < ", inner, "; ++n) {"));
    std::string value;
    if (op.type == OpType::kSoftmax) {
      code->L("float mx = -__builtin_inff();");
      code->L("for (int64_t c = 0; c < ", d, "; ++c) mx = yr_max(mx, ", x, ");");
      code->L("float sum = 0.0f;");
      code->L("for (int64_t c = 0; c < ", d, "; ++c) sum += yr_expf(", x, " - mx);");
      code->L("const float inv = 1.0f / sum;");
      value = absl::StrCat("yr_expf(", x, " - mx) * inv");
    } else if (op.type == OpType::kRmsNorm) {
      code->L("float ss = 0.0f;");
      code->Open(absl::StrCat("for (int64_t c = 0; c < ", d, "; ++c) {"));
      code->L("const float v = ", x, ";");
      code->L("ss += v * v;");
      code->Close();
      code->L("const float inv = 1.0f / sqrtf(ss / ", df, " + ", Lit(op.eps), ");");
      value = absl::StrCat(x, " * inv");
    } else {
      code->L("float sum = 0.0f;");
      code->L("for (int64_t c = 0; c < ", d, "; ++c) sum += ", x, ";");
      code->L("const float mean = sum / ", df, ";");
      code->L("float var = 0.0f;");
      code->Open(absl::StrCat("for (int64_t c = 0; c < ", d, "; ++c) {"));
      code->L("const float dv = ", x, " - mean;");
      code->L("var += dv * dv;");
      code->Close();
      code->L("const float inv = 1.0f / sqrtf(var / ", df, " + ", Lit(op.eps), ");");
      value = absl::StrCat("(", x, " - mean) * inv");
    }
    code->Open(absl::StrCat("for (int64_t c = 0; c < ", d, "; ++c) {"));
    code->L("const int64_t e = ", e, ";");
    std::string v = value;
    for (size_t k = 1; k < op.inputs.size(); ++k) {
      const int t = op.inputs[k];
      const std::string p = ld(t, OffsetExpr(out, BroadcastStrides(g.tensor(t).shape, out), "e"));
      v = k == 1 ? absl::StrCat("(", v, ") * ", p) : absl::StrCat(v, " + ", p);
    }
    code->L("float v = ", v, ";");
    apply_epilogue("e", code);
    EmitStores(dsts, "e", "v", code);
    code->Close();
    code->Close();
  } else if (op.type == OpType::kConcat) {
    int64_t outer, dout, inner;
    axis_view(out, &outer, &dout, &inner);
    int64_t off = 0;
    for (int t : op.inputs) {
      const int64_t dk = g.tensor(t).shape[op.axis];
      code->Line(par2);
      code->L("for (int64_t o = 0; o < ", outer, "; ++o)");
      code->Open(absl::StrCat("for (int64_t c = 0; c < ", dk, "; ++c) {"));
      code->Open(absl::StrCat("for (int64_t n = 0; n < ", inner, "; ++n) {"));
      code->L("const float v = ", ld(t, absl::StrCat("(o * ", dk, " + c) * ", inner, " + n")), ";");
      EmitStores(dsts, absl::StrCat("(o * ", dout, " + ", off, " + c) * ", inner, " + n"), "v",
                 code);
      code->Close();
      code->Close();
      off += dk;
    }
  } else if (op.type == OpType::kSlice) {
    int64_t outer, dout, inner;
    axis_view(out, &outer, &dout, &inner);
    const int64_t din = g.tensor(op.inputs[0]).shape[op.axis];
    code->Line(par2);
    code->L("for (int64_t o = 0; o < ", outer, "; ++o)");
    code->Open(absl::StrCat("for (int64_t c = 0; c < ", dout, "; ++c) {"));
    code->Open(absl::StrCat("for (int64_t n = 0; n < ", inner, "; ++n) {"));
    code->L("const float v = ",
            ld(op.inputs[0],
               absl::StrCat("(o * ", din, " + ", op.slice_start, " + c) * ", inner, " + n")),
            ";");
    EmitStores(dsts, absl::StrCat("(o * ", dout, " + c) * ", inner, " + n"), "v", code);
    code->Close();
    code->Close();
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
    const int64_t tn = std::min<int64_t>(
        n, std::min<int64_t>(kMaxGenericTileN, s.tile_n() > 0 ? s.tile_n() : kDefaultTileN));
    const int ta = op.inputs[0];
    const int tb = op.inputs[1];
    code->Line(par);
    code->Open(absl::StrCat("for (int64_t r = 0; r < ", Numel(lead), "; ++r) {"));
    code->L("const ", ctx.ReadType(ta), "* const pa = ", ctx.Var(ta), " + ",
            OffsetExpr(lead, a_lead, "r"), ";");
    code->L("const ", ctx.ReadType(tb), "* const pb = ", ctx.Var(tb), " + ",
            OffsetExpr(lead, b_lead, "r"), ";");
    code->Open(absl::StrCat("for (int64_t n0 = 0; n0 < ", n, "; n0 += ", tn, ") {"));
    code->L("const int64_t nn = n0 + ", tn, " < ", n, " ? ", tn, " : ", n, " - n0;");
    code->L("float acc[", tn, "];");
    code->L("for (int64_t x = 0; x < nn; ++x) acc[x] = 0.0f;");
    if (!op.transpose_b) {
      code->Open(absl::StrCat("for (int64_t kk = 0; kk < ", k, "; ++kk) {"));
      code->L("const float av = yr_ld(pa, kk);");
      code->Line("#pragma omp simd");
      code->L("for (int64_t x = 0; x < nn; ++x) acc[x] += av * yr_ld(pb, kk * ", n, " + n0 + x);");
      code->Close();
    } else {
      code->Open("for (int64_t x = 0; x < nn; ++x) {");
      code->L("float dot = 0.0f;");
      code->L("for (int64_t kk = 0; kk < ", k,
              "; ++kk) dot += yr_ld(pa, kk) * yr_ld(pb, (n0 + x) * ", k, " + kk);");
      code->L("acc[x] = dot;");
      code->Close();
    }
    code->Open("for (int64_t x = 0; x < nn; ++x) {");
    EmitStores(dsts, absl::StrCat("r * ", n, " + n0 + x"), "acc[x]", code);
    code->Close();
    code->Close();
    code->Close();
  }
  code->Close();
}

}  // namespace

std::string PlanEntryName(int index) { return absl::StrCat("yirage_plan_", index); }
std::string PlanInitName(int index) { return absl::StrCat("yirage_plan_", index, "_init"); }
// A KERNEL_LIBRARY kernel: cblas_sgemm of OpenBLAS (dlopen'd by the plan's
// _init, which returns 2 without it) on float32 operands (16-bit ones
// converted first, once per plan call and tensor). OpenBLAS runs one thread
// per call (the process's setting restored after) and the plan's OpenMP
// threads each call it on a slice of rows (or of columns, when the rows are
// too few to share): two thread pools on the
// same cores (OpenMP's spinning after a parallel region, OpenBLAS's own
// threads) slow each other down by an order of magnitude. Each thread applies
// the epilogue to its slice right after its sgemm, while the slice is in cache;
// without an epilogue, sgemm writes a float32 destination directly.
void EmitLibraryMatmul(PlanContext& ctx, const KernelPlan& kernel, int kernel_index,
                       const core::LibraryMatmul& lm, Code* code) {
  const Graph& g = ctx.graph;
  const std::string sgemm = ctx.prefix + "sgemm";
  if (!ctx.blas) {
    ctx.blas = true;
    ctx.statics.L("typedef void (*", sgemm,
                  "_fn)(int, int, int, int, int, int, float, const float*, int, const float*, int, "
                  "float, float*, int);");
    ctx.statics.L("static ", sgemm, "_fn ", sgemm, " = nullptr;");
    ctx.statics.L("static void (*", sgemm, "_set_threads)(int) = nullptr;");
    ctx.statics.L("static int (*", sgemm, "_get_threads)(void) = nullptr;");
    ctx.init.Open("{");
    ctx.init.L("void* h = dlopen(\"libopenblas.so.0\", RTLD_NOW | RTLD_LOCAL);");
    ctx.init.L("if (h == nullptr) h = dlopen(\"libopenblas.so\", RTLD_NOW | RTLD_LOCAL);");
    ctx.init.L("if (h == nullptr) return 2;");
    ctx.init.L(sgemm, " = (", sgemm, "_fn)dlsym(h, \"cblas_sgemm\");");
    ctx.init.L("if (", sgemm, " == nullptr) return 2;");
    ctx.init.L(sgemm, "_set_threads = (void (*)(int))dlsym(h, \"openblas_set_num_threads\");");
    ctx.init.L(sgemm, "_get_threads = (int (*)(void))dlsym(h, \"openblas_get_num_threads\");");
    ctx.init.Close();
  }
  const int64_t a_elems = g.tensor(lm.a).num_elements();
  const int64_t b_elems = g.tensor(lm.b).num_elements();
  const int64_t d_elems = lm.batch * lm.m * lm.n;
  const std::string nt = ctx.prefix + "nt";
  code->Open("{");
  code->L("// kernel ", kernel_index, " '", CommentText(kernel.name()), "': OpenBLAS cblas_sgemm, ",
          CommentText(core::DescribeLibraryMatmul(g, lm)));
  // float32 views of A and B, shared by every library kernel of the plan.
  auto as_float = [&](int t, int64_t elems) {
    if (ctx.ReadType(t) == "float") return ctx.Var(t);
    if (auto it = ctx.float_copies.find(t); it != ctx.float_copies.end()) return it->second;
    const std::string buf = ctx.AddBuffer(absl::StrCat("f", t), elems);
    code->L("#pragma omp parallel for simd schedule(static) num_threads(", nt, ")");
    code->L("for (int64_t e = 0; e < ", elems, "; ++e) ", buf, "[e] = yr_ld(", ctx.Var(t), ", e);");
    ctx.float_copies[t] = buf;
    return buf;
  };
  const std::string a = as_float(lm.a, a_elems);
  // A 16-bit B of one batch is converted by the tasks, each its own column
  // slice, packed, right before its sgemm reads it (from cache); split by
  // rows, every task needs all of B, converted once before.
  const bool slice_b =
      ctx.ReadType(lm.b) != "float" && lm.batch == 1 && !ctx.float_copies.contains(lm.b);
  const std::string b = slice_b ? ctx.AddBuffer(absl::StrCat("k", kernel_index, "_b"), b_elems)
                                : as_float(lm.b, b_elems);
  const std::vector<std::string> dsts = ctx.Destinations(lm.out);
  const bool epilogue =
      lm.residual >= 0 || lm.bias >= 0 || lm.activation != core::LibraryActivation::kNone;
  const bool direct = !epilogue && dsts.size() == 1 &&
                      (ctx.scratch[lm.out] || g.tensor(lm.out).dtype == yirage::v1::FLOAT32);
  const std::string d =
      direct ? dsts[0] : ctx.AddBuffer(absl::StrCat("k", kernel_index, "_d"), d_elems);
  const int64_t ldb = lm.transpose_b ? lm.k : lm.n;
  // Tasks: batches, each split into `ch` slices when there are fewer batches
  // than threads; rows are split while every slice keeps 8 of them.
  code->L("const int64_t ch = ", lm.batch, " >= ", nt, " ? 1 : (", nt, " + ", lm.batch - 1, ") / ",
          lm.batch, ";");
  // Split the dim whose other operand is smaller (each task reads all of
  // the other operand): rows when M >= N, while every slice keeps 8 rows and
  // 16 columns.
  code->L("const bool by_rows = (", lm.m, " >= ", lm.n, " && ", lm.m, " >= 8 * ch) || ", lm.n,
          " < 16 * ch;");
  if (slice_b) {
    code->Open("if (by_rows) {");
    code->L("#pragma omp parallel for simd schedule(static) num_threads(", nt, ")");
    code->L("for (int64_t e = 0; e < ", b_elems, "; ++e) ", b, "[e] = yr_ld(", ctx.Var(lm.b),
            ", e);");
    code->Close();
  }
  // One OpenBLAS thread per call while our threads call it; the process's
  // setting (PyTorch's matmuls share this OpenBLAS) is restored after.
  code->L("const int blas_threads = ", sgemm, "_get_threads != nullptr ? ", sgemm,
          "_get_threads() : 0;");
  code->L("if (", sgemm, "_set_threads != nullptr && blas_threads != 1) ", sgemm,
          "_set_threads(1);");
  code->L("#pragma omp parallel for schedule(static) num_threads(", nt, ")");
  code->Open(absl::StrCat("for (int64_t task = 0; task < ", lm.batch, " * ch; ++task) {"));
  code->L("const int64_t bi = task / ch, part = task % ch;");
  code->L("const int64_t extent = by_rows ? ", lm.m, " : ", lm.n, ";");
  code->L("const int64_t lo = part * extent / ch, hi = (part + 1) * extent / ch;");
  code->L("if (hi <= lo) continue;");
  code->L("const int64_t r0 = by_rows ? lo : 0, r1 = by_rows ? hi : ", lm.m, ";");
  code->L("const int64_t c0 = by_rows ? 0 : lo, c1 = by_rows ? ", lm.n, " : hi;");
  code->L("const float* const pa = ", a, " + bi * ", lm.a_batch_stride, "LL + r0 * ", lm.k, ";");
  code->L("float* const pd = ", d, " + bi * ", lm.m * lm.n, "LL + r0 * ", lm.n, " + c0;");
  const std::string trans = lm.transpose_b ? "112" : "111";
  auto call = [&](const std::string& cols, const std::string& pb, const std::string& ldb_expr,
                  const std::string& pd) {
    code->L(sgemm, "(101, 111, ", trans, ", (int)(r1 - r0), (int)(", cols, "), ", lm.k, ", ",
            Lit(lm.alpha), ", pa, ", lm.k, ", ", pb, ", ", ldb_expr, ", 0.0f, ", pd, ", ", lm.n,
            ");");
  };
  if (slice_b) {
    // Split by columns, the task converts its own columns into its part of
    // the buffer (offset c0 * K) right before its sgemm reads them. (Panels
    // of ~256 KiB, each converted then multiplied, ran 3x slower at M = 4:
    // OpenBLAS repacks per call.)
    code->L("float* const pb = ", b, " + c0 * ", lm.k, ";");
    code->Open("if (by_rows) {");
    call("c1 - c0", "pb", std::to_string(lm.transpose_b ? lm.k : lm.n), "pd");
    code->Close();
    code->Open("else {");
    if (lm.transpose_b) {
      // B is [N, K]: the slice is rows c0..c1, contiguous.
      code->L("#pragma omp simd");
      code->L("for (int64_t e = 0; e < (c1 - c0) * ", lm.k, "; ++e) pb[e] = yr_ld(", ctx.Var(lm.b),
              ", c0 * ", lm.k, " + e);");
      call("c1 - c0", "pb", std::to_string(lm.k), "pd");
    } else {
      // B is [K, N]: columns c0..c1, packed K x (c1 - c0).
      code->Open(absl::StrCat("for (int64_t kk = 0; kk < ", lm.k, "; ++kk) {"));
      code->L("#pragma omp simd");
      code->L("for (int64_t j = 0; j < c1 - c0; ++j) pb[kk * (c1 - c0) + j] = yr_ld(",
              ctx.Var(lm.b), ", kk * ", lm.n, " + c0 + j);");
      code->Close();
      call("c1 - c0", "pb", "(int)(c1 - c0)", "pd");
    }
    code->Close();
  } else {
    code->L("const float* const pb = ", b, " + bi * ", lm.b_batch_stride, "LL + c0 * ",
            lm.transpose_b ? lm.k : 1, ";");
    call("c1 - c0", "pb", std::to_string(ldb), "pd");
  }
  if (!direct) {
    std::string value = absl::StrCat(d, "[e]");
    if (lm.residual >= 0)
      value = absl::StrCat("(", value, " + yr_ld(", ctx.Var(lm.residual), ", e))");
    if (lm.bias >= 0) value = absl::StrCat("(", value, " + yr_ld(", ctx.Var(lm.bias), ", c))");
    if (lm.activation != core::LibraryActivation::kNone) {
      core::OpInfo act;
      act.type = lm.activation == core::LibraryActivation::kRelu ? OpType::kRelu : OpType::kGelu;
      act.gelu_tanh = true;
      value = UnaryExpr(act, value);
    }
    code->Open("for (int64_t r = r0; r < r1; ++r) {");
    code->L("const int64_t row = (bi * ", lm.m, " + r) * ", lm.n, ";");
    code->L("#pragma omp simd");
    code->Open("for (int64_t c = c0; c < c1; ++c) {");
    code->L("const int64_t e = row + c;");
    code->L("const float v = ", value, ";");
    EmitStores(dsts, "e", "v", code);
    code->Close();
    code->Close();
  }
  code->Close();
  code->L("if (", sgemm, "_set_threads != nullptr && blas_threads > 1) ", sgemm,
          "_set_threads(blas_threads);");
  code->Close();
}

std::string PlanFiniName(int index) { return absl::StrCat("yirage_plan_", index, "_fini"); }

std::string CpuCodegen::Prelude() {
  // backends/cpu/kernel_prelude.h, embedded at build time (cmake/embed_text.cmake).
  return
#include "cpu_prelude.inc"
      ;
}

namespace {

// GeneratePlan against `g`: the job's graph, or the plan's own rewritten graph.
absl::StatusOr<std::string> GeneratePlanFor(const Graph& g, const yirage::v1::Plan& plan,
                                            int index) {
  const int num_tensors = g.num_tensors();
  auto kernel_label = [&](int k) {
    return absl::StrCat("kernel ", k, " ('", plan.kernels(k).name(), "')");
  };
  absl::StatusOr<core::ResolvedPlan> resolved = core::ResolvePlan(g, plan);
  if (!resolved.ok()) return resolved.status();
  const std::vector<std::vector<int>>& kernel_ops = resolved->kernel_ops;
  const std::vector<std::vector<int>>& kernel_outputs = resolved->kernel_outputs;
  const std::vector<bool>& read_by_kernel = resolved->read_by_kernel;

  PlanContext ctx{g, absl::StrCat("yr_p", index, "_"), {}, {}, {}, {}, {}, false, {}};
  ctx.scratch.assign(num_tensors, false);
  ctx.out_position.assign(num_tensors, {});
  for (int t = g.num_inputs(); t < num_tensors; ++t) ctx.scratch[t] = read_by_kernel[t];
  for (size_t slot = 0; slot < g.outputs().size(); ++slot) {
    ctx.out_position[g.outputs()[slot]].push_back(static_cast<int>(slot));
  }
  ctx.statics.L("static int ", ctx.prefix, "ready = 0;");
  ctx.statics.L("static int ", ctx.prefix, "nt = 1;");
  ctx.init.L(ctx.prefix, "nt = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;");
  for (int t = g.num_inputs(); t < num_tensors; ++t) {
    if (ctx.scratch[t]) ctx.AddBuffer(absl::StrCat("s", t), g.tensor(t).num_elements());
  }

  Code body;
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const KernelPlan& kernel = plan.kernels(k);
    if (kernel.kind() == yirage::v1::KERNEL_GENERIC) {
      EmitGenericKernel(ctx, kernel, k, kernel_ops[k], &body);
      continue;
    }
    if (kernel.kind() == yirage::v1::KERNEL_LIBRARY) {
      absl::StatusOr<core::LibraryMatmul> lm = core::MatchLibraryMatmul(g, kernel_ops[k]);
      if (!lm.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(kernel_label(k), ": ", lm.status().message()));
      }
      if (kernel.schedule().library().algorithm() != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            kernel_label(k), ": schedule.library.algorithm ",
            kernel.schedule().library().algorithm(),
            " asks for another library algorithm; OpenBLAS's cblas_sgemm has one (algorithm 0)"));
      }
      EmitLibraryMatmul(ctx, kernel, k, *lm, &body);
      continue;
    }
    if (const yirage::v1::FamilyPattern family = core::ScheduleFamily(kernel.schedule());
        family != yirage::v1::FAMILY_PATTERN_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat(
          kernel_label(k), ": schedule.", core::PatternName(family),
          " names a kernel family; the CPU backend has none (its describe call lists none)"));
    }
    absl::StatusOr<core::RowGroupInfo> info = core::AnalyzeRowGroup(g, kernel_ops[k]);
    if (!info.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kernel_label(k), ": ", info.status().message()));
    }
    const bool cols = kernel.schedule().parallel() == yirage::v1::PARALLEL_COLS;
    const int64_t rows = info->num_rows;
    const int64_t br = cols ? rows
                            : std::min<int64_t>(rows, kernel.schedule().block_rows() > 0
                                                          ? kernel.schedule().block_rows()
                                                          : kDefaultBlockRows);
    int64_t arena = 0;
    for (int64_t w : info->row_width) arena += (br * w + 15) / 16 * 16;
    // Block buffers: one arena (COLS) or one per thread (ROWS).
    const std::string buf = absl::StrCat(ctx.prefix, "k", k);
    ctx.statics.L("static float* ", buf, " = nullptr;");
    ctx.init.L(buf, " = yr_alloc_floats(",
               cols ? absl::StrCat(arena) : absl::StrCat("(int64_t)", ctx.prefix, "nt * ", arena),
               ");");
    ctx.init.L("if (", buf, " == nullptr) return 1;");
    ctx.fini.L("yr_free(", buf, ");");
    ctx.fini.L(buf, " = nullptr;");
    RowKernelEmitter emitter(ctx, kernel, k, kernel_ops[k], *std::move(info));
    if (absl::Status s = emitter.Emit(kernel_outputs[k], &body); !s.ok()) return s;
  }

  Code out;
  out.L("// ---- plan ", index, ": ", CommentText(plan.description()), " ----");
  out.Line(ctx.statics.str());
  out.Open(absl::StrCat("extern \"C\" void ", PlanFiniName(index), "(void) {"));
  out.L(ctx.prefix, "ready = 0;");
  out.Line(ctx.fini.str());
  out.Close();
  out.Open(absl::StrCat("extern \"C\" int ", PlanInitName(index), "(void) {"));
  out.L(PlanFiniName(index), "();");
  out.Line(ctx.init.str());
  out.L(ctx.prefix, "ready = 1;");
  out.L("return 0;");
  out.Close();
  out.Open(absl::StrCat("extern \"C\" int ", PlanEntryName(index),
                        "(const void* const* inputs, void* const* outputs) {"));
  out.L("if (!", ctx.prefix, "ready) return 1;");
  for (int t = 0; t < g.num_inputs(); ++t) {
    out.L("const ", ctx.ReadType(t), "* const ", ctx.Var(t), " = (const ", ctx.ReadType(t),
          "*)inputs[", t, "];  // ", CommentText(g.tensor(t).name));
  }
  for (int t = g.num_inputs(); t < num_tensors; ++t) {
    if (ctx.scratch[t]) {
      out.L("float* const ", ctx.Var(t), " = ", ctx.prefix, "s", t, ";  // ",
            CommentText(g.tensor(t).name));
    }
  }
  for (size_t slot = 0; slot < g.outputs().size(); ++slot) {
    const int t = g.outputs()[slot];
    const std::string type = CType(g.tensor(t).dtype);
    out.L(type, "* const o", slot, " = (", type, "*)outputs[", slot, "];  // ",
          CommentText(g.tensor(t).name));
    if (g.tensor(t).producer < 0) {  // a graph input returned as is
      out.L("std::memcpy(o", slot, ", inputs[", t, "], ",
            g.tensor(t).num_elements() * core::DTypeSize(g.tensor(t).dtype), ");");
    }
  }
  out.Line(body.str());
  out.L("return 0;");
  out.Close();
  return out.str();
}

}  // namespace

absl::StatusOr<std::string> CpuCodegen::GeneratePlan(const yirage::v1::Plan& plan,
                                                     int index) const {
  if (!plan.has_graph()) return GeneratePlanFor(graph_, plan, index);
  // A rewritten plan: its kernels name the ops of its own graph, which must
  // keep the job graph's inputs and outputs so the entry point's buffers match.
  absl::StatusOr<Graph> own = Graph::FromProto(plan.graph());
  if (!own.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.graph is invalid: ", own.status().message()));
  }
  if (absl::Status s = core::CheckSameSignature(graph_, *own); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.graph does not keep the job graph's inputs and outputs: ", s.message()));
  }
  return GeneratePlanFor(*own, plan, index);
}

}  // namespace yirage::backends::cpu
