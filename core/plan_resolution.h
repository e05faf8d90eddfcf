// A plan's kernels resolved against a graph: the partition of the ops and
// the data flow between kernels, checked, as the code generators need them.
#ifndef YIRAGE_CORE_PLAN_RESOLUTION_H_
#define YIRAGE_CORE_PLAN_RESOLUTION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/graph.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::core {

struct ResolvedPlan {
  std::vector<int> op_kernel;                    // per op: the kernel holding it
  std::vector<std::vector<int>> kernel_ops;      // per kernel: its op ids, in plan order
  std::vector<std::vector<int>> kernel_outputs;  // per kernel: the tensors it writes
  std::vector<bool> read_by_kernel;              // per tensor: a kernel reads it from memory
};

// InvalidArgument naming the kernel ("kernel K ('name')"), op or tensor when
// a kernel's kind, ops, inputs or outputs do not fit `graph`: unknown names,
// an op in two kernels or in none, an input that is neither a graph input
// nor an earlier kernel's output, an op reading a tensor its kernel does not
// list, a graph output no kernel writes.
absl::StatusOr<ResolvedPlan> ResolvePlan(const Graph& graph, const yirage::v1::Plan& plan);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_PLAN_RESOLUTION_H_
