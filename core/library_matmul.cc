#include "core/library_matmul.h"

#include "absl/strings/str_cat.h"

namespace yirage::core {
namespace {

int64_t Product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

absl::Status NotLibrary(const Graph& graph, int op, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("op '", graph.op(op).name, "' (",
                                                 std::string(OpTypeName(graph.op(op).type)),
                                                 ") does not fit a library matmul: ", why));
}

// A vector over the last dim of `shape`: every other dim 1.
bool IsColumnVector(const std::vector<int64_t>& v, int64_t n) {
  if (v.empty() || v.back() != n) return false;
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    if (v[i] != 1) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<LibraryMatmul> MatchLibraryMatmul(const Graph& graph, absl::Span<const int> ops) {
  if (ops.empty()) return absl::InvalidArgumentError("a library matmul needs at least one op");
  const OpInfo& mm = graph.op(ops[0]);
  if (mm.type != OpType::kMatmul) return NotLibrary(graph, ops[0], "the first op must be a matmul");
  LibraryMatmul lm;
  lm.ops.assign(ops.begin(), ops.end());
  lm.a = mm.inputs[0];
  lm.b = mm.inputs[1];
  lm.transpose_b = mm.transpose_b;
  const std::vector<int64_t>& as = graph.tensor(lm.a).shape;
  const std::vector<int64_t>& bs = graph.tensor(lm.b).shape;
  const std::vector<int64_t>& os = graph.tensor(mm.output).shape;
  const int64_t m = as[as.size() - 2], k = as.back(), n = os.back();
  const int64_t a_batch = Product(as, 0, as.size() - 2);
  const int64_t b_batch = Product(bs, 0, bs.size() - 2);
  const int64_t o_batch = Product(os, 0, os.size() - 2);
  lm.k = k;
  lm.n = n;
  // B shared by A's innermost lead dims (or equal, or absent): those fold
  // into m.
  const std::optional<FoldedBatch> folded =
      a_batch == o_batch ? FoldSharedLeadDims(as, bs) : std::nullopt;
  if (folded.has_value()) {
    lm.batch = folded->batch;
    lm.m = folded->m;
    if (lm.batch > 1) {
      lm.a_batch_stride = lm.m * k;
      lm.b_batch_stride = k * n;
    }
  } else if (a_batch == 1 && b_batch == o_batch) {
    lm.batch = o_batch;
    lm.m = m;
    lm.b_batch_stride = k * n;
  } else {
    return NotLibrary(graph, ops[0],
                      absl::StrCat("batch dims ", ShapeToString(as), " x ", ShapeToString(bs),
                                   " are neither equal nor absent on one side, nor B's 1 or "
                                   "absent in A's innermost ones"));
  }

  // The epilogue, in the library's order: alpha, C, bias, activation.
  enum Stage { kAlpha, kResidual, kBias, kActivation };
  int stage = kAlpha;
  int prev = mm.output;
  for (size_t i = 1; i < ops.size(); ++i) {
    const OpInfo& op = graph.op(ops[i]);
    const TensorInfo& pt = graph.tensor(prev);
    if (pt.is_graph_output || pt.consumers.size() != 1 || pt.consumers[0] != ops[i]) {
      return NotLibrary(graph, ops[i],
                        absl::StrCat("'", pt.name, "' is read outside the epilogue chain"));
    }
    if (graph.tensor(op.output).shape != os) {
      return NotLibrary(graph, ops[i], "the epilogue must keep the matmul's shape");
    }
    const bool scalar = op.has_scalar && op.inputs.size() == 1;
    if ((op.type == OpType::kMul || op.type == OpType::kDiv) && scalar && stage <= kAlpha &&
        op.scalar != 0) {
      lm.alpha = op.type == OpType::kMul ? lm.alpha * op.scalar : lm.alpha / op.scalar;
    } else if (op.type == OpType::kAdd && !op.has_scalar && op.inputs.size() == 2) {
      const int other = op.inputs[0] == prev ? op.inputs[1] : op.inputs[0];
      if (other == prev || graph.tensor(other).producer >= 0) {
        return NotLibrary(graph, ops[i], "the added tensor must be a graph input");
      }
      const std::vector<int64_t>& s = graph.tensor(other).shape;
      if (s == os && stage < kResidual) {
        lm.residual = other;
        stage = kResidual;
      } else if (IsColumnVector(s, n) && stage < kBias) {
        lm.bias = other;
        stage = kBias;
      } else {
        return NotLibrary(graph, ops[i],
                          absl::StrCat("an add of ", ShapeToString(s),
                                       " is neither a residual of the output's shape nor a bias "
                                       "over its columns (or comes out of order)"));
      }
    } else if ((op.type == OpType::kRelu || (op.type == OpType::kGelu && op.gelu_tanh)) &&
               stage < kActivation) {
      lm.activation =
          op.type == OpType::kRelu ? LibraryActivation::kRelu : LibraryActivation::kGeluTanh;
      stage = kActivation;
    } else {
      return NotLibrary(graph, ops[i],
                        "the epilogue takes, in order: a scalar scale, a residual add, a bias "
                        "add, relu or tanh gelu");
    }
    prev = op.output;
  }
  lm.out = prev;
  return lm;
}

std::string DescribeLibraryMatmul(const Graph& graph, const LibraryMatmul& lm) {
  std::string text = absl::StrCat(lm.batch > 1 ? absl::StrCat(lm.batch, "x ") : "", "matmul ", lm.m,
                                  "x", lm.n, "x", lm.k, lm.transpose_b ? " (B^T)" : "");
  if (lm.alpha != 1.0) absl::StrAppend(&text, " * ", lm.alpha);
  if (lm.residual >= 0) absl::StrAppend(&text, " + ", graph.tensor(lm.residual).name);
  if (lm.bias >= 0) absl::StrAppend(&text, " + bias ", graph.tensor(lm.bias).name);
  if (lm.activation == LibraryActivation::kRelu) absl::StrAppend(&text, ", relu");
  if (lm.activation == LibraryActivation::kGeluTanh) absl::StrAppend(&text, ", gelu(tanh)");
  return text;
}

}  // namespace yirage::core
