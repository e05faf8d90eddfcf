// What the CUDA backend's kernel emitters share while generating one plan:
// the plan's buffers and how each tensor is read and written (PlanContext),
// C types, float literals and unary expressions of the device code. Internal
// to the backend (cuda_codegen.cc, cuda_row_kernel.cc, cuda_generic_kernel.cc).
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_PLAN_CONTEXT_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_PLAN_CONTEXT_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/code_writer.h"
#include "backends/codegen_util.h"
#include "backends/cuda/cuda_codegen.h"
#include "core/graph.h"
#include "core/row_group.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::backends::cuda {

inline constexpr int kDefaultBlockRows = 8;
inline constexpr int kMaxBlockRows = 64;
// Row groups (without a matmul) whose rows, and the rows their reductions,
// norms and softmax read, are at most kNarrowRowWidth wide take up to
// kMaxNarrowBlockRows rows a block: at 256 threads a thread a row, where
// 64 rows a block give each row 4 threads that combine through shuffles.
inline constexpr int64_t kNarrowRowWidth = 16;
inline constexpr int kMaxNarrowBlockRows = 256;
inline constexpr int kDefaultTileN = 128;
inline constexpr int kGenericThreads = 256;
inline constexpr int kMaxAccumulators = 64;  // per thread in SIMT matmul tiles
inline constexpr int kTcChunkK = 32;         // K rows of B per pipeline stage (tensor-core path)

using Code = ::yirage::backends::CodeWriter;

inline std::string CType(yirage::v1::DType dtype) {
  switch (dtype) {
    case yirage::v1::FLOAT16:
      return "__half";
    case yirage::v1::BFLOAT16:
      return "__nv_bfloat16";
    default:
      return "float";
  }
}

inline bool Is16Bit(yirage::v1::DType dtype) { return ::yirage::backends::Is16BitFloat(dtype); }

inline std::string Lit(double value) { return CudaFloatLiteral(value); }

inline int FloorPow2(int64_t v) {
  int p = 1;
  while (2 * static_cast<int64_t>(p) <= v) p *= 2;
  return p;
}

// `fast`: the op's value is rounded to 16 bits, so exponentials and
// divisions may use the hardware approximations (a few float32 ulps, far
// below a 16-bit ulp).
inline std::string UnaryExpr(const core::OpInfo& op, const std::string& x, bool fast = false) {
  switch (op.type) {
    case core::OpType::kNeg:
      return absl::StrCat("(-", x, ")");
    case core::OpType::kExp:
      return absl::StrCat(fast ? "__expf(" : "expf(", x, ")");
    case core::OpType::kLog:
      return absl::StrCat("logf(", x, ")");
    case core::OpType::kSqrt:
      return absl::StrCat("sqrtf(", x, ")");
    case core::OpType::kRsqrt:
      return absl::StrCat("(1.0f / sqrtf(", x, "))");
    case core::OpType::kSquare:
      return absl::StrCat("(", x, " * ", x, ")");
    case core::OpType::kAbs:
      return absl::StrCat("fabsf(", x, ")");
    case core::OpType::kRelu:
      return absl::StrCat("yr_relu(", x, ")");
    case core::OpType::kSigmoid:
      if (fast) return absl::StrCat("__fdividef(1.0f, 1.0f + __expf(-", x, "))");
      return absl::StrCat("(1.0f / (1.0f + expf(-", x, ")))");
    case core::OpType::kTanh:
      return absl::StrCat("tanhf(", x, ")");
    case core::OpType::kSilu:
      return absl::StrCat(fast ? "yr_silu_fast(" : "yr_silu(", x, ")");
    case core::OpType::kGelu:
      if (op.gelu_tanh) return absl::StrCat(fast ? "yr_gelu_tanh_fast(" : "yr_gelu_tanh(", x, ")");
      return absl::StrCat("yr_gelu(", x, ")");
    default:
      return "";
  }
}

inline bool IsRowWise(core::OpType t) {
  return t == core::OpType::kRmsNorm || t == core::OpType::kLayerNorm ||
         t == core::OpType::kSoftmax || core::IsReduction(t) || t == core::OpType::kConcat ||
         t == core::OpType::kSlice;
}

