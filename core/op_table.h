// The op table: what each op of the graph format is, in one place. Its name,
// its kind (which decides its shape rule in core/graph.cc and the code paths
// of the reference interpreter, the fingerprint and the backends' code
// generators), how many inputs it takes, the attributes it accepts, the
// flops the cost model charges for it, and, for elementwise ops, the float64
// value the reference computes for one element. A new elementwise op is a
// row here and its expression in the code generators that emit it; the
// fingerprint (core/fingerprint.cc) treats an op it has no field rule for
// as an uninterpreted function of its inputs, which only proves graphs that
// apply it to equal operands equal (sound; a field rule there proves more).
#ifndef YIRAGE_CORE_OP_TABLE_H_
#define YIRAGE_CORE_OP_TABLE_H_

#include <array>
#include <string_view>

#include "absl/types/span.h"
#include "core/graph.h"

namespace yirage::core {

enum class OpKind {
  kMatmul,     // [.., M, K] @ [.., K, N] (B transposed with transpose_b), batch dims broadcast
  kBinary,     // two inputs broadcast NumPy-style, or one input and attrs.scalar
  kUnary,      // one input, same shape
  kReduction,  // over attrs.axis, kept as size 1 with keepdim
  kNorm,       // rms_norm / layer_norm over attrs.axis, optional weight (and bias)
  kSoftmax,    // over attrs.axis
  kConcat,     // inputs joined along attrs.axis
  kSlice,      // [start, end) of attrs.axis
};

// What the cost model counts as the op's floating-point work.
enum class FlopBasis {
  kNone,            // data movement only (concat, slice)
  kPerOutput,       // flops_per_element for each output element
  kPerInput,        // for each element of the (first) input: reductions
  kMatmulMultiply,  // 2 * K per output element
};

// The reference's float64 value of one element of an elementwise op: x (and
// y, the second input's element or attrs.scalar, for binary ops); `tanh`
// is gelu's approximate = "tanh". NaN in gives NaN out, as the kernels do.
using ElementFn = double (*)(double x, double y, bool tanh);

// Inputs past the last of concat.
inline constexpr int kAnyInputs = 1 << 30;

struct OpSpec {
  OpType type;
  std::string_view name;  // in the graph format ("matmul")
  OpKind kind;
  int min_inputs, max_inputs;             // binary ops: 2, or 1 with attrs.scalar
  std::array<std::string_view, 3> attrs;  // accepted attributes ("" past the last)
  FlopBasis flop_basis;
  double flops_per_element;
  ElementFn element = nullptr;  // unary and binary ops; nullptr for the rest
};

// Every op, in OpType order.
absl::Span<const OpSpec> AllOpSpecs();

// The row of `type`. REQUIRES: a valid OpType.
const OpSpec& SpecOf(OpType type);

// The row named `name`, or nullptr.
const OpSpec* FindOpSpec(std::string_view name);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_OP_TABLE_H_
