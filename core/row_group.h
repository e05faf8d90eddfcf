// Legality and layout of KERNEL_ROW groups (see plan.proto).
//
// A row group is a set of ops that share one row space: the "lead dims" (all
// dims but the last). The kernel walks blocks of rows and keeps every op's
// output for the block in a buffer of [block_rows, row_width] floats.
//
// Rules, for the group's ops in topological order:
//  1. Each op's lead dims equal the group's. For reduce_* over the last axis
//     (keepdim or not) the lead dims are the input's dims but the last and the
//     row width is 1; for every other op they are out_shape[:-1] and the row
//     width is out_shape[-1]. A rank-1 output has lead dims [] (one row).
//  2. Allowed ops: elementwise; reduce_*, rms_norm, layer_norm, softmax,
//     concat and slice over the last axis; matmul.
//  3. An operand produced inside the group ("in-group") must have shape
//     [lead..., w] with w equal to the consumer's row width or 1 (broadcast
//     along the row). A keepdim=false reduction therefore has no in-group
//     consumer. Matmul: an in-group A must be [lead..., K]; B must never be
//     in-group (it is read from memory, whole, by every row block).
//  4. Operands from outside the group (kernel inputs) may have any shape that
//     broadcasts against the consumer's output; kernels index them with
//     broadcast strides.
//  5. After the first op, an elementwise op whose output has the lead dims'
//     shape (it reads a keepdim=false reduction) is a per-row op of row
//     width 1: its in-group operands must have the lead dims' shape too, and
//     its kernel inputs broadcast against the lead dims (RowSpaceShape gives
//     them a last dim of 1). A kernel input read by a per-row op and by any
//     other op of the group has two meanings and is refused.
#ifndef YIRAGE_CORE_ROW_GROUP_H_
#define YIRAGE_CORE_ROW_GROUP_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/graph.h"

namespace yirage::core {

struct RowGroupInfo {
  std::vector<int64_t> lead_dims;
  int64_t num_rows = 1;            // product of lead_dims
  std::vector<int64_t> row_width;  // per op, same order as the span given
  // Per op, per input: true if the operand is produced inside the group.
  std::vector<std::vector<bool>> in_group;
  // Per op: whether it is a per-row op (rule 5).
  std::vector<bool> per_row;
  // Kernel inputs that per-row ops read, sorted.
  std::vector<int> per_row_inputs;
};

// The shape of kernel input `t` in the row space [lead..., w] of the ops
// that read it: its own, or with a last dim of 1 where per-row ops read it
// (rule 5), so that BroadcastStrides against [lead..., 1] indexes it by row.
std::vector<int64_t> RowSpaceShape(const Graph& graph, const RowGroupInfo& info, int t);

// REQUIRES: op_ids are valid op indices in topological order.
// Returns InvalidArgument naming the op and the rule it breaks when illegal.
absl::StatusOr<RowGroupInfo> AnalyzeRowGroup(const Graph& graph, absl::Span<const int> op_ids);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_ROW_GROUP_H_