// Per-plan state shared by the kernel emitters.
struct PlanContext {
  const core::Graph& graph;
  const CudaTarget& target;
  int plan_index;
  int num_outputs;
  std::vector<int> scratch_buffer;             // per tensor: plan buffer index or -1
  std::vector<std::vector<int>> out_position;  // per tensor: graph output slots
  PlanCode* code;
  // Per tensor: passed between kernels in its own dtype rather than float32
  // (what library calls read and write). Such a tensor that is also a graph
  // output is read back from the output, with no plan buffer.
  std::vector<bool> native;

  int AddBuffer(int64_t bytes, bool zero, const std::string& what) {
    code->buffers.push_back(PlanBuffer{std::max<int64_t>(bytes, 4), zero, what});
    return static_cast<int>(code->buffers.size()) - 1;
  }
  int PlanBufferId(int b) const { return graph.num_inputs() + num_outputs + b; }
  std::string Var(int t) const { return absl::StrCat("t", t); }
  std::string ReadType(int t) const {
    return graph.tensor(t).producer < 0 || native[t] ? CType(graph.tensor(t).dtype) : "float";
  }
  // The C type of tensor t's plan buffer.
  std::string ScratchType(int t) const {
    return native[t] ? CType(graph.tensor(t).dtype) : "float";
  }
  // The buffer id a kernel reads tensor t from.
  int ReadArg(int t) const {
    if (graph.tensor(t).producer < 0) return t;
    if (scratch_buffer[t] >= 0) return PlanBufferId(scratch_buffer[t]);
    return graph.num_inputs() + out_position[t].front();  // a native graph output
  }
  // Adds the parameter reading tensor `t` to `params`/`args`.
  void AddReadParam(int t, std::vector<std::string>* params, std::vector<int>* args) const {
    params->push_back(absl::StrCat("const ", ReadType(t), "* __restrict__ ", Var(t)));
    args->push_back(ReadArg(t));
  }
  // Adds the parameters writing tensor `t`; returns the destination variables.
  std::vector<std::string> AddWriteParams(int t, std::vector<std::string>* params,
                                          std::vector<int>* args) const {
    std::vector<std::string> dsts;
    if (scratch_buffer[t] >= 0) {
      dsts.push_back(absl::StrCat("s", t));
      params->push_back(absl::StrCat(ScratchType(t), "* __restrict__ s", t));
      args->push_back(PlanBufferId(scratch_buffer[t]));
    }
    for (int slot : out_position[t]) {
      dsts.push_back(absl::StrCat("o", slot));
      params->push_back(absl::StrCat(CType(graph.tensor(t).dtype), "* __restrict__ o", slot));
      args->push_back(graph.num_inputs() + slot);
    }
    return dsts;
  }
};

inline void EmitStores(const std::vector<std::string>& dsts, const std::string& index,
                       const std::string& value, Code* code) {
  for (const std::string& d : dsts) code->L("yr_st(", d, ", ", index, ", ", value, ");");
}

inline std::string FaultLine() {
  return "if (blockIdx.x == 0 && threadIdx.x == 0) *(volatile int*)(0) = 1;  // injected fault";
}

// ---------------------------------------------------------------------------
// KERNEL_ROW
// ---------------------------------------------------------------------------

// Emits the KERNEL_ROW kernel of `ops` (a legal row group: `info`) that
// writes `outputs` (cuda_row_kernel.cc).
absl::Status EmitRowKernel(PlanContext& ctx, const yirage::v1::KernelPlan& kernel, int kernel_index,
                           const std::vector<int>& ops, core::RowGroupInfo info,
                           const std::vector<int>& outputs, bool inject_fault, Code* code);

// Emits the KERNEL_GENERIC kernel of `ops` (one op, or a chain of
// elementwise ops before an axis op: core/generic_chain.h): a column
// reduction where the axis op is one over a middle or the first axis, lanes
// along the axis for the other axis ops, else plain loops over the op's
// output (cuda_generic_kernel.cc).
void EmitGenericKernel(PlanContext& ctx, const yirage::v1::KernelPlan& kernel, int kernel_index,
                       const std::vector<int>& ops, bool inject_fault, Code* code);

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_PLAN_CONTEXT_H_
