// KERNEL_GENERIC kernels of several ops: one reduction, norm or softmax over
// an axis row groups do not take (the first or a middle axis), with chains of
// elementwise ops before it (a prologue, computing its input) and after it
// (an epilogue, on its result). The kernel computes the prologue's value of
// each element as it reads it and the epilogue's as it stores, so that no
// elementwise result reaches memory. Backends that run such kernels say so
// (BackendKernels.generic_prologue); the others take one op a
// KERNEL_GENERIC kernel.
//
// Rules, for the ops in topological order:
//  1. One op (the "axis op") is a reduce_*, rms_norm, layer_norm or softmax
//     over another axis than the last; every other op is unary or binary
//     elementwise. An op before it has the
//     shape of its input 0, an op after it the shape of its result.
//  2. Every result but the last op's is read only by ops of the chain and is
//     not a graph output. With a prologue, the axis op's input 0 is a
//     prologue result; its other inputs (a norm's weight and bias) are not.
//     An op after the axis op reads the axis op's result or one after it,
//     and no prologue result.
//  3. Operands from outside the chain broadcast to their op's shape (rule
//     1's shapes make sure of it); kernels index them with broadcast strides.
#ifndef YIRAGE_CORE_GENERIC_CHAIN_H_
#define YIRAGE_CORE_GENERIC_CHAIN_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/graph.h"

namespace yirage::core {

struct GenericChain {
  std::vector<int> prologue;  // op ids, in order
  int axis_op = -1;
  std::vector<int> epilogue;  // op ids, in order
};

// REQUIRES: op_ids are valid op indices in topological order.
// Returns InvalidArgument naming the op and the rule it breaks when the ops
// are not a chain (one op alone is not: it needs no chain).
absl::StatusOr<GenericChain> AnalyzeGenericChain(const Graph& graph, absl::Span<const int> op_ids);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_GENERIC_CHAIN_H_
