// The op table: what each op of the graph format is, in one place. Its name,
// its kind (which decides its shape rule in core/graph.cc and the code paths
// of the reference interpreter, the fingerprint and the backends' code
// generators), the attributes it accepts, and the flops the cost model
// charges for it. A new op of an existing kind is a row here, its
// evaluation in core/tensor.cc (reference) and core/fingerprint.cc, and its
// expression in the code generators that emit it.
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

struct OpSpec {
  OpType type;
  std::string_view name;  // in the graph format ("matmul")
  OpKind kind;
  std::array<std::string_view, 3> attrs;  // accepted attributes ("" past the last)
  FlopBasis flop_basis;
  double flops_per_element;
};

// Every op, in OpType order.
absl::Span<const OpSpec> AllOpSpecs();

// The row of `type`. REQUIRES: a valid OpType.
const OpSpec& SpecOf(OpType type);

// The row named `name`, or nullptr.
const OpSpec* FindOpSpec(std::string_view name);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_OP_TABLE_H_
