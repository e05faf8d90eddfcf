// KERNEL_GENERIC kernels of several ops: a chain of elementwise ops that
// computes the input of one reduction, norm or softmax over an axis row
// groups do not take (the first or a middle axis). The kernel computes the
// chain's value of each element as it reads it (a prologue), so that the
// elementwise results never reach memory. Backends that run such kernels
// say so (BackendKernels.generic_prologue); the others take one op a
// KERNEL_GENERIC kernel.
//
// Rules, for the ops in topological order:
//  1. The last op (the "axis op") is a reduce_*, rms_norm, layer_norm or
//     softmax; every other op (the prologue, at least one) is unary or
//     binary elementwise, and its result has the shape of the axis op's
//     input 0.
//  2. Every prologue result is read only by ops of the chain and is not a
//     graph output; the axis op's input 0 is a prologue result, its other
//     inputs (a norm's weight and bias) are not.
//  3. Operands from outside the chain broadcast to that shape (rule 1's
//     shapes make sure of it); kernels index them with broadcast strides.
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
};

// REQUIRES: op_ids are valid op indices in topological order.
// Returns InvalidArgument naming the op and the rule it breaks when the ops
// are not a chain (one op alone is not: it needs no chain).
absl::StatusOr<GenericChain> AnalyzeGenericChain(const Graph& graph, absl::Span<const int> op_ids);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_GENERIC_CHAIN_H_
